"""The signing controller's pure parts with upstream's cases: each signer's checks and messages,
the certificate it builds (subject, SANs, usages, never a CA, lifetime, the CA's NotAfter cap,
serials), the lifetime rule, the flags' validation, and one sync through the fake client."""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime as dt
from pathlib import Path
from typing import Any

import msgspec
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kcm_controllers.csrsigning import authority, config, requests
from kcm_controllers.csrsigning import controller as signing
from kcm_shared.base import errors
from kcm_shared.controllerutil import csr
from kcm_shared.testing import caches, fakeclient

from tests import csrs

NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
CLIENT_USAGES = ["digital signature", "key encipherment", "client auth"]


def req(*args: Any, **kwargs: Any) -> x509.CertificateSigningRequest:
    return csr.parse_request(csrs.request_pem(*args, **kwargs))


@pytest.mark.parametrize(
    ("request_args", "usages", "want"),
    [
        ((("system:node:a", ("system:nodes",)), {}), CLIENT_USAGES, None),
        ((("system:node:a", ("system:nodes",)), {}), ["digital signature", "client auth"], None),
        ((("system:node:a", ("other",)), {}), CLIENT_USAGES, "subject organization is not system:nodes"),
        (
            (("system:node:a", ("system:nodes", "x")), {}),
            CLIENT_USAGES,
            "subject organization is not system:nodes",
        ),
        (
            (("system:node:a", ("system:nodes",)), {"dns": ("a",)}),
            CLIENT_USAGES,
            "DNS subjectAltNames are not allowed",
        ),
        (
            (("system:node:a", ("system:nodes",)), {"emails": ("a@b",)}),
            CLIENT_USAGES,
            "Email subjectAltNames are not allowed",
        ),
        (
            (("system:node:a", ("system:nodes",)), {"ips": ("1.2.3.4",)}),
            CLIENT_USAGES,
            "IP subjectAltNames are not allowed",
        ),
        (
            (("node-a", ("system:nodes",)), {}),
            CLIENT_USAGES,
            "subject common name does not begin with system:node:",
        ),
        (
            (("system:node:a", ("system:nodes",)), {}),
            ["client auth"],
            "usages did not match [client auth digital signature key encipherment]",
        ),
    ],
)
def test_kubelet_client_checks_as_upstream(
    request_args: tuple[tuple[Any, ...], dict[str, Any]], usages: list[str], want: str | None
) -> None:
    args, kwargs = request_args
    assert requests.signer_error(csr.KUBELET_CLIENT, req(*args, **kwargs), usages) == want


def test_kubelet_serving_checks_as_upstream() -> None:
    serving = ["digital signature", "key encipherment", "server auth"]
    good = req("system:node:a", ("system:nodes",), dns=("a.example",))
    assert requests.signer_error(csr.KUBELET_SERVING, good, serving) is None
    no_san = req("system:node:a", ("system:nodes",))
    assert (
        requests.signer_error(csr.KUBELET_SERVING, no_san, serving) == "DNS or IP subjectAltName is required"
    )
    assert (
        requests.signer_error(csr.KUBELET_SERVING, good, ["server auth"])
        == "usages did not match [digital signature key encipherment server auth]"
    )


@pytest.mark.parametrize(
    ("usages", "want"),
    [
        (["client auth"], None),
        (["digital signature", "key encipherment", "client auth"], None),
        (["server auth", "client auth"], "invalid usage for client certificate: server auth"),
        (["digital signature"], "missing required usage for client certificate: client auth"),
    ],
)
def test_kube_apiserver_client_usages_as_upstream(usages: list[str], want: str | None) -> None:
    assert requests.signer_error(csr.KUBE_APISERVER_CLIENT, req("alice"), usages) == want
    assert requests.signer_error(csr.LEGACY_UNKNOWN, req("alice"), usages) is None


@pytest.mark.parametrize(
    ("expiration", "want"),
    [
        (None, dt.timedelta(hours=8760)),
        (600, dt.timedelta(minutes=10)),
        (599, dt.timedelta(minutes=10)),
        (3600, dt.timedelta(hours=1)),
        (10**9, dt.timedelta(hours=8760)),
    ],
)
def test_duration_as_upstream(expiration: int | None, want: dt.timedelta) -> None:
    assert authority.duration(expiration, dt.timedelta(hours=8760)) == want


def test_validity_backdates_long_certificates_only_and_caps_at_the_ca() -> None:
    far = NOW + dt.timedelta(days=3650)
    five = dt.timedelta(minutes=5)
    assert authority.validity(NOW, dt.timedelta(hours=1), far) == (NOW - five, NOW + dt.timedelta(hours=1))
    assert authority.validity(NOW, dt.timedelta(hours=8), far) == (
        NOW - five,
        NOW + dt.timedelta(hours=8) - five,
    )
    soon = NOW + dt.timedelta(minutes=30)
    assert authority.validity(NOW, dt.timedelta(hours=1), soon) == (NOW - five, soon)
    with pytest.raises(ValueError, match="the signer has expired"):
        authority.validity(NOW, dt.timedelta(hours=1), NOW - dt.timedelta(minutes=6))
    with pytest.raises(ValueError, match="refusing to sign a certificate that expired in the past"):
        authority.validity(NOW, dt.timedelta(hours=1), NOW - dt.timedelta(minutes=1))


def test_usages_map_as_the_permissive_policy_and_unknown_ones_fail() -> None:
    bits, ext = authority.key_usages(["client auth", "signing", "server auth", "any", "s/mime"])
    assert bits == 1
    assert ext == [
        ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE,
        ExtendedKeyUsageOID.SERVER_AUTH,
        ExtendedKeyUsageOID.CLIENT_AUTH,
        ExtendedKeyUsageOID.EMAIL_PROTECTION,
    ]
    with pytest.raises(ValueError, match=r'unrecognized usage values: \["bogus"\]'):
        authority.key_usages(["bogus"])


@pytest.mark.parametrize(
    "usages",
    [
        ["digital signature"],
        ["digital signature", "key encipherment"],
        ["key agreement", "decipher only"],
        ["crl sign"],
    ],
)
def test_key_usage_der_is_what_cryptography_reads(usages: list[str]) -> None:
    bits, _ = authority.key_usages(usages)
    ca = authority.CA(*csrs.ca())
    pem = authority.sign(ca, req("u"), usages, dt.timedelta(hours=1), dt.datetime.now(dt.UTC))
    got = x509.load_pem_x509_certificate(pem).extensions.get_extension_for_class(x509.KeyUsage)
    assert got.critical
    ku = got.value
    assert ku.digital_signature == bool(bits & 1)
    assert ku.key_encipherment == bool(bits & 4)
    assert ku.key_agreement == bool(bits & 16)
    assert ku.crl_sign == bool(bits & 64)


def test_a_signed_certificate_is_the_request_under_the_ca_and_never_a_ca() -> None:
    ca_cert, ca_key = csrs.ca("kubernetes")
    ca = authority.CA(ca_cert, ca_key)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    request = req("system:node:n1", ("system:nodes",))
    pem = authority.sign(ca, request, CLIENT_USAGES, dt.timedelta(hours=1), now)
    cert = x509.load_pem_x509_certificate(pem)
    assert cert.issuer == ca_cert.subject
    cert.verify_directly_issued_by(ca_cert)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "system:node:n1"
    assert csr.organizations(cert.subject) == ["system:nodes"]
    assert cert.public_key() == request.public_key()
    assert cert.not_valid_before_utc == now - dt.timedelta(minutes=5)
    assert cert.not_valid_after_utc == now + dt.timedelta(hours=1)
    basic = cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert basic.critical and not basic.value.ca
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.CLIENT_AUTH
    ]
    assert 0 < cert.serial_number < 2**128
    other = x509.load_pem_x509_certificate(
        authority.sign(ca, request, CLIENT_USAGES, dt.timedelta(hours=1), now)
    )
    assert other.serial_number != cert.serial_number


def test_sans_are_copied_from_the_request() -> None:
    ca = authority.CA(*csrs.ca())
    request = req("system:node:a", ("system:nodes",), dns=("a.example",), ips=("10.0.0.1",))
    pem = authority.sign(ca, request, ["server auth"], dt.timedelta(hours=1), dt.datetime.now(dt.UTC))
    sans = (
        x509.load_pem_x509_certificate(pem)
        .extensions.get_extension_for_class(x509.SubjectAlternativeName)
        .value
    )
    assert sans.get_values_for_type(x509.DNSName) == ["a.example"]
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["10.0.0.1"]


def ns(**values: str) -> argparse.Namespace:
    args = argparse.Namespace(
        cluster_signing_cert_file="", cluster_signing_key_file="", cluster_signing_duration=3600.0
    )
    for infix in config.SIGNERS:
        for part in ("cert", "key"):
            setattr(args, config._attr(infix, part), "")
    for name, value in values.items():
        setattr(args, name, value)
    return args


def test_flags_validate_as_upstream() -> None:
    assert config.disabled_by(ns()) == "Skipping CSR signer controller because no csr cert/key was specified"
    assert config.disabled_by(ns(cluster_signing_cert_file="c", cluster_signing_key_file="k")) is None
    with pytest.raises(
        errors.ConfigError, match=r"cannot specify --cluster-signing-\{cert,key\}-file and other"
    ):
        config.disabled_by(
            ns(
                cluster_signing_cert_file="c",
                cluster_signing_key_file="k",
                cluster_signing_kubelet_client_cert_file="c2",
                cluster_signing_kubelet_client_key_file="k2",
            )
        )
    with pytest.raises(
        errors.ConfigError, match='"cluster-signing-legacy-unknown": cannot specify key without cert'
    ):
        config.disabled_by(ns(cluster_signing_legacy_unknown_key_file="k"))


def test_per_signer_files_replace_the_shared_pair() -> None:
    files = config.signer_files(
        ns(cluster_signing_kubelet_client_cert_file="c", cluster_signing_kubelet_client_key_file="k")
    )
    assert files == {
        csr.KUBELET_SERVING: None,
        csr.KUBELET_CLIENT: ("c", "k"),
        csr.KUBE_APISERVER_CLIENT: None,
        csr.LEGACY_UNKNOWN: None,
    }
    shared = config.signer_files(ns(cluster_signing_cert_file="c", cluster_signing_key_file="k"))
    assert set(shared.values()) == {("c", "k")}


def test_load_names_the_bad_file(tmp_path: Path) -> None:
    cert, _ = csrs.ca()
    (tmp_path / "ca.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "ca.key").write_text("junk")
    with pytest.raises(ValueError, match="error reading CA key file"):
        authority.load(str(tmp_path / "ca.crt"), str(tmp_path / "ca.key"))


def csr_doc(
    name: str, pem: bytes, signer: str, usages: list[str], conditions: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": name, "resourceVersion": "5"},
        "spec": {"request": csrs.b64(pem), "signerName": signer, "usages": usages, "expirationSeconds": 3600},
        "status": {"conditions": conditions},
    }


APPROVED = [{"type": "Approved", "status": "True", "reason": "r", "message": "m"}]


def run_sync(doc: dict[str, Any]) -> fakeclient.FakeClient:
    client = fakeclient.FakeClient()
    client.add("/apis/certificates.k8s.io/v1/certificatesigningrequests/" + doc["metadata"]["name"], doc)
    store = caches.new(csr.CSRS, csr.CSRView, [doc])
    ca = authority.CA(*csrs.ca())
    signer = signing.Signer(
        client, store, {csr.KUBE_APISERVER_CLIENT: ca, csr.KUBELET_CLIENT: ca}, dt.timedelta(hours=8760)
    )
    asyncio.run(signer.sync(doc["metadata"]["name"]))
    return client


def test_sync_writes_the_certificate_through_the_status_subresource() -> None:
    doc = csr_doc("a", csrs.request_pem("alice"), csr.KUBE_APISERVER_CLIENT, ["client auth"], APPROVED)
    client = run_sync(doc)
    ((_, path, body),) = client.calls("patch")
    assert path.endswith("/certificatesigningrequests/a/status")
    assert body["metadata"] == {"resourceVersion": "5"}
    cert = x509.load_pem_x509_certificate(base64.b64decode(body["status"]["certificate"]))
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == dt.timedelta(hours=1, minutes=5)


def test_sync_fails_a_request_its_signer_refuses() -> None:
    doc = csr_doc("b", csrs.request_pem("alice"), csr.KUBE_APISERVER_CLIENT, ["server auth"], APPROVED)
    client = run_sync(doc)
    ((_, path, body),) = client.calls("patch")
    assert path.endswith("/b/status")
    failed = body["status"]["conditions"][-1]
    assert {k: failed[k] for k in ("type", "status", "reason", "message")} == {
        "type": "Failed",
        "status": "True",
        "reason": "SignerValidationFailure",
        "message": "invalid usage for client certificate: server auth",
    }
    assert body["status"]["conditions"][0]["type"] == "Approved"


@pytest.mark.parametrize(
    "conditions",
    [
        [],
        [{"type": "Denied", "status": "True"}],
        [*APPROVED, {"type": "Denied", "status": "True"}],
        [*APPROVED, {"type": "Failed", "status": "True"}],
    ],
)
def test_sync_leaves_unapproved_denied_and_failed_requests(conditions: list[dict[str, Any]]) -> None:
    doc = csr_doc("c", csrs.request_pem("alice"), csr.KUBE_APISERVER_CLIENT, ["client auth"], conditions)
    client = run_sync(doc)
    assert client.calls("patch") == []


def test_sync_leaves_other_signers_and_issued_requests() -> None:
    other = csr_doc("d", csrs.request_pem("alice"), "example.com/x", ["client auth"], APPROVED)
    assert (run_sync(other)).calls("patch") == []
    issued = csr_doc("e", csrs.request_pem("alice"), csr.KUBE_APISERVER_CLIENT, ["client auth"], APPROVED)
    issued["status"]["certificate"] = csrs.b64(b"x")
    assert (run_sync(issued)).calls("patch") == []
    assert msgspec.convert(issued, csr.CSRView).certificate() == b"x"


def write_ca(where: Path, name: str) -> x509.Certificate:
    cert, key = csrs.ca(name)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    (where / "ca.key").write_bytes(key_pem)
    (where / "ca.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert


def test_ca_files_are_read_again_when_they_change_and_a_bad_pair_keeps_the_last(tmp_path: Path) -> None:
    first = write_ca(tmp_path, "first")
    source = authority.CAFiles(str(tmp_path / "ca.crt"), str(tmp_path / "ca.key"))
    assert source.current().certificate == first
    second = write_ca(tmp_path, "second-with-a-longer-name")
    assert source.current().certificate == second
    (tmp_path / "ca.key").write_text("not a key, and of another size")
    assert source.current().certificate == second
