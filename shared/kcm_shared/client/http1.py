"""A small HTTP/1.1 client for API calls: keep-alive connections, one request each at a time.

`KubeClient` sends every request that is not a watch through this. A controller that creates
pods by the hundred spends most of its CPU on requests, and a general client (aiohttp: about
0.22 ms of CPU per POST on this machine) costs several times what a request/response over a
kept-alive connection needs. This does only that: one write per request, and the response
parsed by llhttp (Node.js' HTTP parser, through `httptools`) as it arrives, so the framing
rules (Content-Length, chunked, read-to-close, conflicting or duplicate lengths) are those of
a maintained parser rather than our own.

Requests are refused (`ValueError`) before anything is sent when the method is not a token,
the target holds anything but visible ASCII (a CR/LF or space there would let a name end the
request line and start another request), or a header name or value holds CR, LF or NUL.
Callers build targets with `kcm_shared.client.kubeclient`'s encoding functions; this is the second
line of defence.

Errors: `TimeoutError` when a request outlives its timeout; `ConnectionError` (an OSError)
when the server cannot be reached, closes the connection or answers with something that is
not HTTP/1.x. A request is never sent twice: a connection the server closed while idle is
noticed before it is reused (its end of stream has arrived), and a close that races with a
request fails that request, as it does in other clients.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

import httptools

MAX_HEADER_BYTES = 64 * 1024
# Requests in flight (and so connections) per client. A burst beyond what the server answers
# at once only queues there, and every connection a burst opens costs the server a set-up:
# bench/statefulset_pods.py's 0 -> 300 burst (slow-start batches of up to 128) created its
# pods in 151-171 ms with 32, against 192-202 ms with 100, on the embedded API server.
DEFAULT_LIMIT = 32
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_FORBIDDEN_IN_HEADER = re.compile(r"[\r\n\x00]")


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


def check_target(target: str) -> None:
    """Raise ValueError unless `target` is visible ASCII only (what a request line may carry)."""
    if not (target.isascii() and target.isprintable()) or " " in target:
        raise ValueError(
            f"refusing to send request target {target!r}: it holds a space, a control or a non-ASCII "
            "character (build paths with kubeclient.resource_path, which percent-encodes them)"
        )


def check_header(name: str, value: str) -> None:
    """Raise ValueError when `name` is not a token or `value` holds CR, LF or NUL (either
    would let a value start a header or a request of its own)."""
    if not _TOKEN.fullmatch(name):
        raise ValueError(f"refusing to send header name {name!r}: not an HTTP token")
    if _FORBIDDEN_IN_HEADER.search(value):
        raise ValueError(f"refusing to send header {name}: its value holds CR, LF or NUL")


def header_lines(headers: Mapping[str, str]) -> str:
    """`headers` as request header lines, each checked by `check_header`."""
    lines = ""
    for name, value in headers.items():
        check_header(name, value)
        lines += f"{name}: {value}\r\n"
    return lines


def query_string(params: Mapping[str, str]) -> str:
    """`params` as a URL query (form encoding, as Go's url.Values.Encode): the one place a
    query is built, for these requests and for the watches' URLs."""
    return urllib.parse.urlencode(params)


class _Connection(asyncio.Protocol):
    """One kept-alive connection; llhttp parses what arrives while a request waits for it.

    llhttp keeps its state across messages, so one parser serves every response on the
    connection. Bytes that arrive while no request waits (or after its response ended) are
    not ours to read: the connection is dropped rather than reused.
    """

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._closed = False
        self._waiter: asyncio.Future[tuple[Response, bool]] | None = None
        self._head_only = False
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self._head_received = 0
        self._headers_done = False
        self._status_seen = False
        self._framed = False  # Content-Length or Transfer-Encoding: the end of stream is not the end

    # -- used by Client ---------------------------------------------------------------------

    def usable(self) -> bool:
        return not self._closed and self.transport is not None and not self.transport.is_closing()

    def close(self) -> None:
        self._closed = True
        if self.transport is not None:
            self.transport.close()

    def send(self, message: bytes, method: str) -> asyncio.Future[tuple[Response, bool]]:
        """Write the request; the future is its response and whether the connection may carry
        another request."""
        assert self.transport is not None and (self._waiter is None or self._waiter.done())
        self._waiter = asyncio.get_running_loop().create_future()
        self._head_only = method == "HEAD"
        self._begin()
        self.transport.write(message)
        return self._waiter

    # -- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._waiter.done():
            self.close()  # unsolicited bytes: nothing may be read from this connection again
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(ConnectionError("the server switched protocols, which nothing here asked for"))
        except httptools.HttpParserError as exc:
            self._fail(ConnectionError(self._describe(exc)))
        if not self._headers_done:
            self._head_received += len(data)
            if self._head_received > MAX_HEADER_BYTES:
                self._fail(ConnectionError("response headers too long"))

    def eof_received(self) -> bool:
        self._closed = True
        if self._waiter is not None and not self._waiter.done():
            if self._headers_done and not self._framed:
                self._finish(keep=False)  # a body delimited by the end of the connection
            elif self._headers_done:
                self._fail(ConnectionError("the server closed the connection in the middle of a response"))
            else:
                self._fail(ConnectionError("the server closed the connection before answering"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self._waiter is not None and not self._waiter.done():
            error = ConnectionError(f"connection lost: {exc or 'closed'}")
            error.__cause__ = exc
            self._fail(error)

    # -- llhttp callbacks ---------------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self._waiter is None or self._waiter.done():
            self.close()  # a second response to one request: the stream is out of step

    def on_status(self, _status: bytes) -> None:
        self._status_seen = True

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._headers_done:
            return  # chunked trailers: nothing here reads them
        key = name.decode("latin-1").lower()
        if key in ("content-length", "transfer-encoding"):
            self._framed = True
        self._headers[key] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self._headers_done = True
        version = self._parser.get_http_version()
        if version not in ("1.0", "1.1"):
            self._fail(ConnectionError(f"not an HTTP/1.x response (HTTP/{version})"))
        elif self._head_only and self._parser.get_status_code() >= 200:
            # The head is all of it; llhttp would wait for the body its Content-Length names,
            # so the parser (and with it the connection) cannot serve another response.
            self._finish(keep=False)

    def on_body(self, data: bytes) -> None:
        self._body.append(data)

    def on_message_complete(self) -> None:
        if self._waiter is None or self._waiter.done():
            return
        if 100 <= self._parser.get_status_code() < 200:
            self._begin()  # an interim answer; the final one follows on the same stream
            return
        self._finish(keep=self._parser.should_keep_alive())

    # -- internals -----------------------------------------------------------------------------

    def _begin(self) -> None:
        self._headers = {}
        self._body = []
        self._head_received = 0
        self._headers_done = self._status_seen = self._framed = False

    def _finish(self, *, keep: bool) -> None:
        assert self._waiter is not None
        response = Response(self._parser.get_status_code(), self._headers, b"".join(self._body))
        self._waiter.set_result((response, keep and not self._closed))

    def _fail(self, error: Exception) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(error)
        self.close()

    def _describe(self, exc: httptools.HttpParserError) -> str:
        reason = str(exc)
        if not self._status_seen:
            return f"not an HTTP/1.x response ({reason})"
        if not self._headers_done:
            if "content-length" in reason.lower():
                return f"malformed Content-Length ({reason})"
            return f"malformed response header ({reason})"
        if "chunk size" in reason.lower():
            return f"malformed chunk size ({reason})"
        return f"malformed response body ({reason})"


class Client:
    """Requests to one server (`http://` or `https://` URL), at most `limit` at once, each
    given up after `timeout` seconds (waiting for a free slot included)."""

    def __init__(
        self,
        base_url: str,
        *,
        headers: Mapping[str, str] | None = None,
        ssl_context: ssl.SSLContext | bool = True,
        limit: int = DEFAULT_LIMIT,
        timeout: float = 30.0,
    ) -> None:
        url = urllib.parse.urlsplit(base_url)
        if url.scheme not in ("http", "https"):
            raise ValueError(f"unsupported URL scheme in {base_url!r}")
        self._host = url.hostname or "localhost"
        self._port = url.port or (443 if url.scheme == "https" else 80)
        self._prefix = url.path.rstrip("/")
        check_target(self._prefix or "/")
        self._ssl: ssl.SSLContext | None = None
        if url.scheme == "https":
            self._ssl = _tls(ssl_context)
        host_header = url.netloc.rsplit("@", 1)[-1]
        self._fixed = header_lines({"Host": host_header, **(headers or {})})
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
        if not method.isalpha() or not method.isascii():
            raise ValueError(f"refusing to send method {method!r}: not an HTTP token")
        target = self._prefix + path
        if params:
            target += "?" + query_string(params)
        check_target(target)
        head = f"{method} {target} HTTP/1.1\r\n{self._fixed}"
        if headers:
            head += header_lines(headers)
        if body is not None or method in ("POST", "PUT", "PATCH"):
            head += f"Content-Length: {len(body or b'')}\r\n"
        message = (head + "\r\n").encode("ascii") + (body or b"")
        async with self._slots, asyncio.timeout(self._timeout):
            conn = await self._connection()
            try:
                response, keep = await conn.send(message, method)
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
            _, conn = await asyncio.get_running_loop().create_connection(
                _Connection,
                self._host,
                self._port,
                ssl=self._ssl,
                server_hostname=self._host if self._ssl else None,
            )
        except OSError as exc:
            raise ConnectionError(f"cannot connect to {self._host}:{self._port}: {exc}") from exc
        return conn

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
