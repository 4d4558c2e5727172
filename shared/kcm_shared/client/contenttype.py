"""`--kube-api-content-type`: which media type `KubeClient` asks for, and reading what comes back.

- `ContentType(value)` takes the flag's value: `application/json` or
  `application/vnd.kubernetes.protobuf` (anything else: ValueError, as client-go finds no
  serializer for it). With protobuf, reads (GET, list, watch) of built-in objects ask for it
  with `Accept: application/vnd.kubernetes.protobuf, application/json`, as client-go does; a
  server that cannot serve a resource as protobuf answers JSON, and that is read as JSON.
  Custom resources, aggregated APIs and subresources other than status and scale always ask
  for JSON: kcm's field table (`kcm_shared.apimachinery.protobuf`) knows only built-in types.
- Whatever arrives, callers see JSON: `json_body` turns a protobuf body into the JSON bytes of
  the same object (`obj_body`: into the dict, for error bodies), and `WatchFrames` turns kube-apiserver's
  length-delimited watch frames into the JSON lines a JSON watch would have carried. The
  watcher publishes those bytes onto NATS unchanged and controllers decode their msgspec views
  from them, so nothing past the client knows which media type was used.
- Writes and patches stay JSON whatever the flag says (docs/flags.md "API content type").
- `BODIES` counts response bodies and watch events read, by media type.
- Used by `kcm_shared.client.kubeclient` only.
"""

from __future__ import annotations

from typing import Any

import msgspec
import prometheus_client

from kcm_shared.apimachinery import protobuf

JSON = "application/json"
PROTOBUF = protobuf.CONTENT_TYPE
CHOICES = (JSON, PROTOBUF)
_ASK_PROTOBUF = f"{PROTOBUF}, {JSON}"
# The subresources whose answers are objects of the field table; logs, proxies and the like
# answer other media types.
_OBJECT_SUBRESOURCES = frozenset({"status", "scale"})
# A watch frame longer than this is refused rather than buffered: kube-apiserver's own limit
# on a request body is 3 MiB and etcd's on a value 1.5 MiB; objects are smaller.
MAX_FRAME = 16 * 1024 * 1024

BODIES = prometheus_client.Counter(
    "kcm_kube_api_bodies",
    "Response bodies and watch events read from the API server, by media type.",
    ["content_type"],
)
# Bound once: every response counts here, and `labels()` is a locked lookup each call.
_JSON_BODIES = BODIES.labels(JSON)
_PROTOBUF_BODIES = BODIES.labels(PROTOBUF)
_encode = msgspec.json.Encoder().encode


class ContentType:
    """Which media type reads ask for, path by path."""

    def __init__(self, value: str = JSON) -> None:
        if value not in CHOICES:
            raise ValueError(f"unsupported content type {value!r}: use one of {', '.join(CHOICES)}")
        self.value = value

    def accept(self, method: str, path: str) -> str:
        """The Accept header of a request: protobuf first only for reads of built-in objects."""
        if self.value == PROTOBUF and method == "GET" and _built_in_object_path(path):
            return _ASK_PROTOBUF
        return JSON


def _built_in_object_path(path: str) -> bool:
    parts = path.split("/")[1:]
    if parts[:1] == ["api"] and len(parts) >= 2:
        api_version, rest = parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        api_version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
    else:
        return False
    if not protobuf.knows(api_version):
        return False
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]  # a namespaced resource; `namespaces/<name>` alone is the Namespace
    return 1 <= len(rest) <= 2 or (len(rest) == 3 and rest[2] in _OBJECT_SUBRESOURCES)


def _media_type(header: str) -> str:
    return header.split(";", 1)[0].strip().lower()


def is_protobuf(content_type_header: str) -> bool:
    return _media_type(content_type_header) == PROTOBUF


def obj_body(content_type_header: str, body: bytes) -> Any:
    """A response body as the JSON-form value it stands for; ProtobufError or msgspec.DecodeError
    when it cannot be read."""
    if is_protobuf(content_type_header):
        _PROTOBUF_BODIES.inc()
        return protobuf.decode(body)
    _JSON_BODIES.inc()
    return msgspec.json.decode(body)


def json_body(content_type_header: str, body: bytes) -> bytes:
    """A response body as JSON bytes: as sent when it is JSON, converted when it is protobuf."""
    if is_protobuf(content_type_header):
        _PROTOBUF_BODIES.inc()
        return _encode(protobuf.decode(body))
    if body:
        _JSON_BODIES.inc()
    return body


class WatchFrames:
    """A protobuf watch stream, fed chunk by chunk, as JSON event lines."""

    def __init__(self) -> None:
        self._partial = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        """The events completed by `chunk`, each as one JSON line (no newline); ProtobufError on
        a frame that cannot be read."""
        frames, self._partial = protobuf.split_frames(self._partial + chunk, MAX_FRAME)
        if frames:
            _PROTOBUF_BODIES.inc(len(frames))
        return [_encode(protobuf.decode_watch_event(frame)) for frame in frames]
