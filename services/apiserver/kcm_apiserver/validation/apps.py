"""Validation of apps/v1 kinds, after upstream's pkg/apis/apps/validation.

Deployments, ReplicaSets, StatefulSets and DaemonSets: replica and history counts, the
selector against the pod template (immutable once set), update strategies and their
int-or-percent fields, and which StatefulSet spec fields may change. `policy` reuses the
int-or-percent rules, as upstream's does.

Callers: the dispatch in `validation/__init__.py`; `policy`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from kcm_shared.apimachinery.selectors import regex_error

from .core import validate_pod_template_spec
from .fielderrors import (
    IMMUTABLE,
    Causes,
    GoText,
    Obj,
    as_dict,
    as_list,
    go_label_selector,
    is_int,
    semantic,
    validate_nonnegative,
    validate_one_of,
)
from .metav1 import validate_selector_matches_template

# --- workloads ----------------------------------------------------------------------------------

_PERCENT_RE = re.compile("[0-9]+%")


def _int_or_percent_value(value: Any) -> int | None:
    if is_int(value):
        return int(value)
    if isinstance(value, str) and _PERCENT_RE.fullmatch(value):
        return int(value[:-1])
    return None


def validate_int_or_percent(c: Causes, value: Any, path: str) -> None:
    """A non-negative integer or a percent string (upstream ValidatePositiveIntOrPercent)."""
    if value is None:
        return
    if isinstance(value, str):
        if not _PERCENT_RE.fullmatch(value):
            msg = "a valid percent string must be a numeric string followed by an ending '%'"
            c.invalid(path, value, regex_error(msg, "[0-9]+%", "1%", "93%"))
    elif is_int(value):
        if value < 0:
            c.invalid(path, value, "must be greater than or equal to 0")
    else:
        c.invalid(path, value, "must be an integer or percentage (e.g '5%')")


def validate_not_over_100_percent(c: Causes, value: Any, path: str) -> None:
    """A percent string is at most 100% (upstream IsNotMoreThan100Percent)."""
    if isinstance(value, str) and _PERCENT_RE.fullmatch(value) and int(value[:-1]) > 100:
        c.invalid(path, value, "must not be greater than 100%")


def validate_deployment(c: Causes, obj: Obj, old: Obj | None) -> None:
    spec = as_dict(obj.get("spec"))
    validate_nonnegative(c, spec, "replicas", "spec")
    validate_selector_matches_template(c, spec, "spec", "deployment")
    validate_pod_template_spec(c, spec.get("template"), "spec.template", ("Always",), "ReplicaSet")
    strategy = as_dict(spec.get("strategy"))
    kind = strategy.get("type")
    if kind == "Recreate":
        if strategy.get("rollingUpdate") is not None:
            c.forbidden(
                "spec.strategy.rollingUpdate", "may not be specified when strategy `type` is 'Recreate'"
            )
    elif kind == "RollingUpdate":
        rolling = strategy.get("rollingUpdate")
        if not isinstance(rolling, dict):
            c.required("spec.strategy.rollingUpdate", "this should be defaulted and never be nil")
        else:
            path = "spec.strategy.rollingUpdate"
            validate_int_or_percent(c, rolling.get("maxUnavailable"), f"{path}.maxUnavailable")
            validate_int_or_percent(c, rolling.get("maxSurge"), f"{path}.maxSurge")
            if (
                _int_or_percent_value(rolling.get("maxUnavailable"))
                == 0
                == _int_or_percent_value(rolling.get("maxSurge"))
            ):
                c.invalid(
                    f"{path}.maxUnavailable",
                    rolling.get("maxUnavailable"),
                    "may not be 0 when `maxSurge` is 0",
                )
            validate_not_over_100_percent(c, rolling.get("maxUnavailable"), f"{path}.maxUnavailable")
    else:
        c.not_supported(
            "spec.strategy", GoText(json.dumps(strategy, sort_keys=True)), ("Recreate", "RollingUpdate")
        )
    for key in ("minReadySeconds", "revisionHistoryLimit", "progressDeadlineSeconds"):
        validate_nonnegative(c, spec, key, "spec")
    deadline = spec.get("progressDeadlineSeconds")
    if is_int(deadline) and deadline <= (spec.get("minReadySeconds") or 0):
        c.invalid("spec.progressDeadlineSeconds", deadline, "must be greater than minReadySeconds")
    if old is not None:
        _selector_immutable(c, spec, as_dict(old.get("spec")))


def _selector_immutable(c: Causes, spec: Obj, old_spec: Obj) -> None:
    if semantic(spec.get("selector")) != semantic(old_spec.get("selector")):
        c.invalid("spec.selector", go_label_selector(as_dict(spec.get("selector"))), IMMUTABLE)


def validate_replica_set(c: Causes, obj: Obj, old: Obj | None) -> None:
    spec = as_dict(obj.get("spec"))
    validate_nonnegative(c, spec, "replicas", "spec")
    validate_nonnegative(c, spec, "minReadySeconds", "spec")
    # Upstream reuses the Deployment wording here.
    validate_selector_matches_template(c, spec, "spec", "deployment")
    validate_pod_template_spec(c, spec.get("template"), "spec.template", ("Always",), "ReplicaSet")
    if old is not None:
        _selector_immutable(c, spec, as_dict(old.get("spec")))


_STS_MUTABLE = (
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "revisionHistoryLimit",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
)


def validate_stateful_set(c: Causes, obj: Obj, old: Obj | None) -> None:
    spec = as_dict(obj.get("spec"))
    policy = spec.get("podManagementPolicy")
    if not policy:
        c.required("spec.podManagementPolicy", "")
    elif policy not in ("OrderedReady", "Parallel"):
        c.invalid("spec.podManagementPolicy", policy, "must be 'OrderedReady' or 'Parallel'")
    strategy = as_dict(spec.get("updateStrategy"))
    kind = strategy.get("type")
    if not kind:
        c.required("spec.updateStrategy", "")
    elif kind == "OnDelete":
        if strategy.get("rollingUpdate") is not None:
            c.invalid(
                "spec.updateStrategy.rollingUpdate",
                strategy["rollingUpdate"],
                "only allowed for updateStrategy 'RollingUpdate'",
            )
    elif kind == "RollingUpdate":
        rolling = as_dict(strategy.get("rollingUpdate"))
        validate_nonnegative(c, rolling, "partition", "spec.updateStrategy.rollingUpdate")
        validate_int_or_percent(
            c, rolling.get("maxUnavailable"), "spec.updateStrategy.rollingUpdate.maxUnavailable"
        )
    else:
        c.invalid(
            "spec.updateStrategy",
            GoText(json.dumps(strategy, sort_keys=True)),
            "must be 'RollingUpdate' or 'OnDelete'",
        )
    retention = as_dict(spec.get("persistentVolumeClaimRetentionPolicy"))
    for key in ("whenDeleted", "whenScaled"):
        validate_one_of(
            c,
            retention,
            key,
            "spec.persistentVolumeClaimRetentionPolicy",
            ("Retain", "Delete"),
            required=False,
        )
    for key in ("replicas", "minReadySeconds", "revisionHistoryLimit"):
        validate_nonnegative(c, spec, key, "spec")
    validate_nonnegative(c, as_dict(spec.get("ordinals")), "start", "spec.ordinals")
    validate_selector_matches_template(c, spec, "spec", "statefulset")
    # Containers may mount a volumeClaimTemplate by name: the controller adds that volume to
    # each pod, so count the claims as volumes here (upstream skips the template's volume check).
    template = spec.get("template")
    if isinstance(template, dict):
        claims = [
            {"name": name}
            for t in map(as_dict, as_list(spec.get("volumeClaimTemplates")))
            if (name := as_dict(t.get("metadata")).get("name"))
        ]
        pod = as_dict(template.get("spec"))
        template = {**template, "spec": {**pod, "volumes": [*as_list(pod.get("volumes")), *claims]}}
    validate_pod_template_spec(c, template, "spec.template", ("Always",), "StatefulSet")
    if old is not None:
        old_spec = as_dict(old.get("spec"))
        allowed = {**old_spec, **{k: spec.get(k) for k in _STS_MUTABLE}}
        if semantic(allowed) != semantic(spec):
            c.forbidden(
                "spec",
                "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', "
                "'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and "
                "'minReadySeconds' are forbidden",
            )


def validate_daemon_set(c: Causes, obj: Obj, old: Obj | None) -> None:
    spec = as_dict(obj.get("spec"))
    validate_selector_matches_template(c, spec, "spec", "daemonset")
    validate_pod_template_spec(c, spec.get("template"), "spec.template", ("Always",), "DaemonSet")
    for key in ("minReadySeconds", "revisionHistoryLimit"):
        validate_nonnegative(c, spec, key, "spec")
    strategy = as_dict(spec.get("updateStrategy"))
    kind = strategy.get("type")
    if kind == "RollingUpdate":
        rolling = strategy.get("rollingUpdate")
        if not isinstance(rolling, dict):
            c.required("spec.updateStrategy.rollingUpdate", "")
        else:
            path = "spec.updateStrategy.rollingUpdate"
            unavailable, surge = rolling.get("maxUnavailable"), rolling.get("maxSurge")
            for key, value in (("maxUnavailable", unavailable), ("maxSurge", surge)):
                validate_int_or_percent(c, value, f"{path}.{key}")
                validate_not_over_100_percent(c, value, f"{path}.{key}")
            has_unavailable = _int_or_percent_value(unavailable) not in (0, None)
            has_surge = _int_or_percent_value(surge) not in (0, None)
            if has_unavailable and has_surge:
                c.invalid(f"{path}.maxSurge", surge, "may not be set when maxUnavailable is non-zero")
            elif not has_unavailable and not has_surge:
                c.invalid(f"{path}.maxUnavailable", unavailable, "cannot be 0 when maxSurge is 0")
    elif kind != "OnDelete":
        c.not_supported(
            "spec.updateStrategy", GoText(json.dumps(strategy, sort_keys=True)), ("OnDelete", "RollingUpdate")
        )
    if old is not None:
        _selector_immutable(c, spec, as_dict(old.get("spec")))
