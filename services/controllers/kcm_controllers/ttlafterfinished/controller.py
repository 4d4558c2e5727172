"""The TTL-after-finished controller: deletes finished Jobs once their TTL has passed.

Upstream pkg/controller/ttlafterfinished/ttlafterfinished_controller.go on our runtime
(docs/runtime.md); the TTL arithmetic is `ttl.py`, its metric upstream's
pkg/controller/ttlafterfinished/metrics.

Wiring. The Jobs cache enqueues a Job's key when it is added or changed while it is not being
deleted, has `spec.ttlSecondsAfterFinished` and has finished (a True Complete or Failed
condition). A reconcile reads the Job from the cache and ignores it when it is gone, being
deleted, unfinished or without a TTL. While the TTL (counted from the finish condition's
lastTransitionTime) has not run out, the key comes back when it does
(`runtime.Result(requeue_after=...)`, which survives restarts and hand-overs): nothing polls.
Once it has run out, the Job is read again from the API server, because the cached TTL may be
stale (a user may just have raised it); only if the fresh Job has expired too is it deleted,
with propagation Foreground (its pods go first, through the garbage collector) and a
precondition on the fresh Job's uid, so a Job re-created under the same name is never deleted
for its predecessor's TTL. `ttl_after_finished_controller_job_deletion_duration_seconds`
observes how late after its expiry each Job was deleted.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

import prometheus_client
from kcm_shared import runtime
from kcm_shared.apimachinery import codec, gvr
from kcm_shared.client import kubeclient
from kcm_shared.runtime import cache

from kcm_controllers.ttlafterfinished import ttl

log = logging.getLogger("kcm.ttl-after-finished")

JOBS = gvr.Resource("batch", "v1", "jobs")

JOB_DELETION_DURATION = prometheus_client.Histogram(
    "ttl_after_finished_controller_job_deletion_duration_seconds",
    "The time it took to delete the job since it became eligible for deletion",
    buckets=[0.1 * 2**i for i in range(14)],  # upstream's: 100 ms to ~27 min
)


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class TTLAfterFinishedController:
    """Handlers and sync of one process; the API client and the clock are injected."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        jobs: cache.Cache[ttl.JobView],
        enqueue: Callable[[str], None],
        *,
        now: Callable[[], dt.datetime] = _utcnow,
    ) -> None:
        self.client = client
        self.jobs = jobs
        self.enqueue = enqueue
        self.now = now

    def register(self) -> None:
        # A deleted Job needs nothing: upstream has no delete handler either.
        self.jobs.add_handler(on_add=self._changed, on_update=lambda _old, new: self._changed(new))

    def _changed(self, job: ttl.JobView) -> None:
        if job.metadata.deletion_timestamp is None and ttl.needs_cleanup(job):
            self.enqueue(codec.key_of(job))

    def _expiry(self, job: ttl.JobView) -> tuple[float, dt.datetime] | None:
        """Seconds until `job` expires (<= 0: it has) and when; None when it is not to be
        cleaned up at all. Raises ttl.TTLError for a finished Job without a finish time."""
        if job.metadata.deletion_timestamp is not None or not ttl.needs_cleanup(job):
            return None
        now = self.now()
        left, expire_at, in_future = ttl.time_left(job, now)
        if in_future:
            log.info(
                "Warning: Found Job finished in the future. This is likely due to time skew in the "
                "cluster. Job cleanup will be deferred.",
                extra={"job": codec.key_of(job)},
            )
        log.debug(
            "Found Job finished",
            extra={
                "job": codec.key_of(job),
                "remainingTTL": left.total_seconds(),
                "deadlineTTL": str(expire_at),
            },
        )
        return left.total_seconds(), expire_at

    async def reconcile(self, key: str) -> runtime.Result | None:
        log.debug("Checking if Job is ready for cleanup", extra={"job": key})
        cached = self.jobs.get_key(key)
        if cached is None:
            return None
        expiry = self._expiry(cached)
        if expiry is None:
            return None
        if expiry[0] > 0:
            return runtime.Result(requeue_after=expiry[0])
        # The cached TTL may be stale: decide on the Job as the API server has it now.
        path = kubeclient.resource_path(
            JOBS.group, JOBS.version, JOBS.resource, cached.metadata.namespace, cached.metadata.name
        )
        try:
            fresh = codec.decode(await self.client.request_bytes("GET", path), ttl.JobView)
        except kubeclient.ApiError as exc:
            if exc.not_found:
                return None
            raise
        expiry = self._expiry(fresh)
        if expiry is None:
            return None
        if expiry[0] > 0:
            return runtime.Result(requeue_after=expiry[0])
        log.debug("Cleaning up Job", extra={"job": key})
        options = {"propagationPolicy": "Foreground", "preconditions": {"uid": fresh.metadata.uid}}
        try:
            await self.client.delete(path, options)
        except kubeclient.ApiError as exc:
            if exc.not_found:
                return None
            raise  # a 409 (another Job under that name now) is retried and finds the new one
        JOB_DELETION_DURATION.observe((self.now() - expiry[1]).total_seconds())
        return None


def build(ctx: runtime.Context) -> runtime.Reconcile:
    tc = TTLAfterFinishedController(ctx.client, ctx.caches[JOBS], ctx.enqueue)
    tc.register()
    return tc.reconcile


SPEC = runtime.Spec(
    name="ttl-after-finished-controller",
    alias="ttl-after-finished",
    queue_name="ttl_jobs_to_delete",
    primary=JOBS,
    views={JOBS: ttl.JobView},
    build=build,
    workers=5,  # upstream's --concurrent-ttl-after-finished-syncs default
    package=__package__,
)
