"""The fields a kind's schema lacks, for fieldValidation Strict, Warn and Ignore.

`operations` calls `unknown_fields` on every create, update and patch body: Strict refuses
what it finds, Warn warns about each field, and Warn and Ignore drop them (`drop=True`), as
upstream's decoding into typed objects and its pruning of structural schemas do. Built-in
kinds are walked along the client's models (`clientmodels`), custom resources along their
CRD's schema (`crd`); with `unchanged`, only what a patch changed in a built-in kind is walked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kcm_apiserver.registry import Registry

from .clientmodels import OBJECT_META_MODEL, ClientType, builtin_model, fields_of
from .crd import JSON, custom_schema

_ABSENT = object()
# An unknown field found: its JSON path, the object holding it and its key there.
_Unknown = tuple[str, dict[str, Any], str]


def _unknown_in_type(t: ClientType, value: Any, path: str, out: list[_Unknown], was: Any = _ABSENT) -> None:
    """Unknown fields of `value`, skipping each part equal to the same part of `was` (what a
    patch was applied to): C-speed equality spares the walk of what the patch left alone."""
    if was is not _ABSENT and value == was:
        return
    if t.kind == "model" and isinstance(value, dict):
        fields = fields_of(t.name)
        before = was if isinstance(was, dict) else {}
        for key, sub in value.items():
            f = fields.get(key)
            if f is None:
                out.append((f"{path}.{key}", value, key))
            else:
                _unknown_in_type(f.type, sub, f"{path}.{key}", out, before.get(key, _ABSENT))
    elif t.kind == "list" and t.inner and isinstance(value, list):
        # By position: an item that moved is checked again, which finds nothing more.
        earlier = was if isinstance(was, list) else []
        for i, item in enumerate(value):
            _unknown_in_type(t.inner, item, f"{path}[{i}]", out, earlier[i] if i < len(earlier) else _ABSENT)
    elif t.kind == "map" and t.inner and isinstance(value, dict):
        before = was if isinstance(was, dict) else {}
        for key, sub in value.items():
            _unknown_in_type(t.inner, sub, f"{path}.{key}", out, before.get(key, _ABSENT))


def _unknown_in_schema(
    schema: Mapping[str, Any], value: Any, path: str, out: list[_Unknown], resource_root: bool = False
) -> None:
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                _unknown_in_schema(items, item, f"{path}[{i}]", out)
        return
    if not isinstance(value, dict) or schema.get("x-kubernetes-int-or-string"):
        return
    embedded = resource_root or bool(schema.get("x-kubernetes-embedded-resource"))
    properties: Mapping[str, Any] = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields")) or additional is True
    for key, sub in value.items():
        here = f"{path}.{key}"
        if embedded and key in ("apiVersion", "kind"):
            continue
        if embedded and key == "metadata":
            _unknown_in_type(ClientType("model", OBJECT_META_MODEL), sub, here, out)
        elif isinstance(properties.get(key), dict):
            _unknown_in_schema(properties[key], sub, here, out)
        elif isinstance(additional, dict):
            _unknown_in_schema(additional, sub, here, out)
        elif not preserve:
            out.append((here, value, key))


def unknown_fields(
    registry: Registry,
    group: str,
    version: str,
    kind: str,
    obj: dict[str, Any],
    crds: list[JSON],
    *,
    unchanged: dict[str, Any] | None = None,
    drop: bool = False,
) -> list[str]:
    """JSON paths ('.spec.contaners', '.spec.containers[0].imagee') of fields the kind's schema
    lacks; with `unchanged`, only in the parts of `obj` that differ from it (built-in kinds; a
    custom resource is checked whole). With `drop` they
    are also removed from `obj`, as upstream's decoding into typed objects (built-in kinds) and
    its pruning of structural schemas (custom resources) do."""
    found: list[_Unknown] = []
    model = builtin_model(registry, group, version, kind)
    if model is not None:
        _unknown_in_type(
            ClientType("model", model), obj, "", found, _ABSENT if unchanged is None else unchanged
        )
    else:
        schema = custom_schema(crds, group, version, kind)
        if schema is not None:
            _unknown_in_schema(schema, obj, "", found, resource_root=True)
    if drop:
        for _, holder, key in found:
            holder.pop(key, None)
    return [path for path, _, _ in found]
