"""The job controller's Prometheus metrics, under upstream's names and labels
(pkg/controller/job/metrics), and the small rules that decide their labels."""

from __future__ import annotations

from dataclasses import dataclass

import prometheus_client

from kcm_controllers.job import jobview, tracking
from kcm_controllers.job.podview import JobPodView

# Values of the `action` label of the sync metrics.
RECONCILING = "reconciling"  # expectations unsatisfied: waiting for earlier creations/deletions
TRACKING = "tracking"  # nothing created or deleted
PODS_CREATED = "pods_created"
PODS_DELETED = "pods_deleted"

SYNC_DURATION = prometheus_client.Histogram(
    "job_controller_job_sync_duration_seconds",
    "The time it took to sync a job",
    ["completion_mode", "result", "action"],
    buckets=[0.004 * 2**i for i in range(15)],
)
SYNCS = prometheus_client.Counter(
    "job_controller_job_syncs_total",
    "The number of job syncs",
    ["completion_mode", "result", "action"],
)
POD_FINISHED = prometheus_client.Counter(
    "job_controller_job_pods_finished_total",
    "The number of finished Pods that are fully tracked",
    ["completion_mode", "result"],
)
JOB_FINISHED = prometheus_client.Counter(
    "job_controller_jobs_finished_total",
    "The number of finished jobs",
    ["completion_mode", "result", "reason"],
)
JOBS_BY_EXTERNAL_CONTROLLER = prometheus_client.Counter(
    "job_controller_jobs_by_external_controller_total",
    "The number of Jobs managed by an external controller",
    ["controller_name"],
)
POD_FAILURES_HANDLED = prometheus_client.Counter(
    "job_controller_pod_failures_handled_by_failure_policy_total",
    "The number of failed Pods handled by failure policy",
    ["action"],
)
TERMINATED_PODS_WITH_FINALIZER = prometheus_client.Counter(
    "job_controller_terminated_pods_tracking_finalizer_total",
    "The number of terminated pods (phase=Failed|Succeeded) that have the finalizer "
    'batch.kubernetes.io/job-tracking. The event label can be "add" or "delete".',
    ["event"],
)
FINISHED_INDEXES = prometheus_client.Counter(
    "job_controller_job_finished_indexes_total",
    "The number of finished indexes",
    ["status", "backoffLimit"],
)
PODS_CREATION = prometheus_client.Counter(
    "job_controller_job_pods_creation_total",
    "The number of Pods created by the Job controller labelled with a reason for the Pod creation",
    ["reason", "status"],
)


def completion_mode(job: jobview.JobView) -> str:
    return jobview.INDEXED if jobview.is_indexed(job) else jobview.NON_INDEXED


@dataclass
class SyncRecord:
    """What one sync did, for the sync metrics; set as the sync goes, read even if it raised."""

    action: str = RECONCILING

    def observe(self, job: jobview.JobView, ok: bool, seconds: float) -> None:
        labels = (completion_mode(job), "success" if ok else "error", self.action)
        SYNC_DURATION.labels(*labels).observe(max(seconds, 0.0))
        SYNCS.labels(*labels).inc()


def _finished_with_finalizer(pod: JobPodView | None) -> bool:
    return (
        pod is not None
        and pod.status.phase in ("Succeeded", "Failed")
        and tracking.has_tracking_finalizer(pod)
    )


def record_terminated_with_finalizer(old: JobPodView | None, new: JobPodView | None) -> None:
    """Count a pod entering or leaving "terminated, still holding the tracking finalizer",
    whoever owns it (as upstream, on every pod event)."""
    was, now = _finished_with_finalizer(old), _finished_with_finalizer(new)
    if was != now:
        TERMINATED_PODS_WITH_FINALIZER.labels("add" if now else "delete").inc()


def record_pods_created(
    job: jobview.JobView, failed: int, terminating: int, created: int, errors: int
) -> None:
    """`reason` says whether these pods replace failed or terminating ones, and under which
    podReplacementPolicy."""
    reason = "new"
    if job.spec.pod_replacement_policy == "Failed" and failed > 0:
        reason = "recreate_failed"
    elif failed > 0 or terminating > 0:
        reason = "recreate_terminating_or_failed"
    if created:
        PODS_CREATION.labels(reason, "succeeded").inc(created)
    if errors:
        PODS_CREATION.labels(reason, "failed").inc(errors)


def record_finished_indexes(job: jobview.JobView, succeeded: int, failed: int) -> None:
    limit = "perIndex" if jobview.has_backoff_limit_per_index(job) else "global"
    if succeeded:
        FINISHED_INDEXES.labels("succeeded", limit).inc(succeeded)
    if failed > 0:
        FINISHED_INDEXES.labels("failed", limit).inc(failed)
