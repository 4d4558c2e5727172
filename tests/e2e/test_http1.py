"""`kcm_shared.client.http1` against real sockets: a scripted HTTP/1.1 server answers each request
with bytes a test chooses, so framing, reuse and every failure mode are driven for real."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvloop
from kcm_shared.client import http1

from tests.conftest import self_signed_cert

Answer = Callable[[bytes], Awaitable[bytes | None]]  # request head -> raw response (None: hang)


def run(body: Coroutine[Any, Any, None]) -> None:
    uvloop.run(body)


@dataclass
class Server:
    """Answers requests in order with `answers`; counts connections and requests."""

    answers: list[Answer]
    close_after: set[int] = field(default_factory=set)  # close the connection after request N
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    writers: list[asyncio.StreamWriter] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                body = await reader.readexactly(length)
                self.requests.append(head + body)
                answer = await self.answers[len(self.requests) - 1](head)
                if answer is None:
                    await asyncio.Event().wait()  # never answers
                    return
                writer.write(answer)
                await writer.drain()
                if len(self.requests) in self.close_after:
                    return
        finally:
            writer.close()


def reply(raw: bytes) -> Answer:
    async def answer(_head: bytes) -> bytes:
        return raw

    return answer


def ok(body: bytes, *extra: str) -> Answer:
    headers = "".join(f"{h}\r\n" for h in extra)
    return reply(f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{headers}\r\n".encode() + body)


async def until(predicate: Callable[[], bool], within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


async def serve(server: Server, tls: ssl.SSLContext | None = None) -> tuple[asyncio.Server, str]:
    srv = await asyncio.start_server(server.handle, "127.0.0.1", 0, ssl=tls)
    port = srv.sockets[0].getsockname()[1]
    return srv, f"{'https' if tls else 'http'}://127.0.0.1:{port}"


def test_keep_alive_reuses_one_connection_and_sends_what_it_was_given() -> None:
    async def body() -> None:
        server = Server([ok(b'{"n":%d}' % i) for i in range(5)])
        srv, url = await serve(server)
        client = http1.Client(url + "/prefix", headers={"Authorization": "Bearer t"})
        try:
            for i in range(5):
                resp = await client.request(
                    "POST",
                    "/api/v1/pods",
                    params={"a": "b c"},
                    body=b"{}",
                    headers={"Content-Type": "application/json"},
                )
                assert (resp.status, resp.body) == (200, b'{"n":%d}' % i)
            assert server.connections == 1
            first = server.requests[0]
            assert first.startswith(b"POST /prefix/api/v1/pods?a=b+c HTTP/1.1\r\n")
            for header in (
                b"Authorization: Bearer t",
                b"Content-Type: application/json",
                b"Content-Length: 2",
                b"Host: 127.0.0.1:",
            ):
                assert header in first
            assert first.endswith(b"\r\n\r\n{}")
        finally:
            await client.close()
            srv.close()

    run(body())


def test_chunked_bodies_with_extensions_and_trailers_are_joined() -> None:
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\nabcd\r\n3\r\nefg\r\n0\r\nX-Trailer: y\r\n\r\n"

    async def body() -> None:
        server = Server([reply(chunked), ok(b"next")])
        srv, url = await serve(server)
        client = http1.Client(url)
        try:
            assert (await client.request("GET", "/")).body == b"abcdefg"
            assert (await client.request("GET", "/")).body == b"next", "the trailers were not left behind"
            assert server.connections == 1
        finally:
            await client.close()
            srv.close()

    run(body())


def test_connection_close_bodies_to_eof_and_no_body_statuses() -> None:
    async def body() -> None:
        server = Server(
            [
                ok(b"bye", "Connection: close"),
                reply(b"HTTP/1.1 204 No Content\r\n\r\n"),
                reply(b"HTTP/1.0 200 OK\r\n\r\nuntil the end"),
                ok(b"fresh"),
            ],
            close_after={1, 3},
        )
        srv, url = await serve(server)
        client = http1.Client(url)
        try:
            assert (await client.request("GET", "/")).body == b"bye"
            resp = await client.request("DELETE", "/")
            assert (resp.status, resp.body) == (204, b"")
            assert (await client.request("GET", "/")).body == b"until the end"
            assert (await client.request("GET", "/")).body == b"fresh"
            assert server.connections == 3
        finally:
            await client.close()
            srv.close()

    run(body())


def test_an_idle_connection_the_server_closed_is_not_reused() -> None:
    async def body() -> None:
        server = Server([ok(b"one"), ok(b"two")])
        srv, url = await serve(server)
        client = http1.Client(url)
        try:
            assert (await client.request("POST", "/", body=b"x")).body == b"one"
            server.writers[0].close()  # the server's idle timeout
            await until(lambda: all(not conn.usable() for conn in client._idle))
            assert (await client.request("POST", "/", body=b"y")).body == b"two"
            assert server.connections == 2
            assert len(server.requests) == 2, "no request may be sent twice"
        finally:
            await client.close()
            srv.close()

    run(body())


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"garbage\r\n\r\n", "not an HTTP/1.x response"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "malformed response header"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "in the middle of a response"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", "malformed Content-Length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "malformed chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n", "malformed chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1" * 70_000, "malformed chunk size"),
        (b"HTTP/1.1 200 OK\r\n", "closed the connection before answering"),
        # Two framings that disagree: which one is believed decides where the next response
        # starts, so neither is.
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "malformed"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 5\r\n\r\nhello", "malformed"),
        (b"HTTP/1.1 200 OK\r\nX: a\x00b\r\nContent-Length: 0\r\n\r\n", "malformed response header"),
        (b"HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n", "not an HTTP/1.x response"),
    ],
)
def test_broken_responses_raise_connection_error_and_the_connection_is_dropped(
    raw: bytes, message: str
) -> None:
    async def body() -> None:
        server = Server([reply(raw), ok(b"recovered")], close_after={1})
        srv, url = await serve(server)
        client = http1.Client(url)
        try:
            with pytest.raises(ConnectionError, match=message):
                await client.request("GET", "/")
            assert (await client.request("GET", "/")).body == b"recovered"
            assert server.connections == 2
        finally:
            await client.close()
            srv.close()

    run(body())


def test_a_request_without_an_answer_times_out_and_the_next_one_works() -> None:
    async def hang(_head: bytes) -> None:
        return None

    async def body() -> None:
        server = Server([hang, ok(b"fine")])
        srv, url = await serve(server)
        client = http1.Client(url, timeout=0.5)
        try:
            started = time.monotonic()
            with pytest.raises(TimeoutError):
                await client.request("GET", "/")
            assert time.monotonic() - started < 5
            assert (await client.request("GET", "/")).body == b"fine"
            assert server.connections == 2
        finally:
            await client.close()
            srv.close()

    run(body())


def test_an_unreachable_server_is_a_connection_error() -> None:
    async def body() -> None:
        srv, url = await serve(Server([]))
        srv.close()
        await srv.wait_closed()
        client = http1.Client(url)
        with pytest.raises(ConnectionError, match="cannot connect"):
            await client.request("GET", "/")
        await client.close()

    run(body())


def test_https_with_the_servers_ca(tmp_path: Path) -> None:
    cert, key = self_signed_cert(tmp_path)
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)

    async def body() -> None:
        server = Server([ok(b"secure"), ok(b"again")])
        srv, url = await serve(server, server_tls)
        trusting = http1.Client(url, ssl_context=ssl.create_default_context(cafile=str(cert)))
        untrusting = http1.Client(url, ssl_context=True)
        unverifying = http1.Client(url, ssl_context=False)
        try:
            assert (await trusting.request("GET", "/")).body == b"secure"
            with pytest.raises(ConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
                await untrusting.request("GET", "/")
            assert (await unverifying.request("GET", "/")).body == b"again", "False: as aiohttp's ssl=False"
        finally:
            await trusting.close()
            await untrusting.close()
            await unverifying.close()
            srv.close()

    run(body())


SMUGGLED = "x HTTP/1.1\r\nHost: h\r\n\r\nDELETE /api/v1/namespaces/ns/configmaps/victim"


@pytest.mark.parametrize(
    ("method", "path", "params", "headers"),
    [
        ("GET", "/api/v1/namespaces/ns/configmaps/" + SMUGGLED, None, None),
        ("GET", "/a\nb", None, None),
        ("GET", "/a\x00b", None, None),
        ("GET", "/a b", None, None),
        ("GET", "/é", None, None),
        ("GET /x HTTP/1.1\r\n", "/", None, None),
        ("GET", "/", None, {"X-Trace": "v\r\nDELETE / HTTP/1.1"}),
        ("GET", "/", None, {"X-Trace": "v\x00"}),
        ("GET", "/", None, {"Bad Name": "v"}),
        ("GET", "/", None, {"X\r\nY": "v"}),
    ],
)
def test_a_request_that_would_split_the_message_is_refused_and_nothing_is_sent(
    method: str, path: str, params: dict[str, str] | None, headers: dict[str, str] | None
) -> None:
    async def body() -> None:
        server = Server([ok(b"fine")])
        srv, url = await serve(server)
        client = http1.Client(url)
        try:
            with pytest.raises(ValueError, match="refusing to send"):
                await client.request(method, path, params=params, headers=headers)
            assert server.connections == 0 and server.requests == []
            # Query values are encoded, never refused: CR/LF there is data.
            assert (await client.request("GET", "/", params={"q": SMUGGLED})).body == b"fine"
            assert len(server.requests) == 1
            assert server.requests[0].startswith(b"GET /?q=x+HTTP%2F1.1%0D%0AHost%3A+h%0D%0A")
        finally:
            await client.close()
            srv.close()

    run(body())


def test_fixed_headers_with_cr_or_lf_are_refused_when_the_client_is_made() -> None:
    with pytest.raises(ValueError, match="CR, LF or NUL"):
        http1.Client("http://127.0.0.1:1", headers={"Authorization": "Bearer t\r\nX-Admin: yes"})


def test_bytes_after_a_complete_response_are_never_read_as_the_next_response() -> None:
    """A server (or something between) that sends a second response nobody asked for must not
    have it taken as the answer to the next request: the connection is dropped instead."""
    smuggled = (
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil"
    )

    async def body() -> None:
        server = Server([reply(smuggled), ok(b"real")])
        srv, url = await serve(server)
        client = http1.Client(url)
        try:
            assert (await client.request("GET", "/")).body == b"ok"
            assert (await client.request("GET", "/")).body == b"real"
            assert server.connections == 2
        finally:
            await client.close()
            srv.close()

    run(body())


def test_at_most_limit_requests_are_in_flight_and_the_rest_wait_their_turn() -> None:
    class Counting(Server):
        in_flight = 0
        most = 0

    async def body() -> None:
        release = asyncio.Event()

        async def held(_head: bytes) -> bytes:
            server.in_flight += 1
            server.most = max(server.most, server.in_flight)
            await release.wait()
            server.in_flight -= 1
            return b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

        count = http1.DEFAULT_LIMIT + 8
        server = Counting([held] * count)
        srv, url = await serve(server)
        client = http1.Client(url)
        try:
            calls = [asyncio.ensure_future(client.request("GET", "/")) for _ in range(count)]
            await until(lambda: server.in_flight == http1.DEFAULT_LIMIT)
            await asyncio.sleep(0.1)  # the other requests had their chance to go out too
            assert server.connections == http1.DEFAULT_LIMIT
            release.set()
            assert all(r.body == b"ok" for r in await asyncio.gather(*calls))
            assert server.most == http1.DEFAULT_LIMIT
            assert len(server.requests) == count
        finally:
            await client.close()
            srv.close()

    run(body())
