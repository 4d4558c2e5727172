"""The ReplicaSet's pure helpers with upstream's cases (replica_set_utils_test.go,
replica_set_test.go TestGetPodsToDelete) as data."""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec
import pytest
from kcm_shared.controllerutil import podranking
from kcm_shared.controllerutil.replicaset import replicastatus as status

NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC)
STAMP = "2026-11-23T11:00:00Z"
LABELS = {"name": "foo"}
FULL_LABELS = {"name": "foo", "type": "production"}


def replica_set(
    spec_replicas: int, template_labels: dict[str, str], /, min_ready: int = 0, **status_fields: Any
) -> status.ReplicaSetView:
    doc = {
        "metadata": {
            "name": "rs",
            "namespace": "default",
            "uid": "u",
            "generation": 1,
            "resourceVersion": "7",
        },
        "spec": {
            "replicas": spec_replicas,
            "minReadySeconds": min_ready,
            "selector": {"matchLabels": LABELS},
            "template": {"metadata": {"labels": template_labels}, "spec": {}},
        },
        "status": status_fields,
    }
    return msgspec.json.decode(msgspec.json.encode(doc), type=status.ReplicaSetView)


def pod(
    name: str, labels: dict[str, str], ready: bool = True, node: str = "", phase: str = "Running"
) -> podranking.PodView:
    conditions = [{"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": STAMP}]
    return msgspec.convert(
        {
            "metadata": {"name": name, "labels": labels},
            "spec": {"nodeName": node},
            "status": {"phase": phase, "conditions": conditions if phase == "Running" else []},
        },
        podranking.PodView,
    )


# Template labels beyond the selector's: pods with only the selector's are not fully labelled.
FULLY = replica_set(1, FULL_LABELS)
LONG_MIN_READY = replica_set(1, LABELS, min_ready=3600)

# Upstream TestCalculateStatus: (name, rs, pods, replicas, fullyLabeled, ready, available).
STATUS_CASES = [
    ("1 fully labelled pod", FULLY, [pod("p1", FULL_LABELS)], (1, 1, 1, 1)),
    ("1 not fully labelled pod", FULLY, [pod("p1", LABELS)], (1, 0, 1, 1)),
    ("2 fully labelled pods", FULLY, [pod("p1", FULL_LABELS), pod("p2", FULL_LABELS)], (2, 2, 2, 2)),
    ("2 not fully labelled pods", FULLY, [pod("p1", LABELS), pod("p2", LABELS)], (2, 0, 2, 2)),
    (
        "1 fully and 1 not fully labelled pod",
        FULLY,
        [pod("p1", LABELS), pod("p2", FULL_LABELS)],
        (2, 1, 2, 2),
    ),
    ("1 non-ready pod", FULLY, [pod("p1", FULL_LABELS, ready=False)], (1, 1, 0, 0)),
    ("1 ready but non-available pod", LONG_MIN_READY, [pod("p1", LABELS)], (1, 1, 1, 0)),
]


@pytest.mark.parametrize(
    ("rs", "pods", "counts"), [c[1:] for c in STATUS_CASES], ids=[c[0] for c in STATUS_CASES]
)
def test_calculate_status(
    rs: status.ReplicaSetView, pods: list[podranking.PodView], counts: tuple[int, int, int, int]
) -> None:
    new = status.calculate_status(rs, pods, None, NOW)
    assert (new.replicas, new.fully_labeled_replicas, new.ready_replicas, new.available_replicas) == counts
    assert new.conditions == []


EXISTING = {
    "type": "ReplicaFailure",
    "status": "True",
    "lastTransitionTime": STAMP,
    "reason": "FailedCreate",
    "message": "old",
}

# Upstream TestCalculateStatusConditions: (name, replicas, pod count, error, existing, expected).
CONDITION_CASES: list[tuple[str, int, int, str | None, list[dict[str, Any]], list[dict[str, Any]]]] = [
    (
        "error, no condition yet, too few pods",
        2,
        1,
        "fake manageReplicasErr",
        [],
        [
            {
                "type": "ReplicaFailure",
                "status": "True",
                "lastTransitionTime": "2026-11-23T12:00:00Z",
                "reason": "FailedCreate",
                "message": "fake manageReplicasErr",
            }
        ],
    ),
    (
        "error, no condition yet, too many pods",
        1,
        2,
        "fake manageReplicasErr",
        [],
        [
            {
                "type": "ReplicaFailure",
                "status": "True",
                "lastTransitionTime": "2026-11-23T12:00:00Z",
                "reason": "FailedDelete",
                "message": "fake manageReplicasErr",
            }
        ],
    ),
    ("no error, condition present: removed", 2, 2, None, [EXISTING], []),
    ("error, condition present: kept as it was", 2, 1, "new error", [EXISTING], [EXISTING]),
    ("no error, no condition", 2, 2, None, [], []),
]


@pytest.mark.parametrize(
    ("replicas", "count", "error", "existing", "expected"),
    [c[1:] for c in CONDITION_CASES],
    ids=[c[0] for c in CONDITION_CASES],
)
def test_replica_failure_condition(
    replicas: int,
    count: int,
    error: str | None,
    existing: list[dict[str, Any]],
    expected: list[dict[str, Any]],
) -> None:
    rs = replica_set(replicas, LABELS, conditions=existing)
    new = status.calculate_status(rs, [pod(f"p{i}", LABELS) for i in range(count)], error, NOW)
    assert [msgspec.to_builtins(c) for c in new.conditions] == expected


def test_status_unchanged_needs_every_field_and_the_generation() -> None:
    rs = replica_set(
        1,
        LABELS,
        replicas=1,
        fullyLabeledReplicas=1,
        readyReplicas=1,
        availableReplicas=1,
        observedGeneration=1,
    )
    same = status.calculate_status(rs, [pod("p1", LABELS)], None, NOW)
    assert status.status_unchanged(rs, same)
    assert not status.status_unchanged(
        rs, status.calculate_status(rs, [pod("p1", LABELS, ready=False)], None, NOW)
    )
    assert not status.status_unchanged(rs, status.calculate_status(rs, [pod("p1", LABELS)], "boom", NOW))
    older = replica_set(
        1,
        LABELS,
        replicas=1,
        fullyLabeledReplicas=1,
        readyReplicas=1,
        availableReplicas=1,
        observedGeneration=0,
    )
    assert not status.status_unchanged(older, status.calculate_status(older, [pod("p1", LABELS)], None, NOW))


def test_status_patch_spells_out_zeros_and_drops_empty_conditions() -> None:
    rs = replica_set(1, LABELS)
    patch = status.status_patch(status.calculate_status(rs, [], None, NOW), 3, "42")
    assert patch == {
        "metadata": {"resourceVersion": "42"},
        "status": {
            "replicas": 0,
            "fullyLabeledReplicas": 0,
            "readyReplicas": 0,
            "availableReplicas": 0,
            "observedGeneration": 3,
            "conditions": None,
        },
    }


UNSCHEDULED_PENDING = pod("unscheduled-pending", LABELS, node="", phase="Pending")
SCHEDULED_PENDING = pod("scheduled-pending", LABELS, node="fake-node", phase="Pending")
NOT_READY = pod("not-ready", LABELS, ready=False, node="fake-node")
READY_NODE_1 = pod("ready-node-1", LABELS, node="fake-node-1")
READY_NODE_2 = pod("ready-node-2", LABELS, node="fake-node-2")

# Upstream TestGetPodsToDelete: (name, pods, related, diff, expected names).
DELETE_CASES = [
    ("no pods", [], [], 0, []),
    ("diff = len(pods): all, in any order", [NOT_READY, READY_NODE_1], [], 2, ["not-ready", "ready-node-1"]),
    ("diff < len(pods): not ready first", [READY_NODE_1, NOT_READY], [], 1, ["not-ready"]),
    (
        "various phases and conditions",
        [READY_NODE_1, READY_NODE_2, NOT_READY, SCHEDULED_PENDING, UNSCHEDULED_PENDING],
        [],
        3,
        ["unscheduled-pending", "scheduled-pending", "not-ready"],
    ),
    ("scheduled pending before ready", [READY_NODE_1, SCHEDULED_PENDING], [], 1, ["scheduled-pending"]),
    (
        "ready, doubled up with a related pod first",
        [READY_NODE_1, READY_NODE_2],
        [READY_NODE_2],
        1,
        ["ready-node-2"],
    ),
    (
        "not ready before doubled up",
        [READY_NODE_2, NOT_READY],
        [READY_NODE_2, NOT_READY, READY_NODE_2],
        1,
        ["not-ready"],
    ),
]


@pytest.mark.parametrize(
    ("pods", "related", "diff", "expected"), [c[1:] for c in DELETE_CASES], ids=[c[0] for c in DELETE_CASES]
)
def test_pods_to_delete(
    pods: list[podranking.PodView], related: list[podranking.PodView], diff: int, expected: list[str]
) -> None:
    assert [p.metadata.name for p in status.pods_to_delete(pods, related, diff, NOW)] == expected


def test_deletion_age_ratios_compare_with_the_youngest_ready_pod() -> None:
    def aged(name: str, minutes: int, ready: bool = True) -> podranking.PodView:
        p = pod(name, LABELS, ready=ready)
        created = NOW - dt.timedelta(minutes=minutes)
        return msgspec.structs.replace(
            p, metadata=msgspec.structs.replace(p.metadata, creation_timestamp=created)
        )

    young, old, older, unready = (
        aged("young", 10),
        aged("old", 25),
        aged("older", 40),
        aged("unready", 1, False),
    )
    pods = [young, old, older, unready]
    # Integer division, as upstream: 25/10 -> 2, 40/10 -> 4; the unready pod is not sampled.
    assert status.deletion_age_ratios(pods, [young, old, older, unready], NOW) == [1.0, 2.0, 4.0]
    assert status.deletion_age_ratios([unready], [unready], NOW) == []


@pytest.mark.parametrize(
    ("min_ready", "ready", "available", "delay"),
    [(0, 2, 0, None), (10, 2, 0, 10.0), (10, 1, 0, None), (10, 2, 2, None)],
)
def test_requeue_after_min_ready_seconds(
    min_ready: int, ready: int, available: int, delay: float | None
) -> None:
    rs = replica_set(2, LABELS, min_ready=min_ready)
    new = msgspec.structs.replace(rs.status, ready_replicas=ready, available_replicas=available)
    assert status.requeue_after(rs, new) == delay
