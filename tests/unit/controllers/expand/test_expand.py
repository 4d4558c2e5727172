"""The persistentvolume-expander controller: which claim updates it looks at, and its sync
against the testing kit's fake client (ExternalExpanding for a grown claim, nothing for one at
its size, a retry when the PV is not the claim's)."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from kcm_controllers.expand import controller as expand_controller
from kcm_controllers.expand import sizes
from kcm_shared.client import kubeclient
from kcm_shared.runtime import events
from kcm_shared.testing import caches, fakeclient, recorders

NS = "default"


def claim_doc(request: str, capacity: str | None = "1Gi", phase: str = "Bound") -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if capacity is not None:
        status["capacity"] = {"storage": capacity}
    return {
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": NS, "uid": "claim-uid"},
        "spec": {"volumeName": "pv-1", "resources": {"requests": {"storage": request}}},
        "status": status,
    }


def pv_doc(claim_uid: str = "claim-uid", annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "pv-1", "uid": "pv-uid"}
    if annotations:
        meta["annotations"] = annotations
    ref = {"kind": "PersistentVolumeClaim", "namespace": NS, "name": "data", "uid": claim_uid}
    return {"kind": "PersistentVolume", "metadata": meta, "spec": {"claimRef": ref, "csi": {"driver": "d"}}}


def _view(doc: dict[str, Any]) -> sizes.ClaimView:
    return msgspec.json.decode(msgspec.json.encode(doc), type=sizes.ClaimView)


@pytest.mark.parametrize(
    ("old", "new", "enqueued"),
    [
        (claim_doc("1Gi"), claim_doc("2Gi"), True),  # the user asked for more
        (claim_doc("2Gi", "1Gi"), claim_doc("2Gi", "2Gi"), True),  # a resize finished
        (claim_doc("2Gi"), claim_doc("1500Mi"), False),  # smaller: nothing to expand
        (claim_doc("1Gi", phase="Pending"), claim_doc("2Gi", phase="Pending"), False),  # not Bound
        (claim_doc("1Gi"), claim_doc("1024Mi"), False),  # the same size, written otherwise
    ],
)
def test_an_update_is_enqueued_only_when_a_bound_claim_grew(
    old: dict[str, Any], new: dict[str, Any], enqueued: bool
) -> None:
    seen: list[str] = []
    ec = _controller(fakeclient.FakeClient(), [], seen.append)
    ec._updated(_view(old), _view(new))
    assert seen == ([f"{NS}/data"] if enqueued else [])


def _controller(
    client: fakeclient.FakeClient, claims: list[dict[str, Any]], enqueue: Any = lambda _key: None
) -> expand_controller.ExpandController:
    return expand_controller.ExpandController(
        client,
        caches.new(expand_controller.CLAIMS, sizes.ClaimView, claims),
        enqueue,
        recorders.RecordingEventRecorder("volume_expand"),
    )


def _sync(claim: dict[str, Any], pv: dict[str, Any] | None) -> tuple[fakeclient.FakeClient, list[Any]]:
    client = fakeclient.FakeClient()
    if pv is not None:
        client.add(kubeclient.resource_path("", "v1", "persistentvolumes", name="pv-1"), pv)
    ec = _controller(client, [claim])
    asyncio.run(ec.reconcile(f"{NS}/data"))
    recorder = ec.recorder
    assert isinstance(recorder, recorders.RecordingEventRecorder)
    return client, recorder.seen()


def test_a_grown_csi_claim_is_left_to_the_external_resizer_with_an_event() -> None:
    client, seen = _sync(claim_doc("2Gi"), pv_doc())
    assert seen == [
        (events.NORMAL, "ExternalExpanding", "waiting for an external controller to expand this PVC")
    ]
    # Nothing written: no resizer annotation for a CSI PV, no status change.
    assert client.calls("create", "update", "patch") == []


def test_a_claim_at_its_size_needs_nothing_unless_the_pv_awaits_a_resize() -> None:
    assert _sync(claim_doc("1Gi"), pv_doc())[1] == []
    assert _sync(claim_doc("1Gi"), pv_doc(annotations={sizes.PRE_RESIZE_CAPACITY: "1Gi"}))[1] != []


def test_a_pv_of_another_claim_or_none_is_retried() -> None:
    with pytest.raises(
        expand_controller.NotBound, match="persistent Volume is not bound to PVC being updated"
    ):
        _sync(claim_doc("2Gi"), pv_doc(claim_uid="someone-else"))
    with pytest.raises(RuntimeError, match='failed to get PV "pv-1"'):
        _sync(claim_doc("2Gi"), None)


def test_a_deleted_claim_needs_nothing() -> None:
    client = fakeclient.FakeClient()
    asyncio.run(_controller(client, []).reconcile(f"{NS}/data"))
    assert client.calls() == []
