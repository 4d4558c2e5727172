"""Balanced, sticky assignment of one controller's work partitions to its live replicas.

Pure functions, called by `state.Coordinator` on every heartbeat. Balanced: each replica
gets floor(P/n) or ceil(P/n) partitions. Sticky: a partition stays with its current owner
whenever balance allows, so a join or leave moves the fewest partitions possible (a join
moves only what the newcomer needs; a leave moves only the leaver's partitions).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def assign(partitions: int, replicas: Iterable[str], current: Mapping[int, str]) -> dict[int, str]:
    """Partition -> replica for partitions 0..P-1; `current` is the previous owner of each, if any."""
    members = sorted(set(replicas))
    if not members or partitions <= 0:
        return {}
    mine: dict[str, list[int]] = {m: [] for m in members}
    for p in range(partitions):
        owner = current.get(p)
        if owner in mine:
            mine[owner].append(p)
    base, extra = divmod(partitions, len(members))
    # The replicas that already own the most keep the extra ones: fewer moves.
    by_load = sorted(members, key=lambda m: (-len(mine[m]), m))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_load)}
    result: dict[int, str] = {}
    for m in members:
        for p in mine[m][: quota[m]]:
            result[p] = m
    room = [m for m in members for _ in range(quota[m] - min(quota[m], len(mine[m])))]
    free = [p for p in range(partitions) if p not in result]
    result.update(zip(free, room, strict=True))
    return result


def moves(before: Mapping[int, str], after: Mapping[int, str]) -> int:
    """How many partitions changed owner (for tests and logs)."""
    return sum(1 for p, owner in after.items() if before.get(p) not in (None, owner))
