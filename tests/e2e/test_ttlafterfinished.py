"""The TTL-after-finished controller end to end: `kcm dev` with it and the garbage collector.

The Jobs are managed by "another controller" (`spec.managedBy`, and no job controller runs):
each test finishes its Jobs itself by writing their status through the status subresource
with the official client, a Complete or Failed condition with the lastTransitionTime it
chooses, the way a job controller would. Covers: a finished Job with ttl 0 deleted in the
foreground (its pod first, by the garbage collector); the TTL counted from the finish
condition's time; deletion when the TTL runs out and not before, through the durable requeue,
also across a kill -9 of the controller; a raised TTL honoured; unfinished Jobs and Jobs
without a TTL kept. One stack, a namespace per test.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from tests.conftest import wait_for
from tests.e2e import devstack

stack = devstack.stack_fixture("--controllers", "ttl-after-finished,garbagecollector", "--nodes", "0")

CONTROLLER = "ttl-after-finished-controller"
QUEUE = "ttl_jobs_to_delete"  # upstream's queue name, the workqueue_* metrics' `name`
HOLD = "example.com/hold"
MANAGER = "example.com/e2e-runner"  # not the job controller's name: it would leave these alone


@pytest.fixture(scope="module")
def batch(stack: devstack.DevStack) -> Iterator[kubernetes.client.BatchV1Api]:
    with stack.api() as api:
        yield kubernetes.client.BatchV1Api(api)


def stamp(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_seconds() -> dt.datetime:
    """Now, to the second: what a lastTransitionTime can hold."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def create_job(s: devstack.DevStack, ns: str, name: str, ttl: int | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "managedBy": MANAGER,
        "template": {
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1"}]}
        },
    }
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns}, "spec": spec}
    created: dict[str, Any] = json.loads(
        s.kubectl("create", "-f", "-", "-o", "json", input=json.dumps(job)).stdout
    )
    return created


def finish(
    batch: kubernetes.client.BatchV1Api, ns: str, name: str, at: dt.datetime, *, failed: bool = False
) -> None:
    """Write the status a job controller writes when the Job ends at `at`."""
    if failed:
        reason, message = "BackoffLimitExceeded", "Job has reached the specified backoff limit"
        interim, final, counts = "FailureTarget", "Failed", {"failed": 1}
    else:
        reason, message = "CompletionsReached", "Reached expected number of succeeded pods"
        interim, final = "SuccessCriteriaMet", "Complete"
        counts = {"succeeded": 1, "completionTime": stamp(at)}
    conditions = [
        {
            "type": kind,
            "status": "True",
            "reason": reason,
            "message": message,
            "lastProbeTime": stamp(at),
            "lastTransitionTime": stamp(at),
        }
        for kind in (interim, final)
    ]
    status = {
        "startTime": stamp(at - dt.timedelta(seconds=1)),
        "active": 0,
        **counts,
        "conditions": conditions,
    }
    batch.patch_namespaced_job_status(name, ns, {"status": status})


def get_job(s: devstack.DevStack, ns: str, name: str) -> dict[str, Any] | None:
    res = s.kubectl("-n", ns, "get", "job", name, "-o", "json", "--ignore-not-found")
    return json.loads(res.stdout) if res.stdout.strip() else None


def gone(s: devstack.DevStack, ns: str, kind: str, name: str) -> bool:
    return not s.kubectl("-n", ns, "get", kind, name, "--ignore-not-found", "-o", "name").stdout.strip()


def namespace(s: devstack.DevStack, name: str) -> str:
    s.kubectl("create", "namespace", name)
    return name


DELETIONS = "ttl_after_finished_controller_job_deletion_duration_seconds_count"
RECONCILES = "workqueue_work_duration_seconds_count"


def test_a_finished_job_with_ttl_0_is_deleted_in_the_foreground(
    stack: devstack.DevStack, batch: kubernetes.client.BatchV1Api
) -> None:
    ns = namespace(stack, "ttl-foreground")
    job = create_job(stack, ns, "done", ttl=0)
    # Its pod, as a job controller makes it; held by a finalizer so the foreground wait shows.
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "done-pod",
            "namespace": ns,
            "finalizers": [HOLD],
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": "done",
                    "uid": job["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1"}]},
    }
    stack.kubectl("create", "-f", "-", input=json.dumps(pod))
    finish(batch, ns, "done", now_seconds())

    deleting = wait_for(
        lambda: (j := get_job(stack, ns, "done")) and j["metadata"].get("deletionTimestamp") and j,
        30,
        0.2,
        "the Job being deleted",
    )
    assert "foregroundDeletion" in deleting["metadata"].get("finalizers", [])
    wait_for(
        lambda: json.loads(stack.kubectl("-n", ns, "get", "pod", "done-pod", "-o", "json").stdout)[
            "metadata"
        ].get("deletionTimestamp"),
        30,
        0.2,
        "its pod deleted by the garbage collector first",
    )
    assert get_job(stack, ns, "done") is not None, "the Job went before its pod"
    stack.kubectl(
        "-n",
        ns,
        "patch",
        "pod",
        "done-pod",
        "--type=json",
        "-p",
        '[{"op":"remove","path":"/metadata/finalizers"}]',
    )
    wait_for(lambda: gone(stack, ns, "job", "done"), 30, 0.2, "the Job gone after its pod")


def test_ttl_counts_from_the_finish_condition(
    stack: devstack.DevStack, batch: kubernetes.client.BatchV1Api
) -> None:
    ns = namespace(stack, "ttl-finish-time")
    create_job(stack, ns, "finished-long-ago", ttl=3600)
    create_job(stack, ns, "finished-now", ttl=3600)
    finish(batch, ns, "finished-long-ago", now_seconds() - dt.timedelta(hours=2))
    finish(batch, ns, "finished-now", now_seconds())

    wait_for(
        lambda: gone(stack, ns, "job", "finished-long-ago"), 30, 0.2, "the Job expired an hour ago deleted"
    )
    kept = get_job(stack, ns, "finished-now")
    assert kept is not None and not kept["metadata"].get("deletionTimestamp")


def test_a_job_is_deleted_when_its_ttl_runs_out_and_not_before(
    stack: devstack.DevStack, batch: kubernetes.client.BatchV1Api
) -> None:
    ns = namespace(stack, "ttl-expiry")
    before = stack.metric(CONTROLLER, DELETIONS)
    create_job(stack, ns, "short", ttl=3)
    create_job(stack, ns, "raised", ttl=3)
    finished_at = now_seconds()
    finish(batch, ns, "short", finished_at)
    finish(batch, ns, "raised", finished_at)
    # A TTL raised before it ran out wins over the requeue the first one scheduled.
    stack.kubectl(
        "-n", ns, "patch", "job", "raised", "--type=merge", "-p", '{"spec":{"ttlSecondsAfterFinished":3600}}'
    )

    wait_for(lambda: gone(stack, ns, "job", "short"), 30, 0.2, "the Job deleted once its TTL ran out")
    assert time.time() >= (finished_at + dt.timedelta(seconds=3)).timestamp(), (
        "deleted before its TTL ran out"
    )
    assert get_job(stack, ns, "raised") is not None, "a Job whose TTL was raised was deleted on the old one"
    wait_for(
        lambda: stack.metric(CONTROLLER, DELETIONS) > before,
        10,
        0.2,
        "job_deletion_duration_seconds observed",
    )


def test_unfinished_jobs_and_jobs_without_ttl_are_kept(
    stack: devstack.DevStack, batch: kubernetes.client.BatchV1Api
) -> None:
    ns = namespace(stack, "ttl-kept")
    create_job(stack, ns, "running", ttl=0)
    create_job(stack, ns, "no-ttl", ttl=None)
    create_job(stack, ns, "failed", ttl=0)
    finish(batch, ns, "no-ttl", now_seconds())
    finish(batch, ns, "failed", now_seconds(), failed=True)

    wait_for(lambda: gone(stack, ns, "job", "failed"), 30, 0.2, "the failed Job with ttl 0 deleted")
    for name in ("running", "no-ttl"):
        job = get_job(stack, ns, name)
        assert job is not None and not job["metadata"].get("deletionTimestamp"), name
    finish(batch, ns, "running", now_seconds())
    wait_for(lambda: gone(stack, ns, "job", "running"), 30, 0.2, "the Job deleted once it finished")


def test_a_pending_expiry_survives_a_kill_of_the_controller(
    stack: devstack.DevStack, batch: kubernetes.client.BatchV1Api
) -> None:
    ns = namespace(stack, "ttl-kill")
    create_job(stack, ns, "waiting", ttl=4)
    reconciled = stack.metric(CONTROLLER, RECONCILES, name=QUEUE)
    finish(batch, ns, "waiting", now_seconds())
    # Killed once the reconcile has run: what is left of the Job's TTL is only in the deferred work item.
    wait_for(
        lambda: stack.metric(CONTROLLER, RECONCILES, name=QUEUE) > reconciled,
        10,
        0.1,
        "the expiry requeued",
    )
    for pid in stack.controller_pids(CONTROLLER):
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: gone(stack, ns, "job", "waiting"), 60, 0.3, "the Job deleted after the restart")
    stack.wait_healthy()
