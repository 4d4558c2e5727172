"""SPDY/3.1 framing, the little of it Kubernetes' streaming protocols use, server side.

Why our own: kubectl tunnels SPDY inside its port-forward WebSocket (`SPDY/3.1+portforward.k8s.io`)
and kube-apiserver speaks it to kubelets, and no maintained Python library implements SPDY
(it was retired for HTTP/2 in 2016).

- `Session.feed(data)` parses the frames in a byte stream (a WebSocket's binary messages
  concatenated, or an upgraded connection): SYN_STREAM (with its zlib-compressed header block,
  one inflate context per connection, primed with the spec's dictionary), DATA, RST_STREAM,
  PING, GOAWAY; SETTINGS, WINDOW_UPDATE and HEADERS are read and skipped (the payloads here are
  tiny: no flow control is kept).
- `Session.syn_reply`, `data`, `ping` encode the server's frames (one deflate context).
- Frame and header sizes are bounded; a malformed stream raises `SpdyError`.

Pure; called by `kubeletserver.py`.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

# The SPDY/3 header compression dictionary (draft-mbelshe-httpbis-spdy-00, section 2.6.10.1):
# the length-prefixed words, then the text.
_HEADER_WORDS = (
    "options",
    "head",
    "post",
    "put",
    "delete",
    "trace",
    "accept",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "accept-ranges",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "connection",
    "content-base",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-md5",
    "content-range",
    "content-type",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "location",
    "max-forwards",
    "pragma",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "retry-after",
    "server",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "vary",
    "via",
    "warning",
    "www-authenticate",
    "method",
    "get",
    "status",
    "200 OK",
    "version",
    "HTTP/1.1",
    "url",
    "public",
    "set-cookie",
    "keep-alive",
    "origin",
)
_HEADER_TEXT = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Una"
    "uthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service"
    " UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, "
    "Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,application/xml,applicat"
    "ion/xhtml+xml,text/plain,text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf"
    "-8charset=iso-8859-1,utf-,*,enq=0."
)
DICTIONARY = b"".join(struct.pack(">I", len(w)) + w.encode() for w in _HEADER_WORDS) + _HEADER_TEXT.encode()

VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
FLAG_FIN = 0x01
# Frames (data or control) and inflated header blocks bigger than this end the session.
MAX_FRAME = 1 << 20
MAX_HEADERS = 64 << 10
RST_CANCEL = 5


class SpdyError(Exception):
    pass


@dataclass(frozen=True)
class SynStream:
    stream_id: int
    headers: dict[str, list[str]]
    fin: bool


@dataclass(frozen=True)
class Data:
    stream_id: int
    data: bytes
    fin: bool


@dataclass(frozen=True)
class Ping:
    ping_id: int


@dataclass(frozen=True)
class Reset:
    stream_id: int


@dataclass(frozen=True)
class GoAway:
    pass


Frame = SynStream | Data | Ping | Reset | GoAway


@dataclass
class Session:
    _buffer: bytes = b""
    _inflate: zlib._Decompress = field(default_factory=lambda: zlib.decompressobj(zdict=DICTIONARY))
    _deflate: zlib._Compress = field(default_factory=lambda: zlib.compressobj(zdict=DICTIONARY))

    # -- reading ----------------------------------------------------------------------------

    def feed(self, data: bytes) -> list[Frame]:
        """The whole frames `data` completes, in order; the rest waits for more."""
        self._buffer += data
        frames: list[Frame] = []
        while len(self._buffer) >= 8:
            first, second = struct.unpack(">II", self._buffer[:8])
            length = second & 0xFFFFFF
            if length > MAX_FRAME:
                raise SpdyError(f"frame of {length} bytes")
            if len(self._buffer) < 8 + length:
                break
            payload, flags = self._buffer[8 : 8 + length], second >> 24
            self._buffer = self._buffer[8 + length :]
            if first & 0x80000000:
                frame = self._control((first >> 16) & 0x7FFF, first & 0xFFFF, flags, payload)
                if frame is not None:
                    frames.append(frame)
            else:
                frames.append(Data(first & 0x7FFFFFFF, payload, bool(flags & FLAG_FIN)))
        return frames

    def _control(self, version: int, kind: int, flags: int, payload: bytes) -> Frame | None:
        if version != VERSION:
            raise SpdyError(f"SPDY version {version}")
        if kind == SYN_STREAM:
            if len(payload) < 10:
                raise SpdyError("short SYN_STREAM")
            stream_id = struct.unpack(">I", payload[:4])[0] & 0x7FFFFFFF
            return SynStream(stream_id, self._headers(payload[10:]), bool(flags & FLAG_FIN))
        if kind == HEADERS and len(payload) >= 4:
            self._headers(payload[4:])  # keeps the inflate context in step
            return None
        if kind == RST_STREAM and len(payload) >= 8:
            return Reset(struct.unpack(">I", payload[:4])[0] & 0x7FFFFFFF)
        if kind == PING and len(payload) >= 4:
            return Ping(struct.unpack(">I", payload[:4])[0])
        if kind == GOAWAY:
            return GoAway()
        return None  # SETTINGS, WINDOW_UPDATE, and what a server may ignore

    def _headers(self, block: bytes) -> dict[str, list[str]]:
        try:
            raw = self._inflate.decompress(block, MAX_HEADERS)
        except zlib.error as exc:
            raise SpdyError(f"header block: {exc}") from exc
        if self._inflate.unconsumed_tail:
            raise SpdyError("header block too large")
        headers: dict[str, list[str]] = {}
        try:
            (count,), at = struct.unpack(">I", raw[:4]), 4
            for _ in range(count):
                (n,) = struct.unpack(">I", raw[at : at + 4])
                name, at = raw[at + 4 : at + 4 + n].decode().lower(), at + 4 + n
                (n,) = struct.unpack(">I", raw[at : at + 4])
                value, at = raw[at + 4 : at + 4 + n].decode(), at + 4 + n
                headers.setdefault(name, []).extend(value.split("\0"))
        except (struct.error, UnicodeDecodeError) as exc:
            raise SpdyError(f"header block: {exc}") from exc
        return headers

    # -- writing ----------------------------------------------------------------------------

    @staticmethod
    def _control_frame(kind: int, flags: int, payload: bytes) -> bytes:
        return struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(payload)) + payload

    def syn_reply(self, stream_id: int, headers: dict[str, str] | None = None) -> bytes:
        items = sorted((headers or {}).items())
        raw = struct.pack(">I", len(items))
        for name, value in items:
            raw += struct.pack(">I", len(name)) + name.lower().encode()
            raw += struct.pack(">I", len(value.encode())) + value.encode()
        block = self._deflate.compress(raw) + self._deflate.flush(zlib.Z_SYNC_FLUSH)
        return self._control_frame(SYN_REPLY, 0, struct.pack(">I", stream_id) + block)

    @staticmethod
    def data(stream_id: int, payload: bytes, fin: bool = False) -> bytes:
        flags = FLAG_FIN if fin else 0
        return struct.pack(">II", stream_id & 0x7FFFFFFF, (flags << 24) | len(payload)) + payload

    def ping(self, ping_id: int) -> bytes:
        return self._control_frame(PING, 0, struct.pack(">I", ping_id))

    def reset(self, stream_id: int) -> bytes:
        return self._control_frame(RST_STREAM, 0, struct.pack(">II", stream_id, RST_CANCEL))
