"""bench/node_failover.py's step tracking and table, on made-up watch events (the benchmark itself
runs under `make bench`)."""

from __future__ import annotations

import math
from typing import Any

import node_failover as nf
import pytest

Obj = dict[str, Any]


def node(name: str, ready: str = "True", taints: list[Obj] | None = None) -> Obj:
    return {
        "metadata": {"name": name},
        "spec": {"taints": taints or []},
        "status": {"conditions": [{"type": "Ready", "status": ready}]},
    }


def pod(name: str, node_name: str, running_ready: bool = True, deleting: bool = False) -> Obj:
    meta: Obj = {"name": name}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-29T15:00:00Z"
    status: Obj = {"phase": "Running" if running_ready else "Pending"}
    status["conditions"] = [{"type": "Ready", "status": "True" if running_ready else "False"}]
    return {"metadata": meta, "spec": {"nodeName": node_name}, "status": status}


def deployment(available: int) -> Obj:
    return {"metadata": {"name": "web"}, "status": {"availableReplicas": available}}


UNREACHABLE = {"key": nf.UNREACHABLE, "effect": "NoExecute", "timeAdded": "2026-11-29T15:00:00Z"}


def started() -> nf.Round:
    """A round of 4 replicas, 2 on the victim n1, as the watches list them at first."""
    track = nf.Round("n1", 4, frozenset({"a", "b"}))
    # The list's pods come one by one: those of the victim not seen yet are not gone.
    for name, where in (("c", "n2"), ("d", "n3"), ("a", "n1"), ("b", "n1")):
        track.pod("ADDED", pod(name, where), 0.0)
    track.node(node("n1"), 0.0)
    track.deployment(deployment(4), 0.0)
    return track


def test_a_failover_notes_each_step_when_first_seen() -> None:
    track = started()
    assert track.seen == {} and not track.done()
    track.node(node("n2", "Unknown"), 9.0)  # another node says nothing of the victim
    track.node(node("n1", "Unknown"), 10.0)
    track.node(node("n1", "Unknown", [{"key": nf.UNREACHABLE, "effect": "NoSchedule"}]), 10.1)
    track.node(node("n1", "Unknown", [UNREACHABLE]), 10.2)
    track.node(node("n1", "Unknown", [UNREACHABLE]), 10.9)  # the first sight counts
    track.deployment(deployment(2), 10.3)
    track.pod("MODIFIED", pod("a", "n1", deleting=True), 10.4)
    assert "evicted" not in track.seen
    track.pod("DELETED", pod("b", "n1"), 10.5)  # gone without a deleting update seen
    track.pod("ADDED", pod("e", "n4", running_ready=False), 10.6)
    track.pod("ADDED", pod("f", "n2", running_ready=False), 10.6)
    track.pod("MODIFIED", pod("e", "n4"), 11.0)
    assert "ready" not in track.seen
    track.pod("MODIFIED", pod("f", "n2"), 11.2)
    track.deployment(deployment(4), 11.5)
    assert track.done()
    assert track.since(1.0) == pytest.approx(
        {"unknown": 9.0, "tainted": 9.2, "evicted": 9.5, "ready": 10.2, "available": 10.5}
    )


def test_the_not_ready_taint_counts_and_replicas_on_the_victim_do_not() -> None:
    track = started()
    track.node(node("n1", "False", [{"key": nf.NOT_READY, "effect": "NoExecute"}]), 5.0)
    assert track.seen == {"tainted": 5.0}
    # A fourth Ready replica on the victim itself is no failover.
    track.pod("ADDED", pod("e", "n1"), 6.0)
    track.pod("ADDED", pod("f", "n2", deleting=True), 6.0)
    assert "ready" not in track.seen


def test_available_counts_only_once_it_fell() -> None:
    track = started()
    track.deployment(deployment(4), 3.0)
    assert "available" not in track.seen
    track.deployment({"metadata": {"name": "web"}, "status": {}}, 4.0)
    track.deployment(deployment(4), 5.0)
    assert track.seen == {"available": 5.0}


def test_the_victim_holds_most_pods_the_first_by_name_among_equals() -> None:
    pods = [pod("a", "n2"), pod("b", "n1"), pod("c", "n2"), pod("d", "n1"), pod("e", "n3")]
    assert nf.victim_of(pods) == "n1"
    assert nf.victim_of([*pods, pod("f", "n2")]) == "n2"
    with pytest.raises(RuntimeError):
        nf.victim_of([pod("a", "")])


def test_lease_times_and_medians() -> None:
    assert nf.micro_time("1970-01-01T00:00:01.250000Z") == 1.25
    assert nf.micro_time("1970-01-01T00:01:00Z") == 60.0
    out = nf.medians([{"unknown": 1.0, "ready": 4.0}, {"unknown": 3.0}, {"unknown": 2.0, "ready": 6.0}])
    assert out["unknown"] == 2.0 and out["ready"] == 5.0 and math.isnan(out["available"])
    assert nf.floor_s(10.0, 1.0, 0.5) == 11.5


def test_the_table_sets_kcm_beside_upstream_with_the_controllers_share() -> None:
    steps = {"unknown": 10.5, "tainted": 10.6, "evicted": 10.7, "ready": 12.0, "available": 12.5}
    results = {nf.UPSTREAM: [steps], nf.KCM: [{step: 2 * t for step, t in steps.items()}]}
    lines = nf.table(results, 11.0)
    assert lines[0].split()[-3:] == ["upstream", "kcm", "kcm/upstream"]
    rows = {line[:34].strip(): line[34:].split() for line in lines[1:]}
    assert rows[nf.STEPS["unknown"]] == ["10.50", "21.00", "2.00"]
    assert rows["floor"] == ["11.00", "11.00", "1.00"]
    assert rows["controllers' share (ready)"] == ["1.00", "13.00", "13.00"]
    assert rows["controllers' share (available)"] == ["1.50", "14.00", "9.33"]
    # One side alone: no ratio column.
    alone = nf.table({nf.KCM: results[nf.KCM]}, 11.0)
    assert alone[0].split()[-1] == "kcm"
