"""What the watcher publishes of a Secret (kcm_watcher.redact): no data, a mark that says so."""

from __future__ import annotations

import json
from typing import Any

from kcm_shared.apimachinery import gvr
from kcm_watcher import redact

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
SECRET: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {
        "name": "db",
        "namespace": "ns",
        "uid": "u-1",
        "resourceVersion": "7",
        "generation": 1,
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "labels": {"app": "db"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "ServiceAccount", "name": "sa", "uid": "u-2"}],
        "finalizers": ["f"],
        "annotations": {
            "a": "b",
            LAST_APPLIED: '{"stringData": {"password": "hunter2"}}',
            "kubernetes.io/service-account.name": "sa",
            "kubernetes.io/service-account.uid": "u-2",
        },
        "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:data": {"f:password": {}}}}],
        "generateName": "d",
    },
    "type": "kubernetes.io/service-account-token",
    "immutable": True,
    "data": {"password": "aHVudGVyMg=="},
    "stringData": {"username": "admin"},
    "futureField": {"secret": "x"},
}


def test_a_secret_is_published_as_its_allow_list() -> None:
    out = json.loads(redact.body(redact.SECRETS, json.dumps(SECRET).encode()))
    assert set(out) == {"apiVersion", "kind", "metadata", "type"}
    assert out["type"] == "kubernetes.io/service-account-token"
    meta = out.pop("metadata")
    assert meta.pop("annotations") == {
        "kubernetes.io/service-account.name": "sa",
        "kubernetes.io/service-account.uid": "u-2",
        redact.REDACTED: "data,stringData",
    }
    assert meta == {k: v for k, v in SECRET["metadata"].items() if k in redact.METADATA}
    assert b"hunter2" not in redact.body(redact.SECRETS, json.dumps(SECRET).encode())


def test_redacting_twice_changes_nothing_and_a_bare_secret_is_marked() -> None:
    once = redact.body(redact.SECRETS, json.dumps(SECRET).encode())
    assert redact.body(redact.SECRETS, once) == once
    bare = json.loads(redact.body(redact.SECRETS, b'{"kind":"Secret","metadata":null}'))
    assert bare["metadata"] == {"annotations": {redact.REDACTED: "data,stringData"}}


def test_other_resources_pass_untouched() -> None:
    raw = json.dumps({**SECRET, "kind": "ConfigMap"}).encode()
    for res in (gvr.Resource("", "v1", "configmaps"), gvr.Resource("example.com", "v1", "secrets")):
        assert redact.body(res, raw) is raw
