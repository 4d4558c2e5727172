"""The publisher's guarantees against a scripted core NATS: retries, per-subject order, the window,
per-subject fencing, messages too large for the server, and per-lane health.

The script (tests/support/publisher.py) plays JetStream's part: it records each attempt and
answers on its reply subject with a PubAck, an error, or nothing (an ack that never comes), as
the test says; like JetStream it refuses a message whose `Nats-Expected-Last-Subject-Sequence`
is not the subject's last sequence.
"""

from __future__ import annotations

import asyncio

import uvloop

from tests.support.publisher import ScriptedNats, publisher_on


def test_failed_publish_is_retried_and_later_change_of_same_object_waits_for_it() -> None:
    async def body() -> None:
        nc = ScriptedNats(failures={b"x1": 2})
        lane = publisher_on(nc).lane("r")
        await lane.publish("x", b"x1", {"h": "1"})
        await lane.publish("y", b"y1", {})
        await lane.publish("x", b"x2", {}, ttl=5.0)
        await asyncio.wait_for(lane.flush(), 10)
        assert nc.attempts.count(b"x1") == 3
        # x2 was not even attempted before x1 landed: the stream's last message for x is x2.
        assert nc.attempts.index(b"x2") > max(i for i, p in enumerate(nc.attempts) if p == b"x1")
        assert [p for s, p, _ in nc.stored if s == "x"] == [b"x1", b"x2"]
        assert nc.stored[-1][2] == {"Nats-TTL": "5"}
        assert next(h for _, p, h in nc.stored if p == b"x1") == {"h": "1"}

    uvloop.run(body())


def test_an_ack_that_never_comes_is_retried_after_the_timeout() -> None:
    async def body() -> None:
        nc = ScriptedNats(silent={b"a": 1})
        lane = publisher_on(nc, ack_timeout=0.2).lane("r")
        await lane.publish("a", b"a", {})
        await asyncio.wait_for(lane.flush(), 10)
        assert nc.attempts == [b"a", b"a"]
        assert [p for _, p, _ in nc.stored] == [b"a"]

    uvloop.run(body())


def test_window_bounds_unacknowledged_messages() -> None:
    async def body() -> None:
        nc = ScriptedNats()
        nc.hold = True
        pub = publisher_on(nc, window=2)
        lane = pub.lane("r")
        await lane.publish("a", b"a", {})
        await lane.publish("b", b"b", {})
        third = asyncio.ensure_future(lane.publish("c", b"c", {}))
        await asyncio.sleep(0)  # let the third call reach the full window
        assert not third.done()
        nc.release()
        await asyncio.wait_for(third, 5)
        await asyncio.wait_for(pub.flush_all(), 5)
        assert sorted(p for _, p, _ in nc.stored) == [b"a", b"b", b"c"]

    uvloop.run(body())


def test_flush_waits_for_every_message_handed_over() -> None:
    async def body() -> None:
        nc = ScriptedNats()
        nc.hold = True
        lane = publisher_on(nc).lane("r")
        for name in ("a", "b", "c"):
            await lane.publish(name, name.encode(), {})
        flushed = asyncio.ensure_future(lane.flush())
        await asyncio.sleep(0)
        assert not flushed.done()
        nc.release()
        await asyncio.wait_for(flushed, 5)
        assert len(nc.stored) == 3

    uvloop.run(body())


def test_failing_publishes_make_the_health_check_fail() -> None:
    async def body() -> None:
        now = [100.0]
        nc = ScriptedNats(failures={b"a": 1_000_000})
        pub = publisher_on(nc, window=4, clock=lambda: now[0])
        lane = pub.lane("r")
        assert pub.check(30) is None
        await lane.publish("a", b"a", {})
        await asyncio.wait_for(nc.failed.wait(), 5)
        now[0] += 29
        assert pub.check(30) is None
        now[0] += 2
        assert pub.check(30) is not None
        nc.failures.clear()  # NATS is back
        await asyncio.wait_for(lane.flush(), 10)
        assert pub.check(30) is None

    uvloop.run(body())


def test_abandoned_messages_free_the_window_and_are_not_retried() -> None:
    async def body() -> None:
        nc = ScriptedNats(failures={b"a": 1_000_000})
        pub = publisher_on(nc, window=1)
        lane = pub.lane("r")
        await lane.publish("a", b"a", {})
        await asyncio.wait_for(nc.failed.wait(), 5)
        pub.abandon_all()
        await asyncio.wait_for(lane.flush(), 5)
        tried = len(nc.attempts)
        nc.failures.clear()
        await asyncio.wait_for(lane.publish("b", b"b", {}), 5)  # the slot was given back
        await asyncio.wait_for(lane.flush(), 5)
        await asyncio.sleep(0.3)  # longer than the first retry's backoff: a retry would show
        assert nc.attempts[tried:] == [b"b"]

    uvloop.run(body())


def test_each_message_expects_the_subject_sequence_the_last_ack_gave() -> None:
    async def body() -> None:
        nc = ScriptedNats()
        lane = publisher_on(nc).lane("r")
        await lane.publish("a", b"a1", {})
        await lane.publish("b", b"b1", {})
        await lane.publish("a", b"a2", {})
        await asyncio.wait_for(lane.flush(), 5)
        assert [p for _, p, _ in nc.stored] == [b"a1", b"b1", b"a2"]
        assert lane.seqs == {"a": 3, "b": 2}

    uvloop.run(body())


def test_wrong_last_sequence_asks_the_resolver_which_retries_or_drops() -> None:
    async def body() -> None:
        nc = ScriptedNats()
        nc.seq, nc.last = 7, {"newer": 6, "older": 7}  # another publisher wrote both subjects
        asked: list[tuple[str, str]] = []

        async def resolver(subject: str, headers: dict[str, str]) -> int | None:
            asked.append((subject, headers["Kcm-Resource-Version"]))
            return nc.last[subject] if subject == "newer" else None

        lane = publisher_on(nc).lane("r")
        lane.resolver = resolver
        await lane.publish("newer", b"n", {"Kcm-Resource-Version": "9"})
        await lane.publish("older", b"o", {"Kcm-Resource-Version": "2"})
        await asyncio.wait_for(lane.flush(), 5)
        assert sorted(asked) == [("newer", "9"), ("older", "2")]
        assert [p for _, p, _ in nc.stored] == [b"n"]  # retried once at sequence 6; "older" dropped
        assert lane.seqs["newer"] == 8 and nc.attempts.count(b"o") == 1

    uvloop.run(body())


def test_a_message_larger_than_max_payload_goes_out_without_its_body() -> None:
    async def body() -> None:
        nc = ScriptedNats()
        nc.max_payload = 300
        lane = publisher_on(nc).lane("r")
        big = b"x" * 400
        await lane.publish("big", big, {"Kcm-Event": "ADDED", "Kcm-Resource-Version": "5"})
        await lane.publish("small", b"s", {"Kcm-Event": "ADDED"})
        await asyncio.wait_for(lane.flush(), 5)
        stored = {s: (p, h) for s, p, h in nc.stored}
        assert stored["big"] == (
            b"",
            {"Kcm-Event": "ADDED", "Kcm-Resource-Version": "5", "Kcm-Too-Large": "400"},
        )
        assert stored["small"] == (b"s", {"Kcm-Event": "ADDED"})
        assert nc.attempts.count(big) == 0  # never sent: the server would close the connection

    uvloop.run(body())


def test_jetstream_refusing_the_size_or_the_request_is_not_retried() -> None:
    async def body() -> None:
        nc = ScriptedNats()
        nc.errors[b"huge"] = (
            b'{"error":{"code":400,"err_code":10054,"description":"message size exceeds maximum allowed"}}'
        )
        nc.errors[b"bad"] = b'{"error":{"code":400,"err_code":10999,"description":"invalid"}}'
        lane = publisher_on(nc).lane("r")
        await lane.publish("huge", b"huge", {})
        await lane.publish("bad", b"bad", {})
        await asyncio.wait_for(lane.flush(), 5)
        assert nc.stored == [("huge", b"", {"Kcm-Too-Large": "4"})]
        assert nc.attempts.count(b"bad") == 1

    uvloop.run(body())


def test_health_names_each_lane_that_cannot_publish() -> None:
    async def body() -> None:
        now = [100.0]
        nc = ScriptedNats(failures={b"a": 1_000_000})
        pub = publisher_on(nc, clock=lambda: now[0])
        stuck, fine = pub.lane("apps/v1/deployments"), pub.lane("core/v1/pods")
        await stuck.publish("a", b"a", {})
        await fine.publish("b", b"b", {})
        await asyncio.wait_for(fine.flush(), 5)
        await asyncio.wait_for(nc.failed.wait(), 5)
        now[0] += 31
        problem = pub.check(30)
        assert problem is not None and problem.startswith(
            "apps/v1/deployments: publishing has failed for 31s"
        )
        assert "core/v1/pods" not in problem
        pub.abandon_all()

    uvloop.run(body())
