"""A certificate authority that signs certificate requests as upstream's local signer does.

Upstream pkg/controller/certificates/authority (authority.go, policies.go) and signer.go's
`duration`, with `cryptography`:
- `load(cert_file, key_file)`: the CA pair from PEM files (RSA or ECDSA key); ValueError
  with what is wrong. `CAFiles`: the same pair read again whenever the files change.
- `duration(expiration_seconds, cert_ttl)`: the requested lifetime, capped at
  --cluster-signing-duration and raised to 10 minutes at least.
- `sign(ca, request, usages, ttl, now)`: the PEM certificate: the request's subject (as Go
  re-encodes it) and SANs, its public key, a random serial below 2**128, the usages mapped as
  the permissive policy maps them, never a CA (BasicConstraints critical, CA false), no other
  extension of the request; NotBefore = now - 5 min; NotAfter = now + ttl for a ttl under 8 h,
  else now + ttl - 5 min; never beyond the CA's own NotAfter; a CA already expired refuses
  with upstream's messages. The request's signature must verify.
Called by the signing controller (`controller`) and the benchmark.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, ExtensionOID, NameOID, ObjectIdentifier

log = logging.getLogger("kcm.csrsigning")

BACKDATE = dt.timedelta(minutes=5)
SHORT = dt.timedelta(hours=8)  # 5 minutes of backdating is about 1% of it
MIN_DURATION = dt.timedelta(minutes=10)  # twice the backdate
SERIAL_LIMIT = 1 << 128

CAKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


@dataclass(frozen=True)
class CA:
    certificate: x509.Certificate
    key: CAKey

    @property
    def not_after(self) -> dt.datetime:
        return self.certificate.not_valid_after_utc

    def current(self) -> CA:
        return self


class Source(Protocol):
    """Where a signer's CA comes from: fixed (`CA`) or files read again when they change."""

    def current(self) -> CA: ...


class CAFiles:
    """The CA in a certificate and key file, read again when either changes (upstream's dynamic
    reloading of --cluster-signing-*-file); a pair that no longer loads keeps the last good CA
    (logged, and tried again at the next signature)."""

    def __init__(self, cert_file: str, key_file: str) -> None:
        self.files = (cert_file, key_file)
        self._stamp = self._stat()
        self._ca = load(cert_file, key_file)

    def _stat(self) -> tuple[tuple[int, int, int], ...] | None:
        try:
            return tuple((st.st_mtime_ns, st.st_size, st.st_ino) for st in map(os.stat, self.files))
        except OSError:
            return None

    def current(self) -> CA:
        stamp = self._stat()
        if stamp is not None and stamp != self._stamp:
            try:
                self._ca = load(*self.files)
                self._stamp = stamp
            except ValueError as exc:
                log.warning(
                    "could not reload the signing CA; signing with the last one", extra={"error": str(exc)}
                )
        return self._ca


def load(cert_file: str, key_file: str) -> CA:
    """The CA in these PEM files; ValueError naming the file that is wrong."""
    try:
        certs = x509.load_pem_x509_certificates(Path(cert_file).read_bytes())
    except (OSError, ValueError) as exc:
        raise ValueError(f"error reading CA cert file {cert_file!r}: {exc}") from None
    try:
        key = serialization.load_pem_private_key(Path(key_file).read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise ValueError(f"error reading CA key file {key_file!r}: {exc}") from None
    if not isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
        raise ValueError(f"error reading CA key file {key_file!r}: not an RSA or ECDSA private key")
    return CA(certs[0], key)


def duration(expiration_seconds: int | None, cert_ttl: dt.timedelta) -> dt.timedelta:
    if expiration_seconds is None:
        return cert_ttl
    requested = dt.timedelta(seconds=expiration_seconds)
    if requested > cert_ttl:
        return cert_ttl
    return max(requested, MIN_DURATION)


# The permissive policy's dictionaries: key usage bits (Go's x509.KeyUsage, bit 0 first) and
# extended key usages in Go's x509.ExtKeyUsage order, which sorts them in the certificate.
KEY_USAGE_BITS = {
    "signing": 0,
    "digital signature": 0,
    "content commitment": 1,
    "key encipherment": 2,
    "data encipherment": 3,
    "key agreement": 4,
    "cert sign": 5,
    "crl sign": 6,
    "encipher only": 7,
    "decipher only": 8,
}
_EXT_ORDER = (
    ("any", ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE),
    ("server auth", ExtendedKeyUsageOID.SERVER_AUTH),
    ("client auth", ExtendedKeyUsageOID.CLIENT_AUTH),
    ("code signing", ExtendedKeyUsageOID.CODE_SIGNING),
    ("email protection", ExtendedKeyUsageOID.EMAIL_PROTECTION),
    ("ipsec end system", ObjectIdentifier("1.3.6.1.5.5.7.3.5")),
    ("ipsec tunnel", ObjectIdentifier("1.3.6.1.5.5.7.3.6")),
    ("ipsec user", ObjectIdentifier("1.3.6.1.5.5.7.3.7")),
    ("timestamping", ExtendedKeyUsageOID.TIME_STAMPING),
    ("ocsp signing", ExtendedKeyUsageOID.OCSP_SIGNING),
    ("microsoft sgc", ObjectIdentifier("1.3.6.1.4.1.311.10.3.3")),
    ("netscape sgc", ObjectIdentifier("2.16.840.1.113730.4.1")),
)
EXT_KEY_USAGES = dict(_EXT_ORDER) | {"s/mime": ExtendedKeyUsageOID.EMAIL_PROTECTION}
_EXT_RANK = {oid: rank for rank, (_, oid) in enumerate(_EXT_ORDER)}


def key_usages(usages: list[str]) -> tuple[int, list[ObjectIdentifier]]:
    """(key usage bits, extended key usages sorted as Go sorts them); ValueError naming the
    usages neither dictionary knows, as upstream's keyUsagesFromStrings."""
    bits = 0
    extended: set[ObjectIdentifier] = set()
    unknown: list[str] = []
    for usage in usages:
        if usage in KEY_USAGE_BITS:
            bits |= 1 << KEY_USAGE_BITS[usage]
        elif usage in EXT_KEY_USAGES:
            extended.add(EXT_KEY_USAGES[usage])
        else:
            unknown.append(usage)
    if unknown:
        quoted = " ".join('"' + u.replace("\\", "\\\\").replace('"', '\\"') + '"' for u in unknown)
        raise ValueError(f"unrecognized usage values: [{quoted}]")
    return bits, sorted(extended, key=_EXT_RANK.__getitem__)


def key_usage_der(bits: int) -> bytes:
    """The KeyUsage extension's value as Go writes it: a BIT STRING of 1 or 2 bytes, bit 0 the
    most significant, ending at the last bit set. Written by hand because `cryptography`'s
    KeyUsage refuses encipher/decipher only without key agreement, which Go allows."""
    body = bytearray(2)
    for bit in range(9):
        if bits & (1 << bit):
            body[bit // 8] |= 0x80 >> (bit % 8)
    length = 2 if body[1] else 1
    unused = length * 8 - bits.bit_length()  # bit i is 1 << i: the last one set ends the string
    return bytes([0x03, length + 1, unused, *body[:length]])


# Go's x509.Name.ToRDNSequence: these attributes in this order, each type's values in one
# RDN, every other attribute of the request's subject dropped.
_SUBJECT_ORDER = (
    NameOID.COUNTRY_NAME,
    NameOID.STATE_OR_PROVINCE_NAME,
    NameOID.LOCALITY_NAME,
    NameOID.STREET_ADDRESS,
    NameOID.POSTAL_CODE,
    NameOID.ORGANIZATION_NAME,
    NameOID.ORGANIZATIONAL_UNIT_NAME,
)


def go_subject(name: x509.Name) -> x509.Name:
    groups = [name.get_attributes_for_oid(oid) for oid in _SUBJECT_ORDER]
    groups += [name.get_attributes_for_oid(oid)[:1] for oid in (NameOID.COMMON_NAME, NameOID.SERIAL_NUMBER)]
    return x509.Name([x509.RelativeDistinguishedName(group) for group in groups if group])


def _sans(request: x509.CertificateSigningRequest) -> list[x509.GeneralName]:
    try:
        sans = request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    order = (x509.DNSName, x509.RFC822Name, x509.IPAddress, x509.UniformResourceIdentifier)
    return [name for kind in order for name in sans if isinstance(name, kind)]


def _hash(key: CAKey) -> hashes.SHA256 | hashes.SHA384 | hashes.SHA512:
    """Go's signature algorithm for the CA's key: SHA-256, SHA-384 for P-384, SHA-512 for P-521."""
    if isinstance(key, ec.EllipticCurvePrivateKey):
        if isinstance(key.curve, ec.SECP384R1):
            return hashes.SHA384()
        if isinstance(key.curve, ec.SECP521R1):
            return hashes.SHA512()
    return hashes.SHA256()


def validity(
    now: dt.datetime, ttl: dt.timedelta, ca_not_after: dt.datetime
) -> tuple[dt.datetime, dt.datetime]:
    """(NotBefore, NotAfter) as the permissive policy sets them; ValueError if the CA expired."""
    not_before = now - BACKDATE
    not_after = now + ttl if ttl < SHORT else now + ttl - BACKDATE
    not_after = min(not_after, ca_not_after)
    if not not_before < ca_not_after:
        raise ValueError(f"the signer has expired: NotAfter={ca_not_after}")
    if not now < ca_not_after:
        raise ValueError(f"refusing to sign a certificate that expired in the past: NotAfter={ca_not_after}")
    return not_before, not_after


def _serial() -> int:
    # Go draws from [0, 2**128); zero is not a serial `cryptography` writes, and has odds 2**-128.
    return secrets.randbelow(SERIAL_LIMIT - 1) + 1


def sign(
    ca: CA, request: x509.CertificateSigningRequest, usages: list[str], ttl: dt.timedelta, now: dt.datetime
) -> bytes:
    """The signed certificate, PEM; ValueError with upstream's message when it cannot be."""
    if not request.is_signature_valid:
        raise ValueError("unable to verify certificate request signature")
    bits, extended = key_usages(usages)
    not_before, not_after = validity(now, ttl, ca.not_after)
    subject = go_subject(request.subject)
    builder = (
        x509.CertificateBuilder()
        .serial_number(_serial())
        .subject_name(subject)
        .issuer_name(ca.certificate.subject)
        .public_key(request.public_key())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
    )
    if bits:
        builder = builder.add_extension(
            x509.UnrecognizedExtension(ExtensionOID.KEY_USAGE, key_usage_der(bits)), critical=True
        )
    if extended:
        builder = builder.add_extension(x509.ExtendedKeyUsage(extended), critical=False)
    builder = builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
    try:
        ski = ca.certificate.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    except x509.ExtensionNotFound:
        ski = None
    if ski is not None:
        builder = builder.add_extension(x509.AuthorityKeyIdentifier(ski.digest, None, None), critical=False)
    if names := _sans(request):
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=not len(subject))
    cert = builder.sign(ca.key, _hash(ca.key))
    return cert.public_bytes(serialization.Encoding.PEM)
