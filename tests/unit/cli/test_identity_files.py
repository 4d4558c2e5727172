"""The cluster identity files `kcm dev` keeps (kcm_cli.pki), the Secrets a pod refers to (the
legacy token cleaner's podsecrets, upstream VisitPodSecretNames cases) and what a token Secret
still needs (the token controller's secretUpdateNeeded)."""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import stat
from pathlib import Path
from typing import Any

import msgspec
import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from kcm_cli import pki
from kcm_controllers.legacytokencleaner import podsecrets
from kcm_controllers.serviceaccounttoken import controller as tokens_controller
from kcm_shared.apis import satoken


def test_files_are_made_once_as_kubeadm_makes_them(tmp_path: Path) -> None:
    files = pki.ensure(tmp_path / "pki")
    ca = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
    assert ca.subject.rfc4514_string() == "CN=kubernetes" and ca.issuer == ca.subject
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    lifetime = ca.not_valid_after_utc - ca.not_valid_before_utc
    assert dt.timedelta(days=3649) < lifetime < dt.timedelta(days=3651)
    signing = satoken.load_private_key(files.sa_key)
    assert signing.key_size == 2048
    assert [satoken.key_id(k) for k in satoken.load_public_keys(files.sa_pub)] == [
        satoken.key_id(signing.public_key())
    ]
    serving = x509.load_pem_x509_certificate(files.apiserver_cert.read_bytes())
    assert serving.issuer == ca.subject
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "kubernetes.default.svc.cluster.local" in sans.get_values_for_type(x509.DNSName)
    assert ipaddress.ip_address("127.0.0.1") in sans.get_values_for_type(x509.IPAddress)
    ca_key, algorithm = ca.public_key(), serving.signature_hash_algorithm
    assert isinstance(ca_key, rsa.RSAPublicKey) and algorithm is not None
    ca_key.verify(serving.signature, serving.tbs_certificate_bytes, padding.PKCS1v15(), algorithm)
    for private in (files.ca_key, files.sa_key, files.apiserver_key):
        assert stat.S_IMODE(private.stat().st_mode) == 0o600, private

    before = {p.name: p.read_bytes() for p in (tmp_path / "pki").iterdir()}
    pki.ensure(tmp_path / "pki")
    assert {p.name: p.read_bytes() for p in (tmp_path / "pki").iterdir()} == before


def test_a_missing_pair_is_made_again_alone(tmp_path: Path) -> None:
    files = pki.ensure(tmp_path)
    ca = files.ca_cert.read_bytes()
    files.sa_pub.unlink()
    old_key = files.sa_key.read_bytes()
    pki.ensure(tmp_path)
    assert files.ca_cert.read_bytes() == ca
    assert files.sa_key.read_bytes() != old_key and files.sa_pub.exists()


def test_client_certificates_name_their_user_and_groups_and_are_kept(tmp_path: Path) -> None:
    admin = pki.client(tmp_path, "admin", "kubernetes-admin", ("system:masters",))
    ca = x509.load_pem_x509_certificate((tmp_path / "ca.crt").read_bytes())
    cert = x509.load_pem_x509_certificate(admin.cert.read_bytes())
    assert cert.subject.rfc4514_string() == "CN=kubernetes-admin,O=system:masters"
    assert cert.issuer == ca.subject
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]
    assert stat.S_IMODE(admin.key.stat().st_mode) == 0o600
    before = admin.cert.read_bytes()
    assert pki.client(tmp_path, "admin", "kubernetes-admin", ("system:masters",)).cert.read_bytes() == before

    proxy = pki.front_proxy(tmp_path)
    proxy_ca = x509.load_pem_x509_certificate(proxy.ca.cert.read_bytes())
    client = x509.load_pem_x509_certificate(proxy.client.cert.read_bytes())
    assert proxy_ca.subject.rfc4514_string() == "CN=front-proxy-ca" and proxy_ca.subject != ca.subject
    assert (client.subject.rfc4514_string(), client.issuer) == ("CN=front-proxy-client", proxy_ca.subject)


def _pod(spec: dict[str, Any]) -> podsecrets.PodSecretsView:
    return msgspec.json.decode(msgspec.json.encode({"spec": spec}), type=podsecrets.PodSecretsView)


@pytest.mark.parametrize(
    ("spec", "names"),
    [
        ({}, set()),
        ({"imagePullSecrets": [{"name": "pull"}]}, {"pull"}),
        (
            {
                "containers": [
                    {"env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "env", "key": "k"}}}]},
                    {"envFrom": [{"secretRef": {"name": "envfrom"}}, {"configMapRef": {"name": "cm"}}]},
                ],
                "initContainers": [{"envFrom": [{"secretRef": {"name": "init"}}]}],
                "ephemeralContainers": [{"env": [{"name": "B", "value": "plain"}]}],
            },
            {"env", "envfrom", "init"},
        ),
        (
            {
                "volumes": [
                    {"name": "a", "secret": {"secretName": "vol"}},
                    {
                        "name": "b",
                        "projected": {"sources": [{"secret": {"name": "proj"}}, {"configMap": {}}]},
                    },
                    {"name": "c", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "csi"}}},
                    {"name": "d", "azureFile": {"secretName": "azure", "shareName": "s"}},
                    {"name": "e", "cephfs": {"monitors": ["m"], "secretRef": {"name": "ceph"}}},
                    {
                        "name": "f",
                        "scaleIO": {"gateway": "g", "system": "s", "secretRef": {"name": "scaleio"}},
                    },
                    {"name": "g", "rbd": {"monitors": ["m"], "image": "i", "secretRef": {"name": "rbd"}}},
                    {"name": "h", "emptyDir": {}},
                ]
            },
            {"vol", "proj", "csi", "azure", "ceph", "scaleio", "rbd"},
        ),
    ],
)
def test_pod_secret_names(spec: dict[str, Any], names: set[str]) -> None:
    assert podsecrets.secret_names(_pod(spec)) == names


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


CA = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


@pytest.mark.parametrize(
    ("data", "root_ca", "expected"),
    [
        ({}, CA, (True, True, True)),
        ({}, b"", (False, True, True)),
        (
            {"token": _b64("t"), "namespace": _b64("ns"), "ca.crt": base64.b64encode(CA).decode()},
            CA,
            (False, False, False),
        ),
        ({"token": _b64("t"), "namespace": _b64("ns"), "ca.crt": _b64("old")}, CA, (True, False, False)),
        ({"token": "", "namespace": _b64("ns")}, b"", (False, False, True)),
        ({"token": "not base64!", "namespace": _b64("ns")}, b"", (False, False, True)),
    ],
)
def test_what_a_token_secret_needs(
    data: dict[str, str], root_ca: bytes, expected: tuple[bool, bool, bool]
) -> None:
    assert tokens_controller.needs(data, root_ca) == expected
