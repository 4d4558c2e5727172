"""A PodDisruptionBudget's cached view and the pure parts of its sync (upstream disruption.go).

`expected_and_desired` is getExpectedPodCount over a caller-given scale lookup (percentages
through kcm_shared.apimachinery.intstr, rounded up); `build_disrupted_pods` and `count_healthy` are
buildDisruptedPodMap and countHealthyPods with upstream's DeletionTimeout; `new_status` and
`status_unchanged` are updatePdbStatus's arithmetic and early return, with the
DisruptionAllowed condition set as component-helpers' UpdateDisruptionAllowedCondition /
ConditionsAreUpToDate and apimachinery's SetStatusCondition; `fail_safe_status` is
failSafe's; `stale_disruption_wait` is nonTerminatingPodHasStaleDisruptionCondition. No I/O:
`disruption.py` calls these and the unit tests drive them with upstream's cases.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec
from kcm_shared.apimachinery import codec, intstr

DELETION_TIMEOUT = dt.timedelta(minutes=2)  # upstream DeletionTimeout
STALE_POD_DISRUPTION_TIMEOUT = 120.0  # upstream stalePodDisruptionTimeout, seconds

DISRUPTION_ALLOWED = "DisruptionAllowed"
SUFFICIENT_PODS = "SufficientPods"
INSUFFICIENT_PODS = "InsufficientPods"
SYNC_FAILED = "SyncFailed"
DISRUPTION_TARGET = "DisruptionTarget"
TERMINATION_BY_KUBELET = "TerminationByKubelet"


class PDBSpec(codec.View):
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    selector: dict[str, Any] | None = None


class Condition(codec.View):
    """A metav1.Condition; the transition time kept as the server's text."""

    type: str = ""
    status: str = ""
    observed_generation: int = 0
    last_transition_time: str | None = None
    reason: str = ""
    message: str = ""


class PDBStatus(codec.View):
    observed_generation: int = 0
    disrupted_pods: dict[str, str] = msgspec.field(default_factory=dict)
    disruptions_allowed: int = 0
    current_healthy: int = 0
    desired_healthy: int = 0
    expected_pods: int = 0
    conditions: list[Condition] = msgspec.field(default_factory=list)


class PDBView(codec.Meta):
    spec: PDBSpec = msgspec.field(default_factory=PDBSpec)
    status: PDBStatus = msgspec.field(default_factory=PDBStatus)


class PodCondition(codec.View):
    type: str = ""
    status: str = ""
    reason: str = ""
    last_transition_time: dt.datetime | None = None


class PodStatus(codec.View):
    phase: str = ""
    conditions: list[PodCondition] = msgspec.field(default_factory=list)


class PodView(codec.Meta):
    """What the budget reads of a pod: readiness, its controller, a DisruptionTarget."""

    status: PodStatus = msgspec.field(default_factory=PodStatus)


def is_ready(pod: PodView) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions)


def timestamp(now: dt.datetime) -> str:
    return now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> dt.datetime | None:
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=dt.UTC)


# The scale of every controller of `pods` summed, and the pods without one
# (getExpectedScale); raises ValueError when a pod's controller cannot be found.
ScaleLookup = Callable[[], tuple[int, list[str]]]


def needs_scale(spec: PDBSpec) -> bool:
    """Whether the pods' controllers must be looked up: all but an integer minAvailable."""
    return spec.max_unavailable is not None or isinstance(spec.min_available, str)


def expected_and_desired(
    spec: PDBSpec, pod_count: int, expected_scale: ScaleLookup
) -> tuple[int, int, list[str]]:
    """(expectedPods, desiredHealthy, unmanaged pod names), as getExpectedPodCount."""
    if spec.max_unavailable is not None:
        expected, unmanaged = expected_scale()
        desired = max(expected - intstr.scaled_value(spec.max_unavailable, expected, round_up=True), 0)
        return expected, desired, unmanaged
    if isinstance(spec.min_available, int):
        return pod_count, spec.min_available, []
    if isinstance(spec.min_available, str):
        expected, unmanaged = expected_scale()
        return expected, intstr.scaled_value(spec.min_available, expected, round_up=True), unmanaged
    return 0, 0, []


def build_disrupted_pods(
    pods: Sequence[PodView], disrupted: Mapping[str, str], now: dt.datetime
) -> tuple[dict[str, str], dt.datetime | None, list[PodView]]:
    """The disruptedPods entries still pending, when to look again, and the pods that were
    expected to be deleted but were not (each gets a NotDeleted Event)."""
    result: dict[str, str] = {}
    recheck: dt.datetime | None = None
    not_deleted: list[PodView] = []
    if not disrupted:
        return result, recheck, not_deleted
    for pod in pods:
        if pod.metadata.deletion_timestamp is not None:
            continue
        when_text = disrupted.get(pod.metadata.name)
        if when_text is None:
            continue
        when = parse_time(when_text)
        expected_deletion = (when or now) + DELETION_TIMEOUT
        if when is not None and expected_deletion < now:
            not_deleted.append(pod)
        else:
            if recheck is None or expected_deletion < recheck:
                recheck = expected_deletion
            result[pod.metadata.name] = when_text
    return result, recheck, not_deleted


def count_healthy(pods: Sequence[PodView], disrupted: Mapping[str, str], now: dt.datetime) -> int:
    healthy = 0
    for pod in pods:
        if pod.metadata.deletion_timestamp is not None:
            continue
        when_text = disrupted.get(pod.metadata.name)
        if when_text is not None:
            when = parse_time(when_text)
            if when is None or when + DELETION_TIMEOUT > now:
                continue  # about to be deleted by an eviction
        if is_ready(pod):
            healthy += 1
    return healthy


def set_condition(conditions: list[Condition], new: Condition, now: dt.datetime) -> list[Condition]:
    """apimeta.SetStatusCondition: the transition time moves only when the status does."""
    out = list(conditions)
    for i, old in enumerate(out):
        if old.type == new.type:
            changed = old.status != new.status
            out[i] = msgspec.structs.replace(
                new,
                last_transition_time=timestamp(now) if changed else old.last_transition_time,
            )
            return out
    out.append(msgspec.structs.replace(new, last_transition_time=timestamp(now)))
    return out


def allowed_condition(allowed: int, observed_generation: int) -> Condition:
    if allowed > 0:
        return Condition(DISRUPTION_ALLOWED, "True", observed_generation, reason=SUFFICIENT_PODS)
    return Condition(DISRUPTION_ALLOWED, "False", observed_generation, reason=INSUFFICIENT_PODS)


def conditions_up_to_date(pdb: PDBView) -> bool:
    cond = next((c for c in pdb.status.conditions if c.type == DISRUPTION_ALLOWED), None)
    if cond is None or pdb.status.observed_generation != pdb.metadata.generation:
        return False
    if pdb.status.disruptions_allowed > 0:
        return cond.status == "True" and cond.reason == SUFFICIENT_PODS
    return cond.status == "False" and cond.reason == INSUFFICIENT_PODS


def disruptions_allowed(current: int, desired: int, expected: int) -> int:
    """Zero while no pod is expected: a PDB matching nothing yet must not let its first
    pods be evicted before this controller has counted them (upstream's comment)."""
    allowed = current - desired
    return 0 if expected <= 0 or allowed <= 0 else allowed


def status_unchanged(
    pdb: PDBView, current: int, desired: int, expected: int, disrupted: Mapping[str, str]
) -> bool:
    old = pdb.status
    return (
        old.current_healthy == current
        and old.desired_healthy == desired
        and old.expected_pods == expected
        and old.disruptions_allowed == disruptions_allowed(current, desired, expected)
        and old.disrupted_pods == dict(disrupted)
        and old.observed_generation == pdb.metadata.generation
        and conditions_up_to_date(pdb)
    )


def new_status(
    pdb: PDBView, current: int, desired: int, expected: int, disrupted: Mapping[str, str], now: dt.datetime
) -> PDBStatus:
    allowed = disruptions_allowed(current, desired, expected)
    generation = pdb.metadata.generation
    return PDBStatus(
        observed_generation=generation,
        disrupted_pods=dict(disrupted),
        disruptions_allowed=allowed,
        current_healthy=current,
        desired_healthy=desired,
        expected_pods=expected,
        conditions=set_condition(pdb.status.conditions, allowed_condition(allowed, generation), now),
    )


def fail_safe_status(pdb: PDBView, message: str, now: dt.datetime) -> PDBStatus:
    """No disruption allowed while the budget cannot be computed (upstream failSafe)."""
    old = pdb.status
    cond = Condition(
        DISRUPTION_ALLOWED, "False", old.observed_generation, reason=SYNC_FAILED, message=message
    )
    return msgspec.structs.replace(
        old, disruptions_allowed=0, conditions=set_condition(old.conditions, cond, now)
    )


def status_patch(new: PDBStatus, old: PDBStatus, resource_version: str) -> dict[str, Any]:
    """A merge patch of the whole status: entries gone from disruptedPods are nulled, since a
    merge patch merges maps; the resourceVersion makes it conditional, as an update is."""
    body = msgspec.to_builtins(new)
    status = {
        k: body.get(k, 0)
        for k in (
            "observedGeneration",
            "disruptionsAllowed",
            "currentHealthy",
            "desiredHealthy",
            "expectedPods",
        )
    }
    pods: dict[str, str | None] = {name: None for name in old.disrupted_pods}
    pods.update(new.disrupted_pods)
    status["disruptedPods"] = pods or None
    status["conditions"] = body.get("conditions", [])
    return {"metadata": {"resourceVersion": resource_version}, "status": status}


def stale_disruption_wait(pod: PodView, timeout: float, now: dt.datetime) -> float | None:
    """Seconds until the pod's DisruptionTarget condition counts as stale (0: it is), or None
    when it has none that can go stale: the pod is terminating or finished, or the kubelet
    set it (it may take arbitrarily long before the pod terminates)."""
    if pod.metadata.deletion_timestamp is not None or pod.status.phase in ("Succeeded", "Failed"):
        return None
    cond = next((c for c in pod.status.conditions if c.type == DISRUPTION_TARGET), None)
    if cond is None or cond.status != "True" or cond.reason == TERMINATION_BY_KUBELET:
        return None
    if cond.last_transition_time is None:
        return 0.0  # a zero time is long past, as upstream's clock.Since reads it
    return max(timeout - (now - cond.last_transition_time).total_seconds(), 0.0)
