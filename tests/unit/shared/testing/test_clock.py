"""kcm_shared.testing.clock.FakeClock: time moves only by advance, and scheduled calls fall due
in order, each seeing its own due time."""

from __future__ import annotations

import datetime as dt

import pytest
from kcm_shared.testing import clock


def test_monotonic_and_wall_time_move_together_only_when_advanced() -> None:
    c = clock.FakeClock(dt.datetime(2026, 5, 1, tzinfo=dt.UTC), monotonic=50.0)
    assert (c.monotonic(), c.now()) == (50.0, dt.datetime(2026, 5, 1, tzinfo=dt.UTC))
    c.advance(1.5)
    assert (c.monotonic(), c.now()) == (51.5, dt.datetime(2026, 5, 1, 0, 0, 1, 500000, tzinfo=dt.UTC))
    with pytest.raises(ValueError):
        c.advance(-1)


def test_calls_fall_due_in_order_each_at_its_own_time() -> None:
    c = clock.FakeClock(monotonic=0.0)
    fired: list[tuple[str, float]] = []
    c.call_later(3, lambda: fired.append(("c", c.monotonic())))
    c.call_later(1, lambda name: fired.append((name, c.monotonic())), "a")
    c.call_later(1, lambda: fired.append(("a2", c.monotonic())))  # same due time: scheduling order
    c.advance(0.5)
    assert fired == []
    c.advance(2)
    assert fired == [("a", 1.0), ("a2", 1.0)] and c.monotonic() == 2.5
    c.advance(10)
    assert fired[2:] == [("c", 3.0)] and not c.has_waiters()


def test_a_call_scheduled_while_advancing_fires_when_it_falls_inside() -> None:
    c = clock.FakeClock(monotonic=0.0)
    fired: list[float] = []

    def tick() -> None:
        fired.append(c.monotonic())
        if len(fired) < 5:
            c.call_later(2, tick)

    c.call_later(2, tick)
    c.advance(7)
    assert fired == [2.0, 4.0, 6.0] and c.has_waiters()


def test_a_cancelled_call_never_fires() -> None:
    c = clock.FakeClock()
    fired: list[int] = []
    timer = c.call_later(1, fired.append, 1)
    assert c.has_waiters()
    timer.cancel()
    assert not c.has_waiters()
    c.advance(5)
    assert fired == []
