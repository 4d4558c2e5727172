"""The shared async API client against the embedded API server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from kcm_shared import kubeclient

from tests.conftest import ApiServer, start_apiserver


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


def test_crud_patch_and_status_errors(apiserver: ApiServer) -> None:
    async def scenario() -> None:
        client = kubeclient.KubeClient(
            kubeclient.load_connection(str(apiserver.kubeconfig)), user_agent="test"
        )
        try:
            path = kubeclient.resource_path("", "v1", "configmaps", "default")
            made = await client.create(path, {"metadata": {"name": "kc"}, "data": {"a": "1"}})
            one = kubeclient.resource_path("", "v1", "configmaps", "default", "kc")
            for ptype, body in (
                ("merge", {"data": {"b": "2"}}),
                ("json", [{"op": "add", "path": "/data/c", "value": "3"}]),
                ("strategic", {"data": {"d": "4"}}),
            ):
                await client.patch(one, body, ptype)
            got = await client.get(one)
            assert got["data"] == {"a": "1", "b": "2", "c": "3", "d": "4"}
            stale = {**made, "data": {"x": "y"}}
            with pytest.raises(kubeclient.ApiError) as err:
                await client.update(one, stale)
            assert err.value.conflict and err.value.status["reason"] == "Conflict"
            await client.delete(one)
            with pytest.raises(kubeclient.ApiError) as gone:
                await client.get(one)
            assert gone.value.not_found
        finally:
            await client.close()

    run(scenario())


def test_watch_streams_events_and_raises_gone(tmp_path: Path) -> None:
    server = start_apiserver(tmp_path / "s", "--watch-history", "3")

    async def scenario() -> None:
        client = kubeclient.KubeClient(kubeclient.load_connection(str(server.kubeconfig)))
        try:
            path = kubeclient.resource_path("", "v1", "configmaps", "default")
            rv = (await client.get(path))["metadata"]["resourceVersion"]
            await client.create(path, {"metadata": {"name": "w"}})
            events = []
            async for ev in client.watch(path, {"resourceVersion": rv, "timeoutSeconds": "5"}):
                events.append((ev["type"], ev["object"]["metadata"]["name"]))
                break
            assert events == [("ADDED", "w")]
            for i in range(5):
                await client.create(path, {"metadata": {"name": f"churn{i}"}})
            with pytest.raises(kubeclient.ApiError) as err:
                async for _ in client.watch(path, {"resourceVersion": rv, "timeoutSeconds": "5"}):
                    pass
            assert err.value.gone
        finally:
            await client.close()

    try:
        run(scenario())
    finally:
        server.stop()


def test_dead_server_is_a_clear_connection_error(tmp_path: Path) -> None:
    async def scenario() -> None:
        client = kubeclient.KubeClient(kubeclient.Connection("http://127.0.0.1:9"), timeout=5)
        try:
            with pytest.raises(Exception) as err:
                await client.get("/api/v1/namespaces")
            assert "connect" in str(err.value).lower()
        finally:
            await client.close()

    run(scenario())


def test_retry_on_conflict_rereads_and_wins_against_a_concurrent_writer(apiserver: ApiServer) -> None:
    async def scenario() -> tuple[int, dict[str, str]]:
        client = kubeclient.KubeClient(kubeclient.load_connection(str(apiserver.kubeconfig)), qps=0)
        one = kubeclient.resource_path("", "v1", "configmaps", "default", "race")
        await client.create(
            kubeclient.resource_path("", "v1", "configmaps", "default"), {"metadata": {"name": "race"}}
        )
        tries = 0

        async def bump() -> dict[str, object]:
            nonlocal tries
            tries += 1
            current = await client.get(one)
            if tries == 1:
                # Someone else writes between our read and our write: our copy is now stale.
                await client.patch(one, {"data": {"other": "x"}})
            current.setdefault("data", {})["mine"] = str(tries)
            return await client.update(one, current)

        try:
            await kubeclient.retry_on_conflict(bump)
            return tries, (await client.get(one))["data"]
        finally:
            await client.close()

    tries, data = run(scenario())  # type: ignore[misc]
    assert tries == 2
    assert data == {"other": "x", "mine": "2"}


def test_requests_made_inside_a_span_carry_its_traceparent() -> None:
    from aiohttp import web
    from kcm_shared import tracing

    seen: list[str] = []

    async def scenario() -> str:
        async def handler(request: web.Request) -> web.Response:
            seen.append(request.headers.get("traceparent", ""))
            return web.json_response({"kind": "ConfigMap"})

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        client = kubeclient.KubeClient(kubeclient.Connection(f"http://127.0.0.1:{port}"), qps=0)
        tracing.setup("test")
        try:
            with tracing.span("reconcile") as span:
                await client.update("/api/v1/namespaces/default/configmaps/a", {"kind": "ConfigMap"})
                return format(span.get_span_context().trace_id, "032x")
        finally:
            await client.close()
            await runner.cleanup()

    trace_id = run(scenario())
    assert len(seen) == 1 and seen[0].split("-")[1] == trace_id, seen
