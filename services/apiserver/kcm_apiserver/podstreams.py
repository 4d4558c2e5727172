"""pods/log, pods/exec, pods/attach and pods/portforward: proxied to the pod's node's kubelet,
as kube-apiserver's pod registry does (upstream pkg/registry/core/pod/strategy.go).

- `location(...)` checks the request as upstream's LogLocation / ExecLocation /
  AttachLocation / PortForwardLocation do (the container defaulted when the pod has one, else
  upstream's "a container name must be specified ..." / "container X is not valid for pod Y";
  a pod with no node: an empty log, or "pod X does not have a host assigned") and builds the
  kubelet URL from the Node: the first address of the preferred types and
  `daemonEndpoints.kubeletEndpoint.Port`, with the kubelet's query names (`input`, `output`,
  `error`, `tty`, `command`, one `port` per port).
- `proxy_log` streams the kubelet's answer back (its refusals become upstream's errors: the
  kubelet's text as the Status message); `proxy_upgrade` joins a client's WebSocket to one
  opened to the kubelet with the same subprotocols, message for message.
- The kubelet's serving certificate is not verified, as kube-apiserver without
  `--kubelet-certificate-authority`.

Called by `server.py` for those four subresources.
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.parse
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

from kcm_apiserver import errors

Obj = dict[str, Any]
# kube-apiserver's default --kubelet-preferred-address-types, with the simulator's InternalDNS
# (where its kubelet server listens) first: a Hostname like `sim-node-0` resolves nowhere.
PREFERRED_ADDRESS_TYPES = ("InternalDNS", "Hostname", "InternalIP", "ExternalDNS", "ExternalIP")
_KUBELET_PATHS = {"log": "containerLogs", "exec": "exec", "attach": "attach", "portforward": "portForward"}
_LOG_PARAMS = ("follow", "previous", "timestamps", "sinceSeconds", "sinceTime", "tailLines", "limitBytes")
# What Go's strconv.ParseBool reads as true: the Python client sends `stdout=True`.
_GO_TRUE = ("1", "t", "T", "true", "TRUE", "True")
_CONNECT_TIMEOUT = 10.0
# A log's bytes are passed on in pieces of at most this size.
_CHUNK = 32 << 10


@dataclass(frozen=True)
class Location:
    """Where the kubelet serves a subresource; None url: the pod has no node (empty log)."""

    url: str | None


def _container_names(containers: list[Any]) -> str:
    return " ".join(str(c.get("name", "")) for c in containers if isinstance(c, dict))


def _container(pod: Obj, name: str, requested: str) -> str:
    spec = pod.get("spec") or {}
    containers = spec.get("containers") or []
    if not requested:
        if len(containers) == 1:
            return str(containers[0].get("name", ""))
        if not containers:
            raise errors.bad_request(f"a container name must be specified for pod {name}")
        message = f"a container name must be specified for pod {name}, choose one of: [{_container_names(containers)}]"
        if spec.get("initContainers"):
            message += f" or one of the init containers: [{_container_names(spec['initContainers'])}]"
        raise errors.bad_request(message)
    for key in ("containers", "initContainers", "ephemeralContainers"):
        if any(isinstance(c, dict) and c.get("name") == requested for c in spec.get(key) or []):
            return requested
    raise errors.bad_request(f"container {requested} is not valid for pod {name}")


def _kubelet_base(node: Obj | None, node_name: str) -> str:
    if node is None:
        raise errors.not_found("", "nodes", node_name)
    status = node.get("status") or {}
    port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port") or 10250
    addresses = [a for a in status.get("addresses") or [] if isinstance(a, dict)]
    for kind in PREFERRED_ADDRESS_TYPES:
        for addr in addresses:
            if addr.get("type") == kind and addr.get("address"):
                host = str(addr["address"])
                host = f"[{host}]" if ":" in host else host
                return f"https://{host}:{int(port)}"
    known = ", ".join(f"{a.get('type')}={a.get('address')}" for a in addresses)
    raise errors.bad_request(f"no preferred addresses found; known addresses: [{known}]")


def _ports(query: Any) -> list[int]:
    ports = []
    for text in query.getall("ports", []):
        for part in str(text).split(","):
            try:
                port = int(part)
            except ValueError:
                raise errors.bad_request(f"invalid port {part!r}") from None
            if not 0 < port < 65536:
                raise errors.bad_request(f"port {port} must be in the range 1 - 65535")
            ports.append(port)
    return ports


def location(pod: Obj, node: Obj | None, sub: str, query: Any) -> Location:
    """The kubelet URL for `sub` of `pod` (the stored Pod) on `node` (its stored Node)."""
    meta = pod.get("metadata") or {}
    name, namespace = str(meta.get("name", "")), str(meta.get("namespace", ""))
    node_name = str((pod.get("spec") or {}).get("nodeName") or "")
    params: list[tuple[str, str]] = []
    path = [_KUBELET_PATHS[sub], namespace, name]
    if sub == "portforward":
        ports = _ports(query)
        params = [("port", str(p)) for p in ports]
    else:
        path.append(_container(pod, name, str(query.get("container", ""))))
    if sub == "log":
        params = [(k, str(query[k])) for k in _LOG_PARAMS if k in query]
    elif sub in ("exec", "attach"):
        wanted = {"stdin": "input", "stdout": "output", "stderr": "error", "tty": "tty"}
        params = [(to, "1") for frm, to in wanted.items() if query.get(frm) in _GO_TRUE]
        if sub == "exec":
            command = query.getall("command", [])
            if not command:
                raise errors.bad_request("you must specify at least 1 command")
            params += [("command", str(c)) for c in command]
    if not node_name:
        if sub == "log":
            return Location(None)
        raise errors.bad_request(f"pod {name} does not have a host assigned")
    url = _kubelet_base(node, node_name) + "/" + "/".join(urllib.parse.quote(p, safe="") for p in path)
    return Location(url + ("?" + urllib.parse.urlencode(params) if params else ""))


def _backend_error(code: int, text: str) -> errors.ApiError:
    """A kubelet refusal as kube-apiserver's response checker words it: its text as the message."""
    text = text.strip()[:50_000]
    if code == 400:
        return errors.bad_request(text)
    if code == 404:
        return errors.ApiError(404, "NotFound", text)
    return errors.ApiError(code if 400 <= code < 600 else 500, "InternalError", text)


async def proxy_log(request: web.Request, where: Location) -> web.StreamResponse:
    if where.url is None:
        return web.Response(body=b"", content_type="text/plain")
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=_CONNECT_TIMEOUT)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        try:
            backend = await session.get(where.url, ssl=False)
        except (aiohttp.ClientError, OSError) as exc:
            raise errors.ApiError(500, "InternalError", f'Get "{where.url}": {exc}') from exc
        async with backend:
            if backend.status != 200:
                raise _backend_error(backend.status, await backend.text(errors="replace"))
            resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
            await resp.prepare(request)
            with contextlib.suppress(ConnectionError, aiohttp.ClientError):
                async for chunk in backend.content.iter_chunked(_CHUNK):
                    await resp.write(chunk)
            with contextlib.suppress(ConnectionError):
                await resp.write_eof()
            return resp


async def proxy_upgrade(request: web.Request, where: Location) -> web.StreamResponse:
    """Join the client's WebSocket to the kubelet's. Anything but a WebSocket upgrade (SPDY)
    is refused: this server speaks no SPDY."""
    assert where.url is not None  # streaming subresources always have a node
    if request.headers.get("Upgrade", "").lower() != "websocket":
        raise errors.bad_request("Upgrade request required: only WebSocket upgrades are served here")
    offered = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()]
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=_CONNECT_TIMEOUT)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        try:
            backend = await session.ws_connect(
                where.url.replace("https://", "wss://", 1), protocols=offered, ssl=False, max_msg_size=0
            )
        except aiohttp.WSServerHandshakeError as exc:
            raise _backend_error(exc.status, exc.message or "error upgrading connection") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise errors.ApiError(500, "InternalError", f"error dialing backend: {exc}") from exc
        async with backend:
            chosen = backend.protocol
            client = web.WebSocketResponse(protocols=(chosen,) if chosen else (), max_msg_size=0)
            await client.prepare(request)
            await _pump(client, backend)
            await client.close()
            return client


async def _pump(client: web.WebSocketResponse, backend: aiohttp.ClientWebSocketResponse) -> None:
    async def forward(src: Any, dst: Any) -> None:
        async for msg in src:
            if msg.type == aiohttp.WSMsgType.BINARY:
                await dst.send_bytes(msg.data)
            elif msg.type == aiohttp.WSMsgType.TEXT:
                await dst.send_str(msg.data)
        await dst.close()

    tasks = [asyncio.ensure_future(forward(client, backend)), asyncio.ensure_future(forward(backend, client))]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
