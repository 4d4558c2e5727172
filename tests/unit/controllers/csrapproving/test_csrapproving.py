"""The CSR approver with upstream's cases: which requests each recognizer takes, the
SubjectAccessReview it asks, the approval it writes, and what it leaves alone."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from kcm_controllers.csrapproving import controller as approving
from kcm_shared.controllerutil import csr
from kcm_shared.testing import caches, fakeclient

from tests import csrs

KUBELET_USAGES = ["digital signature", "key encipherment", "client auth"]


def doc(
    username: str,
    pem: bytes,
    signer: str = csr.KUBELET_CLIENT,
    usages: list[str] = KUBELET_USAGES,
    conditions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {"name": "n", "resourceVersion": "3"},
        "spec": {
            "request": csrs.b64(pem),
            "signerName": signer,
            "usages": usages,
            "username": username,
            "uid": "uid-1",
            "groups": ["system:bootstrappers", "system:authenticated"],
            "extra": {"k": ["v"]},
        },
        "status": {"conditions": conditions or []},
    }


NODE_PEM = csrs.request_pem("system:node:w1", ("system:nodes",))


class SARClient(fakeclient.FakeClient):
    """Answers SubjectAccessReviews: allowed for the subresources in `allow`."""

    def __init__(self, allow: set[str]) -> None:
        super().__init__()
        self.allow = allow
        self.reviews: list[dict[str, Any]] = []

    async def create(self, path: str, obj: Any, params: Any = None, **kwargs: Any) -> Any:
        if path == approving.SAR_PATH:
            self.reviews.append(obj)
            sub = obj["spec"]["resourceAttributes"]["subresource"]
            return {**obj, "status": {"allowed": sub in self.allow}}
        return await super().create(path, obj, params, **kwargs)


def run(d: dict[str, Any], allow: set[str]) -> SARClient:
    client = SARClient(allow)
    client.add("/apis/certificates.k8s.io/v1/certificatesigningrequests/n", d)
    store = caches.new(csr.CSRS, csr.CSRView, [d])
    asyncio.run(approving.Approver(client, store).sync("n"))
    return client


def test_a_bootstrap_user_s_kubelet_client_csr_is_approved_after_nodeclient() -> None:
    client = run(doc("system:bootstrap:abc", NODE_PEM), {"nodeclient"})
    ((review),) = client.reviews
    assert review["spec"] == {
        "user": "system:bootstrap:abc",
        "uid": "uid-1",
        "groups": ["system:bootstrappers", "system:authenticated"],
        "extra": {"k": ["v"]},
        "resourceAttributes": {
            "group": "certificates.k8s.io",
            "resource": "certificatesigningrequests",
            "verb": "create",
            "subresource": "nodeclient",
        },
    }
    ((_, path, body),) = client.calls("patch")
    assert path.endswith("/certificatesigningrequests/n/approval")
    assert body == {
        "metadata": {"resourceVersion": "3"},
        "status": {
            "conditions": [
                {
                    "type": "Approved",
                    "status": "True",
                    "reason": "AutoApproved",
                    "message": "Auto approving kubelet client certificate after SubjectAccessReview.",
                }
            ]
        },
    }


def test_a_node_renewing_its_own_asks_selfnodeclient_first() -> None:
    client = run(doc("system:node:w1", NODE_PEM), {"selfnodeclient"})
    assert [r["spec"]["resourceAttributes"]["subresource"] for r in client.reviews] == ["selfnodeclient"]
    ((_, _, body),) = client.calls("patch")
    assert body["status"]["conditions"][0]["message"] == (
        "Auto approving self kubelet client certificate after SubjectAccessReview."
    )


def test_recognized_but_not_allowed_is_an_error_to_retry() -> None:
    with pytest.raises(approving.NotApproved, match=r'recognized csr "n" as \[selfnodeclient nodeclient\]'):
        run(doc("system:node:w1", NODE_PEM), set())


@pytest.mark.parametrize(
    "d",
    [
        doc("u", NODE_PEM, signer=csr.KUBE_APISERVER_CLIENT),
        doc("u", NODE_PEM, usages=["client auth"]),
        doc("u", csrs.request_pem("system:node:w1", ("other",))),
        doc("u", NODE_PEM, conditions=[{"type": "Denied", "status": "True"}]),
        doc("u", NODE_PEM, conditions=[{"type": "Approved", "status": "True"}]),
    ],
)
def test_everything_else_is_left_alone(d: dict[str, Any]) -> None:
    client = run(d, {"nodeclient", "selfnodeclient"})
    assert client.reviews == []
    assert client.calls("patch") == []
    assert msgspec.convert(d, csr.CSRView).spec.username == "u"
