"""The simulated CSI driver's sidecars against the testing kit's fake client: provisioning (the
PV created, Provisioning and ProvisioningSucceeded, or ProvisioningFailed and a retry), deletion
(our finalizer lifted, then the PV deleted), the resizer's steps and the node's expansion, and
a pod waiting for its claims to be Bound."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kcm_shared.client import kubeclient
from kcm_shared.runtime import events
from kcm_shared.testing import fakeclient, recorders
from kcm_simulator import csi, defaults, volumes
from kcm_simulator.calls import Writer

Obj = dict[str, Any]
NS = "ns"
NODE = {"metadata": {"name": "sim-node-0", "labels": {volumes.ZONE_LABEL: "zone-a"}}}
CLAIM_PATH = kubeclient.resource_path("", "v1", "persistentvolumeclaims", NS, "data")


def _claim(**status: Any) -> Obj:
    annotations = {volumes.PROVISIONER_ANNOTATION: volumes.DRIVER, volumes.SELECTED_NODE: "sim-node-0"}
    return {
        "metadata": {"name": "data", "namespace": NS, "uid": "u1", "annotations": annotations},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": "standard",
        },
        "status": {"phase": "Pending", **status},
    }


def _driver(
    storage_class: Obj = defaults.STORAGE_CLASS,
) -> tuple[csi.Driver, fakeclient.FakeClient, csi.VolumeStore]:
    client = fakeclient.FakeClient()
    store = csi.VolumeStore()
    driver = csi.Driver(client, Writer(), store, lambda node: node == "sim-node-0")
    driver.provisioner = recorders.RecordingEventRecorder("provisioner")
    driver.resizer = recorders.RecordingEventRecorder("resizer")
    driver.kubelet = recorders.RecordingEventRecorder("kubelet")
    driver.on_class("ADDED", storage_class)
    driver.on_node("ADDED", NODE)
    return driver, client, store


def _seen(recorder: events.EventRecorder) -> list[tuple[str, str, str]]:
    assert isinstance(recorder, recorders.RecordingEventRecorder)
    return recorder.seen()


def test_a_handed_over_claim_gets_its_pv_and_the_provisioners_events() -> None:
    driver, client, store = _driver()
    store.set_claim("ADDED", _claim())
    asyncio.run(driver._sync_claim(f"{NS}/data"))
    [(_, path, pv)] = client.calls("create")
    assert path == kubeclient.resource_path("", "v1", "persistentvolumes")
    assert pv["metadata"]["name"] == "pvc-u1"
    assert pv["spec"]["csi"]["volumeAttributes"][volumes.PROVISIONER_IDENTITY] == driver.identity
    assert _seen(driver.provisioner) == [
        (events.NORMAL, "Provisioning", f'External provisioner is provisioning volume for claim "{NS}/data"'),
        (events.NORMAL, "ProvisioningSucceeded", "Successfully provisioned volume pvc-u1"),
    ]


def test_a_failing_create_volume_is_reported_and_retried() -> None:
    failing = {**defaults.STORAGE_CLASS, "parameters": {volumes.FAIL_PARAMETER: "no space"}}
    driver, client, store = _driver(failing)
    store.set_claim("ADDED", _claim())
    with pytest.raises(volumes.ProvisioningError):
        asyncio.run(driver._sync_claim(f"{NS}/data"))
    assert client.calls("create") == []
    assert _seen(driver.provisioner)[-1] == (
        events.WARNING,
        "ProvisioningFailed",
        'failed to provision volume with StorageClass "standard": rpc error: code = Internal desc = no space',
    )


def test_a_released_pv_loses_our_finalizer_and_is_deleted() -> None:
    driver, client, store = _driver()
    pv = volumes.new_volume(_claim(), defaults.STORAGE_CLASS, NODE, "i")
    pv["metadata"].update(
        uid="pv-uid", resourceVersion="3", finalizers=["kubernetes.io/pv-protection", volumes.FINALIZER]
    )
    pv["status"] = {"phase": "Released"}
    path = kubeclient.resource_path("", "v1", "persistentvolumes", name="pvc-u1")
    client.add(path, pv)
    store.set_pv("ADDED", pv)
    asyncio.run(driver._delete("pvc-u1"))
    assert [verb for verb, _, _ in client.calls()] == ["patch", "delete"]
    assert client.calls("patch")[0][2]["metadata"]["finalizers"] == ["kubernetes.io/pv-protection"]


def test_a_grown_claim_is_resized_then_finished_by_the_node_that_mounts_it() -> None:
    driver, client, store = _driver()
    pv = volumes.new_volume(_claim(), defaults.STORAGE_CLASS, NODE, "i")
    pv_path = kubeclient.resource_path("", "v1", "persistentvolumes", name="pvc-u1")
    client.add(pv_path, pv)
    store.set_pv("ADDED", pv)
    claim = _claim(phase="Bound", capacity={"storage": "1Gi"})
    claim["spec"].update(volumeName="pvc-u1", resources={"requests": {"storage": "2Gi"}})
    client.add(CLAIM_PATH, claim)
    store.set_claim("ADDED", claim)
    asyncio.run(driver._sync_claim(f"{NS}/data"))
    assert client.objects[pv_path]["spec"]["capacity"] == {"storage": "2Gi"}
    pending = client.objects[CLAIM_PATH]["status"]
    assert [c["type"] for c in pending["conditions"]] == [volumes.FS_RESIZE_PENDING]
    assert pending["capacity"] == {"storage": "1Gi"}  # the filesystem is not grown yet
    assert [reason for _, reason, _ in _seen(driver.resizer)] == ["Resizing", "FileSystemResizeRequired"]

    # A running pod on our node uses it: the kubelet grows the filesystem.
    store.set_pv("MODIFIED", client.objects[pv_path])
    store.set_claim("MODIFIED", client.objects[CLAIM_PATH])
    pod = {
        "metadata": {"name": "web-0", "namespace": NS},
        "spec": {
            "nodeName": "sim-node-0",
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}],
        },
        "status": {"phase": "Running"},
    }
    driver.on_pod("MODIFIED", pod)
    asyncio.run(driver._sync_claim(f"{NS}/data"))
    done = client.objects[CLAIM_PATH]["status"]
    assert done["capacity"] == {"storage": "2Gi"} and not done.get("conditions")
    assert _seen(driver.kubelet) == [
        (
            events.NORMAL,
            "FileSystemResizeSuccessful",
            'MountVolume.NodeExpandVolume succeeded for volume "pvc-u1" sim-node-0',
        )
    ]


def test_a_pod_waits_until_each_of_its_claims_is_bound() -> None:
    async def scenario() -> None:
        store = csi.VolumeStore()
        store.set_claim("ADDED", _claim())
        waiting = asyncio.ensure_future(store.wait_bound([f"{NS}/data"]))
        await asyncio.sleep(0)
        assert not waiting.done()
        store.set_claim("MODIFIED", _claim(phase="Bound"))
        await asyncio.wait_for(waiting, 5)
        # Already Bound: no wait at all.
        await asyncio.wait_for(store.wait_bound([f"{NS}/data"]), 5)

    asyncio.run(scenario())
