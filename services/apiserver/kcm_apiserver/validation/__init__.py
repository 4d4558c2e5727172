"""Validation of objects before they are stored, with upstream's error causes.

`operations` calls `validate` after defaulting on every create (`old` None) and update; a
non-empty result becomes a 422 Invalid Status whose `details.causes` are these causes.
Rules and messages follow upstream's pkg/apis/*/validation and apimachinery's metadata
validation, limited to what keeps controllers working: object names and metadata, label
selectors and their templates, pod specs, workload strategies, and the fields that may
not change once set. Unknown kinds (custom resources) get the metadata checks only.

The rules live in one module per API group, as upstream splits them (`core`, `apps`,
`batch`, `policy`, `autoscaling`, `apiextensions`, `discovery`); `metav1` holds the metadata,
label selector and write-option rules, `fielderrors` the causes and how values print. This
module only dispatches by group and kind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .apiextensions import _custom_resource_definition
from .apps import _daemon_set, _deployment, _replica_set, _stateful_set
from .autoscaling import _horizontal_pod_autoscaler
from .batch import _cron_job, _job, _job_status
from .core import (
    _config_map,
    _endpoints,
    _node,
    _pod,
    _pod_template_object,
    _replication_controller,
    _resource_quota,
    _secret,
    _service,
)
from .discovery import _endpoint_slice
from .fielderrors import Cause, Obj, _Causes, _dict
from .metav1 import _metadata, _metadata_update
from .policy import _pod_disruption_budget

_Validator = Callable[[_Causes, Obj, Obj | None], None]
_VALIDATORS: dict[tuple[str, str], _Validator] = {
    ("", "Pod"): _pod,
    ("", "PodTemplate"): _pod_template_object,
    ("", "ReplicationController"): _replication_controller,
    ("", "Service"): _service,
    ("", "Node"): _node,
    ("", "Endpoints"): _endpoints,
    ("", "ConfigMap"): _config_map,
    ("", "Secret"): _secret,
    ("", "ResourceQuota"): _resource_quota,
    ("apps", "Deployment"): _deployment,
    ("apps", "ReplicaSet"): _replica_set,
    ("apps", "StatefulSet"): _stateful_set,
    ("apps", "DaemonSet"): _daemon_set,
    ("batch", "Job"): _job,
    ("batch", "CronJob"): _cron_job,
    ("policy", "PodDisruptionBudget"): _pod_disruption_budget,
    ("autoscaling", "HorizontalPodAutoscaler"): _horizontal_pod_autoscaler,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _custom_resource_definition,
    ("discovery.k8s.io", "EndpointSlice"): _endpoint_slice,
}


# Kinds whose /status writes have rules of their own; their spec (copied from the stored
# object) is then not validated again, as upstream's status strategies do.
_STATUS_VALIDATORS: dict[tuple[str, str], Callable[[_Causes, Obj, Obj], None]] = {
    ("batch", "Job"): _job_status,
}


def validate(
    group: str, kind: str, obj: dict[str, Any], old: dict[str, Any] | None, subresource: str = ""
) -> list[Cause]:
    """Every reason `obj` (stored version, defaulted) may not be written; [] when it may.

    `old` is the stored object on update and None on create; `subresource` is "status" for a
    write through /status.
    """
    c = _Causes()
    meta = _dict(obj.get("metadata"))
    _metadata(c, group, kind, meta)
    if old is not None:
        _metadata_update(c, meta, _dict(old.get("metadata")))
    status_validator = _STATUS_VALIDATORS.get((group, kind)) if subresource == "status" else None
    if status_validator is not None and old is not None:
        status_validator(c, obj, old)
        return list(c)
    validator = _VALIDATORS.get((group, kind))
    if validator is not None:
        validator(c, obj, old)
    return list(c)
