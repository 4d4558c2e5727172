"""A small HTTP/1.1 client for API calls: keep-alive connections, one request each at a time.

`KubeClient` sends every request that is not a watch through this. A controller that creates
pods by the hundred spends most of its CPU on requests, and a general client (aiohttp: about
0.22 ms of CPU per POST on this machine) costs several times what a request/response over a
kept-alive connection needs. This does only that: one write per request, the status line and
headers read with one `readuntil`, the body by Content-Length or chunked encoding.

Errors: `TimeoutError` when a request outlives its timeout; `ConnectionError` (an OSError)
when the server cannot be reached, closes the connection or answers with something that is
not HTTP/1.x. A request is never sent twice: a connection the server closed while idle is
noticed before it is reused (its end of stream has arrived), and a close that races with a
request fails that request, as it does in other clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

MAX_HEADER_BYTES = 64 * 1024
_NO_BODY_STATUSES = (204, 304)
_HEX_DIGITS = b"0123456789abcdefABCDEF"


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: dict[str, str]  # names lower-cased; a repeated header keeps its last value
    body: bytes


def _tls(setting: ssl.SSLContext | bool) -> ssl.SSLContext:
    """The context for `setting`, read as aiohttp reads its `ssl` argument (which the watches
    use): a context as given, True to verify with the system's CAs, False not to verify."""
    if isinstance(setting, ssl.SSLContext):
        return setting
    context = ssl.create_default_context()
    if not setting:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def usable(self) -> bool:
        return not (self.writer.is_closing() or self.reader.at_eof())

    def close(self) -> None:
        self.writer.close()


class Client:
    """Requests to one server (`http://` or `https://` URL), at most `limit` at once, each
    given up after `timeout` seconds (waiting for a free slot included)."""

    def __init__(
        self,
        base_url: str,
        *,
        headers: Mapping[str, str] | None = None,
        ssl_context: ssl.SSLContext | bool = True,
        limit: int = 100,
        timeout: float = 30.0,
    ) -> None:
        url = urllib.parse.urlsplit(base_url)
        if url.scheme not in ("http", "https"):
            raise ValueError(f"unsupported URL scheme in {base_url!r}")
        self._host = url.hostname or "localhost"
        self._port = url.port or (443 if url.scheme == "https" else 80)
        self._prefix = url.path.rstrip("/")
        self._ssl: ssl.SSLContext | None = None
        if url.scheme == "https":
            self._ssl = _tls(ssl_context)
        host_header = url.netloc.rsplit("@", 1)[-1]
        fixed = {"Host": host_header, **(headers or {})}
        self._fixed = "".join(f"{name}: {value}\r\n" for name, value in fixed.items())
        self._idle: list[_Connection] = []
        self._slots = asyncio.Semaphore(limit)
        self._closed = False
        self._timeout = timeout

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        target = self._prefix + path
        if params:
            target += "?" + urllib.parse.urlencode(params)
        head = f"{method} {target} HTTP/1.1\r\n{self._fixed}"
        for name, value in (headers or {}).items():
            head += f"{name}: {value}\r\n"
        if body is not None or method in ("POST", "PUT", "PATCH"):
            head += f"Content-Length: {len(body or b'')}\r\n"
        message = (head + "\r\n").encode("latin-1") + (body or b"")
        async with self._slots, asyncio.timeout(self._timeout):
            conn = await self._connection()
            try:
                conn.writer.write(message)
                response, keep = await _read_response(conn.reader, method)
            except BaseException:
                conn.close()  # half a response may be left on it: never reuse
                raise
            if keep and not self._closed:
                self._idle.append(conn)
            else:
                conn.close()
            return response

    async def _connection(self) -> _Connection:
        while self._idle:
            conn = self._idle.pop()
            if conn.usable():
                return conn
            conn.close()
        if self._closed:
            raise ConnectionError("client closed")
        try:
            reader, writer = await asyncio.open_connection(
                self._host,
                self._port,
                ssl=self._ssl,
                server_hostname=self._host if self._ssl else None,
                limit=MAX_HEADER_BYTES,  # bounds what `readuntil` buffers looking for the headers' end
            )
        except OSError as exc:
            raise ConnectionError(f"cannot connect to {self._host}:{self._port}: {exc}") from exc
        return _Connection(reader, writer)

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        for conn in idle:
            with contextlib.suppress(OSError):
                await conn.writer.wait_closed()


async def _read_response(reader: asyncio.StreamReader, method: str) -> tuple[Response, bool]:
    """The response and whether the connection may carry another request."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        raise ConnectionError("the server closed the connection before answering") from exc
    except asyncio.LimitOverrunError as exc:
        raise ConnectionError("response headers too long") from exc
    lines = head[:-4].decode("latin-1").split("\r\n")
    status_line = lines[0].split(" ", 2)
    if len(status_line) < 2 or not status_line[0].startswith("HTTP/1.") or not status_line[1].isdigit():
        raise ConnectionError(f"not an HTTP/1.x response: {lines[0][:100]!r}")
    status = int(status_line[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise ConnectionError(f"malformed response header: {line[:100]!r}")
        headers[name.strip().lower()] = value.strip()
    keep = status_line[0] == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
    try:
        if method == "HEAD" or status in _NO_BODY_STATUSES or 100 <= status < 200:
            body = b""
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            body = await _read_chunked(reader)
        elif "content-length" in headers:
            length = headers["content-length"]
            if not length.isdigit():
                raise ConnectionError(f"malformed Content-Length: {length[:40]!r}")
            body = await reader.readexactly(int(length))
        else:
            body = await reader.read()  # delimited by the end of the connection
            keep = False
    except asyncio.IncompleteReadError as exc:
        raise ConnectionError("the server closed the connection in the middle of a response") from exc
    except asyncio.LimitOverrunError as exc:
        raise ConnectionError("malformed chunked body: a line longer than the buffer") from exc
    return Response(status, headers, body), keep


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size_text = size_line.split(b";", 1)[0].strip()
        # Hex digits only: int() would also take a sign, "0x" or underscores.
        if not size_text or size_text.strip(_HEX_DIGITS):
            raise ConnectionError(f"malformed chunk size: {size_text[:40]!r}")
        size = int(size_text, 16)
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass  # trailers: nothing here reads them
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        if await reader.readexactly(2) != b"\r\n":
            raise ConnectionError("malformed chunk: no CRLF after its data")
