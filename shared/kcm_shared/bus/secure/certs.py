"""The secure port's TLS: its serving certificate and the server's `ssl.SSLContext`.

- `serving_pair` follows upstream's MaybeDefaultWithSelfSignedCerts: `--tls-cert-file` and
  `--tls-private-key-file` when given; else `<cert-dir>/<pair>.crt/.key` when both can be read;
  else a new self-signed pair (a CA `localhost-ca@<unix time>` and a serving certificate
  `localhost@<unix time>` it signs, for localhost and 127.0.0.1, plus the bind address when it
  is not a wildcard; RSA 2048, one year), written to `--cert-dir` when set, else kept in memory.
- `server_context` builds the context: upstream's `--tls-min-version` names, Go's cipher suite
  names for TLS 1.2 mapped onto OpenSSL's (Python cannot choose TLS 1.3 suites: it always
  offers OpenSSL's), and the client CAs a client certificate may chain to (the union of
  `--client-ca-file` and `--requestheader-client-ca-file`; which one signed it is decided per
  request by `authn`).
- Called by `kcm_shared.bus.secure.server`, in a worker thread (key generation takes a while).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import logging
import os
import ssl
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kcm_shared.base import errors

log = logging.getLogger("kcm.secure")

VALIDITY = dt.timedelta(days=365)
KEY_SIZE = 2048

MIN_VERSIONS = {
    "VersionTLS10": ssl.TLSVersion.TLSv1,
    "VersionTLS11": ssl.TLSVersion.TLSv1_1,
    "VersionTLS12": ssl.TLSVersion.TLSv1_2,
    "VersionTLS13": ssl.TLSVersion.TLSv1_3,
}

# Go's crypto/tls names of the TLS 1.0-1.2 suites and OpenSSL's names of the same suites.
CIPHER_SUITES = {
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA": "DES-CBC3-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": "ECDHE-ECDSA-CHACHA20-POLY1305",
}
# TLS 1.3's suites: accepted by name, as Go's list has them, though OpenSSL picks among them itself.
TLS13_SUITES = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"})


@dataclass(frozen=True)
class Pair:
    """A serving certificate chain and its key, PEM."""

    cert: bytes
    key: bytes


def serving_pair(cert_file: str, key_file: str, cert_dir: str, pair_name: str, bind_address: str) -> Pair:
    """The secure port's certificate and key (see the module docstring); ConfigError when a
    given file cannot be read."""
    if cert_file or key_file:
        return _read(Path(cert_file), Path(key_file))
    if cert_dir:
        crt, key = Path(cert_dir) / f"{pair_name}.crt", Path(cert_dir) / f"{pair_name}.key"
        if os.access(crt, os.R_OK) and os.access(key, os.R_OK):
            return _read(crt, key)
    pair = self_signed("localhost", bind_address)
    if cert_dir:
        _write(crt, pair.cert, private=False)
        _write(key, pair.key, private=True)
        log.info("generated a self-signed certificate", extra={"cert": str(crt), "key": str(key)})
    return pair


def _read(cert: Path, key: Path) -> Pair:
    try:
        return Pair(cert.read_bytes(), key.read_bytes())
    except OSError as exc:
        raise errors.ConfigError(f"unable to load server certificate: {exc}") from exc


def _write(path: Path, data: bytes, *, private: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(tmp, path)


def self_signed(host: str, bind_address: str) -> Pair:
    """Upstream's GenerateSelfSignedCertKey: a CA and a serving certificate for `host` (a DNS
    name or an IP), 127.0.0.1 and the bind address unless it is a wildcard; the chain is the
    serving certificate then the CA."""
    now = dt.datetime.now(dt.UTC)
    stamp = int(time.time())
    ca_key, key = _new_key(), _new_key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{host}-ca@{stamp}")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, False, False, False), critical=True
        )
        .sign(ca_key, hashes.SHA256())
    )
    ips = {ipaddress.ip_address("127.0.0.1")}
    names: list[x509.GeneralName] = []
    try:
        ips.add(ipaddress.ip_address(host))
    except ValueError:
        names.append(x509.DNSName(host))
    if bind_address and not ipaddress.ip_address(bind_address).is_unspecified:
        ips.add(ipaddress.ip_address(bind_address))
    names += [x509.IPAddress(ip) for ip in sorted(ips, key=str)]
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{host}@{stamp}")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, True, False, False, False, False, False, False), critical=True
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    return Pair(
        leaf.public_bytes(pem) + ca.public_bytes(pem),
        key.private_bytes(pem, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()),
    )


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=KEY_SIZE)


def server_context(
    pair: Pair, min_version: str, cipher_suites: list[str], client_cas: bytes
) -> ssl.SSLContext:
    """The secure port's context; ConfigError for a name upstream would refuse, or a pair that
    does not load. `client_cas` (PEM, possibly empty) are the CAs a client certificate may chain
    to: with none, no client certificate is asked for."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    if min_version:
        if min_version not in MIN_VERSIONS:
            raise errors.ConfigError(f"unknown tls version {min_version!r}")
        ctx.minimum_version = MIN_VERSIONS[min_version]
    else:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2  # Go's server default
    if cipher_suites:
        openssl = []
        for name in cipher_suites:
            if name in CIPHER_SUITES:
                openssl.append(CIPHER_SUITES[name])
            elif name not in TLS13_SUITES:
                raise errors.ConfigError(f"Cipher suite {name} not supported or doesn't exist")
        if openssl:
            ctx.set_ciphers(":".join(openssl))
    _load_chain(ctx, pair)
    if client_cas.strip():
        ctx.verify_mode = ssl.CERT_OPTIONAL
        try:
            ctx.load_verify_locations(cadata=client_cas.decode("ascii", "replace"))
        except ssl.SSLError as exc:
            raise errors.ConfigError(f"unable to load client CA file: {exc}") from exc
    return ctx


def _load_chain(ctx: ssl.SSLContext, pair: Pair) -> None:
    # ssl reads a chain from files only; a private directory keeps the key from other users.
    with tempfile.TemporaryDirectory(prefix="kcm-serving-") as tmp:
        cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        _write(cert, pair.cert, private=True)
        _write(key, pair.key, private=True)
        try:
            ctx.load_cert_chain(cert, key)
        except ssl.SSLError as exc:
            raise errors.ConfigError(f"unable to load server certificate: {exc}") from exc


def load_cas(data: bytes) -> list[x509.Certificate]:
    """The certificates of a PEM bundle; ConfigError when it holds none or is malformed."""
    try:
        cas = x509.load_pem_x509_certificates(data)
    except ValueError as exc:
        raise errors.ConfigError(f"unable to load client CA file: {exc}") from exc
    return cas
