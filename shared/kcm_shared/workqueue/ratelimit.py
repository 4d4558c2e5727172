"""Retry delays for failed work items, as client-go's default controller rate limiter.

`durable.DurableQueue` asks `when(key)` after a failed reconcile and naks the message with
that delay; it calls `forget(key)` once the key succeeds. Limiters return a delay and never
sleep, so one failing key never holds up a worker.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Protocol

from kcm_shared import tokenbucket


class RateLimiter(Protocol):
    def when(self, item: Hashable) -> float:
        """Seconds to wait before retrying `item`; counts one more failure of it."""

    def forget(self, item: Hashable) -> None:
        """Clear `item`'s failure history; call it once the item succeeded (or was given up)."""

    def num_requeues(self, item: Hashable) -> int:
        """How many times `when` was asked for `item` since it was last forgotten."""


class ItemExponentialFailureRateLimiter:
    """`base * 2**failures`, capped at `max_delay`, per item."""

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        self._base = base_delay
        self._max = max_delay
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        exp = self._failures.get(item, 0)
        self._failures[item] = exp + 1
        # Past 2**64 every sane base is over the cap; stopping there avoids a float overflow.
        if exp >= 64:
            return self._max
        return min(self._base * 2.0**exp, self._max)

    def forget(self, item: Hashable) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        return self._failures.get(item, 0)


class BucketRateLimiter:
    """One token bucket for all items: bounds the overall retry rate, keeps no per-item state."""

    def __init__(
        self, qps: float = 10.0, burst: int = 100, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._bucket = tokenbucket.TokenBucket(qps, burst, clock)

    def when(self, item: Hashable) -> float:
        return self._bucket.reserve()

    def forget(self, item: Hashable) -> None:
        pass

    def num_requeues(self, item: Hashable) -> int:
        return 0


class MaxOfRateLimiter:
    """The longest delay of all its limiters; asks every one, so each counts the failure."""

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self._limiters = limiters

    def when(self, item: Hashable) -> float:
        return max([limiter.when(item) for limiter in self._limiters])

    def forget(self, item: Hashable) -> None:
        for limiter in self._limiters:
            limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return max(limiter.num_requeues(item) for limiter in self._limiters)


def default_controller_rate_limiter(clock: Callable[[], float] = time.monotonic) -> MaxOfRateLimiter:
    """Per item 5 ms doubling to 1000 s, and overall 10 retries/s with a burst of 100."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0), BucketRateLimiter(10.0, 100, clock)
    )
