"""When a finished Job's time to live runs out: upstream's pure TTL helpers.

Upstream pkg/controller/ttlafterfinished/ttlafterfinished_controller.go (`needsCleanup`,
`jobFinishTime`, `getFinishAndExpireTime`, `timeLeft`) and pkg/controller/job/util
(`IsJobFinished`). A Job needs clean-up when it has `spec.ttlSecondsAfterFinished` and a
Complete or Failed condition that is True; it finished at that condition's
lastTransitionTime and expires TTL seconds later. `JobView` is the part of a Job these read;
the controller (`ttlafterfinished_controller`) caches Jobs in it and decodes its fresh GET into it.
"""

from __future__ import annotations

import datetime as dt

import msgspec
from kcm_shared.apimachinery import codec

FINISHED_CONDITIONS = ("Complete", "Failed")


class JobCondition(codec.View):
    type: str = ""
    status: str = ""
    last_transition_time: dt.datetime | None = None


class JobSpecView(codec.View):
    ttl_seconds_after_finished: int | None = None


class JobStatusView(codec.View):
    conditions: list[JobCondition] = msgspec.field(default_factory=list)


class JobView(codec.Meta):
    spec: JobSpecView = msgspec.field(default_factory=JobSpecView)
    status: JobStatusView = msgspec.field(default_factory=JobStatusView)


class TTLError(ValueError):
    """A Job whose finish time cannot be told (upstream's errors, with their messages)."""


def _finished_condition(job: JobView) -> JobCondition | None:
    return next(
        (c for c in job.status.conditions if c.type in FINISHED_CONDITIONS and c.status == "True"), None
    )


def is_job_finished(job: JobView) -> bool:
    """A Complete or Failed condition is True (upstream jobutil.IsJobFinished)."""
    return _finished_condition(job) is not None


def needs_cleanup(job: JobView) -> bool:
    return job.spec.ttl_seconds_after_finished is not None and is_job_finished(job)


def _name(job: JobView) -> str:
    return f"{job.metadata.namespace}/{job.metadata.name}"


def job_finish_time(job: JobView) -> dt.datetime:
    """The lastTransitionTime of the first True Complete or Failed condition."""
    condition = _finished_condition(job)
    if condition is None:
        raise TTLError(f"unable to find the status of the finished Job {_name(job)}")
    if condition.last_transition_time is None:
        raise TTLError(f"unable to find the time when the Job {_name(job)} finished")
    return condition.last_transition_time


def finish_and_expire_time(job: JobView) -> tuple[dt.datetime, dt.datetime]:
    ttl = job.spec.ttl_seconds_after_finished
    if ttl is None or not is_job_finished(job):
        raise TTLError(f"job {_name(job)} should not be cleaned up")
    finish_at = job_finish_time(job)
    return finish_at, finish_at + dt.timedelta(seconds=ttl)


def time_left(job: JobView, since: dt.datetime) -> tuple[dt.timedelta, dt.datetime, bool]:
    """Time until the Job expires (negative once past), when it expires, and whether it
    finished after `since` (a clock skew upstream logs a warning for)."""
    finish_at, expire_at = finish_and_expire_time(job)
    return expire_at - since, expire_at, finish_at > since
