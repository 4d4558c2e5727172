"""The zero values Go writes for required scalar fields that a client left out.

- `fill(model, obj)` sets every required integer (0), boolean (false) and plain string ("")
  field that is absent from `obj`, at every depth where its holder is present, in place.

kube-apiserver decodes a body into Go structs and encodes them again: a field without
`omitempty` is always written, as its zero value when nobody set it (a new DaemonSet's
`status.currentNumberScheduled: 0`, a new ReplicaSet's `status.replicas: 0`). Upstream's
OpenAPI marks exactly those fields required, and the official Python client refuses an object
that lacks one (`Invalid value for current_number_scheduled, must not be None`), so the models'
required flags (`clientmodels`) say what to fill, with the few fields Go writes that its OpenAPI
calls optional (`_ALWAYS_WRITTEN`). Times, quantities and int-or-strings are left
alone: Go writes a zero time as `null`, and the others have no zero a client would accept.
Required structs, lists and maps are left alone too: the models do not say whether Go holds them
by pointer (`null`) or by value (`{}`).

`operations` calls `fill` on every create and update of a built-in kind, after validation and
before the write is compared with the stored object, so a status write that leaves out zeros
is the same no-op it is upstream.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from .clientmodels import ClientField, ClientType, fields_of

_ZEROS: dict[str, Any] = {"integer": 0, "boolean": False, "string": ""}
# Fields Go always writes that upstream's OpenAPI (and so the client) marks optional all the
# same (`+optional` on a field without `omitempty`), found by tests/e2e/test_apiserver_parity.py.
_ALWAYS_WRITTEN: dict[str, frozenset[str]] = {
    "V1StatefulSetStatus": frozenset({"availableReplicas"}),
    "CoreV1Event": frozenset({"reportingComponent", "reportingInstance"}),
    "V1PodDisruptionBudgetStatus": frozenset(
        {"currentHealthy", "desiredHealthy", "disruptionsAllowed", "expectedPods"}
    ),
}


@dataclass(frozen=True)
class _Plan:
    """What to fill in one model: its own scalar zeros, and the fields leading to more."""

    zeros: tuple[tuple[str, Any], ...]
    nested: tuple[tuple[str, ClientType], ...]


def _zero_of(model: str, name: str, f: ClientField) -> Any:
    """The zero Go writes for field `name` of `model`, or None when it writes none."""
    t = f.type
    written = f.required or name in _ALWAYS_WRITTEN.get(model, ())
    return _ZEROS.get(t.name) if written and t.kind == "scalar" and not t.fmt else None


@cache
def _plan(model: str) -> _Plan:
    zeros: list[tuple[str, Any]] = []
    nested: list[tuple[str, ClientType]] = []
    for name, f in fields_of(model).items():
        t = f.type
        if (zero := _zero_of(model, name, f)) is not None:
            zeros.append((name, zero))
        elif any(_has_work(m) for m in t.models()):
            nested.append((name, t))
    return _Plan(tuple(zeros), tuple(nested))


@cache
def _has_work(model: str, _seen: frozenset[str] = frozenset()) -> bool:
    """Whether `model` or a model under it has a required scalar (recursive models end at a
    model already on the way down)."""
    if model in _seen:
        return False
    seen = _seen | {model}
    return any(
        _zero_of(model, name, f) is not None or any(_has_work(m, seen) for m in f.type.models())
        for name, f in fields_of(model).items()
    )


def fill(model: str, obj: dict[str, Any]) -> None:
    plan = _plan(model)
    for name, zero in plan.zeros:
        if name not in obj:
            obj[name] = zero
    for name, t in plan.nested:
        value = obj.get(name)
        if value is not None:
            _fill_value(t, value)


def _fill_value(t: ClientType, value: Any) -> None:
    if t.kind == "model" and isinstance(value, dict):
        fill(t.name, value)
    elif t.kind == "list" and t.inner is not None and isinstance(value, list):
        for item in value:
            _fill_value(t.inner, item)
    elif t.kind == "map" and t.inner is not None and isinstance(value, dict):
        for item in value.values():
            _fill_value(t.inner, item)
