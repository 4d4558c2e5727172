"""The cronjob controller's views and pure helpers: schedule arithmetic, Job names, history order.

Follows upstream pkg/controller/cronjob/utils.go (v1.32): `most_recent_schedule_time` is
its mostRecentScheduleTime with the same rough count of missed schedules (and the same
results where that count misleads it), `next_schedule_time` and `next_schedule_delay` are
nextScheduleTime and nextScheduleTimeDuration, `job_from_template` getJobFromTemplate2 with
the `batch.kubernetes.io/cronjob-scheduled-timestamp` annotation (the CronJobsScheduledAnnotation
gate is on by default in 1.32). Schedules come from `kcm_shared.apis.cron` (robfig/cron's
grammar). Called by `cronjob_controller`; tested with upstream's table cases.
"""

from __future__ import annotations

import copy
import datetime as dt
import enum
from dataclasses import dataclass, field
from typing import Any

import msgspec
from kcm_shared.apimachinery import codec
from kcm_shared.apis import cron

SCHEDULED_TIMESTAMP_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"
NEXT_SCHEDULE_DELTA = 0.1  # seconds added to each requeue against clock skew (upstream nextScheduleDelta)
TOO_MANY_MISSED = 100  # more missed start times than this: a warning, only the latest is started


class CronJobSpec(codec.View):
    schedule: str = ""
    time_zone: str | None = None
    starting_deadline_seconds: int | None = None
    concurrency_policy: str = "Allow"
    suspend: bool | None = None
    successful_jobs_history_limit: int | None = None
    failed_jobs_history_limit: int | None = None
    job_template: dict[str, Any] = msgspec.field(default_factory=dict)


class CronJobStatus(codec.View):
    active: list[codec.ObjectReference] = msgspec.field(default_factory=list)
    last_schedule_time: dt.datetime | None = None
    last_successful_time: dt.datetime | None = None


class CronJobView(codec.Meta):
    spec: CronJobSpec = msgspec.field(default_factory=CronJobSpec)
    status: CronJobStatus = msgspec.field(default_factory=CronJobStatus)


class JobCondition(codec.View):
    type: str = ""
    status: str = ""


class JobStatus(codec.View):
    conditions: list[JobCondition] = msgspec.field(default_factory=list)
    start_time: dt.datetime | None = None
    completion_time: dt.datetime | None = None


class JobView(codec.Meta):
    status: JobStatus = msgspec.field(default_factory=JobStatus)


@dataclass
class Status:
    """The status a sync builds on a copy (upstream's cronJobCopy), written once at the end."""

    active: list[codec.ObjectReference] = field(default_factory=list)
    last_schedule_time: dt.datetime | None = None
    last_successful_time: dt.datetime | None = None

    @classmethod
    def of(cls, cj: CronJobView) -> Status:
        s = cj.status
        return cls(list(s.active), s.last_schedule_time, s.last_successful_time)

    def in_active(self, uid: str) -> bool:
        return any(ref.uid == uid for ref in self.active)

    def in_active_by_name(self, namespace: str, name: str) -> bool:
        return any(ref.name == name and ref.namespace == namespace for ref in self.active)

    def delete_from_active(self, uid: str) -> None:
        self.active = [ref for ref in self.active if ref.uid != uid]

    def patch(self, resource_version: str) -> dict[str, Any]:
        """A merge patch replacing the whole status (upstream UpdateStatus), on `resource_version`."""
        return {
            "metadata": {"resourceVersion": resource_version},
            "status": {
                "active": [msgspec.to_builtins(ref) for ref in self.active] or None,
                "lastScheduleTime": format_time(self.last_schedule_time),
                "lastSuccessfulTime": format_time(self.last_successful_time),
            },
        }


def format_time(t: dt.datetime | None) -> str | None:
    """metav1.Time on the wire: RFC 3339 in UTC, whole seconds."""
    return None if t is None else t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_rfc3339(t: dt.datetime) -> str:
    """Go's time.RFC3339 in t's zone: `Z` for UTC, else the offset."""
    offset = t.utcoffset()
    if not offset:
        return t.strftime("%Y-%m-%dT%H:%M:%SZ")
    text = t.strftime("%Y-%m-%dT%H:%M:%S%z")
    return text[:-2] + ":" + text[-2:]


def format_rfc1123z(t: dt.datetime) -> str:
    """Go's time.RFC1123Z of a UTC time (the MissSchedule message)."""
    return t.astimezone(dt.UTC).strftime("%a, %d %b %Y %H:%M:%S +0000")


class Missed(enum.Enum):
    NONE = "none"
    FEW = "few"
    MANY = "many"


class ScheduleError(Exception):
    """A schedule that parses but never yields two distinct times (e.g. `59 23 31 2 *`)."""


def most_recent_schedule_time(
    cj: CronJobView, now: dt.datetime, schedule: cron.Schedule, include_deadline: bool
) -> tuple[dt.datetime, dt.datetime | None, Missed]:
    """(the earliest time considered, the latest schedule time not after `now` or None, how
    many were missed); raises ScheduleError. Upstream's mostRecentScheduleTime, including its
    estimate of the missed count from the first interval."""
    created = cj.metadata.creation_timestamp or now
    earliest = cj.status.last_schedule_time or created
    deadline = cj.spec.starting_deadline_seconds
    if include_deadline and deadline is not None:
        # Nothing older than the deadline will be started.
        earliest = max(earliest, now - dt.timedelta(seconds=deadline))
    t1 = schedule.next(earliest)
    if t1 is None:
        raise ScheduleError("time difference between two schedules is less than 1 second")
    t2 = schedule.next(t1)
    if now < t1:
        return earliest, None, Missed.NONE
    if t2 is not None and now < t2:
        return earliest, t1, Missed.NONE
    between = 0 if t2 is None else round((t2 - t1).total_seconds())
    if between < 1:
        raise ScheduleError("time difference between two schedules is less than 1 second")
    elapsed = int((now - t1).total_seconds())
    missed = elapsed // between + 1
    # Jump close to `now` by whole intervals, then let the schedule find the exact times.
    most_recent = None
    t = schedule.next(t1 + dt.timedelta(seconds=(missed - 2) * between))
    while t is not None and t <= now:
        most_recent = t
        t = schedule.next(t)
    return earliest, most_recent, Missed.MANY if missed > TOO_MANY_MISSED else Missed.FEW


def next_schedule_delay(cj: CronJobView, now: dt.datetime, schedule: cron.Schedule) -> float | None:
    """Seconds until the next schedule time plus NEXT_SCHEDULE_DELTA (upstream
    nextScheduleTimeDuration); None when the schedule has no next time at all."""
    try:
        earliest, most_recent, missed = most_recent_schedule_time(cj, now, schedule, False)
    except ScheduleError:
        most_recent = now  # still requeue: aim for the next slot from now
    else:
        if most_recent is None:
            most_recent = earliest if missed is Missed.NONE else now
    following = schedule.next(most_recent)
    if following is None:
        return None
    return (following - now).total_seconds() + NEXT_SCHEDULE_DELTA


def next_schedule_time(
    cj: CronJobView, now: dt.datetime, schedule: cron.Schedule
) -> tuple[dt.datetime | None, bool]:
    """(the schedule time to start now, or None; whether too many were missed). Raises
    ScheduleError (upstream nextScheduleTime; the caller records the Event)."""
    _, most_recent, missed = most_recent_schedule_time(cj, now, schedule, True)
    if most_recent is None or most_recent > now:
        return None, False
    return most_recent, missed is Missed.MANY


def format_schedule(cj: CronJobView) -> str:
    """The schedule robfig parses: spec.timeZone as a `TZ=` prefix, unless the schedule has its
    own (upstream formatSchedule; an unknown zone is refused before this is called)."""
    schedule = cj.spec.schedule
    if "TZ" in schedule or cj.spec.time_zone is None:
        return schedule
    return f"TZ={cj.spec.time_zone} {schedule}"


def job_name(cj: CronJobView, scheduled: dt.datetime) -> str:
    """`<cronjob>-<scheduled time in minutes since the epoch>`: one name per schedule time,
    so a Job is never made twice for one time (upstream getJobName)."""
    return f"{cj.metadata.name}-{int(scheduled.timestamp()) // 60}"


def job_from_template(cj: CronJobView, scheduled: dt.datetime) -> dict[str, Any]:
    """The Job to create for `scheduled` (upstream getJobFromTemplate2); raises
    cron.ParseError when spec.timeZone cannot be loaded."""
    template = cj.spec.job_template
    meta = template.get("metadata") or {}
    zone = cron.load_location(cj.spec.time_zone or "")
    annotations = dict(meta.get("annotations") or {})
    annotations[SCHEDULED_TIMESTAMP_ANNOTATION] = format_rfc3339(scheduled.astimezone(zone))
    metadata: dict[str, Any] = {
        "name": job_name(cj, scheduled),
        "namespace": cj.metadata.namespace,
        "annotations": annotations,
        "ownerReferences": [
            {
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "name": cj.metadata.name,
                "uid": cj.metadata.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if meta.get("labels"):
        metadata["labels"] = dict(meta["labels"])
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": copy.deepcopy(template.get("spec") or {}),
    }


def finished_condition(job: JobView) -> str | None:
    """`Complete` or `Failed` when the Job has finished (upstream getFinishedStatus)."""
    for cond in job.status.conditions:
        if cond.type in ("Complete", "Failed") and cond.status == "True":
            return cond.type
    return None


def by_start_time(job: JobView) -> tuple[bool, dt.datetime, str]:
    """Sort key: oldest start first, Jobs not started yet last, then by name (byJobStartTime)."""
    start = job.status.start_time
    never = dt.datetime.max.replace(tzinfo=dt.UTC)
    return (start is None, start or never, job.metadata.name)


def reference(job: dict[str, Any]) -> codec.ObjectReference:
    """The ObjectReference status.active holds for a Job the API server returned (getRef)."""
    meta = job.get("metadata") or {}
    return codec.ObjectReference(
        kind="Job",
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        uid=meta.get("uid", ""),
        api_version="batch/v1",
        resource_version=meta.get("resourceVersion", ""),
    )
