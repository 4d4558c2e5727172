"""The event correlator steps (spam filter, aggregation, dedup) against the testing kit's fake
API server, with a fake clock."""

from __future__ import annotations

import asyncio
from typing import Any

import uvloop
from kcm_shared.apimachinery import codec
from kcm_shared.client import kubeclient
from kcm_shared.runtime import events
from kcm_shared.testing import fakeclient


def written(client: fakeclient.FakeClient) -> list[tuple[str, str]]:
    """(verb, Event name) of each write the recorder made."""
    return [
        (verb, body["metadata"]["name"] if verb == "create" else path.rsplit("/", 1)[1])
        for verb, path, body in client.calls()
    ]


def stored(client: fakeclient.FakeClient) -> dict[str, dict[str, Any]]:
    """The Events the API server holds, by name."""
    return {obj["metadata"]["name"]: obj for obj in client.objects.values()}


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
        client, clock = fakeclient.FakeClient(), Clock()
        rec = events.EventRecorder(client, "rs-controller", "host-a", clock=clock)
        for _ in range(3):
            rec.event(RS, events.NORMAL, "SuccessfulCreate", "Created pod: a")
            clock.now += 1
        await drain(rec)
        first = written(client)[0][1]
        assert written(client) == [("create", first), ("patch", first), ("patch", first)]
        # Deferrable: behind the controller's own writes when the client's rate limit bites.
        assert [a.priority for a in client.actions] == [kubeclient.Priority.LOW] * 3
        assert first == f"web.{int(1_700_000_000 * 1e9):x}"
        event = stored(client)[first]
        assert event["count"] == 3 and event["metadata"]["namespace"] == "ns"
        assert event["source"] == {"component": "rs-controller", "host": "host-a"}
        assert event["involvedObject"] == {
            "kind": "ReplicaSet",
            "apiVersion": "apps/v1",
            "namespace": "ns",
            "name": "web",
            "uid": "u1",
        }
        assert (
            event["firstTimestamp"] == "2023-11-14T22:13:20Z"
            and event["lastTimestamp"] == "2023-11-14T22:13:22Z"
        )

        clock.now += events.WINDOW + 1
        rec.event(RS, events.NORMAL, "SuccessfulCreate", "Created pod: a")
        await drain(rec)
        assert written(client)[-1][0] == "create" and written(client)[-1][1] != first

    run(steps)


def test_patch_of_a_vanished_event_creates_it_again_with_the_count() -> None:
    async def steps() -> None:
        client, clock = fakeclient.FakeClient(), Clock()
        rec = events.EventRecorder(client, "c", clock=clock)
        rec.event(RS, events.WARNING, "FailedCreate", "quota")
        await drain(rec)
        client.objects.clear()  # the API server's event TTL expired it
        rec.event(RS, events.WARNING, "FailedCreate", "quota")
        await drain(rec)
        assert [c[0] for c in written(client)] == ["create", "patch", "create"]
        (again,) = stored(client).values()
        assert again["count"] == 2

    run(steps)


def test_many_similar_messages_are_combined() -> None:
    async def steps() -> None:
        client, clock = fakeclient.FakeClient(), Clock()
        rec = events.EventRecorder(client, "c", clock=clock)
        for i in range(events.MAX_SIMILAR + 2):
            rec.event(RS, events.NORMAL, "SuccessfulDelete", f"Deleted pod: p{i}")
            clock.now += 1
        await drain(rec)
        kinds = [c[0] for c in written(client)]
        # Nine distinct events, then one combined event that later ones patch.
        assert kinds == ["create"] * (events.MAX_SIMILAR - 1) + ["create", "patch", "patch"]
        combined = stored(client)[written(client)[-1][1]]
        assert combined["message"] == events.COMBINED_PREFIX + f"Deleted pod: p{events.MAX_SIMILAR + 1}"
        assert combined["count"] == 3

    run(steps)


def test_spam_filter_allows_a_burst_then_one_per_five_minutes() -> None:
    async def steps() -> None:
        client, clock = fakeclient.FakeClient(), Clock()
        rec = events.EventRecorder(client, "c", clock=clock)
        for i in range(events.SPAM_BURST + 5):
            rec.event(RS, events.NORMAL, "Tick", f"m{i % 3}")
        await drain(rec)
        assert len(written(client)) == events.SPAM_BURST
        clock.now += 300  # refusals cost nothing: exactly one token has come back
        rec.event(RS, events.NORMAL, "Tick", "m0")
        rec.event(RS, events.NORMAL, "Tick", "m0")
        await drain(rec)
        assert len(written(client)) == events.SPAM_BURST + 1

    run(steps)


def test_full_queue_drops_instead_of_blocking_and_bad_types_are_refused() -> None:
    async def steps() -> None:
        client = fakeclient.FakeClient()
        rec = events.EventRecorder(client, "c", queue_size=2)
        for i in range(5):
            rec.event({"kind": "Node", "name": "n1"}, events.NORMAL, "R", f"m{i}")
        rec.event(RS, "Info", "R", "not a valid type")
        await drain(rec)
        assert len(written(client)) == 2
        assert stored(client)[written(client)[0][1]]["metadata"]["namespace"] == "default"

    run(steps)


def test_an_event_may_name_another_host() -> None:
    """The simulator's one recorder speaks for many nodes' kubelets: each Event names its node."""

    async def steps() -> None:
        client = fakeclient.FakeClient()
        clock = Clock()
        rec = events.EventRecorder(client, "kubelet", clock=clock)
        rec.event(RS, events.NORMAL, "Pulled", "m", host="node-1")
        clock.now += 1
        rec.event(RS, events.NORMAL, "Pulled", "m", host="node-2")
        await drain(rec)
        found = sorted((e["source"]["host"], e["reportingInstance"]) for e in stored(client).values())
        # Separate Events: the dedup key includes the source's host.
        assert found == [("node-1", "node-1"), ("node-2", "node-2")]
        assert all(e["reportingComponent"] == "kubelet" for e in stored(client).values())

    run(steps)
