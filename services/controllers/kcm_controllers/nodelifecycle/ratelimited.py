"""The rate-limited zone queues of nodes waiting for a NoExecute taint.

Upstream pkg/controller/nodelifecycle/scheduler/rate_limited_queue.go (v1.32) and the token
bucket of client-go's util/flowcontrol, on an injected monotonic clock. Used by
`controller.NodeLifecycle`, one queue per zone:
- `add` queues a node once: a node already in the queue's set (even one whose taint was
  written and left the queue) is not queued again until `remove` (upstream keeps the set
  past the write, so a tainted node is not tainted again every monitor pass);
- `try_each` walks the queue in order of when each entry is due, spending one token per entry
  (burst 1, as upstream's EvictionRateLimiterBurst), and stops at the first entry not due or
  when the bucket is empty; a failed entry comes back `wait` seconds later;
- `swap_limiter(qps)` changes the rate when the zone's state changes; qps <= 0 stops it.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

BURST = 1  # upstream EvictionRateLimiterBurst


class TokenBucket:
    """client-go's token bucket limiter (`TryAccept` only): `qps` tokens a second, at most
    `burst` saved; qps <= 0 never accepts (upstream's fake never-limiter)."""

    def __init__(self, qps: float, burst: int, now: float) -> None:
        self.qps = qps
        self.burst = burst
        self._tokens = float(burst) if qps > 0 else 0.0
        self._last = now

    def _refill(self, now: float) -> None:
        if self.qps > 0:
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now

    def try_accept(self, now: float) -> bool:
        self._refill(now)
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    def wait(self, now: float) -> float | None:
        """Seconds until a token is there (0 when one is now); None when none ever comes."""
        if self.qps <= 0:
            return None
        self._refill(now)
        return max(0.0, (1.0 - self._tokens) / self.qps)


@dataclass(order=True)
class TimedValue:
    process_at: float
    seq: int
    value: str = field(compare=False)
    uid: str = field(compare=False)
    added: float = field(compare=False)


# What `try_each` calls with each due entry: (done, wait); not done comes back after `wait`.
Attempt = Callable[[TimedValue], Awaitable[tuple[bool, float]]]


class RateLimitedTimedQueue:
    def __init__(self, qps: float, now: float) -> None:
        self.limiter = TokenBucket(qps, BURST, now)
        self._heap: list[TimedValue] = []
        self._set: set[str] = set()
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, value: str, uid: str, now: float) -> bool:
        """Queue `value` due now; False when it is in the set already."""
        if value in self._set:
            return False
        self._set.add(value)
        heapq.heappush(self._heap, TimedValue(now, next(self._seq), value, uid, now))
        return True

    def remove(self, value: str) -> bool:
        """Take `value` out of the queue and the set; True when it was in the set."""
        if value not in self._set:
            return False
        self._set.discard(value)
        kept = [v for v in self._heap if v.value != value]
        if len(kept) != len(self._heap):
            self._heap = kept
            heapq.heapify(self._heap)
        return True

    async def try_each(self, now: Callable[[], float], attempt: Attempt) -> None:
        """Offer due entries to `attempt` while the limiter lets them through (the caller
        owes nothing: a done entry leaves the queue but stays in the set)."""
        while self._heap:
            if not self.limiter.try_accept(now()):
                return
            head = self._heap[0]
            t = now()
            if t < head.process_at:
                return
            done, wait = await attempt(head)
            if not self._heap or self._heap[0] is not head:
                continue  # `attempt` changed the queue (a remove): look again
            heapq.heappop(self._heap)
            if not done:
                head.process_at = t + wait
                head.seq = next(self._seq)
                heapq.heappush(self._heap, head)

    def next_due(self, now: float) -> float | None:
        """Seconds until `try_each` could do something, or None (empty, or stopped)."""
        if not self._heap:
            return None
        wait = self.limiter.wait(now)
        if wait is None:
            return None
        return max(wait, self._heap[0].process_at - now)

    def swap_limiter(self, qps: float, now: float) -> None:
        """A new rate; with burst 1, a bucket that is empty now leaves the new one empty too."""
        if qps == self.limiter.qps:
            return
        was_empty = not self.limiter.try_accept(now)
        self.limiter = TokenBucket(qps, BURST, now)
        if qps > 0 and was_empty:
            self.limiter.try_accept(now)
