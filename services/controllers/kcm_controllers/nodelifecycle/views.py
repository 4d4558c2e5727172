"""What the node lifecycle controller reads of Nodes, Leases and Pods (cached views).

Called by `controller.py`, and by `health.py` and `taints.py` for their pure decisions.
"""

from __future__ import annotations

import datetime as dt

import msgspec
from kcm_shared.apimachinery import codec


class Taint(codec.View):
    key: str = ""
    value: str = ""
    effect: str = ""
    time_added: str | None = None


class NodeCondition(codec.View):
    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""
    last_heartbeat_time: str | None = None
    last_transition_time: str | None = None


class NodeSpecView(codec.View):
    unschedulable: bool = False
    taints: list[Taint] = msgspec.field(default_factory=list)


class NodeStatusView(codec.View):
    conditions: list[NodeCondition] = msgspec.field(default_factory=list)


class NodeView(codec.Meta):
    spec: NodeSpecView = msgspec.field(default_factory=NodeSpecView)
    status: NodeStatusView = msgspec.field(default_factory=NodeStatusView)


class LeaseSpecView(codec.View):
    renew_time: dt.datetime | None = None


class LeaseView(codec.Meta):
    spec: LeaseSpecView = msgspec.field(default_factory=LeaseSpecView)


class PodCondition(codec.View):
    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""
    last_probe_time: str | None = None
    last_transition_time: str | None = None


class PodSpecView(codec.View):
    node_name: str = ""


class PodStatusView(codec.View):
    conditions: list[PodCondition] = msgspec.field(default_factory=list)


class PodView(codec.Meta):
    spec: PodSpecView = msgspec.field(default_factory=PodSpecView)
    status: PodStatusView = msgspec.field(default_factory=PodStatusView)


def condition(node: NodeView, kind: str) -> NodeCondition | None:
    """upstream GetNodeCondition."""
    return next((c for c in node.status.conditions if c.type == kind), None)
