"""The zone queues: upstream rate_limited_queue_test.go's behaviours on a fake clock."""

from __future__ import annotations

import asyncio

from kcm_controllers.nodelifecycle.ratelimited import RateLimitedTimedQueue, TimedValue, TokenBucket


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def drain(q: RateLimitedTimedQueue, clock: Clock, results: dict[str, bool] | None = None) -> list[str]:
    seen: list[str] = []

    async def attempt(entry: TimedValue) -> tuple[bool, float]:
        seen.append(entry.value)
        return (results or {}).get(entry.value, True), 5.0

    asyncio.run(q.try_each(clock, attempt))
    return seen


def test_a_value_is_queued_once_until_removed_even_after_it_was_processed() -> None:
    clock = Clock()
    q = RateLimitedTimedQueue(10.0, clock())
    assert q.add("a", "uid", clock())
    assert not q.add("a", "uid", clock())
    assert drain(q, clock) == ["a"]
    assert not q.add("a", "uid", clock())  # still in the set: already tainted
    assert q.remove("a")
    assert q.add("a", "uid", clock())


def test_the_rate_lets_one_through_per_token_with_burst_one() -> None:
    clock = Clock()
    q = RateLimitedTimedQueue(1.0, clock())
    for name in "abc":
        q.add(name, "", clock())
    assert drain(q, clock) == ["a"]
    assert q.next_due(clock()) == 1.0
    clock.t += 0.5
    assert drain(q, clock) == []
    clock.t += 0.5
    assert drain(q, clock) == ["b"]
    clock.t += 1.0
    assert drain(q, clock) == ["c"]
    assert q.next_due(clock()) is None


def test_a_failed_attempt_comes_back_after_its_wait() -> None:
    clock = Clock()
    q = RateLimitedTimedQueue(100.0, clock())
    q.add("a", "", clock())
    assert drain(q, clock, {"a": False}) == ["a"]
    clock.t += 1.0
    assert drain(q, clock, {"a": False}) == []  # due 5 s after the failure
    clock.t += 4.0
    assert drain(q, clock) == ["a"]


def test_a_zero_rate_stops_the_queue_and_a_new_rate_starts_it_drained() -> None:
    clock = Clock()
    q = RateLimitedTimedQueue(1.0, clock())
    q.add("a", "", clock())
    q.add("b", "", clock())
    q.swap_limiter(0.0, clock())
    clock.t += 100
    assert drain(q, clock) == []
    assert q.next_due(clock()) is None
    q.swap_limiter(0.5, clock())
    assert drain(q, clock) == []  # the stopped limiter had no token: the new one starts empty
    clock.t += 2.0
    assert drain(q, clock) == ["a"]


def test_the_token_bucket_saves_no_more_than_its_burst() -> None:
    bucket = TokenBucket(2.0, 1, 0.0)
    assert bucket.try_accept(10.0)
    assert not bucket.try_accept(10.0)
    assert bucket.wait(10.0) == 0.5
    assert TokenBucket(0.0, 1, 0.0).wait(5.0) is None
