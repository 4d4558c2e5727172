"""Validation of policy/v1 PodDisruptionBudgets, after upstream's pkg/apis/policy/validation:
minAvailable or maxUnavailable, not both, each an integer or a percent up to 100%, and the
selector.

Called by the dispatch in `validation/__init__.py`.
"""

from __future__ import annotations

import json

from .apps import _int_or_percent, _not_over_100_percent
from .fielderrors import GoText, Obj, _Causes, _dict
from .metav1 import _label_selector


def _pod_disruption_budget(c: _Causes, obj: Obj, old: Obj | None) -> None:
    spec = _dict(obj.get("spec"))
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        c.invalid(
            "spec",
            GoText(json.dumps(spec, sort_keys=True)),
            "minAvailable and maxUnavailable cannot be both set",
        )
    for key in ("minAvailable", "maxUnavailable"):
        _int_or_percent(c, spec.get(key), f"spec.{key}")
        _not_over_100_percent(c, spec.get(key), f"spec.{key}")
    if isinstance(spec.get("selector"), dict):
        _label_selector(c, spec["selector"], "spec.selector")
