"""The publisher's guarantees against a scripted JetStream: retries, per-subject order, the window."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import nats.errors
import uvloop
from kcm_watcher import publisher
from nats.js import JetStreamContext


class ScriptedJetStream:
    """Records publish attempts; fails the first `failures[body]` attempts of a body; may hold acks."""

    def __init__(self, failures: dict[bytes, int] | None = None) -> None:
        self.failures = dict(failures or {})
        self.attempts: list[bytes] = []
        self.stored: list[tuple[str, bytes, dict[str, str], float | None]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.failed = asyncio.Event()

    async def publish(
        self, subject: str, payload: bytes, headers: dict[str, str], msg_ttl: float | None, **_: Any
    ) -> Any:
        self.attempts.append(payload)
        await self.gate.wait()
        if self.failures.get(payload, 0) > 0:
            self.failures[payload] -= 1
            self.failed.set()
            raise nats.errors.TimeoutError
        self.stored.append((subject, payload, headers, msg_ttl))
        return None


def _publisher(js: ScriptedJetStream, window: int = 16) -> publisher.Publisher:
    return publisher.Publisher(cast(JetStreamContext, js), window=window, ack_timeout=1.0)


def test_failed_publish_is_retried_and_later_change_of_same_object_waits_for_it() -> None:
    async def body() -> None:
        js = ScriptedJetStream(failures={b"x1": 2})
        lane = _publisher(js).lane("r")
        await lane.publish("x", b"x1", {"h": "1"})
        await lane.publish("y", b"y1", {})
        await lane.publish("x", b"x2", {}, ttl=5.0)
        await asyncio.wait_for(lane.flush(), 10)
        assert js.attempts.count(b"x1") == 3
        # x2 was not even attempted before x1 landed: the stream's last message for x is x2.
        assert js.attempts.index(b"x2") > max(i for i, p in enumerate(js.attempts) if p == b"x1")
        assert [p for s, p, _, _ in js.stored if s == "x"] == [b"x1", b"x2"]
        assert js.stored[-1][3] == 5.0
        assert next(h for _, p, h, _ in js.stored if p == b"x1") == {"h": "1"}

    uvloop.run(body())


def test_window_bounds_unacknowledged_messages() -> None:
    async def body() -> None:
        js = ScriptedJetStream()
        js.gate.clear()  # hold every ack
        pub = _publisher(js, window=2)
        lane = pub.lane("r")
        await lane.publish("a", b"a", {})
        await lane.publish("b", b"b", {})
        third = asyncio.ensure_future(lane.publish("c", b"c", {}))
        await asyncio.sleep(0)  # let the third call reach the full window
        assert not third.done()
        js.gate.set()
        await asyncio.wait_for(third, 5)
        await asyncio.wait_for(pub.flush_all(), 5)
        assert sorted(p for _, p, _, _ in js.stored) == [b"a", b"b", b"c"]

    uvloop.run(body())


def test_failing_publishes_make_the_health_check_fail() -> None:
    async def body() -> None:
        now = [100.0]
        js = ScriptedJetStream(failures={b"a": 1_000_000})
        pub = publisher.Publisher(cast(JetStreamContext, js), window=4, clock=lambda: now[0])
        lane = pub.lane("r")
        assert pub.check(30) is None
        await lane.publish("a", b"a", {})
        await asyncio.wait_for(js.failed.wait(), 5)
        now[0] += 29
        assert pub.check(30) is None
        now[0] += 2
        assert pub.check(30) is not None
        js.failures.clear()  # NATS is back
        await asyncio.wait_for(lane.flush(), 10)
        assert pub.check(30) is None

    uvloop.run(body())
