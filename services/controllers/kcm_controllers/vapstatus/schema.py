"""CEL types of a kind from the OpenAPI v3 document the API server serves, as upstream's
SchemaDeclType (k8s.io/apiserver/pkg/cel/common/schemas.go) builds them.

- `document_path(group, version)`: where the group version's OpenAPI v3 document is served.
- `root_type(document, group, version, kind) -> Type | None`: the kind's type (None: no schema
  for it, which upstream skips), its root given kind, apiVersion and metadata as upstream's
  WithTypeAndObjectMeta does.
- Mapping: int-or-string -> dyn; array -> list of its items; object with an
  additionalProperties schema -> map(string, value); object -> its properties (names that are
  not plain CEL identifiers left out, since only escaped names reach them); string by format
  (byte, duration, date, date-time) or string; boolean, number, integer. A schema this
  module cannot type as upstream would (no type, oneOf or anyOf, preserve-unknown-fields or an
  embedded resource) is `UNKNOWN`, which makes any expression using it undecided.
Called by `typecheck.py`.
"""

from __future__ import annotations

import re
from typing import Any

from kcm_controllers.vapstatus.celcheck import (
    BOOL,
    BYTES,
    DOUBLE,
    DURATION,
    DYN,
    INT,
    STRING,
    TIMESTAMP,
    UNKNOWN,
    ListT,
    MapT,
    ObjT,
    Type,
)
from kcm_controllers.vapstatus.celparse import RESERVED

_IDENT = re.compile(r"[_a-zA-Z][_a-zA-Z0-9]*")
_REF = "#/components/schemas/"
_STRING_FORMATS = {"byte": BYTES, "duration": DURATION, "date": TIMESTAMP, "date-time": TIMESTAMP}
_PRIMITIVES = {"boolean": BOOL, "number": DOUBLE, "integer": INT}
_META = {"kind": STRING, "apiVersion": STRING}


def document_path(group: str, version: str) -> str:
    return f"/openapi/v3/apis/{group}/{version}" if group else f"/openapi/v3/api/{version}"


class _Resolver:
    def __init__(self, schemas: dict[str, Any]) -> None:
        self.schemas = schemas

    def deref(self, s: Any) -> dict[str, Any]:
        """The schema itself, or the one its `$ref` (or a single-entry allOf of one) names."""
        for _ in range(8):  # a ref of a ref; a cycle of refs is not a schema
            if not isinstance(s, dict):
                return {}
            all_of = s.get("allOf")
            if isinstance(all_of, list) and len(all_of) == 1 and "type" not in s:
                s = all_of[0]
                continue
            ref = s.get("$ref")
            if isinstance(ref, str) and ref.startswith(_REF):
                s = self.schemas.get(ref[len(_REF) :], {})
                continue
            return s
        return {}

    def decl(self, raw: Any, root: bool = False) -> Type:
        s = self.deref(raw)
        if s.get("x-kubernetes-int-or-string") or s.get("format") == "int-or-string":
            return DYN
        if s.get("x-kubernetes-preserve-unknown-fields") or s.get("x-kubernetes-embedded-resource"):
            return UNKNOWN
        if "oneOf" in s or "anyOf" in s or "allOf" in s:
            return UNKNOWN
        kind = s.get("type")
        if kind == "array":
            items = self.decl(s.get("items")) if "items" in s else UNKNOWN
            return UNKNOWN if items == UNKNOWN else ListT(items)
        if kind == "object":
            extra = s.get("additionalProperties")
            if isinstance(extra, dict):
                value = self.decl(extra)
                return UNKNOWN if value == UNKNOWN else MapT(STRING, value)
            props = s.get("properties")
            return ObjT(lambda: self.fields(props if isinstance(props, dict) else {}, root))
        if kind == "string":
            fmt = s.get("format")
            return _STRING_FORMATS.get(fmt, STRING) if isinstance(fmt, str) else STRING
        if isinstance(kind, str) and kind in _PRIMITIVES:
            return _PRIMITIVES[kind]
        return UNKNOWN

    def fields(self, props: dict[str, Any], root: bool) -> dict[str, Type]:
        out = {
            name: self.decl(prop)
            for name, prop in props.items()
            if _IDENT.fullmatch(name) and name not in RESERVED and "__" not in name
        }
        if root and not _has_type_and_meta(self, props):
            out.update(_META)
            out["metadata"] = ObjT(lambda: {"name": STRING, "generateName": STRING})
        return out


def _has_type_and_meta(r: _Resolver, props: dict[str, Any]) -> bool:
    """Upstream's WithTypeAndObjectMeta test: kind, apiVersion and metadata.name/generateName."""
    meta = r.deref(props.get("metadata"))
    found = meta.get("properties")
    meta_props: dict[str, Any] = found if isinstance(found, dict) else {}
    return (
        all(r.deref(props.get(k)).get("type") == "string" for k in ("kind", "apiVersion"))
        and meta.get("type") == "object"
        and all(r.deref(meta_props.get(k)).get("type") == "string" for k in ("name", "generateName"))
    )


def root_type(document: Any, group: str, version: str, kind: str) -> Type | None:
    components = document.get("components") if isinstance(document, dict) else None
    schemas = components.get("schemas") if isinstance(components, dict) else None
    if not isinstance(schemas, dict):
        return None
    wanted = {"group": group, "version": version, "kind": kind}
    for s in schemas.values():
        gvks = s.get("x-kubernetes-group-version-kind") if isinstance(s, dict) else None
        if isinstance(gvks, list) and wanted in gvks:
            return _Resolver(schemas).decl(s, root=True)
    return None
