"""Enqueue later: upstream's workqueue `AddAfter`, behind `Context.enqueue_after(key, delay)`.

- A key already waiting keeps its earliest time: a later delay joins it, an earlier one moves
  it forward (client-go util/workqueue/delaying_queue.go). So pod events within a batch period
  make one reconcile, and a wake-up never comes later than the soonest one asked for.
- A delay of 0 or less enqueues at once, and leaves a waiting time of the key as it is.
- When the time comes the key goes through the Context's `enqueue`, which keeps it only while
  this replica owns the key's partition. The timers live in this process only: a restart or a
  hand-over enqueues every key of the partition anyway. What must survive them is the
  reconcile's own `Result(requeue_after=...)` (`kcm_shared.reconcile` says when to use which).

Time comes from a `Clock` (monotonic seconds, and a callback after a delay): the event loop's
in the runtime (`LoopClock`), a fake one in tests. Called from cache event handlers, which run
on the loop.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """What waiting needs of time."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back."""
        ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        """Call `callback` once `delay` seconds passed, unless the returned timer is cancelled."""
        ...


class LoopClock:
    """The running event loop's clock (`loop.time()` is monotonic)."""

    def monotonic(self) -> float:
        return asyncio.get_running_loop().time()

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        return asyncio.get_running_loop().call_later(delay, callback)


class DelayedEnqueue:
    """`enqueue_after(key, delay)`: `enqueue(key)` once `delay` seconds passed, coalesced per key."""

    def __init__(self, enqueue: Callable[[str], None], clock: Clock) -> None:
        self._enqueue = enqueue
        self._clock = clock
        self._waiting: dict[str, tuple[float, Timer]] = {}  # key -> (when it is due, its timer)

    def __call__(self, key: str, delay: float) -> None:
        if delay <= 0:
            self._enqueue(key)
            return
        due = self._clock.monotonic() + delay
        waiting = self._waiting.get(key)
        if waiting is not None:
            if waiting[0] <= due:
                return
            waiting[1].cancel()
        self._waiting[key] = (due, self._clock.call_later(delay, functools.partial(self._fire, key)))

    def _fire(self, key: str) -> None:
        del self._waiting[key]
        self._enqueue(key)
