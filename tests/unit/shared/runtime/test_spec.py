"""`runtime.Context`'s partition hooks: what a controller registers with `on_partitions_lost` is
called with the ownership test when the Manager stops partitions."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

from kcm_shared import runtime
from kcm_shared.bus import subjects
from kcm_shared.controllerutil import ownwrites
from kcm_shared.runtime import manager
from kcm_shared.testing import fakeclient


def test_memory_of_keys_whose_partition_moved_away_is_forgotten() -> None:
    ctx = runtime.Context("c", fakeclient.FakeClient(), {}, lambda key: None, cast(Any, None))
    writes: ownwrites.OwnWrites[Any] = ownwrites.OwnWrites()
    writes.record("ns/a", "1", cast(Any, None))
    writes.record("ns/b", "1", cast(Any, None))
    seen: list[bool] = []
    ctx.on_partitions_lost(writes.retain)
    ctx.on_partitions_lost(lambda owned: seen.append(owned("ns/a")))
    ctx.partitions_lost(lambda key: key == "ns/a")
    assert len(writes) == 1 and seen == [True]


class _Queue:
    def __init__(self) -> None:
        self.stopped: list[int] = []

    async def stop_partition(self, partition: int) -> None:
        self.stopped.append(partition)


class _Members:
    """Owns partition 0 of 2 after the change."""

    def partitions(self, name: str) -> int:
        return 2

    def owns(self, name: str, partition: int) -> bool:
        return partition == 0


def test_the_manager_has_controllers_forget_the_keys_of_partitions_it_stopped() -> None:
    ctx = runtime.Context("c", fakeclient.FakeClient(), {}, lambda key: None, cast(Any, None))
    kept: list[str] = []
    keys = [f"ns/k{i}" for i in range(8)]
    ctx.on_partitions_lost(lambda owned: kept.extend(k for k in keys if owned(k)))
    mgr = manager.Manager.__new__(manager.Manager)  # only what _on_change reads
    queue = _Queue()
    mgr.running = {"c": cast(Any, SimpleNamespace(ctx=ctx, queue=queue))}
    mgr.members = cast(Any, _Members())
    asyncio.run(mgr._on_change("c", set(), {1}))
    assert queue.stopped == [1]
    assert kept == [k for k in keys if subjects.partition_of(k, 2) == 0]


class _Regained(_Members):
    """Owns both partitions again by the time the stopped ones are forgotten (a lapsed grant)."""

    def owns(self, name: str, partition: int) -> bool:
        return True


def test_a_partition_lost_and_granted_back_is_forgotten_all_the_same() -> None:
    # A lapse drops every partition and the next reply grants them back before the stops are
    # done; the keys of the stopped partitions must still start afresh (issue 33: a ReplicaSet
    # whose sync the stop cancelled kept expecting pods that were never created).
    ctx = runtime.Context("c", fakeclient.FakeClient(), {}, lambda key: None, cast(Any, None))
    kept: list[str] = []
    keys = [f"ns/k{i}" for i in range(8)]
    ctx.on_partitions_lost(lambda owned: kept.extend(k for k in keys if owned(k)))
    mgr = manager.Manager.__new__(manager.Manager)
    mgr.running = {"c": cast(Any, SimpleNamespace(ctx=ctx, queue=_Queue()))}
    mgr.members = cast(Any, _Regained())
    asyncio.run(mgr._on_change("c", set(), {1}))
    assert kept == [k for k in keys if subjects.partition_of(k, 2) == 0]
    assert 0 < len(kept) < len(keys)
