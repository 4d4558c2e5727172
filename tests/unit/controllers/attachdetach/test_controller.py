"""The attach/detach controller's reconcile against the testing kit's fake client and caches
filled by hand: what it writes, and that a reconcile run again before the caches show its own
writes (its node-status write enqueues the node again) repeats none of them, as upstream's
pending operations keep an attach or detach from being started twice."""

from __future__ import annotations

import asyncio
from typing import Any

import prometheus_client
from kcm_controllers.attachdetach import controller as adc
from kcm_controllers.attachdetach import names, plan, views
from kcm_shared.client import kubeclient
from kcm_shared.testing import caches, fakeclient, recorders

DRIVER = "csi.sim.kcm.dev"
NODE = "n1"
VA = names.attachment_name("h1", DRIVER, NODE)
UNIQUE = names.unique_volume_name(DRIVER, "h1")
NODE_PATH = kubeclient.resource_path("", "v1", "nodes", name=NODE)
VA_PATH = kubeclient.resource_path("storage.k8s.io", "v1", "volumeattachments", name=VA)


def _node(*, taints: list[dict[str, str]] | None = None, in_use: list[str] | None = None) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {
            "name": NODE,
            "resourceVersion": "1",
            "annotations": {views.MANAGED_ANNOTATION: "true"},
        },
        "spec": {"taints": taints or []},
        "status": {"volumesInUse": in_use or []},
    }


def _attachment() -> dict[str, Any]:
    return {
        "kind": "VolumeAttachment",
        "metadata": {"name": VA, "resourceVersion": "1", "finalizers": ["external-attacher/csi-sim-kcm-dev"]},
        "spec": {"attacher": DRIVER, "nodeName": NODE, "source": {"persistentVolumeName": "pv1"}},
        "status": {"attached": True},
    }


def _volume() -> dict[str, Any]:
    return {
        "kind": "PersistentVolume",
        "metadata": {"name": "pv1", "resourceVersion": "1"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "csi": {"driver": DRIVER, "volumeHandle": "h1"},
            "claimRef": {"namespace": "ns", "name": "c", "uid": "cu"},
        },
    }


def _claim() -> dict[str, Any]:
    return {
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "c", "namespace": "ns", "uid": "cu", "resourceVersion": "1"},
        "spec": {"volumeName": "pv1"},
        "status": {"phase": "Bound"},
    }


def _pod() -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "uid": "pu", "resourceVersion": "1"},
        "spec": {"nodeName": NODE, "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]},
        "status": {"phase": "Pending"},
    }


class Harness:
    """The controller over caches that never change: every reconcile sees what the first saw."""

    def __init__(self, node: dict[str, Any], pods: list[dict[str, Any]]) -> None:
        self.client = fakeclient.FakeClient()
        self.client.add(NODE_PATH, node)
        self.client.add(VA_PATH, _attachment())
        self.recorder = recorders.RecordingEventRecorder("attachdetach-controller")
        self.queued: list[str] = []
        self.ctrl = adc.AttachDetachController(
            self.client,
            {
                adc.NODES: caches.new(adc.NODES, views.NodeView, [node]),
                adc.PODS: caches.new(adc.PODS, views.PodView, pods),
                adc.CLAIMS: caches.new(adc.CLAIMS, views.ClaimView, [_claim()]),
                adc.VOLUMES: caches.new(adc.VOLUMES, views.VolumeView, [_volume()]),
                adc.DRIVERS: caches.new(adc.DRIVERS, views.DriverView),
                adc.ATTACHMENTS: caches.new(adc.ATTACHMENTS, views.AttachmentView, [_attachment()]),
            },
            self.queued.append,
            self.recorder,
            settings=plan.Settings(max_wait=360.0, disable_force=False),
            sync_period=None,
        )
        self.ctrl.register()

    def reconcile(self) -> None:
        asyncio.run(self.ctrl.reconcile(NODE))


def _forced(reason: str) -> float:
    value = prometheus_client.REGISTRY.get_sample_value(
        "attachdetach_controller_forced_detaches_total", {"reason": reason}
    )
    return value or 0.0


def test_a_forced_detach_is_made_and_counted_once_while_the_cache_lags() -> None:
    taint = {"key": views.OUT_OF_SERVICE_TAINT, "effect": "NoExecute"}
    h = Harness(_node(taints=[taint], in_use=[UNIQUE]), pods=[])
    before = _forced(plan.FORCE_OUT_OF_SERVICE)
    h.reconcile()
    h.reconcile()
    assert [path for _, path, _ in h.client.calls("delete")] == [VA_PATH]
    assert _forced(plan.FORCE_OUT_OF_SERVICE) == before + 1


def test_an_attached_volume_is_reported_and_told_once_while_the_cache_lags() -> None:
    h = Harness(_node(), pods=[_pod()])
    h.reconcile()
    h.reconcile()
    assert [path for _, path, _ in h.client.calls("patch")] == [NODE_PATH + "/status"]
    assert h.client.objects[NODE_PATH]["status"]["volumesAttached"] == [{"name": UNIQUE, "devicePath": ""}]
    assert h.recorder.seen() == [
        ("Normal", "SuccessfulAttachVolume", 'AttachVolume.Attach succeeded for volume "pv1" ')
    ]
    assert h.client.calls("create", "delete") == []


def test_a_write_by_someone_else_is_not_hidden() -> None:
    """Once the cache shows a version the controller never wrote, that version decides."""
    h = Harness(_node(), pods=[_pod()])
    h.reconcile()
    cleared = {**_node(), "metadata": {**_node()["metadata"], "resourceVersion": "7"}}
    caches.deliver(h.ctrl.nodes, caches.MODIFIED, cleared)
    h.reconcile()
    assert len(h.client.calls("patch")) == 2


def test_only_a_pod_that_names_a_claim_enqueues_its_node() -> None:
    h = Harness(_node(), pods=[])
    plain = {**_pod(), "metadata": {**_pod()["metadata"], "name": "plain", "uid": "plain"}}
    plain["spec"] = {"nodeName": NODE, "volumes": [{"name": "t", "projected": {"sources": []}}]}
    caches.deliver(h.ctrl.pods, "ADDED", plain)
    caches.deliver(h.ctrl.pods, "DELETED", plain)
    assert h.queued == []
    caches.deliver(h.ctrl.pods, "ADDED", _pod())
    assert h.queued == [NODE]
