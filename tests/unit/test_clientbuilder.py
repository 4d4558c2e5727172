"""Controller clients under their own ServiceAccounts (kcm_shared.client.clientbuilder), as
upstream's --use-service-account-credentials: the account made when missing, the token
requested by the root client and refreshed at 80% of its lifetime or after a 401, a failed
refresh kept quiet only while the old token is valid, and no root credential left on the
connection."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from kcm_cli import pki
from kcm_shared.client import clientbuilder, kubeclient

SA = "/api/v1/namespaces/kcm-system/serviceaccounts/deployment-controller"


class Root(kubeclient.KubeClient):
    """The root identity's client: records calls, stores ServiceAccounts, grants tokens."""

    def __init__(self) -> None:
        super().__init__(kubeclient.Connection("http://unused"))
        self.calls: list[tuple[str, str]] = []
        self.accounts: set[str] = set()
        self.issued = 0
        self.granted_seconds: int | None = None  # what the server writes back, if not the ask
        self.refuse: kubeclient.ApiError | None = None

    async def get(
        self,
        path: str,
        params: Mapping[str, str] | None = None,
        *,
        priority: kubeclient.Priority = kubeclient.Priority.NORMAL,
    ) -> dict[str, Any]:
        self.calls.append(("get", path))
        if path not in self.accounts:
            raise kubeclient.ApiError(404, "NotFound", "not found")
        return {}

    async def create(
        self,
        path: str,
        obj: dict[str, Any],
        params: Mapping[str, str] | None = None,
        *,
        priority: kubeclient.Priority = kubeclient.Priority.NORMAL,
    ) -> dict[str, Any]:
        self.calls.append(("create", path))
        if self.refuse is not None:
            raise self.refuse
        if path.endswith("/token"):
            self.issued += 1
            seconds = self.granted_seconds or obj["spec"]["expirationSeconds"]
            return {"spec": {"expirationSeconds": seconds}, "status": {"token": f"t{self.issued}"}}
        self.accounts.add(f"{path}/{obj['metadata']['name']}")
        return obj


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def source(root: Root, clock: Clock) -> clientbuilder.ServiceAccountToken:
    return clientbuilder.ServiceAccountToken(root, "kcm-system", "deployment-controller", clock=clock)


def test_a_missing_account_is_made_then_its_token_requested() -> None:
    root = Root()
    tokens = source(root, Clock())
    assert asyncio.run(tokens.header()) == "Bearer t1"
    assert root.calls == [
        ("get", SA),
        ("create", "/api/v1/namespaces/kcm-system/serviceaccounts"),
        ("create", f"{SA}/token"),
    ]


def test_the_token_is_kept_until_eighty_percent_of_its_lifetime_then_requested_again() -> None:
    root, clock = Root(), Clock()
    tokens = source(root, clock)

    async def scenario() -> list[str]:
        seen = [await tokens.header()]
        clock.now += 0.8 * 3600 - 1
        seen.append(await tokens.header())
        clock.now += 1
        seen.append(await tokens.header())
        return seen

    assert asyncio.run(scenario()) == ["Bearer t1", "Bearer t1", "Bearer t2"]
    # The account exists by the second request: read, not made again.
    assert root.calls[3:] == [("get", SA), ("create", f"{SA}/token")]


def test_the_lifetime_is_the_one_the_server_granted() -> None:
    root, clock = Root(), Clock()
    root.granted_seconds = 1000
    tokens = source(root, clock)

    async def scenario() -> list[str]:
        seen = [await tokens.header()]
        clock.now += 800
        seen.append(await tokens.header())
        return seen

    assert asyncio.run(scenario()) == ["Bearer t1", "Bearer t2"]


def test_a_401_gets_a_new_token_at_once() -> None:
    root, clock = Root(), Clock()
    tokens = source(root, clock)

    async def scenario() -> list[str]:
        first = await tokens.header()
        tokens.rejected("Bearer stale")  # not the token in hand: nothing to do
        second = await tokens.header()
        tokens.rejected(first)
        return [first, second, await tokens.header()]

    assert asyncio.run(scenario()) == ["Bearer t1", "Bearer t1", "Bearer t2"]


def test_concurrent_requests_share_one_token_request() -> None:
    root = Root()
    tokens = source(root, Clock())

    async def scenario() -> list[str]:
        return list(await asyncio.gather(*(tokens.header() for _ in range(5))))

    assert asyncio.run(scenario()) == ["Bearer t1"] * 5
    assert root.issued == 1


def test_a_refused_refresh_keeps_a_valid_token_and_tries_again_later() -> None:
    root, clock = Root(), Clock()
    tokens = source(root, clock)

    async def scenario() -> list[str]:
        seen = [await tokens.header()]
        root.refuse = kubeclient.ApiError(403, "Forbidden", "cannot create serviceaccounts/token")
        clock.now += 0.8 * 3600
        seen.append(await tokens.header())
        before = len(root.calls)
        clock.now += clientbuilder.RETRY_SECONDS - 1
        seen.append(await tokens.header())
        assert len(root.calls) == before  # not asked again before the retry time
        root.refuse = None
        clock.now += 1
        seen.append(await tokens.header())
        return seen

    assert asyncio.run(scenario()) == ["Bearer t1", "Bearer t1", "Bearer t1", "Bearer t2"]


def test_without_a_valid_token_a_refusal_is_the_requests_error() -> None:
    root, clock = Root(), Clock()
    root.refuse = kubeclient.ApiError(403, "Forbidden", "cannot create serviceaccounts")
    with pytest.raises(kubeclient.ApiError) as refused:
        asyncio.run(source(root, clock).header())
    assert refused.value.code == 403

    root.refuse = None
    tokens = source(root, clock)

    async def expired() -> None:
        await tokens.header()
        root.refuse = kubeclient.ApiError(403, "Forbidden", "no")
        clock.now += 3600  # the token in hand has expired: nothing valid to fall back on
        await tokens.header()

    with pytest.raises(kubeclient.ApiError):
        asyncio.run(expired())


def test_the_credentials_carry_no_root_identity(tmp_path: Path) -> None:
    admin = pki.client(tmp_path, "admin", "kubernetes-admin", ("system:masters",))
    ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    ctx.load_cert_chain(str(admin.cert), str(admin.key))
    conn = kubeclient.Connection(
        "https://127.0.0.1:6443",
        {"Authorization": "Bearer root"},
        ctx,
        ca_file=str(tmp_path / "ca.crt"),
    )
    root = kubeclient.KubeClient(conn)
    creds = clientbuilder.ClientBuilder(root, "kcm-system").credentials("deployment-controller")
    assert creds.conn.server == conn.server and creds.conn.headers == {}
    assert creds.conn.token_file is None
    assert isinstance(creds.conn.ssl_context, ssl.SSLContext)
    assert creds.conn.ssl_context is not ctx  # a fresh context: no client certificate in it
    assert creds.conn.ssl_context.verify_mode == ssl.CERT_REQUIRED
    assert (creds.tokens.namespace, creds.tokens.name) == ("kcm-system", "deployment-controller")
