"""Kubernetes resource quantities ("100m", "16Gi", "1e3") as exact numbers.

Used by the simulator's scheduling predicates to compare requests with allocatable.
"""

from __future__ import annotations

import functools
import re
from decimal import Decimal, InvalidOperation

_SUFFIXES = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
_FORM = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)([a-zA-Z]*)$")


def parse(value: object) -> Decimal:
    """The amount a quantity stands for; raises ValueError on anything upstream would reject."""
    if isinstance(value, int | float):
        return Decimal(str(value))
    return _parse_text(str(value))


# Scheduling parses the same few strings (every node's allocatable) for every pod it places.
@functools.lru_cache(maxsize=4096)
def _parse_text(value: str) -> Decimal:
    match = _FORM.match(value.strip())
    if not match or match.group(2) not in _SUFFIXES:
        raise ValueError(f"invalid quantity {value!r}")
    try:
        return Decimal(match.group(1)) * _SUFFIXES[match.group(2)]
    except InvalidOperation as exc:
        raise ValueError(f"invalid quantity {value!r}") from exc
