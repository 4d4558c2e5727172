"""The ephemeral-volume controller: the claim a volume gets (name, owner, the template's labels,
annotations and spec), whether an existing claim is the pod's (upstream's text when not), and
the sync against the testing kit's fake client (create, leave alone, FailedBinding)."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from kcm_controllers.ephemeral import claims
from kcm_controllers.ephemeral import controller as ephemeral_controller
from kcm_shared.client import kubeclient
from kcm_shared.runtime import events
from kcm_shared.testing import caches, fakeclient

NS = "default"
TEMPLATE = {
    "metadata": {"labels": {"tier": "cache"}, "annotations": {"a": "b"}},
    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}},
}


def pod_doc(*, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web", "namespace": NS, "uid": "pod-uid"}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-29T12:00:00Z"
    volumes = [
        {"name": "cfg", "configMap": {"name": "c"}},
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": TEMPLATE}},
    ]
    return {"kind": "Pod", "metadata": meta, "spec": {"volumes": volumes}}


def claim_doc(owner_uid: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web-scratch", "namespace": NS, "uid": "claim-uid"}
    if owner_uid is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": owner_uid, "controller": True}
        ]
    return {"kind": "PersistentVolumeClaim", "metadata": meta}


def _view(doc: dict[str, Any], view: type[Any]) -> Any:
    return msgspec.json.decode(msgspec.json.encode(doc), type=view)


def test_the_claim_is_named_for_pod_and_volume_and_owned_by_the_pod() -> None:
    pod = _view(pod_doc(), claims.PodView)
    (volume,) = claims.ephemeral_volumes(pod)
    assert claims.claim_keys(pod) == [f"{NS}/web-scratch"]
    assert claims.new_claim(pod, volume) == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "web-scratch",
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": "web",
                    "uid": "pod-uid",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "annotations": {"a": "b"},
            "labels": {"tier": "cache"},
        },
        "spec": TEMPLATE["spec"],
    }


@pytest.mark.parametrize(
    ("owner", "why"),
    [
        ("pod-uid", None),
        ("other", f"PVC {NS}/web-scratch was not created for pod {NS}/web (pod is not owner)"),
        (None, f"PVC {NS}/web-scratch was not created for pod {NS}/web (pod is not owner)"),
    ],
)
def test_an_existing_claim_is_the_pods_only_if_the_pod_controls_it(
    owner: str | None, why: str | None
) -> None:
    pod = _view(pod_doc(), claims.PodView)
    assert claims.not_for_pod(pod, _view(claim_doc(owner), claims.ClaimView)) == why


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def event(self, _obj: Any, type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))


def _sync(
    pod: dict[str, Any], existing: list[dict[str, Any]], *, fails: bool = False
) -> tuple[fakeclient.FakeClient, Recorder]:
    client = fakeclient.FakeClient()
    recorder = Recorder()
    ec = ephemeral_controller.EphemeralController(
        client,
        caches.new(ephemeral_controller.PODS, claims.PodView, [pod]),
        caches.new(ephemeral_controller.CLAIMS, claims.ClaimView, existing),
        lambda _key: None,
        recorder,  # type: ignore[arg-type]  # duck-typed stand-in for events.EventRecorder
    )
    if fails:
        with pytest.raises(ephemeral_controller.VolumeError):  # retried with backoff
            asyncio.run(ec.reconcile(f"{NS}/web"))
    else:
        asyncio.run(ec.reconcile(f"{NS}/web"))
    return client, recorder


def test_a_missing_claim_is_created() -> None:
    client, recorder = _sync(pod_doc(), [])
    (created,) = [body for verb, _, body in client.calls("create")]
    assert created["metadata"]["name"] == "web-scratch"
    assert client.calls("create")[0][1] == kubeclient.resource_path("", "v1", "persistentvolumeclaims", NS)
    assert recorder.events == []


def test_the_pods_own_claim_and_a_deleting_pod_are_left_alone() -> None:
    assert _sync(pod_doc(), [claim_doc("pod-uid")])[0].calls() == []
    assert _sync(pod_doc(deleting=True), [])[0].calls() == []


def test_someone_elses_claim_is_a_failed_binding_and_a_retry() -> None:
    client, recorder = _sync(pod_doc(), [claim_doc("other")], fails=True)
    assert client.calls() == []
    assert recorder.events == [
        (
            events.WARNING,
            "FailedBinding",
            f"ephemeral volume scratch: PVC {NS}/web-scratch was not created for pod {NS}/web (pod is not owner)",
        )
    ]
