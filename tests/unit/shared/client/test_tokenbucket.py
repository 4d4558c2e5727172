"""Token bucket delays against a written-out sequence, and the priority limiter's order of
service, with a fake clock (the limiter's sleep moves it on: nothing really waits)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
import uvloop
from kcm_shared.client.tokenbucket import (
    LOW_FLOOR,
    LOW_PATIENCE,
    WEIGHT,
    Priority,
    PriorityLimiter,
    TokenBucket,
)

HIGH, NORMAL, LOW = Priority.HIGH, Priority.NORMAL, Priority.LOW


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_burst_is_free_then_tokens_come_at_qps() -> None:
    clock = Clock()
    bucket = TokenBucket(qps=10, burst=3, clock=clock)
    assert [bucket.reserve() for _ in range(5)] == pytest.approx([0, 0, 0, 0.1, 0.2])


def test_idle_time_refills_up_to_burst_only() -> None:
    clock = Clock()
    bucket = TokenBucket(qps=10, burst=2, clock=clock)
    bucket.reserve()
    bucket.reserve()
    clock.now = 100.0
    assert [bucket.reserve() for _ in range(3)] == pytest.approx([0, 0, 0.1])


@pytest.mark.parametrize(("qps", "burst"), [(0, 1), (1, 0), (-1, 5)])
def test_rejects_meaningless_limits(qps: float, burst: int) -> None:
    with pytest.raises(ValueError, match="token bucket"):
        TokenBucket(qps, burst)


def test_wait_time_takes_nothing() -> None:
    clock = Clock()
    bucket = TokenBucket(qps=10, burst=1, clock=clock)
    assert bucket.wait_time() == 0
    bucket.reserve()
    assert bucket.wait_time() == pytest.approx(0.1)
    assert bucket.wait_time() == pytest.approx(0.1)
    clock.now = 0.04
    assert bucket.wait_time() == pytest.approx(0.06)


def fake_sleep(clock: Clock) -> Callable[[float], Awaitable[None]]:
    async def sleep(delay: float) -> None:
        # Let the waiters just served run (and queue again) at the time they were served.
        for _ in range(3):
            await asyncio.sleep(0)
        clock.now += delay

    return sleep


class Served:
    """Each request's label and the fake time its token came."""

    def __init__(self, limiter: PriorityLimiter, clock: Clock) -> None:
        self.limiter = limiter
        self.clock = clock
        self.order: list[tuple[str, float]] = []

    async def request(self, label: str, priority: Priority) -> None:
        await self.limiter.acquire(priority)
        self.order.append((label, round(self.clock.now, 6)))


def limiter(qps: float, burst: int) -> tuple[Clock, Served]:
    clock = Clock()
    return clock, Served(PriorityLimiter(qps, burst, clock=clock, sleep=fake_sleep(clock)), clock)


async def settle(tasks: list[asyncio.Task[None]]) -> None:
    await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 5)


def test_waiters_go_by_priority_fifo_within_one_at_the_unchanged_rate() -> None:
    async def steps() -> None:
        _, served = limiter(qps=10, burst=1)
        await served.request("burst", LOW)  # the one saved-up token: no waiting, nobody ahead
        waiting = [("low1", LOW), ("normal1", NORMAL), ("low2", LOW), ("high1", HIGH)]
        waiting += [("normal2", NORMAL), ("high2", HIGH)]
        tasks = [asyncio.create_task(served.request(label, p)) for label, p in waiting]
        await settle(tasks)
        assert served.order == [
            ("burst", 0.0),
            ("high1", 0.1),
            ("high2", 0.2),
            ("normal1", 0.3),
            ("normal2", 0.4),
            ("low1", 0.5),
            ("low2", 0.6),
        ]

    uvloop.run(steps())


def test_a_later_urgent_request_overtakes_those_already_waiting() -> None:
    async def steps() -> None:
        clock, served = limiter(qps=10, burst=1)
        await served.request("burst", NORMAL)
        early = [asyncio.create_task(served.request(f"event{i}", LOW)) for i in range(3)]
        await asyncio.sleep(0)
        clock.now = 0.05  # the starts come while the Events wait for their tokens
        late = [asyncio.create_task(served.request(f"start{i}", HIGH)) for i in range(2)]
        await settle(early + late)
        assert [label for label, _ in served.order] == [
            "burst",
            "start0",
            "start1",
            "event0",
            "event1",
            "event2",
        ]

    uvloop.run(steps())


def test_a_free_token_is_taken_at_once_while_nobody_as_urgent_waits() -> None:
    async def steps() -> None:
        _, served = limiter(qps=1, burst=3)
        for i in range(3):
            await served.request(f"normal{i}", NORMAL)
        assert served.order == [("normal0", 0.0), ("normal1", 0.0), ("normal2", 0.0)]
        assert served.limiter.waiting() == 0

    uvloop.run(steps())


def test_low_requests_keep_off_the_bottom_of_the_burst() -> None:
    async def steps() -> None:
        _, served = limiter(qps=20, burst=4)  # LOW takes tokens while 3 (LOW_FLOOR) are left
        assert LOW_FLOOR * 4 == 3
        tasks = [asyncio.create_task(served.request(f"low{i}", LOW)) for i in range(3)]
        tasks += [asyncio.create_task(served.request(f"high{i}", HIGH)) for i in range(2)]
        await settle(tasks)
        assert served.order == [
            ("low0", 0.0),
            ("low1", 0.0),
            ("high0", 0.0),  # the last two tokens, though low2 asked first
            ("high1", 0.0),
            ("low2", 0.15),  # once the bucket is back at 3
        ]

    uvloop.run(steps())


def test_low_requests_wait_for_the_floor_at_most_their_patience() -> None:
    async def steps() -> None:
        _, served = limiter(qps=1, burst=40)  # back at the floor (30) only after 29 s
        for _ in range(39):
            await served.limiter.acquire(HIGH)
        await settle([asyncio.create_task(served.request("low", LOW))])
        assert served.order == [("low", LOW_PATIENCE)]

    uvloop.run(steps())


def test_an_urgent_request_is_not_held_up_by_the_wait_for_the_floor() -> None:
    async def steps() -> None:
        clock = Clock()
        started = asyncio.Event()

        async def sleep(delay: float) -> None:
            await started.wait()  # the dispatcher is asleep here until the test says go
            await fake_sleep(clock)(delay)

        served = Served(PriorityLimiter(10, 10, clock=clock, sleep=sleep), clock)
        for _ in range(10):
            await served.limiter.acquire(HIGH)
        low = asyncio.create_task(served.request("low", LOW))  # waits its patience (the floor: 0.75 s)
        for _ in range(3):
            await asyncio.sleep(0)
        high = asyncio.create_task(served.request("high", HIGH))  # the next token is 0.1 s away
        await asyncio.sleep(0)
        started.set()
        await settle([low, high])
        assert served.order == [("high", 0.1), ("low", LOW_PATIENCE)]

    uvloop.run(steps())


def test_under_a_sustained_rush_each_priority_gets_its_weighted_share() -> None:
    async def steps() -> None:
        _, served = limiter(qps=10, burst=1)
        rounds = sum(WEIGHT.values()) * 10

        async def stream(priority: Priority, label: str) -> None:
            # Closed loop, as a worker or the EventRecorder: the next request once one is served.
            while len(served.order) <= rounds:
                await served.request(label, priority)

        streams = [stream(HIGH, "high") for _ in range(3)] + [stream(NORMAL, "normal"), stream(LOW, "low")]
        await settle([asyncio.create_task(s) for s in streams])
        first = [label for label, _ in served.order[:rounds]]
        assert {p: first.count(p.name.lower()) for p in Priority} == pytest.approx(
            {p: w * 10 for p, w in WEIGHT.items()}, abs=2
        )
        # Never starved: the lowest priority is served within every span of the weights' sum.
        lows = [i for i, label in enumerate(first) if label == "low"]
        assert max(b - a for a, b in zip([0, *lows], lows, strict=False)) <= sum(WEIGHT.values()) + 1
        times = [t for _, t in served.order]
        assert times[-1] == pytest.approx((len(times) - 1) / 10)  # the rate held throughout

    uvloop.run(steps())


def test_a_cancelled_waiter_costs_no_token() -> None:
    async def steps() -> None:
        _, served = limiter(qps=10, burst=1)
        await served.request("burst", NORMAL)
        gone = asyncio.create_task(served.request("gone", HIGH))
        kept = asyncio.create_task(served.request("kept", LOW))
        await asyncio.sleep(0)
        gone.cancel()
        await settle([gone, kept])
        assert served.order == [("burst", 0.0), ("kept", 0.1)]
        assert served.limiter.waiting() == 0

    uvloop.run(steps())
