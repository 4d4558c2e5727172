"""The fault-injection HTTP surface on loopback (`kcm sim --control-port`).

POST /nodes/<name>/stop-heartbeat, /resume-heartbeat, /not-ready, /ready and
/pods/<ns>/<name>/crash act on the kubelet stand-in; documented in docs/simulator.md.
"""

from __future__ import annotations

import socket
from pathlib import Path

from aiohttp import web

from kcm_simulator.kubelet import Kubelet


def app(kubelet: Kubelet) -> web.Application:
    async def node_action(request: web.Request) -> web.Response:
        name, action = request.match_info["name"], request.match_info["action"]
        if name not in kubelet.nodes:
            return web.json_response({"error": f"no simulated node {name}"}, status=404)
        if action == "stop-heartbeat":
            kubelet.set_heartbeat(name, False)
        elif action == "resume-heartbeat":
            kubelet.set_heartbeat(name, True)
        elif action in ("not-ready", "ready"):
            await kubelet.set_ready(name, action == "ready")
        else:
            return web.json_response({"error": f"unknown action {action}"}, status=404)
        return web.json_response({"node": name, "action": action})

    async def crash(request: web.Request) -> web.Response:
        ns, name = request.match_info["ns"], request.match_info["name"]
        if not kubelet.crash(ns, name):
            return web.json_response({"error": f"no running simulated pod {ns}/{name}"}, status=404)
        return web.json_response({"pod": f"{ns}/{name}", "action": "crash"})

    application = web.Application()
    application.router.add_post("/nodes/{name}/{action}", node_action)
    application.router.add_post("/pods/{ns}/{name}/crash", crash)
    return application


async def start(kubelet: Kubelet, port: int, port_file: Path | None) -> web.AppRunner:
    runner = web.AppRunner(app(kubelet), access_log=None, handle_signals=False)
    await runner.setup()
    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    await web.SockSite(runner, sock).start()
    bound = sock.getsockname()[1]
    if port_file is not None:
        tmp = port_file.with_suffix(".tmp")
        tmp.write_text(str(bound))
        tmp.replace(port_file)
    return runner
