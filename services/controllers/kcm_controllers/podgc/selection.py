"""Which pods the pod garbage collector deletes: upstream's pure predicates and ordering.

Upstream pkg/controller/podgc/gc_controller.go (`isPodTerminated`, `isPodTerminating`, the
pod lists of gcTerminated, gcTerminating, gcOrphaned and gcUnscheduledTerminating, the
byEvictionAndCreationTimestamp order, and the node quarantine its delaying queue keeps),
pkg/util/node (`IsNodeReady`), pkg/kubelet/eviction (`PodIsEvicted`) and
pkg/api/v1/pod (`UpdatePodCondition`, for the status patch). Called by `gc_controller`, which
caches pods and nodes in the views below.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

import msgspec
from kcm_shared.apimachinery import codec
from kcm_shared.controllerutil import podranking

OUT_OF_SERVICE_TAINT = "node.kubernetes.io/out-of-service"
EVICTED_REASON = "Evicted"  # what the kubelet's eviction manager writes in status.reason
DISRUPTION_TARGET = "DisruptionTarget"
_EPOCH = dt.datetime.min.replace(tzinfo=dt.UTC)  # a missing creationTimestamp sorts first


class PodStatusView(podranking.PodStatusView):
    reason: str = ""  # "Evicted" on a pod the kubelet evicted


class PodView(podranking.PodView):
    """The shared cached pod (its node, phase and conditions) and its status reason."""

    status: PodStatusView = msgspec.field(default_factory=PodStatusView)


class Taint(codec.View):
    key: str = ""
    value: str = ""
    effect: str = ""


class NodeCondition(codec.View):
    type: str = ""
    status: str = ""


class NodeSpecView(codec.View):
    taints: list[Taint] = msgspec.field(default_factory=list)


class NodeStatusView(codec.View):
    conditions: list[NodeCondition] = msgspec.field(default_factory=list)


class NodeView(codec.Meta):
    spec: NodeSpecView = msgspec.field(default_factory=NodeSpecView)
    status: NodeStatusView = msgspec.field(default_factory=NodeStatusView)


def is_pod_terminated(pod: PodView) -> bool:
    """Not Pending, Running or Unknown: Succeeded, Failed (or a phase from the future)."""
    return pod.status.phase not in ("Pending", "Running", "Unknown")


def is_pod_terminating(pod: PodView) -> bool:
    return pod.metadata.deletion_timestamp is not None


def is_pod_evicted(pod: PodView) -> bool:
    return pod.status.phase == "Failed" and pod.status.reason == EVICTED_REASON


def is_node_ready(node: NodeView) -> bool:
    """Its Ready condition is True; a node without one is not ready."""
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)


def is_out_of_service(node: NodeView) -> bool:
    """Carries the out-of-service taint (any value and effect, as upstream checks the key only)."""
    return any(t.key == OUT_OF_SERVICE_TAINT for t in node.spec.taints)


def deletion_order(pod: PodView) -> tuple[bool, dt.datetime, str]:
    """Sort key: evicted pods first, then the oldest, then by name."""
    created = pod.metadata.creation_timestamp or _EPOCH
    return (not is_pod_evicted(pod), created, pod.metadata.name)


def terminated_to_delete(pods: Iterable[PodView], threshold: int) -> list[PodView]:
    """The terminated pods over `threshold`, first in `deletion_order`; none when threshold <= 0."""
    if threshold <= 0:
        return []
    terminated = [p for p in pods if is_pod_terminated(p)]
    excess = len(terminated) - threshold
    if excess <= 0:
        return []
    return sorted(terminated, key=deletion_order)[:excess]


def terminating_out_of_service(pods: Iterable[PodView], nodes: dict[str, NodeView]) -> list[PodView]:
    """Terminating pods on a known node that is not ready and has the out-of-service taint."""
    found = []
    for pod in pods:
        if not is_pod_terminating(pod):
            continue
        node = nodes.get(pod.spec.node_name)
        if node is not None and not is_node_ready(node) and is_out_of_service(node):
            found.append(pod)
    return sorted(found, key=deletion_order)


def unscheduled_terminating(pods: Iterable[PodView]) -> list[PodView]:
    return [p for p in pods if is_pod_terminating(p) and not p.spec.node_name]


def missing_nodes(pods: Iterable[PodView], nodes: dict[str, NodeView]) -> set[str]:
    """Node names pods are bound to that the node cache does not hold."""
    return {p.spec.node_name for p in pods if p.spec.node_name and p.spec.node_name not in nodes}


class Quarantine:
    """Node names missing from the cache, and since when (upstream's delaying queue of them).

    `observe` is called once a pass with the names missing now: a name that is present again
    leaves quarantine; a new one enters it. `due` are those missing for at least `period`,
    to be confirmed gone with a GET; `release` takes a checked name out, so pods still bound
    to it afterwards start a new quarantine, as upstream re-queues the name on its next pass.
    """

    def __init__(self, period: float) -> None:
        self.period = period
        self._since: dict[str, float] = {}

    def observe(self, missing: set[str], now: float) -> list[str]:
        for name in [n for n in self._since if n not in missing]:
            del self._since[name]
        for name in missing:
            self._since.setdefault(name, now)
        return sorted(n for n, since in self._since.items() if now - since >= self.period)

    def release(self, name: str) -> None:
        self._since.pop(name, None)


def failed_status_patch(pod: PodView, condition: dict[str, str] | None, now: dt.datetime) -> dict[str, Any]:
    """The strategic merge patch of pods/status that marks `pod` Failed, with `condition`
    (type, status, reason, message) set as UpdatePodCondition does: its lastTransitionTime is
    `now` unless the pod already has that condition with the same status. The uid in
    metadata makes the patch fail on another pod of the same name (upstream PatchPodStatus)."""
    status: dict[str, Any] = {"phase": "Failed"}
    if condition is not None:
        old = next((c for c in pod.status.conditions if c.type == condition["type"]), None)
        since = old.last_transition_time if old is not None and old.status == condition["status"] else None
        stamp = (since or now).astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        status["conditions"] = [{**condition, "lastTransitionTime": stamp}]
    return {"metadata": {"uid": pod.metadata.uid}, "status": status}
