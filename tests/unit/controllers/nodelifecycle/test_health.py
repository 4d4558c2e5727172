"""Node health and zone state: upstream node_lifecycle_controller_test.go's cases for
tryUpdateNodeHealth (TestMonitorNodeHealthUpdateStatus, TestMonitorNodeHealthUpdateNodeAndPodStatusWithLease)
and ComputeZoneState, as data."""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec
import pytest
from kcm_controllers.nodelifecycle import health
from kcm_controllers.nodelifecycle.views import NodeCondition, NodeView

CREATED = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
GRACE, STARTUP = 40.0, 60.0


def at(seconds: float) -> dt.datetime:
    return CREATED + dt.timedelta(seconds=seconds)


def node(*conditions: tuple[str, str, float], labels: dict[str, str] | None = None) -> NodeView:
    """A node with (type, status, heartbeat seconds after creation) conditions."""
    doc: dict[str, Any] = {
        "metadata": {"name": "n", "creationTimestamp": health.rfc3339(CREATED), "labels": labels or {}},
        "status": {
            "conditions": [
                {
                    "type": kind,
                    "status": status,
                    "lastHeartbeatTime": health.rfc3339(at(beat)),
                    "lastTransitionTime": health.rfc3339(CREATED),
                }
                for kind, status, beat in conditions
            ]
        },
    }
    return msgspec.convert(doc, NodeView)


def look(
    n: NodeView, saved: health.Health | None, now: float, lease: float | None = None
) -> health.Observation:
    renew = at(lease) if lease is not None else None
    return health.observe(n, saved, renew, at(now), monitor_grace=GRACE, startup_grace=STARTUP)


def test_a_node_that_never_posted_status_gets_the_startup_grace_from_its_creation() -> None:
    silent = node()
    first = look(silent, None, 50)
    assert (first.grace, first.stale, first.observed.status) == (STARTUP, False, "Unknown")
    assert first.health.probe == CREATED
    assert look(silent, first.health, 61).stale


def test_a_first_look_counts_from_now_and_a_new_heartbeat_moves_the_probe() -> None:
    first = look(node(("Ready", "True", 0)), None, 100)
    assert (first.health.probe, first.stale) == (at(100), False)
    same = look(node(("Ready", "True", 0)), first.health, 141)
    assert same.stale  # no new heartbeat for longer than the grace period
    beat = look(node(("Ready", "True", 130)), first.health, 141)
    assert (beat.health.probe, beat.stale) == (at(141), False)


def test_a_renewed_lease_keeps_a_node_healthy_without_status_heartbeats() -> None:
    first = look(node(("Ready", "True", 0)), None, 0, lease=0)
    renewed = look(node(("Ready", "True", 0)), first.health, 30, lease=30)
    assert renewed.health.probe == at(30)
    later = look(node(("Ready", "True", 0)), renewed.health, 60, lease=30)
    assert not later.stale  # 30 s since the renewal
    assert look(node(("Ready", "True", 0)), later.health, 71, lease=30).stale


def test_a_transition_of_ready_moves_the_ready_transition_timestamp() -> None:
    first = look(node(("Ready", "True", 0)), None, 0)
    moved = node(("Ready", "False", 10))
    moved.status.conditions[0].last_transition_time = health.rfc3339(at(10))
    seen = look(moved, first.health, 10)
    assert seen.health.ready_transition == at(10)


def test_unknown_conditions_turn_existing_ones_unknown_and_add_the_missing() -> None:
    n = node(("Ready", "True", 0), ("MemoryPressure", "Unknown", 0), ("NetworkUnavailable", "False", 0))
    got = {c.type: c for c in health.unknown_conditions(n, at(100))}
    assert (got["Ready"].status, got["Ready"].reason, got["Ready"].message) == (
        "Unknown",
        "NodeStatusUnknown",
        "Kubelet stopped posting node status.",
    )
    assert got["Ready"].last_transition_time == health.rfc3339(at(100))
    assert got["Ready"].last_heartbeat_time == health.rfc3339(CREATED)  # the kubelet's last, kept
    assert got["MemoryPressure"].last_transition_time == health.rfc3339(CREATED)  # Unknown already
    assert got["NetworkUnavailable"].status == "False"  # the control plane's, left alone
    for kind in ("DiskPressure", "PIDPressure"):
        assert (got[kind].status, got[kind].reason, got[kind].message) == (
            "Unknown",
            "NodeStatusNeverUpdated",
            "Kubelet never posted node status.",
        )
        assert got[kind].last_heartbeat_time == health.rfc3339(CREATED)


def ready(*statuses: str) -> list[NodeCondition | None]:
    return [None if s == "-" else NodeCondition(type="Ready", status=s) for s in statuses]


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        (("True", "True"), (0, health.NORMAL)),
        (("False",), (1, health.FULL_DISRUPTION)),
        (("Unknown", "-"), (2, health.FULL_DISRUPTION)),
        (("True", "False", "False"), (2, health.NORMAL)),  # two down never make a partial one
        (("True", "False", "False", "Unknown"), (3, health.PARTIAL_DISRUPTION)),
        (("True", "True", "False", "False", "False"), (3, health.PARTIAL_DISRUPTION)),  # 0.6
        (("True", "True", "True", "False", "False", "False"), (3, health.NORMAL)),  # 0.5
    ],
)
def test_zone_state(statuses: tuple[str, ...], expected: tuple[int, str]) -> None:
    assert health.zone_state(ready(*statuses), 0.55) == expected


@pytest.mark.parametrize(
    ("state", "size", "qps"),
    [
        (health.NORMAL, 10, 0.1),
        (health.FULL_DISRUPTION, 10, 0.1),
        (health.PARTIAL_DISRUPTION, 50, 0.0),  # not larger than the threshold: stop
        (health.PARTIAL_DISRUPTION, 51, 0.01),
    ],
)
def test_zone_qps(state: str, size: int, qps: float) -> None:
    assert health.zone_qps(state, size, health.Rates()) == qps


def test_zone_key_prefers_the_beta_labels_and_is_empty_without_any() -> None:
    assert health.zone_key(node()) == ""
    stable = node(labels={"topology.kubernetes.io/region": "r", "topology.kubernetes.io/zone": "z"})
    assert health.zone_key(stable) == "r:\x00:z"
    beta = node(labels={"topology.kubernetes.io/zone": "z", "failure-domain.beta.kubernetes.io/zone": "old"})
    assert health.zone_key(beta) == ":\x00:old"
