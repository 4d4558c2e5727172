"""The ServiceAccount controller's sync against a recording client (upstream's
serviceaccounts_controller_test.go cases): which namespaces get `default`, and which create
errors are not failures."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import msgspec
import pytest
from kcm_controllers.serviceaccount import controller as serviceaccounts
from kcm_shared.apimachinery import codec
from kcm_shared.client import kubeclient
from kcm_shared.runtime import cache


class RecordingClient:
    def __init__(self, error: kubeclient.ApiError | None = None) -> None:
        self.created: list[tuple[str, dict[str, Any]]] = []
        self.error = error

    async def create(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        self.created.append((path, obj))
        if self.error is not None:
            raise self.error
        return obj


def controller(
    client: RecordingClient, phase: str | None, accounts: tuple[str, ...] = ()
) -> serviceaccounts.ServiceAccountsController:
    unfed = cast(Any, None)
    namespaces: cache.Cache[codec.NamespaceView] = cache.Cache(
        unfed, unfed, serviceaccounts.NAMESPACES, codec.NamespaceView
    )
    sas: cache.Cache[codec.Meta] = cache.Cache(unfed, unfed, serviceaccounts.SERVICEACCOUNTS, codec.Meta)
    if phase is not None:
        ns = msgspec.convert({"metadata": {"name": "ns"}, "status": {"phase": phase}}, codec.NamespaceView)
        namespaces._put("ns", ns, b"")
    for name in accounts:
        sas._put(
            f"ns/{name}", msgspec.convert({"metadata": {"name": name, "namespace": "ns"}}, codec.Meta), b""
        )
    return serviceaccounts.ServiceAccountsController(cast(Any, client), namespaces, sas, lambda key: None)


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
    client = RecordingClient()
    asyncio.run(controller(client, phase, accounts).sync("ns"))
    assert len(client.created) == creates
    if creates:
        path, body = client.created[0]
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
    sync = controller(RecordingClient(error), "Active").sync("ns")
    if fails:
        with pytest.raises(kubeclient.ApiError):
            asyncio.run(sync)
    else:
        asyncio.run(sync)
