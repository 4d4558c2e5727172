"""The shared async API client against the embedded API server (and, for the bearer token
file, against a server of the test's own that accepts one token at a time)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml
from aiohttp import web
from kcm_shared.client import kubeclient

from tests.conftest import ApiServer, start_apiserver
from tests.support.names import HOSTILE_NAMES


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
    from kcm_shared.base import tracing

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


@pytest.mark.parametrize(
    ("parts", "path"),
    [
        (("", "v1", "pods"), "/api/v1/pods"),
        (
            ("apps", "v1", "deployments", "ns", "d", "scale"),
            "/apis/apps/v1/namespaces/ns/deployments/d/scale",
        ),
        (("", "v1", "pods", "n s", "a/b?c#d%e"), "/api/v1/namespaces/n%20s/pods/a%2Fb%3Fc%23d%25e"),
        (("", "v1", "pods", None, "a\r\nb é"), "/api/v1/pods/a%0D%0Ab%20%C3%A9"),
        (("", "v1", "pods", None, ".."), "/api/v1/pods/%2E%2E"),
        (("x/y", "v 1", "r?s"), "/apis/x%2Fy/v%201/r%3Fs"),
    ],
)
def test_every_part_of_a_path_is_one_percent_encoded_segment(parts: tuple[str, ...], path: str) -> None:
    assert kubeclient.resource_path(*parts) == path


def test_hostile_names_reach_the_server_as_themselves(apiserver: ApiServer) -> None:
    """A GET for each name answers NotFound for that very name, never another object."""

    async def scenario() -> None:
        client = kubeclient.KubeClient(kubeclient.load_connection(str(apiserver.kubeconfig)), qps=0)
        pods = kubeclient.resource_path("", "v1", "pods", "default")
        try:
            victim = await client.create(
                pods, {"metadata": {"name": "victim"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
            )
            for name in HOSTILE_NAMES:
                with pytest.raises(kubeclient.ApiError) as err:
                    await client.get(kubeclient.resource_path("", "v1", "pods", "default", name))
                assert err.value.not_found, (name, err.value)
                assert err.value.status["details"]["name"] == name
            still = await client.get(kubeclient.resource_path("", "v1", "pods", "default", "victim"))
            assert still["metadata"]["uid"] == victim["metadata"]["uid"]
        finally:
            await client.close()

    run(scenario())


class TokenServer:
    """Answers 200 to the bearer tokens it accepts at the moment, 401 to any other; records
    the Authorization header of every request (watches included) and counts its 401s."""

    def __init__(self, *tokens: str) -> None:
        self.tokens = set(tokens)
        self.seen: list[str] = []
        self.rejected = 0
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def handler(self, request: web.Request) -> web.StreamResponse:
        auth = request.headers.get("Authorization", "")
        self.seen.append(auth)
        if auth.removeprefix("Bearer ") not in self.tokens:
            self.rejected += 1
            return web.json_response({"kind": "Status", "code": 401, "reason": "Unauthorized"}, status=401)
        if request.query.get("watch") == "true":
            event = b'{"type":"ADDED","object":{"kind":"ConfigMap","metadata":{"name":"w"}}}\n'
            return web.Response(body=event, content_type="application/json")
        return web.json_response({"kind": "ConfigMap", "metadata": {"name": "a"}})

    async def __aenter__(self) -> TokenServer:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handler)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()


def write_kubeconfig(path: Path, server: str, token_file: str) -> None:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"tokenFile": token_file}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )


def test_a_rotated_token_file_is_read_again_after_a_401_for_requests_and_watches(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    path = kubeclient.resource_path("", "v1", "configmaps", "default", "a")

    async def scenario() -> None:
        async with TokenServer("first") as server:
            write_kubeconfig(tmp_path / "kubeconfig", server.url, "token")  # relative to the kubeconfig
            conn = kubeclient.load_connection(str(tmp_path / "kubeconfig"))
            assert conn.token_file == str(token)
            client = kubeclient.KubeClient(conn, qps=0)
            try:
                await client.get(path)
                token.write_text("second\n")  # the kubelet rotates it
                server.tokens = {"second"}
                # Within the minute the old token is still sent; its 401 sends the request again
                # once, with the file's new token, and the caller sees only the success.
                assert (await client.get(path))["metadata"]["name"] == "a"
                assert server.seen == ["Bearer first", "Bearer first", "Bearer second"]

                token.write_text("third")
                server.tokens = {"third"}
                with pytest.raises(kubeclient.ApiError) as err:
                    async for _ in client.watch("/api/v1/configmaps", {}):
                        pass
                assert err.value.code == 401, "a watch is not repeated: its caller re-establishes it"
                events = [ev async for ev in client.watch("/api/v1/configmaps", {})]
                assert events[0]["object"]["metadata"]["name"] == "w"
                assert server.seen[-2:] == ["Bearer second", "Bearer third"]
            finally:
                await client.close()

    run(scenario())


def test_a_token_file_is_read_again_once_its_period_is_over(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first")
    path = kubeclient.resource_path("", "v1", "configmaps", "default", "a")

    async def scenario() -> None:
        # Both accepted, as after a real rotation (the old token stays valid until it expires):
        # the new one must be picked up without any 401 to prompt it.
        async with TokenServer("first", "second") as server:
            conn = kubeclient.Connection(server.url, token_file=str(token))
            client = kubeclient.KubeClient(conn, qps=0, token_reread=0.2)
            try:
                await client.get(path)
                token.write_text("second")
                deadline = asyncio.get_running_loop().time() + 10
                while server.seen[-1] != "Bearer second":
                    assert asyncio.get_running_loop().time() < deadline, "the token file was never re-read"
                    await asyncio.sleep(0.05)
                    await client.get(path)
                assert server.rejected == 0
                token.unlink()  # mid-rotation, or a broken mount: the last token read still serves
                await asyncio.sleep(0.3)
                await client.get(path)
                assert server.seen[-1] == "Bearer second"
            finally:
                await client.close()

    run(scenario())
