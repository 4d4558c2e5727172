"""The parts of Deployments, ReplicaSets and Pods the Deployment controller reads.

Decoded by the controller runtime's caches (`kcm_shared.runtime.cache`) and built by hand in the
unit tests. Pod templates stay `msgspec.Raw`: the controller only compares and copies them,
so every field of a template, known to us or not, reaches the new ReplicaSet unchanged.
Field names and defaults follow apps/v1 as the API server defaults them.
"""

from __future__ import annotations

from typing import Any

import msgspec
from kcm_shared.apimachinery import codec, gvr
from kcm_shared.controllerutil import podranking

DEPLOYMENTS = gvr.Resource("apps", "v1", "deployments")
REPLICASETS = gvr.Resource("apps", "v1", "replicasets")
PODS = gvr.Resource("", "v1", "pods")

ROLLING_UPDATE = "RollingUpdate"
RECREATE = "Recreate"


class Condition(codec.View):
    """A DeploymentCondition; ReplicaSetConditions decode into it too (no lastUpdateTime)."""

    type: str = ""
    status: str = ""
    last_update_time: str | None = None
    last_transition_time: str | None = None
    reason: str = ""
    message: str = ""


class RollingUpdate(codec.View):
    max_unavailable: int | str | None = None
    max_surge: int | str | None = None


class Strategy(codec.View):
    type: str = ROLLING_UPDATE
    rolling_update: RollingUpdate | None = None


class DeploymentSpec(codec.View):
    replicas: int = 1
    selector: dict[str, Any] | None = None
    template: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"{}"))
    strategy: Strategy = msgspec.field(default_factory=Strategy)
    min_ready_seconds: int = 0
    revision_history_limit: int | None = None
    paused: bool = False
    progress_deadline_seconds: int | None = None


class DeploymentStatus(codec.View):
    observed_generation: int = 0
    replicas: int = 0
    updated_replicas: int = 0
    ready_replicas: int = 0
    available_replicas: int = 0
    unavailable_replicas: int = 0
    collision_count: int | None = None
    conditions: list[Condition] = msgspec.field(default_factory=list)


class Deployment(codec.Meta):
    spec: DeploymentSpec = msgspec.field(default_factory=DeploymentSpec)
    status: DeploymentStatus = msgspec.field(default_factory=DeploymentStatus)


class ReplicaSetSpec(codec.View):
    replicas: int = 1
    min_ready_seconds: int = 0
    selector: dict[str, Any] | None = None
    template: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"{}"))


class ReplicaSetStatus(codec.View):
    replicas: int = 0
    ready_replicas: int = 0
    available_replicas: int = 0
    observed_generation: int = 0
    conditions: list[Condition] = msgspec.field(default_factory=list)


class ReplicaSet(codec.Meta):
    spec: ReplicaSetSpec = msgspec.field(default_factory=ReplicaSetSpec)
    status: ReplicaSetStatus = msgspec.field(default_factory=ReplicaSetStatus)


# The ReplicaSet controller's pod view (a superset of the metadata and phase read here): in one
# process, as `kcm controllers` and `make run` run them, both share one pod cache (the runtime
# shares a cache per resource and view) instead of each decoding every pod event.
Pod = podranking.PodView
