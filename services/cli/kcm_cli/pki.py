"""The cluster's identity files, created once in `kcm dev`'s state directory (STATE_DIR/pki).

`ensure(dir)` makes what kubeadm makes for a new cluster and keeps it across restarts: a
cluster CA (`ca.crt` / `ca.key`: RSA 2048, CN `kubernetes`, CA:true, valid ten years) and the
service account signing key pair (`sa.key` / `sa.pub`: RSA 2048), and the API server's
serving certificate signed by that CA (`apiserver.crt` / `apiserver.key`: CN `kube-apiserver`,
kubeadm's names for the `kubernetes` Service, 10.96.0.1, 127.0.0.1 and localhost; one year).
`kcm dev` hands them to the API server (--service-account-key-file,
--service-account-signing-key-file, --tls-cert-file, --tls-private-key-file) and to the
controllers (--root-ca-file, --service-account-private-key-file, --cluster-signing-cert-file,
--cluster-signing-key-file). Files that exist are read, never replaced: tokens signed before
a restart keep verifying after it. Each pair is written together, key first and atomically
(rename), private keys readable by their owner only.

`client(dir, name, user, groups)` makes a client certificate for a user of that CA
(`<name>.crt` / `<name>.key`: CN the user, O each group, client auth, one year), the way kubeadm
makes admin.conf's and the controller manager's; `front_proxy(dir)` makes kubeadm's front proxy
CA (`front-proxy-ca.crt` / `.key`, CN `front-proxy-ca`) and its client certificate
(`front-proxy-client.crt` / `.key`, CN `front-proxy-client`). `kcm dev --apiserver=upstream`
asks for them (kcm_cli.upstream); kept like the others.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

CA_VALIDITY = dt.timedelta(days=3650)  # kubeadm's CA certificates: ten years
SERVING_VALIDITY = dt.timedelta(days=365)  # and its leaf certificates: one year
SERVING_DNS_NAMES = (
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
    "localhost",
)
SERVING_IPS = ("10.96.0.1", "127.0.0.1", "::1")
KEY_SIZE = 2048


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path


@dataclass(frozen=True)
class Files:
    ca_cert: Path
    ca_key: Path
    sa_key: Path
    sa_pub: Path
    apiserver_cert: Path
    apiserver_key: Path


def files(directory: Path) -> Files:
    names = ("ca.crt", "ca.key", "sa.key", "sa.pub", "apiserver.crt", "apiserver.key")
    return Files(*(directory / name for name in names))


def ensure(directory: Path) -> Files:
    """The identity files in `directory`, creating whichever pair is missing."""
    directory.mkdir(parents=True, exist_ok=True)
    out = files(directory)
    _ensure_ca(Pair(out.ca_cert, out.ca_key), "kubernetes")
    if not (out.sa_key.exists() and out.sa_pub.exists()):
        key = _new_key()
        _write(out.sa_key, _private_pem(key), private=True)
        pub = key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        _write(out.sa_pub, pub)
    names: list[x509.GeneralName] = [x509.DNSName(n) for n in SERVING_DNS_NAMES]
    names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in SERVING_IPS]
    _ensure_leaf(
        Pair(out.apiserver_cert, out.apiserver_key),
        Pair(out.ca_cert, out.ca_key),
        _name("kube-apiserver"),
        x509.oid.ExtendedKeyUsageOID.SERVER_AUTH,
        names,
    )
    return out


def client(directory: Path, name: str, user: str, groups: tuple[str, ...] = ()) -> Pair:
    """`<name>.crt` / `<name>.key`: a client certificate of the cluster CA for `user` in `groups`."""
    identity = ensure(directory)
    pair = Pair(directory / f"{name}.crt", directory / f"{name}.key")
    ca = Pair(identity.ca_cert, identity.ca_key)
    _ensure_leaf(pair, ca, _name(user, groups), x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH)
    return pair


@dataclass(frozen=True)
class FrontProxy:
    ca: Pair
    client: Pair


def front_proxy(directory: Path) -> FrontProxy:
    """kubeadm's front proxy CA and the client certificate kube-apiserver proxies with."""
    directory.mkdir(parents=True, exist_ok=True)
    out = FrontProxy(
        Pair(directory / "front-proxy-ca.crt", directory / "front-proxy-ca.key"),
        Pair(directory / "front-proxy-client.crt", directory / "front-proxy-client.key"),
    )
    _ensure_ca(out.ca, "front-proxy-ca")
    _ensure_leaf(out.client, out.ca, _name("front-proxy-client"), x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH)
    return out


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    return x509.Name([*attributes, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _ensure_ca(pair: Pair, common_name: str) -> None:
    if pair.cert.exists() and pair.key.exists():
        return
    key = _new_key()
    _write(pair.key, _private_pem(key), private=True)
    _write(pair.cert, _self_signed_ca(key, _name(common_name)).public_bytes(serialization.Encoding.PEM))


def _ensure_leaf(
    pair: Pair,
    ca: Pair,
    subject: x509.Name,
    usage: x509.ObjectIdentifier,
    names: list[x509.GeneralName] | None = None,
) -> None:
    if pair.cert.exists() and pair.key.exists():
        return
    ca_key = serialization.load_pem_private_key(ca.key.read_bytes(), password=None)
    if not isinstance(ca_key, rsa.RSAPrivateKey):
        raise ValueError(f"{ca.key}: want an RSA private key")
    ca_cert = x509.load_pem_x509_certificate(ca.cert.read_bytes())
    key = _new_key()
    _write(pair.key, _private_pem(key), private=True)
    cert = _leaf_cert(key, ca_key, ca_cert, subject, usage, names or [])
    _write(pair.cert, cert.public_bytes(serialization.Encoding.PEM))


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=KEY_SIZE)


def _private_pem(key: rsa.RSAPrivateKey) -> bytes:
    # PKCS#1 ("RSA PRIVATE KEY"), the form kubeadm writes.
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def _self_signed_ca(key: rsa.RSAPrivateKey, name: x509.Name) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    public = key.public_key()
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))  # tolerate small clock skew, as kubeadm
        .not_valid_after(now + CA_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=True,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )


def _leaf_cert(
    key: rsa.RSAPrivateKey,
    ca_key: rsa.RSAPrivateKey,
    ca: x509.Certificate,
    subject: x509.Name,
    usage: x509.ObjectIdentifier,
    names: list[x509.GeneralName],
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + SERVING_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def _write(path: Path, data: bytes, *, private: bool = False) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(tmp, path)
