"""Arithmetic over resource lists (resource name -> Quantity), as upstream's quota helpers.

upstream staging/src/k8s.io/apiserver/pkg/quota/v1/resources.go: Add, Subtract,
SubtractWithNonNegativeResult, Mask, LessThanOrEqual, Equals, IsZero, IsNegative,
RemoveZeros, ResourceNames, Contains(Prefix), Intersection and Difference, plus the
parsing of a JSON `ResourceList` and upstream's pretty-printing for error messages.
Used by the evaluators, the quota controller and the API server's quota admission.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kcm_shared.apimachinery import quantity
from kcm_shared.apimachinery.quantity import Quantity

ResourceList = dict[str, Quantity]


def parse_list(raw: Mapping[str, object] | None) -> ResourceList:
    """A JSON ResourceList; a value that does not parse raises quantity.QuantityError."""
    return {name: quantity.parse(value) for name, value in (raw or {}).items()}


def to_json(items: Mapping[str, Quantity]) -> dict[str, str]:
    return {name: str(value) for name, value in sorted(items.items())}


def add(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    result = dict(a)
    for name, value in b.items():
        result[name] = result[name] + value if name in result else value
    return result


def subtract(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    result = dict(a)
    for name, value in b.items():
        result[name] = result[name] - value if name in result else -value
    return result


def subtract_non_negative(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    """a - b with every negative entry set to zero (upstream SubtractWithNonNegativeResult)."""
    return {
        name: value if value.sign() >= 0 else Quantity(0, value.format)
        for name, value in subtract(a, b).items()
    }


def mask(items: Mapping[str, Quantity], names: Iterable[str]) -> ResourceList:
    wanted = set(names)
    return {name: value for name, value in items.items() if name in wanted}


def less_than_or_equal(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> tuple[bool, list[str]]:
    """Whether every entry of `a` that `b` also names is <= b's; the names where it is not."""
    exceeded = [name for name, limit in b.items() if name in a and a[name] > limit]
    return not exceeded, exceeded


def equals(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> bool:
    return a.keys() == b.keys() and all(a[name].nanos == b[name].nanos for name in a)


def is_zero(items: Mapping[str, Quantity]) -> bool:
    return all(value.is_zero() for value in items.values())


def is_negative(items: Mapping[str, Quantity]) -> list[str]:
    return [name for name, value in items.items() if value.sign() < 0]


def remove_zeros(items: Mapping[str, Quantity]) -> ResourceList:
    return {name: value for name, value in items.items() if not value.is_zero()}


def resource_names(items: Mapping[str, Quantity]) -> list[str]:
    return list(items)


def contains(items: Iterable[str], name: str) -> bool:
    return name in set(items)


def contains_prefix(prefixes: Iterable[str], name: str) -> bool:
    return any(name.startswith(prefix) for prefix in prefixes)


def intersection(a: Iterable[str], b: Iterable[str]) -> list[str]:
    """Names in both, in a's order without repeats."""
    other = set(b)
    return list(dict.fromkeys(name for name in a if name in other))


def difference(a: Iterable[str], b: Iterable[str]) -> list[str]:
    other = set(b)
    return list(dict.fromkeys(name for name in a if name not in other))


def pretty(items: Mapping[str, Quantity]) -> str:
    """`cpu=1,memory=1Gi`: names sorted, as upstream's admission errors print them."""
    return ",".join(f"{name}={items[name]}" for name in sorted(items))


def pretty_names(names: Iterable[str]) -> str:
    return ",".join(sorted(names))
