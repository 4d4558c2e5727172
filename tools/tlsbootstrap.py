"""A kubelet's TLS bootstrap, client side, as kubeadm join and the kubelet do it.

- Discovery (kubeadm's token discovery): read `kube-public/cluster-info` without credentials
  and without trusting the server yet; its `jws-kubeconfig-<token id>` must be a detached JWS
  (HS256, `kid` the token id) over its `kubeconfig`, keyed with the token's secret; with
  `--discovery-token-ca-cert-hash sha256:<hex>` the CA in that kubeconfig must also hash (its
  SubjectPublicKeyInfo) to it. From then on the server is trusted through that CA.
- The kubelet's bootstrap: a new ECDSA P-256 key, a CSR for `system:node:<name>` in
  `system:nodes`, filed as a `kubernetes.io/kube-apiserver-client-kubelet` request
  (usages digital signature, client auth) with the bootstrap token; then wait for the
  certificate (a Denied or Failed condition ends it), and write a kubeconfig that uses it
  (the kubelet's --kubeconfig), its key beside it.

Run as `python -m tools.tlsbootstrap --server URL --token ID.SECRET --node-name NAME --out DIR`;
exits non-zero with one line on stderr when a step fails. Used by tests/e2e/test_tlsbootstrap.py.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import ssl
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, hmac, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

CLUSTER_INFO = "/api/v1/namespaces/kube-public/configmaps/cluster-info"
CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
REQUEST_TIMEOUT = 10.0
MAX_RESPONSE = 4 << 20


class BootstrapError(Exception):
    """A step of the bootstrap that did not hold; the message says which."""


def _b64url_decode(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise BootstrapError(f"not base64url: {exc}") from exc


def verify_detached_jws(signature: str, payload: str, token_id: str, token_secret: str) -> None:
    """Raise BootstrapError unless `signature` is `<header>..<mac>` with header alg HS256 and
    kid `token_id`, the MAC being HMAC-SHA256 under the token secret of
    `<header>.<base64url(payload)>`."""
    parts = signature.split(".")
    if len(parts) != 3 or parts[1]:
        raise BootstrapError("the cluster-info signature is not a detached JWS")
    try:
        header = json.loads(_b64url_decode(parts[0]))
    except ValueError as exc:
        raise BootstrapError(f"the cluster-info signature's header: {exc}") from exc
    if not isinstance(header, dict) or header.get("alg") != "HS256" or header.get("kid") != token_id:
        raise BootstrapError(f"the cluster-info signature's header is not HS256 for {token_id}: {header}")
    payload_b64 = base64.urlsafe_b64encode(payload.encode()).rstrip(b"=")
    mac = hmac.HMAC(token_secret.encode(), hashes.SHA256())
    mac.update(parts[0].encode() + b"." + payload_b64)
    try:
        mac.verify(_b64url_decode(parts[2]))
    except InvalidSignature as exc:
        raise BootstrapError("the cluster-info signature does not verify with the token") from exc


def ca_cert_hash(ca: x509.Certificate) -> str:
    """kubeadm's --discovery-token-ca-cert-hash of a CA: sha256 of its SubjectPublicKeyInfo."""
    spki = ca.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return "sha256:" + hashlib.sha256(spki).hexdigest()


def discovered_cluster(config_map: dict[str, Any], token_id: str, token_secret: str) -> dict[str, Any]:
    """The verified cluster-info's cluster entry (server, certificate-authority-data)."""
    data = config_map.get("data") or {}
    content = data.get("kubeconfig")
    signature = data.get(f"jws-kubeconfig-{token_id}")
    if not isinstance(content, str):
        raise BootstrapError("cluster-info has no kubeconfig")
    if not isinstance(signature, str):
        raise BootstrapError(f"cluster-info has no JWS signature for token {token_id}")
    verify_detached_jws(signature, content, token_id, token_secret)
    config = yaml.safe_load(content)
    clusters = config.get("clusters") if isinstance(config, dict) else None
    if not isinstance(clusters, list) or len(clusters) != 1 or not isinstance(clusters[0], dict):
        raise BootstrapError("cluster-info's kubeconfig must name exactly one cluster")
    cluster: dict[str, Any] = clusters[0].get("cluster") or {}
    if not cluster.get("server") or not cluster.get("certificate-authority-data"):
        raise BootstrapError("cluster-info's cluster has no server or certificate-authority-data")
    return cluster


def kubelet_request(node_name: str, key: ec.EllipticCurvePrivateKey) -> bytes:
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:nodes"),
            x509.NameAttribute(NameOID.COMMON_NAME, f"system:node:{node_name}"),
        ]
    )
    csr = x509.CertificateSigningRequestBuilder().subject_name(subject).sign(key, hashes.SHA256())
    return csr.public_bytes(serialization.Encoding.PEM)


class Client:
    """JSON over HTTPS (or plain HTTP for a loopback dev server), optionally with a token."""

    def __init__(self, server: str, tls: ssl.SSLContext | None, token: str | None) -> None:
        self.server = server.rstrip("/")
        self.tls = tls
        self.token = token

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        headers = {"Accept": "application/json", "User-Agent": "kcm-tlsbootstrap"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.server + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT, context=self.tls) as resp:
                out = json.loads(resp.read(MAX_RESPONSE))
        except urllib.error.HTTPError as exc:
            detail = exc.read(MAX_RESPONSE).decode(errors="replace")
            raise BootstrapError(f"{method} {path}: {exc.code} {detail}") from exc
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise BootstrapError(f"{method} {path}: {exc}") from exc
        if not isinstance(out, dict):
            raise BootstrapError(f"{method} {path}: not a JSON object")
        return out


def _trusting(ca_pem: bytes) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cadata=ca_pem.decode())
    ctx.check_hostname = False  # the CA alone is trusted, as kubeadm's discovery pins it
    return ctx


def _unverified() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # discovery: the signature, not the channel, is the proof
    return ctx


def wait_for_certificate(client: Client, name: str, timeout: float) -> bytes:
    deadline = time.monotonic() + timeout
    while True:
        csr = client.call("GET", f"{CSRS}/{name}")
        status = csr.get("status") or {}
        for cond in status.get("conditions") or []:
            if cond.get("type") in ("Denied", "Failed") and cond.get("status") == "True":
                raise BootstrapError(
                    f"CSR {name} {cond['type']}: {cond.get('reason')}: {cond.get('message')}"
                )
        if status.get("certificate"):
            return base64.b64decode(status["certificate"])
        if time.monotonic() > deadline:
            raise BootstrapError(f"CSR {name}: no certificate after {timeout:.0f}s")
        time.sleep(0.25)


def bootstrap(
    server: str, token: str, node_name: str, out: Path, ca_hash: str | None, timeout: float
) -> Path:
    """The whole join; returns the kubelet kubeconfig written in `out`."""
    token_id, _, token_secret = token.partition(".")
    discovery = Client(server, _unverified() if server.startswith("https:") else None, None)
    cluster = discovered_cluster(discovery.call("GET", CLUSTER_INFO), token_id, token_secret)
    ca_pem = base64.b64decode(cluster["certificate-authority-data"])
    ca = x509.load_pem_x509_certificate(ca_pem)
    if ca_hash is not None and ca_cert_hash(ca) != ca_hash:
        raise BootstrapError(f"the cluster CA's hash {ca_cert_hash(ca)} is not {ca_hash}")
    api_server = str(cluster["server"])
    client = Client(api_server, _trusting(ca_pem) if api_server.startswith("https:") else None, token)
    key = ec.generate_private_key(ec.SECP256R1())
    created = client.call(
        "POST",
        CSRS,
        {
            "apiVersion": "certificates.k8s.io/v1",
            "kind": "CertificateSigningRequest",
            "metadata": {"generateName": "csr-"},
            "spec": {
                "request": base64.b64encode(kubelet_request(node_name, key)).decode(),
                "signerName": SIGNER,
                "usages": ["digital signature", "client auth"],
            },
        },
    )
    cert_pem = wait_for_certificate(client, str(created["metadata"]["name"]), timeout)
    out.mkdir(parents=True, exist_ok=True)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    # The kubelet's own layout: the pair in one file, the kubeconfig naming it.
    pair = out / "kubelet-client-current.pem"
    with tempfile.NamedTemporaryFile("wb", dir=out, delete=False) as tmp:
        tmp.write(cert_pem + key_pem)
    Path(tmp.name).chmod(0o600)
    Path(tmp.name).replace(pair)
    kubeconfig = out / "kubelet.conf"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "default-cluster", "cluster": cluster}],
                "users": [
                    {
                        "name": "default-auth",
                        "user": {"client-certificate": str(pair), "client-key": str(pair)},
                    }
                ],
                "contexts": [
                    {
                        "name": "default-context",
                        "context": {"cluster": "default-cluster", "user": "default-auth"},
                    }
                ],
                "current-context": "default-context",
            }
        )
    )
    return kubeconfig


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.tlsbootstrap", description=__doc__.split("\n")[0])
    p.add_argument("--server", required=True, help="where to read kube-public/cluster-info")
    p.add_argument("--token", required=True, help="the bootstrap token, <id>.<secret>")
    p.add_argument("--node-name", required=True)
    p.add_argument("--out", type=Path, required=True, help="directory for kubelet.conf and its key pair")
    p.add_argument("--discovery-token-ca-cert-hash", help="sha256:<hex> the cluster CA must match")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the certificate")
    args = p.parse_args(argv)
    try:
        path = bootstrap(
            args.server, args.token, args.node_name, args.out, args.discovery_token_ca_cert_hash, args.timeout
        )
    except BootstrapError as exc:
        print(f"tlsbootstrap: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
