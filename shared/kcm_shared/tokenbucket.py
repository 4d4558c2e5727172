"""A token bucket: `qps` tokens a second, at most `burst` saved up.

Used for client-side API rate limits (`--kube-api-qps` / `--kube-api-burst`) and as the
overall bucket of the work queue's default rate limiter, as upstream uses
golang.org/x/time/rate for both. The clock is injected so tests need no sleeps.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class TokenBucket:
    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        if qps <= 0 or burst <= 0:
            raise ValueError(f"a token bucket needs qps > 0 and burst > 0, got qps={qps} burst={burst}")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()

    def reserve(self) -> float:
        """Take a token now or in the future; returns how many seconds until it is ours."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def try_take(self) -> bool:
        """Take a token if one is there now; a refusal costs nothing (upstream's TryAccept)."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
        self._last = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True

    async def acquire(self) -> None:
        delay = self.reserve()
        if delay > 0:
            await asyncio.sleep(delay)
