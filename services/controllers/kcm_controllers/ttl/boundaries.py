"""Which TTL the ttl-controller gives every Node, by cluster size, with upstream's hysteresis.

Upstream pkg/controller/ttl/ttl_controller.go (`ttlBoundaries` and the steps its add and
delete handlers take): the step goes up once the node count exceeds its sizeMax and down once
it falls below its sizeMin, so a cluster hovering around a boundary does not flap (0 s up to
100 nodes; 15 s from 101, back to 0 s only below 90; ...). Called by `controller.py`; pure.
"""

from __future__ import annotations

from typing import NamedTuple


class Boundary(NamedTuple):
    size_min: int
    size_max: int
    ttl_seconds: int


BOUNDARIES = (
    Boundary(0, 100, 0),
    Boundary(90, 500, 15),
    Boundary(450, 1000, 30),
    Boundary(900, 2000, 60),
    Boundary(1800, 2**31 - 1, 300),
)


def step_up(step: int, count: int) -> int:
    """The step after nodes were added and `count` are known (upstream's addNode)."""
    while step + 1 < len(BOUNDARIES) and count > BOUNDARIES[step].size_max:
        step += 1
    return step


def step_down(step: int, count: int) -> int:
    """The step after nodes were deleted and `count` are left (upstream's deleteNode)."""
    while step > 0 and count < BOUNDARIES[step].size_min:
        step -= 1
    return step


def parse_ttl(value: str | None) -> int | None:
    """The annotation's integer, or None when it is missing or no integer (upstream's
    getIntFromAnnotation with strconv.Atoi: an optional sign and decimal digits)."""
    if value is None:
        return None
    digits = value[1:] if value[:1] in ("+", "-") else value
    if not digits or not digits.isascii() or not digits.isdigit() or len(digits) > 19:
        return None
    number = int(value)
    return number if -(2**63) <= number < 2**63 else None
