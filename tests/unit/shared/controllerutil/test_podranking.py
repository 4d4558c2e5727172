"""Pod ordering for deletion, with upstream's ActivePods(WithRanks) cases as data."""

from __future__ import annotations

import datetime as dt
import random

import msgspec
import pytest
from kcm_shared.controllerutil import podranking

NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC)
MONTH_AGO = NOW - dt.timedelta(days=30)
HOURS_2 = NOW - dt.timedelta(hours=2)
HOURS_5 = NOW - dt.timedelta(hours=5)
HOURS_8 = NOW - dt.timedelta(hours=8)


def pod(
    name: str,
    node: str,
    phase: str,
    ready: bool,
    restarts: int = 0,
    ready_since: dt.datetime | None = None,
    created: dt.datetime | None = None,
    annotations: dict[str, str] | None = None,
) -> podranking.PodView:
    doc = {
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"nodeName": node},
        "status": {
            "phase": phase,
            "containerStatuses": [{"restartCount": restarts}],
            "conditions": [{"type": "Ready", "status": "True"}] if ready else [],
        },
    }
    if created is not None:
        doc["metadata"]["creationTimestamp"] = created.strftime("%Y-%m-%dT%H:%M:%SZ")  # type: ignore[index]
    if ready and ready_since is not None:
        doc["status"]["conditions"][0]["lastTransitionTime"] = ready_since.strftime("%Y-%m-%dT%H:%M:%SZ")  # type: ignore[index]
    return msgspec.convert(doc, podranking.PodView)


UNSCHEDULED = pod("unscheduled", "", "Pending", False)
PENDING = pod("pending", "node", "Pending", False)
UNKNOWN = pod("unknown-phase", "node", "Unknown", False)
NOT_READY = pod("not-ready", "node", "Running", False)
READY_NO_TRANSITION = pod("ready-no-last-transition-time", "node", "Running", True)
READY_NOW = pod("ready-now", "node", "Running", True, 0, NOW, NOW)
READY_THEN = pod("ready-then", "node", "Running", True, 0, MONTH_AGO, MONTH_AGO)
READY_HIGH_RESTARTS = pod("ready-high-restarts", "node", "Running", True, 9001, NOW, NOW)
READY_NOW_CREATED_THEN = pod("ready-now-created-then", "node", "Running", True, 0, NOW, MONTH_AGO)
LOW_COST = pod(
    "low-deletion-cost", "node", "Running", True, 0, NOW, MONTH_AGO, {podranking.POD_DELETION_COST: "10"}
)
HIGH_COST = pod(
    "high-deletion-cost", "node", "Running", True, 0, NOW, MONTH_AGO, {podranking.POD_DELETION_COST: "100"}
)
UNSCHEDULED_5H = pod("unscheduled-5-hours", "", "Pending", False, 0, HOURS_5, HOURS_5)
UNSCHEDULED_8H = pod("unscheduled-8-hours", "", "Pending", False, 0, HOURS_8, HOURS_8)
READY_2H = pod("ready-2-hours", "", "Running", True, 0, HOURS_2, MONTH_AGO)
READY_5H = pod("ready-5-hours", "", "Running", True, 0, HOURS_5, MONTH_AGO)
READY_8H = pod("ready-8-hours", "", "Running", True, 0, HOURS_8, MONTH_AGO)

# Upstream TestSortingActivePodsWithRanks: pairs that compare equal (neither is less).
EQUAL = [
    (UNSCHEDULED, UNSCHEDULED),
    (PENDING, PENDING),
    (UNKNOWN, UNKNOWN),
    (NOT_READY, NOT_READY),
    (READY_NOW_CREATED_THEN, READY_NOW_CREATED_THEN),
    (READY_NOW, READY_NOW),
    (READY_THEN, READY_THEN),
    (READY_HIGH_RESTARTS, READY_HIGH_RESTARTS),
    # Same log2 bucket of age: equal under LogarithmicScaleDown (uids are equal here).
    (UNSCHEDULED_5H, UNSCHEDULED_8H),
    (READY_5H, READY_8H),
]

# (lesser, its rank, greater, its rank): the lesser is deleted first.
LESS = [
    (UNSCHEDULED, 1, PENDING, 2),
    (UNSCHEDULED, 2, PENDING, 1),
    (PENDING, 1, UNKNOWN, 2),
    (UNKNOWN, 1, NOT_READY, 2),
    (NOT_READY, 1, READY_NO_TRANSITION, 1),
    (READY_NO_TRANSITION, 1, READY_NOW, 1),
    (READY_NOW, 2, READY_NO_TRANSITION, 1),
    (READY_NOW, 1, READY_THEN, 1),
    (READY_NOW, 2, READY_THEN, 1),
    (READY_HIGH_RESTARTS, 1, READY_NOW, 1),
    (READY_NOW, 2, READY_HIGH_RESTARTS, 1),
    (READY_NOW, 1, READY_NOW_CREATED_THEN, 1),
    (READY_NOW_CREATED_THEN, 2, READY_NOW, 1),
    (LOW_COST, 2, HIGH_COST, 1),
    (READY_2H, 1, READY_5H, 1),
]


@pytest.mark.parametrize(("a", "b"), EQUAL, ids=[f"{a.metadata.name}={b.metadata.name}" for a, b in EQUAL])
def test_equal_pods_are_not_less(a: podranking.PodView, b: podranking.PodView) -> None:
    assert not podranking.less(a, b, 0, 0, NOW)
    assert not podranking.less(b, a, 0, 0, NOW)


@pytest.mark.parametrize(
    ("lesser", "lesser_rank", "greater", "greater_rank"),
    LESS,
    ids=[f"{a.metadata.name}@{ra}<{b.metadata.name}@{rb}" for a, ra, b, rb in LESS],
)
def test_lesser_pod_goes_first(
    lesser: podranking.PodView, lesser_rank: int, greater: podranking.PodView, greater_rank: int
) -> None:
    assert podranking.less(lesser, greater, lesser_rank, greater_rank, NOW)
    assert not podranking.less(greater, lesser, greater_rank, lesser_rank, NOW)


def test_sort_active_orders_the_whole_chain() -> None:
    """Upstream TestSortingActivePods: any input order sorts to the same deletion order."""
    expected = [
        UNSCHEDULED,
        PENDING,
        UNKNOWN,
        NOT_READY,
        READY_NO_TRANSITION,
        READY_HIGH_RESTARTS,
        READY_NOW,
        READY_NOW_CREATED_THEN,
        READY_THEN,
    ]
    shuffler = random.Random(7)
    for _ in range(20):
        pods = list(expected)
        shuffler.shuffle(pods)
        assert [p.metadata.name for p in podranking.sort_active(pods)] == [p.metadata.name for p in expected]


def test_only_the_ranked_order_reads_the_deletion_cost() -> None:
    assert [p.metadata.name for p in podranking.sort_active([HIGH_COST, LOW_COST])] == [
        "high-deletion-cost",
        "low-deletion-cost",
    ]
    ranked = podranking.sort_with_ranks([HIGH_COST, LOW_COST], [0, 0], NOW)
    assert [p.metadata.name for p in ranked] == ["low-deletion-cost", "high-deletion-cost"]
    # PodDeletionCost off: the annotation is not read.
    ungated = podranking.sort_with_ranks([HIGH_COST, LOW_COST], [0, 0], NOW, by_deletion_cost=False)
    assert [p.metadata.name for p in ungated] == ["high-deletion-cost", "low-deletion-cost"]


def test_ranks_count_active_related_pods_on_the_same_node() -> None:
    on_a = pod("a", "node-a", "Running", True)
    on_b = pod("b", "node-b", "Running", True)
    finished = pod("done", "node-b", "Succeeded", False)
    related = [on_a, on_b, pod("b2", "node-b", "Running", True), finished]
    assert podranking.ranks_by_colocation([on_a, on_b, finished], related) == [1, 2, 2]


@pytest.mark.parametrize(
    ("annotation", "cost"),
    [(None, 0), ("10", 10), ("-5", -5), ("abc", 0), ("1.5", 0), (str(2**31), 0), (str(-(2**31)), -(2**31))],
)
def test_deletion_cost(annotation: str | None, cost: int) -> None:
    annotations = {} if annotation is None else {podranking.POD_DELETION_COST: annotation}
    assert podranking.deletion_cost(pod("p", "n", "Running", True, annotations=annotations)) == cost


@pytest.mark.parametrize(
    ("phase", "deleting", "active"),
    [
        ("Running", False, True),
        ("Pending", False, True),
        ("Succeeded", False, False),
        ("Failed", False, False),
        ("Running", True, False),
    ],
)
def test_is_pod_active(phase: str, deleting: bool, active: bool) -> None:
    p = pod("p", "n", phase, False)
    if deleting:
        p = msgspec.structs.replace(p, metadata=msgspec.structs.replace(p.metadata, deletion_timestamp=NOW))
    assert podranking.is_pod_active(p) is active


@pytest.mark.parametrize(
    ("ready", "since", "min_ready", "available"),
    [
        (False, None, 0, False),
        (True, NOW, 0, True),
        (True, NOW - dt.timedelta(seconds=10), 10, False),  # exactly minReadySeconds ago: not yet
        (True, NOW - dt.timedelta(seconds=11), 10, True),
        (True, None, 10, False),  # ready, but no transition time to count from
    ],
)
def test_is_pod_available(ready: bool, since: dt.datetime | None, min_ready: int, available: bool) -> None:
    p = pod("p", "n", "Running", ready, ready_since=since)
    assert podranking.is_pod_available(p, min_ready, NOW) is available


def test_sidecar_restarts_break_ties_after_regular_restarts() -> None:
    def with_sidecar(name: str, restarts: int) -> podranking.PodView:
        return msgspec.convert(
            {
                "metadata": {"name": name},
                "spec": {"nodeName": "n", "initContainers": [{"name": "side", "restartPolicy": "Always"}]},
                "status": {
                    "phase": "Running",
                    "initContainerStatuses": [{"name": "side", "restartCount": restarts}],
                },
            },
            podranking.PodView,
        )

    assert podranking.less(with_sidecar("many", 5), with_sidecar("few", 1))
    assert not podranking.less(with_sidecar("few", 1), with_sidecar("many", 5))
