"""Which fields each kind can be selected by (`?fieldSelector=`), as upstream's field label tables.

Upstream registers per-kind field label functions (pkg/registry/*/strategy.go GetAttrs /
`AddFieldLabelConversionFunc`); a selector on any other field is a 400 Bad Request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kcm_shared.apimachinery import selectors

from kcm_apiserver import errors

Obj = dict[str, Any]


def _get(obj: Obj, *path: str) -> str:
    cur: Any = obj
    for part in path:
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


Extract = Callable[[Obj], str]


def _f(*path: str) -> Extract:
    return lambda obj: _get(obj, *path)


# (group, kind) -> extra field labels beyond metadata.name / metadata.namespace.
_EXTRA: dict[tuple[str, str], dict[str, Extract]] = {
    ("", "Pod"): {
        "spec.nodeName": _f("spec", "nodeName"),
        "spec.restartPolicy": _f("spec", "restartPolicy"),
        "spec.schedulerName": _f("spec", "schedulerName"),
        "spec.serviceAccountName": _f("spec", "serviceAccountName"),
        "spec.hostNetwork": lambda o: _get(o, "spec", "hostNetwork") or "false",
        "status.phase": _f("status", "phase"),
        "status.podIP": _f("status", "podIP"),
        "status.nominatedNodeName": _f("status", "nominatedNodeName"),
    },
    ("", "Event"): {
        "involvedObject.kind": _f("involvedObject", "kind"),
        "involvedObject.namespace": _f("involvedObject", "namespace"),
        "involvedObject.name": _f("involvedObject", "name"),
        "involvedObject.uid": _f("involvedObject", "uid"),
        "involvedObject.apiVersion": _f("involvedObject", "apiVersion"),
        "involvedObject.resourceVersion": _f("involvedObject", "resourceVersion"),
        "involvedObject.fieldPath": _f("involvedObject", "fieldPath"),
        "reason": _f("reason"),
        "reportingComponent": _f("reportingComponent"),
        "source": _f("source", "component"),
        "type": _f("type"),
    },
    ("", "Secret"): {"type": _f("type")},
    ("", "Node"): {"spec.unschedulable": lambda o: _get(o, "spec", "unschedulable") or "false"},
    ("", "Namespace"): {"status.phase": _f("status", "phase")},
    ("", "ReplicationController"): {"status.replicas": _f("status", "replicas")},
    ("apps", "ReplicaSet"): {"status.replicas": _f("status", "replicas")},
    ("batch", "Job"): {"status.successful": _f("status", "succeeded")},
    ("certificates.k8s.io", "CertificateSigningRequest"): {"spec.signerName": _f("spec", "signerName")},
}


def field_labels(group: str, kind: str, obj: Obj) -> dict[str, str]:
    meta = obj.get("metadata", {})
    labels = {"metadata.name": meta.get("name", ""), "metadata.namespace": meta.get("namespace", "")}
    for field, extract in _EXTRA.get(_canonical(group, kind), {}).items():
        labels[field] = extract(obj)
    return labels


def _canonical(group: str, kind: str) -> tuple[str, str]:
    # events.k8s.io Events are stored as core Events, so they share its field labels.
    return ("", kind) if group == "events.k8s.io" else (group, kind)


def check(group: str, kind: str, selector: selectors.FieldSelector) -> None:
    """Reject selectors on fields the kind does not index, with upstream's message."""
    allowed = {"metadata.name", "metadata.namespace", *_EXTRA.get(_canonical(group, kind), {})}
    for field, _op, _value in selector.requirements:
        if field not in allowed:
            raise errors.bad_request(f"field label not supported: {field}")
