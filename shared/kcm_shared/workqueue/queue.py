"""An asyncio work queue with client-go's semantics: fair, stingy, re-add while processing.

`durable.DurableQueue` runs every replica's keys through one of these so a key is never
reconciled by two workers of the replica at once; controllers with purely local work may
use it directly. The guarantees are listed in the package docstring.

State, as upstream: `dirty` holds every item that needs processing, `processing` every item
a worker holds, and the FIFO holds the dirty items no worker holds. An item added while it is
processing only becomes dirty; `done()` moves it back to the FIFO.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from kcm_shared.workqueue import metrics

T = TypeVar("T", bound=Hashable)


class ShutDown(Exception):
    """Raised by `WorkQueue.get()` once the queue is shut down and has nothing left to hand out."""


class WorkQueue(Generic[T]):
    def __init__(self, name: str | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        """`name` labels the `workqueue_*` metrics; without one the queue records none."""
        self._fifo: deque[T] = deque()
        self._dirty: set[T] = set()
        self._processing: set[T] = set()
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._shutting_down = False
        self._metrics = metrics.QueueMetrics(name, clock) if name else None

    def add(self, item: T) -> None:
        """Mark `item` as needing processing. Cheap and idempotent while it waits.

        Ignored after `shutdown()`. If a worker holds the item right now, it is handed out
        again after that worker calls `done()`.
        """
        if self._shutting_down or item in self._dirty:
            return
        self._dirty.add(item)
        if self._metrics:
            self._metrics.add(item, len(self._dirty))
        if item in self._processing:
            return
        self._fifo.append(item)
        self._wake_one()

    async def get(self) -> T:
        """Wait for the next item; the caller owns it until it calls `done(item)`, which it must.

        Raises `ShutDown` when the queue was shut down and is empty. Items still queued at
        shutdown are handed out first, so workers may finish them.
        """
        while not self._fifo:
            if self._shutting_down:
                raise ShutDown
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                # A wake-up meant for us must not be lost with us: pass it on.
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()
                else:
                    self._waiters.remove(waiter)
                raise
        item = self._fifo.popleft()
        self._processing.add(item)
        self._dirty.discard(item)
        if self._metrics:
            self._metrics.get(item, len(self._dirty))
        return item

    def done(self, item: T) -> None:
        """Release `item` after processing it, whatever the outcome.

        Every `get()` must be matched by one `done()`, or the item is never handed out again.
        """
        if self._metrics:
            self._metrics.done(item)
        self._processing.discard(item)
        if item in self._dirty:
            self._fifo.append(item)
            self._wake_one()

    def len(self) -> int:
        """Items waiting for a worker (not those being processed)."""
        return len(self._fifo)

    def __len__(self) -> int:
        return len(self._fifo)

    def shutdown(self) -> None:
        """Stop accepting items; `get()` drains what is queued, then raises `ShutDown`."""
        self._shutting_down = True
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
