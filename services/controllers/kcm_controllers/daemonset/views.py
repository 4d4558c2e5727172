"""The DaemonSet controller's cached views: DaemonSets, nodes and the daemon pods.

Decoded by the controller's caches (one per resource) and read by `daemon_controller.py`,
`update.py` and the pure helpers in `util.py`. Fields follow upstream apps/v1 DaemonSet and
core/v1 Node and Pod (k8s.io/api); only what the controller reads is decoded. A template or
node spec is kept as decoded JSON, since the node predicates read it as such.
"""

from __future__ import annotations

from typing import Any

import msgspec
from kcm_shared.apimachinery import codec
from kcm_shared.controllerutil import podranking


class RollingUpdate(codec.View):
    max_unavailable: int | str | None = None
    max_surge: int | str | None = None


class UpdateStrategy(codec.View):
    type: str = "RollingUpdate"
    rolling_update: RollingUpdate | None = None


def _empty_template() -> msgspec.Raw:
    return msgspec.Raw(b"{}")


class DaemonSetSpec(codec.View):
    selector: dict[str, Any] | None = None
    # The PodTemplateSpec as the server sent it: hashed, recorded in revisions and copied into
    # pods; decoded once per sync (util.Template).
    template: msgspec.Raw = msgspec.field(default_factory=_empty_template)
    update_strategy: UpdateStrategy = msgspec.field(default_factory=UpdateStrategy)
    min_ready_seconds: int = 0
    revision_history_limit: int | None = None


class DaemonSetStatus(codec.View):
    current_number_scheduled: int = 0
    number_misscheduled: int = 0
    desired_number_scheduled: int = 0
    number_ready: int = 0
    observed_generation: int = 0
    updated_number_scheduled: int = 0
    number_available: int = 0
    number_unavailable: int = 0
    collision_count: int | None = None


class DaemonSetView(codec.Meta):
    spec: DaemonSetSpec = msgspec.field(default_factory=DaemonSetSpec)
    status: DaemonSetStatus = msgspec.field(default_factory=DaemonSetStatus)


class NodeCondition(codec.View):
    type: str = ""
    status: str = ""


class NodeStatus(codec.View):
    conditions: list[NodeCondition] = msgspec.field(default_factory=list)


class NodeView(codec.Meta):
    """A node as the predicates read it: name, labels, and its spec (taints) as JSON."""

    spec: dict[str, Any] = msgspec.field(default_factory=dict)
    status: NodeStatus = msgspec.field(default_factory=NodeStatus)


class DaemonPodSpec(podranking.PodSpecView):
    # Where a pod not yet bound is headed: the matchFields term the controller wrote.
    affinity: dict[str, Any] | None = None


class DaemonPodView(podranking.PodView):
    """A pod as the controller reads it (also a podranking.PodView)."""

    spec: DaemonPodSpec = msgspec.field(default_factory=DaemonPodSpec)
