"""A Spec's debug handlers (`Spec.debug_handlers`, `Context.serve_debug`) on the Manager's
routes: served under `/debug/controllers/<name>/<path>` once `build` set them, 404 before, and
nothing routed that the Spec did not declare."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any, cast

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from kcm_shared import runtime
from kcm_shared.runtime import manager

_NATS_FLAGS = (
    "nkey_seed",
    "creds",
    "url",
    "user",
    "password",
    "password_file",
    "token",
    "tls_ca",
    "tls_cert",
)
NATS = {f"nats_{name}": None for name in (*_NATS_FLAGS, "tls_key", "stream_replicas")}


def _spec(debug: tuple[str, ...]) -> runtime.Spec:
    return runtime.Spec(
        name="probe-controller",
        alias="probe",
        primary=None,
        views={},
        build=cast(Any, None),
        debug_handlers=debug,
    )


def test_declared_paths_are_served_once_build_sets_them() -> None:
    asyncio.run(_test_declared_paths_are_served_once_build_sets_them())


async def _test_declared_paths_are_served_once_build_sets_them() -> None:
    spec = _spec(("graph",))
    m = manager.Manager([spec], argparse.Namespace(**NATS))
    path = "/debug/controllers/probe-controller/graph"
    async with TestClient(TestServer(m._routes())) as client:
        assert (await client.get(path)).status == 404  # not built yet
        ctx = runtime.Context(spec.name, cast(Any, None), {}, lambda key: None, cast(Any, None))

        async def graph(request: web.Request) -> web.StreamResponse:
            return web.Response(text="digraph " + request.query.get("uid", ""))

        ctx.serve_debug("graph", graph)
        ctx.serve_debug("undeclared", graph)
        m.running[spec.name] = cast(Any, argparse.Namespace(ctx=ctx))
        resp = await client.get(path, params={"uid": "u-1"})
        assert (resp.status, await resp.text()) == (200, "digraph u-1")
        assert (await client.get("/debug/controllers/probe-controller/undeclared")).status == 404
