"""Token bucket delays against a written-out sequence, with a fake clock."""

from __future__ import annotations

import pytest
from kcm_shared.tokenbucket import TokenBucket


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
