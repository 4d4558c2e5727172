"""kcm_shared.apis.cron against robfig/cron v3's own cases (spec_test.go TestActivation and
TestNext, on five fields: their seconds field is always 0 here) and its parser's errors."""

from __future__ import annotations

import datetime as dt
import zoneinfo

import pytest
from kcm_shared.apimachinery import goduration
from kcm_shared.apis import cron

NY = zoneinfo.ZoneInfo("America/New_York")


def at(text: str) -> dt.datetime:
    """robfig's getTime: `Mon Jul 9 15:00 2012` (UTC), or an RFC 3339-ish time in New York."""
    for fmt in ("%a %b %d %H:%M %Y", "%a %b %d %H:%M:%S %Y"):
        try:
            return dt.datetime.strptime(text, fmt).replace(tzinfo=dt.UTC)
        except ValueError:
            pass
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S%z").astimezone(NY)


@pytest.mark.parametrize(
    ("time", "spec", "expected"),
    [
        ("Mon Jul 9 15:00 2012", "0/15 * * * *", True),
        ("Mon Jul 9 15:45 2012", "0/15 * * * *", True),
        ("Mon Jul 9 15:40 2012", "0/15 * * * *", False),
        ("Mon Jul 9 15:05 2012", "5/15 * * * *", True),
        ("Mon Jul 9 15:20 2012", "5/15 * * * *", True),
        ("Mon Jul 9 15:50 2012", "5/15 * * * *", True),
        ("Sun Jul 15 15:00 2012", "0/15 * * Jul *", True),
        ("Sun Jul 15 15:00 2012", "0/15 * * Jun *", False),
        ("Sun Jul 15 08:30 2012", "30 08 ? Jul Sun", True),
        ("Sun Jul 15 08:30 2012", "30 08 15 Jul ?", True),
        ("Mon Jul 16 08:30 2012", "30 08 ? Jul Sun", False),
        ("Mon Jul 16 08:30 2012", "30 08 15 Jul ?", False),
        ("Mon Jul 9 15:00 2012", "@hourly", True),
        ("Mon Jul 9 15:04 2012", "@hourly", False),
        ("Mon Jul 9 15:00 2012", "@daily", False),
        ("Mon Jul 9 00:00 2012", "@daily", True),
        ("Mon Jul 9 00:00 2012", "@weekly", False),
        ("Sun Jul 8 00:00 2012", "@weekly", True),
        ("Sun Jul 8 01:00 2012", "@weekly", False),
        ("Sun Jul 8 00:00 2012", "@monthly", False),
        ("Sun Jul 1 00:00 2012", "@monthly", True),
        ("Tue Jan 1 00:00 2013", "@yearly", True),
        ("Tue Jan 1 00:00 2013", "@annually", True),
        ("Sun Jul 1 00:00 2012", "@annually", False),
        # Day of month and day of week both restricted: either matches.
        ("Sun Jul 15 00:00 2012", "* * 1,15 * Sun", True),
        ("Fri Jun 15 00:00 2012", "* * 1,15 * Sun", True),
        ("Wed Aug 1 00:00 2012", "* * 1,15 * Sun", True),
        ("Sun Jul 15 00:00 2012", "* * */10 * Sun", True),
        # One of them a star (or `?`, or a star with step 1): both must match.
        ("Sun Jul 15 00:00 2012", "* * * * Mon", False),
        ("Mon Jul 9 00:00 2012", "* * 1,15 * *", False),
        ("Sun Jul 15 00:00 2012", "* * 1,15 * *", True),
        ("Sun Jul 15 00:00 2012", "* * */2 * Sun", True),
        ("Mon Jul 16 00:00 2012", "* * */1 * Sun", False),
        ("Mon Jul 16 00:00 2012", "* * ? * Sun", False),
        ("Mon Jul 16 00:00 2012", "* * 1-31 * Sun", True),
    ],
)
def test_activation(time: str, spec: str, expected: bool) -> None:
    schedule = cron.parse_standard(spec)
    moment = at(time)
    assert (schedule.next(moment - dt.timedelta(seconds=1)) == moment) is expected


@pytest.mark.parametrize(
    ("time", "spec", "expected"),
    [
        ("Mon Jul 9 14:45 2012", "0/15 * * * *", "Mon Jul 9 15:00 2012"),
        ("Mon Jul 9 14:59 2012", "0/15 * * * *", "Mon Jul 9 15:00 2012"),
        ("Mon Jul 9 14:59:59 2012", "0/15 * * * *", "Mon Jul 9 15:00 2012"),
        ("Mon Jul 9 15:45 2012", "20-35/15 * * * *", "Mon Jul 9 16:20 2012"),
        ("Mon Jul 9 23:46 2012", "*/15 * * * *", "Tue Jul 10 00:00 2012"),
        ("Mon Jul 9 23:45 2012", "20-35/15 * * * *", "Tue Jul 10 00:20 2012"),
        ("Mon Jul 9 23:35:51 2012", "20-35/15 * * * *", "Tue Jul 10 00:20 2012"),
        ("Mon Jul 9 23:35:51 2012", "20-35/15 1/2 * * *", "Tue Jul 10 01:20 2012"),
        ("Mon Jul 9 23:35:51 2012", "20-35/15 10-12 * * *", "Tue Jul 10 10:20 2012"),
        ("Mon Jul 9 23:35:51 2012", "20-35/15 1/2 */2 * *", "Thu Jul 11 01:20 2012"),
        ("Mon Jul 9 23:35:51 2012", "20-35/15 * 9-20 * *", "Tue Jul 10 00:20 2012"),
        ("Mon Jul 9 23:35:51 2012", "20-35/15 * 9-20 Jul *", "Tue Jul 10 00:20 2012"),
        ("Mon Jul 9 23:35 2012", "0 0 9 Apr-Oct ?", "Thu Aug 9 00:00 2012"),
        # v3: a star with a step is no star, so day of month OR day of week.
        ("Mon Jul 9 23:35 2012", "0 0 */5 Apr,Aug,Oct Mon", "Wed Aug 1 00:00 2012"),
        ("Mon Jul 9 23:35 2012", "0 0 */5 Oct Mon", "Mon Oct 1 00:00 2012"),
        ("Mon Jul 9 23:35 2012", "0 0 * Feb Mon", "Mon Feb 4 00:00 2013"),
        ("Mon Jul 9 23:35 2012", "0 0 * Feb Mon/2", "Fri Feb 1 00:00 2013"),
        ("Mon Dec 31 23:59:45 2012", "* * * * *", "Tue Jan 1 00:00:00 2013"),
        ("Mon Jul 9 23:35 2012", "0 0 29 Feb ?", "Mon Feb 29 00:00 2016"),
        # Daylight saving time in the time's own zone: 2:30 never happened on 11 Mar 2012 ...
        ("2012-03-11T00:00:00-0500", "30 2 11 Mar ?", "2013-03-11T02:30:00-0400"),
        ("2012-11-04T00:00:00-0400", "30 2 04 Nov ?", "2012-11-04T02:30:00-0500"),
        # ... and 1:30 happened twice on 4 Nov 2012: robfig runs both.
        ("2012-11-04T01:45:00-0400", "30 1 04 Nov ?", "2012-11-04T01:30:00-0500"),
        # Hourly and nightly jobs across both changes.
        ("2012-03-11T00:00:00-0500", "0 * * * ?", "2012-03-11T01:00:00-0500"),
        ("2012-03-11T01:00:00-0500", "0 * * * ?", "2012-03-11T03:00:00-0400"),
        ("2012-03-11T03:00:00-0400", "0 * * * ?", "2012-03-11T04:00:00-0400"),
        ("2012-03-11T00:00:00-0500", "0 1 * * ?", "2012-03-11T01:00:00-0500"),
        ("2012-03-11T01:00:00-0500", "0 1 * * ?", "2012-03-12T01:00:00-0400"),
        ("2012-03-11T00:00:00-0500", "0 2 * * ?", "2012-03-12T02:00:00-0400"),
        ("2012-11-04T00:00:00-0400", "0 * * * ?", "2012-11-04T01:00:00-0400"),
        ("2012-11-04T01:00:00-0400", "0 * * * ?", "2012-11-04T01:00:00-0500"),
        ("2012-11-04T01:00:00-0500", "0 * * * ?", "2012-11-04T02:00:00-0500"),
        ("2012-11-04T00:00:00-0400", "0 1 * * ?", "2012-11-04T01:00:00-0400"),
        ("2012-11-04T01:00:00-0400", "0 1 * * ?", "2012-11-04T01:00:00-0500"),
        ("2012-11-04T01:00:00-0500", "0 1 * * ?", "2012-11-05T01:00:00-0500"),
        ("2012-11-04T00:00:00-0400", "0 2 * * ?", "2012-11-04T02:00:00-0500"),
        ("2012-11-04T02:00:00-0500", "0 2 * * ?", "2012-11-05T02:00:00-0500"),
        ("2012-11-04T00:00:00-0400", "0 3 * * ?", "2012-11-04T03:00:00-0500"),
        ("2012-11-04T03:00:00-0500", "0 3 * * ?", "2012-11-05T03:00:00-0500"),
    ],
)
def test_next(time: str, spec: str, expected: str) -> None:
    assert cron.parse_standard(spec).next(at(time)) == at(expected)


@pytest.mark.parametrize("spec", ["0 0 30 Feb ?", "0 0 31 Apr ?", "59 23 31 2 *", ", * * * *"])
def test_unsatisfiable_schedules_have_no_next_time(spec: str) -> None:
    assert cron.parse_standard(spec).next(at("Mon Jul 9 23:35 2012")) is None


def test_time_zone_prefix_and_local_zone() -> None:
    start = dt.datetime(2026, 1, 15, 12, 0, tzinfo=dt.UTC)
    rome = cron.parse_standard("TZ=Europe/Rome 0 9 * * *")
    assert rome.next(start) == dt.datetime(2026, 1, 16, 8, 0, tzinfo=dt.UTC)  # 09:00 CET
    tokyo = zoneinfo.ZoneInfo("Asia/Tokyo")
    local = cron.parse_standard("0 9 * * *", tokyo)
    assert local.next(start) == dt.datetime(2026, 1, 16, 0, 0, tzinfo=dt.UTC)  # 09:00 JST
    assert cron.parse_standard("CRON_TZ=UTC 0 9 * * *").next(start) == dt.datetime(
        2026, 1, 16, 9, 0, tzinfo=dt.UTC
    )


@pytest.mark.parametrize(
    ("spec", "seconds"),
    [("@every 1h", 3600), ("@every 1h30m", 5400), ("@every 1.5s", 1), ("@every 10ms", 1), ("@every -5m", 1)],
)
def test_every(spec: str, seconds: int) -> None:
    start = dt.datetime(2026, 1, 15, 12, 0, 0, 250000, tzinfo=dt.UTC)
    expected = dt.datetime(2026, 1, 15, 12, 0, tzinfo=dt.UTC) + dt.timedelta(seconds=seconds)
    assert cron.parse_standard(spec).next(start) == expected


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ("", "empty spec string"),
        ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
        ("0 * * * * *", "expected exactly 5 fields, found 6: [0 * * * * *]"),
        ("60 * * * *", "end of range (60) above maximum (59): 60"),
        ("* 24 * * *", "end of range (24) above maximum (23): 24"),
        ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
        ("* * * 13 *", "end of range (13) above maximum (12): 13"),
        ("* * * * 7", "end of range (7) above maximum (6): 7"),
        ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
        ("*/0 * * * *", "step of range should be a positive number: */0"),
        ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
        ("1/2/3 * * * *", "too many slashes: 1/2/3"),
        ("x * * * *", 'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax'),
        ("* * * foo *", 'failed to parse int from foo: strconv.Atoi: parsing "foo": invalid syntax'),
        ("*/x * * * *", 'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax'),
        ("@sometimes", "unrecognized descriptor: @sometimes"),
        ("@every", "unrecognized descriptor: @every"),
        ("@every x", 'failed to parse duration @every x: time: invalid duration "x"'),
        ("@every 5", 'failed to parse duration @every 5: time: missing unit in duration "5"'),
        ("@every 2d", 'failed to parse duration @every 2d: time: unknown unit "d" in duration "2d"'),
        ("TZ=Mars/Base 0 * * * *", "provided bad location Mars/Base: unknown time zone Mars/Base"),
    ],
)
def test_parse_errors(spec: str, error: str) -> None:
    with pytest.raises(cron.ParseError) as exc:
        cron.parse_standard(spec)
    assert str(exc.value) == error


@pytest.mark.parametrize(
    ("spec", "equivalent"),
    [
        ("0 0 1 jan ?", "0 0 1 1 *"),
        ("0 0 * * SUN-sat", "0 0 * * 0-6"),
        ("0 0 * * Mon,WED", "0 0 * * 1,3"),
        ("0 12 * Jan-Mar/2 *", "0 12 * 1,3 *"),
        ("@midnight", "@daily"),
    ],
)
def test_names_and_descriptors(spec: str, equivalent: str) -> None:
    assert cron.parse_standard(spec) == cron.parse_standard(equivalent)


def test_go_durations() -> None:
    assert goduration.parse("1h2m3.5s") == 3_723_500_000_000
    assert goduration.parse("-1.5h") == -5_400_000_000_000
    assert goduration.parse("0") == 0
    assert goduration.parse("300ms") == 300_000_000
    assert goduration.parse("2\u00b5s") == goduration.parse("2us") == 2_000
