"""The CSR controllers end to end: `kcm dev` with csrsigning, csrapproving and csrcleaner.

Through kubectl: a kube-apiserver-client CSR approved with `kubectl certificate approve` gets a
certificate (parsed with `cryptography`: issued by `kcm dev`'s CA, the request's subject, the
requested lifetime with upstream's 5-minute backdate, never a CA); the API server trusts that
CA as --client-ca-file, so the certificate authenticates as its subject (`kubectl auth
whoami`). A request its signer refuses gets Failed / SignerValidationFailure. A kubelet client
CSR filed with a bootstrap token is auto-approved after a SubjectAccessReview and signed. An
approved CSR whose certificate has expired is deleted by the cleaner. One stack, each test its own CSR names.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import secrets
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import NameOID

from tests import csrs
from tests.conftest import wait_for
from tests.e2e import devstack

stack = devstack.stack_fixture("--controllers", "csrsigning,csrapproving,csrcleaner", "--nodes", "0")


@pytest.fixture(scope="module")
def certificates(stack: devstack.DevStack) -> Iterator[kubernetes.client.CertificatesV1Api]:
    with stack.api() as api:
        yield kubernetes.client.CertificatesV1Api(api)


def ca_cert(s: devstack.DevStack) -> x509.Certificate:
    return x509.load_pem_x509_certificate((s.state / "pki" / "ca.crt").read_bytes())


def unique(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


def csr_manifest(name: str, pem: bytes, signer: str, usages: list[str], expiration: int | None = None) -> str:
    spec: dict[str, Any] = {"request": csrs.b64(pem), "signerName": signer, "usages": usages}
    if expiration is not None:
        spec["expirationSeconds"] = expiration
    doc = {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": spec,
    }
    return yaml.safe_dump(doc)


def get_csr(s: devstack.DevStack, name: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(s.kubectl("get", "csr", name, "-o", "json").stdout)
    return out


def issued(s: devstack.DevStack, name: str) -> x509.Certificate | None:
    doc = get_csr(s, name)
    cert = doc.get("status", {}).get("certificate")
    return x509.load_pem_x509_certificate(base64.b64decode(cert)) if cert else None


def server_args(s: devstack.DevStack) -> list[str]:
    """kubectl flags for the stack's secure port with no user of the kubeconfig's."""
    config = yaml.safe_load((s.state / "kubeconfig-tls").read_text())
    server = config["clusters"][0]["cluster"]["server"]
    return [
        "--kubeconfig",
        "/dev/null",
        "--server",
        server,
        "--certificate-authority",
        str(s.state / "pki" / "ca.crt"),
    ]


def kubectl_as(
    s: devstack.DevStack, auth: list[str], *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [devstack.KUBECTL, *server_args(s), *auth, *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=60,
    )


def test_an_approved_client_csr_is_signed_by_the_cluster_ca(stack: devstack.DevStack, tmp_path: Path) -> None:
    name, private = unique("alice"), csrs.key()
    pem = csrs.request_pem("alice", ("devs",), private=private)
    stack.kubectl(
        "apply",
        "-f",
        "-",
        input=csr_manifest(name, pem, "kubernetes.io/kube-apiserver-client", ["client auth"], 3600),
    )
    stack.kubectl("certificate", "approve", name)
    cert = wait_for(lambda: issued(stack, name), 30, interval=0.25, what="status.certificate")
    ca = ca_cert(stack)
    assert cert.issuer == ca.subject
    cert.verify_directly_issued_by(ca)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "alice"
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == dt.timedelta(minutes=65)
    assert abs(cert.not_valid_before_utc + dt.timedelta(minutes=5) - dt.datetime.now(dt.UTC)) < dt.timedelta(
        minutes=2
    )
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    # The API server trusts the CA as --client-ca-file: the certificate is a way in as alice.
    (tmp_path / "alice.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    (tmp_path / "alice.key").write_bytes(key_pem)
    auth = ["--client-certificate", str(tmp_path / "alice.crt"), "--client-key", str(tmp_path / "alice.key")]
    res = kubectl_as(stack, auth, "auth", "whoami", "-o", "json")
    assert res.returncode == 0, res.stderr
    user = json.loads(res.stdout)["status"]["userInfo"]
    assert user["username"] == "alice"
    assert "devs" in user["groups"]


def test_a_csr_approved_while_the_signer_was_killed_is_signed_after_its_restart(
    stack: devstack.DevStack,
) -> None:
    """kill -9 of the signer's process, then an approval while none runs: the restarted process
    signs it from its catch-up, with one certificate (the status subresource refuses a second)."""
    name = unique("killed")
    pem = csrs.request_pem("carol", ("devs",))
    signer = "kubernetes.io/kube-apiserver-client"
    stack.kubectl("apply", "-f", "-", input=csr_manifest(name, pem, signer, ["client auth"], 3600))
    for pid in stack.controller_pids("csrsigning"):
        os.kill(pid, signal.SIGKILL)
    stack.kubectl("certificate", "approve", name)
    cert = wait_for(
        lambda: issued(stack, name), 90, interval=0.3, what="status.certificate after the restart"
    )
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "carol"
    conditions = [c["type"] for c in get_csr(stack, name)["status"]["conditions"]]
    assert conditions == ["Approved"], conditions
    stack.wait_healthy()


def test_a_request_its_signer_refuses_fails(stack: devstack.DevStack) -> None:
    name = unique("server")
    pem = csrs.request_pem("bob")
    manifest = csr_manifest(name, pem, "kubernetes.io/kube-apiserver-client", ["client auth", "server auth"])
    stack.kubectl("apply", "-f", "-", input=manifest)
    stack.kubectl("certificate", "approve", name)

    def failed() -> dict[str, Any] | None:
        conditions = get_csr(stack, name).get("status", {}).get("conditions", [])
        return next((c for c in conditions if c["type"] == "Failed"), None)

    condition = wait_for(failed, 30, interval=0.25, what="a Failed condition")
    assert condition["status"] == "True"
    assert condition["reason"] == "SignerValidationFailure"
    assert condition["message"] == "invalid usage for client certificate: server auth"
    assert "certificate" not in get_csr(stack, name).get("status", {})


def test_a_kubelet_client_csr_filed_with_a_bootstrap_token_is_approved_and_signed(
    stack: devstack.DevStack,
) -> None:
    token_id, token_secret = secrets.token_hex(3), secrets.token_hex(8)
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "bootstrap.kubernetes.io/token",
        "metadata": {"name": f"bootstrap-token-{token_id}", "namespace": "kube-system"},
        "stringData": {
            "token-id": token_id,
            "token-secret": token_secret,
            "usage-bootstrap-authentication": "true",
        },
    }
    stack.kubectl("apply", "-f", "-", input=json.dumps(secret))  # a hex id may read as a number in YAML
    for role in (
        "system:node-bootstrapper",
        "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
    ):
        binding = f"e2e-{role.replace(':', '-')}"
        if stack.kubectl("get", "clusterrolebinding", binding, check=False).returncode != 0:
            stack.kubectl(
                "create",
                "clusterrolebinding",
                binding,
                f"--clusterrole={role}",
                "--group=system:bootstrappers",
            )
    name = unique("node-csr")
    node = unique("system:node:worker")
    pem = csrs.request_pem(node, ("system:nodes",))
    manifest = csr_manifest(
        name, pem, "kubernetes.io/kube-apiserver-client-kubelet", ["digital signature", "client auth"]
    )
    token = ["--token", f"{token_id}.{token_secret}"]
    created = wait_for(
        lambda: kubectl_as(stack, token, "create", "-f", "-", stdin=manifest).returncode == 0 or None,
        30,
        interval=0.5,
        what="the bootstrap token authenticates",
    )
    assert created
    doc = get_csr(stack, name)
    assert doc["spec"]["username"] == f"system:bootstrap:{token_id}"
    cert = wait_for(lambda: issued(stack, name), 30, interval=0.25, what="approved and signed")
    approved = next(c for c in get_csr(stack, name)["status"]["conditions"] if c["type"] == "Approved")
    assert approved["reason"] == "AutoApproved"
    assert approved["message"] == "Auto approving kubelet client certificate after SubjectAccessReview."
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == node
    cert.verify_directly_issued_by(ca_cert(stack))


def test_an_approved_csr_whose_certificate_expired_is_deleted(
    stack: devstack.DevStack, certificates: kubernetes.client.CertificatesV1Api
) -> None:
    name = unique("expired")
    stack.kubectl(
        "apply",
        "-f",
        "-",
        input=csr_manifest(name, csrs.request_pem("dave"), "example.com/signer", ["client auth"]),
    )
    stack.kubectl("certificate", "approve", name)
    old = csrs.cert_pem(csrs.ca(), "dave", dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1))
    certificates.patch_certificate_signing_request_status(name, {"status": {"certificate": csrs.b64(old)}})

    def gone() -> bool:
        return stack.kubectl("get", "csr", name, check=False).returncode != 0

    wait_for(gone, 30, interval=0.25, what="the expired CSR deleted")
