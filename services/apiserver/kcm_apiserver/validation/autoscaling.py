"""Validation of HorizontalPodAutoscalers, after upstream's pkg/apis/autoscaling/validation:
the scale target's kind and name, and replica bounds (minReplicas at least 1 when set,
maxReplicas at least 1 and not below minReplicas).

Called by the dispatch in `validation/__init__.py`.
"""

from __future__ import annotations

from .fielderrors import Obj, _Causes, _dict, _is_int


def _horizontal_pod_autoscaler(c: _Causes, obj: Obj, old: Obj | None) -> None:
    spec = _dict(obj.get("spec"))
    ref = _dict(spec.get("scaleTargetRef"))
    for key in ("kind", "name"):
        if not ref.get(key):
            c.required(f"spec.scaleTargetRef.{key}", "")
    low, high = spec.get("minReplicas"), spec.get("maxReplicas")
    if low is not None and (not _is_int(low) or low < 1):
        c.invalid("spec.minReplicas", low, "must be greater than or equal to 1")
    if not _is_int(high) or high < 1:
        c.invalid("spec.maxReplicas", high, "must be greater than 0")
    elif _is_int(low) and high < low:
        c.invalid("spec.maxReplicas", high, "must be greater than or equal to `minReplicas`")
