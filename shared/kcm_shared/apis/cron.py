"""Cron schedules as Kubernetes reads them: robfig/cron v3's `ParseStandard` and `Next`.

Upstream's CronJob controller (pkg/controller/cronjob) and the API server's CronJob
validation (pkg/apis/batch/validation) both parse `spec.schedule` with
github.com/robfig/cron/v3 `ParseStandard`: five fields (minute, hour, day of month, month,
day of week) with `*`, `?`, lists, ranges, steps and the month and weekday names, the
descriptors `@yearly` ... `@hourly`, `@every <Go duration>`, and an optional `TZ=` /
`CRON_TZ=` prefix. This module follows that grammar and its error messages, and `Next` the
library's search, so that every schedule the API server accepts runs at the times upstream
runs it. No Python cron library does: croniter and cronsim accept a weekday 7, neither
reads `@every`, and both decide the day-of-month / day-of-week OR rule differently (robfig
ORs the two unless either field is a bare `*` or `?`, possibly with step 1).

Called by the cronjob controller (kcm_controllers.cronjob) and by the embedded API server's
validation. Times are aware datetimes; a schedule without `TZ=` computes in the `local` zone
it was parsed with (the controller passes the process's, `local_zone()`, as Go's time.Local).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import zoneinfo
from dataclasses import dataclass

from kcm_shared.apimachinery import goduration

UTC = dt.UTC
STAR = 1 << 63  # robfig's starBit: the field was `*` or `?` (step 1); decides the day OR rule
_SECOND = dt.timedelta(seconds=1)
_MINUTE = dt.timedelta(minutes=1)
_HOUR = dt.timedelta(hours=1)
_YEARS_SEARCHED = 5  # robfig gives up (the zero time) after this many years without a match

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


@dataclass(frozen=True)
class _Bounds:
    low: int
    high: int
    names: dict[str, int]


_FIELDS = (
    _Bounds(0, 59, {}),
    _Bounds(0, 23, {}),
    _Bounds(1, 31, {}),
    _Bounds(1, 12, {m: i + 1 for i, m in enumerate(_MONTHS)}),
    _Bounds(0, 6, {d: i for i, d in enumerate(_WEEKDAYS)}),
)
_HOURS, _DOM, _MONTH, _DOW = _FIELDS[1:]


class ParseError(ValueError):
    """A schedule robfig/cron would refuse; the message is the library's."""


def _bits(low: int, high: int, step: int = 1) -> int:
    return sum(1 << i for i in range(low, high + 1, step))


def _all(b: _Bounds) -> int:
    return _bits(b.low, b.high) | STAR


@dataclass(frozen=True)
class SpecSchedule:
    """A five-field schedule as bit sets (robfig SpecSchedule); `zone` None: the given time's."""

    minute: int
    hour: int
    dom: int
    month: int
    dow: int
    zone: dt.tzinfo | None = None

    def next(self, t: dt.datetime) -> dt.datetime | None:
        """The first matching time strictly after `t` (whole seconds, second 0), or None when
        there is none in the next five years (robfig returns the zero time)."""
        zone = self.zone or t.tzinfo or UTC
        # Go's time carries a wall clock and an instant; here the instant is kept in UTC and
        # the wall clock read in `zone` whenever a field is checked.
        t = _in(t.astimezone(UTC).replace(microsecond=0) + _SECOND, zone)
        added = False
        year_limit = t.year + _YEARS_SEARCHED
        while True:  # robfig's `goto WRAP`
            if t.year > year_limit:
                return None
            wrapped = False
            while not 1 << t.month & self.month:
                if not added:
                    added = True
                    t = _go_date(dt.datetime(t.year, t.month, 1), zone)
                t = _go_date(_add_months(t.replace(tzinfo=None), 1), zone)
                if t.month == 1:
                    wrapped = True
                    break
            if wrapped:
                continue
            while not self._day_matches(t):
                if not added:
                    added = True
                    t = _go_date(dt.datetime(t.year, t.month, t.day), zone)
                t = _go_date(t.replace(tzinfo=None) + dt.timedelta(days=1), zone)
                # A day whose midnight a DST change skipped or doubled: back to 0 o'clock.
                if t.hour != 0:
                    t = _add(t, _HOUR * (24 - t.hour) if t.hour > 12 else -_HOUR * t.hour)
                if t.day == 1:
                    wrapped = True
                    break
            if wrapped:
                continue
            while not 1 << t.hour & self.hour:
                if not added:
                    added = True
                    t = _go_date(dt.datetime(t.year, t.month, t.day, t.hour), zone)
                t = _add(t, _HOUR)
                if t.hour == 0:
                    wrapped = True
                    break
            if wrapped:
                continue
            while not 1 << t.minute & self.minute:
                if not added:
                    added = True
                    t = _truncate(t, 60)
                t = _add(t, _MINUTE)
                if t.minute == 0:
                    wrapped = True
                    break
            if wrapped:
                continue
            if t.second != 0:  # standard schedules run at second 0 only
                if not added:
                    added = True
                    t = _truncate(t, 1)
                t = _add(t, _SECOND * (60 - t.second))
                continue  # second 0 of the next minute: robfig wraps
            return t

    def _day_matches(self, t: dt.datetime) -> bool:
        dom = bool(1 << t.day & self.dom)
        dow = bool(1 << (t.isoweekday() % 7) & self.dow)
        if self.dom & STAR or self.dow & STAR:
            return dom and dow
        return dom or dow


@dataclass(frozen=True)
class EverySchedule:
    """`@every <duration>`: a constant delay, whole seconds, at least one (robfig Every)."""

    seconds: int

    def next(self, t: dt.datetime) -> dt.datetime | None:
        return _add(t.replace(microsecond=0), dt.timedelta(seconds=self.seconds))


Schedule = SpecSchedule | EverySchedule


def parse_standard(spec: str, local: dt.tzinfo | None = None) -> Schedule:
    """robfig/cron v3 `ParseStandard`; raises ParseError with the library's message.

    `local` is the zone of a schedule without `TZ=` (robfig's time.Local; None: the zone of
    the time `next` is given)."""
    if not spec:
        raise ParseError("empty spec string")
    zone = local
    if spec.startswith(("TZ=", "CRON_TZ=")):
        space = spec.find(" ")
        name = spec[spec.index("=") + 1 : space if space >= 0 else len(spec)]
        try:
            zone = load_location(name)
        except ParseError as exc:
            raise ParseError(f"provided bad location {name}: {exc}") from None
        if space < 0:
            # robfig slices past the end and panics here; upstream recovers it into an error.
            raise ParseError(f"failed to parse cron schedule {spec!r}: no schedule after the time zone")
        spec = spec[space:].strip()
    if spec.startswith("@"):
        return _descriptor(spec, zone)
    fields = spec.split()
    if len(fields) != 5:
        raise ParseError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
    minute, hour, dom, month, dow = (_field(text, b) for text, b in zip(fields, _FIELDS, strict=True))
    return SpecSchedule(minute, hour, dom, month, dow, zone)


def _descriptor(spec: str, zone: dt.tzinfo | None) -> Schedule:
    every = "@every "
    if spec.startswith(every):
        try:
            nanos = goduration.parse(spec[len(every) :])
        except ValueError as exc:
            raise ParseError(f"failed to parse duration {spec}: {exc}") from None
        # At least a second; whole seconds only.
        return EverySchedule(max(1, nanos // 1_000_000_000))
    m, h, d, mo, w = (1 << b.low for b in _FIELDS)
    table = {
        ("@yearly", "@annually"): (m, h, d, mo, _all(_DOW)),
        ("@monthly",): (m, h, d, _all(_MONTH), _all(_DOW)),
        ("@weekly",): (m, h, _all(_DOM), _all(_MONTH), w),
        ("@daily", "@midnight"): (m, h, _all(_DOM), _all(_MONTH), _all(_DOW)),
        ("@hourly",): (m, _all(_HOURS), _all(_DOM), _all(_MONTH), _all(_DOW)),
    }
    for names, (minute, hour, dom, month, dow) in table.items():
        if spec in names:
            return SpecSchedule(minute, hour, dom, month, dow, zone)
    raise ParseError(f"unrecognized descriptor: {spec}")


def _field(text: str, b: _Bounds) -> int:
    bits = 0
    for expr in (part for part in text.split(",") if part):  # Go's FieldsFunc drops empties
        bits |= _range(expr, b)
    return bits


def _range(expr: str, b: _Bounds) -> int:
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    single = len(low_and_high) == 1
    extra = 0
    if low_and_high[0] in ("*", "?"):
        start, end, extra = b.low, b.high, STAR
    else:
        start = _int_or_name(low_and_high[0], b.names)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _int_or_name(low_and_high[1], b.names)
        else:
            raise ParseError(f"too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _atoi(range_and_step[1])
        if single:  # `N/step` means `N-max/step`
            end = b.high
        if step > 1:
            extra = 0
    else:
        raise ParseError(f"too many slashes: {expr}")
    if start < b.low:
        raise ParseError(f"beginning of range ({start}) below minimum ({b.low}): {expr}")
    if end > b.high:
        raise ParseError(f"end of range ({end}) above maximum ({b.high}): {expr}")
    if start > end:
        raise ParseError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise ParseError(f"step of range should be a positive number: {expr}")
    return _bits(start, end, step) | extra


def _int_or_name(expr: str, names: dict[str, int]) -> int:
    named = names.get(expr.lower())
    return named if named is not None else _atoi(expr)


_INT64 = 1 << 63


def _atoi(expr: str) -> int:
    """robfig's mustParseInt: Go's strconv.Atoi, then no negatives."""
    if not re.fullmatch(r"[+-]?[0-9]+", expr):
        raise ParseError(f'failed to parse int from {expr}: strconv.Atoi: parsing "{expr}": invalid syntax')
    num = int(expr)
    if not -_INT64 <= num < _INT64:
        raise ParseError(
            f'failed to parse int from {expr}: strconv.Atoi: parsing "{expr}": value out of range'
        )
    if num < 0:
        raise ParseError(f"negative number ({num}) not allowed: {expr}")
    return num


def load_location(name: str) -> dt.tzinfo:
    """Go's time.LoadLocation: "" and "UTC" are UTC, "Local" the process's zone, anything
    else an IANA name from the tz database (the `tzdata` package when the system has none)."""
    if name in ("", "UTC"):
        return UTC
    if name == "Local":
        return local_zone()
    if ".." in name or name.startswith(("/", "\\")):
        raise ParseError("time: invalid location name")
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise ParseError(f"unknown time zone {name}") from None


def local_zone() -> dt.tzinfo:
    """The process's zone as Go's time.Local finds it: $TZ (unset: /etc/localtime), else UTC."""
    name = os.environ.get("TZ")
    if name is None:
        try:
            with open("/etc/localtime", "rb") as f:
                return zoneinfo.ZoneInfo.from_file(f, key="Local")
        except (OSError, ValueError):
            return UTC
    try:
        return load_location(name.removeprefix(":"))
    except ParseError:
        return UTC


# --- Go's time arithmetic on aware datetimes ----------------------------------------------------


def _in(instant: dt.datetime, zone: dt.tzinfo) -> dt.datetime:
    return instant.astimezone(zone)


def _add(t: dt.datetime, delta: dt.timedelta) -> dt.datetime:
    """Go's t.Add: elapsed time, whatever the wall clock does."""
    assert t.tzinfo is not None
    return _in(t.astimezone(UTC) + delta, t.tzinfo)


def _truncate(t: dt.datetime, seconds: int) -> dt.datetime:
    """Go's t.Truncate on whole seconds or minutes: of the instant, not the wall clock."""
    assert t.tzinfo is not None
    utc = t.astimezone(UTC)
    stamp = int(utc.timestamp())
    return _in(dt.datetime.fromtimestamp(stamp - stamp % seconds, UTC), t.tzinfo)


def _add_months(wall: dt.datetime, months: int) -> dt.datetime:
    index = wall.year * 12 + wall.month - 1 + months
    return wall.replace(year=index // 12, month=index % 12 + 1)


def _go_date(wall: dt.datetime, zone: dt.tzinfo) -> dt.datetime:
    """Go's time.Date for a wall clock time in `zone`: a time a DST change skipped or doubled
    is resolved as Go resolves it (which differs from Python's fold=0 for skipped times)."""
    as_utc = wall.replace(tzinfo=UTC)
    offset = as_utc.astimezone(zone).utcoffset() or dt.timedelta()
    guess = as_utc - offset
    actual = guess.astimezone(zone).utcoffset() or dt.timedelta()
    if actual != offset:
        guess = as_utc - actual
    return _in(guess, zone)
