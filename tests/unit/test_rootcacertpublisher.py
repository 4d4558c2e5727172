"""The root CA publisher's pure parts: when a ConfigMap needs repair, the patch that repairs
it, reading `--root-ca-file` (upstream's message for a file that is not a PEM bundle), and
the bundle's fallback to the kubeconfig's CA."""

from __future__ import annotations

import argparse
from pathlib import Path

import msgspec
import pytest
from kcm_controllers.rootcacertpublisher import publisher
from kcm_shared import errors, kubeclient

from tests import certs

BUNDLE = "-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n"
DESCRIBED = {publisher.DESCRIPTION_ANNOTATION: publisher.DESCRIPTION}


def cm(data: dict[str, str] | None, annotations: dict[str, str]) -> publisher.ConfigMapView:
    doc = {
        "metadata": {"name": publisher.CONFIGMAP_NAME, "resourceVersion": "7", "annotations": annotations},
        "data": data,
    }
    return msgspec.convert(doc, publisher.ConfigMapView)


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
        publisher.read_ca(str(bad))
    with pytest.raises(errors.ConfigError, match="error parsing root-ca-file at"):
        publisher.read_ca(str(tmp_path / "missing"))


def test_the_bundle_is_the_flag_else_the_kubeconfig_ca_else_empty(tmp_path: Path) -> None:
    flag, trusted = tmp_path / "flag.crt", tmp_path / "trusted.crt"
    pem_a, pem_b = certs.self_signed_ca("a"), certs.self_signed_ca("b")
    flag.write_text(pem_a)
    trusted.write_text(pem_b)
    conn = kubeclient.Connection("http://127.0.0.1:1", ca_file=str(trusted))
    assert publisher.root_ca(argparse.Namespace(root_ca_file=str(flag)), conn) == pem_a
    assert publisher.root_ca(argparse.Namespace(root_ca_file=""), conn) == pem_b
    assert publisher.root_ca(argparse.Namespace(), kubeclient.Connection("http://127.0.0.1:1")) == ""
