"""The job controller's cached view of a pod.

`JobPodView` extends kcm_shared.controllerutil.podranking.PodView (so activity, readiness and the ActivePods
ordering apply to it) with what the job controller and its pure helpers read: the restart
policy and container names of the spec, the phase's reason, start time, condition reasons and
messages, and each container's terminated state (exit code, reason, finish time) for
podFailurePolicy `onExitCodes` rules and for a failed pod's finish time. Decoded by the job
controller's pod cache; read by `pod_failure_policy.match` and the controller's sync.
Fields follow upstream core/v1 Pod (k8s.io/api/core/v1/types.go).
"""

from __future__ import annotations

import datetime as dt

import msgspec
from kcm_shared.apimachinery import codec
from kcm_shared.controllerutil import podranking


class PodCondition(podranking.PodCondition):
    reason: str = ""
    message: str = ""


class ContainerStateTerminated(codec.View):
    exit_code: int = 0
    reason: str = ""
    finished_at: dt.datetime | None = None


class ContainerState(codec.View):
    terminated: ContainerStateTerminated | None = None


class ContainerStatus(podranking.ContainerStatus):
    state: ContainerState = msgspec.field(default_factory=ContainerState)
    # Upstream's LastTerminationState, which JSON calls lastState.
    last_state: ContainerState = msgspec.field(default_factory=ContainerState)


class PodSpecView(podranking.PodSpecView):
    restart_policy: str = ""
    containers: list[podranking.Container] = msgspec.field(default_factory=list)


class PodStatusView(podranking.PodStatusView):
    # The lists hold subclasses of the base's items; mypy rejects that for (invariant) lists,
    # but nothing here ever stores a base item in them.
    reason: str = ""
    start_time: dt.datetime | None = None
    conditions: list[PodCondition] = msgspec.field(default_factory=list)  # type: ignore[assignment]
    container_statuses: list[ContainerStatus] = msgspec.field(default_factory=list)  # type: ignore[assignment]
    init_container_statuses: list[ContainerStatus] = msgspec.field(default_factory=list)  # type: ignore[assignment]


class JobPodView(podranking.PodView):
    """A pod as the job controller reads it (also a podranking.PodView)."""

    spec: PodSpecView = msgspec.field(default_factory=PodSpecView)
    status: PodStatusView = msgspec.field(default_factory=PodStatusView)
