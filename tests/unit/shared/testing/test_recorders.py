"""kcm_shared.testing.recorders: the recording Event recorder and pod control."""

from __future__ import annotations

import asyncio

import msgspec
import pytest
from kcm_shared.apimachinery import codec
from kcm_shared.controllerutil import podcontrol
from kcm_shared.runtime import events
from kcm_shared.testing import recorders

OWNER = codec.decode(
    b'{"kind": "ReplicaSet", "apiVersion": "apps/v1", "metadata": {"name": "web", "namespace": "ns", "uid": "u1"}}',
    codec.Meta,
)
REF = codec.OwnerReference(api_version="apps/v1", kind="ReplicaSet", name="web", uid="u1", controller=True)


def test_events_are_kept_with_the_object_they_name() -> None:
    recorder = recorders.RecordingEventRecorder()
    recorder.event(OWNER, events.NORMAL, "SuccessfulCreate", "Created pod: web-1")
    recorder.event({"kind": "Node", "metadata": {"name": "n1"}}, events.WARNING, "Odd", "odd")
    assert recorder.seen() == [
        (events.NORMAL, "SuccessfulCreate", "Created pod: web-1"),
        (events.WARNING, "Odd", "odd"),
    ]
    assert recorder.reasons() == ["SuccessfulCreate", "Odd"]
    assert recorder.events[1] == (events.WARNING, "Odd", "odd", {"kind": "Node", "name": "n1"})  # a tuple
    assert recorder.events[0].involved == {
        "kind": "ReplicaSet",
        "apiVersion": "apps/v1",
        "namespace": "ns",
        "name": "web",
        "uid": "u1",
    }


def test_pod_control_records_calls_and_fails_them_when_told() -> None:
    control = recorders.RecordingPodControl()
    template = msgspec.convert({"metadata": {"labels": {"app": "web"}}}, podcontrol.PodTemplate)
    asyncio.run(control.create_pods("ns", template, OWNER, REF, generate_name="web-x-"))
    asyncio.run(control.delete_pod("ns", "web-1", OWNER))
    assert (control.templates, control.refs, control.generate_names) == ([template], [REF], ["web-x-"])
    assert control.deleted == ["web-1"]
    control.err = RuntimeError("quota")
    with pytest.raises(RuntimeError, match="quota"):
        asyncio.run(control.delete_pod("ns", "web-2", OWNER))
    assert control.deleted == ["web-1", "web-2"]  # recorded, then failed
