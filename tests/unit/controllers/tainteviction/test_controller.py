"""The taint-eviction-controller's handlers and reconcile against the testing kit's fake client
and caches: scenarios after upstream taint_eviction_test.go (TestCreatePod, TestUpdatePod,
TestCreateNode, TestUpdateNode, TestDeleteNode-like cancellations), plus the deadline a new
replica recomputes from the taint's timeAdded."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import msgspec
from kcm_controllers.tainteviction import controller as te
from kcm_shared import runtime
from kcm_shared.testing import caches, fakeclient, recorders

NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
PODS = "/api/v1/namespaces/default/pods"


def stamp(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(name: str, node: str = "node1", tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"nodeName": node, "tolerations": tolerations or []},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def node(name: str = "node1", *taints: tuple[str, float | None]) -> dict[str, Any]:
    """A node with NoExecute taints (key, seconds since it was added or None)."""
    spec = [
        {
            "key": key,
            "effect": "NoExecute",
            **({} if ago is None else {"timeAdded": stamp(NOW - dt.timedelta(seconds=ago))}),
        }
        for key, ago in taints
    ]
    return {"metadata": {"name": name}, "spec": {"taints": spec}}


def tolerate(key: str, seconds: int | None = None) -> dict[str, Any]:
    return {
        "key": key,
        "operator": "Exists",
        "effect": "NoExecute",
        **({} if seconds is None else {"tolerationSeconds": seconds}),
    }


class Harness:
    def __init__(self, pods: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> None:
        self.client = fakeclient.FakeClient()
        for doc in pods:
            self.client.add(f"{PODS}/{doc['metadata']['name']}", doc)
        self.pods = caches.new(te.PODS, te.PodView, pods)
        self.nodes = caches.new(te.NODES, te.NodeView, nodes)
        self.recorder = recorders.RecordingEventRecorder(te.NAME)
        self.queued: list[str] = []
        self.now = NOW
        self.tc = te.TaintEvictionController(
            self.client, self.pods, self.nodes, self.queued.append, self.recorder, now=lambda: self.now
        )
        self.tc.register()

    def sync(self, key: str = "default/p") -> runtime.Result | None:
        return asyncio.run(self.tc.reconcile(key))

    def deleted(self) -> list[str]:
        return [p.rsplit("/", 1)[1] for _, p, _ in self.client.calls("delete")]

    def stored(self, name: str) -> Any:
        return self.client.objects.get(f"{PODS}/{name}")


def test_a_pod_without_a_matching_toleration_is_marked_and_deleted() -> None:
    h = Harness([pod("p")], [node("node1", ("a", 0))])
    assert h.sync() is None
    assert h.deleted() == ["p"]
    assert h.recorder.seen() == [("Normal", "TaintManagerEviction", "Marking for deletion Pod default/p")]
    [(_, path, body)] = h.client.calls("patch")
    assert path == f"{PODS}/p/status"
    assert body["metadata"] == {"uid": "uid-p"}
    assert body["status"]["conditions"][0]["reason"] == "DeletionByTaintManager"


def test_a_pod_tolerating_for_ever_is_kept() -> None:
    h = Harness([pod("p", tolerations=[tolerate("a")])], [node("node1", ("a", 0))])
    assert h.sync() is None
    assert h.deleted() == [] and h.recorder.seen() == []


def test_a_pod_on_an_untainted_node_is_kept() -> None:
    h = Harness([pod("p")], [node("node1")])
    assert h.sync() is None and h.deleted() == []


def test_a_tolerated_taint_comes_back_at_its_deadline_then_deletes() -> None:
    h = Harness([pod("p", tolerations=[tolerate("a", 30)])], [node("node1", ("a", 10))])
    assert h.sync() == runtime.Result(requeue_after=20.0)
    assert h.deleted() == []
    h.now = NOW + dt.timedelta(seconds=20)
    assert h.sync() is None
    assert h.deleted() == ["p"]
    assert h.recorder.reasons() == ["TaintManagerEviction"]


def test_a_new_replica_recomputes_the_deadline_from_time_added() -> None:
    docs = ([pod("p", tolerations=[tolerate("a", 30)])], [node("node1", ("a", 10))])
    assert Harness(*docs).sync() == runtime.Result(requeue_after=20.0)
    restarted = Harness(*docs)  # no memory of the first one's pending deletion
    restarted.now = NOW + dt.timedelta(seconds=15)
    assert restarted.sync() == runtime.Result(requeue_after=5.0)


def test_removing_the_taint_cancels_with_an_event() -> None:
    h = Harness([pod("p", tolerations=[tolerate("a", 30)])], [node("node1", ("a", 0))])
    h.sync()
    caches.deliver(h.nodes, "MODIFIED", node("node1"))
    assert h.queued == ["default/p"]
    assert h.sync() is None
    assert h.recorder.seen() == [("Normal", "TaintManagerEviction", "Cancelling deletion of Pod default/p")]
    assert h.deleted() == []


def test_no_cancel_event_without_a_pending_deletion() -> None:
    h = Harness([pod("p")], [node("node1")])
    assert h.sync() is None
    assert h.recorder.seen() == []


def test_a_deleted_pod_with_a_pending_deletion_is_cancelled_with_an_event() -> None:
    h = Harness([pod("p", tolerations=[tolerate("a", 30)])], [node("node1", ("a", 0))])
    h.sync()
    caches.deliver(h.pods, "DELETED", pod("p", tolerations=[tolerate("a", 30)]))
    assert h.queued == ["default/p"]
    h.sync()
    assert h.recorder.seen() == [("Normal", "TaintManagerEviction", "Cancelling deletion of Pod default/p")]


def test_changed_tolerations_are_reevaluated() -> None:
    h = Harness([pod("p", tolerations=[tolerate("a")])], [node("node1", ("a", 0))])
    assert h.sync() is None
    caches.deliver(h.pods, "MODIFIED", pod("p", tolerations=[tolerate("a"), tolerate("b", 1)]))
    assert h.queued == ["default/p"]
    caches.deliver(
        h.pods, "MODIFIED", {**pod("p", tolerations=[tolerate("a"), tolerate("b", 1)]), "status": {}}
    )
    assert h.queued == ["default/p"]  # a status change is not re-evaluated


def test_node_updates_enqueue_its_pods_only_when_no_execute_taints_change() -> None:
    h = Harness([pod("p"), pod("q", node="node2")], [node("node1"), node("node2")])
    caches.deliver(
        h.nodes, "MODIFIED", {**node("node1"), "metadata": {"name": "node1", "labels": {"x": "y"}}}
    )
    assert h.queued == []
    caches.deliver(h.nodes, "MODIFIED", node("node1", ("a", 0)))
    assert h.queued == ["default/p"]


def test_the_pending_deletion_is_never_lengthened() -> None:
    h = Harness([pod("p", tolerations=[tolerate("a", 30)])], [node("node1", ("a", 0))])
    assert h.sync() == runtime.Result(requeue_after=30.0)
    # The taint is swapped for a newer one of the same toleration (a node lifecycle swap).
    caches.deliver(h.nodes, "MODIFIED", node("node1", ("b", 0)))
    caches.deliver(h.pods, "MODIFIED", pod("p", tolerations=[tolerate("a", 30), tolerate("b", 30)]))
    h.now = NOW + dt.timedelta(seconds=10)
    assert h.sync() == runtime.Result(requeue_after=20.0)


def test_a_pod_being_deleted_is_left_alone() -> None:
    doc = pod("p")
    doc["metadata"]["deletionTimestamp"] = stamp(NOW)
    h = Harness([doc], [node("node1", ("a", 0))])
    assert h.sync() is None and h.deleted() == []


def test_a_pod_gone_from_the_api_server_is_done() -> None:
    h = Harness([pod("p")], [node("node1", ("a", 0))])
    del h.client.objects[f"{PODS}/p"]
    assert h.sync() is None
    assert h.client.calls("patch", "delete") == []


def test_pods_on_untainted_nodes_are_not_enqueued_and_tainted_ones_are() -> None:
    h = Harness([], [node("node1"), node("node2", ("a", 0))])
    caches.deliver(h.pods, "ADDED", pod("calm", node="node1"))
    caches.deliver(h.pods, "ADDED", pod("tainted", node="node2"))
    caches.deliver(h.pods, "MODIFIED", pod("calm", node="node1", tolerations=[tolerate("b")]))
    assert h.queued == ["default/tainted"]
    caches.deliver(h.pods, "DELETED", pod("calm", node="node1"))
    assert h.queued == ["default/tainted"]


def test_a_pod_with_a_pending_deletion_is_enqueued_even_once_its_node_is_untainted() -> None:
    h = Harness([pod("p", tolerations=[tolerate("a", 60)])], [node("node1", ("a", 0))])
    assert h.sync() is not None  # a deletion pending at the toleration's end
    # The taint is gone from the cache, and the node's handler has not run yet.
    h.nodes.seed(msgspec.convert(node("node1"), te.NodeView))
    caches.deliver(h.pods, "DELETED", pod("p", tolerations=[tolerate("a", 60)]))
    assert h.queued == ["default/p"]
