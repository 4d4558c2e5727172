"""SPDY/3.1 framing (kcm_simulator.spdy): what kubectl's port-forward streams send, and the replies."""

from __future__ import annotations

import struct
import zlib

import pytest
from kcm_simulator import spdy


def header_block(compressor: zlib._Compress, headers: dict[str, str]) -> bytes:
    raw = struct.pack(">I", len(headers))
    for name, value in headers.items():
        raw += struct.pack(">I", len(name)) + name.encode() + struct.pack(">I", len(value)) + value.encode()
    return compressor.compress(raw) + compressor.flush(zlib.Z_SYNC_FLUSH)


def syn_stream(compressor: zlib._Compress, stream_id: int, headers: dict[str, str]) -> bytes:
    payload = struct.pack(">IIH", stream_id, 0, 0) + header_block(compressor, headers)
    return struct.pack(">HHI", 0x8003, spdy.SYN_STREAM, len(payload)) + payload


def test_the_dictionary_is_the_specs() -> None:
    assert len(spdy.DICTIONARY) == 1423
    assert spdy.DICTIONARY.startswith(b"\x00\x00\x00\x07options\x00\x00\x00\x04head")
    assert spdy.DICTIONARY.endswith(b"charset=iso-8859-1,utf-,*,enq=0.")


def test_streams_headers_data_and_pings_are_read_across_split_input() -> None:
    client = zlib.compressobj(zdict=spdy.DICTIONARY)
    wire = syn_stream(client, 1, {"streamtype": "error", "port": "80", "requestid": "0"})
    # The second block relies on the first one's compression context, as on a real connection.
    wire += syn_stream(client, 3, {"streamtype": "data", "port": "80", "requestid": "0"})
    wire += spdy.Session.data(3, b"GET / HTTP/1.1\r\n\r\n", fin=True)
    wire += struct.pack(">HHII", 0x8003, spdy.PING, 4, 7)
    wire += struct.pack(">HHIII", 0x8003, spdy.WINDOW_UPDATE, 8, 3, 100)  # skipped
    session = spdy.Session()
    frames = session.feed(wire[:5]) + session.feed(wire[5:40]) + session.feed(wire[40:])
    assert frames == [
        spdy.SynStream(1, {"streamtype": ["error"], "port": ["80"], "requestid": ["0"]}, False),
        spdy.SynStream(3, {"streamtype": ["data"], "port": ["80"], "requestid": ["0"]}, False),
        spdy.Data(3, b"GET / HTTP/1.1\r\n\r\n", True),
        spdy.Ping(7),
    ]


def test_replies_decode_with_the_dictionary() -> None:
    session = spdy.Session()
    frame = session.syn_reply(5, {"X-Stream-Protocol-Version": "v4"})
    first, second = struct.unpack(">II", frame[:8])
    assert (first >> 16, first & 0xFFFF, second & 0xFFFFFF) == (0x8003, spdy.SYN_REPLY, len(frame) - 8)
    assert struct.unpack(">I", frame[8:12])[0] == 5
    raw = zlib.decompressobj(zdict=spdy.DICTIONARY).decompress(frame[12:])
    assert raw == struct.pack(">I", 1) + b"\x00\x00\x00\x19x-stream-protocol-version\x00\x00\x00\x02v4"
    assert spdy.Session.data(5, b"hi", fin=True) == b"\x00\x00\x00\x05\x01\x00\x00\x02hi"
    assert session.ping(9)[8:] == b"\x00\x00\x00\x09"


@pytest.mark.parametrize(
    "wire",
    [
        struct.pack(">HHI", 0x8002, spdy.PING, 4) + b"\0\0\0\1",  # SPDY/2
        struct.pack(">II", 1, spdy.MAX_FRAME + 1),  # too big
        struct.pack(">HHI", 0x8003, spdy.SYN_STREAM, 12) + b"\0\0\0\1\0\0\0\0\0\0garb",  # not zlib
    ],
)
def test_malformed_streams_are_refused(wire: bytes) -> None:
    with pytest.raises(spdy.SpdyError):
        spdy.Session().feed(wire)
