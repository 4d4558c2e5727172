"""Resource quantities ("100m", "1.5Gi", "12e6") parsed and printed as apimachinery does.

upstream staging/src/k8s.io/apimachinery/pkg/api/resource/quantity.go: a quantity is an
exact number rounded up to nano precision plus the format its text was written in
(DecimalSI for SI suffixes and bare numbers, BinarySI for Ki..Ei, DecimalExponent for
e/E exponents). `str()` is upstream's canonical form, which is what `kubectl describe quota`
shows for `status.used`: "1.5Gi" prints "1536Mi", "1.5" prints "1500m", "2000" prints "2k".
Arithmetic keeps the format of the left operand unless it is zero, as upstream's Add/Sub.

Used by `kcm_shared.apis.quota` (so the quota controller and the API server's quota admission
parse and print the same numbers), the API server's validation and metrics API, and the
simulator's scheduler: one parser, so every part accepts and refuses the same text.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction

DECIMAL_SI = "DecimalSI"
BINARY_SI = "BinarySI"
DECIMAL_EXPONENT = "DecimalExponent"

_NANO = 10**9
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_SI_SUFFIX = {exp: suffix for suffix, exp in _DECIMAL.items()}
_BINARY_SUFFIX = {power: suffix for suffix, power in _BINARY.items()}
# Upstream's splitting: a signed decimal number, then a suffix (an SI or binary suffix, or
# an exponent).
_FORM = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))([a-zA-Z]*|[eE][+-]?[0-9]+)")


class QuantityError(ValueError):
    """Text upstream's ParseQuantity rejects."""


@dataclass(frozen=True, slots=True)
class Quantity:
    """An amount in billionths (rounded away from zero, as upstream's ParseQuantity does)."""

    nanos: int
    format: str = DECIMAL_SI

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(self.nanos + other.nanos, other.format if self.nanos == 0 else self.format)

    def __sub__(self, other: Quantity) -> Quantity:
        return Quantity(self.nanos - other.nanos, other.format if self.nanos == 0 else self.format)

    def __neg__(self) -> Quantity:
        return Quantity(-self.nanos, self.format)

    def cmp(self, other: Quantity) -> int:
        return (self.nanos > other.nanos) - (self.nanos < other.nanos)

    def __lt__(self, other: Quantity) -> bool:
        return self.nanos < other.nanos

    def __le__(self, other: Quantity) -> bool:
        return self.nanos <= other.nanos

    def __gt__(self, other: Quantity) -> bool:
        return self.nanos > other.nanos

    def __ge__(self, other: Quantity) -> bool:
        return self.nanos >= other.nanos

    def is_zero(self) -> bool:
        return self.nanos == 0

    def sign(self) -> int:
        return (self.nanos > 0) - (self.nanos < 0)

    def round_up_to_units(self) -> Quantity:
        """Whole units, rounded away from zero (upstream's RoundUp(0), used for storage bytes)."""
        whole = -((-abs(self.nanos)) // _NANO) * _NANO
        return Quantity(whole if self.nanos >= 0 else -whole, self.format)

    def milli_value(self) -> int:
        """The value in thousandths, rounded away from zero (upstream's MilliValue)."""
        step = _NANO // 1000
        magnitude = -((-abs(self.nanos)) // step)
        return magnitude if self.nanos >= 0 else -magnitude

    def __str__(self) -> str:
        return canonical(self)

    def __repr__(self) -> str:
        return f"Quantity({canonical(self)!r})"


ZERO = Quantity(0)


def of(count: int) -> Quantity:
    """A whole number as a DecimalSI quantity (upstream's NewQuantity(n, DecimalSI))."""
    return Quantity(count * _NANO)


def parse(value: object) -> Quantity:
    """A quantity from its JSON form (a string, or a number some clients send); raises
    QuantityError on anything upstream would reject."""
    if isinstance(value, bool):
        raise QuantityError(f"quantities must match the regular expression, got {value!r}")
    if isinstance(value, int | float):
        value = repr(value) if isinstance(value, float) else str(value)
    if not isinstance(value, str):
        raise QuantityError(f"quantities must be strings, got {value!r}")
    return _parse_text(value)


def exact(value: object) -> Fraction:
    """The number a quantity stands for, for arithmetic upstream's type does not do (ratios,
    shares); raises QuantityError as `parse` does."""
    return Fraction(parse(value).nanos, _NANO)


@functools.lru_cache(maxsize=8192)
def _parse_text(text: str) -> Quantity:
    match = _FORM.fullmatch(text)
    if match is None:
        raise QuantityError(
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        )
    number, suffix = match.groups()
    try:
        amount = Decimal(number)
    except InvalidOperation as exc:  # pragma: no cover - the pattern admits only numbers
        raise QuantityError(f"unable to parse quantity's number {number!r}") from exc
    if suffix in _DECIMAL:
        fmt, scaled = DECIMAL_SI, amount.scaleb(_DECIMAL[suffix] + 9)
    elif suffix in _BINARY:
        fmt, scaled = BINARY_SI, amount * (1024 ** _BINARY[suffix]) * _NANO
    elif suffix[:1] in ("e", "E") and len(suffix) > 1:
        fmt, scaled = DECIMAL_EXPONENT, amount.scaleb(int(suffix[1:]) + 9)
    else:
        raise QuantityError(f"unable to parse quantity's suffix {suffix!r}")
    whole = int(scaled)  # truncates towards zero
    if whole != scaled:
        whole += 1 if scaled > 0 else -1
    return Quantity(whole, fmt)


def canonical(q: Quantity) -> str:
    """Upstream's Quantity.String(): the shortest exact text in the quantity's format."""
    if q.nanos == 0:
        return "0"
    fmt = q.format
    if fmt == BINARY_SI and (abs(q.nanos) < 1024 * _NANO or q.nanos % _NANO):
        fmt = DECIMAL_SI  # small or fractional binary amounts print as decimal, never rounded
    if fmt == BINARY_SI:
        units, power = q.nanos // _NANO, 0
        while power < 6 and units % 1024 == 0:
            units //= 1024
            power += 1
        return f"{units}{_BINARY_SUFFIX.get(power, '')}"
    mantissa, exponent = q.nanos, -9
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    extra = exponent % 3
    mantissa *= 10**extra
    exponent -= extra
    if fmt == DECIMAL_EXPONENT:
        return f"{mantissa}" if exponent == 0 else f"{mantissa}e{exponent}"
    if exponent > 18:
        mantissa *= 10 ** (exponent - 18)
        exponent = 18
    return f"{mantissa}{_SI_SUFFIX[exponent]}"
