"""The type information patch and apply read, from the schemas the OpenAPI documents show.

`type_info` answers the `TypeInfo` (`kcm_apiserver.typeinfo`) of a kind, None for an unknown
kind: for a built-in kind, from its client model plus `patch_meta`'s patch strategies, merge
keys and list and map types; for a custom resource, from its CRD's structural schema, with
ObjectMeta under `metadata`. `operations` hands it to the patch and apply engines. Children
resolve lazily (kinds can be recursive: JSONSchemaProps) and built-in nodes are cached.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Final

from kcm_apiserver.patch_meta import ATOMIC_STRUCTS, field_extensions
from kcm_apiserver.registry import Registry
from kcm_apiserver.typeinfo import TypeInfo

from .clientmodels import OBJECT_META_MODEL, ClientType, builtin_model, definition_of, fields_of
from .crd import JSON, custom_schema


def _no_field(name: str) -> TypeInfo | None:
    return None


def _no_elem() -> TypeInfo | None:
    return None


@dataclass(frozen=True, eq=False)
class SchemaType:
    """A `TypeInfo` node whose children resolve lazily, since kinds can be recursive (JSONSchemaProps)."""

    kind: str
    patch_strategy: frozenset[str] = frozenset()
    patch_merge_key: str | None = None
    list_type: str | None = None
    list_map_keys: tuple[str, ...] = ()
    # `x-kubernetes-map-type` of objects and maps: 'atomic' or None (granular).
    map_type: str | None = None
    field_of: Callable[[str], TypeInfo | None] = field(default=_no_field, repr=False)
    elem_of: Callable[[], TypeInfo | None] = field(default=_no_elem, repr=False)

    def field(self, name: str) -> TypeInfo | None:
        return self.field_of(name)

    def elem(self) -> TypeInfo | None:
        return self.elem_of()


@dataclass(frozen=True)
class _Meta:
    strategy: frozenset[str] = frozenset()
    merge_key: str | None = None
    list_type: str | None = None
    list_map_keys: tuple[str, ...] = ()
    map_type: str | None = None


def _meta(ext: Mapping[str, Any]) -> _Meta:
    strategy = frozenset(s for s in str(ext.get("x-kubernetes-patch-strategy", "")).split(",") if s)
    merge_key = ext.get("x-kubernetes-patch-merge-key")
    list_type = ext.get("x-kubernetes-list-type")
    keys = tuple(ext.get("x-kubernetes-list-map-keys") or ())
    if list_type is None and "merge" in strategy:
        # Upstream's schema conversion reads a merge strategy as a list-map (or a set without a key).
        list_type, keys = ("map", (merge_key,)) if merge_key else ("set", ())
    return _Meta(strategy, merge_key, list_type, keys, ext.get("x-kubernetes-map-type"))


def _typed(kind: str, meta: _Meta, **children: Any) -> SchemaType:
    return SchemaType(
        kind=kind,
        patch_strategy=meta.strategy,
        patch_merge_key=meta.merge_key,
        list_type=meta.list_type if kind == "array" else None,
        list_map_keys=meta.list_map_keys if kind == "array" else (),
        map_type=meta.map_type,
        **children,
    )


_NO_META: Final = _Meta()


@cache
def _builtin_node(t: ClientType, meta: _Meta) -> TypeInfo | None:
    if t.kind == "model":
        model = t.name
        atomic = "atomic" if definition_of(model) in ATOMIC_STRUCTS else meta.map_type
        object_meta = _Meta(meta.strategy, meta.merge_key, None, (), atomic)
        return _typed("object", object_meta, field_of=lambda name: _model_field_node(model, name))
    if t.kind in ("list", "map") and t.inner:
        inner = t.inner
        return _typed(
            "array" if t.kind == "list" else "map", meta, elem_of=lambda: _builtin_node(inner, _NO_META)
        )
    if t.kind in ("scalar", "time", "intstr"):
        return _typed("scalar", meta)
    return None


@cache
def _model_field_node(model: str, name: str) -> TypeInfo | None:
    f = fields_of(model).get(name)
    if f is None:
        return None
    return _builtin_node(f.type, _meta(field_extensions(definition_of(model), name)))


def _schema_node(schema: Mapping[str, Any], resource_root: bool = False) -> TypeInfo | None:
    """A TypeInfo over a CRD's structural schema; a resource root also gets ObjectMeta metadata."""
    meta = _meta(schema)
    if schema.get("x-kubernetes-int-or-string"):
        return _typed("scalar", meta)
    kind = schema.get("type")
    properties = schema.get("properties")
    embedded = resource_root or bool(schema.get("x-kubernetes-embedded-resource"))
    if kind == "object" or properties is not None or embedded:
        additional = schema.get("additionalProperties")
        if properties is None and isinstance(additional, dict) and not embedded:
            return _typed("map", meta, elem_of=lambda: _schema_node(additional))
        props: Mapping[str, Any] = properties or {}

        def field_of(name: str) -> TypeInfo | None:
            if embedded and name == "metadata":
                return _builtin_node(ClientType("model", OBJECT_META_MODEL), _NO_META)
            if embedded and name in ("apiVersion", "kind"):
                return _typed("scalar", _NO_META)
            sub = props.get(name)
            return _schema_node(sub) if isinstance(sub, dict) else None

        if not props and not embedded and schema.get("x-kubernetes-preserve-unknown-fields"):
            return None
        return _typed("object", meta, field_of=field_of)
    if kind == "array":
        items = schema.get("items")
        return _typed("array", meta, elem_of=lambda: _schema_node(items) if isinstance(items, dict) else None)
    if kind in ("string", "integer", "number", "boolean"):
        return _typed("scalar", meta)
    return None


def type_info(registry: Registry, group: str, version: str, kind: str, crds: list[JSON]) -> TypeInfo | None:
    """The schema of a kind as patch and apply see it; None when the kind is unknown."""
    model = builtin_model(registry, group, version, kind)
    if model is not None:
        return _builtin_node(ClientType("model", model), _NO_META)
    schema = custom_schema(crds, group, version, kind)
    return None if schema is None else _schema_node(schema, resource_root=True)
