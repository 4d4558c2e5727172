"""The CronJob controller: creates a Job for every schedule time of every CronJob.

Upstream pkg/controller/cronjob/cronjob_controllerv2.go (v1.32) on our runtime
(docs/runtime.md); the schedule arithmetic and views are in `utils.py`, the cron grammar in
`kcm_shared.apis.cron`. Event handlers only map changes to CronJob keys:

- CronJob added, updated or deleted: its key, at once, except after a change of schedule or
  time zone: then after the new schedule's next time (upstream's updateCronJob), so a time
  of the new schedule that has just passed starts no Job; a schedule that does not parse is
  not enqueued (an `UnParseableCronJobSchedule` Event says why).
- Job added, updated or deleted: the CronJob its controllerRef names (the old and the new
  one when that ref changed), so a finished Job is counted and old ones cleaned up at once.

The sync (`CronJobController.sync`), as upstream's: read the CronJob from the cache and the
Jobs of its namespace whose controllerRef names it; delete the oldest finished Jobs beyond
successfulJobsHistoryLimit / failedJobsHistoryLimit (background propagation); drop finished
and vanished Jobs from status.active (`SawCompletedJob`, `MissingJob`) and move
lastSuccessfulTime on; then, unless the CronJob is being deleted, suspended or its time zone
or schedule is unusable (an Event says why), find the latest schedule time not yet started
that is within startingDeadlineSeconds, apply concurrencyPolicy (`JobAlreadyActive` under
Forbid, delete the active Jobs under Replace) and create `<name>-<minutes since epoch>`. The
status is written once at the end, through the status subresource on the resourceVersion
read, and the key requeued (durably) for the next schedule time plus 100 ms. The Job create
is sent at `kubeclient.Priority.HIGH`, so a start waiting on the client's rate limit goes
before the status writes and Events of the syncs ahead of it (upstream's client is FIFO).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

import prometheus_client
from kcm_shared import runtime
from kcm_shared.apimachinery import codec, gvr
from kcm_shared.apis import cron
from kcm_shared.base.goquote import go_quote
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import controllerref, ownwrites, podcontrol
from kcm_shared.runtime import cache, events

from kcm_controllers.cronjob import utils

log = logging.getLogger("kcm.cronjob")

CRONJOBS = gvr.Resource("batch", "v1", "cronjobs")
JOBS = gvr.Resource("batch", "v1", "jobs")
KIND = "CronJob"

JOB_CREATION_SKEW = prometheus_client.Histogram(
    "cronjob_controller_job_creation_skew_duration_seconds",
    "Time between when a cronjob is scheduled to be run, and when the corresponding job is created",
    buckets=[2.0**i for i in range(10)],
)


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _path(res: gvr.Resource, namespace: str, name: str, subresource: str = "") -> str:
    return kubeclient.resource_path(res.group, res.version, res.resource, namespace, name, subresource)


class CronJobController:
    """Handlers and sync of one process; the API client, recorder and clock are injected."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        cronjobs: cache.Cache[utils.CronJobView],
        jobs: cache.Cache[utils.JobView],
        enqueue: Callable[[str], None],
        enqueue_after: Callable[[str, float], None],
        recorder: events.EventRecorder,
        *,
        now: Callable[[], dt.datetime] = _utcnow,
    ) -> None:
        self.client = client
        self.cronjobs = cronjobs
        self.jobs = jobs
        self.enqueue = enqueue
        self.enqueue_after = enqueue_after
        self.recorder = recorder
        self.now = now
        self.own_writes: ownwrites.OwnWrites[utils.CronJobView] = ownwrites.OwnWrites()
        # Schedules without spec.timeZone run in the process's zone, as upstream's time.Local.
        self.local_zone = cron.local_zone()

    def register(self) -> None:
        self.cronjobs.add_handler(
            on_add=self._enqueue_cronjob, on_update=self.update_cronjob, on_delete=self._enqueue_cronjob
        )
        self.jobs.add_handler(on_add=self.add_job, on_update=self.update_job, on_delete=self.delete_job)

    # --- event handlers ---------------------------------------------------------------------

    def _enqueue_cronjob(self, cj: utils.CronJobView) -> None:
        self.enqueue(codec.key_of(cj))

    def update_cronjob(self, old: utils.CronJobView, cur: utils.CronJobView) -> None:
        if old.spec.schedule == cur.spec.schedule and old.spec.time_zone == cur.spec.time_zone:
            self._enqueue_cronjob(cur)
            return
        try:
            schedule = cron.parse_standard(utils.format_schedule(cur), self.local_zone)
        except cron.ParseError:
            self.recorder.event(
                cur,
                events.WARNING,
                "UnParseableCronJobSchedule",
                f"unparseable schedule for cronjob: {cur.spec.schedule}",
            )
            return
        delay = utils.next_schedule_delay(cur, self.now(), schedule)
        # A schedule with no next time at all: the sync says so at once.
        self.enqueue_after(codec.key_of(cur), 0.0 if delay is None else delay)

    def _enqueue_owner(self, job: utils.JobView, ref: codec.OwnerReference | None) -> None:
        cj = controllerref.resolve(self.cronjobs.get, job.metadata.namespace, ref, KIND)
        if cj is not None:
            self.enqueue(codec.key_of(cj))

    def add_job(self, job: utils.JobView) -> None:
        self._enqueue_owner(job, codec.controller_ref(job))

    def update_job(self, old: utils.JobView, cur: utils.JobView) -> None:
        if old.metadata.resource_version == cur.metadata.resource_version:
            return
        old_ref, cur_ref = codec.controller_ref(old), codec.controller_ref(cur)
        if old_ref != cur_ref and old_ref is not None:
            self._enqueue_owner(old, old_ref)
        self._enqueue_owner(cur, cur_ref)

    def delete_job(self, job: utils.JobView) -> None:
        self._enqueue_owner(job, codec.controller_ref(job))

    # --- sync -------------------------------------------------------------------------------

    def jobs_of(self, cj: utils.CronJobView) -> list[utils.JobView]:
        """Jobs whose controllerRef names the CronJob, whatever their labels say now (upstream
        getJobsToBeReconciled; it matches the name alone, and so does this, kind aside)."""
        found = []
        for job in self.jobs.list(cj.metadata.namespace):
            ref = codec.controller_ref(job)
            if ref is not None and ref.kind == KIND and ref.name == cj.metadata.name:
                found.append(job)
        return found

    async def sync(self, key: str) -> runtime.Result | None:
        cj = self.own_writes.latest(key, self.cronjobs.get_key(key))
        if cj is None:
            return None
        started = self.now()
        jobs = self.jobs_of(cj)
        status = utils.Status.of(cj)
        changed = await self.cleanup_finished_jobs(cj, status, jobs)
        sync_error: Exception | None = None
        delay: float | None = None
        try:
            cj, delay, synced = await self.sync_cron_job(cj, status, jobs, started)
            changed = changed or synced
        except Exception as exc:
            sync_error = exc
            changed = changed or status != utils.Status.of(cj)
            log.info("error reconciling cronjob", extra={"cronjob": key, "error": repr(exc)})
        if changed:
            await self.write_status(key, cj, status)
        if delay is not None:
            # The delay counts from the sync's start: the writes since must not push it back.
            spent = (self.now() - started).total_seconds()
            return runtime.Result(requeue_after=max(delay - spent, 0.0))
        if sync_error is not None:
            raise sync_error
        return None

    async def sync_cron_job(
        self, cj: utils.CronJobView, status: utils.Status, jobs: list[utils.JobView], now: dt.datetime
    ) -> tuple[utils.CronJobView, float | None, bool]:
        """(the CronJob as last read, seconds from `now` until the next sync or None, whether
        `status` changed); raises what the API raised. Upstream syncCronJob."""
        changed = False
        children = set()
        for job in jobs:
            children.add(job.metadata.uid)
            found = status.in_active(job.metadata.uid)
            condition = utils.finished_condition(job)
            if not found and condition is None:
                # Our status write may not be back yet: read the CronJob itself before crying wolf.
                fresh = await self.get_cronjob(cj)
                if fresh is not None and utils.Status.of(fresh).in_active(job.metadata.uid):
                    cj = fresh
                    status.active, status.last_schedule_time, status.last_successful_time = (
                        list(fresh.status.active),
                        fresh.status.last_schedule_time,
                        fresh.status.last_successful_time,
                    )
                    continue
                self.recorder.event(
                    cj,
                    events.WARNING,
                    "UnexpectedJob",
                    f"Saw a job that the controller did not create or forgot: {job.metadata.name}",
                )
            elif condition is not None:
                if found:
                    status.delete_from_active(job.metadata.uid)
                    self.recorder.event(
                        cj,
                        events.NORMAL,
                        "SawCompletedJob",
                        f"Saw completed job: {job.metadata.name}, condition: {condition}",
                    )
                    changed = True
                done = job.status.completion_time
                if condition == "Complete" and done is not None:
                    last = status.last_successful_time
                    if last is None or done > last:
                        status.last_successful_time = done
                        changed = True
        for ref in list(status.active):
            if ref.uid in children:
                continue
            # Ask the API server: the Job may be newer than our cache.
            try:
                await self.client.get(_path(JOBS, ref.namespace, ref.name))
            except kubeclient.ApiError as exc:
                if not exc.not_found:
                    raise
                self.recorder.event(cj, events.NORMAL, "MissingJob", f"Active job went missing: {ref.name}")
                status.delete_from_active(ref.uid)
                changed = True
        if cj.metadata.deletion_timestamp is not None:
            return cj, None, changed
        if cj.spec.time_zone is not None:
            try:
                cron.load_location(cj.spec.time_zone)
            except cron.ParseError as exc:
                self.recorder.event(
                    cj,
                    events.WARNING,
                    "UnknownTimeZone",
                    f"invalid timeZone: {go_quote(cj.spec.time_zone)}: {exc}",
                )
                return cj, None, changed
        if cj.spec.suspend:
            return cj, None, changed
        if "TZ" in cj.spec.schedule:
            self.recorder.event(
                cj,
                events.WARNING,
                "UnsupportedSchedule",
                f"CRON_TZ or TZ used in schedule {go_quote(cj.spec.schedule)} is not officially supported, "
                "see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details",
            )
        try:
            schedule = cron.parse_standard(utils.format_schedule(cj), self.local_zone)
        except cron.ParseError as exc:
            self.recorder.event(
                cj,
                events.WARNING,
                "UnparseableSchedule",
                f"unparseable schedule: {go_quote(cj.spec.schedule)} : {exc}",
            )
            return cj, None, changed
        try:
            scheduled, too_many = utils.next_schedule_time(cj_with(cj, status), now, schedule)
        except utils.ScheduleError as exc:
            self.recorder.event(
                cj, events.WARNING, "InvalidSchedule", f"invalid schedule: {cj.spec.schedule} : {exc}"
            )
            return cj, None, changed
        if too_many:
            self.recorder.event(
                cj,
                events.WARNING,
                "TooManyMissedTimes",
                "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew",
            )
            log.info("too many missed times", extra={"cronjob": codec.key_of(cj)})

        def requeue() -> float | None:
            return utils.next_schedule_delay(cj_with(cj, status), now, schedule)

        if scheduled is None:
            return cj, requeue(), changed
        deadline = cj.spec.starting_deadline_seconds
        if deadline is not None and scheduled + dt.timedelta(seconds=deadline) < now:
            self.recorder.event(
                cj,
                events.WARNING,
                "MissSchedule",
                f"Missed scheduled time to start a job: {utils.format_rfc1123z(scheduled)}",
            )
            return cj, requeue(), changed
        name = utils.job_name(cj, scheduled)
        if status.in_active_by_name(cj.metadata.namespace, name) or status.last_schedule_time == scheduled:
            return cj, requeue(), changed
        if cj.spec.concurrency_policy == "Forbid" and status.active:
            self.recorder.event(
                cj,
                events.NORMAL,
                "JobAlreadyActive",
                "Not starting job because prior execution is running and concurrency policy is Forbid",
            )
            return cj, requeue(), changed
        if cj.spec.concurrency_policy == "Replace":
            for ref in list(status.active):
                try:
                    raw = await self.client.get(_path(JOBS, ref.namespace, ref.name))
                except Exception as exc:
                    self.recorder.event(
                        cj, events.WARNING, "FailedGet", f"Get job: {podcontrol.error_message(exc)}"
                    )
                    raise
                meta = raw.get("metadata") or {}
                if not await self.delete_job_of(cj, status, meta.get("name", ""), meta.get("uid", "")):
                    raise RuntimeError(f"could not replace job {ref.namespace}/{ref.name}")
                changed = True
        body = utils.job_from_template(cj, scheduled)
        path = _path(JOBS, cj.metadata.namespace, "")
        try:
            # HIGH: when 50 CronJobs are due in the same second, the client's rate limit (20 qps
            # by default) makes requests wait; the starts go before status writes and Events.
            created = await self.client.create(path, body, priority=kubeclient.Priority.HIGH)
        except kubeclient.ApiError as exc:
            if podcontrol.has_status_cause(exc, podcontrol.NAMESPACE_TERMINATING_CAUSE):
                raise
            if exc.code != 409 or exc.reason != "AlreadyExists":
                self.recorder.event(
                    cj, events.WARNING, "FailedCreate", f"Error creating job: {podcontrol.error_message(exc)}"
                )
                raise
            # The name is taken: ours from a sync whose status write was lost, or someone else's.
            existing = await self.client.get(_path(JOBS, cj.metadata.namespace, name))
            meta = existing.get("metadata") or {}
            ours = any(
                ref.get("controller") and ref.get("uid") == cj.metadata.uid
                for ref in meta.get("ownerReferences") or []
            )
            if not ours or status.in_active(meta.get("uid", "")):
                return cj, requeue(), changed
            log.info("job already exists", extra={"cronjob": codec.key_of(cj), "job": name})
            created = existing
        except Exception as exc:
            self.recorder.event(
                cj, events.WARNING, "FailedCreate", f"Error creating job: {podcontrol.error_message(exc)}"
            )
            raise
        else:
            stamp = (created.get("metadata") or {}).get("creationTimestamp")
            if stamp:
                made = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
                JOB_CREATION_SKEW.observe(max((made - scheduled).total_seconds(), 0.0))
            self.recorder.event(
                cj, events.NORMAL, "SuccessfulCreate", f"Created job {created['metadata']['name']}"
            )
        status.active.append(utils.reference(created))
        status.last_schedule_time = scheduled
        return cj, requeue(), True

    async def cleanup_finished_jobs(
        self, cj: utils.CronJobView, status: utils.Status, jobs: list[utils.JobView]
    ) -> bool:
        """Delete the oldest finished Jobs beyond the history limits; whether `status` changed
        (upstream cleanupFinishedJobs)."""
        succeeded_limit = cj.spec.successful_jobs_history_limit
        failed_limit = cj.spec.failed_jobs_history_limit
        if succeeded_limit is None and failed_limit is None:
            return False
        changed = False
        for condition, limit in (("Complete", succeeded_limit), ("Failed", failed_limit)):
            if limit is None:
                continue
            finished = sorted(
                (j for j in jobs if utils.finished_condition(j) == condition), key=utils.by_start_time
            )
            for job in finished[: max(len(finished) - limit, 0)]:
                if await self.delete_job_of(cj, status, job.metadata.name, job.metadata.uid):
                    changed = True
        return changed

    async def delete_job_of(self, cj: utils.CronJobView, status: utils.Status, name: str, uid: str) -> bool:
        """Delete one of the CronJob's Jobs, its pods in the background; False (and a
        FailedDelete Event) when the API refused (upstream deleteJob)."""
        namespace = cj.metadata.namespace
        try:
            await self.client.delete(
                _path(JOBS, namespace, name),
                {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"},
            )
        except kubeclient.ApiError as exc:
            if not exc.not_found:
                self.recorder.event(
                    cj, events.WARNING, "FailedDelete", f"Deleted job: {podcontrol.error_message(exc)}"
                )
                log.error("error deleting job", extra={"cronjob": codec.key_of(cj), "job": name})
                return False
            # Gone already (our cache was behind): nothing to report, only the active list to fix.
            status.delete_from_active(uid)
            return True
        status.delete_from_active(uid)
        self.recorder.event(cj, events.NORMAL, "SuccessfulDelete", f"Deleted job {name}")
        return True

    async def get_cronjob(self, cj: utils.CronJobView) -> utils.CronJobView | None:
        try:
            raw = await self.client.request_bytes(
                "GET", _path(CRONJOBS, cj.metadata.namespace, cj.metadata.name)
            )
        except kubeclient.ApiError as exc:
            if exc.not_found:
                return None
            raise
        return codec.decode(raw, utils.CronJobView)

    async def write_status(self, key: str, cj: utils.CronJobView, status: utils.Status) -> None:
        """Replace the status on the resourceVersion the sync read (a conflict is retried
        with backoff, as upstream's UpdateStatus error); remember the result (ownwrites)."""
        rv = cj.metadata.resource_version
        raw = await self.client.request_bytes(
            "PATCH",
            _path(CRONJOBS, cj.metadata.namespace, cj.metadata.name, "status"),
            body=status.patch(rv),
            content_type=kubeclient.PATCH_TYPES["merge"],
        )
        self.own_writes.record(key, rv, codec.decode(raw, utils.CronJobView))


def cj_with(cj: utils.CronJobView, status: utils.Status) -> utils.CronJobView:
    """The CronJob as the sync has changed it so far (its status on the copy)."""
    return utils.CronJobView(
        metadata=cj.metadata,
        kind=cj.kind,
        api_version=cj.api_version,
        spec=cj.spec,
        status=utils.CronJobStatus(
            active=list(status.active),
            last_schedule_time=status.last_schedule_time,
            last_successful_time=status.last_successful_time,
        ),
    )


def build(ctx: runtime.Context) -> runtime.Reconcile:
    cjc = CronJobController(
        ctx.client,
        ctx.caches[CRONJOBS],
        ctx.caches[JOBS],
        ctx.enqueue,
        ctx.enqueue_after,
        ctx.recorder,
    )
    cjc.register()
    ctx.on_partitions_lost(cjc.own_writes.retain)
    return cjc.sync


SPEC = runtime.Spec(
    name="cronjob-controller",
    alias="cronjob",
    queue_name="cronjob",
    primary=CRONJOBS,
    views={CRONJOBS: utils.CronJobView, JOBS: utils.JobView},
    build=build,
    workers=5,
    workers_flag="concurrent-cron-job-syncs",  # upstream's spelling, not the alias's
    package=__package__,
)
