"""tools/tlsbootstrap's discovery checks: the bootstrap signer's JWS verifies with the token and
nothing else does; the CA pin is kubeadm's SubjectPublicKeyInfo hash; the kubelet's CSR shape."""

from __future__ import annotations

import datetime as dt
import hashlib

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kcm_controllers.bootstrapsigner import jws

from tools import tlsbootstrap

TOKEN_ID, TOKEN_SECRET = "abc123", "0123456789abcdef"
CONTENT = yaml.safe_dump(
    {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "",
                "cluster": {"server": "https://127.0.0.1:6443", "certificate-authority-data": "Q0E="},
            }
        ],
    }
)


def config_map(signature: str) -> dict[str, object]:
    return {"data": {"kubeconfig": CONTENT, f"jws-kubeconfig-{TOKEN_ID}": signature}}


def test_the_signers_signature_verifies() -> None:
    signature = jws.detached_signature(CONTENT, TOKEN_ID, TOKEN_SECRET)
    cluster = tlsbootstrap.discovered_cluster(config_map(signature), TOKEN_ID, TOKEN_SECRET)
    assert cluster["server"] == "https://127.0.0.1:6443"


@pytest.mark.parametrize(
    "signature",
    [
        jws.detached_signature(CONTENT, TOKEN_ID, "f" * 16),  # another secret
        jws.detached_signature(CONTENT, "xyz789", TOKEN_SECRET),  # another kid
        jws.detached_signature(CONTENT + " ", TOKEN_ID, TOKEN_SECRET),  # another payload
        "not-a-jws",
        "e30..AAAA",  # header {} without alg
    ],
    ids=["secret", "kid", "payload", "shape", "header"],
)
def test_anything_else_is_refused(signature: str) -> None:
    with pytest.raises(tlsbootstrap.BootstrapError):
        tlsbootstrap.discovered_cluster(config_map(signature), TOKEN_ID, TOKEN_SECRET)


def test_no_signature_for_the_token_is_refused() -> None:
    with pytest.raises(tlsbootstrap.BootstrapError, match="no JWS signature"):
        tlsbootstrap.discovered_cluster({"data": {"kubeconfig": CONTENT}}, TOKEN_ID, TOKEN_SECRET)


def test_ca_hash_is_the_public_key_info_digest() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    spki = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ca")])
    now = dt.datetime.now(dt.UTC)
    ca = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    assert tlsbootstrap.ca_cert_hash(ca) == "sha256:" + hashlib.sha256(spki).hexdigest()


def test_the_kubelet_request_names_its_node() -> None:
    pem = tlsbootstrap.kubelet_request("n1", ec.generate_private_key(ec.SECP256R1()))
    csr = x509.load_pem_x509_csr(pem)
    assert csr.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "system:node:n1"
    assert csr.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:nodes"
