"""Matching a failed pod against a Job's `spec.podFailurePolicy`.

Upstream pkg/controller/job/pod_failure_policy.go (matchPodFailurePolicy): the rules are
tried in order and the first that matches decides what the failure means:

- `FailJob`: the Job fails at once, with the returned message as its Failed condition's
  message (reason PodFailurePolicy);
- `FailIndex`: the pod's index fails at once (backoffLimitPerIndex Jobs);
- `Ignore`: the failure does not count towards backoffLimit (nor the index's limit);
- `Count`: the failure counts, as it does when no rule matches.

An `onExitCodes` rule matches the first container (then init container) that terminated with a
non-zero exit code accepted by its operator (and named `containerName`, if set); an
`onPodConditions` rule matches a pod condition of the same type and status. Rules with an action
or operator this version does not know are skipped, as upstream does. Called by the job
controller for each failed pod it has not yet counted.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
from kcm_shared.apimachinery import codec

from kcm_controllers.job import podview

FAIL_JOB = "FailJob"
FAIL_INDEX = "FailIndex"
IGNORE = "Ignore"
COUNT = "Count"

OP_IN = "In"
OP_NOT_IN = "NotIn"


class OnExitCodes(codec.View):
    container_name: str | None = None
    operator: str = ""
    values: list[int] = msgspec.field(default_factory=list)


class OnPodConditionsPattern(codec.View):
    type: str = ""
    status: str = ""


class PodFailurePolicyRule(codec.View):
    action: str = ""
    on_exit_codes: OnExitCodes | None = None
    on_pod_conditions: list[OnPodConditionsPattern] | None = None


class PodFailurePolicy(codec.View):
    """`spec.podFailurePolicy` of a Job, for the job controller's Job view."""

    rules: list[PodFailurePolicyRule] = msgspec.field(default_factory=list)


@dataclass(frozen=True)
class Match:
    """What a failed pod means under the policy.

    `message` is set for FailJob (the Failed condition's message); `count_failed` is False
    only for Ignore; `action` is the matched rule's action, None when no rule matched.
    """

    message: str | None
    count_failed: bool
    action: str | None


NO_MATCH = Match(message=None, count_failed=True, action=None)


def match(policy: PodFailurePolicy | None, pod: podview.JobPodView) -> Match:
    """The first rule of `policy` that `pod` (a failed pod) matches, as a `Match`."""
    if policy is None:
        return NO_MATCH
    meta = pod.metadata
    for index, rule in enumerate(policy.rules):
        if rule.action not in (FAIL_JOB, FAIL_INDEX, IGNORE, COUNT):
            continue
        message: str | None = None
        if rule.on_exit_codes is not None:
            found = _matching_container(pod.status, rule.on_exit_codes)
            if found is None:
                continue
            if rule.action == FAIL_JOB:
                name, exit_code = found
                message = (
                    f"Container {name} for pod {meta.namespace}/{meta.name} failed with exit code "
                    f"{exit_code} matching {rule.action} rule at index {index}"
                )
        elif rule.on_pod_conditions is not None:
            condition = _matching_condition(pod.status, rule.on_pod_conditions)
            if condition is None:
                continue
            if rule.action == FAIL_JOB:
                message = (
                    f"Pod {meta.namespace}/{meta.name} has condition {condition.type} "
                    f"matching {rule.action} rule at index {index}"
                )
        else:
            continue
        return Match(message=message, count_failed=rule.action != IGNORE, action=rule.action)
    return NO_MATCH


def _matching_container(status: podview.PodStatusView, requirement: OnExitCodes) -> tuple[str, int] | None:
    """(name, exit code) of the first terminated container the requirement matches."""
    for statuses in (status.container_statuses, status.init_container_statuses):
        for container in statuses:
            terminated = container.state.terminated
            # A container still running (or terminating) has no exit code to match yet.
            if terminated is None or terminated.exit_code == 0:
                continue
            if requirement.container_name is not None and requirement.container_name != container.name:
                continue
            if _operator_matches(terminated.exit_code, requirement):
                return container.name, terminated.exit_code
    return None


def _operator_matches(exit_code: int, requirement: OnExitCodes) -> bool:
    if requirement.operator == OP_IN:
        return exit_code in requirement.values
    if requirement.operator == OP_NOT_IN:
        return exit_code not in requirement.values
    return False


def _matching_condition(
    status: podview.PodStatusView, patterns: list[OnPodConditionsPattern]
) -> podview.PodCondition | None:
    for condition in status.conditions:
        for pattern in patterns:
            if condition.type == pattern.type and condition.status == pattern.status:
                return condition
    return None
