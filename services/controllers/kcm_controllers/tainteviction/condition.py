"""The DisruptionTarget condition the taint-eviction-controller sets before it deletes a pod.

Upstream pkg/controller/tainteviction/taint_eviction.go (`addConditionAndDeletePod`) with
pkg/api/v1/pod `UpdatePodCondition` and pkg/util/pod `PatchPodStatus`: the condition is
written only when it changes anything, its lastTransitionTime kept while its status stays, and
the strategic merge patch of pods/status names the pod's uid, so it fails on another pod that
took the name meanwhile. Called by `controller.py`; pure, no I/O.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

DISRUPTION_TARGET = "DisruptionTarget"
REASON = "DeletionByTaintManager"
MESSAGE = "Taint manager: deleting due to NoExecute taint"


def _stamp(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_patch(pod: dict[str, Any], now: dt.datetime) -> dict[str, Any] | None:
    """The pods/status patch that sets DisruptionTarget=True on `pod` (as the API server
    answered it), or None when the pod has it already with upstream's reason and message."""
    conditions = [c for c in (pod.get("status") or {}).get("conditions") or [] if isinstance(c, dict)]
    old = next((c for c in conditions if c.get("type") == DISRUPTION_TARGET), None)
    since = old.get("lastTransitionTime") if old is not None and old.get("status") == "True" else None
    new: dict[str, Any] = {
        "type": DISRUPTION_TARGET,
        "status": "True",
        "reason": REASON,
        "message": MESSAGE,
        "lastTransitionTime": since or _stamp(now),
    }
    probed = old is not None and bool(old.get("lastProbeTime"))
    if old is not None and all(old.get(k) == v for k, v in new.items()) and not probed:
        return None
    if probed:
        new["lastProbeTime"] = None  # the condition upstream writes has none
    order = [{"type": c.get("type")} for c in conditions]
    if old is None:
        order.append({"type": DISRUPTION_TARGET})
    return {
        "metadata": {"uid": (pod.get("metadata") or {}).get("uid", "")},
        "status": {"$setElementOrder/conditions": order, "conditions": [new]},
    }
