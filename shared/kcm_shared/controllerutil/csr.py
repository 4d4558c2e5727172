"""What the CertificateSigningRequest controllers share: the CSR view, its conditions, the
request's parsing and upstream's checks of kubelet certificates.

- `CSRView`: a cached CSR (certificates.k8s.io/v1); `request()` and `certificate()` decode the
  base64 fields.
- `approval(csr)`, `is_approved(csr)`, `has_true_condition(csr, type)`: upstream's
  GetCertApprovalCondition, IsCertificateRequestApproved and HasTrueCondition
  (pkg/controller/certificates/certificate_controller_utils.go).
- `parse_request(pem)`: upstream's ParseCSR (pkg/apis/certificates/helpers.go): one
  `CERTIFICATE REQUEST` PEM block, else ValueError with upstream's message.
- `path(name, subresource)`: the CSR's API path; `queue_changes(csrs, enqueue)`: every CSR added
  or updated queues its name (upstream's certificate controller handlers).
- `kubelet_client_error` / `kubelet_serving_error`: upstream's ValidateKubeletClientCSR and
  ValidateKubeletServingCSR, the error's text or None.

Used by the signing, approving and cleaner controllers (each its own folder); none of them
imports another.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
from collections.abc import Callable

import msgspec
from cryptography import x509
from cryptography.x509.oid import NameOID

from kcm_shared.apimachinery import codec, gvr
from kcm_shared.client import kubeclient
from kcm_shared.runtime import cache

CSRS = gvr.Resource("certificates.k8s.io", "v1", "certificatesigningrequests")

# Upstream's signer names (k8s.io/api/certificates/v1 and v1beta1).
KUBE_APISERVER_CLIENT = "kubernetes.io/kube-apiserver-client"
KUBELET_CLIENT = "kubernetes.io/kube-apiserver-client-kubelet"
KUBELET_SERVING = "kubernetes.io/kubelet-serving"
LEGACY_UNKNOWN = "kubernetes.io/legacy-unknown"

APPROVED = "Approved"
DENIED = "Denied"
FAILED = "Failed"

NODE_PREFIX = "system:node:"
NODES_GROUP = "system:nodes"


class Condition(codec.View):
    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""
    last_update_time: dt.datetime | None = None
    last_transition_time: dt.datetime | None = None


class CSRSpec(codec.View):
    request: str = ""  # base64 of the PEM, as the API's []byte
    signer_name: str = ""
    expiration_seconds: int | None = None
    usages: list[str] = msgspec.field(default_factory=list)
    username: str = ""
    uid: str = ""
    groups: list[str] = msgspec.field(default_factory=list)
    extra: dict[str, list[str]] = msgspec.field(default_factory=dict)


class CSRStatus(codec.View):
    conditions: list[Condition] = msgspec.field(default_factory=list)
    certificate: str = ""  # base64 of the PEM


class CSRView(codec.Meta):
    spec: CSRSpec = msgspec.field(default_factory=CSRSpec)
    status: CSRStatus = msgspec.field(default_factory=CSRStatus)

    def request(self) -> bytes:
        return _b64(self.spec.request)

    def certificate(self) -> bytes:
        return _b64(self.status.certificate)


def path(name: str, subresource: str = "") -> str:
    at = kubeclient.resource_path(CSRS.group, CSRS.version, CSRS.resource, None, name)
    return f"{at}/{subresource}" if subresource else at


def queue_changes(csrs: cache.Cache[CSRView], enqueue: Callable[[str], None]) -> None:
    csrs.add_handler(
        on_add=lambda c: enqueue(c.metadata.name), on_update=lambda _, c: enqueue(c.metadata.name)
    )


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return b""  # the API server only stores valid base64; a foreign value is no PEM


def approval(csr: CSRView) -> tuple[bool, bool]:
    """(approved, denied): whether any condition of each type is present, whatever its status."""
    types = {c.type for c in csr.status.conditions}
    return APPROVED in types, DENIED in types


def is_approved(csr: CSRView) -> bool:
    approved, denied = approval(csr)
    return approved and not denied


def has_true_condition(csr: CSRView, kind: str) -> bool:
    """A condition of `kind` whose status is True or empty (upstream treats empty as True)."""
    return any(c.type == kind and c.status in ("", "True") for c in csr.status.conditions)


def parse_request(pem: bytes) -> x509.CertificateSigningRequest:
    """The first PEM block of `pem`, which must be a CERTIFICATE REQUEST; ValueError otherwise."""
    start = pem.find(b"-----BEGIN ")
    if start < 0 or not pem[start:].startswith(b"-----BEGIN CERTIFICATE REQUEST-----"):
        raise ValueError("PEM block type must be CERTIFICATE REQUEST")
    try:
        return x509.load_pem_x509_csr(pem[start:])
    except ValueError as exc:
        raise ValueError(f"x509: malformed certificate request: {exc}") from None


def organizations(name: x509.Name) -> list[str]:
    return [str(a.value) for a in name.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]


def common_name(name: x509.Name) -> str:
    found = name.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(found[0].value) if found else ""


def _sans(req: x509.CertificateSigningRequest) -> x509.SubjectAlternativeName | None:
    try:
        return req.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return None


def san_counts(req: x509.CertificateSigningRequest) -> dict[str, int]:
    """How many DNS, email, IP and URI names the request asks for."""
    sans = _sans(req)
    kinds: dict[str, type[x509.GeneralName]] = {
        "dns": x509.DNSName,
        "email": x509.RFC822Name,
        "ip": x509.IPAddress,
        "uri": x509.UniformResourceIdentifier,
    }
    return {key: sum(isinstance(n, kind) for n in sans) if sans else 0 for key, kind in kinds.items()}


_CLIENT_USAGES = (
    {"digital signature", "key encipherment", "client auth"},
    {"digital signature", "client auth"},
)
_SERVING_USAGES = (
    {"digital signature", "key encipherment", "server auth"},
    {"digital signature", "server auth"},
)


def _usages_error(usages: set[str], allowed: tuple[set[str], set[str]]) -> str | None:
    if usages in allowed:
        return None
    return f"usages did not match [{' '.join(sorted(allowed[0]))}]"


def kubelet_client_error(req: x509.CertificateSigningRequest, usages: set[str]) -> str | None:
    """Why `req` is no kubelet client certificate request, as upstream words it; None if it is."""
    if organizations(req.subject) != [NODES_GROUP]:
        return "subject organization is not system:nodes"
    counts = san_counts(req)
    for key, text in (("dns", "DNS"), ("email", "Email"), ("ip", "IP"), ("uri", "URI")):
        if counts[key]:
            return f"{text} subjectAltNames are not allowed"
    if not common_name(req.subject).startswith(NODE_PREFIX):
        return "subject common name does not begin with system:node:"
    return _usages_error(usages, _CLIENT_USAGES)


def kubelet_serving_error(req: x509.CertificateSigningRequest, usages: set[str]) -> str | None:
    """Why `req` is no kubelet serving certificate request, as upstream words it; None if it is."""
    if organizations(req.subject) != [NODES_GROUP]:
        return "subject organization is not system:nodes"
    counts = san_counts(req)
    if not counts["dns"] and not counts["ip"]:
        return "DNS or IP subjectAltName is required"
    if counts["email"]:
        return "Email subjectAltNames are not allowed"
    if counts["uri"]:
        return "URI subjectAltNames are not allowed"
    if (error := _usages_error(usages, _SERVING_USAGES)) is not None:
        return error
    if not common_name(req.subject).startswith(NODE_PREFIX):
        return "subject common name does not begin with system:node:"
    return None
