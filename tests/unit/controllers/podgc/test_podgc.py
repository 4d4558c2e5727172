"""The pod garbage collector's pass against the testing kit's fake client, with upstream gc_controller_test.go's
cases: TestGCTerminated, TestGCOrphaned (quarantine, node found by the GET, patches),
TestGCUnscheduledTerminating and TestGCTerminating (out-of-service nodes)."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import msgspec
import pytest
from kcm_controllers.podgc import controller as gc_controller
from kcm_controllers.podgc import selection
from kcm_shared.client import kubeclient
from kcm_shared.testing import caches, clock, fakeclient

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
NOW = dt.datetime(2026, 11, 24, 12, 0, tzinfo=dt.UTC)
QUARANTINE = 40.0
OUT_OF_SERVICE = {"key": selection.OUT_OF_SERVICE_TAINT, "effect": "NoExecute"}


def _stamp(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(
    name: str, phase: str, node: str = "", *, deleting: bool = False, reason: str = "", hour: int = 0
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "uid": f"uid-{name}",
        "creationTimestamp": _stamp(EPOCH + dt.timedelta(hours=hour)),
    }
    if deleting:
        meta["deletionTimestamp"] = _stamp(NOW)
    status: dict[str, Any] = {"phase": phase}
    if reason:
        status["reason"] = reason
    return {"metadata": meta, "spec": {"nodeName": node}, "status": status}


def pods_in_order(*specs: tuple[Any, ...], node: str = "node") -> list[dict[str, Any]]:
    """Pods created an hour apart, in the order given (upstream's creationTime loop)."""
    return [
        pod(name, phase, node, hour=i + 1, **(extra[0] if extra else {}))
        for i, (name, phase, *extra) in enumerate(specs)
    ]


def node(
    name: str, *, ready: bool | None = True, taints: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    conditions = [] if ready is None else [{"type": "Ready", "status": "True" if ready else "False"}]
    return {
        "metadata": {"name": name},
        "spec": {"taints": taints or []},
        "status": {"conditions": conditions},
    }


PODS = "/api/v1/namespaces/default/pods"


class Harness:
    """The caches and the API server holding `pods` and `nodes` (the API server also
    `api_nodes`), and a PodGC over them on a clock that moves when a test says."""

    def __init__(
        self,
        pods: list[dict[str, Any]],
        nodes: list[dict[str, Any]],
        *,
        threshold: int = -1,
        api_nodes: set[str] = frozenset(),
        client: fakeclient.FakeClient | None = None,
    ) -> None:
        self.pods = caches.new(gc_controller.PODS, selection.PodView)
        self.nodes = caches.new(gc_controller.NODES, selection.NodeView)
        self.client = client or fakeclient.FakeClient()
        for doc in pods:
            self.add_pod(doc)
            self.client.add(f"{PODS}/{doc['metadata']['name']}", doc)
        for doc in nodes:
            self.add_node(doc)
        for name in set(api_nodes) | {n["metadata"]["name"] for n in nodes}:
            self.add_api_node(name)
        self.clock = clock.FakeClock(NOW, 0.0)
        self.gc = gc_controller.PodGC(
            self.client,
            self.pods,
            self.nodes,
            threshold=threshold,
            quarantine=QUARANTINE,
            now=lambda: NOW,
            monotonic=self.clock.monotonic,
        )

    def add_pod(self, doc: dict[str, Any]) -> None:
        self.pods.seed(_view(selection.PodView, doc))

    def add_node(self, doc: dict[str, Any]) -> None:
        self.nodes.seed(_view(selection.NodeView, doc))

    def add_api_node(self, name: str) -> None:
        self.client.add(f"/api/v1/nodes/{name}", {"metadata": {"name": name}})

    def run(self) -> None:
        asyncio.run(self.gc.gc())

    def deleted(self) -> list[str]:
        """The pods the passes deleted: delete calls that took effect, in order."""
        return [
            p.rsplit("/", 1)[1] for _, p, _ in self.client.calls("delete") if p not in self.client.objects
        ]

    def delete_options(self) -> list[Any]:
        return [options for _, _, options in self.client.calls("delete")]

    def patches(self) -> list[tuple[str, Any]]:
        """(pod, body) of each patch, in order; each must be a strategic patch of the status."""
        out = []
        for action in self.client.actions:
            if action.verb == "patch":
                assert action.path.endswith("/status") and action.patch_type == "strategic", action
                out.append((action.path.split("/")[-2], action.body))
        return out

    def patched(self) -> list[str]:
        return [name for name, _ in self.patches()]

    def patch_of(self, name: str) -> Any:
        return dict(self.patches())[name]


def _view(view: type[Any], doc: dict[str, Any]) -> Any:
    return msgspec.json.decode(msgspec.json.encode(doc), type=view)


@pytest.mark.parametrize(
    ("name", "pods", "threshold", "deleted"),
    [
        ("threshold = 0, disables terminated pod deletion", [("a", "Failed"), ("b", "Succeeded")], 0, []),
        (
            "threshold = 1, delete pod a which is PodFailed and pod b which is PodSucceeded",
            [("a", "Failed"), ("b", "Succeeded"), ("c", "Failed")],
            1,
            ["a", "b"],
        ),
        (
            "threshold = 1, delete pod b which is PodSucceeded",
            [("a", "Running"), ("b", "Succeeded"), ("c", "Failed")],
            1,
            ["b"],
        ),
        ("threshold = 1, delete pod a which is PodFailed", [("a", "Failed"), ("b", "Succeeded")], 1, ["a"]),
        ("threshold = 5, don't delete pod", [("a", "Failed"), ("b", "Succeeded")], 5, []),
        (
            "delete evicted pods first, then the oldest",
            [("a", "Failed"), ("b", "Succeeded"), ("c", "Failed", {"reason": "Evicted"}), ("d", "Failed")],
            2,
            ["a", "c"],
        ),
        (
            "an evicted pod newer than the rest goes first",
            [("a", "Succeeded"), ("b", "Failed"), ("c", "Failed", {"reason": "Evicted"})],
            2,
            ["c"],
        ),
        (
            "Unknown, Pending and Running are not terminated",
            [("a", "Unknown"), ("b", "Pending"), ("c", "Running"), ("d", "Succeeded")],
            1,
            [],
        ),
    ],
)
def test_gc_terminated(name: str, pods: list[tuple[Any, ...]], threshold: int, deleted: list[str]) -> None:
    h = Harness(pods_in_order(*pods), [node("node")], threshold=threshold)
    h.run()
    assert sorted(h.deleted()) == sorted(deleted), name
    assert h.patched() == [], "terminated pods are deleted without a status patch"
    assert all(o == {"gracePeriodSeconds": 0} for o in h.delete_options())


def test_terminated_pods_are_ordered_by_creation_with_the_name_breaking_ties() -> None:
    pods = [
        pod("b", "Succeeded", "node", hour=1),
        pod("a", "Succeeded", "node", hour=1),
        pod("c", "Failed", "node", hour=0),
    ]
    h = Harness(pods, [node("node")], threshold=1)
    h.run()
    assert sorted(h.deleted()) == ["a", "c"]


def orphan_pass(
    pods: list[dict[str, Any]],
    lister: list[str],
    client_nodes: set[str] = frozenset(),
    *,
    add_to_lister: list[str] = (),  # type: ignore[assignment]
    add_to_client: set[str] = frozenset(),
    delay: float = QUARANTINE,
) -> Harness:
    """Two passes `delay` apart, upstream's quarantine test: nodes may appear in between."""
    h = Harness(pods, [node(n) for n in lister], api_nodes=client_nodes)
    h.run()
    for name in add_to_lister:
        h.add_node(node(name))
    for name in add_to_client:
        h.add_api_node(name)
    h.clock.advance(delay)
    h.run()
    return h


@pytest.mark.parametrize(
    ("name", "pods", "lister", "client", "delay", "add_lister", "add_client", "deleted"),
    [
        (
            "nodes present in lister",
            [pod("a", "Failed", "worker1"), pod("b", "Succeeded", "worker2")],
            ["worker1", "worker2"],
            set(),
            QUARANTINE,
            [],
            set(),
            [],
        ),
        (
            "nodes present in client",
            [pod("a", "Failed", "worker1"), pod("b", "Succeeded", "worker2")],
            [],
            {"worker1", "worker2"},
            QUARANTINE,
            [],
            set(),
            [],
        ),
        (
            "no nodes",
            [pod("a", "Failed", "worker"), pod("b", "Succeeded", "worker")],
            [],
            set(),
            QUARANTINE,
            [],
            set(),
            ["a", "b"],
        ),
        ("quarantine not finished", [pod("a", "Failed", "worker")], [], set(), QUARANTINE / 2, [], set(), []),
        ("wrong nodes", [pod("a", "Running", "worker")], ["worker-1"], set(), QUARANTINE, [], set(), ["a"]),
        (
            "some nodes missing",
            [pod("a", "Failed", "worker-0"), pod("b", "Failed", "worker-1"), pod("c", "Running", "worker-2")],
            ["worker-0"],
            set(),
            QUARANTINE,
            [],
            set(),
            ["b", "c"],
        ),
        (
            "node added to client after quarantine",
            [pod("a", "Running", "worker")],
            [],
            set(),
            QUARANTINE,
            [],
            {"worker"},
            [],
        ),
        (
            "node added to lister after quarantine",
            [pod("a", "Running", "worker")],
            [],
            set(),
            QUARANTINE,
            ["worker"],
            set(),
            [],
        ),
    ],
)
def test_gc_orphaned(
    name: str,
    pods: list[dict[str, Any]],
    lister: list[str],
    client: set[str],
    delay: float,
    add_lister: list[str],
    add_client: set[str],
    deleted: list[str],
) -> None:
    h = orphan_pass(pods, lister, client, add_to_lister=add_lister, add_to_client=add_client, delay=delay)
    assert sorted(h.deleted()) == deleted, name


@pytest.mark.parametrize("phase", ["Pending", "Running", "Unknown", "Succeeded", "Failed"])
def test_an_orphan_not_terminal_is_marked_failed_with_the_disruption_condition(phase: str) -> None:
    h = orphan_pass([pod("a", phase, "worker")], [])
    assert h.deleted() == ["a"]
    if phase in ("Succeeded", "Failed"):
        assert h.patched() == []
        return
    assert h.patch_of("a") == {
        "metadata": {"uid": "uid-a"},
        "status": {
            "phase": "Failed",
            "conditions": [
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "DeletionByPodGC",
                    "message": "PodGC: node no longer exists",
                    "lastTransitionTime": _stamp(NOW),
                }
            ],
        },
    }


def test_a_disruption_condition_already_true_keeps_its_transition_time() -> None:
    doc = pod("a", "Running", "worker")
    doc["status"]["conditions"] = [
        {"type": "DisruptionTarget", "status": "True", "lastTransitionTime": _stamp(EPOCH)}
    ]
    h = orphan_pass([doc], [])
    assert h.patch_of("a")["status"]["conditions"][0]["lastTransitionTime"] == _stamp(EPOCH)


def test_a_node_back_during_the_quarantine_restarts_it() -> None:
    h = Harness([pod("a", "Running", "worker")], [])
    h.run()
    h.clock.advance(QUARANTINE / 2)
    h.add_node(node("worker"))
    h.run()
    h.nodes.evict("worker")
    h.run()
    h.clock.advance(QUARANTINE / 2)
    h.run()
    assert h.deleted() == [], "the node must have been missing for a whole quarantine"
    h.clock.advance(QUARANTINE / 2)
    h.run()
    assert h.deleted() == ["a"]


@pytest.mark.parametrize(
    ("name", "pods", "deleted", "patched"),
    [
        (
            "Unscheduled pod in any phase must be deleted, the running one marked Failed first",
            [
                pod("a", "Failed", deleting=True),
                pod("b", "Succeeded", deleting=True),
                pod("c", "Running", deleting=True),
            ],
            ["a", "b", "c"],
            ["c"],
        ),
        (
            "Scheduled pod in any phase must not be deleted",
            [
                pod("a", "Failed"),
                pod("b", "Succeeded", "node"),
                pod("c", "Running", "node", deleting=True),
            ],
            [],
            [],
        ),
    ],
)
def test_gc_unscheduled_terminating(
    name: str, pods: list[dict[str, Any]], deleted: list[str], patched: list[str]
) -> None:
    h = Harness(pods, [node("node")])
    h.run()
    assert sorted(h.deleted()) == deleted, name
    assert h.patched() == patched, name
    for who in patched:
        assert h.patch_of(who) == {"metadata": {"uid": f"uid-{who}"}, "status": {"phase": "Failed"}}


@pytest.mark.parametrize(
    ("name", "nodes", "pods", "deleted", "patched"),
    [
        (
            "pods have deletion timestamp set and the corresponding nodes are not ready",
            [node("worker-0", ready=False), node("worker-1", ready=False, taints=[OUT_OF_SERVICE])],
            [pod("a", "Running", "worker-0", deleting=True), pod("b", "Running", "worker-1", deleting=True)],
            ["b"],
            ["b"],
        ),
        (
            "some pods have deletion timestamp and/or phase set and some of the corresponding nodes "
            "have an outofservice taint that are not ready",
            [
                node("worker-0", ready=False),  # no taint
                node("worker-1", ready=False, taints=[OUT_OF_SERVICE]),
                node("worker-2", ready=True, taints=[OUT_OF_SERVICE]),  # ready
                node(
                    "worker-3",
                    ready=None,
                    taints=[{"key": selection.OUT_OF_SERVICE_TAINT, "effect": "NoSchedule"}],
                ),
                node("worker-4", ready=False, taints=[{"key": "other", "effect": "NoExecute"}]),
            ],
            [
                pod("a", "Running", "worker-0", deleting=True),
                pod("b", "Running", "worker-1", deleting=True),
                pod("c", "Running", "worker-1"),  # not terminating
                pod("d", "Failed", "worker-1", deleting=True),  # terminal: deleted, not patched
                pod("e", "Running", "worker-2", deleting=True),
                pod("f", "Pending", "worker-3", deleting=True),  # no Ready condition, taint key counts
                pod("g", "Running", "worker-4", deleting=True),
                pod("h", "Running", "worker-9", deleting=True),  # unknown node: skipped
            ],
            ["b", "d", "f"],
            ["b", "f"],
        ),
    ],
)
def test_gc_terminating(
    name: str, nodes: list[dict[str, Any]], pods: list[dict[str, Any]], deleted: list[str], patched: list[str]
) -> None:
    h = Harness(pods, nodes)
    h.run()  # the first pass only quarantines worker-9
    assert sorted(h.deleted()) == deleted, name
    assert sorted(h.patched()) == patched, name


def test_a_failed_request_is_counted_and_the_pass_goes_on() -> None:
    h = Harness(
        [
            pod("a", "Succeeded", "node", hour=1),
            pod("b", "Succeeded", "node", hour=2),
            pod("c", "Failed", "node", hour=3),
        ],
        [node("node")],
        threshold=1,
    )
    h.client.fail("delete", f"{PODS}/a", kubeclient.ApiError(500, "InternalError", "boom"))
    errors = gc_controller.DELETING_POD_ERRORS.labels("default", "terminated")
    before = errors._value.get()
    h.run()
    assert h.deleted() == ["b"]
    assert errors._value.get() == before + 1


def test_the_pass_requeues_itself_after_the_check_period() -> None:
    h = Harness([], [])
    result = asyncio.run(h.gc.reconcile(gc_controller.GC_KEY))
    assert result is not None and result.requeue_after == gc_controller.GC_CHECK_PERIOD


@pytest.mark.parametrize("error", [OSError("connection reset"), TimeoutError()])
def test_a_broken_connection_is_counted_and_the_pass_goes_on(error: Exception) -> None:
    # Upstream logs every failed deletion; a pass cut short here would come back only after
    # the queue's backoff (up to 1000 s) instead of the 20 s period.
    h = Harness(
        [pod(f"p{i}", "Succeeded", "node", hour=i) for i in range(4)],
        [node("node")],
        threshold=1,
    )
    h.client.fail("delete", f"{PODS}/p0", error)
    errors = gc_controller.DELETING_POD_ERRORS.labels("default", "terminated")
    before = errors._value.get()
    result = asyncio.run(h.gc.reconcile(gc_controller.GC_KEY))
    assert sorted(h.deleted()) == ["p1", "p2"]
    assert errors._value.get() == before + 1
    assert result is not None and result.requeue_after == gc_controller.GC_CHECK_PERIOD
