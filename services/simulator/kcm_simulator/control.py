"""The fault-injection HTTP surface on loopback (`kcm sim --control-port`).

POST /nodes/<name>/stop-heartbeat, /resume-heartbeat, /not-ready, /ready and
/pods/<ns>/<name>/crash act on the kubelet stand-in; POST /nodes?count=N adds nodes and
DELETE /nodes/<name> removes one at run time (`kcm sim --add-nodes / --remove-node` call
these). Documented in docs/simulator.md.
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from aiohttp import web

from kcm_simulator.kubelet import Kubelet

MAX_ADDED_AT_ONCE = 10_000


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

    async def add_nodes(request: web.Request) -> web.Response:
        text = request.query.get("count", "1")
        try:
            count = int(text)
        except ValueError:
            count = -1
        if not 1 <= count <= MAX_ADDED_AT_ONCE:
            return web.json_response(
                {"error": f"count must be a whole number from 1 to {MAX_ADDED_AT_ONCE}, got {text!r}"},
                status=400,
            )
        return web.json_response({"added": [kubelet.add_node() for _ in range(count)]})

    async def remove_node(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in kubelet.nodes:
            return web.json_response({"error": f"no simulated node {name}"}, status=404)
        await kubelet.remove_node(name)
        return web.json_response({"removed": name})

    application = web.Application()
    application.router.add_post("/nodes", add_nodes)
    application.router.add_delete("/nodes/{name}", remove_node)
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


def call(port_file: Path, method: str, path: str, query: dict[str, str] | None = None) -> dict[str, Any]:
    """One request to a running simulator's control surface, found through the port file it
    wrote (`kcm sim --control-file`, `STATE_DIR/sim-control.port` under `kcm dev`). For the
    command line, which blocks anyway. Raises OSError when nobody answers and ValueError with
    the simulator's error for a refused request."""
    port = int(port_file.read_text().strip())
    url = f"http://127.0.0.1:{port}{path}"
    if query:
        url += "?" + urllib.parse.urlencode(query)
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            answer: dict[str, Any] = json.load(resp)
            return answer
    except urllib.error.HTTPError as exc:
        try:
            message = json.load(exc).get("error") or str(exc)
        except ValueError:
            message = str(exc)
        raise ValueError(message) from None


def node_path(name: str) -> str:
    return "/nodes/" + urllib.parse.quote(name, safe="")
