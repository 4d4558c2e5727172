"""The Job controller: runs a Job's pods to completion and tracks them in its status.

Upstream pkg/controller/job/job_controller.go (v1.32, default feature gates) on our runtime
(docs/runtime.md). Event handlers map changes to keys and keep the expectations:

- Job added / updated / deleted: its key; a finished or deleted Job also hands each of its
  pods still holding the tracking finalizer to the orphan-pod work (`cleanup_finalizers`).
- Pod added / updated / deleted: the Job its controllerRef names (creations, deletions and
  finalizer removals observed); an orphan: every Job whose selector matches it, and the
  orphan-pod work when it holds the tracking finalizer.

As upstream, a Job's key is queued at once for its creation, deletion and spec changes, and
after a batch period for pod events and status-only updates (enqueueSyncJobBatched), so one
sync takes in the pod changes of the period. Upstream's period is 1 s; ours is
`SYNC_JOB_BATCH_PERIOD`, 0.1 s (docs/controllers.md).

Orphan-pod work shares the Job controller's queue under keys `ORPHAN_POD_PREFIX +
<namespace>/<name>` (upstream runs a second queue): it removes the tracking finalizer from
a pod no unfinished Job controls. `keys()` lists them beside the Job keys, so a replica
that takes over a partition picks them up too.

The sync (`JobController.sync`) follows syncJob: read the Job; skip it when another
controller manages it (spec.managedBy) or it is finished; claim its pods (adopting orphans
adds the tracking finalizer); count newly finished pods; decide whether the Job fails
(podFailurePolicy FailJob, backoffLimit, activeDeadlineSeconds, maxFailedIndexes, failed
indexes) or meets its successPolicy; then either delete its active pods (finishing) or
create / delete pods towards min(parallelism, remaining completions) (`manage_job`) with
upstream's pod-failure backoff, or delete them all while suspended; finally write the
status and remove finalizers in upstream's order (`track_status`): finished pods' UIDs
into status.uncountedTerminatedPods, then their finalizers off (those two alongside the
creations of a Job short of pods, `_uncount`), then the counters, and only
then the Complete / Failed condition, after the interim SuccessCriteriaMet / FailureTarget
one, once no pod is uncounted or terminating. A timed retry comes back at the active
deadline or when the backoff of failed pods ends, never by polling.

Pure helpers live in `jobview.py`, `indexing.py`, `backoff.py` and `tracking.py`;
podFailurePolicy and successPolicy matching in `pod_failure_policy.py` and
`success_policy.py`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import msgspec
from kcm_shared import runtime
from kcm_shared.apimachinery import codec, gvr, selectors
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import controllerref, expectations, ownwrites, podcontrol, podranking, settle
from kcm_shared.runtime import cache, events

from kcm_controllers.job import (
    backoff,
    indexing,
    intervals,
    jobview,
    metrics,
    pod_failure_policy,
    podview,
    success_policy,
    tracking,
)
from kcm_controllers.job import gates as job_gates

log = logging.getLogger("kcm.job")

_A = TypeVar("_A")
_B = TypeVar("_B")

JOBS = gvr.Resource("batch", "v1", "jobs")
PODS = gvr.Resource("", "v1", "pods")
API_VERSION = "batch/v1"
KIND = "Job"
ORPHAN_POD_PREFIX = "orphan-pod:"  # ':' never occurs in a namespace name: no Job key starts so
# Upstream's syncJobBatchPeriod is 1 s: a Job whose pods finish at once then runs at most
# `parallelism` pods a second. A tenth of that still folds a busy Job's pod events into one sync
# (bench/job_pods.py: 121 status writes for 2,000 pods instead of 639, ratio 0.74-0.77 instead
# of 0.62-0.71) and refills the parallelism ten times sooner.
SYNC_JOB_BATCH_PERIOD = 0.1
# A sync that waits out a pod-failure backoff comes back no sooner than this (upstream's
# enqueueSyncJobWithDelay floors the delay at its batch period, 1 s): a backoff about to end
# is not polled in a burst of syncs. Upstream's 1 s stays here although our batch period is
# shorter: it is a floor on retries of pods that already failed, not on pod events.
BACKOFF_REQUEUE_FLOOR = 1.0
MAX_UNCOUNTED_PODS = 500  # UIDs in uncountedTerminatedPods at once (keeps status ~20 KB)
MAX_POD_CREATE_DELETE_PER_SYNC = 500
# Finalizer patches of one sync in flight at once: half the API client's requests
# (http1.DEFAULT_LIMIT), so the pod creations running beside them are not queued behind a
# hundred patches. Paired rounds of bench/job_pods.py's Job: 315 against 291 pods/s unbounded.
FINALIZER_PATCHES_IN_FLIGHT = 16
DEFAULT_BACKOFF_LIMIT = 6

JobView = jobview.JobView
Pod = podview.JobPodView


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class _RestartPolicy(codec.View):
    restart_policy: str = ""


@dataclass
class _Sync:
    """What one sync works out about a Job (upstream syncJobCtx); `status` is a private copy."""

    job: JobView
    status: jobview.JobStatus
    pods: list[Pod]
    active_pods: list[Pod]
    ready: int
    terminating: int
    uncounted_succeeded: set[str]
    uncounted_failed: set[str]
    expected_rm: set[str]
    record: metrics.SyncRecord
    succeeded: int = 0
    failed: int = 0
    finished: jobview.JobCondition | None = None
    new_backoff: backoff.Record = field(default_factory=backoff.Record)
    prev_succeeded_indexes: intervals.Intervals = field(default_factory=lambda: intervals.Intervals.of(()))
    succeeded_indexes: intervals.Intervals = field(default_factory=lambda: intervals.Intervals.of(()))
    failed_indexes: intervals.Intervals | None = None
    delayed_per_index: dict[int, Pod] = field(default_factory=dict)
    requeue_after: float | None = None
    # Completed and failed indexes in the status last written (or read), for the metrics.
    written_indexes: tuple[int, int] = (0, 0)

    def requeue(self, seconds: float) -> None:
        seconds = max(seconds, 0.0)
        self.requeue_after = seconds if self.requeue_after is None else min(self.requeue_after, seconds)


@dataclass
class _Counting:
    """What `track_status` counts in one sync, carried from its first writes to its last."""

    counts: dict[str, int]
    uncounted: dict[str, list[str]]
    with_finalizer: set[str]
    to_remove: list[Pod]
    needs_flush: bool
    reached_max: bool
    now: dt.datetime
    # Failed pods per podFailurePolicy action, counted once the status that records them is
    # written (upstream's recordJobPodFailurePolicyActions): a failed write counts nothing.
    by_action: dict[str, int] = field(default_factory=dict)
    remove_error: Exception | None = None


class JobController:
    """Handlers and sync of one process; the API client, pod control and clock are injected."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        jobs: cache.Cache[JobView],
        pods: cache.Cache[Pod],
        enqueue: Callable[[str], None],
        enqueue_after: Callable[[str, float], None],
        pod_control: podcontrol.PodControl,
        recorder: events.EventRecorder,
        *,
        now: Callable[[], dt.datetime] = _utcnow,
        gates: job_gates.Gates = job_gates.DEFAULTS,
    ) -> None:
        """`gates`: the feature gates upstream's Job controller reads (`gates.py`); with
        JobManagedBy off, spec.managedBy is ignored and every Job is this controller's, as
        upstream's managedByExternalController answers."""
        self.client = client
        self.jobs = jobs
        self.pods = pods
        self.enqueue = enqueue
        self.enqueue_after = enqueue_after
        self.pod_control = pod_control
        self.recorder = recorder
        self.now = now
        self.gates = gates
        self.expectations = expectations.ControllerExpectations()
        self.finalizer_expectations = tracking.FinalizerExpectations()
        self.backoff = backoff.Store()
        self.own_writes: ownwrites.OwnWrites[JobView] = ownwrites.OwnWrites()
        self._selectors: dict[str, tuple[str, selectors.LabelSelector]] = {}

    def external(self, job: JobView) -> str | None:
        """The other controller that manages `job` (spec.managedBy), None when it is ours."""
        return jobview.managed_by_external(job) if self.gates.managed_by else None

    def forget_unowned(self, owned: Callable[[str], bool]) -> None:
        """Drop what is kept for Jobs whose partition moved to another replica."""
        for memory in (self.expectations, self.finalizer_expectations, self.backoff, self.own_writes):
            memory.retain(owned)

    def register(self) -> None:
        controllerref.index_orphans(self.pods)
        self.jobs.add_handler(on_add=self.add_job, on_update=self.update_job, on_delete=self.delete_job)
        self.pods.add_handler(on_add=self.add_pod, on_update=self.update_pod, on_delete=self.delete_pod_final)

    def keys(self) -> Iterator[str]:
        """Every work key: each Job's, and each orphan pod's that still holds the finalizer."""
        for job in self.jobs.list():
            yield codec.key_of(job)
        for pod in self.pods.list():
            if tracking.has_tracking_finalizer(pod) and self._orphaned(pod):
                yield ORPHAN_POD_PREFIX + codec.key_of(pod)

    # --- lookups ---------------------------------------------------------------------------

    def selector(self, job: JobView) -> selectors.LabelSelector:
        """The parsed spec.selector, memoised per uid (immutable); raises SelectorError."""
        key = codec.key_of(job)
        memo = self._selectors.get(key)
        if memo is not None and memo[0] == job.metadata.uid:
            return memo[1]
        parsed = selectors.label_selector_from_dict(job.spec.selector)
        self._selectors[key] = (job.metadata.uid, parsed)
        return parsed

    def resolve(self, namespace: str, ref: codec.OwnerReference) -> JobView | None:
        return controllerref.resolve(self.jobs.get, namespace, ref, KIND)

    def pod_jobs(self, pod: Pod) -> list[JobView]:
        """Jobs whose selector matches an orphan pod (upstream getPodJobs)."""
        found = controllerref.selecting(
            self.jobs.list(pod.metadata.namespace), pod.metadata.labels, self.selector
        )
        if len(found) > 1:
            log.warning(
                "more than one job is selecting a pod",
                extra={"pod": codec.key_of(pod), "jobs": [codec.key_of(j) for j in found]},
            )
        return found

    def _orphaned(self, pod: Pod) -> bool:
        """Whether no unfinished Job of ours controls the pod (what the orphan work checks)."""
        ref = codec.controller_ref(pod)
        if ref is None:
            return True
        if ref.kind != KIND or ref.api_version != API_VERSION:
            return False
        job = self.resolve(pod.metadata.namespace, ref)
        return job is None or (self.external(job) is None and jobview.is_finished(job))

    # --- event handlers ---------------------------------------------------------------------

    def add_job(self, job: JobView) -> None:
        self.enqueue(codec.key_of(job))
        external = self.external(job)
        if external is not None:
            metrics.JOBS_BY_EXTERNAL_CONTROLLER.labels(external).inc()

    def enqueue_batched(self, key: str) -> None:
        """Sync the Job after the batch period (upstream enqueueSyncJobBatched)."""
        self.enqueue_after(key, SYNC_JOB_BATCH_PERIOD)

    def update_job(self, old: JobView, cur: JobView) -> None:
        if old.metadata.uid != cur.metadata.uid:
            self.delete_job(old)
        if old.metadata.uid == cur.metadata.uid and old.metadata.generation == cur.metadata.generation:
            self.enqueue_batched(codec.key_of(cur))
        else:
            self.enqueue(codec.key_of(cur))
        # A finished Job's pods should have lost the finalizer already: a backup.
        if jobview.is_finished(cur):
            self.cleanup_finalizers(cur)

    def delete_job(self, job: JobView) -> None:
        key = codec.key_of(job)
        self._selectors.pop(key, None)
        self.enqueue(key)
        self.cleanup_finalizers(job)

    def cleanup_finalizers(self, job: JobView) -> None:
        try:
            sel = self.selector(job)
        except selectors.SelectorError:
            return
        for pod in self.pods.list(job.metadata.namespace, sel):
            ref = codec.controller_ref(pod)
            if ref is not None and ref.uid == job.metadata.uid and tracking.has_tracking_finalizer(pod):
                self.enqueue(ORPHAN_POD_PREFIX + codec.key_of(pod))

    def add_pod(self, pod: Pod) -> None:
        metrics.record_terminated_with_finalizer(None, pod)
        if pod.metadata.deletion_timestamp is not None:
            # Seen first while already terminating (e.g. after a restart): never a creation.
            self.delete_pod(pod, final=False)
            return
        ref = codec.controller_ref(pod)
        if ref is not None:
            job = self.resolve(pod.metadata.namespace, ref)
            if job is None:
                return
            key = codec.key_of(job)
            self.expectations.creation_observed(key)
            self.enqueue_batched(key)
            return
        if tracking.has_tracking_finalizer(pod):
            self.enqueue(ORPHAN_POD_PREFIX + codec.key_of(pod))
        for job in self.pod_jobs(pod):
            self.enqueue_batched(codec.key_of(job))

    def update_pod(self, old: Pod, cur: Pod) -> None:
        metrics.record_terminated_with_finalizer(old, cur)
        if old.metadata.resource_version == cur.metadata.resource_version:
            return
        if cur.metadata.deletion_timestamp is not None:
            # Graceful deletion: a replacement can be made now, not once the kubelet is done.
            self.delete_pod(cur, final=False)
            return
        # Only the latest state counts: during an ownership change the finalizer may be added
        # and removed again, and both may collapse into one event.
        finalizer_removed = not tracking.has_tracking_finalizer(cur)
        cur_ref, old_ref = codec.controller_ref(cur), codec.controller_ref(old)
        if cur_ref is None and not finalizer_removed:
            self.enqueue(ORPHAN_POD_PREFIX + codec.key_of(cur))
        # The former and the current owner (not the Jobs that merely select an orphan) may be
        # waiting to see this pod's finalizer go.
        owners = {ref.uid for ref in (old_ref, cur_ref) if ref is not None} if finalizer_removed else set()

        def enqueue_job(job: JobView) -> None:
            key = codec.key_of(job)
            if job.metadata.uid in owners:
                self.finalizer_expectations.removal_observed(key, cur.metadata.uid)
            self.enqueue_batched(key)

        controllerref.route_update(old, cur, self.resolve, self.pod_jobs, enqueue_job)

    def delete_pod_final(self, pod: Pod) -> None:
        metrics.record_terminated_with_finalizer(pod, None)
        self.delete_pod(pod, final=True)

    def delete_pod(self, pod: Pod, *, final: bool) -> None:
        ref = codec.controller_ref(pod)
        has_finalizer = tracking.has_tracking_finalizer(pod)
        if ref is None:
            # It may have belonged to a Job until the garbage collector removed the reference.
            if has_finalizer:
                self.enqueue(ORPHAN_POD_PREFIX + codec.key_of(pod))
            return
        job = self.resolve(pod.metadata.namespace, ref)
        if job is None or jobview.is_finished(job):
            if has_finalizer:  # no sync of a Job will remove it
                self.enqueue(ORPHAN_POD_PREFIX + codec.key_of(pod))
            return
        key = codec.key_of(job)
        self.expectations.deletion_observed(key)
        # A final delete has no finalizer left; an update only when it was removed.
        if final or not has_finalizer:
            self.finalizer_expectations.removal_observed(key, pod.metadata.uid)
        self.enqueue_batched(key)

    # --- orphan pods ------------------------------------------------------------------------

    async def sync_orphan_pod(self, pod_key: str) -> None:
        """Remove the tracking finalizer from a pod no unfinished Job of ours controls."""
        pod = self.pods.get_key(pod_key)
        if pod is None or not tracking.has_tracking_finalizer(pod) or not self._orphaned(pod):
            return
        meta = pod.metadata
        try:
            await self.client.patch(
                kubeclient.resource_path(PODS.group, PODS.version, PODS.resource, meta.namespace, meta.name),
                tracking.remove_finalizer_patch(),
                "strategic",
            )
        except kubeclient.ApiError as exc:
            if not exc.not_found:
                raise

    # --- sync -------------------------------------------------------------------------------

    def _path(self, job: JobView) -> str:
        m = job.metadata
        return kubeclient.resource_path(JOBS.group, JOBS.version, JOBS.resource, m.namespace, m.name)

    async def pods_for_job(self, job: JobView, sel: selectors.LabelSelector) -> list[Pod]:
        """The Job's pods after adoption and release (getPodsForJob). Upstream hands every
        pod of the namespace to the claim; only those the Job controls and the orphans can
        come out of it, so the candidates are those two, found by index rather than by a
        walk over a namespace that keeps each finished pod. The Job's own pods that stopped
        matching are among them, and released."""
        uid = job.metadata.uid
        # Orphans without a reference to this Job: claiming one adopts it.
        owned, strangers = controllerref.candidates(self.pods, job)
        pods = await controllerref.claim(
            self.client,
            job,
            API_VERSION,
            KIND,
            sel,
            owned + strangers,
            PODS,
            controllerref.recheck(self.client, self._path(job), uid),
            finalizers=[tracking.JOB_TRACKING_FINALIZER],
        )
        if not strangers:
            return pods
        adopted = {p.metadata.uid for p in strangers}
        result = []
        for pod in pods:
            if pod.metadata.uid in adopted and not tracking.has_tracking_finalizer(pod):
                # The adoption patch added it; count the pod as the cache will show it.
                meta = msgspec.structs.replace(
                    pod.metadata, finalizers=tracking.with_tracking_finalizer(pod.metadata.finalizers)
                )
                pod = msgspec.structs.replace(pod, metadata=meta)
            result.append(pod)
        return result

    async def sync(self, key: str) -> runtime.Result | None:
        if key.startswith(ORPHAN_POD_PREFIX):
            await self.sync_orphan_pod(key[len(ORPHAN_POD_PREFIX) :])
            return None
        job = self.own_writes.latest(key, self.jobs.get_key(key))
        if job is None:
            self.expectations.delete_expectations(key)
            self.finalizer_expectations.delete(key)
            self.backoff.remove(key)
            return None
        external = self.external(job)
        if external is not None:
            log.debug(
                "skipping a job managed by another controller", extra={"job": key, "managedBy": external}
            )
            return None
        if jobview.is_finished(job):
            self.backoff.remove(key)
            return None
        mode = job.spec.completion_mode
        if mode is not None and mode not in (jobview.NON_INDEXED, jobview.INDEXED):
            self.recorder.event(
                job,
                events.WARNING,
                "UnknownCompletionMode",
                "Skipped Job sync because completion mode is unknown",
            )
            return None
        started, record, ok = self.now(), metrics.SyncRecord(), False
        try:
            outcome = await self._sync_job(key, self.gates.view(job), record)
            ok = True
            return outcome
        finally:
            record.observe(job, ok, (self.now() - started).total_seconds())

    async def _sync_job(self, key: str, job: JobView, record: metrics.SyncRecord) -> runtime.Result | None:
        try:
            sel = self.selector(job)
        except selectors.SelectorError as exc:
            # The API server validates selectors: retrying cannot make this one parse.
            log.error("invalid job selector", extra={"job": key, "error": str(exc)})
            return None
        # Expectations before listing pods: a pod that lands after this check waits for the next sync.
        satisfied = self.expectations.satisfied_expectations(key)
        pods = await self.pods_for_job(job, sel)
        c = self._context(key, job, pods, record)
        now = self.now()
        status = c.status
        if status.start_time is None and not jobview.suspended(job):
            status.start_time = now
        self._decide_finish(c, now)
        manage_error: Exception | None = None
        active = len(c.active_pods)
        suspend_changed = False
        counting: _Counting | None = None
        if c.finished is not None:
            deleted_ready, deleted, manage_error = await self.delete_active_pods(job, c.active_pods)
            if deleted != active or not satisfied:
                # Pods may be left, or not in the cache yet: not finished in this sync.
                c.finished = None
            active -= deleted
            c.terminating += deleted
            c.ready -= deleted_ready
        else:
            managed = False
            if satisfied and job.metadata.deletion_timestamp is None:
                if not jobview.suspended(job) and self._missing_pods(job, c) > 0:
                    # A Job short of pods is not finishing: its new pods and the counting of
                    # its finished ones touch different pods, so they go out together.
                    counting = self._count_finished(c, False)
                    (active, manage_error), _ = await _together(
                        self.manage_job(key, job, c, now), self._uncount(key, c, counting)
                    )
                else:
                    active, manage_error = await self.manage_job(key, job, c, now)
                managed = True
            completions = job.spec.completions
            if completions is None:
                # Any success completes a Job without completions, once nothing runs.
                complete = c.succeeded > 0 and active == 0
            else:
                complete = c.succeeded >= completions and active == 0
            if complete:
                # Upstream's newSuccessCondition gives a reason only with JobSuccessPolicy on.
                reached = ("CompletionsReached", "Reached expected number of succeeded pods")
                reason, message = reached if self.gates.success_policy else ("", "")
                c.finished = jobview.new_condition(jobview.SUCCESS_CRITERIA_MET, "True", reason, message, now)
            elif managed:
                suspend_changed = self._suspend_condition(job, status, now)
        # status.terminating is JobPodReplacementPolicy's field: absent with the gate off.
        terminating = c.terminating if self.gates.pod_replacement_policy else None
        needs_update = (
            suspend_changed
            or active != status.active
            or c.ready != status.ready
            or terminating != status.terminating
        )
        status.active = active
        status.ready = c.ready
        status.terminating = terminating
        if counting is None:
            await self.track_status(key, c, needs_update)
        else:
            counting.needs_flush |= needs_update
            await self._settle_counts(key, c, counting)
        if manage_error is not None:
            raise manage_error
        return runtime.Result(requeue_after=c.requeue_after) if c.requeue_after is not None else None

    def _context(self, key: str, job: JobView, pods: list[Pod], record: metrics.SyncRecord) -> _Sync:
        uncounted = job.status.uncounted_terminated_pods or jobview.UncountedTerminatedPods()
        active_pods = [p for p in pods if podranking.is_pod_active(p)]
        c = _Sync(
            job=job,
            status=msgspec.convert(msgspec.to_builtins(job.status), jobview.JobStatus),
            pods=pods,
            active_pods=active_pods,
            ready=sum(1 for p in active_pods if podranking.is_pod_ready(p)),
            terminating=sum(1 for p in pods if jobview.is_pod_terminating(p)),
            uncounted_succeeded=set(uncounted.succeeded),
            uncounted_failed=set(uncounted.failed),
            expected_rm=self.finalizer_expectations.expected(key),
            record=record,
        )
        new_succeeded = self._valid_pods(c, c.uncounted_succeeded, lambda p: p.status.phase == "Succeeded")
        new_failed = self._valid_pods(c, c.uncounted_failed, lambda p: jobview.is_pod_failed(p, job))
        c.succeeded = job.status.succeeded + len(new_succeeded) + len(c.uncounted_succeeded)
        c.failed = job.status.failed + self._counted_failures(job, new_failed) + len(c.uncounted_failed)
        c.new_backoff = backoff.new_record(
            self.backoff.get(key), new_succeeded, new_failed, sidecars=self.gates.sidecar_containers
        )
        if jobview.is_indexed(job):
            completions = job.spec.completions or 0
            c.written_indexes = (
                intervals.Intervals.parse(job.status.completed_indexes, completions).total(),
                intervals.Intervals.parse(job.status.failed_indexes, completions).total(),
            )
        return c

    def _finished_time(self, pod: Pod) -> dt.datetime:
        return backoff.finished_time(pod, sidecars=self.gates.sidecar_containers)

    def _valid_pods(self, c: _Sync, uncounted: set[str], keep: Callable[[Pod], bool]) -> list[Pod]:
        """Pods with the finalizer not yet counted (and, Indexed, with a valid index) that `keep` takes."""
        completions = c.job.spec.completions or 0
        result = []
        for pod in c.pods:
            uid = pod.metadata.uid
            if not tracking.has_tracking_finalizer(pod) or uid in uncounted or uid in c.expected_rm:
                continue
            if jobview.is_indexed(c.job):
                ix = indexing.completion_index(pod.metadata.annotations)
                if ix == indexing.UNKNOWN or ix >= completions:
                    continue
            if keep(pod):
                result.append(pod)
        return result

    @staticmethod
    def _counted_failures(job: JobView, failed: Sequence[Pod]) -> int:
        policy = job.spec.pod_failure_policy
        if policy is None:
            return len(failed)
        return sum(1 for p in failed if pod_failure_policy.match(policy, p).count_failed)

    def _decide_finish(self, c: _Sync, now: dt.datetime) -> None:
        """Set c.finished when the Job fails or meets its success policy in this sync."""
        job, status = c.job, c.status
        success = jobview.find_condition(job.status.conditions, jobview.SUCCESS_CRITERIA_MET)
        if success is not None and success.status == "True":
            c.finished = success
        # Once the success criteria were met, no pod failure can fail the Job any more.
        if c.finished is None:
            target = jobview.find_condition(job.status.conditions, jobview.FAILURE_TARGET)
            if target is not None and target.status == "True":
                c.finished = jobview.new_condition(jobview.FAILED, "True", target.reason, target.message, now)
            elif (message := self._fail_job_message(job, c.pods)) is not None:
                c.finished = jobview.new_condition(
                    jobview.FAILURE_TARGET, "True", "PodFailurePolicy", message, now
                )
        if c.finished is None:
            limit = job.spec.backoff_limit if job.spec.backoff_limit is not None else DEFAULT_BACKOFF_LIMIT
            deadline = job.spec.active_deadline_seconds
            if c.failed > limit or self._past_backoff_limit_on_failure(job, c.pods, limit):
                c.finished = self._failure(
                    "BackoffLimitExceeded", "Job has reached the specified backoff limit", now
                )
            elif self._past_deadline(job, status, now):
                c.finished = self._failure(
                    "DeadlineExceeded", "Job was active longer than specified deadline", now
                )
            elif deadline is not None and not jobview.suspended(job) and status.start_time is not None:
                c.requeue(deadline - (now - status.start_time).total_seconds())
        if not jobview.is_indexed(job):
            return
        completions = job.spec.completions or 0
        c.prev_succeeded_indexes, c.succeeded_indexes = indexing.succeeded_indexes(job, c.pods)
        c.succeeded = c.succeeded_indexes.total()
        if jobview.has_backoff_limit_per_index(job):
            c.failed_indexes = failed = indexing.failed_indexes(job, c.pods)
            if c.finished is None:
                most = job.spec.max_failed_indexes
                if most is not None and failed.total() > most:
                    c.finished = self._failure(
                        "MaxFailedIndexesExceeded",
                        "Job has exceeded the specified maximal number of failed indexes",
                        now,
                    )
                elif failed.total() > 0 and failed.total() + c.succeeded_indexes.total() >= completions:
                    c.finished = self._failure("FailedIndexes", "Job has failed indexes", now)
            c.delayed_per_index = self._delayed_per_index(c)
        if c.finished is None:
            message = success_policy.match(job.spec.success_policy, completions, c.succeeded_indexes)
            if message is not None:
                c.finished = jobview.new_condition(
                    jobview.SUCCESS_CRITERIA_MET, "True", "SuccessPolicy", message, now
                )

    @staticmethod
    def _failure(reason: str, message: str, now: dt.datetime) -> jobview.JobCondition:
        # With JobManagedBy and JobPodReplacementPolicy on (1.32's defaults) the Failed
        # condition waits for the pods to terminate behind an interim FailureTarget.
        return jobview.new_condition(jobview.FAILURE_TARGET, "True", reason, message, now)

    @staticmethod
    def _fail_job_message(job: JobView, pods: Sequence[Pod]) -> str | None:
        policy = job.spec.pod_failure_policy
        if policy is None:
            return None
        for pod in pods:
            if jobview.is_pod_failed(pod, job):
                message = pod_failure_policy.match(policy, pod).message
                if message is not None:
                    return message
        return None

    @staticmethod
    def _past_backoff_limit_on_failure(job: JobView, pods: Sequence[Pod], limit: int) -> bool:
        """With restartPolicy OnFailure, container restarts of running pods count as failures."""
        if msgspec.json.decode(job.spec.template.spec, type=_RestartPolicy).restart_policy != "OnFailure":
            return False
        restarts = 0
        for pod in pods:
            if pod.status.phase in ("Running", "Pending"):
                restarts += sum(s.restart_count for s in pod.status.init_container_statuses)
                restarts += sum(s.restart_count for s in pod.status.container_statuses)
        return restarts > 0 if limit == 0 else restarts >= limit

    @staticmethod
    def _past_deadline(job: JobView, status: jobview.JobStatus, now: dt.datetime) -> bool:
        deadline = job.spec.active_deadline_seconds
        if deadline is None or status.start_time is None or jobview.suspended(job):
            return False
        return (now - status.start_time).total_seconds() >= deadline

    def _delayed_per_index(self, c: _Sync) -> dict[int, Pod]:
        """Per index, the failed pod whose finalizer stays until its replacement exists, so the
        replacement can carry the index's failure count (getPodsWithDelayedDeletionPerIndex)."""
        active = indexing.indexes_of(c.active_pods)
        failed_indexes = c.failed_indexes or intervals.Intervals.of(())
        result: dict[int, Pod] = {}
        for pod in self._valid_pods(c, set(), lambda p: jobview.is_pod_failed(p, c.job)):
            ix = indexing.completion_index(pod.metadata.annotations)
            if ix in c.succeeded_indexes or ix in failed_indexes or ix in active:
                continue
            last = result.get(ix)
            if last is None or (
                indexing.absolute_failure_count(last) <= indexing.absolute_failure_count(pod)
                and not self._finished_time(pod) < self._finished_time(last)
            ):
                result[ix] = pod
        return result

    def _suspend_condition(self, job: JobView, status: jobview.JobStatus, now: dt.datetime) -> bool:
        """Set the Suspended condition (True while suspended, False once resumed), with its Event."""
        if jobview.suspended(job):
            status.conditions, changed = jobview.ensure_condition(
                status.conditions, jobview.SUSPENDED, "True", "JobSuspended", "Job suspended", now
            )
            if changed:
                self.recorder.event(job, events.NORMAL, "Suspended", "Job suspended")
            return changed
        status.conditions, changed = jobview.ensure_condition(
            status.conditions, jobview.SUSPENDED, "False", "JobResumed", "Job resumed", now
        )
        if changed:
            self.recorder.event(job, events.NORMAL, "Resumed", "Job resumed")
            # activeDeadlineSeconds counts continuous activity: the clock starts again.
            status.start_time = now
        return changed

    # --- pods -------------------------------------------------------------------------------

    async def manage_job(
        self, key: str, job: JobView, c: _Sync, now: dt.datetime
    ) -> tuple[int, Exception | None]:
        """Create or delete pods towards the wanted number of active ones (manageJob);
        returns the active count it leaves and the first error."""
        active = len(c.active_pods)
        c.record.action = metrics.TRACKING
        if jobview.suspended(job):
            doomed = indexing.active_pods_for_removal(job, c.active_pods, active)
            c.record.action = metrics.PODS_DELETED
            self.expectations.expect_deletions(key, len(doomed))
            ready, removed, error = await self.delete_job_pods(key, job, doomed)
            c.terminating += removed
            c.ready -= ready
            return active - removed, error
        want = self._wanted_active(job, c)
        doomed = indexing.active_pods_for_removal(job, c.active_pods, max(0, active - want))
        doomed = doomed[:MAX_POD_CREATE_DELETE_PER_SYNC]
        if doomed:
            # Deletions take precedence: a sync either deletes or creates, never both.
            c.record.action = metrics.PODS_DELETED
            self.expectations.expect_deletions(key, len(doomed))
            ready, removed, error = await self.delete_job_pods(key, job, doomed)
            c.terminating += removed
            c.ready -= ready
            return active - removed, error
        diff = self._missing_pods(job, c)
        if diff <= 0:
            return active, None
        # Upstream labels a sync that would create but waits out a backoff "pods_created" too.
        c.record.action = metrics.PODS_CREATED
        if not jobview.has_backoff_limit_per_index(job):
            wait = backoff.remaining(c.new_backoff, now)
            if wait > 0:
                c.requeue(max(wait, BACKOFF_REQUEUE_FLOOR))
                return active, None
        diff = min(diff, MAX_POD_CREATE_DELETE_PER_SYNC)
        indexes: list[int] = []
        if jobview.is_indexed(job):
            indexes = self._pending_indexes(job, c, diff)
            if jobview.has_backoff_limit_per_index(job):
                indexes, wait = self._creatable_indexes(indexes, c.delayed_per_index, now)
                if wait > 0:
                    c.requeue(max(wait, BACKOFF_REQUEUE_FLOOR))
                    return active, None
            diff = len(indexes)
        if diff == 0:
            return active, None
        created, error = await self.create_pods(key, job, c, diff, indexes)
        return active + created, error

    @staticmethod
    def _wanted_active(job: JobView, c: _Sync) -> int:
        parallelism = job.spec.parallelism if job.spec.parallelism is not None else 1
        completions = job.spec.completions
        if completions is None:
            # Without completions, after a first success whatever runs is left to finish.
            return len(c.active_pods) if c.succeeded > 0 else parallelism
        return max(0, min(completions - c.succeeded, parallelism))

    def _missing_pods(self, job: JobView, c: _Sync) -> int:
        """How many pods short of the wanted active ones the Job is (when positive)."""
        terminating = c.terminating if jobview.only_replace_failed_pods(job) else 0
        return self._wanted_active(job, c) - terminating - len(c.active_pods)

    def _pending_indexes(self, job: JobView, c: _Sync, count: int) -> list[int]:
        taken = c.succeeded_indexes.with_indexes(sorted(indexing.indexes_of(c.active_pods)))
        if jobview.only_replace_failed_pods(job):
            terminating = indexing.indexes_of(p for p in c.pods if jobview.is_pod_terminating(p))
            taken = taken.with_indexes(sorted(terminating))
        if c.failed_indexes is not None:
            taken = taken.with_indexes(list(c.failed_indexes))
        return indexing.first_pending_indexes(taken, count, job.spec.completions or 0)

    @staticmethod
    def _creatable_indexes(
        indexes: list[int], delayed: dict[int, Pod], now: dt.datetime
    ) -> tuple[list[int], float]:
        """The indexes whose backoff is over, or none and the shortest wait left."""
        ready: list[int] = []
        shortest: float | None = None
        for ix in indexes:
            wait = backoff.remaining_for_index(delayed.get(ix), now)
            if wait == 0:
                ready.append(ix)
            elif shortest is None or wait < shortest:
                shortest = wait
        return (ready, 0.0) if ready else (ready, shortest or 0.0)

    async def create_pods(
        self, key: str, job: JobView, c: _Sync, count: int, indexes: list[int]
    ) -> tuple[int, Exception | None]:
        """Create `count` pods (one per index of `indexes` when Indexed) in slow-start
        batches; returns how many were created and the first error."""
        template = job.spec.template
        meta = template.metadata
        finalizers = tracking.with_tracking_finalizer(meta.finalizers)
        ref = controllerref.new_controller_ref(job, API_VERSION, KIND)
        namespace = job.metadata.namespace
        indexed_spec = None
        if indexes:
            indexed_spec = indexing.with_index_env(msgspec.json.decode(template.spec))
        todo = iter(indexes)
        attempts = 0

        async def create() -> None:
            nonlocal attempts
            attempts += 1
            generate_name = None
            pod_template = podcontrol.PodTemplate(
                metadata=podcontrol.TemplateMeta(meta.labels, meta.annotations, finalizers),
                spec=template.spec,
            )
            if indexed_spec is not None:
                index = next(todo)
                annotations = dict(meta.annotations)
                annotations[indexing.COMPLETION_INDEX] = str(index)
                labels = {**meta.labels, indexing.COMPLETION_INDEX: str(index)}
                if jobview.has_backoff_limit_per_index(job):
                    failures, ignored = indexing.new_failure_counts(job, c.delayed_per_index.get(index))
                    annotations[indexing.INDEX_FAILURE_COUNT] = str(failures)
                    if ignored > 0:
                        annotations[indexing.INDEX_IGNORED_FAILURE_COUNT] = str(ignored)
                spec = dict(indexed_spec)
                spec["hostname"] = f"{job.metadata.name}-{index}"
                pod_template = podcontrol.PodTemplate(
                    metadata=podcontrol.TemplateMeta(labels, annotations, finalizers),
                    spec=msgspec.Raw(msgspec.json.encode(spec)),
                )
                generate_name = indexing.generate_name(job.metadata.name, index)
            await self.pod_control.create_pods(namespace, pod_template, job, ref, generate_name=generate_name)

        created, error = await podcontrol.create_in_batches(count, create, self.expectations, key)
        # Upstream tells replacements from new pods only with JobPodReplacementPolicy on.
        replaced = (c.failed, c.terminating) if self.gates.pod_replacement_policy else (0, 0)
        metrics.record_pods_created(job, *replaced, created, attempts - created)
        return created, error

    async def delete_job_pods(
        self, key: str, job: JobView, pods: Sequence[Pod]
    ) -> tuple[int, int, Exception | None]:
        """Take the finalizer off each pod and delete it (deleteJobPods); returns (ready pods
        deleted, pods deleted, first error)."""

        async def one(pod: Pod) -> None:
            meta = pod.metadata
            path = kubeclient.resource_path(
                PODS.group, PODS.version, PODS.resource, meta.namespace, meta.name
            )
            if tracking.has_tracking_finalizer(pod):
                try:
                    await self.client.patch(path, tracking.remove_finalizer_patch(), "strategic")
                except Exception as exc:
                    raise RuntimeError(f"removing completion finalizer: {exc}") from exc
            await self.pod_control.delete_pod(meta.namespace, meta.name, job)

        settled = await settle.each(pods, one)
        for _ in settled.raised:  # its delete event will never come
            self.expectations.deletion_observed(key)
        ready = sum(1 for pod in settled.done if podranking.is_pod_ready(pod))
        return ready, len(settled.done), settled.error

    async def delete_active_pods(
        self, job: JobView, pods: Sequence[Pod]
    ) -> tuple[int, int, Exception | None]:
        """Delete a finishing Job's active pods, leaving their finalizers for the tracking."""
        settled = await settle.each(
            pods, lambda p: self.pod_control.delete_pod(p.metadata.namespace, p.metadata.name, job)
        )
        ready = sum(1 for pod in settled.done if podranking.is_pod_ready(pod))
        return ready, len(settled.done), settled.error

    async def remove_finalizers(self, key: str, pods: Sequence[Pod]) -> tuple[set[str], Exception | None]:
        """Take the tracking finalizer off `pods`; returns the UIDs done (a pod already gone
        counts as done) and the first error."""
        self.finalizer_expectations.expect_removed(key, (p.metadata.uid for p in pods))

        in_flight = asyncio.Semaphore(FINALIZER_PATCHES_IN_FLIGHT)

        async def one(pod: Pod) -> None:
            meta = pod.metadata
            path = kubeclient.resource_path(
                PODS.group, PODS.version, PODS.resource, meta.namespace, meta.name
            )
            async with in_flight:
                await self.client.patch(path, tracking.remove_finalizer_patch(), "strategic")

        settled = await settle.each(pods, one)
        for pod in settled.raised:  # no update will show the removal: stop expecting it
            self.finalizer_expectations.removal_observed(key, pod.metadata.uid)
        return {pod.metadata.uid for pod in settled.done}, settled.error

    # --- status -----------------------------------------------------------------------------

    async def track_status(self, key: str, c: _Sync, needs_flush: bool) -> None:
        """Count finished pods through uncountedTerminatedPods and their finalizers, then
        finish the Job (trackJobStatusAndRemoveFinalizers)."""
        t = self._count_finished(c, needs_flush)
        await self._uncount(key, c, t)
        await self._settle_counts(key, c, t)

    def _count_finished(self, c: _Sync, needs_flush: bool) -> _Counting:
        """Which finished pods to count and release, and the status that records them."""
        job, status = c.job, c.status
        indexed = jobview.is_indexed(job)
        completions = job.spec.completions or 0
        pods = c.pods
        if indexed:
            pods = sorted(pods, key=lambda p: indexing.completion_index(p.metadata.annotations))
        with_finalizer = {
            p.metadata.uid
            for p in pods
            if tracking.has_tracking_finalizer(p) and p.metadata.uid not in c.expected_rm
        }
        uncounted_status = status.uncounted_terminated_pods or jobview.UncountedTerminatedPods()
        uncounted = {"succeeded": list(uncounted_status.succeeded), "failed": list(uncounted_status.failed)}
        counts = {"succeeded": status.succeeded, "failed": status.failed}
        if tracking.clean_uncounted_without_finalizers(counts, uncounted, with_finalizer):
            needs_flush = True
        to_remove: list[Pod] = []
        new_indexes: list[int] = []
        by_action: dict[str, int] = {}
        reached_max = False
        policy = job.spec.pod_failure_policy
        for pod in pods:
            uid = pod.metadata.uid
            if not tracking.has_tracking_finalizer(pod) or uid in c.expected_rm:
                continue  # counted in an earlier sync
            failed = jobview.is_pod_failed(pod, job)
            if not self._can_remove_finalizer(c, pod, failed):
                continue
            to_remove.append(pod)
            ix = indexing.completion_index(pod.metadata.annotations)
            if pod.status.phase == "Succeeded" and uid not in c.uncounted_failed:
                if indexed:
                    # The index is enough not to count a success twice.
                    if ix != indexing.UNKNOWN and ix < completions and ix not in c.prev_succeeded_indexes:
                        new_indexes.append(ix)
                        needs_flush = True
                elif uid not in c.uncounted_succeeded:
                    uncounted["succeeded"].append(uid)
                    needs_flush = True
            elif failed or (c.finished is not None and c.finished.type != jobview.SUCCESS_CRITERIA_MET):
                # A finishing Job counts every pod it did not see succeed as failed.
                valid = not indexed or (ix != indexing.UNKNOWN and ix < completions)
                if uid not in c.uncounted_failed and valid:
                    count = True
                    if policy is not None:
                        match = pod_failure_policy.match(policy, pod)
                        if match.action is not None:
                            by_action[match.action] = by_action.get(match.action, 0) + 1
                        count = match.count_failed
                    if count:
                        uncounted["failed"].append(uid)
                        needs_flush = True
            if (
                len(new_indexes) + len(uncounted["succeeded"]) + len(uncounted["failed"])
                >= MAX_UNCOUNTED_PODS
            ):
                # Bounded status size, and a big Job does not starve the others: the writes
                # below bring it back for the rest.
                reached_max = True
                break
        if indexed:
            c.succeeded_indexes = c.succeeded_indexes.with_indexes(sorted(new_indexes))
            text = str(c.succeeded_indexes)
            if text != status.completed_indexes:
                needs_flush = True
            counts["succeeded"] = c.succeeded_indexes.total()
            status.completed_indexes = text
            failed_text = str(c.failed_indexes) if c.failed_indexes is not None else None
            if failed_text != status.failed_indexes:
                status.failed_indexes = failed_text
                needs_flush = True
        now = self.now()
        if c.finished is not None and c.finished.type == jobview.FAILURE_TARGET:
            # The interim condition records why before finalizers let the pods go.
            status.conditions = [*status.conditions, c.finished]
            needs_flush = True
            c.finished = jobview.new_condition(
                jobview.FAILED, "True", c.finished.reason, c.finished.message, now
            )
        if c.finished is not None and c.finished.type == jobview.SUCCESS_CRITERIA_MET:
            met = jobview.find_condition(status.conditions, jobview.SUCCESS_CRITERIA_MET)
            if met is None or met.status != "True":
                status.conditions = [*status.conditions, c.finished]
                needs_flush = True
            c.finished = jobview.new_condition(
                jobview.COMPLETE, "True", c.finished.reason, c.finished.message, now
            )

        return _Counting(
            counts, uncounted, with_finalizer, to_remove, needs_flush, reached_max, now, by_action
        )

    async def _uncount(self, key: str, c: _Sync, t: _Counting) -> None:
        """1. The new uncounted UIDs (and interim conditions) are stored before any finalizer
        goes; 2. the finalizers go. A failed removal is kept in `t` for `_settle_counts`."""
        if t.needs_flush:
            await self.write_status(key, c, t.counts, t.uncounted)
            self.backoff.update(key, c.new_backoff)
            t.needs_flush = False
        for action, n in t.by_action.items():
            metrics.POD_FAILURES_HANDLED.labels(action).inc(n)
        if t.to_remove:
            done, t.remove_error = await self.remove_finalizers(key, t.to_remove)
            t.with_finalizer -= done

    async def _settle_counts(self, key: str, c: _Sync, t: _Counting) -> None:
        """3. The pods whose finalizer is gone move to the counters; the Job finishes once
        nothing is left uncounted."""
        counts, uncounted = t.counts, t.uncounted
        if tracking.clean_uncounted_without_finalizers(counts, uncounted, t.with_finalizer):
            t.needs_flush = True
        if t.remove_error is not None:
            if t.needs_flush:
                await self.write_status(key, c, counts, uncounted)
            raise t.remove_error
        finished = not t.reached_max and self._enact_finished(c, uncounted, t.now)
        if finished or t.needs_flush:
            await self.write_status(key, c, counts, uncounted)
        if finished:
            assert c.finished is not None
            self._record_finished(c.job, counts["succeeded"], c.finished)

    @staticmethod
    def _can_remove_finalizer(c: _Sync, pod: Pod, failed: bool) -> bool:
        if (
            c.job.metadata.deletion_timestamp is not None
            or c.finished is not None
            or pod.status.phase == "Succeeded"
        ):
            return True
        if not failed:
            return False
        if jobview.has_backoff_limit_per_index(c.job):
            ix = indexing.completion_index(pod.metadata.annotations)
            delayed = c.delayed_per_index.get(ix)
            if delayed is not None and delayed.metadata.uid == pod.metadata.uid:
                return False  # kept until its replacement carries the index's failure count
        return True

    def _enact_finished(self, c: _Sync, uncounted: dict[str, list[str]], now: dt.datetime) -> bool:
        """Add the Complete or Failed condition once no pod is uncounted or terminating."""
        if c.finished is None or uncounted["succeeded"] or uncounted["failed"] or c.terminating > 0:
            return False
        cond = c.finished
        c.status.conditions, _ = jobview.ensure_condition(
            c.status.conditions, cond.type, cond.status, cond.reason, cond.message, now
        )
        if cond.type == jobview.COMPLETE:
            c.status.completion_time = now
        return True

    def _record_finished(self, job: JobView, succeeded: int, cond: jobview.JobCondition) -> None:
        mode = metrics.completion_mode(job)
        if cond.type == jobview.COMPLETE:
            completions = job.spec.completions
            if completions is not None and succeeded > completions:
                self.recorder.event(
                    job,
                    events.WARNING,
                    "TooManySucceededPods",
                    "Too many succeeded pods running after completion count reached",
                )
            self.recorder.event(job, events.NORMAL, "Completed", "Job completed")
            metrics.JOB_FINISHED.labels(mode, "succeeded", cond.reason).inc()
        else:
            self.recorder.event(job, events.WARNING, cond.reason, cond.message)
            metrics.JOB_FINISHED.labels(mode, "failed", cond.reason).inc()

    async def write_status(
        self, key: str, c: _Sync, counts: dict[str, int], uncounted: dict[str, list[str]]
    ) -> None:
        """Write the status with the resourceVersion last read or written: a conflict means
        someone else wrote in between, and the sync starts again from their version."""
        status = c.status
        old_succeeded, old_failed = status.succeeded, status.failed
        status.succeeded, status.failed = counts["succeeded"], counts["failed"]
        status.uncounted_terminated_pods = jobview.UncountedTerminatedPods(
            list(uncounted["succeeded"]), list(uncounted["failed"])
        )
        replaced = c.job.metadata.resource_version
        body = {"metadata": {"resourceVersion": replaced}, "status": jobview.status_body(status)}
        raw = await self.client.request_bytes(
            "PATCH", self._path(c.job) + "/status", body=body, content_type=kubeclient.PATCH_TYPES["merge"]
        )
        written = codec.decode(raw, JobView)
        self.own_writes.record(key, replaced, written)
        c.job = msgspec.structs.replace(c.job, metadata=written.metadata)
        mode = metrics.completion_mode(c.job)
        if status.succeeded > old_succeeded:
            metrics.POD_FINISHED.labels(mode, "succeeded").inc(status.succeeded - old_succeeded)
        if status.failed > old_failed:
            metrics.POD_FINISHED.labels(mode, "failed").inc(status.failed - old_failed)
        if jobview.is_indexed(c.job):
            # The intervals these status fields were written from (`_count_finished`).
            completed = c.succeeded_indexes.total()
            failed = c.failed_indexes.total() if c.failed_indexes is not None else 0
            metrics.record_finished_indexes(
                c.job, completed - c.written_indexes[0], failed - c.written_indexes[1]
            )
            c.written_indexes = (completed, failed)


async def _together(first: Awaitable[_A], second: Awaitable[_B]) -> tuple[_A, _B]:
    """Both results once both are done; an error of either is raised only then, so neither
    outlives the sync."""
    a, b = await asyncio.gather(first, second, return_exceptions=True)
    if isinstance(a, BaseException):
        raise a
    if isinstance(b, BaseException):
        raise b
    return a, b


def build(ctx: runtime.Context) -> runtime.Reconcile:
    jc = JobController(
        ctx.client,
        ctx.caches[JOBS],
        ctx.caches[PODS],
        ctx.enqueue,
        ctx.enqueue_after,
        podcontrol.RealPodControl(ctx.client, ctx.recorder),
        ctx.recorder,
        gates=job_gates.Gates.from_args(ctx.args),
    )
    jc.register()
    ctx.keys = jc.keys
    ctx.on_partitions_lost(jc.forget_unowned)
    return jc.sync


SPEC = runtime.Spec(
    name="job-controller",
    alias="job",
    queue_name="job",
    primary=JOBS,
    views={JOBS: JobView, PODS: podview.JobPodView},
    build=build,
    workers=5,
    # Upstream's DefaultJobApiBackOff and MaxJobApiBackOff, for both of its queues: a Job
    # refused by a quota is back within a minute of the quota being raised.
    retry_backoff=(1.0, 60.0),
    retry_bucket=False,
    package=__package__,
)
