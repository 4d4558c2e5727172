"""The Job as the job controller reads it, and the pure rules of its status (upstream job_controller.go).

`JobView` decodes the fields of a batch/v1 Job the controller reads; the pod template's
spec stays undecoded JSON (`podcontrol.PodTemplate`). The helpers are upstream's small
predicates and condition functions: `is_finished` (a Complete or Failed condition that is
True), `managed_by_external` (spec.managedBy names another controller), `is_pod_failed`
(Failed, or being deleted without having succeeded unless only failed pods are replaced),
`only_replace_failed_pods` (podReplacementPolicy Failed, or a podFailurePolicy),
`new_condition` and `ensure_condition` (ensureJobConditionStatus), and `status_body`, the
status written to the Job's status subresource. Used by `job_controller.py` and its tests.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec
from kcm_shared.apimachinery import codec
from kcm_shared.controllerutil import podcontrol

from kcm_controllers.job import pod_failure_policy, podview, success_policy

JOB_CONTROLLER_NAME = "kubernetes.io/job-controller"

COMPLETE = "Complete"
FAILED = "Failed"
SUSPENDED = "Suspended"
FAILURE_TARGET = "FailureTarget"
SUCCESS_CRITERIA_MET = "SuccessCriteriaMet"

NON_INDEXED = "NonIndexed"
INDEXED = "Indexed"


class JobSpec(codec.View):
    parallelism: int | None = None
    completions: int | None = None
    active_deadline_seconds: int | None = None
    backoff_limit: int | None = None
    backoff_limit_per_index: int | None = None
    max_failed_indexes: int | None = None
    selector: dict[str, Any] | None = None
    template: podcontrol.PodTemplate = msgspec.field(default_factory=podcontrol.PodTemplate)
    completion_mode: str | None = None
    suspend: bool | None = None
    pod_replacement_policy: str | None = None
    managed_by: str | None = None
    pod_failure_policy: pod_failure_policy.PodFailurePolicy | None = None
    success_policy: success_policy.SuccessPolicy | None = None


class JobCondition(codec.View):
    type: str = ""
    status: str = ""
    # The server's text, so a condition written back is what was read.
    last_probe_time: str | None = None
    last_transition_time: str | None = None
    reason: str = ""
    message: str = ""


class UncountedTerminatedPods(codec.View):
    succeeded: list[str] = msgspec.field(default_factory=list)
    failed: list[str] = msgspec.field(default_factory=list)


class JobStatus(codec.View):
    conditions: list[JobCondition] = msgspec.field(default_factory=list)
    start_time: dt.datetime | None = None
    completion_time: dt.datetime | None = None
    active: int = 0
    succeeded: int = 0
    failed: int = 0
    terminating: int | None = None
    ready: int | None = None
    completed_indexes: str = ""
    failed_indexes: str | None = None
    uncounted_terminated_pods: UncountedTerminatedPods | None = None


class JobView(codec.Meta):
    spec: JobSpec = msgspec.field(default_factory=JobSpec)
    status: JobStatus = msgspec.field(default_factory=JobStatus)


def timestamp(at: dt.datetime) -> str:
    """RFC 3339 with whole seconds, as metav1.Time serialises."""
    return at.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def find_condition(conditions: list[JobCondition], cond_type: str) -> JobCondition | None:
    return next((c for c in conditions if c.type == cond_type), None)


def is_finished(job: JobView) -> bool:
    return any(c.type in (COMPLETE, FAILED) and c.status == "True" for c in job.status.conditions)


def managed_by_external(job: JobView) -> str | None:
    """The other controller named in spec.managedBy, or None when it is ours (or unset)."""
    name = job.spec.managed_by
    return name if name is not None and name != JOB_CONTROLLER_NAME else None


def is_indexed(job: JobView) -> bool:
    return job.spec.completion_mode == INDEXED


def has_backoff_limit_per_index(job: JobView) -> bool:
    return job.spec.backoff_limit_per_index is not None


def suspended(job: JobView) -> bool:
    return job.spec.suspend is True


def only_replace_failed_pods(job: JobView) -> bool:
    return job.spec.pod_replacement_policy == "Failed" or job.spec.pod_failure_policy is not None


def is_pod_failed(pod: podview.JobPodView, job: JobView) -> bool:
    if pod.status.phase == "Failed":
        return True
    if only_replace_failed_pods(job):
        return False
    # A deleted pod may never reach Failed (an orphan removed by the pod GC): count it failed.
    return pod.metadata.deletion_timestamp is not None and pod.status.phase != "Succeeded"


def is_pod_terminating(pod: podview.JobPodView) -> bool:
    return pod.metadata.deletion_timestamp is not None and pod.status.phase not in ("Succeeded", "Failed")


def new_condition(cond_type: str, status: str, reason: str, message: str, now: dt.datetime) -> JobCondition:
    at = timestamp(now)
    return JobCondition(cond_type, status, at, at, reason, message)


def ensure_condition(
    conditions: list[JobCondition], cond_type: str, status: str, reason: str, message: str, now: dt.datetime
) -> tuple[list[JobCondition], bool]:
    """`conditions` with one of `cond_type` set to this status, reason and message, and
    whether that changed them; a False condition is never added, only updated to."""
    for i, cond in enumerate(conditions):
        if cond.type == cond_type:
            if cond.status == status and cond.reason == reason and cond.message == message:
                return conditions, False
            updated = list(conditions)
            updated[i] = new_condition(cond_type, status, reason, message, now)
            return updated, True
    if status != "False":
        return [*conditions, new_condition(cond_type, status, reason, message, now)], True
    return conditions, False


def _condition_body(cond: JobCondition) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": cond.type,
        "status": cond.status,
        "lastProbeTime": cond.last_probe_time,
        "lastTransitionTime": cond.last_transition_time,
    }
    if cond.reason:
        body["reason"] = cond.reason
    if cond.message:
        body["message"] = cond.message
    return body


def status_body(status: JobStatus) -> dict[str, Any]:
    """The whole status as a JSON merge patch: fields upstream omits are sent as null, so a
    value left from before is removed rather than merged."""
    uncounted = status.uncounted_terminated_pods or UncountedTerminatedPods()
    return {
        "conditions": [_condition_body(c) for c in status.conditions] or None,
        "startTime": timestamp(status.start_time) if status.start_time else None,
        "completionTime": timestamp(status.completion_time) if status.completion_time else None,
        "active": status.active or None,
        "succeeded": status.succeeded or None,
        "failed": status.failed or None,
        "terminating": status.terminating,
        "ready": status.ready,
        "completedIndexes": status.completed_indexes or None,
        "failedIndexes": status.failed_indexes,
        "uncountedTerminatedPods": {
            "succeeded": list(uncounted.succeeded) or None,
            "failed": list(uncounted.failed) or None,
        },
    }
