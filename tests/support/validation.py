"""Objects of every kind the API server validates, defaulted as the server holds them, and
validation's answer for one, for the apiserver's validation tests
(tests/unit/apiserver/test_validation.py, test_validation_job.py)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from kcm_apiserver.defaults import apply_defaults, generate_job_selector
from kcm_apiserver.validation import validate

Obj = dict[str, Any]
Mutator = Callable[[Obj], None]

GROUP_OF = {
    "Pod": "",
    "Service": "",
    "ReplicationController": "",
    "ConfigMap": "",
    "Secret": "",
    "Namespace": "",
    "Node": "",
    "PodTemplate": "",
    "Deployment": "apps",
    "ReplicaSet": "apps",
    "StatefulSet": "apps",
    "DaemonSet": "apps",
    "Job": "batch",
    "CronJob": "batch",
    "PodDisruptionBudget": "policy",
    "HorizontalPodAutoscaler": "autoscaling",
    "Role": "rbac.authorization.k8s.io",
    "ClusterRole": "rbac.authorization.k8s.io",
    "CustomResourceDefinition": "apiextensions.k8s.io",
}
CLUSTER_SCOPED = {"Namespace", "Node", "ClusterRole", "CustomResourceDefinition"}


def _pod_spec(**extra: Any) -> Obj:
    return {"containers": [{"name": "app", "image": "nginx:1.25"}], **extra}


def _template(labels: Obj | None = None, **spec: Any) -> Obj:
    return {"metadata": {"labels": {"app": "web"} if labels is None else labels}, "spec": _pod_spec(**spec)}


def _workload(**spec: Any) -> Obj:
    return {"selector": {"matchLabels": {"app": "web"}}, "template": _template(), **spec}


SPECS: dict[str, Obj] = {
    "Pod": {"spec": _pod_spec()},
    "Service": {"spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}},
    "ReplicationController": {"spec": {"selector": {"app": "web"}, "template": _template()}},
    "ConfigMap": {"data": {"key.name": "v"}},
    "Secret": {"data": {"tls.crt": "eA=="}},
    "Namespace": {},
    "Node": {},
    "PodTemplate": {"template": _template()},
    "Deployment": {"spec": _workload()},
    "ReplicaSet": {"spec": _workload()},
    "StatefulSet": {"spec": _workload(serviceName="web")},
    "DaemonSet": {"spec": _workload()},
    "Job": {"spec": {"template": _template(restartPolicy="Never")}},
    "CronJob": {
        "spec": {
            "schedule": "*/5 * * * *",
            "jobTemplate": {"spec": {"template": _template(restartPolicy="OnFailure")}},
        }
    },
    "PodDisruptionBudget": {"spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}},
    "HorizontalPodAutoscaler": {
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "maxReplicas": 3,
        }
    },
    "Role": {"rules": []},
    "ClusterRole": {"rules": []},
    "CustomResourceDefinition": {"spec": {"group": "example.com", "names": {"plural": "widgets"}}},
}


def make(kind: str, name: str | None = None, mutate: Mutator | None = None, *, create: bool = True) -> Obj:
    """A defaulted object of `kind`, as the server would hold it just before validation."""
    if name is None:
        name = "widgets.example.com" if kind == "CustomResourceDefinition" else "web"
    meta: Obj = {"name": name, "uid": "uid-1"}
    if kind not in CLUSTER_SCOPED:
        meta["namespace"] = "default"
    obj: Obj = {"metadata": meta, **copy.deepcopy(SPECS[kind])}
    if mutate is not None:
        mutate(obj)
    apply_defaults(GROUP_OF[kind], kind, obj)
    if kind == "Job" and create:
        generate_job_selector(obj)
    return obj


def check(kind: str, obj: Obj, old: Obj | None = None) -> list[tuple[str, str, str]]:
    return [(c["reason"], c["field"], c["message"]) for c in validate(GROUP_OF[kind], kind, obj, old)]


def fields(kind: str, obj: Obj, old: Obj | None = None) -> list[tuple[str, str]]:
    return [(reason, field) for reason, field, _ in check(kind, obj, old)]
