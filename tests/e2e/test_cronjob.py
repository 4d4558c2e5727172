"""The CronJob controller end to end: `kcm dev --controllers cronjob`, driven with kubectl and
the official client, each test in its own namespace on one shared stack.

Schedules fire once a minute at best, so only one CronJob waits for a real minute boundary:
it is created when the module starts and checked by the last test, while the others run.
The others make a schedule time due at once instead: a daily schedule whose time of day
passed an hour ago, and a status.lastScheduleTime (set through the status subresource) from
before it, so the controller finds exactly one unmet start time when it syncs, and never a
new one while the test runs. No job controller runs here: a test finishes a Job by writing
its status (Complete or Failed conditions, completionTime) itself.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import zoneinfo
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from tests.conftest import wait_for
from tests.e2e import devstack
from tests.e2e.cronjobs import daily_due, minutes, now, set_status, stamp

stack = devstack.stack_fixture("--controllers", "cronjob")
_counter = iter(range(1000))
ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"
TIMEOUT = 30.0


@pytest.fixture
def ns(stack: devstack.DevStack) -> Iterator[str]:
    name = f"cj-{next(_counter)}"
    stack.kubectl("create", "namespace", name)
    yield name


@pytest.fixture(scope="module")
def batch(stack: devstack.DevStack) -> Iterator[kubernetes.client.BatchV1Api]:
    with stack.api() as api:
        yield kubernetes.client.BatchV1Api(api)


@pytest.fixture(scope="module")
def ticking(stack: devstack.DevStack) -> tuple[str, dt.datetime]:
    """A `* * * * *` CronJob made with `kubectl create cronjob` when the module starts."""
    stack.kubectl("create", "namespace", "cj-tick")
    before = now()
    stack.kubectl("-n", "cj-tick", "create", "cronjob", "tick", "--image=busybox", "--schedule=* * * * *")
    return "cj-tick", before


def get(stack: devstack.DevStack, ns: str, *what: str) -> Any:
    return json.loads(stack.kubectl("get", "-n", ns, *what, "-o", "json").stdout)


def jobs(stack: devstack.DevStack, ns: str) -> dict[str, dict[str, Any]]:
    return {j["metadata"]["name"]: j for j in get(stack, ns, "jobs")["items"]}


def reasons(stack: devstack.DevStack, ns: str, name: str) -> list[str]:
    """Reasons of the Events about CronJob `name`, oldest first."""
    items = [
        e
        for e in get(stack, ns, "events")["items"]
        if e["involvedObject"].get("kind") == "CronJob" and e["involvedObject"].get("name") == name
    ]
    return [e["reason"] for e in sorted(items, key=lambda e: e.get("firstTimestamp") or "")]


def event_message(stack: devstack.DevStack, ns: str, reason: str) -> str:
    for e in get(stack, ns, "events")["items"]:
        if e["reason"] == reason:
            return str(e["message"])
    return ""


def cronjob(stack: devstack.DevStack, ns: str, name: str, schedule: str, **spec: Any) -> dict[str, Any]:
    """A CronJob applied from a manifest (spec fields kubectl create cannot set)."""
    body = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "schedule": schedule,
            "jobTemplate": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "template": {
                        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
                    }
                },
            },
            **spec,
        },
    }
    stack.kubectl("apply", "-f", "-", input=json.dumps(body))
    result: dict[str, Any] = get(stack, ns, "cronjob", name)
    return result


def active_ref(job: dict[str, Any]) -> dict[str, str]:
    meta = job["metadata"]
    return {
        "kind": "Job",
        "namespace": meta["namespace"],
        "name": meta["name"],
        "uid": meta["uid"],
        "apiVersion": "batch/v1",
    }


def finish(
    batch: kubernetes.client.BatchV1Api, ns: str, name: str, condition: str, started: dt.datetime
) -> None:
    """Mark a Job finished the way the job controller would (no job controller runs here)."""
    first = "SuccessCriteriaMet" if condition == "Complete" else "FailureTarget"
    conditions = [
        {"type": t, "status": "True", "lastProbeTime": stamp(now()), "lastTransitionTime": stamp(now())}
        for t in (first, condition)
    ]
    status: dict[str, Any] = {"conditions": conditions, "startTime": stamp(started)}
    if condition == "Complete":
        status.update(succeeded=1, completionTime=stamp(now()))
    else:
        status.update(failed=1)
    batch.patch_namespaced_job_status(name, ns, {"status": status})


def manual_job(stack: devstack.DevStack, ns: str, cronjob_name: str, name: str) -> dict[str, Any]:
    """`kubectl create job --from=cronjob/...`: a Job the CronJob controls but did not create."""
    stack.kubectl("-n", ns, "create", "job", name, f"--from=cronjob/{cronjob_name}")
    job: dict[str, Any] = get(stack, ns, "job", name)
    return job


# --- tests ----------------------------------------------------------------------------------


def test_kubectl_create_cronjob(stack: devstack.DevStack, ticking: tuple[str, dt.datetime]) -> None:
    ns, _ = ticking
    out = stack.kubectl("-n", ns, "get", "cronjob", "tick").stdout
    assert "* * * * *" in out and "False" in out  # SCHEDULE and SUSPEND columns


def test_an_unknown_time_zone_is_refused(
    stack: devstack.DevStack, ns: str, batch: kubernetes.client.BatchV1Api
) -> None:
    body = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "mars", "namespace": ns},
        "spec": {
            "schedule": "0 * * * *",
            "timeZone": "Mars/Olympus_Mons",
            "jobTemplate": {
                "spec": {
                    "template": {
                        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}
                    }
                }
            },
        },
    }
    res = stack.kubectl("apply", "-f", "-", input=json.dumps(body), check=False)
    assert res.returncode != 0
    assert (
        'spec.timeZone: Invalid value: "Mars/Olympus_Mons": unknown time zone Mars/Olympus_Mons' in res.stderr
    )
    with pytest.raises(kubernetes.client.ApiException) as exc:
        batch.create_namespaced_cron_job(ns, body)
    assert exc.value.status == 422
    assert "unknown time zone Mars/Olympus_Mons" in str(exc.value.body)
    body["spec"]["schedule"] = "* * * * 7"  # type: ignore[index]
    body["spec"]["timeZone"] = "Asia/Kolkata"  # type: ignore[index]
    res = stack.kubectl("apply", "-f", "-", input=json.dumps(body), check=False)
    assert 'spec.schedule: Invalid value: "* * * * 7": end of range (7) above maximum (6): 7' in res.stderr


def test_a_missed_start_runs_at_once_in_the_cronjobs_time_zone(
    stack: devstack.DevStack, ns: str, batch: kubernetes.client.BatchV1Api
) -> None:
    # Kolkata is UTC+05:30: read in UTC, this schedule's last time was 18.5 hours earlier, so
    # a controller ignoring spec.timeZone would start a Job of another name and annotation.
    kolkata = zoneinfo.ZoneInfo("Asia/Kolkata")
    schedule, due = daily_due(1.0, kolkata)
    cronjob(stack, ns, "india", schedule, timeZone="Asia/Kolkata")
    set_status(batch, ns, "india", lastScheduleTime=stamp(due - dt.timedelta(days=1)))
    name = f"india-{minutes(due)}"
    job = wait_for(lambda: jobs(stack, ns).get(name), TIMEOUT, 0.2, what=f"job {name}")
    assert job["metadata"]["annotations"][ANNOTATION] == due.strftime("%Y-%m-%dT%H:%M:%S+05:30")
    assert job["metadata"]["labels"]["app"] == "india"
    [owner] = job["metadata"]["ownerReferences"]
    cj = get(stack, ns, "cronjob", "india")
    assert owner == {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "name": "india",
        "uid": cj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    cj = wait_for(
        lambda: (c := get(stack, ns, "cronjob", "india")).get("status", {}).get("active") and c,
        TIMEOUT,
        0.2,
        what="status.active",
    )
    assert [a["uid"] for a in cj["status"]["active"]] == [job["metadata"]["uid"]]
    assert cj["status"]["lastScheduleTime"] == stamp(due)
    assert "SuccessfulCreate" in reasons(stack, ns, "india")
    assert f"Created job {name}" in stack.kubectl("-n", ns, "describe", "cronjob", "india").stdout


@pytest.mark.parametrize("policy", ["Forbid", "Replace", "Allow"])
def test_concurrency_policy(
    stack: devstack.DevStack, ns: str, batch: kubernetes.client.BatchV1Api, policy: str
) -> None:
    schedule, due = daily_due()
    stack.kubectl("-n", ns, "create", "cronjob", "cc", "--image=busybox", f"--schedule={schedule}")
    stack.kubectl(
        "-n",
        ns,
        "patch",
        "cronjob",
        "cc",
        "--type=merge",
        "-p",
        json.dumps({"spec": {"concurrencyPolicy": policy}}),
    )
    running = manual_job(stack, ns, "cc", "running")
    set_status(
        batch, ns, "cc", active=[active_ref(running)], lastScheduleTime=stamp(due - dt.timedelta(days=1))
    )
    scheduled = f"cc-{minutes(due)}"
    if policy == "Forbid":
        wait_for(
            lambda: "JobAlreadyActive" in reasons(stack, ns, "cc"), TIMEOUT, 0.2, what="JobAlreadyActive"
        )
        assert set(jobs(stack, ns)) == {"running"}
        # Once the running Job finishes, the start it held back goes ahead.
        finish(batch, ns, "running", "Complete", now())
        wait_for(lambda: scheduled in jobs(stack, ns), TIMEOUT, 0.2, what="the held back job")
        assert "SawCompletedJob" in reasons(stack, ns, "cc")
        cj = get(stack, ns, "cronjob", "cc")
        assert cj["status"]["lastSuccessfulTime"]
    elif policy == "Replace":
        wait_for(lambda: set(jobs(stack, ns)) == {scheduled}, TIMEOUT, 0.2, what="the running job replaced")
        assert event_message(stack, ns, "SuccessfulDelete") == "Deleted job running"
    else:
        wait_for(lambda: set(jobs(stack, ns)) == {"running", scheduled}, TIMEOUT, 0.2, what="both jobs")
    cj = wait_for(
        lambda: (c := get(stack, ns, "cronjob", "cc"))["status"].get("lastScheduleTime") == stamp(due) and c,
        TIMEOUT,
        0.2,
        what="lastScheduleTime",
    )
    active = {a["name"] for a in cj["status"].get("active", [])}
    assert active == ({"running", scheduled} if policy == "Allow" else {scheduled})


@pytest.mark.parametrize(
    ("held_by", "release"),
    [
        ({"suspend": True}, {"suspend": False}),
        ({"startingDeadlineSeconds": 600}, {"startingDeadlineSeconds": 7200}),
    ],
)
def test_suspend_and_starting_deadline_hold_a_start_back(
    stack: devstack.DevStack,
    ns: str,
    batch: kubernetes.client.BatchV1Api,
    held_by: dict[str, Any],
    release: dict[str, Any],
) -> None:
    schedule, due = daily_due()
    cronjob(stack, ns, "held", schedule, **held_by)
    # A vanished active Job: the sync that sees it says MissingJob and clears status.active,
    # after it decided whether to start the Job that is due.
    ghost = {"kind": "Job", "namespace": ns, "name": "ghost", "uid": "0000-ghost", "apiVersion": "batch/v1"}
    set_status(batch, ns, "held", active=[ghost], lastScheduleTime=stamp(due - dt.timedelta(days=1)))
    wait_for(
        lambda: not get(stack, ns, "cronjob", "held")["status"].get("active"),
        TIMEOUT,
        0.2,
        what="ghost dropped",
    )
    assert "MissingJob" in reasons(stack, ns, "held")
    assert jobs(stack, ns) == {}
    stack.kubectl("-n", ns, "patch", "cronjob", "held", "--type=merge", "-p", json.dumps({"spec": release}))
    wait_for(lambda: f"held-{minutes(due)}" in jobs(stack, ns), TIMEOUT, 0.2, what="the job, once released")


def test_history_limits_delete_the_oldest_finished_jobs(
    stack: devstack.DevStack, ns: str, batch: kubernetes.client.BatchV1Api
) -> None:
    schedule, _ = daily_due()
    cronjob(stack, ns, "hist", schedule, successfulJobsHistoryLimit=1, failedJobsHistoryLimit=1)
    started = now() - dt.timedelta(minutes=10)
    for i, (name, condition) in enumerate(
        [("ok-old", "Complete"), ("ok-new", "Complete"), ("bad-old", "Failed"), ("bad-new", "Failed")]
    ):
        manual_job(stack, ns, "hist", name)
        finish(batch, ns, name, condition, started + dt.timedelta(minutes=i))
    wait_for(
        lambda: set(jobs(stack, ns)) == {"ok-new", "bad-new"},
        TIMEOUT,
        0.2,
        what="oldest finished jobs deleted",
    )
    # Events are written after the deletions they report, at low priority: wait for both.
    deleted = wait_for(
        lambda: (
            found
            if len(
                found := [
                    e["message"]
                    for e in get(stack, ns, "events")["items"]
                    if e["reason"] == "SuccessfulDelete"
                ]
            )
            >= 2
            else None
        ),
        TIMEOUT,
        0.2,
        what="two SuccessfulDelete Events",
    )
    assert sorted(deleted) == ["Deleted job bad-old", "Deleted job ok-old"]
    assert get(stack, ns, "cronjob", "hist")["status"]["lastSuccessfulTime"]


def test_too_many_missed_start_times(
    stack: devstack.DevStack, ns: str, batch: kubernetes.client.BatchV1Api
) -> None:
    cronjob(stack, ns, "late", "* * * * *")
    set_status(batch, ns, "late", lastScheduleTime=stamp(now() - dt.timedelta(hours=3)))
    wait_for(
        lambda: "TooManyMissedTimes" in reasons(stack, ns, "late"), TIMEOUT, 0.2, what="TooManyMissedTimes"
    )
    assert event_message(stack, ns, "TooManyMissedTimes") == (
        "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew"
    )
    # Only the latest missed time is started.
    found = wait_for(lambda: jobs(stack, ns), TIMEOUT, 0.2, what="the latest missed start")
    [job] = found.values()
    scheduled = dt.datetime.fromisoformat(job["metadata"]["annotations"][ANNOTATION].replace("Z", "+00:00"))
    assert now() - scheduled < dt.timedelta(minutes=2)


def test_a_job_whose_status_write_was_lost_is_taken_back(
    stack: devstack.DevStack, ns: str, batch: kubernetes.client.BatchV1Api
) -> None:
    # The Job for the due time exists (a sync created it, then lost its status write): the
    # create meets AlreadyExists, and the Job goes into status.active without a second one.
    schedule, due = daily_due()
    cj = cronjob(stack, ns, "lost", schedule)
    name = f"lost-{minutes(due)}"
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": ns,
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "CronJob",
                    "name": "lost",
                    "uid": cj["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": cj["spec"]["jobTemplate"]["spec"],
    }
    stack.kubectl("apply", "-f", "-", input=json.dumps(job))
    set_status(batch, ns, "lost", lastScheduleTime=stamp(due - dt.timedelta(days=1)))
    status = wait_for(
        lambda: get(stack, ns, "cronjob", "lost")["status"].get("active"),
        TIMEOUT,
        0.2,
        what="the job taken back",
    )
    assert [a["name"] for a in status] == [name]
    assert get(stack, ns, "cronjob", "lost")["status"]["lastScheduleTime"] == stamp(due)
    assert set(jobs(stack, ns)) == {name}
    assert "SuccessfulCreate" not in reasons(stack, ns, "lost")


def test_a_start_that_falls_due_while_the_controller_is_killed_runs_once(
    stack: devstack.DevStack, ns: str, batch: kubernetes.client.BatchV1Api
) -> None:
    schedule, due = daily_due()
    cronjob(stack, ns, "crash", schedule)
    pids = stack.controller_pids("cronjob")
    assert pids
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    set_status(batch, ns, "crash", lastScheduleTime=stamp(due - dt.timedelta(days=1)))
    name = f"crash-{minutes(due)}"
    wait_for(
        lambda: [a["name"] for a in get(stack, ns, "cronjob", "crash")["status"].get("active", [])] == [name],
        90,
        0.3,
        what="the due job started after the restart",
    )
    assert set(jobs(stack, ns)) == {name}
    assert not set(stack.controller_pids("cronjob")) & set(pids)


def test_a_job_starts_on_the_minute_and_its_end_is_seen(
    stack: devstack.DevStack, ticking: tuple[str, dt.datetime], batch: kubernetes.client.BatchV1Api
) -> None:
    """Last in the module: the CronJob made at its start has met a real minute boundary by now
    (or will within a minute), through the requeue for its next schedule time."""
    ns, created = ticking
    first = (created + dt.timedelta(minutes=1)).replace(second=0, microsecond=0)
    found = wait_for(lambda: jobs(stack, ns), 90, 0.2, what="the first scheduled job")
    job = min(found.values(), key=lambda j: str(j["metadata"]["name"]))
    scheduled = dt.datetime.fromisoformat(job["metadata"]["annotations"][ANNOTATION].replace("Z", "+00:00"))
    # The first minute boundary after the creation (the next one if that crossed a boundary).
    assert scheduled in (first, first + dt.timedelta(minutes=1))
    assert job["metadata"]["annotations"][ANNOTATION] == stamp(scheduled)
    name = f"tick-{minutes(scheduled)}"
    assert job["metadata"]["name"] == name
    cj = wait_for(
        lambda: (c := get(stack, ns, "cronjob", "tick"))["status"].get("lastScheduleTime") and c,
        TIMEOUT,
        0.2,
        what="lastScheduleTime",
    )
    assert cj["status"]["lastScheduleTime"] >= stamp(scheduled)
    finish(batch, ns, name, "Complete", scheduled)
    cj = wait_for(
        lambda: (c := get(stack, ns, "cronjob", "tick"))["status"].get("lastSuccessfulTime") and c,
        TIMEOUT,
        0.2,
        what="lastSuccessfulTime",
    )
    assert name not in {a["name"] for a in cj["status"].get("active", [])}
    assert "SawCompletedJob" in reasons(stack, ns, "tick")
