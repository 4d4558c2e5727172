"""The operations endpoint every service serves: health checks and Prometheus metrics.

`/healthz`, `/livez`, `/readyz` answer 200 `ok` or 500 with one `[+]name ok` / `[-]name
failed: reason` line per check (the format kube-controller-manager uses, `?verbose` or not);
`/livez` and `/readyz` leave out aggregated checks (reports on other processes, see
`health.Checks`); `/healthz/<check>` answers for one check; `/metrics` is the Prometheus text format of the
process-wide registry. Services may add routes (the coordinator adds its status API).
"""

from __future__ import annotations

import logging

import prometheus_client
from aiohttp import web

from kcm_shared.bus.health import Checks

log = logging.getLogger("kcm.ops")


def _report(results: dict[str, str | None], verbose: bool) -> web.Response:
    healthy = all(err is None for err in results.values())
    lines = [f"[+]{name} ok" if err is None else f"[-]{name} failed: {err}" for name, err in results.items()]
    if healthy and not verbose:
        return web.Response(text="ok")
    verdict = "healthz check passed" if healthy else "healthz check failed"
    return web.Response(text="\n".join([*lines, verdict]) + "\n", status=200 if healthy else 500)


def app(checks: Checks) -> web.Application:
    async def all_checks(request: web.Request) -> web.Response:
        return _report(checks.run(), "verbose" in request.query)

    async def own_checks(request: web.Request) -> web.Response:
        return _report(checks.run(own_only=True), "verbose" in request.query)

    async def one_check(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in checks.checks:
            return web.Response(text=f"no check named {name!r}\n", status=404)
        err = checks.run_one(name)
        return web.Response(text="ok" if err is None else f"{err}\n", status=200 if err is None else 500)

    async def metrics(request: web.Request) -> web.Response:
        body = prometheus_client.generate_latest(prometheus_client.REGISTRY)
        return web.Response(body=body, headers={"Content-Type": prometheus_client.CONTENT_TYPE_LATEST})

    application = web.Application()
    application.router.add_get("/healthz", all_checks)
    for path in ("/livez", "/readyz"):
        application.router.add_get(path, own_checks)
    for path in ("/healthz", "/livez", "/readyz"):
        application.router.add_get(path + "/{name}", one_check)
    application.router.add_get("/metrics", metrics)
    return application


def url(bind: str, port: int) -> str:
    """The URL others may reach the endpoint at (loopback when bound to every address)."""
    host = bind if bind not in ("0.0.0.0", "::") else "127.0.0.1"
    return f"http://{host}:{port}"


async def start(application: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Serve until the runner is cleaned up; returns the bound port (`port=0`: any free one)."""
    runner = web.AppRunner(application, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    server = site._server
    bound = port
    if server is not None and server.sockets:  # type: ignore[attr-defined]
        bound = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
    log.info("ops endpoint serving", extra={"host": host, "port": bound})
    return runner, bound
