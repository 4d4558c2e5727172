"""`--kube-api-content-type` in kcm's client (kcm_shared.client.contenttype, kubeclient).

The server here replays kube-apiserver's recorded answers
(tests/unit/shared/apimachinery/fixtures, tools/record_protobuf.py): protobuf when the request's
Accept puts protobuf first, JSON otherwise, as kube-apiserver negotiates. What the client hands
on must be kube-apiserver's own JSON either way.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from kcm_shared.client import contenttype, kubeclient

RECORDED = json.loads(
    (Path(__file__).parents[1] / "apimachinery/fixtures/kube_apiserver_protobuf.json").read_text()
)
PROTOBUF = "application/vnd.kubernetes.protobuf"


@pytest.mark.parametrize(
    ("path", "asks_protobuf"),
    [
        ("/api/v1/namespaces/ns/pods", True),
        ("/api/v1/namespaces/ns/pods/p", True),
        ("/api/v1/namespaces/ns/pods/p/status", True),
        ("/apis/apps/v1/namespaces/ns/deployments/d/scale", True),
        ("/api/v1/nodes", True),
        ("/api/v1/namespaces/ns", True),
        ("/apis/coordination.k8s.io/v1/leases", True),
        ("/api/v1/namespaces/ns/pods/p/log", False),
        ("/api/v1/nodes/n/proxy/metrics", False),
        ("/api/v1", False),
        ("/apis/apps/v1", False),
        ("/apis/example.com/v1/namespaces/ns/widgets", False),
        ("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", False),
        ("/apis/metrics.k8s.io/v1beta1/pods", False),
        ("/version", False),
    ],
)
def test_protobuf_is_asked_for_reads_of_built_in_objects_only(path: str, asks_protobuf: bool) -> None:
    proto = contenttype.ContentType(PROTOBUF)
    assert proto.accept("GET", path) == (
        f"{PROTOBUF}, application/json" if asks_protobuf else "application/json"
    )
    assert proto.accept("PUT", path) == "application/json"
    assert contenttype.ContentType().accept("GET", path) == "application/json"


def test_an_unknown_content_type_is_refused() -> None:
    with pytest.raises(ValueError, match="unsupported content type 'application/yaml'"):
        contenttype.ContentType("application/yaml")


def replaying_server(seen: list[tuple[str, str]]) -> web.Application:
    by_path = {r["path"]: r for r in RECORDED["reads"].values()}
    watch = RECORDED["watch"]

    async def handle(request: web.Request) -> web.StreamResponse:
        accept = request.headers.get("Accept", "")
        seen.append((request.path, accept))
        protobuf_first = accept.startswith(PROTOBUF)
        if request.query.get("watch") == "true":
            body = base64.b64decode(watch["protobuf"]) if protobuf_first else watch["json"].encode()
            resp = web.StreamResponse()
            resp.content_type = watch["content_type"] if protobuf_first else "application/json"
            await resp.prepare(request)
            for at in range(0, len(body), 7):  # frames split across writes
                await resp.write(body[at : at + 7])
            await resp.write_eof()
            return resp
        read = by_path[request.path]
        if protobuf_first:
            return web.Response(
                status=read["code"], body=base64.b64decode(read["protobuf"]), content_type=PROTOBUF
            )
        return web.Response(status=read["code"], text=read["json"], content_type="application/json")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    return app


def with_client(
    content_type: str, scenario: Callable[[kubeclient.KubeClient], Coroutine[Any, Any, None]]
) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []

    async def main() -> None:
        runner = web.AppRunner(replaying_server(seen))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        client = kubeclient.KubeClient(
            kubeclient.Connection(f"http://127.0.0.1:{port}"), qps=0, content_type=content_type
        )
        try:
            await scenario(client)
        finally:
            await client.close()
            await runner.cleanup()

    asyncio.run(main())
    return seen


async def collect(batches: AsyncIterator[list[bytes]]) -> list[Any]:
    return [json.loads(line) async for batch in batches for line in batch]


@pytest.mark.parametrize("content_type", ["application/json", PROTOBUF])
def test_reads_hand_on_kube_apiservers_json_whichever_media_type_was_asked(content_type: str) -> None:
    reads = RECORDED["reads"]
    before = contenttype.BODIES.labels(PROTOBUF)._value.get()

    async def scenario(client: kubeclient.KubeClient) -> None:
        for name in ("pod", "deployment", "podlist", "lease"):
            path = reads[name]["path"]
            want = json.loads(reads[name]["json"])
            assert json.loads(await client.request_bytes("GET", path, params=reads[name]["params"])) == want
            assert await client.get(path, reads[name]["params"]) == want
        path = RECORDED["watch"]["path"]
        want = [json.loads(line) for line in RECORDED["watch"]["json"].splitlines()]
        assert await collect(client.watch_batches(path, {"resourceVersion": "0"})) == want
        assert [e async for e in client.watch(path, {"resourceVersion": "0"})] == want

    seen = with_client(content_type, scenario)
    protobuf_bodies = contenttype.BODIES.labels(PROTOBUF)._value.get() - before
    assert all(accept.startswith(PROTOBUF) == (content_type == PROTOBUF) for _, accept in seen)
    assert (protobuf_bodies > 0) == (content_type == PROTOBUF)


def test_a_protobuf_status_becomes_the_api_error_it_stands_for() -> None:
    read = RECORDED["reads"]["status_404"]

    async def scenario(client: kubeclient.KubeClient) -> None:
        with pytest.raises(kubeclient.ApiError) as err:
            await client.get(read["path"])
        assert err.value.not_found and err.value.reason == "NotFound"
        assert err.value.status == json.loads(read["json"])

    with_client(PROTOBUF, scenario)
