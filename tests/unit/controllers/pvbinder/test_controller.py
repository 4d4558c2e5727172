"""The binder's state machine against the testing kit's fake client (upstream
pv_controller_test.go / binder_test.go scenarios): binding both ways and pre-bound both ways,
Pending with FailedBinding, handing provisioning to the external provisioner, the
WaitForFirstConsumer Events, VolumeMismatch, Released and reclaim, Lost claims, the
retroactive default class."""

from __future__ import annotations

import asyncio
from typing import Any

from kcm_controllers.pvbinder import controller as pvc
from kcm_controllers.pvbinder import views
from kcm_shared import runtime
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import podvolumes
from kcm_shared.testing import caches, fakeclient

NS = "ns"


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []

    def event(self, obj: Any, type_: str, reason: str, message: str) -> None:
        self.events.append((obj.metadata.name, type_, reason, message))


def pv_path(name: str) -> str:
    return kubeclient.resource_path("", "v1", "persistentvolumes", None, name)


def pvc_path(name: str) -> str:
    return kubeclient.resource_path("", "v1", "persistentvolumeclaims", NS, name)


def pv(
    name: str,
    size: str = "1Gi",
    *,
    ref: dict[str, str] | None = None,
    policy: str = "Retain",
    phase: str = "Available",
    annotations: dict[str, str] | None = None,
    cls: str = "",
    source: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "capacity": {"storage": size},
        "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": policy,
        "storageClassName": cls,
        **(source or {"csi": {"driver": "csi.sim.kcm.dev", "volumeHandle": name}}),
    }
    if ref is not None:
        spec["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": NS, **ref}
    meta = {"name": name, "uid": f"{name}-uid", "resourceVersion": "1", "annotations": annotations or {}}
    return {
        "kind": "PersistentVolume",
        "apiVersion": "v1",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": phase},
    }


def claim(
    name: str = "data",
    *,
    cls: str | None = "",
    volume: str = "",
    annotations: dict[str, str] | None = None,
    phase: str = "Pending",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if cls is not None:
        spec["storageClassName"] = cls
    if volume:
        spec["volumeName"] = volume
    meta = {
        "name": name,
        "namespace": NS,
        "uid": f"{name}-uid",
        "resourceVersion": "1",
        "annotations": annotations or {},
    }
    return {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": phase},
    }


def storage_class(
    name: str, mode: str = "Immediate", provisioner: str = "csi.sim.kcm.dev", default: bool = False
) -> dict[str, Any]:
    ann = {views.ANN_DEFAULT_CLASS: "true"} if default else {}
    meta = {"name": name, "annotations": ann, "creationTimestamp": "2026-01-01T00:00:00Z"}
    return {"kind": "StorageClass", "metadata": meta, "provisioner": provisioner, "volumeBindingMode": mode}


class Harness:
    def __init__(
        self,
        volumes: list[dict[str, Any]] = [],  # noqa: B006  (read only)
        claims: list[dict[str, Any]] = [],  # noqa: B006
        classes: list[dict[str, Any]] = [],  # noqa: B006
        pods: list[dict[str, Any]] = [],  # noqa: B006
    ) -> None:
        self.client = fakeclient.FakeClient()
        for doc in volumes:
            self.client.add(pv_path(doc["metadata"]["name"]), doc)
        for doc in claims:
            self.client.add(pvc_path(doc["metadata"]["name"]), doc)
        self.recorder = Recorder()
        self.enqueued: list[str] = []
        self.ctrl = pvc.PVController(
            self.client,
            {
                pvc.VOLUMES: caches.new(pvc.VOLUMES, views.VolumeView, volumes),
                pvc.CLAIMS: caches.new(pvc.CLAIMS, views.ClaimView, claims),
                pvc.CLASSES: caches.new(pvc.CLASSES, views.ClassView, classes),
                pvc.PODS: caches.new(pvc.PODS, podvolumes.PodView, pods),
            },
            self.enqueued.append,
            self.recorder,  # type: ignore[arg-type]  # duck-typed stand-in for events.EventRecorder
        )
        self.ctrl.register()

    def sync(self, key: str) -> runtime.Result | None:
        return asyncio.run(self.ctrl.reconcile(key))

    def volume(self, name: str) -> dict[str, Any]:
        return self.client.objects[pv_path(name)]

    def claim(self, name: str = "data") -> dict[str, Any]:
        return self.client.objects[pvc_path(name)]

    def reasons(self) -> list[str]:
        return [reason for _, _, reason, _ in self.recorder.events]


def test_a_claim_binds_the_matching_volume_and_both_say_so() -> None:
    h = Harness(volumes=[pv("big", "5Gi"), pv("fit", "1Gi")], claims=[claim()])
    assert h.sync("claim/ns/data") is None
    vol, c = h.volume("fit"), h.claim()
    assert vol["spec"]["claimRef"]["name"] == "data" and vol["spec"]["claimRef"]["uid"] == "data-uid"
    assert vol["metadata"]["annotations"] == {views.ANN_BOUND_BY_CONTROLLER: "yes"}
    assert vol["status"]["phase"] == "Bound"
    assert c["spec"]["volumeName"] == "fit"
    assert c["metadata"]["annotations"] == {
        views.ANN_BIND_COMPLETED: "yes",
        views.ANN_BOUND_BY_CONTROLLER: "yes",
    }
    assert c["status"] == {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}
    assert "claimRef" not in h.volume("big")["spec"]
    # Writes in upstream's order: volume, its status, claim, its status.
    assert [path for _, path, _ in h.client.calls("patch")] == [
        pv_path("fit"),
        pv_path("fit") + "/status",
        pvc_path("data"),
        pvc_path("data") + "/status",
    ]


def test_pre_bound_both_ways_bind_without_the_controllers_annotation() -> None:
    h = Harness(volumes=[pv("mine", "5Gi", ref={"name": "data"}), pv("fit")], claims=[claim()])
    h.sync("claim/ns/data")
    assert h.volume("mine")["spec"]["claimRef"]["uid"] == "data-uid"
    assert views.ANN_BOUND_BY_CONTROLLER not in h.volume("mine")["metadata"]["annotations"]
    assert h.claim()["metadata"]["annotations"] == {
        views.ANN_BIND_COMPLETED: "yes",
        views.ANN_BOUND_BY_CONTROLLER: "yes",
    }

    h = Harness(volumes=[pv("fit"), pv("named", "5Gi")], claims=[claim(volume="named")])
    h.sync("claim/ns/data")
    assert h.volume("named")["metadata"]["annotations"] == {views.ANN_BOUND_BY_CONTROLLER: "yes"}
    assert h.claim()["metadata"]["annotations"] == {views.ANN_BIND_COMPLETED: "yes"}
    assert h.claim()["status"]["phase"] == "Bound"


def test_no_match_and_no_class_is_failed_binding_and_a_retry_after_the_sync_period() -> None:
    h = Harness(volumes=[pv("small", "100Mi")], claims=[claim()])
    assert h.sync("claim/ns/data") == runtime.Result(requeue_after=pvc.SYNC_PERIOD)
    assert h.recorder.events == [
        (
            "data",
            "Normal",
            "FailedBinding",
            "no persistent volumes available for this claim and no storage class is set",
        )
    ]
    assert h.client.calls("patch") == []  # already Pending


def test_a_claim_with_a_class_is_handed_to_the_external_provisioner() -> None:
    h = Harness(claims=[claim(cls="fast")], classes=[storage_class("fast")])
    h.sync("claim/ns/data")
    ann = h.claim()["metadata"]["annotations"]
    assert ann == {
        views.ANN_STORAGE_PROVISIONER: "csi.sim.kcm.dev",
        views.ANN_BETA_STORAGE_PROVISIONER: "csi.sim.kcm.dev",
    }
    assert h.reasons() == ["ExternalProvisioning"]
    assert "external provisioner 'csi.sim.kcm.dev'" in h.recorder.events[0][3]


def test_provisioning_fails_without_the_class_or_with_an_in_tree_plugin() -> None:
    h = Harness(claims=[claim(cls="gone")])
    h.sync("claim/ns/data")
    assert h.recorder.events == [
        ("data", "Warning", "ProvisioningFailed", 'storageclass.storage.k8s.io "gone" not found')
    ]
    h = Harness(
        claims=[claim(cls="local")],
        classes=[storage_class("local", provisioner="kubernetes.io/no-provisioner")],
    )
    h.sync("claim/ns/data")
    assert h.recorder.events[0][2:] == (
        "ProvisioningFailed",
        "no volume plugin matched name: kubernetes.io/no-provisioner",
    )
    h = Harness(
        claims=[claim(cls="ebs")], classes=[storage_class("ebs", provisioner="kubernetes.io/aws-ebs")]
    )
    h.sync("claim/ns/data")
    assert h.claim()["metadata"]["annotations"][views.ANN_STORAGE_PROVISIONER] == "ebs.csi.aws.com"


def _pod(name: str, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]}
    if node:
        spec["nodeName"] = node
    return {"kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": spec}


def test_wait_for_first_consumer_events_and_provisioning_once_a_node_is_selected() -> None:
    wffc = storage_class("late", mode="WaitForFirstConsumer")
    h = Harness(volumes=[pv("fit", cls="late")], claims=[claim(cls="late")], classes=[wffc])
    h.sync("claim/ns/data")
    assert h.recorder.events == [
        ("data", "Normal", "WaitForFirstConsumer", "waiting for first consumer to be created before binding")
    ]
    assert "claimRef" not in h.volume("fit")["spec"]  # the scheduler picks the volume

    h = Harness(claims=[claim(cls="late")], classes=[wffc], pods=[_pod("b"), _pod("a"), _pod("ran", "n1")])
    h.sync("claim/ns/data")
    assert h.recorder.events[0][2:] == ("WaitForPodScheduled", "waiting for pods a,b to be scheduled")

    h = Harness(claims=[claim(cls="late", annotations={views.ANN_SELECTED_NODE: "n1"})], classes=[wffc])
    h.sync("claim/ns/data")
    assert h.reasons() == ["ExternalProvisioning"]


def test_a_named_volume_that_does_not_fit_is_a_volume_mismatch() -> None:
    h = Harness(volumes=[pv("tiny", "1Mi")], claims=[claim(volume="tiny")])
    h.sync("claim/ns/data")
    assert h.recorder.events == [
        (
            "data",
            "Warning",
            "VolumeMismatch",
            'Cannot bind to requested volume "tiny": requested PV is too small',
        )
    ]
    assert "claimRef" not in h.volume("tiny")["spec"]


def test_the_default_class_is_assigned_to_a_claim_without_one() -> None:
    h = Harness(claims=[claim(cls=None)], classes=[storage_class("standard", default=True)])
    assert h.sync("claim/ns/data") is None
    assert h.claim()["spec"]["storageClassName"] == "standard"


def _bound(vol: str = "v", **kw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    done = {views.ANN_BIND_COMPLETED: "yes", views.ANN_BOUND_BY_CONTROLLER: "yes"}
    return (
        pv(vol, ref={"name": "data", "uid": "data-uid"}, phase="Bound", **kw),
        claim(volume=vol, annotations=done, phase="Bound"),
    )


def test_a_volume_whose_claim_is_gone_is_released_and_retained() -> None:
    vol, _ = _bound()
    h = Harness(volumes=[vol])
    h.sync("volume/v")
    assert h.volume("v")["status"]["phase"] == "Released"
    assert h.client.calls("get") == [("get", pvc_path("data"), None)]  # the cache may be behind
    assert h.recorder.events == []


def test_delete_waits_for_an_external_deleter_and_fails_without_one() -> None:
    provisioned, _ = _bound(
        policy="Delete", annotations={views.ANN_DYNAMICALLY_PROVISIONED: "csi.sim.kcm.dev"}
    )
    static_csi, _ = _bound(policy="Delete")  # upstream findDeletablePlugin: CSI is external
    for vol in (provisioned, static_csi):
        h = Harness(volumes=[vol])
        h.sync("volume/v")
        assert h.volume("v")["status"]["phase"] == "Released"
        assert h.client.calls("delete") == []
        assert h.recorder.events == []

    vol, _ = _bound(policy="Delete", source={"nfs": {"server": "nfs.example", "path": "/v"}})
    h = Harness(volumes=[vol])
    h.sync("volume/v")
    message = 'error getting deleter volume plugin for volume "v": no deletable volume plugin matched'
    assert h.volume("v")["status"] == {"phase": "Failed", "message": message}
    assert h.recorder.events == [("v", "Warning", "VolumeFailedDelete", message)]


def test_a_named_volume_held_by_another_claim_is_failed_binding() -> None:
    held = pv("v", ref={"name": "other", "uid": "other-uid"}, phase="Bound")
    h = Harness(volumes=[held], claims=[claim(volume="v")])
    assert h.sync("claim/ns/data") is not None  # Pending, retried after the sync period
    assert h.claim()["status"]["phase"] == "Pending"
    message = 'volume "v" already bound to a different claim.'
    assert h.recorder.events == [("data", "Warning", "FailedBinding", message)]


def test_a_bound_claim_whose_volume_is_gone_is_lost() -> None:
    _, c = _bound()
    h = Harness(claims=[c])
    h.sync("claim/ns/data")
    assert h.claim()["status"]["phase"] == "Lost"
    assert h.recorder.events == [
        (
            "data",
            "Warning",
            "ClaimLost",
            "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
        )
    ]


def test_a_claim_already_lost_keeps_its_status_and_gets_no_second_event() -> None:
    _, c = _bound()
    c["status"] = {"phase": "Lost", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}
    h = Harness(claims=[c])
    h.sync("claim/ns/data")
    assert h.client.calls("patch") == []  # upstream updateClaimStatusWithEvent: same phase, no write
    assert h.recorder.events == []


def test_a_bound_claim_whose_volume_names_another_claim_is_misbound() -> None:
    # The differential's attachdetach scenario on its second side: the first side's volume of
    # the same name still holds that side's claim (same name, another namespace and uid) when
    # the hand-bound claim arrives; upstream syncBoundClaim calls it misbound, not lost.
    held = pv("v", ref={"namespace": "earlier", "name": "data", "uid": "earlier-uid"}, phase="Bound")
    _, c = _bound()
    h = Harness(volumes=[held], claims=[c])
    h.sync("claim/ns/data")
    assert h.claim()["status"] == {"phase": "Lost"}
    assert h.recorder.events == [
        (
            "data",
            "Warning",
            "ClaimMisbound",
            "Two claims are bound to the same volume, this one is bound incorrectly",
        )
    ]
    assert [path for _, path, _ in h.client.calls("patch")] == [pvc_path("data") + "/status"]


def test_a_volume_and_claim_bound_to_each_other_are_left_alone() -> None:
    vol, c = _bound()
    c["status"] = {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}
    h = Harness(volumes=[vol], claims=[c])
    h.sync("volume/v")
    h.sync("claim/ns/data")
    assert h.client.calls() == []


def test_a_volume_the_controller_bound_to_a_claim_bound_elsewhere_is_unbound() -> None:
    vol = pv(
        "v",
        ref={"name": "data", "uid": "data-uid"},
        phase="Bound",
        annotations={views.ANN_BOUND_BY_CONTROLLER: "yes"},
    )
    c = claim(volume="other", annotations={views.ANN_BIND_COMPLETED: "yes"}, phase="Bound")
    h = Harness(volumes=[vol], claims=[c])
    h.sync("volume/v")
    assert "claimRef" not in h.volume("v")["spec"]
    assert h.volume("v")["metadata"]["annotations"] == {}
    assert h.volume("v")["status"]["phase"] == "Available"


def test_handlers_enqueue_the_other_side() -> None:
    _, c = _bound()
    h = Harness(claims=[claim()])
    caches.deliver(h.ctrl.volumes, "ADDED", pv("new", ref={"name": "data", "uid": "data-uid"}))
    assert h.enqueued == ["volume/new", "claim/ns/data"]
    h.enqueued.clear()
    c["metadata"]["resourceVersion"] = "2"
    caches.deliver(h.ctrl.claims, "MODIFIED", c)
    caches.deliver(h.ctrl.claims, "DELETED", c)
    assert h.enqueued == ["claim/ns/data", "volume/v"]
