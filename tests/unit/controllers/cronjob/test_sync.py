"""The cronjob controller's sync against the testing kit's fake API server and caches (upstream's
cronjob_controllerv2_test.go scenarios that the end-to-end test cannot provoke: API errors,
someone else's Job holding the name, a terminating namespace, deletes of Jobs already gone)."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from kcm_controllers.cronjob import controller as cronjob_controller
from kcm_controllers.cronjob import utils
from kcm_shared.client import kubeclient
from kcm_shared.testing import caches, fakeclient, recorders

NOW = dt.datetime(2026, 11, 24, 10, 30, 20, tzinfo=dt.UTC)
DUE = dt.datetime(2026, 11, 24, 10, 30, tzinfo=dt.UTC)  # `* * * * *`: the minute just begun
JOB_NAME = f"cj-{int(DUE.timestamp()) // 60}"


def cronjob(**spec: Any) -> utils.CronJobView:
    doc = {
        "kind": "CronJob",
        "apiVersion": "batch/v1",
        "metadata": {
            "name": "cj",
            "namespace": "ns",
            "uid": "cj-uid",
            "resourceVersion": "7",
            "creationTimestamp": "2026-11-24T10:00:00Z",
        },
        "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {}}}, **spec},
        "status": {"lastScheduleTime": "2026-11-24T10:29:00Z"},
    }
    return msgspec.convert(doc, utils.CronJobView)


def job(name: str, condition: str | None = None, start: str = "2026-11-24T10:00:00Z") -> utils.JobView:
    conditions = [{"type": condition, "status": "True"}] if condition else []
    doc = {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"{name}-uid",
            "ownerReferences": [{"kind": "CronJob", "name": "cj", "uid": "cj-uid", "controller": True}],
        },
        "status": {"conditions": conditions, "startTime": start},
    }
    return msgspec.convert(doc, utils.JobView)


CRONJOB_PATH = "/apis/batch/v1/namespaces/ns/cronjobs/cj"
JOBS = "/apis/batch/v1/namespaces/ns/jobs"


def doc_of(view: Any) -> dict[str, Any]:
    doc: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(view))
    return doc


def controller(
    cj: utils.CronJobView,
    jobs: list[utils.JobView],
    client: fakeclient.FakeClient,
    now: Callable[[], dt.datetime],
) -> tuple[cronjob_controller.CronJobController, recorders.RecordingEventRecorder]:
    """A controller whose caches hold `cj` and `jobs`; the API server holds them too unless the
    test put something else at their paths."""
    for path, view in [(CRONJOB_PATH, cj), *((f"{JOBS}/{j.metadata.name}", j) for j in jobs)]:
        if path not in client.objects:
            client.add(path, doc_of(view))
    cronjobs = caches.new(cronjob_controller.CRONJOBS, utils.CronJobView)
    cronjobs.seed(cj)
    cached_jobs = caches.new(cronjob_controller.JOBS, utils.JobView)
    for j in jobs:
        cached_jobs.seed(j)
    recorder = recorders.RecordingEventRecorder()
    cjc = cronjob_controller.CronJobController(
        client, cronjobs, cached_jobs, lambda key: None, lambda key, delay: None, recorder, now=now
    )
    cjc.local_zone = dt.UTC
    return cjc, recorder


def run(
    cj: utils.CronJobView, jobs: list[utils.JobView], client: fakeclient.FakeClient
) -> tuple[Any, recorders.RecordingEventRecorder]:
    cjc, recorder = controller(cj, jobs, client, lambda: NOW)
    try:
        return asyncio.run(cjc.sync("ns/cj")), recorder
    except Exception as exc:
        return exc, recorder


def writes(client: fakeclient.FakeClient) -> list[tuple[str, str]]:
    """(verb, last segment of the path) of each write."""
    return [(verb, path.rsplit("/", 1)[-1]) for verb, path, _ in client.calls(*fakeclient.WRITES)]


def test_a_due_start_creates_the_job_writes_status_and_requeues_for_the_next_minute() -> None:
    client = fakeclient.FakeClient()
    result, recorder = run(cronjob(), [], client)
    assert writes(client) == [("create", "jobs"), ("patch", "status")]
    assert client.calls()[0][2]["metadata"]["name"] == JOB_NAME
    # The start is what the latency goal is about: ahead of other requests waiting on the limit.
    assert [a.priority for a in client.actions if a.verb == "create"] == [kubeclient.Priority.HIGH]
    patch = client.calls()[1][2]
    assert patch["metadata"] == {"resourceVersion": "7"}
    assert patch["status"]["lastScheduleTime"] == "2026-11-24T10:30:00Z"
    assert patch["status"]["active"][0]["name"] == JOB_NAME
    assert recorder.seen() == [("Normal", "SuccessfulCreate", f"Created job {JOB_NAME}")]
    assert result.requeue_after == pytest.approx(40.1)


def test_someone_elses_job_holding_the_name_is_left_alone() -> None:
    # The name is held: the create meets 409 AlreadyExists.
    client = fakeclient.FakeClient(
        {f"{JOBS}/{JOB_NAME}": {"metadata": {"name": JOB_NAME, "uid": "other", "ownerReferences": []}}}
    )
    result, recorder = run(cronjob(), [], client)
    assert writes(client) == [("create", "jobs")]  # no status write
    assert recorder.seen() == []
    assert result.requeue_after == pytest.approx(40.1)


def test_a_failed_create_is_reported_and_retried() -> None:
    client = fakeclient.FakeClient()
    client.fail("create", JOBS, kubeclient.ApiError(500, "InternalError", "boom"))
    result, recorder = run(cronjob(), [], client)
    assert isinstance(result, kubeclient.ApiError)
    assert recorder.seen() == [("Warning", "FailedCreate", "Error creating job: boom")]
    assert writes(client) == [("create", "jobs")]


def test_a_terminating_namespace_is_retried_without_an_event() -> None:
    status = {"details": {"causes": [{"reason": "NamespaceTerminating"}]}}
    client = fakeclient.FakeClient()
    client.fail("create", JOBS, kubeclient.ApiError(403, "Forbidden", "terminating", status))
    result, recorder = run(cronjob(), [], client)
    assert isinstance(result, kubeclient.ApiError)
    assert recorder.seen() == []


def test_history_deletes_in_the_background_and_a_gone_job_is_no_failure() -> None:
    jobs = [
        job("old", "Complete", "2026-11-24T09:00:00Z"),
        job("gone", "Complete", "2026-11-24T09:10:00Z"),
        job("new", "Complete", "2026-11-24T09:20:00Z"),
    ]
    client = fakeclient.FakeClient()
    client.fail("delete", f"{JOBS}/gone", kubeclient.ApiError(404, "NotFound", "gone"))
    _, recorder = run(cronjob(successfulJobsHistoryLimit=1, suspend=True), jobs, client)
    deletes = [(p.rsplit("/", 1)[-1], body) for _, p, body in client.calls("delete")]
    assert [name for name, _ in deletes] == ["old", "gone"]
    assert all(body["propagationPolicy"] == "Background" for _, body in deletes)
    assert recorder.reasons() == ["SuccessfulDelete"]


def test_a_refused_delete_is_reported_and_keeps_the_job() -> None:
    client = fakeclient.FakeClient()
    client.fail("delete", f"{JOBS}/old", kubeclient.ApiError(500, "InternalError", "no"))
    _, recorder = run(cronjob(failedJobsHistoryLimit=0, suspend=True), [job("old", "Failed")], client)
    assert recorder.seen() == [("Warning", "FailedDelete", "Deleted job: no")]
    assert ("patch", "status") not in writes(client)


def test_an_unexpected_job_is_checked_against_a_fresh_read() -> None:
    fresh = msgspec.to_builtins(cronjob())
    fresh["status"]["active"] = [{"kind": "Job", "namespace": "ns", "name": "running", "uid": "running-uid"}]
    client = fakeclient.FakeClient({CRONJOB_PATH: fresh})
    _, recorder = run(cronjob(suspend=True), [job("running")], client)
    assert "UnexpectedJob" not in recorder.reasons()
    _, recorder = run(cronjob(suspend=True), [job("running")], fakeclient.FakeClient())
    assert recorder.reasons() == ["UnexpectedJob"]


def test_the_requeue_counts_from_the_start_of_the_sync() -> None:
    times = iter([NOW, NOW + dt.timedelta(seconds=3)])
    cjc, _ = controller(cronjob(), [], fakeclient.FakeClient(), lambda: next(times))
    result = asyncio.run(cjc.sync("ns/cj"))
    assert result is not None and result.requeue_after == pytest.approx(37.1)


# Upstream's TestControllerV2SyncCronJob, its "never ran" rows: created just before the hour,
# scheduled on the hour; noDead / shortDead (10 s) / longDead (1,000,000 s) deadlines.
BEFORE_THE_HOUR = dt.datetime(2016, 5, 19, 9, 59, tzinfo=dt.UTC)
AFTER_THE_HOUR = dt.datetime(2016, 5, 19, 10, 1, tzinfo=dt.UTC)
HOUR, MINUTE = 3600.0, 60.0


@pytest.mark.parametrize(
    ("name", "spec", "now", "create", "warnings", "requeue"),
    [
        (
            "not valid schedule",
            {"schedule": "obvious error schedule"},
            BEFORE_THE_HOUR,
            False,
            ["UnparseableSchedule"],
            None,
        ),
        (
            "not valid time zone",
            {"timeZone": "bad timezone"},
            BEFORE_THE_HOUR,
            False,
            ["UnknownTimeZone"],
            None,
        ),
        ("not time, A", {}, BEFORE_THE_HOUR, False, [], MINUTE),
        ("not time, F", {"concurrencyPolicy": "Forbid"}, BEFORE_THE_HOUR, False, [], MINUTE),
        ("not time, R", {"concurrencyPolicy": "Replace"}, BEFORE_THE_HOUR, False, [], MINUTE),
        ("not time in zone", {"timeZone": "America/New_York"}, BEFORE_THE_HOUR, False, [], MINUTE),
        ("is time, A", {}, AFTER_THE_HOUR, True, [], HOUR - MINUTE),
        ("is time, F", {"concurrencyPolicy": "Forbid"}, AFTER_THE_HOUR, True, [], HOUR - MINUTE),
        ("is time, R", {"concurrencyPolicy": "Replace"}, AFTER_THE_HOUR, True, [], HOUR - MINUTE),
        ("is time in zone", {"timeZone": "America/New_York"}, AFTER_THE_HOUR, True, [], HOUR - MINUTE),
        (
            "is time in zone, but TZ is also set in schedule",
            {"timeZone": "America/New_York", "schedule": "TZ=UTC 0 * * * ?"},
            AFTER_THE_HOUR,
            True,
            ["UnsupportedSchedule"],
            HOUR - MINUTE,
        ),
        ("is time, suspended", {"suspend": True}, AFTER_THE_HOUR, False, [], None),
        (
            "is time, past deadline",
            {"startingDeadlineSeconds": 10},
            AFTER_THE_HOUR + dt.timedelta(minutes=11),
            False,
            [],
            HOUR - 12 * MINUTE,
        ),
        (
            "is time, not past deadline",
            {"startingDeadlineSeconds": 1_000_000},
            AFTER_THE_HOUR,
            True,
            [],
            HOUR - MINUTE,
        ),
    ],
)
def test_never_ran(
    name: str,
    spec: dict[str, Any],
    now: dt.datetime,
    create: bool,
    warnings: list[str],
    requeue: float | None,
) -> None:
    doc = msgspec.to_builtins(cronjob(**{"schedule": "0 * * * ?", **spec}))
    doc["metadata"]["creationTimestamp"] = "2016-05-19T09:59:00Z"
    doc["status"] = {}
    cj = msgspec.convert(doc, utils.CronJobView)
    client = fakeclient.FakeClient()
    cjc, recorder = controller(cj, [], client, lambda: now)
    result = asyncio.run(cjc.sync("ns/cj"))
    assert (("create", "jobs") in writes(client)) is create
    assert (("patch", "status") in writes(client)) is create
    assert [r for t, r, _ in recorder.seen() if t == "Warning"] == warnings
    if requeue is None:
        assert result is None
    else:
        assert result is not None and result.requeue_after == pytest.approx(
            requeue + utils.NEXT_SCHEDULE_DELTA
        )


# Its "still active" and "long overdue" rows: created at 08:59, last scheduled 09:01, when
# it started a Job that is still running (active) or finished (done, not in the list).
PRIOR = dt.datetime(2016, 5, 19, 9, 1, tzinfo=dt.UTC)
WEEK_AFTER = dt.datetime(2016, 5, 26, 10, 0, tzinfo=dt.UTC)
PRIOR_JOB = f"cj-{int(PRIOR.timestamp()) // 60}"


@pytest.mark.parametrize(
    ("name", "active", "spec", "now", "get_error", "create", "delete", "after", "warnings", "requeue"),
    [
        ("still active, not time, A", True, {}, BEFORE_THE_HOUR, False, False, False, 1, [], MINUTE),
        (
            "still active, not time, F",
            True,
            {"concurrencyPolicy": "Forbid"},
            BEFORE_THE_HOUR,
            False,
            False,
            False,
            1,
            [],
            MINUTE,
        ),
        (
            "still active, not time, R",
            True,
            {"concurrencyPolicy": "Replace"},
            BEFORE_THE_HOUR,
            False,
            False,
            False,
            1,
            [],
            MINUTE,
        ),
        ("still active, is time, A", True, {}, AFTER_THE_HOUR, False, True, False, 2, [], HOUR - MINUTE),
        (
            "still active, is time, F",
            True,
            {"concurrencyPolicy": "Forbid"},
            AFTER_THE_HOUR,
            False,
            False,
            False,
            1,
            [],
            HOUR - MINUTE,
        ),
        (
            "still active, is time, R",
            True,
            {"concurrencyPolicy": "Replace"},
            AFTER_THE_HOUR,
            False,
            True,
            True,
            1,
            [],
            HOUR - MINUTE,
        ),
        (
            "still active, is time, get job failed, R",
            True,
            {"concurrencyPolicy": "Replace"},
            AFTER_THE_HOUR,
            True,
            False,
            False,
            1,
            ["FailedGet"],
            None,
        ),
        (
            "still active, is time, suspended",
            True,
            {"suspend": True},
            AFTER_THE_HOUR,
            False,
            False,
            False,
            1,
            [],
            None,
        ),
        (
            "still active, is time, past deadline",
            True,
            {"startingDeadlineSeconds": 10},
            AFTER_THE_HOUR,
            False,
            False,
            False,
            1,
            [],
            HOUR - MINUTE,
        ),
        (
            "still active, is time, not past deadline",
            True,
            {"startingDeadlineSeconds": 1_000_000},
            AFTER_THE_HOUR,
            False,
            True,
            False,
            2,
            [],
            HOUR - MINUTE,
        ),
        (
            "long overdue, not past deadline, A",
            False,
            {"startingDeadlineSeconds": 1_000_000},
            WEEK_AFTER,
            False,
            True,
            False,
            1,
            ["TooManyMissedTimes"],
            HOUR,
        ),
        (
            "long overdue, not past deadline, F",
            False,
            {"startingDeadlineSeconds": 1_000_000, "concurrencyPolicy": "Forbid"},
            WEEK_AFTER,
            False,
            True,
            False,
            1,
            ["TooManyMissedTimes"],
            HOUR,
        ),
        (
            "long overdue, no deadline, R",
            False,
            {"concurrencyPolicy": "Replace"},
            WEEK_AFTER,
            False,
            True,
            False,
            1,
            ["TooManyMissedTimes"],
            HOUR,
        ),
        (
            "long overdue, past medium deadline, A",
            False,
            {"startingDeadlineSeconds": 7200},
            WEEK_AFTER,
            False,
            True,
            False,
            1,
            [],
            HOUR,
        ),
        (
            "long overdue, past short deadline, F",
            False,
            {"startingDeadlineSeconds": 10, "concurrencyPolicy": "Forbid"},
            WEEK_AFTER,
            False,
            True,
            False,
            1,
            [],
            HOUR,
        ),
    ],
)
def test_ran_previously(
    name: str,
    active: bool,
    spec: dict[str, Any],
    now: dt.datetime,
    get_error: bool,
    create: bool,
    delete: bool,
    after: int,
    warnings: list[str],
    requeue: float | None,
) -> None:
    doc = msgspec.to_builtins(cronjob(**{"schedule": "0 * * * ?", **spec}))
    doc["metadata"]["creationTimestamp"] = "2016-05-19T08:59:00Z"
    previous = job(PRIOR_JOB, None if active else "Complete", start="2016-05-19T09:01:00Z")
    ref = {
        "kind": "Job",
        "namespace": "ns",
        "name": PRIOR_JOB,
        "uid": previous.metadata.uid,
        "apiVersion": "batch/v1",
    }
    doc["status"] = {"lastScheduleTime": "2016-05-19T09:01:00Z", "active": [ref] if active else []}
    cj = msgspec.convert(doc, utils.CronJobView)
    client = fakeclient.FakeClient()
    if get_error:
        client.fail(
            "get", f"{JOBS}/{PRIOR_JOB}", kubeclient.ApiError(400, "BadRequest", "request is invalid")
        )
    cjc, recorder = controller(cj, [previous], client, lambda: now)
    try:
        result = asyncio.run(cjc.sync("ns/cj"))
    except kubeclient.ApiError:
        result = None
        assert get_error
    assert (("create", "jobs") in writes(client)) is create
    assert (("delete", PRIOR_JOB) in writes(client)) is delete
    patches = [body for _, _, body in client.calls("patch")]
    written = patches[-1]["status"]["active"] or [] if patches else doc["status"]["active"]
    assert len(written) == after
    assert [r for t, r, _ in recorder.seen() if t == "Warning"] == warnings
    if requeue is None:
        assert result is None
    else:
        assert result is not None and result.requeue_after == pytest.approx(
            requeue + utils.NEXT_SCHEDULE_DELTA
        )


def test_a_schedule_change_waits_for_the_new_schedules_next_time() -> None:
    # Upstream's updateCronJob: 10:30 of the new schedule has just passed and starts no Job;
    # the key comes back at 11:30 (plus upstream's 100 ms).
    old = cronjob(schedule="0 * * * *")
    new = cronjob(schedule="30 * * * *")
    cjc, recorder = controller(old, [], fakeclient.FakeClient(), lambda: NOW)
    now_, later = [], []
    cjc.enqueue, cjc.enqueue_after = now_.append, lambda key, delay: later.append((key, delay))
    cjc.update_cronjob(old, new)
    assert now_ == [] and later == [("ns/cj", pytest.approx(3580.1))]
    cjc.update_cronjob(new, cronjob(schedule="30 * * * *", suspend=True))
    assert now_ == ["ns/cj"]  # any other change: at once
    cjc.update_cronjob(new, cronjob(schedule="61 * * * *"))
    assert len(later) == 1
    assert recorder.seen() == [
        ("Warning", "UnParseableCronJobSchedule", "unparseable schedule for cronjob: 61 * * * *")
    ]
