"""Decode Kubernetes protobuf bodies into the dict the same object would be as JSON.

- `decode(body)`: a whole body (request or response; objects, lists, metav1.Status).
- `decode_watch_event(frame)` and `split_frames(buffer, limit)`: a watch stream's frames.
- `knows(api_version)`: whether the field table covers that group version.
- Callers: the embedded API server (kubectl's typed clients, `kubectl create
  configmap|deployment|secret|token|...`, send built-in objects as
  `application/vnd.kubernetes.protobuf`) and `kcm_shared.client.contenttype` (kcm's reads under
  `--kube-api-content-type=application/vnd.kubernetes.protobuf`). Both see ordinary JSON-form
  objects from then on.

A body is the 4-byte magic `k8s\\x00` and a `runtime.Unknown` message whose typeMeta names the
kind and whose `raw` holds the object's own message. Messages are read with the field table in
`kcm_shared/proto_schema.json` (made by tools/gen_proto_schema.py from kubectl's own descriptors and Go
types), which also says how Go's JSON encoder would treat each field: its JSON name, whether a
zero value is left out, whether an absent field shows as null, and which structs are inlined.
A few apimachinery types have their own JSON form (Time, Quantity, IntOrString, ...) and are
converted here.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Any, NamedTuple

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

# Field flags written by tools/gen_proto_schema.py.
FLAG_REPEATED = 1
FLAG_INLINE = 2
FLAG_OMIT_ZERO = 4
FLAG_NULL_IF_ABSENT = 8

_META = "k8s.io.apimachinery.pkg.apis.meta.v1"
_WATCH_EVENT = f"{_META}.WatchEvent"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class ProtobufError(ValueError):
    """The body is not a Kubernetes protobuf object this server can read."""


class _Field(NamedTuple):
    json_name: str
    type: str  # scalar name, message name, or "map"
    flags: int
    key_type: str = ""
    value_type: str = ""


class _Message(NamedTuple):
    fields: dict[int, _Field]
    null_if_absent: tuple[str, ...]


def _load_schema() -> tuple[dict[str, str], frozenset[str], dict[str, _Message]]:
    raw = json.loads(resources.files("kcm_shared").joinpath("proto_schema.json").read_text())
    messages = {}
    for name, table in raw["messages"].items():
        fields = {int(number): _Field(*entry) for number, entry in table.items()}
        absent = tuple(f.json_name for f in fields.values() if f.flags & FLAG_NULL_IF_ABSENT)
        messages[name] = _Message(fields, absent)
    return raw["kinds"], frozenset(raw["wrappers"]), messages


_KINDS, _WRAPPERS, _MESSAGES = _load_schema()


# --- wire format ----------------------------------------------------------------------------------


def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while pos < end:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
    raise ProtobufError("truncated varint")


def _length(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Start and end of a length-delimited value whose length prefix is at pos."""
    size, pos = _varint(buf, pos, end)
    if pos + size > end:
        raise ProtobufError("truncated length-delimited field")
    return pos, pos + size


def _skip(buf: bytes, pos: int, wire: int, end: int) -> int:
    if wire == 0:
        return _varint(buf, pos, end)[1]
    if wire == 2:
        return _length(buf, pos, end)[1]
    if wire in (1, 5):
        pos += 8 if wire == 1 else 4
        if pos > end:
            raise ProtobufError("truncated fixed-width field")
        return pos
    raise ProtobufError(f"unsupported wire type {wire}")


def _signed(value: int) -> int:
    # int32 and int64 are sent as 64-bit two's complement varints.
    return value - (1 << 64) if value >= 1 << 63 else value


_VARINT_SCALARS: dict[str, Callable[[int], Any]] = {
    "int32": _signed,
    "int64": _signed,
    "uint32": int,
    "uint64": int,
    "bool": bool,
}
_FIXED_SCALARS = {"double": ("<d", 1), "float": ("<f", 5)}


def _scalar(buf: bytes, pos: int, wire: int, end: int, type_name: str) -> tuple[Any, int]:
    convert = _VARINT_SCALARS.get(type_name)
    if convert is not None and wire == 0:
        value, pos = _varint(buf, pos, end)
        return convert(value), pos
    if type_name in _FIXED_SCALARS and wire == _FIXED_SCALARS[type_name][1]:
        fmt = _FIXED_SCALARS[type_name][0]
        size = struct.calcsize(fmt)
        if pos + size > end:
            raise ProtobufError("truncated fixed-width field")
        return struct.unpack_from(fmt, buf, pos)[0], pos + size
    if wire == 2 and type_name in ("string", "bytes"):
        start, stop = _length(buf, pos, end)
        if type_name == "bytes":
            return base64.b64encode(buf[start:stop]).decode("ascii"), stop
        try:
            return buf[start:stop].decode("utf-8"), stop
        except UnicodeDecodeError as err:
            raise ProtobufError(f"invalid UTF-8 in a string field: {err}") from None
    raise ProtobufError(f"wire type {wire} does not fit a {type_name} field")


def _raw_fields(buf: bytes, pos: int, end: int) -> dict[int, int | bytes]:
    """Last value of each field, varints as int and length-delimited as bytes, for the special types."""
    out: dict[int, int | bytes] = {}
    while pos < end:
        tag, pos = _varint(buf, pos, end)
        if tag & 7 == 0:
            out[tag >> 3], pos = _varint(buf, pos, end)
        elif tag & 7 == 2:
            start, pos = _length(buf, pos, end)
            out[tag >> 3] = buf[start:pos]
        else:
            pos = _skip(buf, pos, tag & 7, end)
    return out


# --- types with their own JSON form ----------------------------------------------------------------


def _int_field(fields: dict[int, int | bytes], number: int) -> int:
    value = fields.get(number, 0)
    return _signed(value) if isinstance(value, int) else 0


def _bytes_field(fields: dict[int, int | bytes], number: int) -> bytes:
    value = fields.get(number, b"")
    return value if isinstance(value, bytes) else b""


def _instant(fields: dict[int, int | bytes]) -> datetime | None:
    # An empty message is Go's zero time, which marshals to JSON null.
    if not fields:
        return None
    return _EPOCH + timedelta(seconds=_int_field(fields, 1), microseconds=_int_field(fields, 2) // 1000)


def _time(fields: dict[int, int | bytes]) -> str | None:
    t = _instant(fields)
    return None if t is None else _rfc3339(t, micro=False)


def _micro_time(fields: dict[int, int | bytes]) -> str | None:
    t = _instant(fields)
    return None if t is None else _rfc3339(t, micro=True)


def _rfc3339(t: datetime, *, micro: bool) -> str:
    text = f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}"
    return f"{text}.{t.microsecond:06d}Z" if micro else f"{text}Z"


def go_duration(ns: int) -> str:
    """Go's `time.Duration.String`: "1h0m0s", "1.5s", "300ms", "0s"."""
    if ns == 0:
        return "0s"
    sign, u = ("-", -ns) if ns < 0 else ("", ns)
    if u < 1_000_000_000:
        for limit, digits, unit in ((1_000, 0, "ns"), (1_000_000, 3, "µs"), (1_000_000_000, 6, "ms")):
            if u < limit:
                return f"{sign}{_decimal(u, digits)}{unit}"
    whole, seconds = divmod(u, 60_000_000_000)
    hours, minutes = divmod(whole, 60)
    text = f"{_decimal(seconds, 9)}s"
    if hours:
        text = f"{hours}h{minutes}m{text}"
    elif minutes:
        text = f"{minutes}m{text}"
    return sign + text


def _decimal(value: int, digits: int) -> str:
    """value / 10**digits without trailing zeros in the fraction."""
    if not digits:
        return str(value)
    whole, frac = divmod(value, 10**digits)
    frac_text = f"{frac:0{digits}d}".rstrip("0")
    return f"{whole}.{frac_text}" if frac_text else str(whole)


def _duration(fields: dict[int, int | bytes]) -> str:
    return go_duration(_int_field(fields, 1))


def _quantity(fields: dict[int, int | bytes]) -> str:
    return _bytes_field(fields, 1).decode("utf-8") or "0"


def _int_or_string(fields: dict[int, int | bytes]) -> int | str:
    if _int_field(fields, 1) == 1:
        return _bytes_field(fields, 3).decode("utf-8")
    return _int_field(fields, 2)


def _embedded_json(fields: dict[int, int | bytes]) -> Any:
    raw = _bytes_field(fields, 1)
    if not raw:
        return None
    if raw.startswith(MAGIC):
        return decode(raw)
    try:
        return json.loads(raw)
    except ValueError as err:
        raise ProtobufError(f"embedded object is not JSON: {err}") from None


_SPECIAL: dict[str, Callable[[dict[int, int | bytes]], Any]] = {
    f"{_META}.Time": _time,
    f"{_META}.MicroTime": _micro_time,
    f"{_META}.Duration": _duration,
    f"{_META}.FieldsV1": _embedded_json,
    "k8s.io.apimachinery.pkg.runtime.RawExtension": _embedded_json,
    "k8s.io.apimachinery.pkg.api.resource.Quantity": _quantity,
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": _int_or_string,
}


# --- messages -----------------------------------------------------------------------------------


def _value(buf: bytes, pos: int, wire: int, end: int, type_name: str) -> tuple[Any, int]:
    if type_name in _MESSAGES:
        if wire != 2:
            raise ProtobufError(f"wire type {wire} does not fit message {type_name}")
        start, stop = _length(buf, pos, end)
        return _message(buf, start, stop, type_name), stop
    return _scalar(buf, pos, wire, end, type_name)


def _map_entry(buf: bytes, pos: int, end: int, f: _Field) -> tuple[Any, Any]:
    key: Any = None
    value: Any = None
    while pos < end:
        tag, pos = _varint(buf, pos, end)
        if tag >> 3 == 1:
            key, pos = _value(buf, pos, tag & 7, end, f.key_type)
        elif tag >> 3 == 2:
            value, pos = _value(buf, pos, tag & 7, end, f.value_type)
        else:
            pos = _skip(buf, pos, tag & 7, end)
    if key is None:
        key = _zero(f.key_type)
    if value is None:
        value = _zero(f.value_type)
    return key, value


def _zero(type_name: str) -> Any:
    if type_name in _MESSAGES:
        return _message(b"", 0, 0, type_name)
    return {"string": "", "bytes": "", "bool": False, "double": 0.0, "float": 0.0}.get(type_name, 0)


def _packed(buf: bytes, pos: int, end: int, type_name: str) -> list[Any]:
    wire = 1 if type_name == "double" else 5 if type_name == "float" else 0
    items = []
    while pos < end:
        item, pos = _scalar(buf, pos, wire, end, type_name)
        items.append(item)
    return items


def _message(buf: bytes, pos: int, end: int, name: str) -> Any:
    special = _SPECIAL.get(name)
    if special is not None:
        return special(_raw_fields(buf, pos, end))
    msg = _MESSAGES[name]
    out: dict[str, Any] = {}
    while pos < end:
        tag, pos = _varint(buf, pos, end)
        wire = tag & 7
        f = msg.fields.get(tag >> 3)
        if f is None:
            pos = _skip(buf, pos, wire, end)
            continue
        if f.type == "map":
            start, pos = _length(buf, pos, end)
            key, value = _map_entry(buf, start, pos, f)
            out.setdefault(f.json_name, {})[key] = value
        elif f.flags & FLAG_REPEATED:
            items = out.setdefault(f.json_name, [])
            if wire == 2 and (f.type in _VARINT_SCALARS or f.type in _FIXED_SCALARS):
                start, pos = _length(buf, pos, end)
                items.extend(_packed(buf, start, pos, f.type))
            else:
                value, pos = _value(buf, pos, wire, end, f.type)
                items.append(value)
        else:
            value, pos = _value(buf, pos, wire, end, f.type)
            if f.flags & FLAG_INLINE:
                out.update(value)
            elif f.flags & FLAG_OMIT_ZERO and not value:
                # The last occurrence of a field wins, so a later zero undoes an earlier value.
                out.pop(f.json_name, None)
            else:
                out[f.json_name] = value
    for json_name in msg.null_if_absent:
        out.setdefault(json_name, None)
    if name in _WRAPPERS:
        return out.get("items") or []
    return out


def decode(body: bytes) -> dict[str, Any]:
    """The JSON form of a Kubernetes protobuf body, with apiVersion and kind from its envelope."""
    if not body.startswith(MAGIC):
        raise ProtobufError("not a Kubernetes protobuf body: missing the k8s\\x00 prefix")
    envelope = _raw_fields(body, len(MAGIC), len(body))
    type_meta = _raw_fields(*_whole(_bytes_field(envelope, 1)))
    api_version = _bytes_field(type_meta, 1).decode("utf-8", "replace")
    kind = _bytes_field(type_meta, 2).decode("utf-8", "replace")
    if _bytes_field(envelope, 3):
        raise ProtobufError(f"unsupported content encoding {_bytes_field(envelope, 3)!r}")
    name = _message_name(api_version, kind)
    obj = _message(*_whole(_bytes_field(envelope, 2)), name)
    if kind.endswith("List") and obj.get("items", []) is None:
        # An empty repeated field is absent on the wire; kube-apiserver's JSON lists say `[]`.
        obj["items"] = []
    # Go's JSON puts TypeMeta's kind before apiVersion.
    return {"kind": kind, "apiVersion": api_version, **obj}


def decode_watch_event(frame: bytes) -> dict[str, Any]:
    """One watch stream frame (a bare metav1.WatchEvent whose object is an embedded protobuf
    body) as the JSON line kube-apiserver would have sent: {"type": ..., "object": {...}}."""
    event = _message(frame, 0, len(frame), _WATCH_EVENT)
    if not isinstance(event.get("type"), str) or not isinstance(event.get("object"), dict):
        raise ProtobufError("a watch frame without an event type or object")
    return {"type": event["type"], "object": event["object"]}


def split_frames(buffer: bytes, limit: int) -> tuple[list[bytes], bytes]:
    """The whole frames at the start of `buffer` (each a 4-byte big-endian length and that many
    bytes: apimachinery's LengthDelimitedFramer) and the bytes of the next, incomplete one. A
    frame longer than `limit` raises ProtobufError rather than growing the buffer without end."""
    frames = []
    pos = 0
    while len(buffer) - pos >= 4:
        (size,) = struct.unpack_from(">I", buffer, pos)
        if size > limit:
            raise ProtobufError(f"a watch frame of {size} bytes, over the limit of {limit}")
        if len(buffer) - pos - 4 < size:
            break
        frames.append(buffer[pos + 4 : pos + 4 + size])
        pos += 4 + size
    return frames, buffer[pos:]


def knows(api_version: str) -> bool:
    """Whether the field table holds the built-in types of `api_version` ("v1", "apps/v1")."""
    return api_version in _KINDS


def _whole(buf: bytes) -> tuple[bytes, int, int]:
    return buf, 0, len(buf)


def _message_name(api_version: str, kind: str) -> str:
    package = _KINDS.get(api_version)
    if package is not None:
        # Option kinds such as DeleteOptions are registered in every group version.
        for candidate in (f"{package}.{kind}", f"{_META}.{kind}"):
            if candidate in _MESSAGES:
                return candidate
    raise ProtobufError(f"cannot decode protobuf for kind {kind!r} in {api_version!r}")
