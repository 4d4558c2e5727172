"""certificates.k8s.io rules: CertificateSigningRequest (upstream pkg/apis/certificates/validation).

`validate_csr(c, obj, old, subresource)`: on create and on every update the request must be one
PEM CERTIFICATE REQUEST whose signature verifies, the usages known and unique, the signer name
qualified (`kubernetes.io/legacy-unknown` refused: certificates.k8s.io/v1 is the only version
served), `expirationSeconds` at least 600, the conditions well formed (Approved, Denied and
Failed only True, Approved and Denied exclusive, no type twice), `status.certificate` PEM
CERTIFICATE blocks only. An update may not remove an Approved, Denied or Failed condition; only
`approval` may add or change Approved and Denied; only `status` may set the certificate, and
never change it once set. Rules an old object already breaks are relaxed for it, as upstream's
getValidationOptions, so a stored object can always be updated.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from cryptography import x509
from kcm_shared.apimachinery import selectors

from .fielderrors import Causes, GoText, Obj, as_dict, as_list

LEGACY_UNKNOWN = "kubernetes.io/legacy-unknown"
VALID_USAGES = sorted(
    {
        "signing",
        "digital signature",
        "content commitment",
        "key encipherment",
        "key agreement",
        "data encipherment",
        "cert sign",
        "crl sign",
        "encipher only",
        "decipher only",
        "any",
        "server auth",
        "client auth",
        "code signing",
        "email protection",
        "s/mime",
        "ipsec end system",
        "ipsec tunnel",
        "ipsec user",
        "timestamping",
        "ocsp signing",
        "microsoft sgc",
        "netscape sgc",
    }
)
_TRUE_FALSE_UNKNOWN = ("False", "True", "Unknown")
_MAX_DOMAIN = 253
_MAX_SIGNER = _MAX_DOMAIN + (253 + 63 + 1) + 1


def _bytes(value: Any) -> bytes:
    if not isinstance(value, str):
        return b""
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return b""


def _pem_blocks(data: bytes) -> list[tuple[str, bool, bytes]]:
    """(type, has headers, the whole block) of each PEM block in `data`, as Go's pem.Decode finds them."""
    out: list[tuple[str, bool, bytes]] = []
    rest = data
    while (start := rest.find(b"-----BEGIN ")) >= 0:
        line_end = rest.find(b"-----", start + 11)
        if line_end < 0:
            break
        kind = rest[start + 11 : line_end].decode("latin-1")
        end_marker = b"-----END " + kind.encode("latin-1") + b"-----"
        end = rest.find(end_marker, line_end)
        if end < 0:
            break
        block = rest[start : end + len(end_marker)]
        out.append((kind, b":" in block.split(b"\n", 2)[1] if block.count(b"\n") >= 2 else False, block))
        rest = rest[end + len(end_marker) :]
    return out


def request_error(data: bytes) -> str | None:
    blocks = _pem_blocks(data)
    if not blocks or blocks[0][0] != "CERTIFICATE REQUEST":
        return "PEM block type must be CERTIFICATE REQUEST"
    try:
        req = x509.load_pem_x509_csr(blocks[0][2])
    except ValueError:
        return "x509: malformed certificate request"
    if not req.is_signature_valid:
        return "x509: signature verification failure"
    return None


def certificate_error(data: bytes) -> str | None:
    if not data:
        return None
    blocks = _pem_blocks(data)
    for kind, headers, block in blocks:
        if kind != "CERTIFICATE":
            return f'only CERTIFICATE PEM blocks are allowed, found "{kind}"'
        if headers:
            return "no PEM block headers are permitted"
        try:
            x509.load_pem_x509_certificate(block)
        except ValueError:
            return "x509: malformed certificate"
    if not blocks:
        return "must contain at least one CERTIFICATE PEM block"
    return None


def validate_signer_name(c: Causes, path: str, name: str) -> None:
    if not name:
        c.required(path)
        return
    segments = name.split("/")
    if len(segments) != 2:
        c.invalid(
            path, name, "must be a fully qualified domain and path of the form 'example.com/signer-name'"
        )
        return
    domain, rest = segments
    if len(domain) > _MAX_DOMAIN:
        c.too_long(path, _MAX_DOMAIN)
    labels = domain.split(".")
    for label in labels:
        errs = selectors.is_dns1123_label(label)
        for err in errs:
            c.invalid(path, domain, f"validating label {_quote(label)}: {err}")
        if errs:
            break
    if len(labels) < 2:
        c.invalid(path, domain, "should be a domain with at least two segments separated by dots")
    for label in rest.split("."):
        errs = selectors.is_dns1123_subdomain(label)
        for err in errs:
            c.invalid(path, rest, f"validating label {_quote(label)}: {err}")
        if errs:
            break
    if len(name) > _MAX_SIGNER:
        c.too_long(path, _MAX_SIGNER)


def go_bytes(data: bytes) -> GoText:
    """A []byte as Go's %#v prints it in a field error."""
    return GoText("[]byte{" + ", ".join(f"0x{b:x}" for b in data) + "}")


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _conditions(obj: Obj) -> list[Obj]:
    return [as_dict(x) for x in as_list(as_dict(obj.get("status")).get("conditions"))]


def _of_type(obj: Obj, kind: str) -> list[Obj]:
    return [x for x in _conditions(obj) if x.get("type") == kind]


def _breaks(obj: Obj) -> set[str]:
    """Which relaxable rules a stored object already breaks (upstream getValidationOptions)."""
    out: set[str] = set()
    conditions = _conditions(obj)
    types = [x.get("type") for x in conditions]
    if len(types) != len(set(types)):
        out.add("duplicate-conditions")
    if "" in types or None in types:
        out.add("empty-type")
    if {"Approved", "Denied"} <= set(types) or any(
        x.get("type") in ("Approved", "Denied", "Failed") and x.get("status") != "True" for x in conditions
    ):
        out.add("approved-and-denied")
    usages = as_list(as_dict(obj.get("spec")).get("usages"))
    if any(u not in VALID_USAGES for u in usages):
        out.add("unknown-usages")
    if len(usages) != len({str(u) for u in usages}):
        out.add("duplicate-usages")
    if as_dict(obj.get("spec")).get("signerName") == LEGACY_UNKNOWN:
        out.add("legacy-signer")
    if certificate_error(_bytes(as_dict(obj.get("status")).get("certificate"))) is not None:
        out.add("arbitrary-certificate")
    return out


def _validate_conditions(c: Causes, obj: Obj, relaxed: set[str]) -> None:
    seen: set[Any] = set()
    approved = denied = False
    conditions = _conditions(obj)
    for i, cond in enumerate(conditions):
        at = f"status.conditions[{i}]"
        kind, status = cond.get("type"), cond.get("status")
        if "empty-type" not in relaxed and not kind:
            c.required(f"{at}.type")
        exclusive = "approved-and-denied" not in relaxed and kind in ("Approved", "Denied", "Failed")
        if exclusive:
            if (kind == "Approved" and denied) or (kind == "Denied" and approved):
                c.invalid(f"{at}.type", kind, "Approved and Denied conditions are mutually exclusive")
            approved = approved or kind == "Approved"
            denied = denied or kind == "Denied"
            if status != "True":
                c.not_supported(f"{at}.status", status if status is not None else "", ("True",))
        elif status not in _TRUE_FALSE_UNKNOWN:
            c.not_supported(f"{at}.status", status if status is not None else "", _TRUE_FALSE_UNKNOWN)
        if "duplicate-conditions" not in relaxed:
            if kind in seen:
                c.duplicate(f"{at}.type", kind)
            seen.add(kind)


def _validate_object(c: Causes, obj: Obj, relaxed: set[str], certificate_any: bool) -> None:
    spec, status = as_dict(obj.get("spec")), as_dict(obj.get("status"))
    request = _bytes(spec.get("request"))
    error = request_error(request)
    if error is not None:
        c.invalid("spec.request", go_bytes(request), error)
    usages = as_list(spec.get("usages"))
    if not usages:
        c.required("spec.usages")
    if "unknown-usages" not in relaxed:
        for i, usage in enumerate(usages):
            if usage not in VALID_USAGES:
                c.not_supported(f"spec.usages[{i}]", usage, VALID_USAGES)
    if "duplicate-usages" not in relaxed:
        seen: set[str] = set()
        for i, usage in enumerate(usages):
            if str(usage) in seen:
                c.duplicate(f"spec.usages[{i}]", usage)
            seen.add(str(usage))
    signer = spec.get("signerName")
    if "legacy-signer" not in relaxed and signer == LEGACY_UNKNOWN:
        c.invalid("spec.signerName", signer, "the legacy signerName is not allowed via this API version")
    else:
        validate_signer_name(c, "spec.signerName", signer if isinstance(signer, str) else "")
    seconds = spec.get("expirationSeconds")
    if isinstance(seconds, int) and seconds < 600:
        c.invalid(
            "spec.expirationSeconds", seconds, "may not specify a duration less than 600 seconds (10 minutes)"
        )
    _validate_conditions(c, obj, relaxed)
    if not certificate_any:
        error = certificate_error(_bytes(status.get("certificate")))
        if error is not None:
            c.invalid("status.certificate", "<certificate data>", error)


def validate_csr(c: Causes, obj: Obj, old: Obj | None, subresource: str = "") -> None:
    relaxed = _breaks(old) if old is not None else set()
    _validate_object(c, obj, relaxed, "arbitrary-certificate" in relaxed)
    if old is None:
        return
    for kind in ("Approved", "Denied", "Failed"):
        if len(_of_type(obj, kind)) < len(_of_type(old, kind)):
            c.forbidden("status.conditions", f'updates may not remove a condition of type "{kind}"')
    if subresource != "approval":
        for kind in ("Approved", "Denied"):
            before, after = _of_type(old, kind), _of_type(obj, kind)
            if len(after) > len(before):
                c.forbidden("status.conditions", f'updates may not add a condition of type "{kind}"')
            elif len(after) == len(before) and after != before:
                c.forbidden("status.conditions", f'updates may not modify a condition of type "{kind}"')
    new_cert = as_dict(obj.get("status")).get("certificate") or ""
    old_cert = as_dict(old.get("status")).get("certificate") or ""
    if new_cert != old_cert:
        if subresource != "status":
            c.forbidden("status.certificate", "updates may not set certificate content")
        elif old_cert:
            c.forbidden("status.certificate", "updates may not modify existing certificate content")
