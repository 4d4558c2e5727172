"""The StatefulSet update against the testing kit's fake API server (upstream's stateful_set_control_test.go scenarios):
ordered and parallel creation, ordered scale-down blocked by an unhealthy replica, rolling
updates in reverse ordinal order down to the partition, failed pods, claims and their owners,
revision creation, rollback renumbering and history truncation, status."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import msgspec
import pytest
from kcm_controllers.statefulset import control, utils
from kcm_shared.apimachinery import codec, selectors
from kcm_shared.controllerutil import history, podranking
from kcm_shared.testing import caches, fakeclient, recorders

NOW = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
SELECTOR = selectors.label_selector_from_dict({"matchLabels": {"app": "foo"}})


class Harness:
    """The API server (the StatefulSet, and every pod, claim and revision the control made),
    caches of claims and revisions, and the control with a recording Event recorder."""

    def __init__(self, max_unavailable: bool = False) -> None:
        self.api = fakeclient.FakeClient(now=lambda: NOW)
        self.recorder = recorders.RecordingEventRecorder()
        self.claims = caches.new(control.CLAIMS, codec.Meta)
        self.revisions = caches.new(history.CONTROLLER_REVISIONS, history.ControllerRevisionView)
        self.control = control.StatefulSetControl(
            self.api, self.claims, self.revisions, self.recorder, lambda: NOW, max_unavailable=max_unavailable
        )

    def add_revision(self, obj: dict[str, Any]) -> history.ControllerRevisionView:
        view = codec.decode(msgspec.json.encode(obj), history.ControllerRevisionView)
        self.revisions.seed(view)
        return view

    def add_claim(self, name: str, refs: list[codec.OwnerReference]) -> None:
        self.claims.seed(
            codec.Meta(metadata=codec.ObjectMeta(name=name, namespace="default", owner_references=refs))
        )

    def update(self, sts: utils.StatefulSetView, pods: list[podranking.PodView]) -> utils.StatefulSetStatus:
        self.api.add(
            f"/apis/apps/v1/namespaces/default/statefulsets/{sts.metadata.name}",
            msgspec.json.decode(msgspec.json.encode(sts)),
        )
        self.api.actions.clear()
        status = asyncio.run(self.control.update(sts, SELECTOR, pods))
        # What the caches see next: the revisions this step created.
        for key, obj in self.api.objects.items():
            if "/controllerrevisions/" in key:
                self.add_revision(obj)
        return status

    def writes(self, kind: str) -> list[tuple[str, str]]:
        """(verb, name) of each write to `kind` in the last update (a create's name from its body)."""
        return [
            (verb, body["metadata"]["name"] if verb == "create" else path.rsplit("/", 1)[-1])
            for verb, path, body in self.api.calls(*fakeclient.WRITES)
            if f"/{kind}" in path
        ]

    def created_pods(self) -> list[str]:
        return [name for m, name in self.writes("pods") if m == "create"]

    def deleted_pods(self) -> list[str]:
        return [name for m, name in self.writes("pods") if m == "delete"]

    def events(self) -> list[tuple[str, str]]:
        return [(e.reason, e.message) for e in self.recorder.events]


def sset(
    replicas: int,
    *,
    image: str = "nginx:1",
    parallel: bool = False,
    partition: int | None = 0,
    max_unavailable: int | str | None = None,
    strategy: str = "RollingUpdate",
    claims: bool = False,
    when_scaled: str = "Retain",
    history_limit: int = 10,
    status: dict[str, Any] | None = None,
) -> utils.StatefulSetView:
    spec: dict[str, Any] = {
        "replicas": replicas,
        "serviceName": "foo",
        "selector": {"matchLabels": {"app": "foo"}},
        "podManagementPolicy": "Parallel" if parallel else "OrderedReady",
        "updateStrategy": {"type": strategy}
        | ({"rollingUpdate": {"partition": partition}} if partition is not None else {}),
        "revisionHistoryLimit": history_limit,
        "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": when_scaled},
        "template": {
            "metadata": {"labels": {"app": "foo"}},
            "spec": {"containers": [{"name": "c", "image": image}]},
        },
    }
    if max_unavailable is not None:
        spec["updateStrategy"].setdefault("rollingUpdate", {})["maxUnavailable"] = max_unavailable
    if claims:
        spec["volumeClaimTemplates"] = [{"metadata": {"name": "data"}, "spec": {}}]
    doc = {
        "metadata": {"name": "foo", "namespace": "default", "uid": "set-uid", "generation": 1},
        "spec": spec,
        "status": status or {},
    }
    return codec.decode(msgspec.json.encode(doc), utils.StatefulSetView)


def pod_of(
    api: fakeclient.FakeClient, name: str, phase: str = "Running", ready: bool = True
) -> podranking.PodView:
    """The created pod `name` as a cache would hold it once the kubelet reports `phase`."""
    obj = api.objects[f"/api/v1/namespaces/default/pods/{name}"]
    return msgspec.convert(
        {
            "metadata": obj["metadata"],
            "status": {
                "phase": phase,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True" if ready else "False",
                        "lastTransitionTime": "2023-12-31T00:00:00Z",
                    }
                ],
            },
        },
        podranking.PodView,
    )


def run_up(h: Harness, sts: utils.StatefulSetView, count: int) -> list[podranking.PodView]:
    """Create `count` ordered pods step by step, each Running and Ready before the next."""
    pods: list[podranking.PodView] = []
    for i in range(count):
        h.update(sts, pods)
        assert h.created_pods() == [f"foo-{i}"]
        pods.append(pod_of(h.api, f"foo-{i}"))
    return pods


def test_ordered_ready_creates_one_pod_at_a_time() -> None:
    h = Harness()
    sts = sset(3)
    h.update(sts, [])
    assert h.created_pods() == ["foo-0"]
    # Pending: nothing more until it is Running and Ready.
    h.update(sts, [pod_of(h.api, "foo-0", phase="Pending", ready=False)])
    assert h.created_pods() == []
    h.update(sts, [pod_of(h.api, "foo-0", ready=False)])
    assert h.created_pods() == []
    h.update(sts, [pod_of(h.api, "foo-0")])
    assert h.created_pods() == ["foo-1"]
    assert ("SuccessfulCreate", "create Pod foo-0 in StatefulSet foo successful") in h.events()


def test_parallel_creates_every_pod_at_once() -> None:
    h = Harness()
    h.update(sset(3, parallel=True), [])
    assert sorted(h.created_pods()) == ["foo-0", "foo-1", "foo-2"]


def test_ordered_scale_down_goes_highest_first_and_waits() -> None:
    h = Harness()
    pods = run_up(h, sset(3), 3)
    h.update(sset(1), pods)
    assert h.deleted_pods() == ["foo-2"]
    terminating = msgspec.structs.replace(
        pods[2], metadata=msgspec.structs.replace(pods[2].metadata, deletion_timestamp=NOW)
    )
    h.update(sset(1), [pods[0], pods[1], terminating])
    assert h.deleted_pods() == []
    h.update(sset(1), pods[:2])
    assert h.deleted_pods() == ["foo-1"]


def test_unhealthy_replica_blocks_ordered_scale_down() -> None:
    h = Harness()
    pods = run_up(h, sset(2), 2)
    sick = pod_of(h.api, "foo-0", ready=False)
    h.update(sset(1), [sick, pods[1]])
    assert h.deleted_pods() == []
    # Parallel does not wait.
    h.update(sset(1, parallel=True), [sick, pods[1]])
    assert h.deleted_pods() == ["foo-1"]


def test_failed_pod_is_deleted_and_made_again_later() -> None:
    h = Harness()
    pods = run_up(h, sset(2), 2)
    failed = pod_of(h.api, "foo-0", phase="Failed", ready=False)
    h.update(sset(2), [failed, pods[1]])
    assert h.deleted_pods() == ["foo-0"] and h.created_pods() == []
    h.update(sset(2), [pods[1]])
    assert h.created_pods() == ["foo-0"]


def test_rolling_update_goes_down_to_the_partition() -> None:
    h = Harness()
    pods = run_up(h, sset(3), 3)
    old = pods[0].metadata.labels[utils.REVISION_LABEL]
    status = h.update(sset(3, image="nginx:2", partition=1, status={"currentRevision": old}), pods)
    new = status.update_revision
    assert new != old and status.current_revision == old
    assert h.deleted_pods() == ["foo-2"]
    assert ("create", new) in h.writes("controllerrevisions")
    # foo-2 comes back at the new revision; then foo-1 goes; foo-0 stays below the partition.
    h.update(sset(3, image="nginx:2", partition=1, status={"currentRevision": old}), pods[:2])
    recreated = h.api.objects["/api/v1/namespaces/default/pods/foo-2"]
    assert recreated["metadata"]["labels"][utils.REVISION_LABEL] == new
    assert recreated["spec"]["containers"][0]["image"] == "nginx:2"
    pods[2] = pod_of(h.api, "foo-2")
    h.update(sset(3, image="nginx:2", partition=1, status={"currentRevision": old}), pods)
    assert h.deleted_pods() == ["foo-1"]
    h.update(sset(3, image="nginx:2", partition=1, status={"currentRevision": old}), [pods[0], pods[2]])
    assert (
        h.api.objects["/api/v1/namespaces/default/pods/foo-1"]["spec"]["containers"][0]["image"] == "nginx:2"
    )
    pods[1] = pod_of(h.api, "foo-1")
    h.update(sset(3, image="nginx:2", partition=1, status={"currentRevision": old}), pods)
    assert h.deleted_pods() == []


@pytest.mark.parametrize(
    ("gate", "max_unavailable", "deleted"),
    [
        (False, 2, ["foo-3"]),  # the gate off (v1.32's default): one at a time, whatever the spec says
        (True, 2, ["foo-3", "foo-2"]),
        (True, "50%", ["foo-3", "foo-2"]),
        (True, "10%", ["foo-3"]),  # rounded down to 0, then at least 1
        (True, None, ["foo-3"]),
        (True, 5, ["foo-3", "foo-2"]),  # not below the partition
    ],
)
def test_max_unavailable_deletes_that_many_pods_at_once_with_its_gate_on(
    gate: bool, max_unavailable: int | str | None, deleted: list[str]
) -> None:
    h = Harness(max_unavailable=gate)
    pods = run_up(h, sset(4, partition=2), 4)
    old = pods[0].metadata.labels[utils.REVISION_LABEL]
    sts = sset(
        4, image="nginx:2", partition=2, max_unavailable=max_unavailable, status={"currentRevision": old}
    )
    status = h.update(sts, pods)
    assert h.deleted_pods() == deleted
    assert status.current_replicas == 4 - len(deleted)


def test_max_unavailable_counts_every_unhealthy_pod_of_the_set() -> None:
    h = Harness(max_unavailable=True)
    h.update(sset(4, parallel=True), [])
    pods = [pod_of(h.api, f"foo-{i}") for i in range(4)]
    old = pods[0].metadata.labels[utils.REVISION_LABEL]
    # Parallel: the sync goes on to the update though foo-0 is not ready.
    pods[0] = pod_of(h.api, "foo-0", ready=False)
    sts = sset(4, image="nginx:2", parallel=True, max_unavailable=2, status={"currentRevision": old})
    h.update(sts, pods)
    assert h.deleted_pods() == ["foo-3"]
    # Two unhealthy already (foo-3 terminating): nothing more goes.
    pods[3] = msgspec.structs.replace(
        pods[3], metadata=msgspec.structs.replace(pods[3].metadata, deletion_timestamp=NOW)
    )
    h.update(sts, pods)
    assert h.deleted_pods() == []


def test_a_malformed_max_unavailable_fails_the_sync_with_upstreams_error() -> None:
    h = Harness(max_unavailable=True)
    pods = run_up(h, sset(2), 2)
    old = pods[0].metadata.labels[utils.REVISION_LABEL]
    sts = sset(2, image="nginx:2", max_unavailable="two", status={"currentRevision": old})
    with pytest.raises(ValueError, match="string is not a percentage"):
        h.update(sts, pods)
    assert h.deleted_pods() == []


def test_on_delete_leaves_pods_alone() -> None:
    h = Harness()
    pods = run_up(h, sset(2), 2)
    h.update(sset(2, image="nginx:2", strategy="OnDelete", partition=None), pods)
    assert h.deleted_pods() == []


def test_status_counts_and_completes_a_rollout() -> None:
    h = Harness()
    pods = run_up(h, sset(2), 2)
    status = h.update(sset(2), pods)
    assert (status.replicas, status.ready_replicas, status.available_replicas) == (2, 2, 2)
    assert (status.current_replicas, status.updated_replicas) == (2, 2)
    assert status.current_revision == status.update_revision and status.observed_generation == 1
    patch = next(b for m, p, b in h.api.calls() if p.endswith("/statefulsets/foo/status"))
    assert patch["status"]["collisionCount"] == 0
    # Nothing changed: no second write.
    written = sset(2, status=msgspec.to_builtins(status))
    h.update(written, pods)
    assert not [p for _, p, _ in h.api.calls() if p.endswith("/status")]


def test_rollback_renumbers_the_equal_revision_and_history_is_truncated() -> None:
    h = Harness()
    pods = run_up(h, sset(1, history_limit=1), 1)
    first = pods[0].metadata.labels[utils.REVISION_LABEL]
    second = h.update(sset(1, image="nginx:2", history_limit=1), pods).update_revision
    # Back to the first template: the first revision becomes number 3, nothing new is created.
    status = h.update(sset(1, history_limit=1, status={"currentRevision": second}), pods)
    assert status.update_revision == first
    renumbered = [(m, b) for m, p, b in h.api.calls() if p.endswith(f"/controllerrevisions/{first}")]
    assert renumbered == [("patch", {"revision": 3})]
    assert not [w for w in h.writes("controllerrevisions") if w[0] == "create"]
    # A third template: the second revision, unused and beyond the limit of 1, is deleted.
    cached = h.revisions.get("default", first)
    assert cached is not None
    h.revisions.seed(msgspec.structs.replace(cached, revision=3))
    h.update(sset(1, image="nginx:3", history_limit=0, status={"currentRevision": first}), pods)
    assert ("delete", second) in h.writes("controllerrevisions")
    assert ("delete", first) not in h.writes("controllerrevisions")  # still the pod's


def test_claims_are_created_before_the_pod_and_handed_to_a_condemned_pod() -> None:
    h = Harness()
    sts = sset(2, parallel=True, claims=True, when_scaled="Delete")
    h.update(sts, [])
    posts = [name for m, name in h.writes("") if m == "create"]
    assert posts.index("data-foo-0") < posts.index("foo-0")
    assert posts.index("data-foo-1") < posts.index("foo-1")
    assert (
        "SuccessfulCreate",
        "create Claim data-foo-0 Pod foo-0 in StatefulSet foo success",
    ) in h.events()
    pods = [pod_of(h.api, "foo-0"), pod_of(h.api, "foo-1")]
    for p in pods:
        h.add_claim(f"data-{p.metadata.name}", [])
    # Scaled to 1: foo-1's claim gets foo-1 as its controller before foo-1 is deleted.
    h.update(sset(1, parallel=True, claims=True, when_scaled="Delete"), pods)
    order = [(m, p.rsplit("/", 1)[-1]) for m, p, _ in h.api.calls() if m in ("patch", "delete")]
    assert order.index(("patch", "data-foo-1")) < order.index(("delete", "foo-1"))
    body = next(b for m, p, b in h.api.calls() if m == "patch" and p.endswith("/data-foo-1"))
    refs = body["metadata"]["ownerReferences"]
    assert [(r["kind"], r["name"], r["uid"], r["controller"]) for r in refs] == [
        ("Pod", "foo-1", pods[1].metadata.uid, True)
    ]


@pytest.mark.parametrize("start", [0, 5])
def test_start_ordinal_names_pods(start: int) -> None:
    h = Harness()
    sts = sset(2, parallel=True)
    sts.spec.ordinals = utils.Ordinals(start)
    h.update(sts, [])
    assert sorted(h.created_pods()) == [f"foo-{start}", f"foo-{start + 1}"]
