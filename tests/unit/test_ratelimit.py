"""Retry rate limiters against written-out delay sequences, with a fake clock."""

from __future__ import annotations

import pytest
from kcm_shared.workqueue import ratelimit


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_item_exponential_doubles_per_item_until_forgotten() -> None:
    limiter = ratelimit.ItemExponentialFailureRateLimiter(0.001, 1.0)
    assert [limiter.when("one") for _ in range(5)] == pytest.approx([0.001, 0.002, 0.004, 0.008, 0.016])
    assert limiter.num_requeues("one") == 5
    assert [limiter.when("two") for _ in range(2)] == pytest.approx([0.001, 0.002])
    assert limiter.num_requeues("two") == 2
    limiter.forget("one")
    assert limiter.num_requeues("one") == 0
    assert limiter.when("one") == pytest.approx(0.001)


def test_item_exponential_caps_and_never_overflows() -> None:
    limiter = ratelimit.ItemExponentialFailureRateLimiter(0.005, 1000.0)
    delays = [limiter.when("k") for _ in range(2000)]
    assert delays[:3] == pytest.approx([0.005, 0.01, 0.02])
    assert delays[17] == pytest.approx(0.005 * 2**17)  # 655.36 s, the last one under the cap
    assert set(delays[18:]) == {1000.0}


def test_bucket_is_free_for_the_burst_then_paces_at_qps() -> None:
    clock = Clock()
    limiter = ratelimit.BucketRateLimiter(qps=10, burst=3, clock=clock)
    assert [limiter.when(i) for i in range(5)] == pytest.approx([0, 0, 0, 0.1, 0.2])
    assert limiter.num_requeues(0) == 0
    limiter.forget(0)  # keeps no per-item state
    clock.now = 100.0
    assert limiter.when("x") == 0


def test_max_of_takes_the_longest_delay_and_forgets_everywhere() -> None:
    clock = Clock()
    limiter = ratelimit.MaxOfRateLimiter(
        ratelimit.ItemExponentialFailureRateLimiter(0.005, 1000.0),
        ratelimit.BucketRateLimiter(qps=10, burst=2, clock=clock),
    )
    # Item backoff while the bucket has tokens, the bucket's pace once it ran dry.
    assert [limiter.when(k) for k in ["a", "b", "c", "d"]] == pytest.approx([0.005, 0.005, 0.1, 0.2])
    clock.now = 10.0
    assert [limiter.when("a") for _ in range(2)] == pytest.approx([0.01, 0.02])
    assert limiter.num_requeues("a") == 3
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0


def test_max_of_needs_a_limiter() -> None:
    with pytest.raises(ValueError, match="at least one"):
        ratelimit.MaxOfRateLimiter()


def test_default_controller_rate_limiter_sequence() -> None:
    clock = Clock()
    limiter = ratelimit.default_controller_rate_limiter(clock)
    delays = [limiter.when("k") for _ in range(20)]
    expected = [min(0.005 * 2**n, 1000.0) for n in range(20)]
    assert delays == pytest.approx(expected)
    assert delays[-1] == 1000.0
    # 80 more failures of other keys use up the burst of 100; the next one waits for a token.
    for n in range(80):
        limiter.when(f"other-{n}")
    assert limiter.when("fresh") == pytest.approx(0.1)
