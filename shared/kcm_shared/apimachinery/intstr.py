"""IntOrString counts: upstream apimachinery intstr.GetScaledValueFromIntOrPercent.

`maxSurge: 25%` and `maxUnavailable: 1` as a number of pods out of a total. Used by the
DaemonSet controller's rolling update and the disruption controller's minAvailable /
maxUnavailable; pure.
"""

from __future__ import annotations


def scaled_value(value: int | str | None, total: int, round_up: bool) -> int:
    """An int as is, `N%` of `total` rounded up or down; ValueError with upstream's wording."""
    if value is None:
        raise ValueError("nil value for IntOrString")
    if isinstance(value, int):
        return value
    if not value.endswith("%"):
        raise ValueError("invalid value for IntOrString: invalid type: string is not a percentage")
    digits = value[:-1]
    try:
        percent = int(digits, 10)
    except ValueError:
        raise ValueError(
            f'invalid value for IntOrString: invalid value "{value}": strconv.Atoi: parsing '
            f'"{digits}": invalid syntax'
        ) from None
    # Integer arithmetic: Go's float64 product of two int32s and /100 is exact for these values.
    return -(-percent * total // 100) if round_up else percent * total // 100
