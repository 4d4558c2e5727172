"""The namespace controller's pure helpers: status conditions and the deletion estimate.

Upstream pkg/controller/namespace/deletion: status_condition_utils.go (the five condition
types the deleter owns, their failure and "ok" reasons and messages, and how one round's
conditions are merged into the stored ones) and the estimate and bookkeeping parts of
namespaced_resources_deleter.go (estimateGracefulTermination and
estimateGracefulTerminationForPods, the 15 s default for content held by finalizers,
GroupVersionResource parsing, ResourcesRemainingError's requeue of estimate/2+1 seconds in
namespace_controller.go). Called by `kcm_controllers.namespace.deleter`; tested with
upstream's table cases in tests/unit/controllers/namespace/test_conditions.py.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kcm_shared.apimachinery import gvr

DISCOVERY_FAILURE = "NamespaceDeletionDiscoveryFailure"
GV_PARSING_FAILURE = "NamespaceDeletionGroupVersionParsingFailure"
CONTENT_FAILURE = "NamespaceDeletionContentFailure"
CONTENT_REMAINING = "NamespaceContentRemaining"
FINALIZERS_REMAINING = "NamespaceFinalizersRemaining"
# The types the deleter maintains, in the order upstream appends them.
CONDITION_TYPES = (
    DISCOVERY_FAILURE,
    GV_PARSING_FAILURE,
    CONTENT_FAILURE,
    CONTENT_REMAINING,
    FINALIZERS_REMAINING,
)
# (reason, message) of each type while nothing is wrong: status False.
_OK = {
    DISCOVERY_FAILURE: ("ResourcesDiscovered", "All resources successfully discovered"),
    GV_PARSING_FAILURE: ("ParsedGroupVersions", "All legacy kube types successfully parsed"),
    CONTENT_FAILURE: ("ContentDeleted", "All content successfully deleted, may be waiting on finalization"),
    CONTENT_REMAINING: ("ContentRemoved", "All content successfully removed"),
    FINALIZERS_REMAINING: ("ContentHasNoFinalizers", "All content-preserving finalizers finished"),
}

# Upstream's guess of how long finalizers on remaining content take to finish.
FINALIZER_ESTIMATE_SECONDS = 15


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str


def ok(condition_type: str) -> Condition:
    reason, message = _OK[condition_type]
    return Condition(condition_type, "False", reason, message)


def group_discovery_error(failures: Mapping[str, str]) -> str:
    """Some groups' discovery failed (group version -> why), worded as ErrGroupDiscoveryFailed."""
    listed = ", ".join(sorted(f"{gv}: {why}" for gv, why in failures.items()))
    return f"unable to retrieve the complete list of server APIs: {listed}"


def discovery_failure(error: str, failures: Mapping[str, str] | None = None) -> Condition:
    """From a discovery error; `failures` (group version -> why) when only some groups failed."""
    message = f"Discovery failed for some groups, {len(failures)} failing: {error}" if failures else error
    return Condition(DISCOVERY_FAILURE, "True", "DiscoveryFailed", message)


def group_version_failure(error: str) -> Condition:
    return Condition(GV_PARSING_FAILURE, "True", "GroupVersionParsingFailed", error)


def content_failure(errors: Sequence[str]) -> Condition | None:
    """The condition for the resources whose content could not be deleted; None when none failed."""
    if not errors:
        return None
    joined = ", ".join(sorted(errors))
    return Condition(
        CONTENT_FAILURE,
        "True",
        "ContentDeletionFailed",
        f"Failed to delete all resource types, {len(errors)} remaining: {joined}",
    )


def content_totals(remaining: Mapping[gvr.Resource, int], finalizers: Mapping[str, int]) -> list[Condition]:
    """ContentRemaining and FinalizersRemaining for what is left (upstream ProcessContentTotals)."""
    out = []
    resources = sorted(
        f"{res.resource}.{res.group} has {count} resource instances"
        for res, count in remaining.items()
        if count
    )
    if remaining:
        out.append(
            Condition(
                CONTENT_REMAINING,
                "True",
                "SomeResourcesRemain",
                f"Some resources are remaining: {', '.join(resources)}",
            )
        )
    held = sorted(f"{name} in {count} resource instances" for name, count in finalizers.items() if count)
    if finalizers:
        out.append(
            Condition(
                FINALIZERS_REMAINING,
                "True",
                "SomeFinalizersRemain",
                f"Some content in the namespace has finalizers remaining: {', '.join(held)}",
            )
        )
    return out


def update_conditions(
    stored: Sequence[Mapping[str, Any]], new: Sequence[Condition], now: str
) -> tuple[list[dict[str, Any]], bool]:
    """The namespace's conditions with this round's merged in, and whether anything changed.

    Every owned type is set: to its condition in `new`, else to its "ok" form. A stored
    condition keeps its place and its lastTransitionTime unless its status flips; missing
    types are appended; conditions of other types are left alone (upstream updateConditions).
    """
    out = [dict(c) for c in stored]
    changed = False
    for condition_type in CONDITION_TYPES:
        want = next((c for c in new if c.type == condition_type), None) or ok(condition_type)
        have = next((c for c in out if c.get("type") == condition_type), None)
        if have is None:
            out.append(
                {
                    "type": want.type,
                    "status": want.status,
                    "lastTransitionTime": now,
                    "reason": want.reason,
                    "message": want.message,
                }
            )
            changed = True
        elif (have.get("status"), have.get("reason"), have.get("message")) != (
            want.status,
            want.reason,
            want.message,
        ):
            if have.get("status") != want.status:
                have["lastTransitionTime"] = now
            have.update(status=want.status, reason=want.reason, message=want.message)
            changed = True
    return out, changed


def parse_group_version(text: str) -> tuple[str, str]:
    """(group, version) of `apps/v1` or `v1`, as schema.ParseGroupVersion; raises ValueError."""
    if text in ("", "/"):
        return "", ""
    if text.count("/") == 0:
        return "", text
    if text.count("/") == 1:
        group, _, version = text.partition("/")
        return group, version
    raise ValueError(f"unexpected GroupVersion string: {text}")


def gvr_string(res: gvr.Resource) -> str:
    """A resource as Go prints a GroupVersionResource: `apps/v1, Resource=deployments`."""
    return f"{res.group}/{res.version}, Resource={res.resource}"


@dataclass(frozen=True, slots=True)
class PodGrace:
    """What the estimate reads of a pod."""

    phase: str
    termination_grace_period_seconds: int | None


def pods_estimate(pods: Iterable[PodGrace]) -> int:
    """The longest grace period of the pods that have not finished (upstream
    estimateGracefulTerminationForPods)."""
    estimate = 0
    for pod in pods:
        if pod.phase in ("Succeeded", "Failed"):
            continue
        if pod.termination_grace_period_seconds is not None:
            estimate = max(estimate, pod.termination_grace_period_seconds)
    return estimate


def effective_estimate(estimate: int, deleted_at: dt.datetime, now: dt.datetime) -> int:
    """`estimate`, or 0 once the namespace has been terminating at least that long."""
    return 0 if (now - deleted_at).total_seconds() >= estimate else estimate


def requeue_seconds(estimate: int) -> int:
    """When to look again while content remains: half the estimate, plus a second."""
    return estimate // 2 + 1


def aggregate(errors: Sequence[str]) -> str:
    """Several errors as one message, as utilerrors.NewAggregate prints them."""
    return errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]"
