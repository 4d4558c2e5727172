"""What the watcher publishes of a Secret (kcm_watcher.redact): no data, a mark that says so."""

from __future__ import annotations

import json

from kcm_shared.apimachinery import gvr
from kcm_watcher import redact

SECRET = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {"name": "db", "namespace": "ns", "annotations": {"a": "b"}, "resourceVersion": "7"},
    "type": "kubernetes.io/basic-auth",
    "immutable": True,
    "data": {"password": "aHVudGVyMg=="},
    "stringData": {"username": "admin"},
}


def test_a_secret_loses_its_data_and_keeps_the_rest() -> None:
    out = json.loads(redact.body(redact.SECRETS, json.dumps(SECRET).encode()))
    assert "data" not in out and "stringData" not in out
    assert out["type"] == "kubernetes.io/basic-auth" and out["immutable"] is True
    assert out["metadata"]["annotations"] == {"a": "b", redact.REDACTED: "data,stringData"}
    assert out["metadata"]["resourceVersion"] == "7"


def test_redacting_twice_changes_nothing_and_a_bare_secret_is_marked() -> None:
    once = redact.body(redact.SECRETS, json.dumps(SECRET).encode())
    assert redact.body(redact.SECRETS, once) == once
    bare = json.loads(redact.body(redact.SECRETS, b'{"kind":"Secret","metadata":null}'))
    assert bare["metadata"] == {"annotations": {redact.REDACTED: "data,stringData"}}


def test_other_resources_pass_untouched() -> None:
    raw = json.dumps({**SECRET, "kind": "ConfigMap"}).encode()
    for res in (gvr.Resource("", "v1", "configmaps"), gvr.Resource("example.com", "v1", "secrets")):
        assert redact.body(res, raw) is raw
