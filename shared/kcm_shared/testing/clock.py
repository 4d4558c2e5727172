"""A clock that moves only when a test moves it (upstream's k8s.io/utils/clock/testing
FakeClock is the model).

- `monotonic()` and `now()` read it: seconds for durations, an aware UTC datetime for
  timestamps; both move together, by `advance(seconds)` only.
- `call_later(delay, callback, *args)` schedules a call; `advance` makes the calls that fall
  due, in order of due time (then of scheduling), each with the clock set to its due time,
  calls scheduled meanwhile included. The returned `Timer` cancels it.

A plain class: code under test takes its methods where it takes time (`now=clock.now`), or
the whole clock where it takes a clock (it is a `runtime.delaying.Clock`).
"""

from __future__ import annotations

import datetime as dt
import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


@dataclass
class Timer:
    """A call `FakeClock.call_later` scheduled; `cancel()` before it falls due drops it."""

    due: float
    callback: Callable[..., Any]
    args: tuple[Any, ...]
    cancelled: bool = field(default=False)

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    def __init__(self, start: dt.datetime = START, monotonic: float = 1000.0) -> None:
        self._start = start
        self._origin = monotonic
        self._monotonic = monotonic
        self._order = itertools.count()
        self._timers: list[tuple[float, int, Timer]] = []

    def monotonic(self) -> float:
        return self._monotonic

    def now(self) -> dt.datetime:
        return self._start + dt.timedelta(seconds=self._monotonic - self._origin)

    def call_later(self, delay: float, callback: Callable[..., Any], *args: Any) -> Timer:
        """Call `callback(*args)` once the clock has moved `delay` seconds on from now."""
        timer = Timer(self._monotonic + max(0.0, delay), callback, args)
        heapq.heappush(self._timers, (timer.due, next(self._order), timer))
        return timer

    def has_waiters(self) -> bool:
        """Whether a call is scheduled and not cancelled."""
        return any(not timer.cancelled for _, _, timer in self._timers)

    def advance(self, seconds: float) -> None:
        """Move the clock on by `seconds`, making every call that falls due on the way."""
        if seconds < 0:
            raise ValueError(f"a clock does not go back ({seconds} s)")
        until = self._monotonic + seconds
        while self._timers and self._timers[0][0] <= until:
            _, _, timer = heapq.heappop(self._timers)
            if not timer.cancelled:
                self._monotonic = max(self._monotonic, timer.due)
                timer.callback(*timer.args)
        self._monotonic = until
