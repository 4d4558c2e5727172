"""exec/attach and port-forward over SPDY streams (kcm_simulator.spdyserve), with a scripted wire."""

from __future__ import annotations

import asyncio
import struct
import zlib

from kcm_simulator import spdy, spdyserve


class ScriptedWire:
    """Sends the client's bytes in the given pieces, then ends; records what the server sends."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = list(pieces)
        self.sent = b""
        self.closed = False

    async def recv(self) -> bytes:
        return self.pieces.pop(0) if self.pieces else b""

    async def send(self, data: bytes) -> None:
        self.sent += data

    def close(self) -> None:
        self.closed = True


class Client:
    def __init__(self) -> None:
        self.deflate = zlib.compressobj(zdict=spdy.DICTIONARY)

    def syn(self, stream_id: int, **headers: str) -> bytes:
        raw = struct.pack(">I", len(headers))
        for k, v in headers.items():
            raw += struct.pack(">I", len(k)) + k.encode() + struct.pack(">I", len(v)) + v.encode()
        block = self.deflate.compress(raw) + self.deflate.flush(zlib.Z_SYNC_FLUSH)
        payload = struct.pack(">IIH", stream_id, 0, 0) + block
        return struct.pack(">HHI", 0x8003, spdy.SYN_STREAM, len(payload)) + payload


def server_frames(sent: bytes) -> list[tuple[int, int, bytes, bool]]:
    """(kind: 0 data / 2 reply, stream, data, fin) of what the server wrote."""
    out = []
    while sent:
        first, second = struct.unpack(">II", sent[:8])
        length = second & 0xFFFFFF
        payload, sent = sent[8 : 8 + length], sent[8 + length :]
        if first & 0x80000000:
            out.append((first & 0xFFFF, struct.unpack(">I", payload[:4])[0], b"", False))
        else:
            out.append((0, first, payload, bool(second >> 24)))
    return out


def test_an_exec_reads_stdin_to_its_end_then_writes_output_and_status() -> None:
    client = Client()
    wire = ScriptedWire(
        [
            client.syn(1, streamtype="error") + client.syn(3, streamtype="stdin"),
            client.syn(5, streamtype="stdout") + spdy.Session.data(3, b"typed"),
            spdy.Session.data(3, b"!", fin=True),
        ]
    )
    seen: list[bytes] = []

    async def run(stdin: bytes, write: spdyserve.Writer) -> tuple[bytes, bytes]:
        seen.append(stdin)
        await write(stdin.upper())
        return b"", b'{"status":"Success"}'

    asyncio.run(spdyserve.remote_command(wire, wanted={"stdin", "stdout"}, read_stdin=True, run=run))
    assert seen == [b"typed!"]
    frames = server_frames(wire.sent)
    assert [f[:2] for f in frames[:3]] == [(spdy.SYN_REPLY, 1), (spdy.SYN_REPLY, 3), (spdy.SYN_REPLY, 5)]
    assert (0, 5, b"TYPED!", False) in frames and (0, 1, b'{"status":"Success"}', False) in frames
    assert (0, 5, b"", True) in frames and (0, 1, b"", True) in frames
    assert wire.closed


def test_a_client_that_goes_before_its_streams_open_runs_nothing() -> None:
    wire = ScriptedWire([Client().syn(1, streamtype="error")])

    async def run(stdin: bytes, write: spdyserve.Writer) -> tuple[bytes, bytes]:
        raise AssertionError("ran")

    asyncio.run(spdyserve.remote_command(wire, wanted={"stdout"}, read_stdin=False, run=run))
    assert wire.closed


def test_port_forward_answers_each_connection_and_closes_its_streams() -> None:
    client = Client()
    wire = ScriptedWire(
        [
            client.syn(1, streamtype="error", port="80", requestid="0")
            + client.syn(3, streamtype="data", port="80", requestid="0"),
            spdy.Session.data(3, b"GET / HTTP/1.1\r\n"),
            spdy.Session.data(3, b"\r\n") + struct.pack(">HHII", 0x8003, spdy.PING, 4, 9),
        ]
    )
    asyncio.run(
        spdyserve.port_forward(wire, lambda port, head: f"{port} {head.split()[0].decode()}".encode())
    )
    frames = server_frames(wire.sent)
    assert (0, 3, b"80 GET", False) in frames
    assert (0, 3, b"", True) in frames and (0, 1, b"", True) in frames
    assert (spdy.PING, 9, b"", False) in frames
