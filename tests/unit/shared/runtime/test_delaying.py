"""kcm_shared.runtime.delaying: upstream AddAfter's coalescing of delayed enqueues, on the
testing kit's fake clock."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any, cast

from kcm_shared import runtime
from kcm_shared.runtime import delaying
from kcm_shared.testing import clock as kitclock


def enqueue_after(clock: kitclock.FakeClock) -> tuple[delaying.DelayedEnqueue, list[str]]:
    added: list[str] = []
    return delaying.DelayedEnqueue(added.append, clock), added


def test_a_waiting_key_is_enqueued_once_at_its_first_time() -> None:
    clock = kitclock.FakeClock()
    later, added = enqueue_after(clock)
    later("a", 10)
    clock.advance(4)
    later("a", 10)  # due at 14, after the 10 already waiting: joins it
    later("a", 6)  # due at 10: the same time
    clock.advance(5.9)
    assert added == []
    clock.advance(0.1)
    assert added == ["a"]
    clock.advance(100)
    assert added == ["a"]


def test_an_earlier_delay_moves_a_waiting_key_forward() -> None:
    clock = kitclock.FakeClock()
    later, added = enqueue_after(clock)
    later("a", 10)
    later("b", 10)
    later("a", 2)
    clock.advance(2)
    assert added == ["a"]  # once: the timer for 10 was dropped
    clock.advance(8)
    assert added == ["a", "b"]
    clock.advance(100)
    assert added == ["a", "b"]


def test_zero_or_negative_delay_enqueues_at_once_and_leaves_a_waiting_time() -> None:
    clock = kitclock.FakeClock()
    later, added = enqueue_after(clock)
    later("a", 5)
    later("a", 0)
    later("b", -1)
    assert added == ["a", "b"]
    clock.advance(5)
    assert added == ["a", "b", "a"]


def test_a_key_that_fired_may_wait_again() -> None:
    clock = kitclock.FakeClock()
    later, added = enqueue_after(clock)
    later("a", 1)
    clock.advance(1)
    later("a", 1)
    clock.advance(1)
    assert added == ["a", "a"]


def test_context_enqueue_after_goes_through_its_enqueue_on_its_clock() -> None:
    clock = kitclock.FakeClock()
    added: list[str] = []
    none = cast(Any, None)
    ctx = runtime.Context("c", none, {}, added.append, none, args=argparse.Namespace(), clock=clock)
    ctx.enqueue_after("ns/a", 3)
    ctx.enqueue_after("ns/a", 1)
    clock.advance(1)
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
