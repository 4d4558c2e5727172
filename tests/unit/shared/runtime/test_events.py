"""The event correlator steps (spam filter, aggregation, dedup) with a recording client and fake clock."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import uvloop
from kcm_shared.apimachinery import codec
from kcm_shared.client import kubeclient
from kcm_shared.runtime import events


class RecordingClient(kubeclient.KubeClient):
    """Stores created Events and applies count/message/lastTimestamp patches, like the API would."""

    def __init__(self) -> None:
        super().__init__(kubeclient.Connection("http://unused"))
        self.calls: list[tuple[str, str]] = []
        self.stored: dict[str, dict[str, Any]] = {}
        self.priorities: list[kubeclient.Priority] = []

    async def create(
        self,
        path: str,
        obj: dict[str, Any],
        params: Mapping[str, str] | None = None,
        *,
        priority: kubeclient.Priority = kubeclient.Priority.NORMAL,
    ) -> dict[str, Any]:
        self.priorities.append(priority)
        self.calls.append(("create", obj["metadata"]["name"]))
        self.stored[obj["metadata"]["name"]] = dict(obj)
        return obj

    async def patch(
        self,
        path: str,
        patch: Any,
        patch_type: str = "merge",
        params: Mapping[str, str] | None = None,
        *,
        priority: kubeclient.Priority = kubeclient.Priority.NORMAL,
    ) -> dict[str, Any]:
        self.priorities.append(priority)
        name = path.rsplit("/", 1)[1]
        self.calls.append(("patch", name))
        if name not in self.stored:
            raise kubeclient.ApiError(404, "NotFound", "gone")
        self.stored[name].update(patch)
        return self.stored[name]


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


RS = codec.decode(
    b'{"kind": "ReplicaSet", "apiVersion": "apps/v1", "metadata": {"name": "web", "namespace": "ns", "uid": "u1"}}',
    codec.Meta,
)


async def drain(recorder: events.EventRecorder) -> None:
    task = asyncio.create_task(recorder.run())
    try:
        await asyncio.wait_for(recorder.flush(), 5)
    finally:
        task.cancel()


def run(steps: Any) -> None:
    uvloop.run(steps())


def test_repeats_patch_one_event_and_a_new_window_creates_another() -> None:
    async def steps() -> None:
        client, clock = RecordingClient(), Clock()
        rec = events.EventRecorder(client, "rs-controller", "host-a", clock=clock)
        for _ in range(3):
            rec.event(RS, events.NORMAL, "SuccessfulCreate", "Created pod: a")
            clock.now += 1
        await drain(rec)
        first = client.calls[0][1]
        assert client.calls == [("create", first), ("patch", first), ("patch", first)]
        # Deferrable: behind the controller's own writes when the client's rate limit bites.
        assert client.priorities == [kubeclient.Priority.LOW] * 3
        assert first == f"web.{int(1_700_000_000 * 1e9):x}"
        stored = client.stored[first]
        assert stored["count"] == 3 and stored["metadata"]["namespace"] == "ns"
        assert stored["source"] == {"component": "rs-controller", "host": "host-a"}
        assert stored["involvedObject"] == {
            "kind": "ReplicaSet",
            "apiVersion": "apps/v1",
            "namespace": "ns",
            "name": "web",
            "uid": "u1",
        }
        assert (
            stored["firstTimestamp"] == "2023-11-14T22:13:20Z"
            and stored["lastTimestamp"] == "2023-11-14T22:13:22Z"
        )

        clock.now += events.WINDOW + 1
        rec.event(RS, events.NORMAL, "SuccessfulCreate", "Created pod: a")
        await drain(rec)
        assert client.calls[-1][0] == "create" and client.calls[-1][1] != first

    run(steps)


def test_patch_of_a_vanished_event_creates_it_again_with_the_count() -> None:
    async def steps() -> None:
        client, clock = RecordingClient(), Clock()
        rec = events.EventRecorder(client, "c", clock=clock)
        rec.event(RS, events.WARNING, "FailedCreate", "quota")
        await drain(rec)
        client.stored.clear()  # the API server's event TTL expired it
        rec.event(RS, events.WARNING, "FailedCreate", "quota")
        await drain(rec)
        assert [c[0] for c in client.calls] == ["create", "patch", "create"]
        (again,) = client.stored.values()
        assert again["count"] == 2

    run(steps)


def test_many_similar_messages_are_combined() -> None:
    async def steps() -> None:
        client, clock = RecordingClient(), Clock()
        rec = events.EventRecorder(client, "c", clock=clock)
        for i in range(events.MAX_SIMILAR + 2):
            rec.event(RS, events.NORMAL, "SuccessfulDelete", f"Deleted pod: p{i}")
            clock.now += 1
        await drain(rec)
        kinds = [c[0] for c in client.calls]
        # Nine distinct events, then one combined event that later ones patch.
        assert kinds == ["create"] * (events.MAX_SIMILAR - 1) + ["create", "patch", "patch"]
        combined = client.stored[client.calls[-1][1]]
        assert combined["message"] == events.COMBINED_PREFIX + f"Deleted pod: p{events.MAX_SIMILAR + 1}"
        assert combined["count"] == 3

    run(steps)


def test_spam_filter_allows_a_burst_then_one_per_five_minutes() -> None:
    async def steps() -> None:
        client, clock = RecordingClient(), Clock()
        rec = events.EventRecorder(client, "c", clock=clock)
        for i in range(events.SPAM_BURST + 5):
            rec.event(RS, events.NORMAL, "Tick", f"m{i % 3}")
        await drain(rec)
        assert len(client.calls) == events.SPAM_BURST
        clock.now += 300  # refusals cost nothing: exactly one token has come back
        rec.event(RS, events.NORMAL, "Tick", "m0")
        rec.event(RS, events.NORMAL, "Tick", "m0")
        await drain(rec)
        assert len(client.calls) == events.SPAM_BURST + 1

    run(steps)


def test_full_queue_drops_instead_of_blocking_and_bad_types_are_refused() -> None:
    async def steps() -> None:
        client = RecordingClient()
        rec = events.EventRecorder(client, "c", queue_size=2)
        for i in range(5):
            rec.event({"kind": "Node", "name": "n1"}, events.NORMAL, "R", f"m{i}")
        rec.event(RS, "Info", "R", "not a valid type")
        await drain(rec)
        assert len(client.calls) == 2
        assert client.stored[client.calls[0][1]]["metadata"]["namespace"] == "default"

    run(steps)
