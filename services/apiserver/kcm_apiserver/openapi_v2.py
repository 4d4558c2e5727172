"""The /openapi/v2 (Swagger 2.0) document, in JSON and in gnostic's protobuf form.

kubectl fetches /openapi/v2 as protobuf (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`)
for client-side validation, which it runs on every item of a `kind: List` manifest (server-side
field validation cannot take a List), and for `kubectl explain --output plaintext-openapiv2`.

There is one schema source, `schemas.openapi_v3`: this module merges its per group-version OpenAPI v3
documents and rewrites them as Swagger 2.0 the way kube-apiserver's v2 differs from its v3:
`#/definitions/` references, plain `$ref` instead of a one-element `allOf`, body parameters
instead of request bodies, parameter types inline, IntOrString as a string with format
`int-or-string`, and CRD schemas reduced by upstream's v3-to-v2 conversion (apiextensions
`ToStructuralOpenAPIV2` and `buildKubeNative`: no oneOf/anyOf/not/allOf, nullable or
preserve-unknown-fields or embedded-resource nodes lose their type, items and properties).

`V2Cache` (the HTTP layer's) builds both encodings on the first request after a CRD change,
converting again only the group-versions whose v3 document changed, and hands them out with
upstream's ETag: the quoted upper-case hex SHA-512 of the JSON bytes, shared by both encodings
(k8s.io/kube-openapi pkg/handler). `negotiate` picks the encoding from Accept as that handler does.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from .registry import Registry
from .schemas import openapi_v3

JSON = dict[str, Any]

JSON_TYPE: Final = "application/json"
# What kubectl asks for; Go's mime parser refuses the `@`, so upstream answers with the dotted form.
PROTOBUF_TYPE: Final = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
_PROTOBUF_ASKED: Final = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
# Accepted media type -> the Content-Type answered, in upstream's order of preference.
_OFFERED: Final = ((JSON_TYPE, JSON_TYPE), (_PROTOBUF_ASKED, PROTOBUF_TYPE), (PROTOBUF_TYPE, PROTOBUF_TYPE))

_V3_REF: Final = "#/components/schemas/"
_V2_REF: Final = "#/definitions/"
# JSON Schema keywords OpenAPI v2 lacks; upstream's v2 conversion drops them.
_V3_ONLY: Final = frozenset({"nullable", "oneOf", "anyOf", "not", "allOf"})
_PRESERVE: Final = "x-kubernetes-preserve-unknown-fields"
_GVK: Final = "x-kubernetes-group-version-kind"


# ---------------------------------------------------------------------------
# v3 -> v2
# ---------------------------------------------------------------------------


def _ref(ref: str) -> str:
    return _V2_REF + ref.removeprefix(_V3_REF)


def _single_ref(schema: Mapping[str, Any]) -> str | None:
    """The reference of `allOf: [{$ref: X}]`, how v3 attaches a description or default to a $ref."""
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict):
        ref = all_of[0].get("$ref")
        if isinstance(ref, str) and len(all_of[0]) == 1:
            return ref
    return None


def _schema(schema: Any, *, crd: bool) -> Any:
    """One schema node in v2 form; `crd` applies upstream's reduction of CRD schemas."""
    if not isinstance(schema, dict):
        return schema
    out: JSON = {}
    ref = _single_ref(schema)
    if ref is not None:
        out["$ref"] = _ref(ref)
    if not crd and isinstance(schema.get("oneOf"), list) and schema.get("format") == "int-or-string":
        # Built-in types with their own JSON form (IntOrString) are strings in upstream's v2.
        out["type"] = "string"
    for key, value in schema.items():
        if key in _V3_ONLY or (key == _PRESERVE and not crd):
            continue
        if key == "$ref" and isinstance(value, str):
            out[key] = _ref(value)
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: _schema(sub, crd=crd) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _schema(value, crd=crd)
        else:
            out[key] = value
    if crd and (
        schema.get("nullable") or schema.get(_PRESERVE) or schema.get("x-kubernetes-embedded-resource")
    ):
        # kubectl would call an untyped value with items or properties invalid.
        for key in ("type", "items", "properties"):
            out.pop(key, None)
    properties = schema.get("properties")
    required = out.get("required")
    if crd and isinstance(properties, dict) and isinstance(required, list):
        nullable = {name for name, sub in properties.items() if isinstance(sub, dict) and sub.get("nullable")}
        out["required"] = [name for name in required if name not in nullable]
        if not out["required"]:
            del out["required"]
    return out


def _crd_root(schema: Mapping[str, Any]) -> JSON:
    """A custom resource's definition; a root that keeps unknown fields is any object with its GVK."""
    if schema.get(_PRESERVE):
        # Upstream leaves out even apiVersion, kind and metadata: kubectl would otherwise refuse
        # every other field as unknown.
        return {"type": "object", _GVK: schema.get(_GVK, [])}
    out = _schema(schema, crd=True)
    assert isinstance(out, dict)
    return out


def _parameter(param: Mapping[str, Any]) -> JSON:
    """A v3 parameter with its type in `schema` -> a v2 one with the type inline."""
    out = {key: value for key, value in param.items() if key != "schema"}
    out.update(param.get("schema") or {})
    return out


def _first_schema(content: Mapping[str, Any]) -> Any:
    for media in content.values():
        if isinstance(media, dict) and "schema" in media:
            return media["schema"]
    return None


def _operation(op: Mapping[str, Any]) -> JSON:
    params = [_parameter(p) for p in op.get("parameters") or ()]
    consumes = ["*/*"]
    body = op.get("requestBody")
    if isinstance(body, dict):
        content = body.get("content") or {}
        consumes = list(content)
        params.insert(
            0,
            {
                "in": "body",
                "name": "body",
                "required": True,
                "schema": _schema(_first_schema(content), crd=False),
            },
        )
    produces: list[str] = []
    responses: JSON = {}
    for code, response in (op.get("responses") or {}).items():
        content = response.get("content") or {}
        produces += [media for media in content if media not in produces]
        out: JSON = {"description": response.get("description", "")}
        schema = _first_schema(content)
        if schema is not None:
            out["schema"] = _schema(schema, crd=False)
        responses[code] = out
    v2: JSON = {
        key: value for key, value in op.items() if key not in ("parameters", "requestBody", "responses")
    }
    v2.update(consumes=consumes, produces=produces, responses=responses, schemes=["https"])
    if params:
        v2["parameters"] = params
    return v2


def _path_item(item: Mapping[str, Any]) -> JSON:
    out: JSON = {}
    for key, value in item.items():
        if key == "parameters":
            out[key] = [_parameter(p) for p in value]
        elif isinstance(value, dict):
            out[key] = _operation(value)
    return out


@dataclass(frozen=True)
class _Part:
    """One group-version's share of the document, converted and encoded."""

    source: JSON  # the v3 document it was made from: `is` tells whether that changed
    paths: dict[str, JSON]
    definitions: dict[str, JSON]
    paths_pb: dict[str, bytes]
    definitions_pb: dict[str, bytes]


def _part(v3: JSON, custom: frozenset[str]) -> _Part:
    paths = {path: _path_item(item) for path, item in v3["paths"].items()}
    definitions = {
        name: _crd_root(schema) if name in custom else _schema(schema, crd=False)
        for name, schema in v3["components"]["schemas"].items()
    }
    return _Part(
        v3,
        paths,
        definitions,
        {path: _path_item_pb(item) for path, item in paths.items()},
        {name: _schema_pb(schema) for name, schema in definitions.items()},
    )


def _parts(
    registry: Registry, crds: list[JSON], previous: Mapping[tuple[str, str], _Part]
) -> dict[tuple[str, str], _Part]:
    """Every served group-version's part, reusing those whose v3 document is the same object.

    `openapi_v3` caches the documents of built-in group-versions, so after a CRD change only the
    custom ones are converted again.
    """
    custom = openapi_v3.crd_definitions(crds)
    out = {}
    for group, versions in registry.groups().items():
        for version in versions:
            v3 = openapi_v3.group_version_document(registry, group, version, crds)
            old = previous.get((group, version))
            out[(group, version)] = old if old is not None and old.source is v3 else _part(v3, custom)
    return out


def _merged(parts: Iterable[_Part], attribute: str) -> dict[str, Any]:
    """One attribute of the parts as one sorted map; definitions repeat across parts (ObjectMeta)."""
    out: dict[str, Any] = {}
    for part in parts:
        for name, value in getattr(part, attribute).items():
            out.setdefault(name, value)
    return dict(sorted(out.items()))


def _document(parts: Iterable[_Part], version: str) -> JSON:
    parts = list(parts)
    return {
        "definitions": _merged(parts, "definitions"),
        "info": {"title": "Kubernetes", "version": version},
        "paths": _merged(parts, "paths"),
        "security": [{"BearerToken": []}],
        "securityDefinitions": {
            "BearerToken": {
                "description": "Bearer Token authentication",
                "in": "header",
                "name": "authorization",
                "type": "apiKey",
            }
        },
        "swagger": "2.0",
    }


def document(registry: Registry, crds: list[JSON], version: str) -> JSON:
    """The Swagger 2.0 document of everything served: read-only for callers, like `openapi_v3`' documents."""
    return _document(_parts(registry, crds, {}).values(), version)


# ---------------------------------------------------------------------------
# gnostic protobuf (github.com/google/gnostic-models openapiv2/OpenAPIv2.proto)
# ---------------------------------------------------------------------------


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64s go as 64-bit two's complement
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _bytes(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _string(number: int, value: Any) -> bytes:
    return _bytes(number, value.encode()) if isinstance(value, str) and value else b""


def _strings(number: int, values: Any) -> bytes:
    return b"".join(_string(number, v) for v in values) if isinstance(values, list) else b""


def _bool(number: int, value: Any) -> bytes:
    return _varint(number << 3) + b"\x01" if value is True else b""


def _int(number: int, value: Any) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int) or value == 0:
        return b""
    return _varint(number << 3) + _varint(value)


def _double(number: int, value: Any) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int | float) or value == 0:
        return b""
    return _varint(number << 3 | 1) + struct.pack("<d", float(value))


def _any(number: int, value: Any) -> bytes:
    """gnostic's Any: the value as YAML text (JSON is YAML), what kubectl's readers parse."""
    return _bytes(number, _string(2, json.dumps(value, sort_keys=True)))


def _extensions(number: int, obj: Mapping[str, Any]) -> bytes:
    return b"".join(
        _bytes(number, _string(1, key) + _any(2, value)) for key, value in obj.items() if key.startswith("x-")
    )


def _named(number: int, items: Iterable[tuple[str, bytes]]) -> bytes:
    """A map as gnostic's ordered (name, value) pairs."""
    return b"".join(_bytes(number, _string(1, name) + _bytes(2, value)) for name, value in items)


_SCHEMA_STRINGS: Final = {
    "$ref": 1,
    "format": 2,
    "title": 3,
    "description": 4,
    "pattern": 13,
    "discriminator": 26,
}
_SCHEMA_DOUBLES: Final = {"multipleOf": 6, "maximum": 7, "minimum": 9}
_SCHEMA_BOOLS: Final = {"exclusiveMaximum": 8, "exclusiveMinimum": 10, "uniqueItems": 16, "readOnly": 27}
_SCHEMA_INTS: Final = {
    "maxLength": 11,
    "minLength": 12,
    "maxItems": 14,
    "minItems": 15,
    "maxProperties": 17,
    "minProperties": 18,
}


def _schema_pb(schema: Any) -> bytes:
    if not isinstance(schema, dict):
        return b""
    out = bytearray()
    for key, value in schema.items():
        if key in _SCHEMA_STRINGS:
            out += _string(_SCHEMA_STRINGS[key], value)
        elif key in _SCHEMA_DOUBLES:
            out += _double(_SCHEMA_DOUBLES[key], value)
        elif key in _SCHEMA_BOOLS:
            out += _bool(_SCHEMA_BOOLS[key], value)
        elif key in _SCHEMA_INTS:
            out += _int(_SCHEMA_INTS[key], value)
        elif key == "default":
            out += _any(5, value)
        elif key == "example":
            out += _any(30, value)
        elif key == "required":
            out += _strings(19, value)
        elif key == "enum" and isinstance(value, list):
            out += b"".join(_any(20, v) for v in value)
        elif key == "additionalProperties":
            if isinstance(value, dict):
                out += _bytes(21, _bytes(1, _schema_pb(value)))
            elif isinstance(value, bool):
                out += _bytes(21, _varint(2 << 3) + (b"\x01" if value else b"\x00"))
        elif key == "type":
            out += _bytes(22, _strings(1, value if isinstance(value, list) else [value]))
        elif key == "items":
            items = value if isinstance(value, list) else [value]
            out += _bytes(23, b"".join(_bytes(1, _schema_pb(item)) for item in items))
        elif key == "properties" and isinstance(value, dict):
            out += _bytes(25, _named(1, ((name, _schema_pb(sub)) for name, sub in value.items())))
        elif key == "externalDocs" and isinstance(value, dict):
            out += _bytes(29, _string(1, value.get("description")) + _string(2, value.get("url")))
    out += _extensions(31, schema)
    return bytes(out)


def _parameter_pb(param: Mapping[str, Any]) -> bytes:
    where = param.get("in")
    if where == "body":
        body = (
            _string(1, param.get("description"))
            + _string(2, param.get("name"))
            + _string(3, where)
            + _bool(4, param.get("required"))
            + _bytes(5, _schema_pb(param.get("schema")))
        )
        parameter = _bytes(1, body)
    else:
        # Query and form parameters carry allowEmptyValue at 5, shifting their later fields by one.
        shift = 1 if where in ("query", "formData") else 0
        sub = (
            _bool(1, param.get("required"))
            + _string(2, where)
            + _string(3, param.get("description"))
            + _string(4, param.get("name"))
            + _string(5 + shift, param.get("type"))
            + _string(6 + shift, param.get("format"))
            + _bool(19 + shift, param.get("uniqueItems"))
        )
        which = {"header": 1, "formData": 2, "query": 3, "path": 4}.get(str(where), 3)
        parameter = _bytes(2, _bytes(which, sub))
    return _bytes(1, parameter)  # ParametersItem.parameter


def _response_pb(response: Mapping[str, Any]) -> bytes:
    """ResponseValue.response: its description and, in a SchemaItem, its schema."""
    schema = _bytes(2, _bytes(1, _schema_pb(response["schema"]))) if "schema" in response else b""
    return _bytes(1, _string(1, response.get("description")) + schema)


def _operation_pb(op: Mapping[str, Any]) -> bytes:
    responses = _named(1, ((code, _response_pb(r)) for code, r in (op.get("responses") or {}).items()))
    return (
        _strings(1, op.get("tags"))
        + _string(2, op.get("summary"))
        + _string(3, op.get("description"))
        + _string(5, op.get("operationId"))
        + _strings(6, op.get("produces"))
        + _strings(7, op.get("consumes"))
        + b"".join(_bytes(8, _parameter_pb(p)) for p in op.get("parameters") or ())
        + _bytes(9, responses)
        + _strings(10, op.get("schemes"))
        + _bool(11, op.get("deprecated"))
        + _extensions(13, op)
    )


_METHODS: Final = {"get": 2, "put": 3, "post": 4, "delete": 5, "options": 6, "head": 7, "patch": 8}


def _path_item_pb(item: Mapping[str, Any]) -> bytes:
    out = bytearray()
    for method, number in _METHODS.items():
        if method in item:
            out += _bytes(number, _operation_pb(item[method]))
    out += b"".join(_bytes(9, _parameter_pb(p)) for p in item.get("parameters") or ())
    out += _extensions(10, item)
    return bytes(out)


def to_protobuf(doc: Mapping[str, Any]) -> bytes:
    """The document as gnostic's openapi.v2.Document message, what kubectl unmarshals."""
    paths = {path: _path_item_pb(item) for path, item in doc["paths"].items()}
    definitions = {name: _schema_pb(schema) for name, schema in doc["definitions"].items()}
    return _document_pb(doc, paths, definitions)


def _document_pb(
    doc: Mapping[str, Any], paths: Mapping[str, bytes], definitions: Mapping[str, bytes]
) -> bytes:
    """The Document message around path items and definitions encoded already."""
    info = doc.get("info") or {}
    security_definitions = _named(
        1,
        (
            (
                name,
                _bytes(
                    2,  # SecurityDefinitionsItem.api_key_security
                    _string(1, d.get("type"))
                    + _string(2, d.get("name"))
                    + _string(3, d.get("in"))
                    + _string(4, d.get("description")),
                ),
            )
            for name, d in (doc.get("securityDefinitions") or {}).items()
        ),
    )
    security = b"".join(
        _bytes(12, _named(1, ((name, _strings(1, scopes)) for name, scopes in requirement.items())))
        for requirement in doc.get("security") or ()
    )
    return (
        _string(1, doc.get("swagger"))
        + _bytes(2, _string(1, info.get("title")) + _string(2, info.get("version")))
        + _bytes(8, _named(2, paths.items()))
        + _bytes(9, _named(1, definitions.items()))
        + security
        + _bytes(13, security_definitions)
    )


# ---------------------------------------------------------------------------
# Serving
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Encoded:
    json: bytes
    protobuf: bytes
    etag: str  # quoted, as the ETag header carries it


class V2Cache:
    """The last built document, rebuilt when the key (the CRD registrar's revision) moves."""

    def __init__(self, version: str) -> None:
        self._version = version
        self._key: object = None
        self._encoded: Encoded | None = None
        self._parts: dict[tuple[str, str], _Part] = {}

    def get(self, registry: Registry, crds: list[JSON], key: object) -> Encoded:
        if self._encoded is None or key != self._key:
            self._parts = _parts(registry, crds, self._parts)
            parts = list(self._parts.values())
            doc = _document(parts, self._version)
            raw = msgspec.json.encode(doc)
            etag = '"' + hashlib.sha512(raw).hexdigest().upper() + '"'
            pb = _document_pb(doc, _merged(parts, "paths_pb"), _merged(parts, "definitions_pb"))
            self._encoded, self._key = Encoded(raw, pb, etag), key
        return self._encoded


def negotiate(accept: str) -> str | None:
    """The Content-Type to answer an Accept header with, as kube-openapi's handler picks it; None is 406."""
    clauses: list[tuple[float, bool, bool, int, str, str]] = []
    for i, clause in enumerate((accept or "*/*").split(",")):
        media, *params = (part.strip() for part in clause.split(";"))
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        kind, _, sub = media.partition("/")
        if kind and q > 0:
            # goautoneg's order: quality first, then explicit types before wildcards.
            clauses.append((-q, kind == "*", sub == "*", i, kind, sub))
    for *_, kind, sub in sorted(clauses):
        for offered, answered in _OFFERED:
            offered_kind, _, offered_sub = offered.partition("/")
            if kind in ("*", offered_kind) and sub in ("*", offered_sub):
                return answered
    return None
