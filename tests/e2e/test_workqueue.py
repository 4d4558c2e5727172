"""The durable work queue against a real nats-server: architecture invariants 1 to 4 (and 7).

Every DurableQueue here is a "replica" (tests/e2e/replicas.py) with a NATS connection of its
own, all in one process so a reconcile can record what it saw; each test uses its own controller name, so its own
work stream and consumers.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import pytest
from kcm_shared import runtime
from kcm_shared.base import tracing
from kcm_shared.bus import subjects
from kcm_shared.workqueue import ratelimit
from nats.js import JetStreamContext, api
from opentelemetry import trace
from prometheus_client import REGISTRY

from tests.conftest import NatsProc
from tests.e2e.replicas import (
    Recorder,
    Replica,
    controller_name,
    dead_letter,
    dead_letters,
    drained,
    first_waits_for,
    run,
    stream_messages,
    until,
)


def test_coalescing_pending_adds_and_rerun_after_processing(nats_server: NatsProc) -> None:
    ctl = controller_name("coalesce")
    release = asyncio.Event()

    async def body() -> None:
        rec = Recorder()

        r = await Replica.start(
            nats_server, ctl, rec.reconciler("a", first_waits_for(release)), stuck_after=0.5
        )
        try:
            for _ in range(100):
                await r.dq.add("ns/a", 1)
            assert await stream_messages(r.js, ctl) == 1, "a pending key is one message"
            await r.dq.start_partition(0)
            await until(lambda: len(rec.calls) == 1, what="first reconcile")
            # A loop stuck in one reconcile turns unhealthy (invariant 7).
            await until(lambda: r.dq.health() is not None, what="watchdog")

            for _ in range(100):
                await r.dq.add("ns/a", 1)

            async def all_delivered() -> bool:
                stream = await r.js.stream_info(subjects.work_stream(ctl))
                consumer = await r.js.consumer_info(subjects.work_stream(ctl), f"{ctl}-p0")
                return bool(consumer.delivered.stream_seq == stream.state.last_seq)

            await until(all_delivered, what="the adds made while processing reached the replica")
            assert len(rec.calls) == 1, "a key must not run twice at once"
            release.set()
            await until(lambda: drained(r.js, ctl, 1), what="queue drained")
            assert len(rec.calls) == 2, "added while processing: reconciled exactly once more"
            assert rec.calls[1].start >= rec.calls[0].end
            assert r.dq.health() is None
            assert r.dq.depth() == 0
        finally:
            await r.stop()

    run(body())


async def last_seq(js: JetStreamContext, controller: str) -> int:
    """How many messages were ever published to the controller's work stream."""
    info = await js.stream_info(subjects.work_stream(controller))
    return int(info.state.last_seq)


def test_adds_of_a_key_not_yet_reconciled_publish_once(nats_server: NatsProc) -> None:
    """Like client-go's dirty set: a key whose stored message no reconcile has started on is
    not published again, sequentially or concurrently; once its reconcile runs, the next add
    publishes again, and the key runs once more after it."""
    ctl = controller_name("dirty")
    release = asyncio.Event()

    async def body() -> None:
        rec = Recorder()

        r = await Replica.start(nats_server, ctl, rec.reconciler("a", first_waits_for(release)))
        try:
            await r.dq.start_partition(0)
            await r.dq.add("ns/a", 1)
            await until(lambda: len(rec.calls) == 1, what="first reconcile")
            assert not r.dq.holds("ns/a", 1), "its reconcile started: the next change needs a message"
            await asyncio.gather(*(r.dq.add("ns/a", 1) for _ in range(50)))
            assert r.dq.holds("ns/a", 1), "the runtime may skip adds while that message waits"
            for _ in range(50):
                await r.dq.add("ns/a", 1)
            assert await last_seq(r.js, ctl) == 2, "changes during the reconcile need one message"
            release.set()
            await until(lambda: drained(r.js, ctl, 1), what="queue drained")
            assert len(rec.calls) == 2, "added while processing: reconciled exactly once more"
            await r.dq.add("ns/a", 1)
            await until(lambda: len(rec.calls) == 3, what="an add after the last reconcile runs it")
            assert await last_seq(r.js, ctl) == 3
        finally:
            release.set()
            await r.stop()

    run(body())


def test_a_replica_that_regains_a_partition_publishes_its_keys_again(nats_server: NatsProc) -> None:
    """A key stored while its partition was this replica's, handed back before it ran and run
    by the next owner: once the partition comes back, an add must publish again rather than
    trust the old message."""
    ctl = controller_name("regain")

    async def body() -> None:
        rec = Recorder()
        release = asyncio.Event()

        async def block_x(key: str, n: int) -> None:
            if key == "ns/x":
                await release.wait()

        a = await Replica.start(nats_server, ctl, rec.reconciler("a", block_x), workers=1)
        b = await Replica.start(nats_server, ctl, rec.reconciler("b"))
        try:
            await a.dq.start_partition(0)
            await a.dq.add("ns/x", 1)
            await until(lambda: len(rec.calls) == 1, what="x occupies a's only worker")
            await a.dq.add("ns/k", 1)
            await until(lambda: a.dq.depth() == 1, what="k held behind x")
            stopping = asyncio.create_task(a.dq.stop_partition(0))
            release.set()
            await asyncio.wait_for(stopping, 15)
            await b.dq.start_partition(0)
            await until(lambda: drained(b.js, ctl, 1), what="b ran the handed-back k")
            await b.dq.stop_partition(0)
            await a.dq.start_partition(0)
            assert not a.dq.holds("ns/k", 1), "the old message is gone: the runtime must add again"
            await a.dq.add("ns/k", 1)
            await until(lambda: [c.replica for c in rec.of("ns/k")] == ["b", "a"], what="a ran k again")
        finally:
            release.set()
            await a.stop()
            await b.stop()

    run(body())


def test_a_change_during_a_requeueing_reconcile_is_not_postponed(nats_server: NatsProc) -> None:
    """A reconcile asks for a requeue while a change for its key was stored meanwhile: the change
    runs at once and no deferred message is left to replace it or run again later."""
    ctl = controller_name("defer-change")
    release = asyncio.Event()

    async def body() -> None:
        rec = Recorder()

        async def requeue_first(key: str, n: int) -> runtime.Result | None:
            if n == 1:
                await release.wait()
                return runtime.Result(requeue_after=300)
            return None

        r = await Replica.start(nats_server, ctl, rec.reconciler("a", requeue_first))
        try:
            await r.dq.start_partition(0)
            await r.dq.add("ns/a", 1)
            await until(lambda: len(rec.calls) == 1, what="first reconcile")
            await r.dq.add("ns/a", 1)
            release.set()
            await until(lambda: len(rec.calls) == 2, what="the change ran")
            await until(lambda: drained(r.js, ctl, 1), what="nothing deferred left behind")
        finally:
            release.set()
            await r.stop()

    run(body())


def test_no_concurrent_reconcile_across_replicas_and_partition_handover(nats_server: NatsProc) -> None:
    ctl = controller_name("handover")
    partitions = 4
    keys = [f"ns-{i % 3}/obj-{i}" for i in range(40)]

    async def body() -> None:
        rec = Recorder()

        async def work(key: str, n: int) -> None:
            await asyncio.sleep(random.uniform(0, 0.004))

        a = await Replica.start(nats_server, ctl, rec.reconciler("a", work), workers=4)
        b = await Replica.start(nats_server, ctl, rec.reconciler("b", work), workers=4)
        last_add: dict[str, float] = {}
        try:
            for p in (0, 1):
                await a.dq.start_partition(p)
            for p in (2, 3):
                await b.dq.start_partition(p)

            async def produce(rounds: int) -> None:
                for _ in range(rounds):
                    key = random.choice(keys)
                    # Stamped before: the reconcile may start before add() has its ack back.
                    last_add[key] = time.monotonic()
                    await a.dq.add(key, partitions)

            for key in keys:
                last_add[key] = time.monotonic()
                await a.dq.add(key, partitions)
            producer = asyncio.create_task(produce(600))
            await until(lambda: len(rec.calls) > 100, what="load flowing")
            # Hand partition 1 from a to b under load; b starts only after a released it.
            await a.dq.stop_partition(1)
            handed_over = time.monotonic()
            await b.dq.start_partition(1)
            await producer

            def all_seen() -> bool:
                return all(any(c.start > last_add[k] and c.end for c in rec.of(k)) for k in keys)

            await until(all_seen, what="every key reconciled after its last add")
            await until(lambda: drained(a.js, ctl, partitions), what="queue drained")
            assert rec.overlaps == [], f"one key reconciled concurrently: {rec.overlaps[:5]}"
            moved = [k for k in keys if subjects.partition_of(k, partitions) == 1]
            assert moved, "the test needs keys in the handed-over partition"
            for call in rec.calls:
                if subjects.partition_of(call.key, partitions) == 1 and call.start > handed_over:
                    assert call.replica == "b", f"{call} ran on the old owner after the hand-over"
            assert {c.replica for c in rec.calls} == {"a", "b"}
        finally:
            await a.stop()
            await b.stop()

    run(body())


class RecordingLimiter:
    def __init__(self, inner: ratelimit.RateLimiter) -> None:
        self.inner = inner
        self.delays: list[float] = []
        self.failures: list[int] = []

    def when(self, item: Any, failures: int) -> float:
        delay = self.inner.when(item, failures)
        self.delays.append(delay)
        self.failures.append(failures)
        return delay


def test_failing_key_backs_off_while_other_keys_flow(nats_server: NatsProc) -> None:
    ctl = controller_name("backoff")

    async def body() -> None:
        rec = Recorder()
        limiter = RecordingLimiter(ratelimit.ItemExponentialFailureRateLimiter(0.2, 10.0))

        async def flaky(key: str, n: int) -> None:
            if key == "ns/bad" and n <= 4:
                raise RuntimeError(f"attempt {n} failed")

        r = await Replica.start(nats_server, ctl, rec.reconciler("a", flaky), rate_limiter=limiter, workers=2)
        try:
            await r.dq.start_partition(0)
            await r.dq.add("ns/bad", 1)
            await until(lambda: len(rec.of("ns/bad")) == 1, what="first failure")
            good = [f"ns/good-{i}" for i in range(20)]
            for key in good:
                await r.dq.add(key, 1)
            await until(lambda: len(rec.of("ns/bad")) == 5, within=30, what="bad key succeeded")
            await until(lambda: drained(r.js, ctl, 1), what="queue drained")

            assert limiter.delays == [0.2, 0.4, 0.8, 1.6]
            attempts = rec.of("ns/bad")
            for delay, before, after in zip(limiter.delays, attempts[:-1], attempts[1:], strict=True):
                assert after.start - before.end >= delay - 0.05, "retried before its backoff"
            last_bad = attempts[-1].start
            assert all(rec.of(k) and rec.of(k)[0].end < last_bad for k in good), (
                "other keys must flow while a key backs off"
            )
            retries = REGISTRY.get_sample_value("workqueue_retries_total", {"name": ctl})
            assert retries == 4
        finally:
            await r.stop()

    run(body())


def test_a_failing_key_is_retried_past_max_deliveries_and_its_backoff_survives_a_handover(
    nats_server: NatsProc,
) -> None:
    """Failures are outcomes, not poison: a key failing more often than `max_deliveries` is
    never dead-lettered, and the next owner of its partition continues its backoff."""
    ctl = controller_name("retry-forever")

    async def body() -> None:
        rec = Recorder()

        async def fails_six_times(key: str, n: int) -> None:
            if n <= 6:
                raise RuntimeError(f"attempt {n} failed")

        limit_a = RecordingLimiter(ratelimit.ItemExponentialFailureRateLimiter(0.2, 10.0))
        limit_b = RecordingLimiter(ratelimit.ItemExponentialFailureRateLimiter(0.02, 10.0))
        kw: dict[str, Any] = {"max_deliveries": 2}
        a = await Replica.start(
            nats_server, ctl, rec.reconciler("a", fails_six_times), rate_limiter=limit_a, **kw
        )
        b = await Replica.start(
            nats_server, ctl, rec.reconciler("b", fails_six_times), rate_limiter=limit_b, **kw
        )
        try:
            await a.dq.start_partition(0)
            await a.dq.add("ns/k", 1)
            await until(lambda: len(limit_a.failures) == 3, what="three failures on a")
            await a.dq.stop_partition(0)
            await b.dq.start_partition(0)
            await until(lambda: len(rec.of("ns/k")) == 7, within=30, what="the key succeeded on b")
            await until(lambda: drained(b.js, ctl, 1), what="queue drained")
            assert [c.replica for c in rec.of("ns/k")] == ["a"] * 3 + ["b"] * 4
            assert limit_a.failures == [1, 2, 3]
            assert limit_b.failures == [4, 5, 6], "the new owner continues the backoff"
            assert limit_b.delays == pytest.approx([0.16, 0.32, 0.64])
            assert dead_letters(ctl) == 0
            assert REGISTRY.get_sample_value("workqueue_retries_total", {"name": ctl}) == 6
        finally:
            await a.stop()
            await b.stop()

    run(body())


def test_a_change_to_a_backing_off_key_runs_at_once_and_the_backoff_goes_on(nats_server: NatsProc) -> None:
    """As upstream's Add during AddRateLimited: the change is reconciled at once (not after the
    30 s backoff), and a failure of that reconcile counts on from the key's earlier failures."""
    ctl = controller_name("change-during-backoff")

    async def body() -> None:
        rec = Recorder()

        async def fails_twice(key: str, n: int) -> None:
            if n <= 2:
                raise RuntimeError(f"attempt {n} failed")

        limiter = RecordingLimiter(ratelimit.ItemExponentialFailureRateLimiter(30.0, 1000.0))
        r = await Replica.start(nats_server, ctl, rec.reconciler("a", fails_twice), rate_limiter=limiter)
        try:
            await r.dq.start_partition(0)
            await r.dq.add("ns/k", 1)
            await until(lambda: limiter.failures == [1], what="first failure, 30 s backoff")
            await r.dq.add("ns/k", 1)
            await until(lambda: limiter.failures == [1, 2], within=10, what="the change ran at once")
            await r.dq.add("ns/k", 1)
            await until(lambda: len(rec.of("ns/k")) == 3, within=10, what="the next change ran at once")
            await until(lambda: drained(r.js, ctl, 1), what="queue drained")
        finally:
            await r.stop()

    run(body())


def test_a_message_whose_deliveries_never_finish_is_dead_lettered_as_poison(nats_server: NatsProc) -> None:
    """Invariant 4's bounded poison: each replica that takes the key dies mid-reconcile (its
    connection gone, nothing acked); after `max_deliveries` such deliveries the next replica
    dead-letters the message instead of dying on it too."""
    ctl = controller_name("poison")

    async def body() -> None:
        rec = Recorder()
        never = asyncio.Event()

        async def hang(key: str, n: int) -> None:
            await never.wait()

        kw: dict[str, Any] = {"max_deliveries": 2, "ack_wait": 1.0, "drain_timeout": 0.2}
        victims: list[Replica] = []
        last: Replica | None = None
        try:
            for n in range(1, 3):
                victim = await Replica.start(nats_server, ctl, rec.reconciler(f"v{n}", hang), **kw)
                victims.append(victim)
                if n == 1:
                    await victim.dq.add("ns/poison", 1)
                await victim.dq.start_partition(0)
                await until(lambda n=n: len(rec.of("ns/poison")) == n, what=f"delivery {n} started")
                await victim.nc.close()  # kill -9, as far as NATS can tell
            last = await Replica.start(nats_server, ctl, rec.reconciler("last", hang), **kw)
            await last.dq.start_partition(0)
            await until(lambda: dead_letters(ctl) == 1, what="dead letter")
            await until(lambda: drained(last.js, ctl, 1), what="work message terminated")
            assert len(rec.of("ns/poison")) == 2, "the poison message was not run a third time"
            msg = await dead_letter(last.js, ctl)
            assert msg.headers["Kcm-Key"] == "ns/poison"
            assert msg.headers["Kcm-Reason"].startswith(
                "poison: delivered 3 times, 2 of them without an outcome"
            )
            assert msg.headers["Kcm-Deliveries"] == "3"
        finally:
            never.set()
            for replica in [*victims, *([last] if last else [])]:
                await replica.stop()

    run(body())


def test_terminal_error_and_malformed_message_go_straight_to_dlq(nats_server: NatsProc) -> None:
    ctl = controller_name("terminal")

    async def body() -> None:
        rec = Recorder()

        async def terminal(key: str, n: int) -> None:
            if key == "ns/doomed":
                raise runtime.TerminalError("object is invalid forever")

        r = await Replica.start(nats_server, ctl, rec.reconciler("a", terminal))
        try:
            await r.dq.start_partition(0)
            await r.dq.add("ns/doomed", 1)
            await until(lambda: dead_letters(ctl) == 1, what="dead letter")
            assert len(rec.of("ns/doomed")) == 1
            msg = await dead_letter(r.js, ctl)
            assert msg.headers["Kcm-Key"] == "ns/doomed"
            assert msg.headers["Kcm-Reason"] == "TerminalError: object is invalid forever"
            assert msg.headers["Kcm-Deliveries"] == "1"

            # One token too many: no key can be read from it.
            bad_subject = subjects.work_filter(ctl, 0)[:-1] + "ns.a.b"
            await r.js.publish(bad_subject, b"junk")
            await until(lambda: dead_letters(ctl) == 2, what="malformed message dead-lettered")
            msg = await dead_letter(r.js, ctl)
            assert msg.headers["Kcm-Reason"].startswith("malformed work subject")
            assert msg.headers["Kcm-Subject"] == bad_subject
            assert msg.data == b"junk"

            # A key, but a header no replica wrote: it cannot say when or how often to retry.
            await r.js.publish(
                subjects.work_subject(ctl, 0, "ns/garbled"), b"", headers={"Kcm-Failures": "x"}
            )
            await until(lambda: dead_letters(ctl) == 3, what="undecodable message dead-lettered")
            msg = await dead_letter(r.js, ctl)
            assert msg.headers["Kcm-Key"] == "ns/garbled"
            assert msg.headers["Kcm-Reason"].startswith("undecodable work message: header Kcm-Failures")
            assert not rec.of("ns/garbled")

            await r.dq.add("ns/fine", 1)
            await until(lambda: rec.of("ns/fine"), what="the loop survived")
            await until(lambda: drained(r.js, ctl, 1), what="queue drained")
        finally:
            await r.stop()

    run(body())


def test_requeue_after_reconciles_again_later(nats_server: NatsProc) -> None:
    ctl = controller_name("requeue")

    async def body() -> None:
        rec = Recorder()

        async def requeue_once(key: str, n: int) -> runtime.Result | None:
            return runtime.Result(requeue_after=0.7) if n == 1 else None

        r = await Replica.start(nats_server, ctl, rec.reconciler("a", requeue_once), max_deliveries=1)
        try:
            await r.dq.start_partition(0)
            await r.dq.add("ns/a", 1)
            await until(lambda: len(rec.of("ns/a")) == 2, what="timed requeue")
            await until(lambda: drained(r.js, ctl, 1), what="queue drained")
            first, second = rec.of("ns/a")
            assert second.start - first.end >= 0.65, "requeued before its time"
            assert dead_letters(ctl) == 0
            assert REGISTRY.get_sample_value("workqueue_retries_total", {"name": ctl}) is None
        finally:
            await r.stop()

    run(body())


def test_reconcile_of_a_dead_replica_is_redelivered_and_completed(nats_server: NatsProc) -> None:
    ctl = controller_name("killed")

    async def body() -> None:
        rec = Recorder()
        never = asyncio.Event()

        async def hang(key: str, n: int) -> None:
            await never.wait()

        a = await Replica.start(nats_server, ctl, rec.reconciler("a", hang), ack_wait=1.5, drain_timeout=0.2)
        b: Replica | None = None
        try:
            await a.dq.start_partition(0)
            await a.dq.add("ns/a", 1)
            await until(lambda: rec.of("ns/a"), what="reconcile started on a")
            # kill -9: the connection goes away mid-reconcile, nothing is acked or handed back.
            await a.nc.close()
            b = await Replica.start(nats_server, ctl, rec.reconciler("b"), ack_wait=1.5)
            await b.dq.start_partition(0)
            await until(
                lambda: any(c.replica == "b" and c.end for c in rec.of("ns/a")), what="redelivered to b"
            )
            await until(lambda: drained(b.js, ctl, 1), what="acked by b")
        finally:
            await a.stop()
            if b is not None:
                await b.stop()

    run(body())


def test_nats_server_restart_mid_load_loses_no_key(fresh_nats: NatsProc) -> None:
    ctl = controller_name("restart")
    keys = [f"ns/k-{i}" for i in range(60)]

    async def body() -> None:
        rec = Recorder()
        r = await Replica.start(fresh_nats, ctl, rec.reconciler("a"), ack_wait=2.0)
        last_add: dict[str, float] = {}
        try:
            await r.dq.start_partition(0)

            async def produce() -> None:
                for round_ in range(3):
                    for key in keys:
                        # Stamped before: the reconcile may start before add() has its ack back.
                        last_add[key] = time.monotonic()
                        await r.dq.add(key, 1)
                    if round_ == 0:
                        restart.set()

            restart = asyncio.Event()
            producer = asyncio.create_task(produce())
            await restart.wait()
            await asyncio.to_thread(fresh_nats.kill)
            await asyncio.to_thread(fresh_nats.start)
            await asyncio.wait_for(producer, 60)

            def all_seen() -> bool:
                return all(any(c.start > last_add[k] and c.end for c in rec.of(k)) for k in keys)

            await until(all_seen, within=40, what="every key reconciled after its last add")
            await until(lambda: drained(r.js, ctl, 1), within=20, what="queue drained")
        finally:
            await r.stop()

    run(body())


def test_stop_partition_hands_back_held_items(nats_server: NatsProc) -> None:
    ctl = controller_name("handback")

    async def body() -> None:
        rec = Recorder()
        release = asyncio.Event()

        async def blocked(key: str, n: int) -> None:
            await release.wait()

        a = await Replica.start(
            nats_server, ctl, rec.reconciler("a", blocked), workers=1, prefetch=10, drain_timeout=30
        )
        b = await Replica.start(nats_server, ctl, rec.reconciler("b"))
        try:
            await a.dq.start_partition(0)
            for i in range(5):
                await a.dq.add(f"ns/{i}", 1)
            await until(lambda: a.dq.depth() == 4, what="one running, four held")
            stopping = asyncio.create_task(a.dq.stop_partition(0))
            # Longer than the pull in flight may take to expire, far shorter than drain_timeout.
            done, _ = await asyncio.wait([stopping], timeout=2.5)
            assert not done, "stop_partition returned while a reconcile still ran"
            release.set()
            await asyncio.wait_for(stopping, 10)
            assert [c.replica for c in rec.calls] == ["a"], "held items must not start once stopping"
            await b.dq.start_partition(0)
            await until(lambda: drained(b.js, ctl, 1), what="b finished the handed-back keys")
            assert sorted(c.key for c in rec.calls if c.replica == "b") == [f"ns/{i}" for i in range(1, 5)]
        finally:
            release.set()
            await a.stop()
            await b.stop()

    run(body())


def test_a_released_partition_s_open_pull_request_takes_nothing(nats_server: NatsProc) -> None:
    # A partition keeps a pull request open at the server for a long time; releasing it must
    # withdraw that request, or the next change would go to a replica no longer listening and
    # wait out ack_wait (30 s) before the new owner gets it.
    ctl = controller_name("withdraw")

    async def body() -> None:
        rec = Recorder()
        a = await Replica.start(nats_server, ctl, rec.reconciler("a"))
        b = await Replica.start(nats_server, ctl, rec.reconciler("b"))
        try:
            await a.dq.start_partition(0)
            await a.dq.add("ns/first", 1)
            await until(lambda: [c.replica for c in rec.calls] == ["a"], what="a reconciled the first key")

            async def waiting() -> bool:
                info = await a.js.consumer_info(subjects.work_stream(ctl), f"{ctl}-p0")
                return bool(info.num_waiting)

            await until(waiting, what="a's next pull request open at the server")
            await a.dq.stop_partition(0)
            await b.dq.start_partition(0)
            await b.dq.add("ns/second", 1)
            await until(lambda: len(rec.calls) == 2, within=15, what="the second key reconciled")
            assert [(c.replica, c.key) for c in rec.calls] == [("a", "ns/first"), ("b", "ns/second")]
        finally:
            await a.stop()
            await b.stop()

    run(body())


def test_keys_are_routed_to_their_partition(nats_server: NatsProc) -> None:
    """A replica consuming one partition sees exactly the keys that hash to it."""
    ctl = controller_name("routing")

    async def body() -> None:
        rec = Recorder()
        r = await Replica.start(nats_server, ctl, rec.reconciler("a"))
        try:
            keys = [f"ns/{i}" for i in range(30)]
            for key in keys:
                await r.dq.add(key, 3)
            await r.dq.start_partition(2)
            mine = sorted(k for k in keys if subjects.partition_of(k, 3) == 2)
            await until(lambda: len(rec.calls) >= len(mine), what="partition 2 reconciled")
            await r.dq.stop_partition(2)
            assert sorted(c.key for c in rec.calls) == mine
            assert await stream_messages(r.js, ctl) == len(keys) - len(mine)
        finally:
            await r.stop()

    run(body())


def test_reconcile_continues_the_trace_of_the_add(nats_server: NatsProc) -> None:
    ctl = controller_name("trace")
    tracing.setup("test-workqueue")

    async def body() -> None:
        seen: list[int] = []

        async def reconcile(key: str) -> None:
            seen.append(trace.get_current_span().get_span_context().trace_id)

        r = await Replica.start(nats_server, ctl, reconcile)
        try:
            with tracing.span("object changed") as span:
                await r.dq.add("ns/a", 1)
            await r.dq.start_partition(0)
            await until(lambda: seen, what="reconcile")
            assert seen == [span.get_span_context().trace_id]
        finally:
            await r.stop()

    run(body())


def test_a_deleted_work_stream_is_declared_again_and_its_partitions_reported_lost(
    nats_server: NatsProc,
) -> None:
    """The stream deleted under a running replica (by hand, or lost with NATS' store): the
    replica declares stream and consumer again, reports the partitions whose pending work
    went with them, and goes on reconciling."""
    ctl = controller_name("lost")

    async def body() -> None:
        rec = Recorder()
        lost: list[set[int]] = []
        r = await Replica.start(nats_server, ctl, rec.reconciler("a"), on_lost=lost.append)
        try:
            await r.dq.start_partition(0)
            await r.dq.add("ns/a", 1)
            await until(lambda: rec.of("ns/a"), what="first reconcile")
            await r.js.delete_stream(subjects.work_stream(ctl))
            await until(lambda: lost, what="the lost partition reported")
            assert lost[0] == {0}
            await r.dq.add("ns/b", 1)
            await until(lambda: rec.of("ns/b"), what="reconciled after the loss")
            assert dead_letters(ctl) == 0
        finally:
            await r.stop()

    run(body())


def test_a_consumer_an_older_kcm_kept_on_disk_is_declared_anew_and_delivers_its_items(
    nats_server: NatsProc,
) -> None:
    """Consumers keep their delivery state in memory; one from before that, kept on disk,
    cannot be changed in place: the replica deletes and declares it, and loses no item."""
    ctl = controller_name("ondisk")

    async def body() -> None:
        rec = Recorder()
        r = await Replica.start(nats_server, ctl, rec.reconciler("a"))
        stream, name = subjects.work_stream(ctl), f"{ctl}-p0"
        try:
            await r.js.add_consumer(
                stream,
                api.ConsumerConfig(
                    name=name,
                    durable_name=name,
                    filter_subject=subjects.work_filter(ctl, 0),
                    ack_policy=api.AckPolicy.EXPLICIT,
                ),
            )
            assert not (await r.js.consumer_info(stream, name)).config.mem_storage
            await r.dq.add("ns/a", 1)
            await r.dq.start_partition(0)
            await until(lambda: rec.of("ns/a"), what="the item stored before reconciled")
            assert (await r.js.consumer_info(stream, name)).config.mem_storage
            await r.dq.add("ns/b", 1)
            await until(lambda: rec.of("ns/b"), what="reconciled after")
        finally:
            await r.stop()

    run(body())
