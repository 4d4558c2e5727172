"""Upstream's ValidateLimitRange (pkg/apis/core/validation, v1.32), after defaulting:

- each item's type is Pod, Container, PersistentVolumeClaim or a qualified name, once each;
- a Pod item has no default or defaultRequest; a PersistentVolumeClaim item bounds storage;
- per resource, min <= defaultRequest <= default <= max, 1 <= maxLimitRequestRatio <= max/min.

The messages, and the values as Go prints a resource.Quantity, are kube-apiserver's
(tests/e2e/test_apiserver_parity.py); resources are checked in name order where upstream's
set has none. Not checked: the resource names allowed per type and the equal default and
defaultRequest of resources that may not be overcommitted. Called through `validation`.
"""

from __future__ import annotations

from kcm_shared.apimachinery import quantity

from .fielderrors import Causes, Obj, as_dict, as_list, go_quantity

STANDARD_TYPES = ("Pod", "Container", "PersistentVolumeClaim")


def _quantities(values: object) -> dict[str, tuple[str, quantity.Quantity]]:
    """name -> (text, quantity); what does not parse is left to the decoder's refusal."""
    out = {}
    for name, text in as_dict(values).items():
        try:
            out[str(name)] = (str(text), quantity.parse(text))
        except quantity.QuantityError:
            continue
    return out


def validate_limit_range(c: Causes, obj: Obj, old: Obj | None) -> None:
    seen: set[str] = set()
    for i, raw in enumerate(as_list(as_dict(obj.get("spec")).get("limits"))):
        item = as_dict(raw)
        path = f"spec.limits[{i}]"
        kind = str(item.get("type") or "")
        if kind not in STANDARD_TYPES and "/" not in kind:
            c.invalid(f"{path}.type", kind, "must be a standard limit type or fully qualified")
        if kind in seen:
            c.duplicate(f"{path}.type", kind)
        seen.add(kind)
        low, high = _quantities(item.get("min")), _quantities(item.get("max"))
        default, request = _quantities(item.get("default")), _quantities(item.get("defaultRequest"))
        if kind == "Pod":
            for key in ("default", "defaultRequest"):
                if item.get(key):
                    c.forbidden(f"{path}.{key}", "may not be specified when `type` is 'Pod'")
            default, request = {}, {}
        if kind == "PersistentVolumeClaim" and "storage" not in low and "storage" not in high:
            c.required(
                f"{path}.limits",
                "either minimum or maximum storage value is required, but neither was provided",
            )
        ratios = _quantities(item.get("maxLimitRequestRatio"))
        for name in sorted({*low, *high, *default, *request, *ratios}):
            _check_resource(
                c,
                path,
                name,
                low.get(name),
                high.get(name),
                default.get(name),
                request.get(name),
                ratios.get(name),
            )


Pair = tuple[str, quantity.Quantity] | None


def _check_resource(
    c: Causes, path: str, name: str, low: Pair, high: Pair, default: Pair, request: Pair, ratio: Pair
) -> None:
    def invalid(field: str, value: tuple[str, quantity.Quantity], why: str) -> None:
        c.invalid(f"{path}.{field}[{name}]", go_quantity(value[0]), why)

    if low and high and low[1] > high[1]:
        invalid("min", low, f"min value {low[1]} is greater than max value {high[1]}")
    if request and low and low[1] > request[1]:
        invalid(
            "defaultRequest",
            request,
            f"min value {low[1]} is greater than default request value {request[1]}",
        )
    if request and high and request[1] > high[1]:
        invalid(
            "defaultRequest",
            request,
            f"default request value {request[1]} is greater than max value {high[1]}",
        )
    if request and default and request[1] > default[1]:
        invalid(
            "defaultRequest",
            request,
            f"default request value {request[1]} is greater than default limit value {default[1]}",
        )
    if default and low and low[1] > default[1]:
        invalid("default", low, f"min value {low[1]} is greater than default value {default[1]}")
    if default and high and default[1] > high[1]:
        invalid("default", high, f"default value {default[1]} is greater than max value {high[1]}")
    if ratio and ratio[1] < quantity.of(1):
        invalid("maxLimitRequestRatio", ratio, f"ratio {ratio[1]} is less than 1")
    if ratio and low and high and low[1].nanos > 0:
        spread = high[1].milli_value() / low[1].milli_value()
        if ratio[1].milli_value() / 1000 > spread:
            invalid("maxLimitRequestRatio", ratio, f"ratio {ratio[1]} is greater than max/min = {spread:f}")
