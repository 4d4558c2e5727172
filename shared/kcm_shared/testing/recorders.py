"""Recording fakes of the Event recorder and of pod control, for tests (upstream's
record.FakeRecorder and controller.FakePodControl are the model).

- `RecordingEventRecorder` is a `runtime.events.EventRecorder` that keeps each event it is
  given in `events`, as a `RecordedEvent` tuple (type, reason, message, involved object),
  instead of writing it.
- `RecordingPodControl` is a `controllerutil.podcontrol.PodControl` that records the pods it
  is asked to create and delete, and fails every call with `err` when it is set.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kcm_shared.apimachinery import codec
from kcm_shared.controllerutil import podcontrol
from kcm_shared.runtime import events
from kcm_shared.testing import fakeclient


class RecordedEvent(NamedTuple):
    type: str
    reason: str
    message: str
    involved: Mapping[str, str]  # the involvedObject the Event would name (events.reference)


class RecordingEventRecorder(events.EventRecorder):
    def __init__(self, component: str = "test") -> None:
        super().__init__(fakeclient.FakeClient(), component)
        self.events: list[RecordedEvent] = []

    def event(
        self,
        obj: codec.Meta | Mapping[str, Any],
        type_: str,
        reason: str,
        message: str,
        *,
        host: str | None = None,
    ) -> None:
        self.events.append(RecordedEvent(type_, reason, message, events.reference(obj)))

    def seen(self) -> list[tuple[str, str, str]]:
        """(type, reason, message) of each event, in order."""
        return [(e.type, e.reason, e.message) for e in self.events]

    def reasons(self) -> list[str]:
        return [e.reason for e in self.events]


@dataclass
class RecordingPodControl:
    templates: list[podcontrol.PodTemplate] = field(default_factory=list)
    refs: list[codec.OwnerReference] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    generate_names: list[str | None] = field(default_factory=list)
    err: Exception | None = None

    async def create_pods(
        self,
        namespace: str,
        template: podcontrol.PodTemplate,
        owner: codec.Meta,
        ref: codec.OwnerReference,
        *,
        generate_name: str | None = None,
    ) -> None:
        self.templates.append(template)
        self.generate_names.append(generate_name)
        self.refs.append(ref)
        if self.err is not None:
            raise self.err

    async def delete_pod(self, namespace: str, name: str, owner: codec.Meta) -> None:
        self.deleted.append(name)
        if self.err is not None:
            raise self.err
