"""Validation of HorizontalPodAutoscalers, after upstream's pkg/apis/autoscaling/validation:
the scale target's kind and name, and replica bounds (minReplicas at least 1 when set,
maxReplicas at least 1 and not below minReplicas).

Called by the dispatch in `validation/__init__.py`.
"""

from __future__ import annotations

from .fielderrors import Causes, Obj, as_dict, is_int


def validate_horizontal_pod_autoscaler(c: Causes, obj: Obj, old: Obj | None) -> None:
    spec = as_dict(obj.get("spec"))
    ref = as_dict(spec.get("scaleTargetRef"))
    for key in ("kind", "name"):
        if not ref.get(key):
            c.required(f"spec.scaleTargetRef.{key}", "")
    low, high = spec.get("minReplicas"), spec.get("maxReplicas")
    if low is not None and (not is_int(low) or low < 1):
        c.invalid("spec.minReplicas", low, "must be greater than or equal to 1")
    if not is_int(high) or high < 1:
        c.invalid("spec.maxReplicas", high, "must be greater than 0")
    elif is_int(low) and high < low:
        c.invalid("spec.maxReplicas", high, "must be greater than or equal to `minReplicas`")
