"""The ServiceAccount controller's sync against the testing kit's fake client (upstream's
serviceaccounts_controller_test.go cases): which namespaces get `default`, and which create
errors are not failures."""

from __future__ import annotations

import asyncio

import pytest
from kcm_controllers.serviceaccount import controller as serviceaccounts
from kcm_shared.apimachinery import codec
from kcm_shared.client import kubeclient
from kcm_shared.testing import caches, fakeclient


def controller(
    client: fakeclient.FakeClient, phase: str | None, accounts: tuple[str, ...] = ()
) -> serviceaccounts.ServiceAccountsController:
    ns = [{"metadata": {"name": "ns"}, "status": {"phase": phase}}] if phase is not None else []
    namespaces = caches.new(serviceaccounts.NAMESPACES, codec.NamespaceView, ns)
    sas = caches.new(
        serviceaccounts.SERVICEACCOUNTS,
        codec.Meta,
        [{"metadata": {"name": name, "namespace": "ns"}} for name in accounts],
    )
    return serviceaccounts.ServiceAccountsController(client, namespaces, sas, lambda key: None)


@pytest.mark.parametrize(
    ("phase", "accounts", "creates"),
    [
        ("Active", (), 1),
        ("Active", ("other",), 1),
        ("Active", ("default",), 0),
        ("Terminating", (), 0),
        (None, (), 0),  # namespace gone
    ],
)
def test_which_namespaces_get_default(phase: str | None, accounts: tuple[str, ...], creates: int) -> None:
    client = fakeclient.FakeClient()
    asyncio.run(controller(client, phase, accounts).sync("ns"))
    assert len(client.calls("create")) == creates
    if creates:
        _, path, body = client.calls("create")[0]
        assert path == "/api/v1/namespaces/ns/serviceaccounts"
        assert body["metadata"] == {"name": "default", "namespace": "ns"}


TERMINATING = {"details": {"causes": [{"reason": "NamespaceTerminating"}]}}


@pytest.mark.parametrize(
    ("error", "fails"),
    [
        (kubeclient.ApiError(409, "AlreadyExists", "exists"), False),
        (kubeclient.ApiError(403, "Forbidden", "terminating", TERMINATING), False),
        (kubeclient.ApiError(403, "Forbidden", "no"), True),
        (kubeclient.ApiError(500, "InternalError", "boom"), True),
    ],
)
def test_create_errors(error: kubeclient.ApiError, fails: bool) -> None:
    client = fakeclient.FakeClient()
    client.fail("create", None, error)
    sync = controller(client, "Active").sync("ns")
    if fails:
        with pytest.raises(kubeclient.ApiError):
            asyncio.run(sync)
    else:
        asyncio.run(sync)
