"""Validation of policy/v1 PodDisruptionBudgets, after upstream's pkg/apis/policy/validation:
minAvailable or maxUnavailable, not both, each an integer or a percent up to 100%, and the
selector.

Called by the dispatch in `validation/__init__.py`.
"""

from __future__ import annotations

import json

from .apps import validate_int_or_percent, validate_not_over_100_percent
from .fielderrors import Causes, GoText, Obj, as_dict
from .metav1 import validate_label_selector


def validate_pod_disruption_budget(c: Causes, obj: Obj, old: Obj | None) -> None:
    spec = as_dict(obj.get("spec"))
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        c.invalid(
            "spec",
            GoText(json.dumps(spec, sort_keys=True)),
            "minAvailable and maxUnavailable cannot be both set",
        )
    for key in ("minAvailable", "maxUnavailable"):
        validate_int_or_percent(c, spec.get(key), f"spec.{key}")
        validate_not_over_100_percent(c, spec.get(key), f"spec.{key}")
    if isinstance(spec.get("selector"), dict):
        validate_label_selector(c, spec["selector"], "spec.selector")
