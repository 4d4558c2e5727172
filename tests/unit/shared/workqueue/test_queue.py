"""Scenario tests of the in-process work queue's guarantees (fair, stingy, re-add, shutdown)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest
import uvloop
from kcm_shared.workqueue import queue
from prometheus_client import REGISTRY


def run(body: Coroutine[Any, Any, None]) -> None:
    uvloop.run(body)


async def settle() -> None:
    """Let every ready task run; the queue wakes getters within a few loop turns."""
    for _ in range(10):
        await asyncio.sleep(0)


def test_fair_first_in_first_out() -> None:
    async def body() -> None:
        q: queue.WorkQueue[str] = queue.WorkQueue()
        for item in ["a", "b", "c"]:
            q.add(item)
        assert [await q.get() for _ in range(3)] == ["a", "b", "c"]

    run(body())


def test_duplicates_collapse_while_waiting() -> None:
    async def body() -> None:
        q: queue.WorkQueue[str] = queue.WorkQueue()
        for item in ["a", "b", "a", "a", "b"]:
            q.add(item)
        assert q.len() == 2
        assert [await q.get(), await q.get()] == ["a", "b"]
        assert len(q) == 0

    run(body())


def test_add_while_processing_hands_out_again_after_done() -> None:
    async def body() -> None:
        q: queue.WorkQueue[str] = queue.WorkQueue()
        q.add("a")
        item = await q.get()
        q.add("a")
        q.add("a")
        assert q.len() == 0, "an item being processed must not be queued a second time"
        q.done(item)
        assert q.len() == 1
        assert await q.get() == "a"
        q.done("a")
        assert q.len() == 0

    run(body())


def test_never_two_workers_on_one_item() -> None:
    async def body() -> None:
        q: queue.WorkQueue[str] = queue.WorkQueue()
        q.add("a")
        first = await q.get()
        q.add("a")
        second = asyncio.create_task(q.get())
        await settle()
        assert not second.done(), "a second worker got an item the first still holds"
        q.done(first)
        assert await asyncio.wait_for(second, 5) == "a"

    run(body())


def test_waiting_worker_gets_item_added_later() -> None:
    async def body() -> None:
        q: queue.WorkQueue[str] = queue.WorkQueue()
        waiter = asyncio.create_task(q.get())
        await settle()
        q.add("late")
        assert await asyncio.wait_for(waiter, 5) == "late"

    run(body())


def test_cancelled_worker_passes_its_wakeup_on() -> None:
    async def body() -> None:
        q: queue.WorkQueue[str] = queue.WorkQueue()
        first = asyncio.create_task(q.get())
        second = asyncio.create_task(q.get())
        await settle()
        q.add("a")  # wakes `first`, which is cancelled before it can take the item
        first.cancel()
        assert await asyncio.wait_for(second, 5) == "a"

    run(body())


def test_shutdown_drains_then_raises() -> None:
    async def body() -> None:
        q: queue.WorkQueue[str] = queue.WorkQueue()
        q.add("a")
        q.shutdown()
        q.add("b")  # ignored once shutting down
        assert q.shutting_down
        assert await q.get() == "a"
        with pytest.raises(queue.ShutDown):
            await q.get()

    run(body())


def test_shutdown_releases_waiting_workers() -> None:
    async def body() -> None:
        q: queue.WorkQueue[str] = queue.WorkQueue()
        waiters = [asyncio.create_task(q.get()) for _ in range(3)]
        await settle()
        q.shutdown()
        results = await asyncio.wait_for(asyncio.gather(*waiters, return_exceptions=True), 5)
        assert all(isinstance(r, queue.ShutDown) for r in results)

    run(body())


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def sample(metric: str, name: str) -> float | None:
    return REGISTRY.get_sample_value(metric, {"name": name})


def test_metrics_follow_upstream_accounting() -> None:
    async def body() -> None:
        clock = Clock()
        name = "unit-metrics"
        q: queue.WorkQueue[str] = queue.WorkQueue(name, clock)
        q.add("a")
        q.add("a")
        q.add("b")
        assert sample("workqueue_adds_total", name) == 2
        assert sample("workqueue_depth", name) == 2
        clock.now += 2
        item = await q.get()
        assert sample("workqueue_depth", name) == 1
        assert sample("workqueue_queue_duration_seconds_sum", name) == pytest.approx(2)
        clock.now += 3
        assert sample("workqueue_unfinished_work_seconds", name) == pytest.approx(3)
        assert sample("workqueue_longest_running_processor_seconds", name) == pytest.approx(3)
        q.done(item)
        assert sample("workqueue_work_duration_seconds_sum", name) == pytest.approx(3)
        assert sample("workqueue_work_duration_seconds_bucket", name) is None  # needs the `le` label
        assert (
            REGISTRY.get_sample_value("workqueue_work_duration_seconds_bucket", {"name": name, "le": "10.0"})
            == 1
        )
        assert sample("workqueue_unfinished_work_seconds", name) == 0

    run(body())
