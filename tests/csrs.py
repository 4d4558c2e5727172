"""Certificate requests and CAs for the CSR tests (unit and end-to-end), made with `cryptography`."""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def request_pem(
    common_name: str,
    organizations: tuple[str, ...] = (),
    *,
    dns: tuple[str, ...] = (),
    ips: tuple[str, ...] = (),
    emails: tuple[str, ...] = (),
    private: ec.EllipticCurvePrivateKey | None = None,
) -> bytes:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(attrs))
    names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    names += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    names += [x509.RFC822Name(e) for e in emails]
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(private or key(), hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def ca(
    common_name: str = "test-ca", *, days: int = 3650
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    private = key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(private.public_key()), critical=False)
        .sign(private, hashes.SHA256())
    )
    return cert, private


def cert_pem(
    issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey], common_name: str, not_after: dt.datetime
) -> bytes:
    """A leaf certificate for `common_name` that ends at `not_after` (an expired one, for the cleaner)."""
    cert, private = issuer
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    built = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(cert.subject)
        .public_key(key().public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_after - dt.timedelta(hours=1))
        .not_valid_after(not_after)
        .sign(private, hashes.SHA256())
    )
    return built.public_bytes(serialization.Encoding.PEM)
