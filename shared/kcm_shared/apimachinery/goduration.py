"""Go's time.ParseDuration (`1h30m`, `1.5s`, `-2m`, `300ms`) in nanoseconds, with Go's error
messages: what Kubernetes flags and robfig/cron's `@every` accept.

- `parse`: nanoseconds or ValueError; used by `kcm_shared.apis.cron`.
- `seconds`, `positive_seconds`, `non_negative_seconds`: the argparse types of every duration
  flag, in seconds (leader election's, the coordinator's and the watcher's, the controllers'
  own periods); here rather than beside the flags of the bus so that a controller's flags
  need nothing of the bus.
"""

from __future__ import annotations

import argparse
import re

_INT64 = 1 << 63
_UNITS = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # micro sign
    "\u03bcs": 1_000,  # Greek mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_DURATION_PART = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]*)")


def parse(text: str) -> int:
    """Go's time.ParseDuration in nanoseconds (e.g. `1h30m`, `1.5s`, `-2m`); ValueError with
    Go's message."""
    quoted = '"' + text + '"'
    rest = text
    sign = 1
    if rest[:1] in ("-", "+"):
        sign = -1 if rest[0] == "-" else 1
        rest = rest[1:]
    if rest == "0":
        return 0
    if not rest:
        raise ValueError(f"time: invalid duration {quoted}")
    total = 0
    while rest:
        match = _DURATION_PART.match(rest)
        assert match is not None  # every group may be empty
        whole, frac, unit = match.group(1), match.group(2) or "", match.group(3)
        if not whole and not frac:
            raise ValueError(f"time: invalid duration {quoted}")
        if not unit:
            raise ValueError(f"time: missing unit in duration {quoted}")
        # The unit runs up to the next digit or dot, as in Go.
        if unit not in _UNITS:
            raise ValueError(f'time: unknown unit "{unit}" in duration {quoted}')
        scale = _UNITS[unit]
        value = int(whole or "0") * scale + (int(frac) * scale // 10 ** len(frac) if frac else 0)
        total += value
        if total >= _INT64:
            raise ValueError(f"time: invalid duration {quoted}")
        rest = rest[match.end() :]
    return sign * total


def seconds(text: str) -> float:
    """Seconds in a Go duration string (`15s`, `1m30s`, `500ms`, `0`), as Kubernetes flags take them."""
    try:
        return parse(text.strip()) / 1e9
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r} (examples: 15s, 1m, 500ms)") from None


def positive_seconds(text: str) -> float:
    """`seconds` for a flag that must be above zero (a period, an interval)."""
    value = seconds(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"want a positive duration, got {text!r}")
    return value


def non_negative_seconds(text: str) -> float:
    """`seconds` for a flag that may not be negative, as upstream's option validation refuses a
    negative batch period."""
    value = seconds(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"want a non-negative duration, got {text!r}")
    return value
