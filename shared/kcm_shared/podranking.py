"""Pod views and the pod predicates and ordering that workload controllers share.

Upstream's controller_utils.go and podutil: `is_pod_active` (FilterActivePods),
`is_pod_ready`, `is_pod_available` (minReadySeconds), and the ActivePods /
ActivePodsWithRanks ordering a controller sorts by before it deletes pods, so the pods it
loses least by deleting come first:

1. unassigned < assigned;
2. Pending < Unknown < Running;
3. not ready < ready;
4. with ranks: lower `controller.kubernetes.io/pod-deletion-cost` < higher (PodDeletionCost);
5. with ranks: more pods of the same workload on the pod's node < fewer;
6. ready for a shorter time < longer;
7. more container restarts < fewer (then more sidecar restarts < fewer);
8. newer < older (no creation time first).

With ranks, steps 6 and 8 compare on a log2 scale of the age, as LogarithmicScaleDown does (on by
default upstream), so pods of a similar age count as equal and ties are broken by uid.

`PodView` is the shared cached-pod struct; controllers that read more of a pod subclass it.
Used by the ReplicaSet controller (delete ranking, status) and the deployment controller
(availability).
"""

from __future__ import annotations

import datetime as dt
import functools
import math
from collections.abc import Sequence

import msgspec

from kcm_shared import codec

POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"

_PHASE_ORDINAL = {"Pending": 0, "Unknown": 1, "Running": 2}


class PodCondition(codec.View):
    type: str = ""
    status: str = ""
    last_transition_time: dt.datetime | None = None


class ContainerStatus(codec.View):
    name: str = ""
    restart_count: int = 0


class Container(codec.View):
    name: str = ""
    restart_policy: str | None = None  # "Always" on an init container marks a sidecar


class PodSpecView(codec.View):
    node_name: str = ""
    init_containers: list[Container] = msgspec.field(default_factory=list)


class PodStatusView(codec.View):
    phase: str = ""
    conditions: list[PodCondition] = msgspec.field(default_factory=list)
    container_statuses: list[ContainerStatus] = msgspec.field(default_factory=list)
    init_container_statuses: list[ContainerStatus] = msgspec.field(default_factory=list)


class PodView(codec.Meta):
    """The fields of a pod that activity, readiness, availability and ranking read."""

    spec: PodSpecView = msgspec.field(default_factory=PodSpecView)
    status: PodStatusView = msgspec.field(default_factory=PodStatusView)


def is_pod_active(pod: PodView) -> bool:
    """Not finished (Succeeded/Failed) and not being deleted."""
    return pod.status.phase not in ("Succeeded", "Failed") and pod.metadata.deletion_timestamp is None


def ready_condition(pod: PodView) -> PodCondition | None:
    for cond in pod.status.conditions:
        if cond.type == "Ready":
            return cond
    return None


def is_pod_ready(pod: PodView) -> bool:
    cond = ready_condition(pod)
    return cond is not None and cond.status == "True"


def is_pod_available(pod: PodView, min_ready_seconds: int, now: dt.datetime) -> bool:
    """Ready, and (with minReadySeconds) ready since strictly more than that many seconds ago."""
    cond = ready_condition(pod)
    if cond is None or cond.status != "True":
        return False
    if min_ready_seconds == 0:
        return True
    since = cond.last_transition_time
    return since is not None and since + dt.timedelta(seconds=min_ready_seconds) < now


def ready_time(pod: PodView) -> dt.datetime | None:
    """When the pod became ready, if it is."""
    cond = ready_condition(pod)
    return cond.last_transition_time if cond is not None and cond.status == "True" else None


def deletion_cost(pod: PodView) -> int:
    """The pod-deletion-cost annotation; missing or unparsable counts as 0, as upstream."""
    text = pod.metadata.annotations.get(POD_DELETION_COST)
    if text is None:
        return 0
    try:
        value = int(text, 10)
    except ValueError:
        return 0
    return value if -(2**31) <= value < 2**31 else 0


def max_restarts(pod: PodView) -> tuple[int, int]:
    """(most restarts of a regular container, most restarts of a sidecar init container)."""
    regular = max((c.restart_count for c in pod.status.container_statuses), default=0)
    sidecars = {c.name for c in pod.spec.init_containers if c.restart_policy == "Always"}
    sidecar = max(
        (c.restart_count for c in pod.status.init_container_statuses if c.name in sidecars), default=0
    )
    return regular, sidecar


def _after_or_zero(t1: dt.datetime | None, t2: dt.datetime | None) -> bool:
    """t1 after t2, a missing time counting as after any time."""
    if t1 is None or t2 is None:
        return t1 is None
    return t1 > t2


def _log_rank(t: dt.datetime, now: dt.datetime) -> int:
    nanos = (now - t) // dt.timedelta(microseconds=1) * 1000
    return int(math.log2(nanos)) if nanos > 0 else -1


def _newer_first(
    a: PodView, b: PodView, ta: dt.datetime | None, tb: dt.datetime | None, now: dt.datetime | None
) -> bool:
    """Order two different timestamps newest first, on a log scale when `now` is known."""
    if now is None or ta is None or tb is None:
        return _after_or_zero(ta, tb)
    diff = _log_rank(ta, now) - _log_rank(tb, now)
    if diff == 0:
        return a.metadata.uid < b.metadata.uid
    return diff < 0


def less(
    a: PodView,
    b: PodView,
    rank_a: int = 0,
    rank_b: int = 0,
    now: dt.datetime | None = None,
    *,
    by_deletion_cost: bool = True,
) -> bool:
    """True when `a` should be deleted before `b` (upstream ActivePodsWithRanks.Less; with
    `by_deletion_cost=False`, equal ranks and no `now`, upstream ActivePods.Less)."""
    node_a, node_b = a.spec.node_name, b.spec.node_name
    if node_a != node_b and (not node_a or not node_b):
        return not node_a
    phase_a, phase_b = _PHASE_ORDINAL.get(a.status.phase, 0), _PHASE_ORDINAL.get(b.status.phase, 0)
    if phase_a != phase_b:
        return phase_a < phase_b
    ready_a, ready_b = is_pod_ready(a), is_pod_ready(b)
    if ready_a != ready_b:
        return not ready_a
    if by_deletion_cost and (cost_a := deletion_cost(a)) != (cost_b := deletion_cost(b)):
        return cost_a < cost_b
    if rank_a != rank_b:
        return rank_a > rank_b
    if ready_a and ready_b:
        since_a, since_b = ready_time(a), ready_time(b)
        if since_a != since_b:
            return _newer_first(a, b, since_a, since_b, now)
    restarts_a, restarts_b = max_restarts(a), max_restarts(b)
    if restarts_a[0] != restarts_b[0]:
        return restarts_a[0] > restarts_b[0]
    if restarts_a[1] != restarts_b[1]:
        return restarts_a[1] > restarts_b[1]
    created_a, created_b = a.metadata.creation_timestamp, b.metadata.creation_timestamp
    if created_a != created_b:
        return _newer_first(a, b, created_a, created_b, now)
    return False


def sort_active(pods: Sequence[PodView]) -> list[PodView]:
    """Pods in upstream ActivePods order (no ranks, no deletion cost, no log scale)."""
    return _sorted(pods, [0] * len(pods), None, by_deletion_cost=False)


def sort_with_ranks(pods: Sequence[PodView], ranks: Sequence[int], now: dt.datetime | None) -> list[PodView]:
    """Pods in upstream ActivePodsWithRanks order: the first are the best to delete."""
    return _sorted(pods, ranks, now, by_deletion_cost=True)


def _sorted(
    pods: Sequence[PodView], ranks: Sequence[int], now: dt.datetime | None, *, by_deletion_cost: bool
) -> list[PodView]:
    indexed = list(zip(pods, ranks, strict=True))

    def compare(x: tuple[PodView, int], y: tuple[PodView, int]) -> int:
        if less(x[0], y[0], x[1], y[1], now, by_deletion_cost=by_deletion_cost):
            return -1
        if less(y[0], x[0], y[1], x[1], now, by_deletion_cost=by_deletion_cost):
            return 1
        return 0

    # Stable for ties, so equal pods keep the caller's (cache) order.
    return [pod for pod, _ in sorted(indexed, key=functools.cmp_to_key(compare))]


def ranks_by_colocation(pods: Sequence[PodView], related: Sequence[PodView]) -> list[int]:
    """Each pod's rank: how many active related pods share its node (getPodsRankedByRelatedPodsOnSameNode)."""
    on_node: dict[str, int] = {}
    for pod in related:
        if is_pod_active(pod):
            on_node[pod.spec.node_name] = on_node.get(pod.spec.node_name, 0) + 1
    return [on_node.get(pod.spec.node_name, 0) for pod in pods]
