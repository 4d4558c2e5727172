"""Retry rate limiters against written-out delay sequences, with a fake clock."""

from __future__ import annotations

import pytest
from kcm_shared.workqueue import ratelimit


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_item_exponential_doubles_with_the_failure_count_it_is_given() -> None:
    limiter = ratelimit.ItemExponentialFailureRateLimiter(0.001, 1.0)
    assert [limiter.when("one", n) for n in range(1, 6)] == pytest.approx([0.001, 0.002, 0.004, 0.008, 0.016])
    # No state per item: the count travels with the work item, so another key (or another
    # replica asking for the same key) gets the delay of the count it passes.
    assert limiter.when("two", 1) == pytest.approx(0.001)
    assert limiter.when("one", 3) == pytest.approx(0.004)
    assert limiter.when("one", 0) == pytest.approx(0.001), "a count below 1 is a first failure"


def test_item_exponential_caps_and_never_overflows() -> None:
    limiter = ratelimit.ItemExponentialFailureRateLimiter(0.005, 1000.0)
    delays = [limiter.when("k", n) for n in range(1, 2001)]
    assert delays[:3] == pytest.approx([0.005, 0.01, 0.02])
    assert delays[17] == pytest.approx(0.005 * 2**17)  # 655.36 s, the last one under the cap
    assert set(delays[18:]) == {1000.0}


def test_bucket_is_free_for_the_burst_then_paces_at_qps() -> None:
    clock = Clock()
    limiter = ratelimit.BucketRateLimiter(qps=10, burst=3, clock=clock)
    assert [limiter.when(i, 1) for i in range(5)] == pytest.approx([0, 0, 0, 0.1, 0.2])
    clock.now = 100.0
    assert limiter.when("x", 1) == 0


def test_max_of_takes_the_longest_delay() -> None:
    clock = Clock()
    limiter = ratelimit.MaxOfRateLimiter(
        ratelimit.ItemExponentialFailureRateLimiter(0.005, 1000.0),
        ratelimit.BucketRateLimiter(qps=10, burst=2, clock=clock),
    )
    # Item backoff while the bucket has tokens, the bucket's pace once it ran dry.
    assert [limiter.when(k, 1) for k in ["a", "b", "c", "d"]] == pytest.approx([0.005, 0.005, 0.1, 0.2])
    clock.now = 10.0
    assert [limiter.when("a", n) for n in (2, 3)] == pytest.approx([0.01, 0.02])


def test_max_of_needs_a_limiter() -> None:
    with pytest.raises(ValueError, match="at least one"):
        ratelimit.MaxOfRateLimiter()


def test_default_controller_rate_limiter_sequence() -> None:
    """client-go's DefaultControllerRateLimiter, written out: 5 ms doubling, capped at 1000 s."""
    clock = Clock()
    limiter = ratelimit.default_controller_rate_limiter(clock)
    delays = [limiter.when("k", n) for n in range(1, 22)]
    expected = [
        0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96,
        81.92, 163.84, 327.68, 655.36, 1000.0, 1000.0, 1000.0,
    ]  # fmt: skip
    assert delays == pytest.approx(expected)
    clock.now = 1e6  # a day later the key still fails: still retried, still at the cap
    assert limiter.when("k", 10_000) == 1000.0
    # 99 more failures of other keys use up the refilled burst of 100; the next one waits.
    for n in range(99):
        limiter.when(f"other-{n}", 1)
    assert limiter.when("fresh", 1) == pytest.approx(0.1)
