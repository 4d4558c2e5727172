"""Validation of objects before they are stored, with upstream's error causes.

`operations` calls `validate` after defaulting on every create (`old` None) and update; a
non-empty result becomes a 422 Invalid Status whose `details.causes` are these causes.
Rules and messages follow upstream's pkg/apis/*/validation and apimachinery's metadata
validation, limited to what keeps controllers working: object names and metadata, label
selectors and their templates, pod specs, workload strategies, and the fields that may
not change once set. Unknown kinds (custom resources) get the metadata checks only.

The rules live in one module per API group, as upstream splits them (`core`, `apps`,
`batch`, `certificates`, `policy`, `autoscaling`, `apiextensions`, `apiregistration`, `discovery`, `storage`;
`volumes` holds core's PersistentVolume and claim rules, `limitranges` its LimitRange rules); `metav1` holds the metadata,
label selector and write-option rules, `fielderrors` the causes and how values print. This
module only dispatches by group and kind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .apiextensions import validate_custom_resource_definition
from .apiregistration import validate_api_service
from .apps import validate_daemon_set, validate_deployment, validate_replica_set, validate_stateful_set
from .autoscaling import validate_horizontal_pod_autoscaler
from .batch import validate_cron_job, validate_job, validate_job_status
from .certificates import validate_csr
from .core import (
    validate_config_map,
    validate_endpoints,
    validate_node,
    validate_pod,
    validate_pod_template,
    validate_replication_controller,
    validate_resource_quota,
    validate_secret,
    validate_service,
)
from .discovery import validate_endpoint_slice
from .fielderrors import Cause, Causes, Obj, as_dict
from .limitranges import validate_limit_range
from .metav1 import validate_metadata, validate_metadata_update
from .policy import validate_pod_disruption_budget
from .storage import (
    validate_csi_driver,
    validate_csi_node,
    validate_storage_class,
    validate_volume_attachment,
)
from .volumes import validate_persistent_volume, validate_persistent_volume_claim

# A kind's rules add to the causes what is wrong with `obj`; `old` is the stored object on an
# update, None on a create.
_Validator = Callable[[Causes, Obj, Obj | None], None]
_VALIDATORS: dict[tuple[str, str], _Validator] = {
    ("", "Pod"): validate_pod,
    ("", "PodTemplate"): validate_pod_template,
    ("", "ReplicationController"): validate_replication_controller,
    ("", "Service"): validate_service,
    ("", "Node"): validate_node,
    ("", "Endpoints"): validate_endpoints,
    ("", "ConfigMap"): validate_config_map,
    ("", "Secret"): validate_secret,
    ("", "ResourceQuota"): validate_resource_quota,
    ("", "LimitRange"): validate_limit_range,
    ("", "PersistentVolumeClaim"): validate_persistent_volume_claim,
    ("", "PersistentVolume"): validate_persistent_volume,
    ("storage.k8s.io", "StorageClass"): validate_storage_class,
    ("storage.k8s.io", "CSIDriver"): validate_csi_driver,
    ("storage.k8s.io", "VolumeAttachment"): validate_volume_attachment,
    ("storage.k8s.io", "CSINode"): validate_csi_node,
    ("apps", "Deployment"): validate_deployment,
    ("apps", "ReplicaSet"): validate_replica_set,
    ("apps", "StatefulSet"): validate_stateful_set,
    ("apps", "DaemonSet"): validate_daemon_set,
    ("batch", "Job"): validate_job,
    ("batch", "CronJob"): validate_cron_job,
    ("policy", "PodDisruptionBudget"): validate_pod_disruption_budget,
    ("autoscaling", "HorizontalPodAutoscaler"): validate_horizontal_pod_autoscaler,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): validate_custom_resource_definition,
    ("discovery.k8s.io", "EndpointSlice"): validate_endpoint_slice,
    ("apiregistration.k8s.io", "APIService"): validate_api_service,
}


# Kinds whose /status writes have rules of their own; their spec (copied from the stored
# object) is then not validated again, as upstream's status strategies do.
_STATUS_VALIDATORS: dict[tuple[str, str], Callable[[Causes, Obj, Obj], None]] = {
    ("batch", "Job"): validate_job_status,
}


def validate(
    group: str, kind: str, obj: dict[str, Any], old: dict[str, Any] | None, subresource: str = ""
) -> list[Cause]:
    """Every reason `obj` (stored version, defaulted) may not be written; [] when it may.

    `old` is the stored object on update and None on create; `subresource` is "status" for a
    write through /status.
    """
    c = Causes()
    meta = as_dict(obj.get("metadata"))
    validate_metadata(c, group, kind, meta)
    if old is not None:
        validate_metadata_update(c, meta, as_dict(old.get("metadata")))
    if (group, kind) == ("certificates.k8s.io", "CertificateSigningRequest"):
        # Its subresources (status, approval) each allow their own changes.
        validate_csr(c, obj, old, subresource)
        return list(c)
    status_validator = _STATUS_VALIDATORS.get((group, kind)) if subresource == "status" else None
    if status_validator is not None and old is not None:
        status_validator(c, obj, old)
        return list(c)
    validator = _VALIDATORS.get((group, kind))
    if validator is not None:
        validator(c, obj, old)
    return list(c)
