"""The root CA publisher's pure parts: when a ConfigMap needs repair, the patch that repairs
it, reading `--root-ca-file` (upstream's message for a file that is not a PEM bundle), and
the bundle's fallback to the kubeconfig's CA."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any, cast

import msgspec
import prometheus_client
import pytest
from kcm_controllers.rootcacertpublisher import controller as publisher
from kcm_shared.base import errors
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import identityflags
from kcm_shared.testing import caches, fakeclient

from tests import certs

BUNDLE = "-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n"
DESCRIBED = {publisher.DESCRIPTION_ANNOTATION: publisher.DESCRIPTION}


def cm_doc(data: dict[str, str] | None, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": publisher.CONFIGMAP_NAME, "resourceVersion": "7", "annotations": annotations},
        "data": data,
    }


def cm(data: dict[str, str] | None, annotations: dict[str, str]) -> publisher.ConfigMapView:
    return msgspec.convert(cm_doc(data, annotations), publisher.ConfigMapView)


@pytest.mark.parametrize(
    ("data", "annotations", "want"),
    [
        ({"ca.crt": BUNDLE}, DESCRIBED, False),
        ({"ca.crt": BUNDLE}, {publisher.DESCRIPTION_ANNOTATION: "a user's own words"}, False),
        ({"ca.crt": BUNDLE}, {}, True),
        ({"ca.crt": BUNDLE}, {publisher.DESCRIPTION_ANNOTATION: ""}, True),
        ({"ca.crt": "other"}, DESCRIBED, True),
        ({"ca.crt": BUNDLE, "extra": "x"}, DESCRIBED, True),
        (None, DESCRIBED, True),
    ],
)
def test_needs_update_as_upstream(
    data: dict[str, str] | None, annotations: dict[str, str], want: bool
) -> None:
    assert publisher.needs_update(cm(data, annotations), BUNDLE) is want


def test_repair_patch_drops_other_keys_and_is_conditional() -> None:
    patch = publisher.repair_patch(cm({"ca.crt": "old", "extra": "x"}, {}), BUNDLE)
    assert patch == {
        "metadata": {"resourceVersion": "7", "annotations": DESCRIBED},
        "data": {"extra": None, "ca.crt": BUNDLE},
    }


def test_root_ca_file_that_is_not_pem_stops_the_start(tmp_path: Path) -> None:
    bad = tmp_path / "ca.crt"
    bad.write_text("not a certificate")
    with pytest.raises(errors.ConfigError, match=f"error parsing root-ca-file at {bad}"):
        identityflags.read_ca(str(bad))
    with pytest.raises(errors.ConfigError, match="error parsing root-ca-file at"):
        identityflags.read_ca(str(tmp_path / "missing"))


def test_the_bundle_is_the_flag_else_the_kubeconfig_ca_else_empty(tmp_path: Path) -> None:
    flag, trusted = tmp_path / "flag.crt", tmp_path / "trusted.crt"
    pem_a, pem_b = certs.self_signed_ca("a"), certs.self_signed_ca("b")
    flag.write_text(pem_a)
    trusted.write_text(pem_b)
    conn = kubeclient.Connection("http://127.0.0.1:1", ca_file=str(trusted))
    assert identityflags.root_ca(argparse.Namespace(root_ca_file=str(flag)), conn) == pem_a
    assert identityflags.root_ca(argparse.Namespace(root_ca_file=""), conn) == pem_b
    assert identityflags.root_ca(argparse.Namespace(), kubeclient.Connection("http://127.0.0.1:1")) == ""


CM_PATH = f"/api/v1/namespaces/ns/configmaps/{publisher.CONFIGMAP_NAME}"


def sync(client: fakeclient.FakeClient, existing: dict[str, Any] | None) -> None:
    """One sync of namespace ns, with `existing` in the cache and in the API alike."""
    held = [] if existing is None else [{**existing, "metadata": {**existing["metadata"], "namespace": "ns"}}]
    for doc in held:
        client.add(CM_PATH, doc)
    configmaps = caches.new(publisher.CONFIGMAPS, publisher.ConfigMapView, held)
    namespaces = cast(Any, None)  # the sync reads only ConfigMaps, as upstream's
    asyncio.run(publisher.Publisher(client, namespaces, configmaps, lambda k: None, BUNDLE).sync("ns"))


def syncs(code: str) -> float:
    return (
        prometheus_client.REGISTRY.get_sample_value("root_ca_cert_publisher_sync_total", {"code": code})
        or 0.0
    )


def test_sync_creates_repairs_or_leaves_alone() -> None:
    before = syncs("200")
    client = fakeclient.FakeClient()
    sync(client, None)
    sync(client, cm_doc({"ca.crt": BUNDLE}, DESCRIBED))
    sync(client, cm_doc({"ca.crt": "old"}, DESCRIBED))
    assert [(verb, path) for verb, path, _ in client.calls()] == [
        ("create", "/api/v1/namespaces/ns/configmaps"),
        ("patch", "/api/v1/namespaces/ns/configmaps/kube-root-ca.crt"),
    ]
    assert client.calls()[0][2]["metadata"] == {"name": "kube-root-ca.crt", "annotations": DESCRIBED}
    assert client.calls()[0][2]["data"] == {"ca.crt": BUNDLE}
    assert syncs("200") == before + 3


TERMINATING = {"details": {"causes": [{"reason": "NamespaceTerminating"}]}}


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (kubeclient.ApiError(404, "NotFound", "gone"), "200"),
        (kubeclient.ApiError(403, "Forbidden", "terminating", TERMINATING), "200"),
        (kubeclient.ApiError(409, "AlreadyExists", "exists"), "409"),
    ],
)
def test_create_errors_and_their_metric_code(error: kubeclient.ApiError, code: str) -> None:
    before = syncs(code)
    client = fakeclient.FakeClient()
    client.fail("create", None, error)
    if code == "200":
        sync(client, None)
    else:
        with pytest.raises(kubeclient.ApiError):
            sync(client, None)
    assert syncs(code) == before + 1
