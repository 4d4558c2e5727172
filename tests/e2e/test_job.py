"""The job controller end to end: `kcm dev --controllers job`, driven with kubectl and the client.

One shared stack, a namespace per test. The simulator runs each pod for
`sim.kcm.dev/run-seconds` and ends it with `sim.kcm.dev/exit-code`. Covers a Job made with
`kubectl create job` (pod names, labels, ownerRef, tracking finalizer, the Job found by its
generated job-name label), NonIndexed
completions with parallelism (never more pods at once than parallelism), Indexed Jobs
(index annotation, label, env, hostname, completedIndexes), backoffLimit,
activeDeadlineSeconds, suspend and resume, a Job managed by another controller, adoption and
release of pods by selector, the finalizers of a deleted Job's pods, and a controller killed
with -9 mid-work (no pod lost or counted twice).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from tests.conftest import wait_for
from tests.e2e import cronjobs, devstack
from tests.e2e.jobs import apply, get, job_yaml, pods_of, wait_condition

# The cronjob controller too, for the one test of both together; it leaves plain Jobs alone.
stack = devstack.stack_fixture("--controllers", "job,cronjob")
_counter = iter(range(1000))
TRACKING = "batch.kubernetes.io/job-tracking"
INDEX = "batch.kubernetes.io/job-completion-index"


@pytest.fixture
def ns(stack: devstack.DevStack) -> Iterator[str]:
    name = f"job-{next(_counter)}"
    stack.kubectl("create", "namespace", name)
    yield name


def condition(job: dict[str, Any], cond_type: str) -> dict[str, Any] | None:
    return next((c for c in job.get("status", {}).get("conditions", []) if c["type"] == cond_type), None)


def describe_events(stack: devstack.DevStack, ns: str, name: str) -> str:
    return stack.kubectl("describe", "-n", ns, "job", name).stdout.split("Events:", 1)[1]


def test_kubectl_create_job_runs_a_tracked_pod(stack: devstack.DevStack, ns: str) -> None:
    # No command: the simulator runs the pod until it is stopped, so it can be seen running.
    stack.kubectl("create", "job", "hello", "-n", ns, "--image=busybox")
    job = get(stack, ns, "job", "hello")
    uid = job["metadata"]["uid"]
    # As kube-apiserver: the Job takes the generated labels, and the selector is not manual.
    assert stack.kubectl("get", "jobs", "-n", ns, "-l", "job-name=hello", "-o", "name").stdout.split() == [
        "job.batch/hello"
    ]
    assert job["spec"]["manualSelector"] is False
    (pod,) = wait_for(lambda: pods_of(stack, ns, "hello"), 20, what="the job's pod")
    meta = pod["metadata"]
    assert meta["name"].startswith("hello-") and meta["generateName"] == "hello-"
    assert meta["labels"]["batch.kubernetes.io/controller-uid"] == uid
    assert TRACKING in meta["finalizers"]
    (ref,) = meta["ownerReferences"]
    assert ref == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "hello",
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    status = wait_for(
        lambda: (s := get(stack, ns, "job", "hello").get("status", {})).get("ready") == 1 and s,
        20,
        what="ready",
    )
    assert status["active"] == 1 and status["terminating"] == 0 and status["startTime"]
    assert f"Created pod: {meta['name']}" in describe_events(stack, ns, "hello")


def test_kubectl_create_job_with_a_command_completes(stack: devstack.DevStack, ns: str) -> None:
    stack.kubectl("create", "job", "date", "-n", ns, "--image=busybox", "--", "date")
    job = wait_condition(stack, ns, "date", "complete")
    status = job["status"]
    assert status["succeeded"] == 1 and status.get("active", 0) == 0 and status["completionTime"]
    (pod,) = pods_of(stack, ns, "date")
    assert pod["status"]["phase"] == "Succeeded"
    assert TRACKING not in (pod["metadata"].get("finalizers") or [])
    assert "Job completed" in describe_events(stack, ns, "date")


def test_a_cronjobs_jobs_run_to_completion(stack: devstack.DevStack, ns: str) -> None:
    """`kubectl create cronjob` with a command, a start due at once, and
    `kubectl create job --from=cronjob/...`: both Jobs complete through the job controller,
    and the CronJob records the scheduled one's success."""
    schedule, due = cronjobs.daily_due()
    stack.kubectl(
        "-n", ns, "create", "cronjob", "daily", "--image=busybox", f"--schedule={schedule}", "--", "date"
    )
    with stack.api() as api:
        batch = kubernetes.client.BatchV1Api(api)
        cronjobs.set_status(batch, ns, "daily", lastScheduleTime=cronjobs.stamp(due - dt.timedelta(days=1)))
    scheduled = f"daily-{cronjobs.minutes(due)}"
    stack.kubectl("-n", ns, "create", "job", "by-hand", "--from=cronjob/daily")
    for name in (scheduled, "by-hand"):
        wait_for(lambda n=name: n in names(stack, ns), 30, what=f"job {name}")
        job = wait_condition(stack, ns, name, "complete")
        assert job["status"]["succeeded"] == 1
    cronjob = wait_for(
        lambda: (c := get(stack, ns, "cronjob", "daily"))["status"].get("lastSuccessfulTime") and c,
        30,
        what="the CronJob's lastSuccessfulTime",
    )
    assert cronjob["status"]["lastScheduleTime"] == cronjobs.stamp(due)
    assert not cronjob["status"].get("active")


def names(stack: devstack.DevStack, ns: str) -> set[str]:
    return {j["metadata"]["name"] for j in get(stack, ns, "jobs")["items"]}


def test_nonindexed_completions_never_exceed_parallelism(stack: devstack.DevStack, ns: str) -> None:
    apply(
        stack,
        job_yaml(
            ns,
            "work",
            spec={"completions": 6, "parallelism": 2},
            annotations={"sim.kcm.dev/exit-code": "0", "sim.kcm.dev/run-seconds": "1"},
        ),
    )
    job = wait_condition(stack, ns, "work", "complete")
    status = job["status"]
    assert status["succeeded"] == 6 and "active" not in status and "failed" not in status
    assert status["uncountedTerminatedPods"] == {}
    assert status["completionTime"] >= status["startTime"]
    met = condition(job, "SuccessCriteriaMet")
    complete = condition(job, "Complete")
    assert met and complete and met["status"] == complete["status"] == "True"
    assert complete["reason"] == "CompletionsReached"
    assert complete["message"] == "Reached expected number of succeeded pods"
    pods = pods_of(stack, ns, "work")
    assert len(pods) == 6 and all(p["status"]["phase"] == "Succeeded" for p in pods)
    assert not any(p["metadata"].get("finalizers") for p in pods)
    # Each pod ran from its startTime to its container's finish: never three at once.
    spans = []
    for p in pods:
        finished = p["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"]
        spans.append(
            (dt.datetime.fromisoformat(p["status"]["startTime"]), dt.datetime.fromisoformat(finished))
        )
    for start, _ in spans:
        running = sum(1 for s, f in spans if s <= start < f)
        assert running <= 2, spans
    events = describe_events(stack, ns, "work")
    assert "Completed" in events and "Job completed" in events


def test_indexed_job_runs_each_index_once(stack: devstack.DevStack, ns: str) -> None:
    apply(
        stack,
        job_yaml(
            ns,
            "ix",
            spec={"completions": 3, "parallelism": 3, "completionMode": "Indexed"},
            annotations={"sim.kcm.dev/exit-code": "0", "sim.kcm.dev/run-seconds": "1"},
            pod_spec={"subdomain": "workers"},
        ),
    )
    job = wait_condition(stack, ns, "ix", "complete")
    assert job["status"]["completedIndexes"] == "0-2" and job["status"]["succeeded"] == 3
    pods = sorted(pods_of(stack, ns, "ix"), key=lambda p: int(p["metadata"]["annotations"][INDEX]))
    assert len(pods) == 3
    for i, pod in enumerate(pods):
        meta, spec = pod["metadata"], pod["spec"]
        assert meta["annotations"][INDEX] == meta["labels"][INDEX] == str(i)
        assert meta["generateName"] == f"ix-{i}-"
        assert spec["hostname"] == f"ix-{i}" and spec["subdomain"] == "workers"
        (env,) = spec["containers"][0]["env"]
        assert env["name"] == "JOB_COMPLETION_INDEX"
        assert env["valueFrom"]["fieldRef"]["fieldPath"] == f"metadata.labels['{INDEX}']"


def test_upstream_metrics_count_syncs_creations_indexes_and_finalizers(
    stack: devstack.DevStack, ns: str
) -> None:
    job = "job-controller"
    samples = {
        "synced": ("job_controller_job_syncs_total", {"completion_mode": "Indexed", "result": "success"}),
        "created_syncs": (
            "job_controller_job_syncs_total",
            {"completion_mode": "Indexed", "action": "pods_created"},
        ),
        "timed": ("job_controller_job_sync_duration_seconds_count", {"completion_mode": "Indexed"}),
        "pods": ("job_controller_job_pods_creation_total", {"reason": "new", "status": "succeeded"}),
        "indexes": (
            "job_controller_job_finished_indexes_total",
            {"status": "succeeded", "backoffLimit": "global"},
        ),
        "held": ("job_controller_terminated_pods_tracking_finalizer_total", {"event": "add"}),
        "released": ("job_controller_terminated_pods_tracking_finalizer_total", {"event": "delete"}),
        "finished": (
            "job_controller_jobs_finished_total",
            {"completion_mode": "Indexed", "result": "succeeded", "reason": "CompletionsReached"},
        ),
    }

    def read() -> dict[str, float]:
        return {k: stack.metric(job, sample, **labels) for k, (sample, labels) in samples.items()}

    before = read()
    spec = {"completions": 4, "parallelism": 4, "completionMode": "Indexed"}
    apply(stack, job_yaml(ns, "counted", spec=spec, annotations={"sim.kcm.dev/exit-code": "0"}))
    wait_condition(stack, ns, "counted", "complete")
    # Finalizers are released before the Job completes; counters are read after.
    delta = {k: v - before[k] for k, v in read().items()}
    assert delta["synced"] >= 2 and delta["created_syncs"] >= 1 and delta["timed"] >= delta["synced"], delta
    assert delta["pods"] >= 4 and delta["indexes"] >= 4, delta
    assert delta["held"] >= 4 and delta["released"] >= 4 and delta["finished"] >= 1, delta


def test_backoff_limit_fails_the_job(stack: devstack.DevStack, ns: str) -> None:
    apply(stack, job_yaml(ns, "bad", spec={"backoffLimit": 0}, annotations={"sim.kcm.dev/exit-code": "3"}))
    job = wait_condition(stack, ns, "bad", "failed")
    assert job["status"]["failed"] == 1 and "succeeded" not in job["status"]
    for cond_type in ("FailureTarget", "Failed"):
        cond = condition(job, cond_type)
        assert cond is not None and cond["status"] == "True", job["status"]
        assert cond["reason"] == "BackoffLimitExceeded"
        assert cond["message"] == "Job has reached the specified backoff limit"
    assert "completionTime" not in job["status"]
    events = describe_events(stack, ns, "bad")
    assert "Warning  BackoffLimitExceeded" in events


def test_active_deadline_deletes_pods_and_fails(stack: devstack.DevStack, ns: str) -> None:
    apply(
        stack,
        job_yaml(
            ns,
            "slow",
            spec={"activeDeadlineSeconds": 2, "parallelism": 2, "completions": 4},
            # Containers that ignore SIGTERM: killed (Failed) when the grace period ends.
            annotations={"sim.kcm.dev/ignore-sigterm": "true"},
            pod_spec={"terminationGracePeriodSeconds": 1},
        ),
    )
    job = wait_condition(stack, ns, "slow", "failed")
    cond = condition(job, "Failed")
    assert cond is not None and cond["reason"] == "DeadlineExceeded"
    assert cond["message"] == "Job was active longer than specified deadline"
    # Both running pods were deleted and counted as failed once they were gone.
    assert job["status"]["failed"] == 2 and job["status"]["terminating"] == 0
    events = describe_events(stack, ns, "slow")
    assert events.count("SuccessfulDelete") == 2 and "DeadlineExceeded" in events


def test_suspend_deletes_pods_and_resume_restarts_the_clock(stack: devstack.DevStack, ns: str) -> None:
    apply(
        stack,
        job_yaml(
            ns,
            "sus",
            spec={"parallelism": 2, "completions": 2},
            annotations={"sim.kcm.dev/terminate-seconds": "0"},
        ),
    )
    wait_for(lambda: get(stack, ns, "job", "sus").get("status", {}).get("active") == 2, 20, what="2 active")
    started = get(stack, ns, "job", "sus")["status"]["startTime"]
    stack.kubectl("patch", "-n", ns, "job", "sus", "-p", '{"spec":{"suspend":true}}')
    job = wait_condition(stack, ns, "sus", "suspended")
    cond = condition(job, "Suspended")
    assert cond is not None and (cond["reason"], cond["message"]) == ("JobSuspended", "Job suspended")
    wait_for(lambda: not pods_of(stack, ns, "sus"), 20, what="pods of the suspended job gone")
    job = wait_for(lambda: (j := get(stack, ns, "job", "sus"))["status"].get("active") is None and j, 20)
    assert "failed" not in job["status"]  # deleted by the controller: not failures
    stack.kubectl("patch", "-n", ns, "job", "sus", "-p", '{"spec":{"suspend":false}}')
    job = wait_condition(stack, ns, "sus", "suspended=false")
    cond = condition(job, "Suspended")
    assert cond is not None and (cond["reason"], cond["message"]) == ("JobResumed", "Job resumed")
    # The clock of activeDeadlineSeconds starts again at the resume.
    assert job["status"]["startTime"] == cond["lastTransitionTime"] >= started
    wait_for(lambda: len(pods_of(stack, ns, "sus")) == 2, 20, what="pods again after resume")
    # Events are written after the status (kcm_shared.runtime.events sends them at low priority).
    wait_for(
        lambda: all(m in describe_events(stack, ns, "sus") for m in ("Job suspended", "Job resumed")),
        10,
        what="the Suspended and Resumed Events",
    )


def test_job_managed_by_another_controller_is_left_alone(stack: devstack.DevStack, ns: str) -> None:
    apply(stack, job_yaml(ns, "theirs", spec={"managedBy": "example.com/other-controller"}))
    apply(stack, job_yaml(ns, "ours"))
    # The controller has reached this namespace's Jobs once it acted on its own one.
    wait_for(lambda: pods_of(stack, ns, "ours"), 20, what="the pod of the job we manage")
    wait_for(lambda: get(stack, ns, "job", "ours").get("status", {}).get("active") == 1, 20)
    assert pods_of(stack, ns, "theirs") == []
    assert get(stack, ns, "job", "theirs").get("status", {}) == {}
    counted = stack.metric(
        "job-controller",
        "job_controller_jobs_by_external_controller_total",
        controller_name="example.com/other-controller",
    )
    assert counted >= 1


def test_adopts_matching_orphans_and_releases_pods_that_stop_matching(
    stack: devstack.DevStack, ns: str
) -> None:
    orphan = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "stray", "namespace": ns, "labels": {"app": "adopt"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"},
    }
    stack.kubectl("create", "-f", "-", input=json.dumps(orphan))
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "adopt", "namespace": ns},
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "manualSelector": True,
            "selector": {"matchLabels": {"app": "adopt"}},
            "template": {
                "metadata": {
                    "labels": {"app": "adopt"},
                    "annotations": {"sim.kcm.dev/terminate-seconds": "0"},
                },
                "spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"},
            },
        },
    }
    created = kubernetes.client.BatchV1Api(stack.api()).create_namespaced_job(ns, job)
    uid = created.metadata.uid

    def stray() -> dict[str, Any]:
        pod: dict[str, Any] = get(stack, ns, "pod", "stray")
        return pod

    adopted = wait_for(lambda: (p := stray())["metadata"].get("ownerReferences") and p, 20, what="adoption")
    assert adopted["metadata"]["ownerReferences"][0]["uid"] == uid
    assert TRACKING in adopted["metadata"]["finalizers"]
    wait_for(lambda: len(get(stack, ns, "pods", "-l", "app=adopt")["items"]) == 2, 20, what="one pod created")
    stack.kubectl("label", "-n", ns, "pod", "stray", "app=gone", "--overwrite")
    # Released: no owner, and the tracking finalizer of an orphan is removed.
    wait_for(
        lambda: not (m := stray()["metadata"]).get("ownerReferences") and not m.get("finalizers"),
        20,
        what="release",
    )
    wait_for(lambda: len(get(stack, ns, "pods", "-l", "app=adopt")["items"]) == 2, 20, what="a replacement")


def test_deleted_job_leaves_no_tracking_finalizer_on_its_pods(stack: devstack.DevStack, ns: str) -> None:
    apply(stack, job_yaml(ns, "gone", spec={"parallelism": 2, "completions": 2}))
    wait_for(lambda: len(pods_of(stack, ns, "gone")) == 2, 20, what="2 pods")
    # No garbage collector runs here: the pods stay, and only the job controller can free them.
    stack.kubectl("delete", "-n", ns, "job", "gone", "--cascade=background")
    wait_for(
        lambda: all(not p["metadata"].get("finalizers") for p in pods_of(stack, ns, "gone")),
        20,
        what="the tracking finalizer removed from the pods of the deleted Job",
    )
    assert len(pods_of(stack, ns, "gone")) == 2


class UncountedWatch:
    """Every pod UID any version of a Job's status listed in uncountedTerminatedPods.succeeded,
    from a watch (which delivers each version) in a thread."""

    def __init__(self, stack: devstack.DevStack, ns: str, name: str) -> None:
        self.uids: set[str] = set()
        self.error: BaseException | None = None
        self._stopped = False
        self._watch = kubernetes.watch.Watch()
        api = kubernetes.client.BatchV1Api(stack.api())
        self._thread = threading.Thread(target=self._run, args=(api, ns, name), daemon=True)

    def _run(self, api: kubernetes.client.BatchV1Api, ns: str, name: str) -> None:
        try:
            for event in self._watch.stream(
                api.list_namespaced_job, ns, field_selector=f"metadata.name={name}", timeout_seconds=120
            ):
                uncounted = event["object"].status.uncounted_terminated_pods
                if uncounted is not None and uncounted.succeeded:
                    self.uids.update(uncounted.succeeded)
        except BaseException as exc:  # reported by the test, unless it is the stop below
            if not self._stopped:
                self.error = exc

    def __enter__(self) -> UncountedWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stopped = True
        self._watch.stop()
        self._thread.join(10)


def test_killed_controller_counts_every_pod_exactly_once(stack: devstack.DevStack, ns: str) -> None:
    completions = 40

    def progress() -> bool:
        status = get(stack, ns, "job", "many").get("status", {})
        return bool(status.get("succeeded") or status.get("uncountedTerminatedPods"))

    # The watch lists first: it sees every version of the Job from its creation on.
    with UncountedWatch(stack, ns, "many") as watch:
        apply(
            stack,
            job_yaml(
                ns,
                "many",
                spec={"completions": completions, "parallelism": 10},
                annotations={"sim.kcm.dev/exit-code": "0"},
            ),
        )
        wait_for(progress, 30, interval=0.02, what="pods being counted")
        pids = stack.controller_pids("job")
        assert pids
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        job = wait_condition(stack, ns, "many", "complete", timeout=60)
    pods = pods_of(stack, ns, "many")
    succeeded = [p for p in pods if p["status"]["phase"] == "Succeeded"]
    # Every pod that ran is counted once: none lost, none twice, and none ran in excess.
    assert job["status"]["succeeded"] == len(succeeded) == completions
    assert job["status"]["uncountedTerminatedPods"] == {}
    assert not any(p["metadata"].get("finalizers") for p in pods)
    # Each pod was recorded as uncounted before its finalizer went: the step that makes a kill
    # at any moment safe, checked on every pod rather than left to where the kill landed.
    assert watch.error is None, watch.error
    assert {p["metadata"]["uid"] for p in succeeded} <= watch.uids
    stack.wait_healthy(60)
