"""kcm_shared.runtime.delaying: upstream AddAfter's coalescing of delayed enqueues, on a fake clock."""

from __future__ import annotations

import argparse
import asyncio
import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from kcm_shared import runtime
from kcm_shared.runtime import delaying


@dataclass
class FakeTimer:
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class FakeClock:
    """Time moves only by `step`, which runs what fell due, in order of due time."""

    now: float = 1000.0
    _due: list[tuple[float, int, FakeTimer, Callable[[], None]]] = field(default_factory=list)
    _order: itertools.count[int] = field(default_factory=itertools.count)

    def monotonic(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[[], None]) -> FakeTimer:
        timer = FakeTimer()
        heapq.heappush(self._due, (self.now + delay, next(self._order), timer, callback))
        return timer

    def step(self, seconds: float) -> None:
        end = self.now + seconds
        while self._due and self._due[0][0] <= end:
            when, _, timer, callback = heapq.heappop(self._due)
            self.now = when
            if not timer.cancelled:
                callback()
        self.now = end


def enqueue_after(clock: FakeClock) -> tuple[delaying.DelayedEnqueue, list[str]]:
    added: list[str] = []
    return delaying.DelayedEnqueue(added.append, clock), added


def test_a_waiting_key_is_enqueued_once_at_its_first_time() -> None:
    clock = FakeClock()
    later, added = enqueue_after(clock)
    later("a", 10)
    clock.step(4)
    later("a", 10)  # due at 14, after the 10 already waiting: joins it
    later("a", 6)  # due at 10: the same time
    clock.step(5.9)
    assert added == []
    clock.step(0.1)
    assert added == ["a"]
    clock.step(100)
    assert added == ["a"]


def test_an_earlier_delay_moves_a_waiting_key_forward() -> None:
    clock = FakeClock()
    later, added = enqueue_after(clock)
    later("a", 10)
    later("b", 10)
    later("a", 2)
    clock.step(2)
    assert added == ["a"]  # once: the timer for 10 was dropped
    clock.step(8)
    assert added == ["a", "b"]
    clock.step(100)
    assert added == ["a", "b"]


def test_zero_or_negative_delay_enqueues_at_once_and_leaves_a_waiting_time() -> None:
    clock = FakeClock()
    later, added = enqueue_after(clock)
    later("a", 5)
    later("a", 0)
    later("b", -1)
    assert added == ["a", "b"]
    clock.step(5)
    assert added == ["a", "b", "a"]


def test_a_key_that_fired_may_wait_again() -> None:
    clock = FakeClock()
    later, added = enqueue_after(clock)
    later("a", 1)
    clock.step(1)
    later("a", 1)
    clock.step(1)
    assert added == ["a", "a"]


def test_context_enqueue_after_goes_through_its_enqueue_on_its_clock() -> None:
    clock = FakeClock()
    added: list[str] = []
    none = cast(Any, None)
    ctx = runtime.Context("c", none, {}, added.append, none, args=argparse.Namespace(), clock=clock)
    ctx.enqueue_after("ns/a", 3)
    ctx.enqueue_after("ns/a", 1)
    clock.step(1)
    assert added == ["ns/a"]


def test_the_loop_clock_fires_on_the_running_loop() -> None:
    async def scenario() -> list[str]:
        fired = asyncio.Event()
        added: list[str] = []

        def enqueue(key: str) -> None:
            added.append(key)
            fired.set()

        later = delaying.DelayedEnqueue(enqueue, delaying.LoopClock())
        later("a", 0.01)
        later("a", 0.01)
        await asyncio.wait_for(fired.wait(), 5)
        await asyncio.sleep(0.02)
        return added

    assert asyncio.run(scenario()) == ["a"]
