"""Typed equality of built-in API objects in their JSON form, as Go's `apiequality.Semantic.DeepEqual`.

Upstream compares objects after decoding them into Go structs, so what counts as a difference
depends on each field's Go type: a plain (non-pointer) field reads the same whether absent, null
or its zero value; a pointer field set to its zero value (`automountServiceAccountToken: false`)
differs from an absent one; a nil slice or map equals an empty one; fields the type does not
declare are dropped by decoding; and a few types compare by meaning (quantities by value, so
"1" equals "1000m"; times by instant; an int-or-string by its kind and value). `semantic_equal`
does the same for two JSON-form objects of a named message type, reading each field's Go shape
from `proto_schema.json` (written by tools/gen_proto_schema.py from kubectl's own type data).

The deployment controller calls it to find the ReplicaSet whose pod template is its own
(upstream EqualIgnoreHash), and the API server to tell whether a DaemonSet's template changed
(its template generation); the table is loaded once, on first use.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from importlib import resources
from typing import Any, NamedTuple

from kcm_shared.apimachinery import quantity

# Field flags written by tools/gen_proto_schema.py (the ones this module reads).
FLAG_REPEATED = 1
FLAG_INLINE = 2
FLAG_POINTER = 16

POD_TEMPLATE_SPEC = "k8s.io.api.core.v1.PodTemplateSpec"

_META = "k8s.io.apimachinery.pkg.apis.meta.v1"
_QUANTITY = "k8s.io.apimachinery.pkg.api.resource.Quantity"
_INT_OR_STRING = "k8s.io.apimachinery.pkg.util.intstr.IntOrString"
_TIMES = frozenset({f"{_META}.Time", f"{_META}.MicroTime"})
# Types whose JSON form is free (embedded JSON, durations): compared as written.
_OPAQUE = frozenset(
    {f"{_META}.FieldsV1", f"{_META}.Duration", "k8s.io.apimachinery.pkg.runtime.RawExtension"}
)
_ZERO = {"string": "", "bytes": "", "bool": False}


class _Field(NamedTuple):
    json_name: str
    type: str  # a scalar name, a message name, or "map"
    flags: int
    value_type: str = ""  # a map's value type


@functools.cache
def _messages() -> dict[str, tuple[_Field, ...]]:
    raw = json.loads(resources.files("kcm_shared").joinpath("proto_schema.json").read_text())
    out = {}
    for name, table in raw["messages"].items():
        fields = []
        for entry in table.values():
            if entry[1] == "map":
                fields.append(_Field(entry[0], "map", entry[2], entry[4]))
            else:
                fields.append(_Field(entry[0], entry[1], entry[2]))
        out[name] = tuple(fields)
    return out


def semantic_equal(message: str, a: Any, b: Any) -> bool:
    """Whether two JSON-form values of `message` (e.g. POD_TEMPLATE_SPEC) are equal as Go's
    semantic equality sees them once decoded into that type."""
    if message not in _messages():
        raise KeyError(f"unknown API type {message!r}")
    return _equal_value(message, a, b)


def _equal_value(type_name: str, a: Any, b: Any) -> bool:
    """Two values of a non-pointer field of this type; None stands for absent."""
    if type_name in _TIMES:
        return _instant(a) == _instant(b)
    if type_name == _QUANTITY:
        return _quantity_nanos(a) == _quantity_nanos(b)
    if type_name == _INT_OR_STRING:
        return _int_or_string(a) == _int_or_string(b)
    if type_name in _OPAQUE:
        return bool(a == b)
    fields = _messages().get(type_name)
    if fields is None:
        return _equal_scalar(type_name, a, b)
    return _equal_message(fields, a if isinstance(a, dict) else {}, b if isinstance(b, dict) else {})


def _equal_message(fields: tuple[_Field, ...], a: dict[str, Any], b: dict[str, Any]) -> bool:
    for f in fields:
        if f.flags & FLAG_INLINE:
            # An embedded struct's fields sit in the parent's JSON object.
            if not _equal_value(f.type, a, b):
                return False
            continue
        if not _equal_field(f, a.get(f.json_name), b.get(f.json_name)):
            return False
    return True


def _equal_field(f: _Field, a: Any, b: Any) -> bool:
    if f.type == "map":
        # A nil map equals an empty one.
        ma, mb = a or {}, b or {}
        if not isinstance(ma, dict) or not isinstance(mb, dict):
            return bool(ma == mb)
        return ma.keys() == mb.keys() and all(_equal_value(f.value_type, ma[k], mb[k]) for k in ma)
    if f.flags & FLAG_REPEATED:
        la, lb = a or [], b or []
        if not isinstance(la, list) or not isinstance(lb, list):
            return bool(la == lb)
        return len(la) == len(lb) and all(_equal_value(f.type, x, y) for x, y in zip(la, lb, strict=True))
    if f.flags & FLAG_POINTER and (a is None) != (b is None):
        return False  # a nil pointer differs from a pointer to anything, its zero value included
    return _equal_value(f.type, a, b)


def _equal_scalar(type_name: str, a: Any, b: Any) -> bool:
    zero = _ZERO.get(type_name, 0)
    return bool((zero if a is None else a) == (zero if b is None else b))


def _instant(value: Any) -> dt.datetime | Any:
    if not isinstance(value, str):
        return value  # absent and null are both Go's zero time
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value


def _quantity_nanos(value: Any) -> int | Any:
    if value is None:
        return 0
    try:
        return quantity.parse(value).nanos
    except quantity.QuantityError:
        return value


def _int_or_string(value: Any) -> tuple[bool, Any]:
    """(is a string, value): 0 and "0" differ; absent is the int 0."""
    if isinstance(value, str):
        return True, value
    return False, 0 if value is None else value
