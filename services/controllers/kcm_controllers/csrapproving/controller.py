"""The CSR approving controller: kubelet client certificates approved after a SubjectAccessReview.

Upstream pkg/controller/certificates/approver/sarapprove.go on our runtime. Work keys are CSR
names; a CSR added or updated queues itself. A sync leaves alone a CSR that is gone, has a
certificate, or is already Approved or Denied. Otherwise it tries upstream's recognizers in
order (`RECOGNIZERS`): a kubelet client request (signer kube-apiserver-client-kubelet, a
request that passes ValidateKubeletClientCSR) filed by the node itself (spec.username equal to
the subject's common name) asks for `create` on `certificatesigningrequests/selfnodeclient`,
any kubelet client request for `.../nodeclient`, in group certificates.k8s.io. The first
SubjectAccessReview for the requester (spec.username, uid, groups, extra) that allows it
appends the condition Approved / AutoApproved with the recognizer's message through the
approval subresource (a merge patch carrying the cached resourceVersion). A request that was
recognized but not allowed is an error retried with backoff, as upstream's ignorable error; a
request that does not parse is an error too; anything else is left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import msgspec
from cryptography import x509
from kcm_shared import runtime
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import csr
from kcm_shared.runtime import cache

log = logging.getLogger("kcm.csrapproving")

REASON = "AutoApproved"
SAR_PATH = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


class NotApproved(Exception):
    """Recognized, but no SubjectAccessReview allowed it (upstream's ignorable error)."""


@dataclass(frozen=True)
class Recognizer:
    subresource: str
    message: str
    recognize: Callable[[csr.CSRView, x509.CertificateSigningRequest], bool]


def is_node_client(view: csr.CSRView, request: x509.CertificateSigningRequest) -> bool:
    return (
        view.spec.signer_name == csr.KUBELET_CLIENT
        and csr.kubelet_client_error(request, set(view.spec.usages)) is None
    )


def is_self_node_client(view: csr.CSRView, request: x509.CertificateSigningRequest) -> bool:
    return view.spec.username == csr.common_name(request.subject) and is_node_client(view, request)


RECOGNIZERS = (
    Recognizer(
        "selfnodeclient",
        "Auto approving self kubelet client certificate after SubjectAccessReview.",
        is_self_node_client,
    ),
    Recognizer(
        "nodeclient", "Auto approving kubelet client certificate after SubjectAccessReview.", is_node_client
    ),
)


def review(view: csr.CSRView, subresource: str) -> dict[str, object]:
    """The SubjectAccessReview asking whether the requester may create this subresource."""
    spec = view.spec
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": spec.username,
            "uid": spec.uid,
            "groups": spec.groups,
            "extra": spec.extra,
            "resourceAttributes": {
                "group": "certificates.k8s.io",
                "resource": "certificatesigningrequests",
                "verb": "create",
                "subresource": subresource,
            },
        },
    }


def approval_patch(view: csr.CSRView, message: str) -> dict[str, object]:
    approved = csr.Condition(type=csr.APPROVED, status="True", reason=REASON, message=message)
    conditions = msgspec.to_builtins([*view.status.conditions, approved])
    return {
        "metadata": {"resourceVersion": view.metadata.resource_version},
        "status": {"conditions": conditions},
    }


class Approver:
    """Handlers and sync; the API client and cache are injected."""

    def __init__(self, client: kubeclient.KubeClient, csrs: cache.Cache[csr.CSRView]) -> None:
        self.client = client
        self.csrs = csrs

    async def sync(self, name: str) -> runtime.Result | None:
        view = self.csrs.get("", name)
        if view is None or view.status.certificate or any(csr.approval(view)):
            return None
        try:
            request = csr.parse_request(view.request())
        except ValueError as exc:
            raise ValueError(f'unable to parse csr "{name}": {exc}') from None
        tried: list[str] = []
        for recognizer in RECOGNIZERS:
            if not recognizer.recognize(view, request):
                continue
            tried.append(recognizer.subresource)
            answer = await self.client.create(SAR_PATH, review(view, recognizer.subresource))
            if (answer.get("status") or {}).get("allowed") is True:
                await self.client.patch(csr.path(name, "approval"), approval_patch(view, recognizer.message))
                return None
        if tried:
            raise NotApproved(
                f'recognized csr "{name}" as [{" ".join(tried)}] but subject access review was not approved'
            )
        return None


def build(ctx: runtime.Context) -> runtime.Reconcile:
    approver = Approver(ctx.client, ctx.caches[csr.CSRS])
    csr.queue_changes(ctx.caches[csr.CSRS], ctx.enqueue)
    return approver.sync


SPEC = runtime.Spec(
    name="certificatesigningrequest-approving-controller",
    alias="csrapproving",
    primary=csr.CSRS,
    views={csr.CSRS: csr.CSRView},
    build=build,
    workers=5,  # upstream runs it with 5 workers and no flag
    queue_name="certificate",
    package=__package__,
)
