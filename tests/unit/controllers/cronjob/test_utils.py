"""The cronjob controller's pure helpers against upstream's utils_test.go tables
(TestMostRecentScheduleTime, TestNextScheduleTimeDuration, TestNextScheduleTime,
TestGetJobFromTemplate2, TestByJobStartTime)."""

from __future__ import annotations

import datetime as dt
import zoneinfo

import pytest
from kcm_controllers.cronjob import utils
from kcm_shared.apimachinery import codec
from kcm_shared.apis import cron

TOP = dt.datetime(2016, 5, 19, 10, 0, tzinfo=dt.UTC)  # upstream's topOfTheHour, a Thursday


def after(**delta: float) -> dt.datetime:
    return TOP + dt.timedelta(**delta)


def cronjob(
    schedule: str,
    created: dt.datetime = TOP,
    last: dt.datetime | None = None,
    deadline: int | None = None,
    zone: str | None = None,
) -> utils.CronJobView:
    return utils.CronJobView(
        metadata=codec.ObjectMeta(
            name="mycronjob", namespace="snazzycats", uid="1a2b3c", creation_timestamp=created
        ),
        spec=utils.CronJobSpec(schedule=schedule, starting_deadline_seconds=deadline, time_zone=zone),
        status=utils.CronJobStatus(last_schedule_time=last),
    )


def parse(cj: utils.CronJobView) -> cron.Schedule:
    return cron.parse_standard(utils.format_schedule(cj), dt.UTC)


FEW, MANY, NONE = utils.Missed.FEW, utils.Missed.MANY, utils.Missed.NONE


@pytest.mark.parametrize(
    ("name", "cj", "include_deadline", "now", "earliest", "recent", "missed"),
    [
        ("now before next schedule", cronjob("0 * * * *"), False, after(seconds=30), TOP, None, NONE),
        (
            "now just after next schedule",
            cronjob("0 * * * *"),
            False,
            after(minutes=61),
            TOP,
            after(minutes=60),
            NONE,
        ),
        (
            "missed 5 schedules",
            cronjob("0 * * * *", created=after(seconds=10)),
            False,
            after(minutes=301),
            after(seconds=10),
            after(minutes=300),
            FEW,
        ),
        (
            "complex schedule",
            cronjob("30 6-16/4 * * 1-5", last=after(minutes=30)),
            False,
            after(hours=24, minutes=31),
            after(minutes=30),
            after(hours=24, minutes=30),
            FEW,
        ),
        (
            # Upstream's estimate jumps past Friday 12:30 here; kept as upstream computes it.
            "another complex schedule",
            cronjob("30 10,11,12 * * 1-5", last=after(minutes=30)),
            False,
            after(hours=30, minutes=30),
            after(minutes=30),
            None,
            FEW,
        ),
        (
            "complex schedule with longer diff between executions",
            cronjob("30 6-16/4 * * 1-5", last=after(minutes=30)),
            False,
            after(hours=96, minutes=31),
            after(minutes=30),
            after(hours=96, minutes=30),
            FEW,
        ),
        (
            "complex schedule with shorter diff between executions",
            cronjob("30 6-16/4 * * 1-5"),
            False,
            after(hours=24, minutes=31),
            TOP,
            after(hours=24, minutes=30),
            FEW,
        ),
        (
            "@every schedule",
            cronjob("@every 1h", created=after(minutes=-59), last=after(minutes=1), deadline=10),
            False,
            after(days=7),
            after(minutes=1),
            after(days=6, hours=23, minutes=1),
            MANY,
        ),
        (
            "earliestTime being CreationTimestamp and LastScheduleTime",
            cronjob("0 * * * *", last=TOP),
            False,
            after(seconds=30),
            TOP,
            None,
            NONE,
        ),
        (
            "earliestTime being LastScheduleTime",
            cronjob("*/5 * * * *", last=after(minutes=30)),
            False,
            after(minutes=31),
            after(minutes=30),
            None,
            NONE,
        ),
        (
            "earliestTime being LastScheduleTime (within StartingDeadlineSeconds)",
            cronjob("*/5 * * * *", last=after(minutes=30), deadline=60),
            False,
            after(minutes=31),
            after(minutes=30),
            None,
            NONE,
        ),
        (
            "earliestTime being LastScheduleTime (outside StartingDeadlineSeconds)",
            cronjob("*/5 * * * *", last=after(minutes=30), deadline=60),
            True,
            after(minutes=32),
            after(minutes=31),
            None,
            NONE,
        ),
    ],
)
def test_most_recent_schedule_time(
    name: str,
    cj: utils.CronJobView,
    include_deadline: bool,
    now: dt.datetime,
    earliest: dt.datetime,
    recent: dt.datetime | None,
    missed: utils.Missed,
) -> None:
    assert utils.most_recent_schedule_time(cj, now, parse(cj), include_deadline) == (earliest, recent, missed)


def test_rogue_schedule_is_an_error() -> None:
    cj = cronjob("59 23 31 2 *", created=after(seconds=10))
    with pytest.raises(utils.ScheduleError):
        utils.most_recent_schedule_time(cj, after(hours=1), parse(cj), False)
    with pytest.raises(utils.ScheduleError):
        utils.next_schedule_time(cj, after(hours=1), parse(cj))


@pytest.mark.parametrize(
    ("cj", "now", "expected"),
    [
        (
            cronjob("30 6-16/4 * * 1-5", last=after(minutes=30)),
            after(hours=24, minutes=31),
            3 * 3600 + 59 * 60,
        ),
        (cronjob("30 10,11,12 * * 1-5", last=after(minutes=30)), after(hours=30, minutes=30), 66 * 3600),
        (
            cronjob("0 12 * * 4", last=after(hours=2)),
            after(days=19, hours=1, minutes=30),
            48 * 3600 + 30 * 60,
        ),
        (cronjob("0 12 * * 5"), after(hours=6), 20 * 3600),
    ],
    ids=[
        "complex schedule skipping weekend",
        "another complex schedule skipping weekend",
        "once a week cronjob, missed two runs",
        "no previous run of a cronjob",
    ],
)
def test_next_schedule_delay(cj: utils.CronJobView, now: dt.datetime, expected: float) -> None:
    assert utils.next_schedule_delay(cj, now, parse(cj)) == pytest.approx(
        expected + utils.NEXT_SCHEDULE_DELTA
    )


T1, T2 = TOP, after(hours=1)


@pytest.mark.parametrize(
    ("created", "last", "deadline", "now", "expected"),
    [
        (T1 - dt.timedelta(minutes=10), None, None, T1 - dt.timedelta(minutes=7), None),  # none needed yet
        (T1 - dt.timedelta(minutes=10), None, None, T1 + dt.timedelta(seconds=2), T1),  # one needed
        (T1 - dt.timedelta(minutes=10), T1, None, T1 + dt.timedelta(minutes=2), None),  # started already
        (T1 - dt.timedelta(minutes=10), T1, None, T2 + dt.timedelta(minutes=5), T2),  # the next one needed
        (T1 - dt.timedelta(hours=2), T1 - dt.timedelta(hours=1), None, T2 + dt.timedelta(minutes=5), T2),
        (
            T1 - dt.timedelta(hours=2),
            T1 - dt.timedelta(hours=1),
            None,
            T2 + dt.timedelta(days=10),
            T2 + dt.timedelta(days=10),
        ),
        (
            T1 - dt.timedelta(hours=2),
            T1 - dt.timedelta(hours=1),
            7200,
            T2 + dt.timedelta(days=10),
            T2 + dt.timedelta(days=10),
        ),
    ],
)
def test_next_schedule_time(
    created: dt.datetime,
    last: dt.datetime | None,
    deadline: int | None,
    now: dt.datetime,
    expected: dt.datetime | None,
) -> None:
    cj = cronjob("0 * * * ?", created=created, last=last, deadline=deadline)
    scheduled, _ = utils.next_schedule_time(cj, now, parse(cj))
    assert scheduled == expected


def test_too_many_missed_start_times() -> None:
    cj = cronjob("* * * * *", created=TOP)
    assert utils.next_schedule_time(cj, after(minutes=101), parse(cj)) == (after(minutes=101), True)
    assert utils.next_schedule_time(cj, after(minutes=100), parse(cj)) == (after(minutes=100), False)


def test_a_deadline_skips_older_start_times() -> None:
    cj = cronjob("0 * * * *", last=TOP, deadline=600)
    assert utils.next_schedule_time(cj, after(hours=1, minutes=5), parse(cj)) == (after(hours=1), False)
    assert utils.next_schedule_time(cj, after(hours=1, minutes=11), parse(cj)) == (None, False)


@pytest.mark.parametrize(
    ("zone", "annotation"),
    [
        (None, "2016-05-19T10:00:00Z"),
        ("UTC", "2016-05-19T10:00:00Z"),
        ("Europe/Rome", "2016-05-19T12:00:00+02:00"),
    ],
)
def test_job_from_template(zone: str | None, annotation: str) -> None:
    cj = cronjob("* * * * ?", zone=zone)
    cj.spec.job_template = {
        "metadata": {"labels": {"a": "b"}, "annotations": {"x": "y"}},
        "spec": {"activeDeadlineSeconds": 1, "template": {"spec": {"containers": [{"image": "foo/bar"}]}}},
    }
    job = utils.job_from_template(cj, TOP)
    assert job["metadata"]["name"] == f"mycronjob-{int(TOP.timestamp()) // 60}"
    assert job["metadata"]["labels"] == {"a": "b"}
    assert job["metadata"]["annotations"] == {"x": "y", utils.SCHEDULED_TIMESTAMP_ANNOTATION: annotation}
    assert job["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "name": "mycronjob",
            "uid": "1a2b3c",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert job["spec"] == cj.spec.job_template["spec"]
    assert job["spec"] is not cj.spec.job_template["spec"]


def test_schedules_run_in_the_time_zone() -> None:
    cj = cronjob("0 9 * * *", created=dt.datetime(2026, 7, 1, tzinfo=dt.UTC), zone="America/New_York")
    # 09:00 EDT is 13:00 UTC.
    now = dt.datetime(2026, 7, 1, 13, 0, 5, tzinfo=dt.UTC)
    scheduled, _ = utils.next_schedule_time(cj, now, parse(cj))
    assert scheduled == dt.datetime(2026, 7, 1, 9, 0, tzinfo=zoneinfo.ZoneInfo("America/New_York"))


def job(name: str, start: dt.datetime | None) -> utils.JobView:
    return utils.JobView(metadata=codec.ObjectMeta(name=name), status=utils.JobStatus(start_time=start))


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ([("b", None), ("a", None)], ["a", "b"]),  # both have nil start times
        ([("a", None), ("b", TOP)], ["b", "a"]),  # only the first has a nil start time
        ([("a", TOP), ("b", None)], ["a", "b"]),  # only the second has a nil start time
        ([("b", TOP), ("a", TOP)], ["a", "b"]),  # equal start times
        ([("a", after(days=365)), ("b", TOP)], ["b", "a"]),  # different start times
    ],
)
def test_by_start_time(given: list[tuple[str, dt.datetime | None]], expected: list[str]) -> None:
    jobs = sorted((job(n, s) for n, s in given), key=utils.by_start_time)
    assert [j.metadata.name for j in jobs] == expected


def test_finished_condition() -> None:
    def with_conditions(*conds: tuple[str, str]) -> utils.JobView:
        return utils.JobView(
            status=utils.JobStatus(conditions=[utils.JobCondition(type=t, status=s) for t, s in conds])
        )

    assert utils.finished_condition(with_conditions()) is None
    assert utils.finished_condition(with_conditions(("Complete", "False"))) is None
    assert (
        utils.finished_condition(with_conditions(("SuccessCriteriaMet", "True"), ("Complete", "True")))
        == "Complete"
    )
    assert utils.finished_condition(with_conditions(("Failed", "True"))) == "Failed"


def test_rfc3339_and_status_patch() -> None:
    assert utils.format_rfc3339(dt.datetime(2026, 1, 1, 5, 30, tzinfo=zoneinfo.ZoneInfo("Asia/Kolkata"))) == (
        "2026-01-01T05:30:00+05:30"
    )
    status = utils.Status(last_schedule_time=TOP)
    assert status.patch("42") == {
        "metadata": {"resourceVersion": "42"},
        "status": {"active": None, "lastScheduleTime": "2016-05-19T10:00:00Z", "lastSuccessfulTime": None},
    }
