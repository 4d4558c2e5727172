"""Scenarios of the job controller's sync against a fake API server and a recording PodControl
(upstream job_controller_test.go's TestSyncJob* cases, a few): parallelism caps creations, a
failed pod's replacement waits out the backoff (coming back no sooner than 1 s), a suspended Job
deletes its pods, the active deadline comes back as a timed retry, a Job managed elsewhere is
not touched, a released pod loses the tracking finalizer with its ownerReference, the
podFailurePolicy metric counts only what a written status records; and the queue's retry
delays are upstream's Job queue's."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from typing import Any

import prometheus_client
from kcm_controllers.job import controller as job_controller
from kcm_controllers.job import gates as job_gates
from kcm_controllers.job import tracking
from kcm_shared.runtime import manager
from kcm_shared.testing import recorders

from tests.support.job import NS, Crash, JobServer, controller, finished_pod, new_job, refresh

T0 = dt.datetime(2026, 1, 1, 0, 0, 0, tzinfo=dt.UTC)
KEY = f"{NS}/job"


def running_pod(i: int) -> dict[str, Any]:
    pod = finished_pod(i, "Running", None)
    pod["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return pod


def test_parallelism_caps_the_pods_created() -> None:
    job = new_job(10, indexed=False)
    job["spec"]["parallelism"] = 3
    server, fake = JobServer(job, []), recorders.RecordingPodControl()
    asyncio.run(controller(server, recorders.RecordingEventRecorder(), fake).sync(KEY))
    assert len(fake.templates) == 3
    assert all(tracking.JOB_TRACKING_FINALIZER in t.metadata.finalizers for t in fake.templates)
    assert all(ref.kind == "Job" and ref.controller and ref.block_owner_deletion for ref in fake.refs)
    assert server.job["status"]["active"] == 3


def failed_pod(i: int, exit_code: int = 1) -> dict[str, Any]:
    failed = finished_pod(i, "Failed", None)
    failed["status"]["containerStatuses"] = [
        {"name": "c", "state": {"terminated": {"exitCode": exit_code, "finishedAt": "2026-01-01T00:00:00Z"}}}
    ]
    return failed


def test_failed_pod_is_replaced_only_after_the_backoff() -> None:
    failed = failed_pod(0)
    server, fake = JobServer(new_job(1, indexed=False), [failed]), recorders.RecordingPodControl()
    jc = controller(server, recorders.RecordingEventRecorder(), fake, now=T0 + dt.timedelta(seconds=1))
    result = asyncio.run(jc.sync(KEY))
    assert server.job["status"]["failed"] == 1
    assert fake.templates == []
    assert result is not None and result.requeue_after == 9.0  # 10 s after the failure
    refresh(jc, server, T0 + dt.timedelta(seconds=10))
    assert asyncio.run(jc.sync(KEY)) is None
    assert len(fake.templates) == 1


def test_suspended_job_deletes_its_active_pods() -> None:
    job = new_job(2, indexed=False)
    job["spec"]["suspend"] = True
    server, fake = JobServer(job, [running_pod(0), running_pod(1)]), recorders.RecordingPodControl()
    events = recorders.RecordingEventRecorder()
    asyncio.run(controller(server, events, fake).sync(KEY))
    assert sorted(fake.deleted) == ["p0", "p1"]
    assert not any(p["metadata"]["finalizers"] for p in server.pods.values())  # removed before the delete
    status = server.job["status"]
    assert "active" not in status and status["terminating"] == 2
    (cond,) = status["conditions"]
    assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == (
        "Suspended",
        "True",
        "JobSuspended",
        "Job suspended",
    )
    assert events.reasons() == ["Suspended"]


def test_active_deadline_comes_back_as_a_timed_retry() -> None:
    job = new_job(1, indexed=False)
    job["spec"]["activeDeadlineSeconds"] = 30
    server = JobServer(job, [running_pod(0)])
    result = asyncio.run(
        controller(server, recorders.RecordingEventRecorder(), now=T0 + dt.timedelta(seconds=10)).sync(KEY)
    )
    assert result is not None and result.requeue_after == 20.0
    result = asyncio.run(
        controller(server, recorders.RecordingEventRecorder(), now=T0 + dt.timedelta(seconds=30)).sync(KEY)
    )
    target = [c for c in server.job["status"]["conditions"] if c["type"] == "FailureTarget"]
    assert target and target[0]["reason"] == "DeadlineExceeded"


def test_job_managed_by_another_controller_is_not_touched() -> None:
    job = new_job(1, indexed=False)
    job["spec"]["managedBy"] = "example.com/other"
    server, fake = (
        JobServer(job, [finished_pod(0, "Succeeded", None)]),
        recorders.RecordingPodControl(),
    )
    assert asyncio.run(controller(server, recorders.RecordingEventRecorder(), fake).sync(KEY)) is None
    assert server.job["metadata"]["resourceVersion"] == "1" and fake.templates == []  # no status write
    assert server.pods["p0"]["metadata"]["finalizers"] == [tracking.JOB_TRACKING_FINALIZER]


def test_with_the_job_managed_by_gate_off_managed_by_is_ignored() -> None:
    # upstream's managedByExternalController: nil whenever JobManagedBy is off.
    job = new_job(1, indexed=False)
    job["spec"]["managedBy"] = "example.com/other"
    server, fake = JobServer(job, []), recorders.RecordingPodControl()
    jc = controller(server, recorders.RecordingEventRecorder(), fake, gates=job_gates.Gates(managed_by=False))
    asyncio.run(jc.sync(KEY))
    assert len(fake.templates) == 1 and server.job["status"]["active"] == 1


def test_a_backoff_about_to_end_comes_back_after_one_second() -> None:
    # 0.5 s of the 10 s backoff are left: upstream floors the requeue at its 1 s batch period.
    server = JobServer(new_job(1, indexed=False), [failed_pod(0)])
    jc = controller(server, recorders.RecordingEventRecorder(), now=T0 + dt.timedelta(seconds=9.5))
    result = asyncio.run(jc.sync(KEY))
    assert result is not None and result.requeue_after == 1.0


def test_a_released_pod_loses_the_tracking_finalizer_with_its_owner_reference() -> None:
    stray = running_pod(0)
    stray["metadata"]["labels"] = {"app": "other"}  # no longer matches the Job's selector
    server = JobServer(new_job(1, indexed=False), [stray])
    asyncio.run(controller(server, recorders.RecordingEventRecorder()).sync(KEY))
    meta = server.pods["p0"]["metadata"]
    assert meta["ownerReferences"] == [] and meta["finalizers"] == []
    releases = [a for a in server.actions if a.verb == "patch" and "ownerReferences" in a.body["metadata"]]
    assert len(releases) == 1  # one patch for both, as upstream's ReleasePod


def handled(action: str) -> float:
    sample = prometheus_client.REGISTRY.get_sample_value(
        "job_controller_pod_failures_handled_by_failure_policy_total", {"action": action}
    )
    return sample or 0.0


def test_failure_policy_actions_are_counted_once_the_status_is_written() -> None:
    job = new_job(2, indexed=False)
    job["spec"]["podFailurePolicy"] = {
        "rules": [{"action": "Count", "onExitCodes": {"operator": "In", "values": [3]}}]
    }
    server = JobServer(job, [failed_pod(0, exit_code=3)])
    before = handled("Count")
    server.writes_left = 0  # the status write that records the failure fails
    with contextlib.suppress(Crash):
        asyncio.run(controller(server, recorders.RecordingEventRecorder()).sync(KEY))
    assert handled("Count") == before
    server.writes_left = None
    asyncio.run(controller(server, recorders.RecordingEventRecorder()).sync(KEY))
    assert handled("Count") == before + 1


def test_failed_syncs_retry_on_the_job_queues_limiter() -> None:
    # Upstream's Job queues: 1 s doubling to 60 s, without the default's 1000 s tail.
    limiter = manager.retry_limiter(job_controller.SPEC)
    assert limiter is not None
    assert [limiter.when(KEY, n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]
