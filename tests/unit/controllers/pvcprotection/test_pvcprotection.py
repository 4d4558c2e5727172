"""The PVC and PV protection controllers: which pod keeps a claim (upstream
pvc_protection_controller_test.go's podUsesPVC cases), which pod events can free one, and the
syncs against the testing kit's fake client (finalizer kept, removed, added)."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from kcm_controllers.pvcprotection import controller as pvc_controller
from kcm_controllers.pvcprotection import usage
from kcm_controllers.pvprotection import controller as pv_controller
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import volumeprotection
from kcm_shared.testing import caches, fakeclient

NS = "default"
DELETED_AT = "2026-11-29T12:00:00Z"
CLAIM_PATH = kubeclient.resource_path("", "v1", "persistentvolumeclaims", NS, "data")
POD_UID = "pod-uid"


def claim(
    *,
    deleting: bool = True,
    finalizers: tuple[str, ...] = (volumeprotection.PVC_FINALIZER,),
    owner: str | None = None,
    name: str = "data",
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": "claim-uid", "finalizers": list(finalizers)}
    if deleting:
        meta["deletionTimestamp"] = DELETED_AT
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": owner, "controller": True}
        ]
    return {"kind": "PersistentVolumeClaim", "metadata": meta}


def pod(
    *,
    node: str = "node-1",
    phase: str = "Running",
    volume: dict[str, Any] | None = None,
    deleted_grace: int | None = None,
    running: bool = True,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web", "namespace": NS, "uid": POD_UID}
    if deleted_grace is not None:
        meta["deletionTimestamp"] = DELETED_AT
        meta["deletionGracePeriodSeconds"] = deleted_grace
    vol = volume if volume is not None else {"name": "v", "persistentVolumeClaim": {"claimName": "data"}}
    state = {"running": {}} if running else {"terminated": {"exitCode": 0}}
    return {
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": node, "volumes": [vol]},
        "status": {"phase": phase, "containerStatuses": [{"name": "c", "state": state}]},
    }


EPHEMERAL = {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}


def _view(doc: dict[str, Any], view: type[Any]) -> Any:
    return msgspec.json.decode(msgspec.json.encode(doc), type=view)


@pytest.mark.parametrize(
    ("case", "pod_doc", "claim_doc", "uses"),
    [
        ("scheduled pod naming the claim", pod(), claim(), True),
        ("unscheduled pod", pod(node=""), claim(), False),
        ("finished pod still keeps a claim it names directly", pod(phase="Succeeded"), claim(), True),
        (
            "pod naming another claim",
            pod(volume={"name": "v", "persistentVolumeClaim": {"claimName": "x"}}),
            claim(),
            False,
        ),
        (
            "ephemeral claim made for the pod",
            pod(volume=EPHEMERAL),
            claim(name="web-scratch", owner=POD_UID),
            True,
        ),
        (
            "ephemeral claim of that name owned by another",
            pod(volume=EPHEMERAL),
            claim(name="web-scratch", owner="other"),
            False,
        ),
        (
            "ephemeral claim of a pod deleted with grace 0",
            pod(volume=EPHEMERAL, deleted_grace=0),
            claim(name="web-scratch", owner=POD_UID),
            False,
        ),
        (
            "ephemeral claim of a pod deleted with grace 30",
            pod(volume=EPHEMERAL, deleted_grace=30),
            claim(name="web-scratch", owner=POD_UID),
            True,
        ),
    ],
)
def test_pod_uses_claim(case: str, pod_doc: dict[str, Any], claim_doc: dict[str, Any], uses: bool) -> None:
    assert usage.pod_uses_claim(_view(pod_doc, usage.PodView), _view(claim_doc, usage.ClaimView)) is uses, (
        case
    )


@pytest.mark.parametrize(
    ("case", "pod_doc", "deleted", "frees"),
    [
        ("running scheduled pod", pod(), False, False),
        ("deleted pod", pod(), True, True),
        ("finished pod", pod(phase="Failed"), False, True),
        ("unscheduled pod", pod(node=""), False, True),
        ("deleting pod with a running container", pod(deleted_grace=30), False, False),
        ("deleting pod with nothing running", pod(deleted_grace=30, running=False), False, True),
    ],
)
def test_which_pod_events_can_free_a_claim(
    case: str, pod_doc: dict[str, Any], deleted: bool, frees: bool
) -> None:
    assert usage.can_release(_view(pod_doc, usage.PodView), deleted=deleted) is frees, case


def test_claim_keys_name_direct_and_ephemeral_claims() -> None:
    doc = pod()
    doc["spec"]["volumes"].append(EPHEMERAL)
    doc["spec"]["volumes"].append({"name": "cfg", "configMap": {"name": "c"}})
    assert usage.claim_keys(_view(doc, usage.PodView)) == [f"{NS}/data", f"{NS}/web-scratch"]


def _sync_claim(
    cached_claim: dict[str, Any], cached_pods: list[dict[str, Any]], live_pods: list[dict[str, Any]]
) -> fakeclient.FakeClient:
    client = fakeclient.FakeClient({CLAIM_PATH: cached_claim})
    for i, p in enumerate(live_pods):
        client.add(kubeclient.resource_path("", "v1", "pods", NS, f"live-{i}"), p)
    claims = caches.new(pvc_controller.CLAIMS, usage.ClaimView, [cached_claim])
    pods = caches.new(pvc_controller.PODS, usage.PodView, cached_pods)
    pc = pvc_controller.PVCProtectionController(client, claims, pods, lambda _key: None)
    pc.register()
    asyncio.run(pc.reconcile(f"{NS}/data"))
    return client


def _finalizers(client: fakeclient.FakeClient, path: str) -> list[str]:
    return list(client.objects[path]["metadata"].get("finalizers", []))


def test_a_deleted_claim_used_by_a_cached_pod_keeps_its_finalizer_without_a_live_list() -> None:
    client = _sync_claim(claim(), [pod()], [pod()])
    assert client.calls() == []


def test_a_pod_only_the_api_server_knows_keeps_the_claim() -> None:
    client = _sync_claim(claim(), [], [pod()])
    assert [verb for verb, _, _ in client.calls()] == ["list"]
    assert _finalizers(client, CLAIM_PATH) == [volumeprotection.PVC_FINALIZER]


def test_an_unused_deleted_claim_loses_only_its_protection_finalizer() -> None:
    doc = claim(finalizers=("example.com/keep", volumeprotection.PVC_FINALIZER))
    client = _sync_claim(doc, [pod(node="")], [pod(node="")])
    assert _finalizers(client, CLAIM_PATH) == ["example.com/keep"]
    (patch,) = [body for verb, _, body in client.calls("patch")]
    assert patch["metadata"]["uid"] == "claim-uid"  # never another claim of that name


def test_a_live_claim_without_the_finalizer_gets_it() -> None:
    client = _sync_claim(claim(deleting=False, finalizers=()), [], [])
    assert _finalizers(client, CLAIM_PATH) == [volumeprotection.PVC_FINALIZER]
    assert [verb for verb, _, _ in client.calls()] == ["patch"]


PV_PATH = kubeclient.resource_path("", "v1", "persistentvolumes", None, "pv-1")


def _sync_pv(phase: str, *, deleting: bool, finalizers: tuple[str, ...]) -> fakeclient.FakeClient:
    meta: dict[str, Any] = {"name": "pv-1", "uid": "pv-uid", "finalizers": list(finalizers)}
    if deleting:
        meta["deletionTimestamp"] = DELETED_AT
    doc = {"kind": "PersistentVolume", "metadata": meta, "status": {"phase": phase}}
    client = fakeclient.FakeClient({PV_PATH: doc})
    volumes = caches.new(pv_controller.VOLUMES, pv_controller.VolumeView, [doc])
    pc = pv_controller.PVProtectionController(client, volumes, lambda _key: None)
    asyncio.run(pc.reconcile("pv-1"))
    return client


@pytest.mark.parametrize(
    ("phase", "deleting", "finalizers", "after"),
    [
        ("Bound", True, (volumeprotection.PV_FINALIZER,), [volumeprotection.PV_FINALIZER]),
        ("Released", True, (volumeprotection.PV_FINALIZER,), []),
        ("Available", True, (volumeprotection.PV_FINALIZER,), []),
        ("Available", False, (), [volumeprotection.PV_FINALIZER]),
        ("Bound", False, (volumeprotection.PV_FINALIZER,), [volumeprotection.PV_FINALIZER]),
    ],
)
def test_pv_finalizer(phase: str, deleting: bool, finalizers: tuple[str, ...], after: list[str]) -> None:
    client = _sync_pv(phase, deleting=deleting, finalizers=finalizers)
    assert _finalizers(client, PV_PATH) == after
