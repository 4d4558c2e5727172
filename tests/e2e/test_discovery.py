"""Shared discovery over real HTTP: the embedded API server, and a server whose aggregated
APIs fail in the ways real ones do (an error status, no answer)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp import web
from kcm_shared.apimachinery import gvr
from kcm_shared.client import discovery, kubeclient

from tests.conftest import ApiServer

CORE = {
    "kind": "APIResourceList",
    "groupVersion": "v1",
    "resources": [
        {"name": "pods", "namespaced": True, "kind": "Pod", "verbs": ["list", "watch", "delete"]},
    ],
}
APPS = {
    "kind": "APIResourceList",
    "groupVersion": "apps/v1",
    "resources": [
        {"name": "deployments", "namespaced": True, "kind": "Deployment", "verbs": ["list", "watch"]},
    ],
}
# The client's timeout in the hanging-group test: long enough for the healthy groups on a
# loaded machine; the slow group never answers at all.
TIMEOUT_S = 3.0


def _group(name: str) -> dict[str, object]:
    return {
        "name": name,
        "versions": [{"groupVersion": f"{name}/v1", "version": "v1"}],
        "preferredVersion": {"groupVersion": f"{name}/v1", "version": "v1"},
    }


@asynccontextmanager
async def aggregated_server(*, root_fails: bool = False) -> AsyncIterator[str]:
    async def api(_: web.Request) -> web.Response:
        if root_fails:
            return web.json_response({"kind": "Status", "code": 500, "message": "down"}, status=500)
        return web.json_response({"kind": "APIVersions", "versions": ["v1"]})

    async def apis(_: web.Request) -> web.Response:
        groups = [_group("apps"), _group("slow.example.com"), _group("broken.example.com")]
        return web.json_response({"kind": "APIGroupList", "groups": groups})

    async def slow(_: web.Request) -> web.Response:
        await asyncio.Event().wait()  # hangs until the server shuts down
        return web.json_response({})

    async def broken(_: web.Request) -> web.Response:
        status = {"kind": "Status", "code": 503, "reason": "ServiceUnavailable", "message": "no endpoints"}
        return web.json_response(status, status=503)

    def document(body: dict[str, object]) -> Any:
        async def handler(_: web.Request) -> web.Response:
            return web.json_response(body)

        return handler

    app = web.Application()
    app.router.add_get("/api", api)
    app.router.add_get("/api/v1", document(CORE))
    app.router.add_get("/apis", apis)
    app.router.add_get("/apis/apps/v1", document(APPS))
    app.router.add_get("/apis/slow.example.com/v1", slow)
    app.router.add_get("/apis/broken.example.com/v1", broken)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def test_groups_that_fail_or_hang_are_reported_and_the_rest_is_mapped() -> None:
    async def scenario() -> None:
        async with aggregated_server() as url:
            client = kubeclient.KubeClient(kubeclient.Connection(url), timeout=TIMEOUT_S)
            try:
                mapper = await discovery.discover(client)
            finally:
                await client.close()
        assert mapper.failed_groups == {"slow.example.com", "broken.example.com"}
        found = {r.resource for r in mapper.resources}
        assert found == {gvr.Resource("", "v1", "pods"), gvr.Resource("apps", "v1", "deployments")}
        assert mapper.for_kind("apps/v1", "Deployment").resource.resource == "deployments"

    asyncio.run(scenario())


def test_a_failing_root_document_fails_the_round() -> None:
    async def scenario() -> None:
        async with aggregated_server(root_fails=True) as url:
            client = kubeclient.KubeClient(kubeclient.Connection(url), timeout=1.0)
            try:
                with pytest.raises(kubeclient.ApiError):
                    await discovery.discover(client)
            finally:
                await client.close()

    asyncio.run(scenario())


def test_the_embedded_api_server_is_discovered_whole(apiserver: ApiServer) -> None:
    async def scenario() -> discovery.Mapper:
        client = kubeclient.KubeClient(kubeclient.load_connection(str(apiserver.kubeconfig)))
        try:
            return await discovery.discover(client)
        finally:
            await client.close()

    mapper = asyncio.run(scenario())
    assert mapper.failed_groups == frozenset()
    assert mapper.for_kind("apps/v1", "ReplicaSet").resource == gvr.Resource("apps", "v1", "replicasets")
    assert mapper.for_kind("v1", "Pod").resource.resource == "pods"
