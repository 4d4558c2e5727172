"""Pod views and the pod predicates and ordering that workload controllers share.

Upstream's controller_utils.go and podutil: `is_pod_active` (FilterActivePods),
`is_pod_ready`, `is_pod_available` (minReadySeconds), and the ActivePods /
ActivePodsWithRanks ordering a controller sorts by before it deletes pods, so the pods it
loses least by deleting come first:

1. unassigned < assigned;
2. Pending < Unknown < Running;
3. not ready < ready;
4. with ranks and the PodDeletionCost gate on: lower `controller.kubernetes.io/pod-deletion-cost`
   < higher;
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

from kcm_shared.apimachinery import codec

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


def _log_rank(t: dt.datetime, now: dt.datetime) -> int:
    nanos = (now - t) // dt.timedelta(microseconds=1) * 1000
    return int(math.log2(nanos)) if nanos > 0 else -1


class _Facts:
    """What the ordering reads of one pod, worked out once per sort rather than per comparison."""

    __slots__ = ("assigned", "cost", "created", "phase", "rank", "ready", "ready_at", "restarts", "uid")

    def __init__(self, pod: PodView, rank: int, now: dt.datetime | None, by_deletion_cost: bool) -> None:
        self.assigned = bool(pod.spec.node_name)
        self.phase = _PHASE_ORDINAL.get(pod.status.phase, 0)
        self.ready = is_pod_ready(pod)
        self.cost = deletion_cost(pod) if by_deletion_cost else 0
        self.rank = rank
        self.ready_at = _Time(ready_time(pod), now) if self.ready else None
        self.restarts = max_restarts(pod)
        self.created = _Time(pod.metadata.creation_timestamp, now)
        self.uid = pod.metadata.uid


class _Time:
    """A timestamp with its log2 age, for the newest-first comparisons."""

    __slots__ = ("at", "log_age")

    def __init__(self, at: dt.datetime | None, now: dt.datetime | None) -> None:
        self.at = at
        self.log_age = _log_rank(at, now) if at is not None and now is not None else None


def _newer_first(a: _Facts, b: _Facts, ta: _Time, tb: _Time) -> bool:
    """Order two different timestamps newest first, on a log scale when `now` is known; a
    missing time counts as newer than any."""
    if ta.log_age is None or tb.log_age is None:
        if ta.at is None or tb.at is None:
            return ta.at is None
        return ta.at > tb.at
    if ta.log_age == tb.log_age:
        return a.uid < b.uid
    return ta.log_age < tb.log_age


def _less(a: _Facts, b: _Facts) -> bool:
    if a.assigned != b.assigned:
        return not a.assigned
    if a.phase != b.phase:
        return a.phase < b.phase
    if a.ready != b.ready:
        return not a.ready
    if a.cost != b.cost:
        return a.cost < b.cost
    if a.rank != b.rank:
        return a.rank > b.rank
    if a.ready_at is not None and b.ready_at is not None and a.ready_at.at != b.ready_at.at:
        return _newer_first(a, b, a.ready_at, b.ready_at)
    if a.restarts[0] != b.restarts[0]:
        return a.restarts[0] > b.restarts[0]
    if a.restarts[1] != b.restarts[1]:
        return a.restarts[1] > b.restarts[1]
    if a.created.at != b.created.at:
        return _newer_first(a, b, a.created, b.created)
    return False


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
    return _less(_Facts(a, rank_a, now, by_deletion_cost), _Facts(b, rank_b, now, by_deletion_cost))


def sort_active(pods: Sequence[PodView]) -> list[PodView]:
    """Pods in upstream ActivePods order (no ranks, no deletion cost, no log scale)."""
    return _sorted(pods, [0] * len(pods), None, by_deletion_cost=False)


def sort_with_ranks(
    pods: Sequence[PodView], ranks: Sequence[int], now: dt.datetime | None, *, by_deletion_cost: bool = True
) -> list[PodView]:
    """Pods in upstream ActivePodsWithRanks order: the first are the best to delete. Step 4 (the
    deletion cost) only with `by_deletion_cost`, the PodDeletionCost gate."""
    return _sorted(pods, ranks, now, by_deletion_cost=by_deletion_cost)


def _sorted(
    pods: Sequence[PodView], ranks: Sequence[int], now: dt.datetime | None, *, by_deletion_cost: bool
) -> list[PodView]:
    facts = [(pod, _Facts(pod, rank, now, by_deletion_cost)) for pod, rank in zip(pods, ranks, strict=True)]

    def compare(x: tuple[PodView, _Facts], y: tuple[PodView, _Facts]) -> int:
        if _less(x[1], y[1]):
            return -1
        if _less(y[1], x[1]):
            return 1
        return 0

    # Stable for ties, so equal pods keep the caller's (cache) order.
    return [pod for pod, _ in sorted(facts, key=functools.cmp_to_key(compare))]


def ranks_by_colocation(pods: Sequence[PodView], related: Sequence[PodView]) -> list[int]:
    """Each pod's rank: how many active related pods share its node (getPodsRankedByRelatedPodsOnSameNode)."""
    on_node: dict[str, int] = {}
    for pod in related:
        if is_pod_active(pod):
            on_node[pod.spec.node_name] = on_node.get(pod.spec.node_name, 0) + 1
    return [on_node.get(pod.spec.node_name, 0) for pod in pods]
