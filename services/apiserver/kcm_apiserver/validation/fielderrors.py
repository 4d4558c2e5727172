"""Field errors as upstream's apimachinery `util/validation/field` builds and prints them.

- `Cause` is one metav1.StatusCause; `Causes` collects them with upstream's message shapes
  (field.Error.ErrorBody: "Required value", "Invalid value: <value>: <detail>", ...), the
  values printed as Go prints them (`go_value`; `go_quote` is Go's %q; a `GoText` is already
  rendered).
- The helpers every group's rules share: tolerant readers of JSON values (`as_dict`, `as_list`,
  `is_int`), equality that does not tell a missing field from an empty one (`semantic`),
  and the two commonest field rules (`validate_nonnegative`, `validate_one_of`).

Callers: every module of this package; `operations` quotes unknown-field paths with `go_quote`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict, TypeGuard

from kcm_shared.apimachinery import quantity
from kcm_shared.base.goquote import go_quote as go_quote  # re-exported: its callers import it here

Obj = dict[str, Any]


class Cause(TypedDict):
    """One metav1.StatusCause: `reason` is upstream's cause type, `field` a JSON path."""

    reason: str
    message: str
    field: str


REQUIRED = "FieldValueRequired"
INVALID = "FieldValueInvalid"
NOT_SUPPORTED = "FieldValueNotSupported"
DUPLICATE = "FieldValueDuplicate"
FORBIDDEN = "FieldValueForbidden"
TOO_LONG = "FieldValueTooLong"
TOO_MANY = "FieldValueTooMany"
NOT_FOUND = "FieldValueNotFound"

IMMUTABLE = "field is immutable"


# --- rendering values the way Go's field errors print them --------------------------------


class GoText(str):
    """A value already rendered in Go syntax (%#v of a struct); printed as is."""


def go_string_map(value: Mapping[str, Any] | None) -> GoText:
    if value is None:
        return GoText("map[string]string(nil)")
    items = ", ".join(f"{go_quote(str(k))}:{go_quote(str(value[k]))}" for k in sorted(value))
    return GoText(f"map[string]string{{{items}}}")


def go_label_selector(sel: Mapping[str, Any]) -> GoText:
    expressions = sel.get("matchExpressions")
    if expressions is None:
        rendered = "[]v1.LabelSelectorRequirement(nil)"
    else:
        parts = []
        for e in expressions if isinstance(expressions, list) else []:
            e = e if isinstance(e, dict) else {}
            values = ", ".join(go_quote(str(v)) for v in e.get("values") or [])
            parts.append(
                f"v1.LabelSelectorRequirement{{Key:{go_quote(str(e.get('key', '')))}, "
                f"Operator:{go_quote(str(e.get('operator', '')))}, Values:[]string{{{values}}}}}"
            )
        rendered = "[]v1.LabelSelectorRequirement{" + ", ".join(parts) + "}"
    labels = sel.get("matchLabels")
    return GoText(f"v1.LabelSelector{{MatchLabels:{go_string_map(labels)}, MatchExpressions:{rendered}}}")


def go_value(value: Any) -> str:
    if isinstance(value, GoText):
        return str(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return go_string_map(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class Causes(list[Cause]):
    """Collects causes with upstream's message shapes (field.Error.ErrorBody)."""

    def _add(self, reason: str, path: str, message: str, detail: str = "") -> None:
        self.append(
            {"reason": reason, "message": f"{message}: {detail}" if detail else message, "field": path}
        )

    def required(self, path: str, detail: str = "") -> None:
        self._add(REQUIRED, path, "Required value", detail)

    def invalid(self, path: str, value: Any, detail: str) -> None:
        self._add(INVALID, path, f"Invalid value: {go_value(value)}", detail)

    def not_supported(self, path: str, value: Any, supported: Iterable[str]) -> None:
        listed = ", ".join(go_quote(s) for s in supported)
        self._add(NOT_SUPPORTED, path, f"Unsupported value: {go_value(value)}", f"supported values: {listed}")

    def invalid_omitted(self, path: str, detail: str) -> None:
        """field.Invalid with field.OmitValueType: the message names no value."""
        self._add(INVALID, path, "Invalid value", detail)

    def too_many(self, path: str, actual: int, limit: int) -> None:
        self._add(
            TOO_MANY,
            path,
            f"Too many: {actual}",
            f"must have at most {limit} item{'' if limit == 1 else 's'}",
        )

    def duplicate(self, path: str, value: Any) -> None:
        self._add(DUPLICATE, path, f"Duplicate value: {go_value(value)}")

    def forbidden(self, path: str, detail: str) -> None:
        self._add(FORBIDDEN, path, "Forbidden", detail)

    def too_long(self, path: str, limit: int) -> None:
        self._add(TOO_LONG, path, "Too long", f"may not be more than {limit} bytes")

    def not_found(self, path: str, value: Any) -> None:
        self._add(NOT_FOUND, path, f"Not found: {go_value(value)}")

    def immutable(self, path: str, new: Any, old: Any) -> None:
        if semantic(new) != semantic(old):
            self.invalid(path, new, IMMUTABLE)


# --- small helpers --------------------------------------------------------------------------


def as_dict(value: Any) -> Obj:
    """`value` if it is a JSON object, else {}: rules read malformed input without failing."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """`value` if it is a JSON array, else []."""
    return value if isinstance(value, list) else []


def is_int(value: Any) -> TypeGuard[int]:
    """A JSON integer (Python's bool is an int, JSON's is not)."""
    return isinstance(value, int) and not isinstance(value, bool)


def semantic(value: Any) -> Any:
    """A form for equality checks that, like apimachinery's Semantic.DeepEqual, does not tell
    a missing field from a null, empty string, empty map or empty list."""
    if isinstance(value, dict):
        out = {k: semantic(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, "", {}, [])}
    if isinstance(value, list):
        return [semantic(v) for v in value]
    return value


def validate_nonnegative(c: Causes, obj: Obj, key: str, path: str) -> None:
    """`obj[key]`, when set, is an integer of at least 0."""
    value = obj.get(key)
    if value is None:
        return
    if not is_int(value):
        c.invalid(f"{path}.{key}", value, "must be an integer")
    elif value < 0:
        c.invalid(f"{path}.{key}", value, "must be greater than or equal to 0")


def validate_one_of(
    c: Causes, obj: Obj, key: str, path: str, allowed: tuple[str, ...], *, required: bool = True
) -> None:
    """`obj[key]` is one of `allowed`; unset or empty is Required unless not `required`."""
    value = obj.get(key)
    if value in (None, ""):
        if required:
            c.required(f"{path}.{key}", "")
    elif value not in allowed:
        c.not_supported(f"{path}.{key}", value, allowed)


def go_quantity(text: str) -> GoText:
    """A resource.Quantity as Go's %#v prints it in a field error (upstream passes the struct,
    which has no value String method): its int64 mantissa and scale as parsed, the cached
    canonical text when the input was already canonical, and its format. Amounts too large or
    precise for an int64 mantissa (upstream's inf.Dec form) print with mantissa 0."""
    q = quantity.parse(text)
    parts = _QUANTITY_PARTS.fullmatch(text)
    assert parts is not None  # parse accepted the text, so it has this form
    number, suffix = parts.groups()
    if q.format == quantity.BINARY_SI:
        value, scale = (q.nanos // 10**9, 0) if q.nanos % 10**9 == 0 else (0, 0)
    else:
        whole, _, fraction = number.lstrip("+").partition(".")
        exponent = int(suffix[1:]) if suffix[:1] in ("e", "E") else _SI_EXPONENTS.get(suffix, 0)
        value, scale = int((whole + fraction) or "0"), exponent - len(fraction)
        if not -(2**63) <= value < 2**63:
            value, scale = 0, 0
    cached = text if str(q) == text else ""
    return GoText(
        f"resource.Quantity{{i:resource.int64Amount{{value:{value}, scale:{scale}}}, "
        f"d:resource.infDecAmount{{Dec:(*inf.Dec)(nil)}}, s:{go_quote(cached)}, Format:{go_quote(q.format)}}}"
    )


_QUANTITY_PARTS = re.compile(r"([+-]?[0-9.]+)(.*)")
_SI_EXPONENTS = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
