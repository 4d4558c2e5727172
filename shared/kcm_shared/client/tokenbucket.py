"""A token bucket (`qps` tokens a second, at most `burst` saved up) and a limiter that serves
waiting requests by priority.

`TokenBucket` is the overall bucket of the work queue's default rate limiter and the Event
spam filter's, as upstream uses golang.org/x/time/rate for both. `PriorityLimiter` is the
client-side API rate limit (`--kube-api-qps` / `--kube-api-burst`) of every `KubeClient`:
the same bucket, but where client-go's limiter serves its waiters first come first served,
this one serves waiting requests of a higher `Priority` first, so a controller's
latency-sensitive write (the cronjob controller's Job create) does not queue behind the
Events and status writes of earlier syncs. The rate itself is unchanged. Within a priority
the order is first come first served, and across priorities the tokens are shared by
weight (`WEIGHT`), so a steady stream of urgent writes slows the others, never starves
them; LOW requests (Events) keep off the bottom of the saved-up burst (`LOW_FLOOR`). Clock
and sleep are injected so tests need no real waiting.
"""

from __future__ import annotations

import asyncio
import collections
import enum
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

    def wait_time(self, tokens: float = 1) -> float:
        """Seconds until `tokens` are there, taking nothing (0 when they are there now)."""
        self._refill()
        return max(0.0, (tokens - self._tokens) / self.qps)

    async def acquire(self) -> None:
        delay = self.reserve()
        if delay > 0:
            await asyncio.sleep(delay)


class Priority(enum.IntEnum):
    """How urgent a request is (a lower value is more urgent)."""

    HIGH = 0  # the write a controller's latency goal is about (a CronJob's scheduled Job)
    NORMAL = 1  # everything else, and every read
    LOW = 2  # deferrable: Events


# While requests of several priorities wait, each gets tokens in proportion to its weight
# (16:4:1): a short rush of urgent requests goes almost entirely first, and under a
# sustained one the others still get their share, e.g. a fifth of the tokens for Events
# behind NORMAL writes, rather than none.
WEIGHT = {Priority.HIGH: 16, Priority.NORMAL: 4, Priority.LOW: 1}
# Most of the saved-up burst is kept for the controller's own requests: a LOW one takes a
# token while the bucket holds at least this share of its burst, at its weighted turn while
# others wait, or once it has waited LOW_PATIENCE seconds. A rush of writes then spends the
# burst on itself, not on the Events of its first writes; the patience bounds how late an
# Event goes when nobody else waits.
LOW_FLOOR = 0.75
LOW_PATIENCE = 0.25
_EPSILON = 1e-9  # seconds: a wait this short is float rounding after an exact sleep


class PriorityLimiter:
    """A `TokenBucket` whose waiting requests are served by priority rather than arrival.

    `acquire` returns at once while the bucket has a token and nobody as urgent waits (for
    LOW: nobody waits and the bucket is at `LOW_FLOOR`); otherwise the request joins its
    priority's FIFO queue, and one dispatcher task hands each token, when it comes, to the
    head of one queue. LOW requests waiting alone wait for the floor (or `LOW_PATIENCE`);
    a more urgent request arriving meanwhile restarts the dispatcher so it is not held up
    by that wait. The queue is chosen as in self-clocked fair queueing:
    each priority's next token has a finish tag, its previous one plus 1/weight; the waiting
    priority with the smallest tag (ties: the more urgent) gets the token, and the tag
    served is the virtual time from which a priority that starts waiting again counts (no
    credit saved up while it was idle). A waiter cancelled meanwhile is skipped and costs
    no token.
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
        self._queues: dict[Priority, collections.deque[tuple[float, asyncio.Future[None]]]] = {
            p: collections.deque() for p in Priority
        }
        self._finished = dict.fromkeys(Priority, 0.0)  # each priority's last finish tag
        self._virtual = 0.0  # the finish tag of the last token handed to a waiter
        self._dispatcher: asyncio.Task[None] | None = None
        self._holding_low = False  # the dispatcher waits for a LOW request's turn

    def waiting(self) -> int:
        """Requests waiting for a token (cancelled ones not yet skipped included)."""
        return sum(len(q) for q in self._queues.values())

    async def acquire(self, priority: Priority = Priority.NORMAL) -> None:
        if self._may_take_now(priority) and self.bucket.try_take():
            return
        queue = self._queues[priority]
        if not queue:
            self._finished[priority] = max(self._finished[priority], self._virtual)
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue.append((self._clock(), ready))
        if self._holding_low and priority != Priority.LOW and self._dispatcher is not None:
            # It sleeps until the LOW requests' turn, too long for this one: start it over.
            self._dispatcher.cancel()
            self._dispatcher = None
        if self._dispatcher is None or self._dispatcher.done():
            self._dispatcher = asyncio.create_task(self._dispatch())
        await ready

    def _may_take_now(self, priority: Priority) -> bool:
        """Nobody as urgent waits; for LOW, nobody waits at all and the bucket is above its floor."""
        if priority == Priority.LOW:
            return not self.waiting() and self._low_wait() <= _EPSILON
        return not any(self._queues[p] for p in Priority if p <= priority)

    def _next(self) -> Priority | None:
        """The priority whose head gets the next token; None when nobody waits."""
        best: Priority | None = None
        for p, queue in self._queues.items():
            while queue and queue[0][1].done():
                queue.popleft()
            if queue and (best is None or self._tag(p) < self._tag(best)):
                best = p
        return best

    def _low_wait(self) -> float:
        """Seconds until the bucket is back at the floor LOW requests keep off (at least a token)."""
        return self.bucket.wait_time(max(1.0, LOW_FLOOR * self.bucket.burst))

    def _tag(self, priority: Priority) -> float:
        return self._finished[priority] + 1 / WEIGHT[priority]

    async def _dispatch(self) -> None:
        """Hand out tokens until nobody waits; the queue is chosen when the token is there,
        so a request arriving during the wait for it competes for it."""
        while (chosen := self._next()) is not None:
            # `_next` dropped cancelled heads: a queue left non-empty has someone waiting.
            self._holding_low = chosen == Priority.LOW and not any(
                self._queues[p] for p in Priority if p != Priority.LOW
            )
            delay = self.bucket.wait_time()
            if self._holding_low:
                since = self._queues[chosen][0][0]
                patience = since + LOW_PATIENCE - self._clock()
                delay = max(delay, min(self._low_wait(), patience))
            if delay > _EPSILON:
                await self._sleep(delay)
                continue  # who waits may have changed meanwhile
            # The token waited for is due now; reserve() rather than try_take(), which float
            # rounding after an exact sleep could refuse.
            self.bucket.reserve()
            self._virtual = self._finished[chosen] = self._tag(chosen)
            self._queues[chosen].popleft()[1].set_result(None)
        self._holding_low = False
