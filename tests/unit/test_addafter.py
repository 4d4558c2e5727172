"""kcm_shared.runtime.addafter.AddAfter: upstream AddAfter's coalescing of delayed adds."""

from __future__ import annotations

import asyncio

from kcm_shared.runtime import addafter


def test_a_waiting_key_is_added_once_and_zero_delay_adds_at_once() -> None:
    asyncio.run(_coalesces())


async def _coalesces() -> None:
    added: list[str] = []
    fired = asyncio.Event()

    def enqueue(key: str) -> None:
        added.append(key)
        if key == "a":
            fired.set()

    add_after = addafter.AddAfter(enqueue)
    add_after("a", 0.01)
    add_after("a", 0.01)  # joins the first
    add_after("b", 0)
    assert added == ["b"]
    await asyncio.wait_for(fired.wait(), 5)
    assert added == ["b", "a"]
    add_after("a", 0.01)  # fired: may wait again
    fired.clear()
    await asyncio.wait_for(fired.wait(), 5)
    assert added == ["b", "a", "a"]
