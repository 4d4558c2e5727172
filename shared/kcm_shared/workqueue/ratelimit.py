"""Retry delays for failed work items, as client-go's default controller rate limiter.

`durable.DurableQueue` asks `when(key, failures)` after a failed reconcile and re-publishes
the item to run after that delay. Unlike client-go, the limiters keep no per-item count:
the count of failures in a row travels with the work item (a header), so a restart or a
partition hand-over to another replica continues the backoff where it was rather than
starting it over. Limiters return a delay and never sleep, so one failing key never holds
up a worker.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Protocol

from kcm_shared.client import tokenbucket


class RateLimiter(Protocol):
    def when(self, item: Hashable, failures: int) -> float:
        """Seconds to wait before retrying `item`, which has just failed for the `failures`-th
        time in a row (1 for its first failure)."""


class ItemExponentialFailureRateLimiter:
    """`base * 2**(failures - 1)`, capped at `max_delay`, per item."""

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        self._base = base_delay
        self._max = max_delay

    def when(self, item: Hashable, failures: int) -> float:
        exp = max(0, failures - 1)
        # Past 2**64 every sane base is over the cap; stopping there avoids a float overflow.
        if exp >= 64:
            return self._max
        return min(self._base * 2.0**exp, self._max)


class BucketRateLimiter:
    """One token bucket for all items: bounds the overall retry rate, keeps no per-item state."""

    def __init__(
        self, qps: float = 10.0, burst: int = 100, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._bucket = tokenbucket.TokenBucket(qps, burst, clock)

    def when(self, item: Hashable, failures: int) -> float:
        return self._bucket.reserve()


class MaxOfRateLimiter:
    """The longest delay of all its limiters; asks every one, so each bucket pays its token."""

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self._limiters = limiters

    def when(self, item: Hashable, failures: int) -> float:
        return max([limiter.when(item, failures) for limiter in self._limiters])


def default_controller_rate_limiter(clock: Callable[[], float] = time.monotonic) -> MaxOfRateLimiter:
    """Per item 5 ms doubling to 1000 s, and overall 10 retries/s with a burst of 100."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0), BucketRateLimiter(10.0, 100, clock)
    )
