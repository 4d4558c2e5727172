"""A token bucket (`qps` tokens a second, at most `burst` saved up) and a limiter that serves
waiting requests by priority.

`TokenBucket` is the overall bucket of the work queue's default rate limiter and the Event
spam filter's, as upstream uses golang.org/x/time/rate for both. `PriorityLimiter` is the
client-side API rate limit (`--kube-api-qps` / `--kube-api-burst`) of every `KubeClient`:
the same bucket, but where client-go's limiter serves its waiters first come first served,
this one serves a waiting request of a higher `Priority` first, so a controller's
latency-sensitive write (the cronjob controller's Job create) does not queue behind the
Events and status writes of earlier syncs. The rate itself is unchanged. Within a priority
the order is first come first served, and the head start is bounded (`GRACE`): a request
waits for later ones of a higher priority only until it has waited its grace, so a steady
stream of urgent writes delays the others, never starves them. Clock and sleep are
injected so tests need no real waiting.
"""

from __future__ import annotations

import asyncio
import enum
import heapq
import itertools
import time
from collections.abc import Awaitable, Callable


class TokenBucket:
    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        if qps <= 0 or burst <= 0:
            raise ValueError(f"a token bucket needs qps > 0 and burst > 0, got qps={qps} burst={burst}")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
        self._last = now

    def reserve(self) -> float:
        """Take a token now or in the future; returns how many seconds until it is ours."""
        self._refill()
        self._tokens -= 1
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def try_take(self) -> bool:
        """Take a token if one is there now; a refusal costs nothing (upstream's TryAccept)."""
        self._refill()
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True

    def wait_time(self) -> float:
        """Seconds until a whole token is there, taking nothing (0 when one is there now)."""
        self._refill()
        return max(0.0, (1 - self._tokens) / self.qps)

    async def acquire(self) -> None:
        delay = self.reserve()
        if delay > 0:
            await asyncio.sleep(delay)


class Priority(enum.IntEnum):
    """How urgent a request is; a lower value is served first."""

    HIGH = 0  # the write a controller's latency goal is about (a CronJob's scheduled Job)
    NORMAL = 1  # everything else, and every read
    LOW = 2  # deferrable: Events


# Seconds a waiting request of each priority yields to requests of a higher one that arrive
# after it: a request's rank is its arrival plus its grace, smallest first. A NORMAL request
# waiting since t goes before a HIGH one arriving after t + 2 s; a LOW one, after t + 10 s.
GRACE = {Priority.HIGH: 0.0, Priority.NORMAL: 2.0, Priority.LOW: 10.0}


class PriorityLimiter:
    """A `TokenBucket` whose waiting requests are served by rank rather than arrival.

    `acquire` returns at once while the bucket has a token and nobody waits; otherwise the
    request joins the waiters, and one dispatcher task hands each token, when it comes, to
    the waiter of smallest rank (arrival + `GRACE[priority]`, ties in arrival order). A
    waiter cancelled meanwhile is skipped and costs no token.
    """

    def __init__(
        self,
        qps: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.bucket = TokenBucket(qps, burst, clock)
        self._clock = clock
        self._sleep = sleep
        self._waiting: list[tuple[float, int, asyncio.Future[None]]] = []  # a heap by rank
        self._arrivals = itertools.count()
        self._dispatcher: asyncio.Task[None] | None = None

    def waiting(self) -> int:
        """Requests waiting for a token (cancelled ones not yet skipped included)."""
        return len(self._waiting)

    async def acquire(self, priority: Priority = Priority.NORMAL) -> None:
        if not self._waiting and self.bucket.try_take():
            return
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (self._clock() + GRACE[priority], next(self._arrivals), ready))
        if self._dispatcher is None or self._dispatcher.done():
            self._dispatcher = asyncio.create_task(self._dispatch())
        await ready

    def _drop_cancelled(self) -> None:
        while self._waiting and self._waiting[0][2].done():
            heapq.heappop(self._waiting)

    async def _dispatch(self) -> None:
        """Hand out tokens until nobody waits; ranks are compared when a token is there, so a
        request arriving during the wait for it competes for it."""
        while True:
            self._drop_cancelled()
            if not self._waiting:
                return
            delay = self.bucket.wait_time()
            if delay > 0:
                await self._sleep(delay)
                self._drop_cancelled()
                if not self._waiting:
                    return
            # The token waited for is due now; reserve() rather than try_take(), which float
            # rounding after an exact sleep could refuse.
            self.bucket.reserve()
            heapq.heappop(self._waiting)[2].set_result(None)
