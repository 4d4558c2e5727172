"""Which taints and labels the node lifecycle controller keeps on a node: pure decisions.

Upstream pkg/controller/nodelifecycle/node_lifecycle_controller.go (v1.32): the condition to
taint tables and doNoScheduleTaintingPass (`no_schedule_diff`), the NoExecute taint templates,
reconcileNodeLabels (`label_updates`); pkg/util/taints (`with_taints`: matching by key and
effect as TaintExists / AddOrUpdateTaint / RemoveTaint do). Called by `controller.NodeLifecycle`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kcm_controllers.nodelifecycle.views import NodeView, Taint

NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
MEMORY_PRESSURE = "node.kubernetes.io/memory-pressure"
DISK_PRESSURE = "node.kubernetes.io/disk-pressure"
PID_PRESSURE = "node.kubernetes.io/pid-pressure"
NETWORK_UNAVAILABLE = "node.kubernetes.io/network-unavailable"

# (condition type, status) -> the NoSchedule taint's key.
CONDITION_TAINTS: dict[tuple[str, str], str] = {
    ("Ready", "False"): NOT_READY,
    ("Ready", "Unknown"): UNREACHABLE,
    ("MemoryPressure", "True"): MEMORY_PRESSURE,
    ("DiskPressure", "True"): DISK_PRESSURE,
    ("NetworkUnavailable", "True"): NETWORK_UNAVAILABLE,
    ("PIDPressure", "True"): PID_PRESSURE,
}
_OWNED_NO_SCHEDULE = {*CONDITION_TAINTS.values(), UNSCHEDULABLE}


@dataclass(frozen=True)
class TaintRef:
    """A taint as this controller names one: key and effect (no value)."""

    key: str
    effect: str

    def matches(self, taint: Taint) -> bool:
        return taint.key == self.key and taint.effect == self.effect


NOT_READY_NO_EXECUTE = TaintRef(NOT_READY, NO_EXECUTE)
UNREACHABLE_NO_EXECUTE = TaintRef(UNREACHABLE, NO_EXECUTE)


def has(node: NodeView, ref: TaintRef) -> bool:
    return any(ref.matches(t) for t in node.spec.taints)


def no_schedule_diff(node: NodeView) -> tuple[list[TaintRef], list[TaintRef]]:
    """(to add, to remove): the NoSchedule taints the node's conditions and spec.unschedulable
    call for, against the ones of those keys it has (other taints are not ours to touch)."""
    wanted = [
        TaintRef(CONDITION_TAINTS[(c.type, c.status)], NO_SCHEDULE)
        for c in node.status.conditions
        if (c.type, c.status) in CONDITION_TAINTS
    ]
    if node.spec.unschedulable:
        wanted.append(TaintRef(UNSCHEDULABLE, NO_SCHEDULE))
    present = [
        TaintRef(t.key, t.effect)
        for t in node.spec.taints
        if t.effect == NO_SCHEDULE and t.key in _OWNED_NO_SCHEDULE
    ]
    add = [w for w in dict.fromkeys(wanted) if w not in present]
    remove = [p for p in dict.fromkeys(present) if p not in wanted]
    return add, remove


def with_taints(
    taints: list[dict[str, Any]], add: list[TaintRef], remove: list[TaintRef], time_added: str
) -> list[dict[str, Any]]:
    """`taints` (API objects) without those matching `remove` and with `add`, each stamped with
    `time_added` as SwapNodeControllerTaint does (a taint of the same key and effect is
    replaced)."""
    gone = {(r.key, r.effect) for r in [*remove, *add]}
    kept = [t for t in taints if (t.get("key"), t.get("effect")) not in gone]
    for ref in add:
        kept.append({"key": ref.key, "effect": ref.effect, "timeAdded": time_added})
    return kept


# (stable label, beta label): the beta one follows the stable one, and is added when missing.
LABELS = (
    ("kubernetes.io/os", "beta.kubernetes.io/os"),
    ("kubernetes.io/arch", "beta.kubernetes.io/arch"),
)


def label_updates(node: NodeView) -> dict[str, str]:
    labels = node.metadata.labels
    return {
        beta: labels[stable]
        for stable, beta in LABELS
        if stable in labels and labels.get(beta) != labels[stable]
    }
