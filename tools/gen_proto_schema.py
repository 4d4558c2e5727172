"""Generate kcm_shared/proto_schema.json, the field table of the built-in API's Go types.

`kcm_shared.apimachinery.protobuf` decodes protobuf bodies with it (the embedded API server's
request bodies, kcm's client's reads); `kcm_shared.apimachinery.apitypes` compares objects
as Go's typed semantic equality does (which fields are pointers, which zero values are absent).

How it was produced: `python tools/gen_proto_schema.py /usr/bin/kubectl` against kubectl v1.32.4,
the client whose protobuf request bodies the embedded API server has to read. That kubectl is
gcloud's dispatcher, which may run a kubectl.1.NN matching the server's reported minor version;
the server reports 1.32, and kubectl.1.32 yields the identical table (kubectl.1.33's only adds
fields). Nothing else calls this script; rerun it when moving to a newer kubectl and commit the
JSON it writes.

Why read the kubectl binary rather than upstream's `generated.proto` text: the binary holds both
halves the JSON form needs, for exactly the version that sends the bytes.

* Every Kubernetes `generated.pb.go` registers its `generated.proto` as a gzip-compressed
  `FileDescriptorProto`; those give message names, field numbers and wire types.
* Go's run-time type data keeps every API struct's fields with their Go kinds and struct tags.
  A field's `protobuf:"...,<number>,..."` tag ties it to the proto field, and its `json:"..."`
  tag and kind give what the proto cannot: the JSON name (inline structs such as
  `Volume.volumeSource` have none), whether a zero value is dropped (`omitempty` on a non-pointer),
  whether an absent field shows as `null` (a nil pointer, slice or map without `omitempty`),
  and whether the field is a pointer (absent and zero differ).

The Go layout read here is Go 1.23's (kubectl 1.32 and 1.33 are built with it): abi.Type is 48
bytes, a struct type's field slice is at +56 and its uncommon type at +80, a field is
{name, type, offset}. The script fails if it finds no Go struct for core/v1 ConfigMap.

Output shape (compact JSON):
  {"kinds": {"apps/v1": "k8s.io.api.apps.v1", ...},          # apiVersion -> proto package
   "wrappers": ["k8s.io.api.authentication.v1.ExtraValue", ...],  # named Go slices: JSON is `items`
   "messages": {"k8s.io.api.core.v1.ConfigMap": {"2": ["data", "map", 4, "string", "string"], ...}}}
A field is [jsonName, type, flags] or, for a map, [jsonName, "map", flags, keyType, valueType];
type is a scalar name ("string", "int32", ...) or a message's full name. Flags are the FLAG_*
constants of `kcm_shared.apimachinery.protobuf`.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import struct
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Must match the FLAG_* constants of kcm_shared.apimachinery.protobuf and
# kcm_shared.apimachinery.apitypes, which read this output.
FLAG_REPEATED = 1
FLAG_INLINE = 2
FLAG_OMIT_ZERO = 4
FLAG_NULL_IF_ABSENT = 8
FLAG_POINTER = 16

OUTPUT = Path(__file__).resolve().parent.parent / "shared/kcm_shared/proto_schema.json"

# Proto files whose messages are kept (plus whatever they import), with the API group each serves.
GROUPS = {
    "k8s.io/api/core/v1": "",
    "k8s.io/api/admission/v1": "admission.k8s.io",
    "k8s.io/api/admissionregistration/v1": "admissionregistration.k8s.io",
    "k8s.io/api/apidiscovery/v2": "apidiscovery.k8s.io",
    "k8s.io/api/apps/v1": "apps",
    "k8s.io/api/authentication/v1": "authentication.k8s.io",
    "k8s.io/api/authorization/v1": "authorization.k8s.io",
    "k8s.io/api/autoscaling/v1": "autoscaling",
    "k8s.io/api/autoscaling/v2": "autoscaling",
    "k8s.io/api/batch/v1": "batch",
    "k8s.io/api/certificates/v1": "certificates.k8s.io",
    "k8s.io/api/coordination/v1": "coordination.k8s.io",
    "k8s.io/api/discovery/v1": "discovery.k8s.io",
    "k8s.io/api/events/v1": "events.k8s.io",
    "k8s.io/api/flowcontrol/v1": "flowcontrol.apiserver.k8s.io",
    "k8s.io/api/networking/v1": "networking.k8s.io",
    "k8s.io/api/node/v1": "node.k8s.io",
    "k8s.io/api/policy/v1": "policy",
    "k8s.io/api/rbac/v1": "rbac.authorization.k8s.io",
    "k8s.io/api/scheduling/v1": "scheduling.k8s.io",
    "k8s.io/api/storage/v1": "storage.k8s.io",
    "k8s.io/apimachinery/pkg/apis/meta/v1": "meta.k8s.io",
}

SCALARS = {
    1: "double",
    2: "float",
    3: "int64",
    4: "uint64",
    5: "int32",
    6: "fixed64",
    7: "fixed32",
    8: "bool",
    9: "string",
    12: "bytes",
    13: "uint32",
    15: "sfixed32",
    16: "sfixed64",
}
MESSAGE_TYPE = 11
LABEL_REPEATED = 3
GO_KINDS = {21: "map", 22: "ptr", 23: "slice", 25: "struct"}


# --- a minimal protobuf reader for descriptor.proto ----------------------------------------------


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return result, pos


def _fields(buf: bytes) -> list[tuple[int, int | bytes]]:
    """(number, value) pairs of one message: varints as int, length-delimited as bytes."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(buf):
        tag, pos = _varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
            out.append((number, value))
        elif wire == 2:
            size, pos = _varint(buf, pos)
            out.append((number, buf[pos : pos + size]))
            pos += size
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise ValueError(f"unexpected wire type {wire} in a descriptor")
    return out


@dataclass
class ProtoField:
    name: str
    number: int
    label: int
    type: int
    type_name: str


@dataclass
class ProtoMessage:
    full_name: str
    package: str
    go_package: str  # directory of the .proto file, which is the Go package path
    fields: list[ProtoField] = field(default_factory=list)
    map_entry: bool = False


def _text(value: int | bytes | None) -> str:
    return value.decode().lstrip(".") if isinstance(value, bytes) else ""


def _int(value: int | bytes | None) -> int:
    return value if isinstance(value, int) else 0


def _parse_message(
    buf: bytes, prefix: str, package: str, go_package: str, out: dict[str, ProtoMessage]
) -> None:
    parts = _fields(buf)
    name = next(v.decode() for n, v in parts if n == 1 and isinstance(v, bytes))
    msg = ProtoMessage(f"{prefix}.{name}", package, go_package)
    for number, value in parts:
        if not isinstance(value, bytes):
            continue
        if number == 2:
            f = dict(_fields(value))
            msg.fields.append(
                ProtoField(_text(f.get(1)), _int(f.get(3)), _int(f.get(4)), _int(f.get(5)), _text(f.get(6)))
            )
        elif number == 3:
            _parse_message(value, msg.full_name, package, go_package, out)
        elif number == 7:
            msg.map_entry = any(n == 7 and v == 1 for n, v in _fields(value))
    out[msg.full_name] = msg


def proto_messages(binary: bytes) -> tuple[dict[str, ProtoMessage], dict[str, list[str]]]:
    """All messages of the gzip-compressed FileDescriptorProtos in a Go binary, and each file's imports."""
    messages: dict[str, ProtoMessage] = {}
    imports: dict[str, list[str]] = {}
    for hit in re.finditer(rb"\x1f\x8b\x08\x00", binary):
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            raw = inflater.decompress(binary[hit.start() : hit.start() + 1_000_000])
        except zlib.error:
            continue
        if not inflater.eof or not raw.startswith(b"\x0a"):
            continue
        try:
            parts = _fields(raw)
        except (IndexError, ValueError):
            continue
        file_name = parts[0][1]
        if not isinstance(file_name, bytes) or not file_name.startswith(b"k8s.io/"):
            continue
        path = file_name.decode()
        if path in imports or not path.endswith("/generated.proto"):
            continue
        package = next(v.decode() for n, v in parts if n == 2 and isinstance(v, bytes))
        imports[path] = [v.decode() for n, v in parts if n == 3 and isinstance(v, bytes)]
        for number, value in parts:
            if number == 4 and isinstance(value, bytes):
                _parse_message(value, package, package, path.rsplit("/", 1)[0], messages)
    return messages, imports


# --- Go run-time type data ----------------------------------------------------------------------


@dataclass
class GoField:
    name: str
    kind: str
    tag: str


class GoTypes:
    """Reads named struct types, with their fields' kinds and tags, out of a Go ELF binary."""

    def __init__(self, binary: bytes) -> None:
        self.data = binary
        sections = self._sections()
        self.ro_addr, self.ro_off, self.ro_size = sections[".rodata"]
        self.types_base = self.ro_addr  # the linker starts the type data at the top of .rodata

    def _sections(self) -> dict[str, tuple[int, int, int]]:
        d = self.data
        if d[:4] != b"\x7fELF" or d[4] != 2:
            raise SystemExit("not a 64-bit ELF binary")
        shoff = struct.unpack_from("<Q", d, 0x28)[0]
        entsize, count, strndx = struct.unpack_from("<HHH", d, 0x3A)
        headers = [struct.unpack_from("<IIQQQQ", d, shoff + i * entsize) for i in range(count)]
        names_off = headers[strndx][4]
        out = {}
        for name_idx, _type, _flags, addr, off, size in headers:
            end = d.index(b"\0", names_off + name_idx)
            out[d[names_off + name_idx : end].decode()] = (addr, off, size)
        return out

    def _off(self, addr: int) -> int:
        if not self.ro_addr <= addr < self.ro_addr + self.ro_size:
            raise ValueError(hex(addr))
        return addr - self.ro_addr + self.ro_off

    def _q(self, addr: int) -> int:
        return int(struct.unpack_from("<Q", self.data, self._off(addr))[0])

    def name(self, addr: int) -> tuple[str, str]:
        """(name, tag) of a Go `abi.Name`: flags byte, varint length, bytes, then optional tag."""
        pos = self._off(addr)
        flags = self.data[pos]
        size, pos = _varint(self.data, pos + 1)
        text = self.data[pos : pos + size].decode()
        tag = ""
        if flags & 2:
            tag_size, pos = _varint(self.data, pos + size)
            tag = self.data[pos : pos + tag_size].decode()
        return text, tag

    def _type_name(self, typ: int) -> str:
        tflag = self.data[self._off(typ + 20)]
        name_off = struct.unpack_from("<i", self.data, self._off(typ + 40))[0]
        text, _ = self.name(self.types_base + name_off)
        return text[1:] if tflag & 2 else text

    def _tagged_names(self) -> set[int]:
        """Addresses of every field name that carries a protobuf tag."""
        ro = self.data[self.ro_off : self.ro_off + self.ro_size]
        found: set[int] = set()
        for hit in re.finditer(rb'protobuf:"', ro):
            for start in range(hit.start() - 3, max(hit.start() - 400, 0), -1):
                flags = ro[start]
                if flags & ~0x0F or not flags & 2:
                    continue
                try:
                    size, pos = _varint(ro, start + 1)
                    if not re.fullmatch(rb"[A-Za-z_]\w*", ro[pos : pos + size]):
                        continue
                    tag_size, tag_pos = _varint(ro, pos + size)
                except IndexError:
                    continue
                if tag_pos <= hit.start() < tag_pos + tag_size:
                    found.add(self.ro_addr + start)
                    break
        return found

    def _is_field(self, addr: int) -> bool:
        try:
            text, _ = self.name(self._q(addr))
            self._off(self._q(addr + 8))
        except (ValueError, IndexError, UnicodeDecodeError):
            return False
        return re.fullmatch(r"[A-Za-z_]\w*", text) is not None

    def structs(self) -> dict[str, list[GoField]]:
        """'<package path>.<TypeName>' -> fields, for every named struct with a protobuf-tagged field."""
        tagged = self._tagged_names()
        size = self.ro_size // 8 * 8
        words = struct.unpack_from(f"<{size // 8}Q", self.data, self.ro_off)
        starts = set()
        for i, word in enumerate(words):
            if word in tagged:
                addr = self.ro_addr + i * 8
                while self._is_field(addr - 24):
                    addr -= 24
                starts.add(addr)
        out: dict[str, list[GoField]] = {}
        for i, word in enumerate(words):
            if word not in starts:
                continue
            typ = self.ro_addr + i * 8 - 56
            try:
                parsed = self._struct(typ, word)
            except (ValueError, IndexError, UnicodeDecodeError):
                continue
            if parsed:
                out[parsed[0]] = parsed[1]
        return out

    def _struct(self, typ: int, fields_addr: int) -> tuple[str, list[GoField]] | None:
        d = self.data
        count = self._q(typ + 64)
        tflag = d[self._off(typ + 20)]
        if d[self._off(typ + 23)] & 0x1F != 25 or not 0 < count < 200 or not tflag & 1:
            return None
        pkg_off = struct.unpack_from("<i", d, self._off(typ + 80))[0]
        package, _ = self.name(self.types_base + pkg_off)
        type_name = self._type_name(typ).split(".", 1)[-1]
        fields = []
        for k in range(count):
            entry = fields_addr + 24 * k
            fname, tag = self.name(self._q(entry))
            ftyp = self._q(entry + 8)
            kind = GO_KINDS.get(d[self._off(ftyp + 23)] & 0x1F, "scalar")
            fields.append(GoField(fname, kind, tag))
        return f"{package}.{type_name}", fields


# --- joining the two ----------------------------------------------------------------------------


def _tag_value(tag: str, key: str) -> str | None:
    found = re.search(rf'(?:^| ){key}:"([^"]*)"', tag)
    return found.group(1) if found else None


def _field_entry(pf: ProtoField, go: GoField | None, messages: dict[str, ProtoMessage]) -> list[str | int]:
    json_name, flags = pf.name, 0
    if go is not None:
        json_tag = (_tag_value(go.tag, "json") or "").split(",")
        if "inline" in json_tag[1:]:
            json_name, flags = "", FLAG_INLINE
        elif json_tag[0] and json_tag[0] != "-":
            json_name = json_tag[0]
        omitempty = "omitempty" in json_tag[1:]
        if omitempty and go.kind not in ("ptr", "struct"):
            flags |= FLAG_OMIT_ZERO
        if not omitempty and not flags & FLAG_INLINE and go.kind in ("ptr", "slice", "map"):
            flags |= FLAG_NULL_IF_ABSENT
        if go.kind == "ptr":
            flags |= FLAG_POINTER
    if pf.type == MESSAGE_TYPE:
        target = messages[pf.type_name]
        if target.map_entry:
            key, value = sorted(target.fields, key=lambda f: f.number)
            return [json_name, "map", flags, _type_of(key), _type_of(value)]
        type_name = pf.type_name
    else:
        type_name = SCALARS[pf.type]
    if pf.label == LABEL_REPEATED:
        flags |= FLAG_REPEATED
    return [json_name, type_name, flags]


def _type_of(pf: ProtoField) -> str:
    return pf.type_name if pf.type == MESSAGE_TYPE else SCALARS[pf.type]


def _reachable(roots: list[str], imports: dict[str, list[str]]) -> set[str]:
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        path = todo.pop()
        if path not in seen:
            seen.add(path)
            todo.extend(p for p in imports.get(path, []) if p.startswith("k8s.io/"))
    return {p.rsplit("/", 1)[0] for p in seen}


def build(binary: bytes) -> dict[str, Any]:
    messages, imports = proto_messages(binary)
    go_structs = GoTypes(binary).structs()
    if "k8s.io/api/core/v1.ConfigMap" not in go_structs:
        raise SystemExit("found no Go type data for core/v1 ConfigMap: unsupported Go binary layout")
    packages = _reachable([f"{p}/generated.proto" for p in GROUPS], imports)
    table: dict[str, dict[str, list[str | int]]] = {}
    wrappers: list[str] = []
    missing: list[str] = []
    for msg in sorted(messages.values(), key=lambda m: m.full_name):
        if msg.go_package not in packages or msg.map_entry:
            continue
        go_name = f"{msg.go_package}.{msg.full_name.rsplit('.', 1)[1]}"
        go_fields = go_structs.get(go_name)
        if go_fields is None:
            # A named Go slice (`type ExtraValue []string`) is a message with one repeated `items`.
            if [(f.name, f.label) for f in msg.fields] == [("items", LABEL_REPEATED)]:
                wrappers.append(msg.full_name)
            else:
                missing.append(msg.full_name)
        by_number: dict[int, GoField] = {}
        for gf in go_fields or []:
            spec = _tag_value(gf.tag, "protobuf")
            if spec and spec != "-":
                by_number[int(spec.split(",")[1])] = gf
        table[msg.full_name] = {
            str(pf.number): _field_entry(pf, by_number.get(pf.number), messages)
            for pf in sorted(msg.fields, key=lambda f: f.number)
        }
    if missing:
        print(f"no Go struct (proto names used as-is): {', '.join(missing)}", file=sys.stderr)
    kinds = {}
    for path, group in GROUPS.items():
        version = path.rsplit("/", 1)[1]
        package = next(m.package for m in messages.values() if m.go_package == path)
        kinds[f"{group}/{version}" if group else version] = package
    return {"kinds": kinds, "wrappers": wrappers, "messages": table}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("kubectl", nargs="?", default=shutil.which("kubectl"), help="kubectl binary")
    parser.add_argument("-o", "--output", type=Path, default=OUTPUT)
    args = parser.parse_args()
    if not args.kubectl:
        raise SystemExit("kubectl not found; pass its path")
    schema = build(Path(args.kubectl).resolve().read_bytes())
    args.output.write_text(json.dumps(schema, separators=(",", ":"), sort_keys=True) + "\n")
    print(f"wrote {args.output}: {len(schema['messages'])} messages")


if __name__ == "__main__":
    main()
