"""The simulated kubelets' streaming server: logs, exec, attach and port-forward, over HTTPS.

- One server per simulator process serves all its nodes, routed by path as upstream's kubelet
  server: `GET /containerLogs/<ns>/<pod>/<container>`, `/exec/<ns>/<pod>/<container>`,
  `/attach/<ns>/<pod>/<container>` (WebSocket upgrades, `wschannel`) and
  `/portForward/<ns>/<pod>`. Every Node registers its address and this port
  (`daemonEndpoints.kubeletEndpoint.Port`), so an API server proxies the pod subresources here.
- Only pods bound to one of this simulator's nodes are served; others answer 404.
- Logs and attach show `containerlog.lines`; exec runs `shell`; port-forward answers every
  connection with a tiny HTTP response naming the pod and port (docs/simulator.md).
- HTTPS with a self-signed certificate made at start (an API server does not verify a
  kubelet's certificate unless told to). With `client_ca` only clients with a certificate it
  signed are served, as a kubelet with `--client-ca-file` and no anonymous auth.

Started by `main.py`; the work per connection is bounded (stdin and request sizes below).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
from aiohttp import web
from kcm_shared.bus.secure import certs

from kcm_simulator import containerlog, shell, spdy, spdyserve, wschannel
from kcm_simulator.podbook import PodBook

Obj = dict[str, Any]
log = logging.getLogger("kcm.sim.kubeletserver")
# What an exec'd command may read from stdin, and a port-forwarded request's head, at most.
MAX_STDIN = 1 << 20
MAX_REQUEST_HEAD = 64 << 10
MAX_PORTS = 64
HANGUP_CHECK = 5.0


def _plain(status: int, text: str) -> web.Response:
    return web.Response(status=status, text=text + "\n", content_type="text/plain")


def _flag(query: Any, *names: str) -> bool:
    return any(query.get(n) in ("1", "true", "True") for n in names)


class KubeletServer:
    def __init__(self, book: PodBook, serves: Callable[[str], bool]) -> None:
        """`serves(node_name)` says whether a node is one of this simulator's."""
        self._book = book
        self._serves = serves
        self.app = web.Application()
        self.app.router.add_get("/containerLogs/{ns}/{pod}/{container}", self.logs)
        for verb in ("exec", "attach"):
            handler = self.exec if verb == "exec" else self.attach
            self.app.router.add_route("*", f"/{verb}/{{ns}}/{{pod}}/{{container}}", handler)
            self.app.router.add_route("*", f"/{verb}/{{ns}}/{{pod}}/{{uid}}/{{container}}", handler)
        self.app.router.add_route("*", "/portForward/{ns}/{pod}", self.port_forward)
        self.app.router.add_route("*", "/portForward/{ns}/{pod}/{uid}", self.port_forward)

    def _pod(self, request: web.Request) -> Obj:
        ns, name = request.match_info["ns"], request.match_info["pod"]
        pod = self._book.get(ns, name)
        if pod is None or not self._serves((pod.get("spec") or {}).get("nodeName", "")):
            raise web.HTTPNotFound(text=f"pod {ns}/{name} not found\n")
        uid = request.match_info.get("uid")
        if uid and uid != (pod.get("metadata") or {}).get("uid"):
            raise web.HTTPNotFound(text=f"pod {ns}/{name} with uid {uid} not found\n")
        return pod

    def _container(self, request: web.Request, pod: Obj) -> Obj:
        name = request.match_info["container"]
        spec = containerlog.container_spec(pod, name)
        if spec is None:
            raise web.HTTPNotFound(text=f"container {name} not found in pod {request.match_info['pod']}\n")
        return spec

    # -- logs -------------------------------------------------------------------------------

    async def logs(self, request: web.Request) -> web.StreamResponse:
        pod = self._pod(request)
        container = request.match_info["container"]
        try:
            opts = containerlog.Options.parse(request.query)
            run = containerlog.lines(pod, container, opts.previous)
        except containerlog.LogError as exc:
            return _plain(400, str(exc))
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await resp.prepare(request)
        budget = opts.limit_bytes

        async def write(lines: list[containerlog.Line]) -> bool:
            nonlocal budget
            for line in lines:
                data = opts.format(line)
                if budget is not None:
                    data = data[:budget]
                    budget -= len(data)
                await resp.write(data)
                if budget == 0:
                    return False
            return True

        more = await write(opts.select(run, dt.datetime.now(dt.UTC)))
        if more and opts.follow and not opts.previous:
            async for new in self._follow(request, container, run, len(run)):
                if not await write(new):
                    break
        await resp.write_eof()
        return resp

    async def _follow(
        self,
        request: web.Request,
        container: str,
        run: list[containerlog.Line],
        sent: int,
        hangup: asyncio.Future[None] | None = None,
    ) -> AsyncIterator[list[containerlog.Line]]:
        """The lines of the run `run` past the first `sent`, as the pod's status adds them, until
        its container stops, a new run begins, the pod goes, or `hangup` (the client) is done."""
        names = request.match_info["ns"], request.match_info["pod"]
        while (hangup is None or not hangup.done()) and not _gone(request):
            changed = self._book.changed()
            pod = self._book.get(*names)
            if pod is None:
                return
            try:
                current = containerlog.lines(pod, container)
            except containerlog.LogError:
                return
            if current[:1] != run[:1]:
                return  # a new run began: the one followed has ended
            if current[sent:]:
                yield current[sent:]
            sent = max(sent, len(current))
            if not containerlog.is_running(pod, container):
                return
            waiter: asyncio.Future[Any] = asyncio.ensure_future(changed.wait())
            waiting: set[asyncio.Future[Any]] = {waiter} if hangup is None else {waiter, hangup}
            # Woken now and then to notice a client that hung up while nothing changed.
            await asyncio.wait(waiting, timeout=HANGUP_CHECK, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()

    # -- exec -------------------------------------------------------------------------------

    async def _upgrade(self, request: web.Request, protocols: tuple[str, ...]) -> web.WebSocketResponse:
        if request.headers.get("Upgrade", "").lower() != "websocket":
            # SPDY upgrades were dispatched to `spdyserve` before: this is no upgrade at all.
            raise web.HTTPBadRequest(text="Upgrade request required (WebSocket or SPDY/3.1)\n")
        ws = web.WebSocketResponse(protocols=protocols, max_msg_size=MAX_STDIN)
        await ws.prepare(request)
        return ws

    async def exec(self, request: web.Request) -> web.StreamResponse:
        pod = self._pod(request)
        spec = self._container(request, pod)
        q = request.query
        argv = q.getall("command", [])
        tty, stdin = _flag(q, "tty"), _flag(q, "input", "stdin")
        name = request.match_info["container"]
        if not containerlog.is_running(pod, name):
            return _plain(400, f"container {name} is not running in pod {request.match_info['pod']}")
        box = shell.Container.of(pod, spec, dt.datetime.now(dt.UTC))
        if _is_spdy(request):
            reads = stdin and shell.reads_stdin(argv)

            async def run(data: bytes, write: spdyserve.Writer) -> tuple[bytes, bytes]:
                out, err, status, _ = _exec_result(box, argv, data, tty)
                await write(out)
                return err, status

            return await self._spdy_command(request, q, run, reads)
        ws = await self._upgrade(request, wschannel.EXEC_PROTOCOLS)
        protocol = ws.ws_protocol or "channel.k8s.io"
        try:
            if stdin and tty and shell.reads_stdin(argv) and argv[0].rsplit("/", 1)[-1] != "cat":
                await self._interactive(ws, box, protocol)
                return ws
            data = await self._read_stdin(ws) if stdin and shell.reads_stdin(argv) else b""
            out, err, status, text = _exec_result(box, argv, data, tty)
            if out:
                await ws.send_bytes(wschannel.frame(wschannel.STDOUT, out))
            if err:
                await ws.send_bytes(wschannel.frame(wschannel.STDERR, err))
            await self._finish(ws, protocol, status, text)
        except (ConnectionError, aiohttp.ClientError):
            log.debug("exec client went away")
        finally:
            await ws.close()
        return ws

    async def _spdy_command(
        self,
        request: web.Request,
        query: Any,
        run: Callable[[bytes, spdyserve.Writer], Awaitable[tuple[bytes, bytes]]],
        read_stdin: bool,
    ) -> web.StreamResponse:
        """Exec or attach over a plain SPDY upgrade (kube-apiserver's, v4 and older)."""
        protocol = spdyserve.chosen_protocol(request, wschannel.EXEC_PROTOCOLS[1:])
        if protocol is None:
            return _plain(400, "no supported X-Stream-Protocol-Version")
        wanted = {"stdin"} if _flag(query, "input", "stdin") else set()
        wanted |= {"stdout"} if _flag(query, "output", "stdout") else set()
        wanted |= {"stderr"} if _flag(query, "error", "stderr") and not _flag(query, "tty") else set()
        resp, pipe = await spdyserve.upgrade(request, protocol)
        await spdyserve.remote_command(pipe, wanted=wanted, read_stdin=read_stdin, run=run)
        return resp

    async def _finish(self, ws: web.WebSocketResponse, protocol: str, status: bytes, text: str) -> None:
        if wschannel.structured_status(protocol):
            await ws.send_bytes(wschannel.frame(wschannel.ERROR, status))
        elif text:
            await ws.send_bytes(wschannel.frame(wschannel.ERROR, text.encode()))

    async def _read_stdin(self, ws: web.WebSocketResponse) -> bytes:
        """Stdin until the client closes it (v5's close signal) or the connection."""
        data = b""
        async for msg in ws:
            if msg.type != aiohttp.WSMsgType.BINARY or not msg.data:
                continue
            channel, payload = msg.data[0], msg.data[1:]
            if channel == wschannel.CLOSE and payload[:1] == bytes([wschannel.STDIN]):
                break
            if channel == wschannel.STDIN:
                data += payload
                if len(data) > MAX_STDIN:
                    break
        return data[:MAX_STDIN]

    async def _interactive(self, ws: web.WebSocketResponse, box: shell.Container, protocol: str) -> None:
        """`kubectl exec -it pod -- sh`: a prompt, typed characters echoed as a terminal does,
        and each line run as it is entered, until `exit` or the client hangs up."""
        prompt = b"/ # "
        await ws.send_bytes(wschannel.frame(wschannel.STDOUT, prompt))
        line = b""
        async for msg in ws:
            if msg.type != aiohttp.WSMsgType.BINARY or not msg.data or msg.data[0] != wschannel.STDIN:
                continue
            for byte in msg.data[1:]:
                char = bytes([byte])
                if char in (b"\r", b"\n"):
                    await ws.send_bytes(wschannel.frame(wschannel.STDOUT, b"\r\n"))
                    text = line.decode(errors="replace")
                    line = b""
                    result = box.script(text)
                    if text.split(maxsplit=1)[:1] == ["exit"]:
                        code = result.code
                        status = wschannel.success() if code == 0 else wschannel.exit_status(["sh"], code)
                        await self._finish(ws, protocol, status, "")
                        return
                    out = (result.stdout + result.stderr).replace(b"\n", b"\r\n")
                    await ws.send_bytes(wschannel.frame(wschannel.STDOUT, out + prompt))
                elif char in (b"\x7f", b"\x08"):
                    if line:
                        line = line[:-1]
                        await ws.send_bytes(wschannel.frame(wschannel.STDOUT, b"\b \b"))
                elif char == b"\x04" and not line:  # Ctrl-D on an empty line ends the shell
                    await self._finish(ws, protocol, wschannel.success(), "")
                    return
                elif len(line) < MAX_REQUEST_HEAD:
                    line += char
                    await ws.send_bytes(wschannel.frame(wschannel.STDOUT, char))

    # -- attach -----------------------------------------------------------------------------

    async def attach(self, request: web.Request) -> web.StreamResponse:
        pod = self._pod(request)
        self._container(request, pod)
        name = request.match_info["container"]
        try:
            containerlog.check(pod, name, previous=False)
        except containerlog.LogError as exc:
            return _plain(400, str(exc))
        if _is_spdy(request):

            async def follow(_: bytes, write: spdyserve.Writer) -> tuple[bytes, bytes]:
                run = containerlog.lines(pod, name)
                async for new in self._follow(request, name, run, 0):
                    await write(b"".join(containerlog.Options().format(ln) for ln in new))
                return b"", wschannel.success()

            return await self._spdy_command(request, request.query, follow, False)
        ws = await self._upgrade(request, wschannel.EXEC_PROTOCOLS)
        protocol = ws.ws_protocol or "channel.k8s.io"
        # The client's input is read (and dropped) so that its hang-up is seen at once.
        reader = asyncio.ensure_future(self._drain(ws))
        try:
            run = containerlog.lines(pod, name)
            async for new in self._follow(request, name, run, 0, hangup=reader):
                text = b"".join(containerlog.Options().format(ln) for ln in new)
                await ws.send_bytes(wschannel.frame(wschannel.STDOUT, text))
            if not reader.done():
                await self._finish(ws, protocol, wschannel.success(), "")
        except (ConnectionError, aiohttp.ClientError):
            log.debug("attach client went away")
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            await ws.close()
        return ws

    @staticmethod
    async def _drain(ws: web.WebSocketResponse) -> None:
        async for _ in ws:
            pass

    # -- port-forward -----------------------------------------------------------------------

    @staticmethod
    def _answer(meta: Obj) -> Callable[[int, bytes], bytes]:
        namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        return lambda port, head: http_answer(namespace, name, port, head)

    async def port_forward(self, request: web.Request) -> web.StreamResponse:
        pod = self._pod(request)
        meta = pod.get("metadata") or {}
        offered = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",")]
        if _is_spdy(request):
            protocol = spdyserve.chosen_protocol(request, ("portforward.k8s.io",))
            if protocol is None:
                return _plain(400, "no supported X-Stream-Protocol-Version (portforward.k8s.io)")
            resp, pipe = await spdyserve.upgrade(request, protocol)
            await spdyserve.port_forward(pipe, self._answer(meta))
            return resp
        if wschannel.SPDY_TUNNEL in offered:
            # kubectl's: the ports come in each stream's headers.
            ws = await self._upgrade(request, (wschannel.SPDY_TUNNEL,))
            try:
                await spdyserve.port_forward(spdyserve.WebSocketWire(ws), self._answer(meta))
            except (ConnectionError, aiohttp.ClientError, spdy.SpdyError) as exc:
                log.debug("port-forward stream ended: %s", exc)
            finally:
                await ws.close()
            return ws
        ports: list[int] = []
        for text in request.query.getall("port", []) + request.query.getall("ports", []):
            for part in text.split(","):
                try:
                    port = int(part)
                except ValueError:
                    port = 0
                if not 0 < port < 65536:
                    return _plain(400, f"invalid port {part!r}")
                ports.append(port)
        if not ports or len(ports) > MAX_PORTS:
            return _plain(400, f"from 1 to {MAX_PORTS} ports must be given")
        ws = await self._upgrade(request, wschannel.PORT_FORWARD_PROTOCOLS)
        heads = [b""] * len(ports)
        answered: set[int] = set()
        try:
            for i, port in enumerate(ports):
                await ws.send_bytes(wschannel.frame(2 * i, wschannel.port_header(port)))
                await ws.send_bytes(wschannel.frame(2 * i + 1, wschannel.port_header(port)))
            async for msg in ws:
                if msg.type != aiohttp.WSMsgType.BINARY or not msg.data:
                    continue
                channel, payload = msg.data[0], msg.data[1:]
                i = channel // 2
                if channel % 2 or i >= len(ports) or i in answered:
                    continue
                heads[i] = (heads[i] + payload)[:MAX_REQUEST_HEAD]
                if (
                    b"\r\n\r\n" not in heads[i]
                    and b"\n\n" not in heads[i]
                    and len(heads[i]) < MAX_REQUEST_HEAD
                ):
                    continue
                body = http_answer(meta.get("namespace", ""), meta.get("name", ""), ports[i], heads[i])
                await ws.send_bytes(wschannel.frame(2 * i, body))
                answered.add(i)
                # Each port carries one connection, which the responder closes after answering.
                if len(answered) == len(ports):
                    break
        except (ConnectionError, aiohttp.ClientError):
            log.debug("port-forward client went away")
        finally:
            await ws.close()
        return ws


def _exec_result(
    box: shell.Container, argv: list[str], stdin: bytes, tty: bool
) -> tuple[bytes, bytes, bytes, str]:
    """An exec's stdout, stderr, its Status (v4 on) and the plain text older protocols show."""
    try:
        result = box.run(argv, stdin)
    except shell.NotFound as exc:
        message = (
            "error executing command in container: failed to exec in container: failed to start "
            f'exec "sim": OCI runtime exec failed: exec failed: unable to start container '
            f"process: {exc}: unknown"
        )
        return b"", b"", wschannel.internal_error(message), message
    out, err = result.stdout, result.stderr
    if tty:  # a terminal has one output stream and ends lines with CR LF
        out = (out + err).replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        err = b""
    if result.code == 0:
        return out, err, wschannel.success(), ""
    text = f"command terminated with non-zero exit code: exit code {result.code}"
    return out, err, wschannel.exit_status(argv, result.code), text


def _gone(request: web.Request) -> bool:
    return request.transport is None or request.transport.is_closing()


def _is_spdy(request: web.Request) -> bool:
    return request.headers.get("Upgrade", "").lower().startswith("spdy/")


def http_answer(namespace: str, name: str, port: int, head: bytes) -> bytes:
    """The port-forward responder's reply: 200 with the pod and port for any request (a HEAD
    gets the headers only), closing the connection."""
    first = head.split(b"\r\n", 1)[0].split(b"\n", 1)[0]
    method = first.split(b" ", 1)[0]
    body = f"pod {namespace}/{name} port {port}\n".encode()
    lines = [
        b"HTTP/1.1 200 OK",
        b"Content-Type: text/plain; charset=utf-8",
        b"Content-Length: " + str(len(body)).encode(),
        b"Connection: close",
        b"",
        b"",
    ]
    return b"\r\n".join(lines) + (b"" if method == b"HEAD" else body)


def _context(client_ca: bytes) -> ssl.SSLContext:
    pair = certs.self_signed("localhost", "127.0.0.1")
    ctx = certs.server_context(pair, "", [], client_ca)
    if client_ca.strip():
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


async def start(
    server: KubeletServer, host: str, port: int, client_ca: bytes = b""
) -> tuple[web.AppRunner, int]:
    """Serve on host:port (0: any free port); returns the runner to clean up and the bound port."""
    ctx = await asyncio.to_thread(_context, client_ca)
    runner = web.AppRunner(server.app, access_log=None, handle_signals=False)
    await runner.setup()
    sock = socket.socket()
    sock.bind((host, port))
    await web.SockSite(runner, sock, ssl_context=ctx).start()
    return runner, int(sock.getsockname()[1])
