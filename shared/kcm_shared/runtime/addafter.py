"""A delayed enqueue that coalesces: upstream's workqueue AddAfter as the endpointslice and
endpointslice-mirroring controllers use it for their batch periods.

Upstream client-go util/workqueue/delaying_queue.go (AddAfter): a key already waiting is not
scheduled again, so the first delayed add of a key wins and later ones join it; a delay of 0 or
less adds at once. Timers live in this process only (a restart re-lists and resyncs anyway).
Called from cache event handlers, so the running loop is there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class AddAfter:
    """`add_after(key, delay)` enqueues `key` through `enqueue` once `delay` seconds passed."""

    def __init__(self, enqueue: Callable[[str], None]) -> None:
        self._enqueue = enqueue
        self._waiting: set[str] = set()

    def __call__(self, key: str, delay: float) -> None:
        if delay <= 0:
            self._enqueue(key)
            return
        if key in self._waiting:
            return
        self._waiting.add(key)
        asyncio.get_running_loop().call_later(delay, self._fire, key)

    def _fire(self, key: str) -> None:
        self._waiting.discard(key)
        self._enqueue(key)
