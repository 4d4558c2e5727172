"""Plain SPDY/3.1 upgrades of the kubelet server: what kube-apiserver opens to a kubelet.

- `upgrade(request, protocols)` answers `Upgrade: SPDY/3.1` with 101 and the chosen
  `X-Stream-Protocol-Version`, then hands the raw connection over as a `Pipe` (bytes in through
  aiohttp's parser hook, out through the transport).
- `remote_command(pipe, ...)` serves exec and attach as the kubelet's SPDY remotecommand server:
  the client opens one stream per `streamtype` (error, stdin, stdout, stderr, resize), each
  answered with SYN_REPLY; once the expected ones are there, `run(stdin)` gives the output,
  written to stdout/stderr, and the status goes on the error stream (a JSON Status from v4 on).
- `port_forward(pipe, answer)` serves kubectl's port-forward: a pair of streams (error, data)
  per connection, the data's request answered by `answer(port, head)`, then both closed.

Called by `kubeletserver.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Protocol

import aiohttp
from aiohttp import web

from kcm_simulator import spdy

# An exec's streams arrive right after the upgrade; a client that never opens them is dropped.
STREAMS_TIMEOUT = 30.0
MAX_STREAMS = 4096
MAX_STDIN = 1 << 20
MAX_REQUEST_HEAD = 64 << 10


class Wire(Protocol):
    """A byte stream carrying SPDY: `recv()` (b"" at the end), `send(data)`, `close()`."""

    async def recv(self) -> bytes: ...
    async def send(self, data: bytes) -> None: ...
    def close(self) -> None: ...


class WebSocketWire:
    """kubectl's tunnel: SPDY bytes in a WebSocket's binary messages."""

    def __init__(self, ws: web.WebSocketResponse) -> None:
        self._ws = ws

    async def recv(self) -> bytes:
        async for msg in self._ws:
            if msg.type == aiohttp.WSMsgType.BINARY and msg.data:
                return bytes(msg.data)
        return b""

    async def send(self, data: bytes) -> None:
        await self._ws.send_bytes(data)

    def close(self) -> None:
        pass  # the handler closes the WebSocket


class Pipe:
    """An upgraded connection's bytes."""

    def __init__(self, request: web.Request) -> None:
        self._queue: asyncio.Queue[bytes] = asyncio.Queue()
        self._transport = request.transport
        request.protocol.set_parser(self)  # type: ignore[arg-type]  # any feed_data/feed_eof will do

    # aiohttp's parser hook
    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        self._queue.put_nowait(bytes(data))
        return False, b""

    def feed_eof(self) -> None:
        self._queue.put_nowait(b"")

    async def recv(self) -> bytes:
        return await self._queue.get()

    async def send(self, data: bytes) -> None:
        if self._transport is None or self._transport.is_closing():
            raise ConnectionResetError("connection closed")
        self._transport.write(data)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


def chosen_protocol(request: web.Request, supported: tuple[str, ...]) -> str | None:
    offered = [
        p.strip()
        for value in request.headers.getall("X-Stream-Protocol-Version", [])
        for p in value.split(",")
    ]
    return next((p for p in offered if p in supported), None)


async def upgrade(request: web.Request, protocol: str) -> tuple[web.StreamResponse, Pipe]:
    """The 101 answer (for the handler to return) and the connection's bytes."""
    headers = {"Connection": "Upgrade", "Upgrade": "SPDY/3.1", "X-Stream-Protocol-Version": protocol}
    resp = web.StreamResponse(status=101, headers=headers)
    await resp.prepare(request)
    return resp, Pipe(request)


class _Streams:
    """The client's streams by id and by type, and frames read ahead while waiting for them."""

    def __init__(self, pipe: Wire) -> None:
        self.pipe = pipe
        self.session = spdy.Session()
        self.by_type: dict[str, int] = {}
        self.stdin = b""
        self.stdin_closed = False
        self.gone = False

    async def pump_once(self) -> None:
        data = await self.pipe.recv()
        if not data:
            self.gone = True
            return
        for frame in self.session.feed(data):
            if isinstance(frame, spdy.SynStream):
                kind = (frame.headers.get("streamtype") or [""])[0]
                if len(self.by_type) < MAX_STREAMS:
                    self.by_type[kind] = frame.stream_id
                await self.pipe.send(self.session.syn_reply(frame.stream_id))
            elif isinstance(frame, spdy.Data) and frame.stream_id == self.by_type.get("stdin"):
                self.stdin = (self.stdin + frame.data)[:MAX_STDIN]
                self.stdin_closed = self.stdin_closed or frame.fin
            elif isinstance(frame, spdy.Ping):
                await self.pipe.send(self.session.ping(frame.ping_id))
            elif isinstance(frame, spdy.Reset) and frame.stream_id == self.by_type.get("stdin"):
                self.stdin_closed = True
            elif isinstance(frame, spdy.GoAway):
                self.gone = True

    async def send(self, kind: str, data: bytes, fin: bool = False) -> None:
        stream_id = self.by_type.get(kind)
        if stream_id is not None and (data or fin):
            await self.pipe.send(self.session.data(stream_id, data, fin))


Writer = Callable[[bytes], Awaitable[None]]


async def remote_command(
    pipe: Wire,
    *,
    wanted: set[str],
    read_stdin: bool,
    run: Callable[[bytes, Writer], Awaitable[tuple[bytes, bytes]]],
) -> None:
    """Serve one exec or attach: `wanted` stream types must open (error always), stdin is read to
    its end when `read_stdin`, then `run(stdin, write_stdout)` writes the output and gives
    (stderr, status)."""
    streams = _Streams(pipe)
    needed = wanted | {"error"}
    try:
        async with asyncio.timeout(STREAMS_TIMEOUT):
            while not needed <= set(streams.by_type) and not streams.gone:
                await streams.pump_once()
        while read_stdin and not streams.stdin_closed and not streams.gone:
            await streams.pump_once()
        if streams.gone:
            return

        async def write_stdout(data: bytes) -> None:
            await streams.send("stdout", data)

        err, status = await run(streams.stdin, write_stdout)
        await streams.send("stderr", err)
        await streams.send("error", status)
        for kind in ("stdout", "stderr", "error"):
            await streams.send(kind, b"", fin=True)
    except (TimeoutError, ConnectionError, spdy.SpdyError):
        pass
    finally:
        pipe.close()


async def port_forward(pipe: Wire, answer: Callable[[int, bytes], bytes]) -> None:
    """kubectl's port-forward, tunnelled or through kube-apiserver: see the module docstring."""
    session = spdy.Session()
    kinds: dict[int, tuple[str, str, str]] = {}  # stream id -> (type, request id, port)
    errors_of: dict[str, int] = {}
    heads: dict[int, bytes] = {}
    with contextlib.suppress(ConnectionError, spdy.SpdyError):
        while data := await pipe.recv():
            for frame in session.feed(data):
                if isinstance(frame, spdy.SynStream):
                    first = {k: v[0] if v else "" for k, v in frame.headers.items()}
                    kind, request_id = first.get("streamtype", ""), first.get("requestid", "")
                    if len(kinds) >= MAX_STREAMS:
                        await pipe.send(session.reset(frame.stream_id))
                        continue
                    kinds[frame.stream_id] = (kind, request_id, first.get("port", ""))
                    await pipe.send(session.syn_reply(frame.stream_id))
                    if kind == "error":
                        errors_of[request_id] = frame.stream_id
                elif isinstance(frame, spdy.Data) and frame.stream_id in kinds:
                    kind, request_id, port = kinds[frame.stream_id]
                    if kind != "data":
                        continue  # an error stream's data, or a connection answered already
                    head = (heads.get(frame.stream_id, b"") + frame.data)[:MAX_REQUEST_HEAD]
                    heads[frame.stream_id] = head
                    if b"\r\n\r\n" not in head and b"\n\n" not in head and len(head) < MAX_REQUEST_HEAD:
                        continue
                    del heads[frame.stream_id]
                    await pipe.send(
                        session.data(frame.stream_id, answer(int(port) if port.isdigit() else 0, head))
                    )
                    await pipe.send(session.data(frame.stream_id, b"", fin=True))
                    if request_id in errors_of:
                        await pipe.send(session.data(errors_of.pop(request_id), b"", fin=True))
                    kinds[frame.stream_id] = ("done", request_id, port)
                elif isinstance(frame, spdy.Ping):
                    await pipe.send(session.ping(frame.ping_id))
                elif isinstance(frame, spdy.Reset):
                    kinds.pop(frame.stream_id, None)
                    heads.pop(frame.stream_id, None)
                elif isinstance(frame, spdy.GoAway):
                    break
    pipe.close()
