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
