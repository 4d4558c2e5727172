"""Node health from its heartbeats, and zones from their nodes' health: the pure decisions.

Upstream pkg/controller/nodelifecycle/node_lifecycle_controller.go (v1.32): tryUpdateNodeHealth
(`observe`, `unknown_conditions`), ComputeZoneState (`zone_state`), ReducedQPSFunc and
HealthyQPSFunc (`zone_qps`), and k8s.io/component-helpers/node/topology GetZoneKey
(`zone_key`). Called by `controller.NodeLifecycle` once per node and monitor pass.

The health of a node is when this controller last saw it change (`Health.probe`, our own
clock, as upstream avoids trusting the kubelet's clock): a new heartbeat in the Ready
condition, or a newer renewTime on its Lease in kube-node-lease. A node not seen for its grace
period (`--node-monitor-grace-period`, or `--node-startup-grace-period` while it never posted
a Ready condition) has Ready and the pressure conditions set to Unknown.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, replace

import msgspec

from kcm_controllers.nodelifecycle.views import NodeCondition, NodeView, condition

READY = "Ready"
# The conditions set to Unknown when a node goes silent; NetworkUnavailable is left alone
# (the control plane owns it), as upstream.
SILENCED = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
UNKNOWN_REASON = "NodeStatusUnknown"
UNKNOWN_MESSAGE = "Kubelet stopped posting node status."
NEVER_REASON = "NodeStatusNeverUpdated"
NEVER_MESSAGE = "Kubelet never posted node status."

INITIAL = "Initial"
NORMAL = "Normal"
FULL_DISRUPTION = "FullDisruption"
PARTIAL_DISRUPTION = "PartialDisruption"

EXCLUDE_DISRUPTION_LABEL = "node.kubernetes.io/exclude-disruption"


def rfc3339(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Health:
    """What the controller remembers of a node between passes (upstream nodeHealthData)."""

    probe: dt.datetime
    ready_transition: dt.datetime
    ready: NodeCondition | None  # the Ready condition as last seen
    lease_renew: dt.datetime | None = None


@dataclass(frozen=True)
class Observation:
    health: Health
    observed: NodeCondition  # Ready as the cache holds it (a made-up Unknown when missing)
    grace: float
    stale: bool  # not seen for longer than `grace`


def observe(
    node: NodeView,
    saved: Health | None,
    lease_renew: dt.datetime | None,
    now: dt.datetime,
    *,
    monitor_grace: float,
    startup_grace: float,
) -> Observation:
    """The node's health after this look at it (the first half of tryUpdateNodeHealth)."""
    current = condition(node, READY)
    created = node.metadata.creation_timestamp or now
    if current is None:
        stamp = rfc3339(created)
        observed = NodeCondition(
            type=READY, status="Unknown", last_heartbeat_time=stamp, last_transition_time=stamp
        )
        grace = startup_grace
        if saved is not None:
            saved = replace(saved, ready=None)
        else:
            saved = Health(probe=created, ready_transition=created, ready=None)
    else:
        observed = current
        grace = monitor_grace
    health: Health
    if saved is None or (saved.ready is None and current is not None) or (saved.ready and current is None):
        # First look, a restart, or a Ready condition that came (or, wrongly, went): now.
        health = Health(probe=now, ready_transition=now, ready=current)
    elif (
        current is not None
        and saved.ready is not None
        and (saved.ready.last_heartbeat_time != current.last_heartbeat_time)
    ):
        moved = saved.ready.last_transition_time != current.last_transition_time
        health = Health(probe=now, ready_transition=now if moved else saved.ready_transition, ready=current)
    else:
        health = saved
    health = replace(health, lease_renew=saved.lease_renew if saved else None)
    if lease_renew is not None and (health.lease_renew is None or health.lease_renew < lease_renew):
        health = replace(health, lease_renew=lease_renew, probe=now)
    stale = (now - health.probe).total_seconds() > grace
    return Observation(health, observed, grace, stale)


def unknown_conditions(node: NodeView, now: dt.datetime) -> list[NodeCondition]:
    """Ready and the pressure conditions as upstream writes them for a silent node: an existing
    one turns Unknown (NodeStatusUnknown, its transition now) unless it is already; a missing
    one is added (NodeStatusNeverUpdated, its heartbeat the node's creation). Every condition
    of the node, in its order, with the added ones last."""
    stamp = rfc3339(now)
    created = rfc3339(node.metadata.creation_timestamp or now)
    out = []
    for cond in node.status.conditions:
        if cond.type in SILENCED and cond.status != "Unknown":
            cond = msgspec.structs.replace(
                cond,
                status="Unknown",
                reason=UNKNOWN_REASON,
                message=UNKNOWN_MESSAGE,
                last_transition_time=stamp,
            )
        out.append(cond)
    have = {c.type for c in out}
    for kind in SILENCED:
        if kind not in have:
            out.append(
                NodeCondition(
                    type=kind,
                    status="Unknown",
                    reason=NEVER_REASON,
                    message=NEVER_MESSAGE,
                    last_heartbeat_time=created,
                    last_transition_time=stamp,
                )
            )
    return out


def zone_key(node: NodeView) -> str:
    """upstream GetZoneKey: region and zone (the deprecated beta labels first), joined with a
    NUL so that a colon in either cannot make two zones one; "" without both."""
    labels = node.metadata.labels
    zone = labels.get("failure-domain.beta.kubernetes.io/zone", labels.get("topology.kubernetes.io/zone", ""))
    region = labels.get(
        "failure-domain.beta.kubernetes.io/region", labels.get("topology.kubernetes.io/region", "")
    )
    if not region and not zone:
        return ""
    return f"{region}:\x00:{zone}"


def excluded_from_disruption(node: NodeView) -> bool:
    return EXCLUDE_DISRUPTION_LABEL in node.metadata.labels


def zone_state(ready: Sequence[NodeCondition | None], unhealthy_threshold: float) -> tuple[int, str]:
    """(not ready nodes, state): FullDisruption with no Ready node, PartialDisruption with more
    than two not ready making at least the threshold's fraction, else Normal."""
    up = sum(1 for c in ready if c is not None and c.status == "True")
    down = len(ready) - up
    if up == 0 and down > 0:
        return down, FULL_DISRUPTION
    if down > 2 and down / (down + up) >= unhealthy_threshold:
        return down, PARTIAL_DISRUPTION
    return down, NORMAL


@dataclass(frozen=True)
class Rates:
    """The tainting rates of the flags (nodes a second per zone)."""

    eviction: float = 0.1
    secondary: float = 0.01
    large_cluster: int = 50
    unhealthy_threshold: float = 0.55


def zone_qps(state: str, zone_size: int, rates: Rates) -> float:
    """The rate a zone in `state` taints at: the normal rate when Normal or fully disrupted (a
    whole zone down is an outage to act on), the secondary rate in a partly disrupted large
    zone, nothing in a partly disrupted small one."""
    if state == PARTIAL_DISRUPTION:
        return rates.secondary if zone_size > rates.large_cluster else 0.0
    return rates.eviction
