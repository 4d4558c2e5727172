"""OpenAPI v3 documents of every served group/version.

The HTTP layer serves `openapi_v3_root` at /openapi/v3 and `group_version_document`
at /openapi/v3/api/v1 and /openapi/v3/apis/<group>/<version>; kubectl reads them to
`explain` kinds, to learn that the server validates fields itself (the
`fieldValidation` parameter on PATCH operations) and to compute strategic merge
patches (the `x-kubernetes-patch-*` property extensions); `openapi_v2` rewrites the same
documents as /openapi/v2, naming CRD definitions through `crd_definitions`.

Built-in schemas are generated from the official Python client's models (`clientmodels`:
field names, types, descriptions, required fields) plus `patch_meta`, which holds the
patch and list metadata the client lacks. Custom resources use their CRD's
`openAPIV3Schema` (`crd`). Generated parts are cached and shared between callers, so
callers must treat returned documents as read-only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any, Final

from kcm_apiserver.patch_meta import ATOMIC_STRUCTS, Extensions, field_extensions
from kcm_apiserver.registry import Registry, ResourceType

from .clientmodels import (
    SUBRESOURCE_KINDS,
    ClientType,
    class_description,
    definition_of,
    fields_of,
    model_gvks,
    models_by_definition,
)
from .crd import JSON, crd_for, crd_schema

_REF: Final = "#/components/schemas/"
_META: Final = "io.k8s.apimachinery.pkg.apis.meta.v1"
_TIME: Final = f"{_META}.Time"
_PATCH: Final = f"{_META}.Patch"
_INT_OR_STRING: Final = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"


# ---------------------------------------------------------------------------
# Component schemas
# ---------------------------------------------------------------------------

_SPECIAL_SCHEMAS: Final[dict[str, JSON]] = {
    _TIME: {
        "description": "Time is a wrapper around time.Time which supports correct marshaling to YAML and "
        "JSON. Wrappers are provided for many of the factory methods that the time package offers.",
        "format": "date-time",
        "type": "string",
    },
    _INT_OR_STRING: {
        "description": "IntOrString is a type that can hold an int32 or a string. When used in JSON or YAML "
        "marshalling and unmarshalling, it produces or consumes the inner type.",
        "format": "int-or-string",
        "oneOf": [{"type": "integer"}, {"type": "string"}],
    },
    _PATCH: {
        "description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request "
        "body.",
        "type": "object",
    },
}


def _ref(definition: str) -> JSON:
    return {"allOf": [{"$ref": _REF + definition}]}


def _type_schema(t: ClientType, refs: set[str]) -> JSON:
    if t.kind == "model":
        definition = definition_of(t.name)
        refs.add(definition)
        return {**_ref(definition), "default": {}}
    if t.kind == "list" and t.inner:
        return {"type": "array", "items": _type_schema(t.inner, refs)}
    if t.kind == "map" and t.inner:
        return {"type": "object", "additionalProperties": _type_schema(t.inner, refs)}
    if t.kind == "scalar":
        return {"type": t.name, **({"format": t.fmt} if t.fmt else {})}
    if t.kind in ("time", "intstr"):
        definition = _TIME if t.kind == "time" else _INT_OR_STRING
        refs.add(definition)
        return _ref(definition)
    if t.kind == "object":
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {"x-kubernetes-preserve-unknown-fields": True}


def _copy_extensions(ext: Extensions) -> JSON:
    return {k: list(v) if isinstance(v, list) else v for k, v in ext.items()}


@cache
def _model_schema(model: str) -> tuple[JSON, frozenset[str]]:
    """The component schema of one model and the definitions it references."""
    definition = definition_of(model)
    refs: set[str] = set()
    properties: JSON = {}
    required: list[str] = []
    for name, f in fields_of(model).items():
        prop = _type_schema(f.type, refs)
        if f.description:
            prop["description"] = f.description
        prop.update(_copy_extensions(field_extensions(definition, name)))
        properties[name] = prop
        if f.required:
            required.append(name)
    schema: JSON = {"description": class_description(model), "properties": properties, "type": "object"}
    if required:
        schema["required"] = required
    if definition in ATOMIC_STRUCTS:
        schema["x-kubernetes-map-type"] = "atomic"
    if model in model_gvks():
        schema["x-kubernetes-group-version-kind"] = [dict(g) for g in model_gvks()[model]]
    return schema, frozenset(refs)


def _closure(definitions: Iterable[str]) -> dict[str, JSON]:
    """Component schemas for the given definitions and everything they reference."""
    out: dict[str, JSON] = {}
    stack = list(definitions)
    by_definition = models_by_definition()
    while stack:
        definition = stack.pop()
        if definition in out:
            continue
        if definition in _SPECIAL_SCHEMAS:
            out[definition] = _SPECIAL_SCHEMAS[definition]
            continue
        model = by_definition.get(definition)
        if model is None:
            continue
        out[definition], refs = _model_schema(model)
        stack.extend(refs)
    return dict(sorted(out.items()))


# ---------------------------------------------------------------------------
# Paths
# ---------------------------------------------------------------------------

_PATCH_TYPES: Final = (
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
)


def _param(name: str, where: str, description: str, json_type: str = "string") -> JSON:
    param: JSON = {
        "description": description,
        "in": where,
        "name": name,
        "schema": {"type": json_type, "uniqueItems": True},
    }
    if where == "path":
        param["required"] = True
    return param


_PRETTY: Final = _param("pretty", "query", "If 'true', then the output is pretty printed.")
_DRY_RUN: Final = _param(
    "dryRun", "query", "When present, indicates that modifications should not be persisted."
)
_FIELD_MANAGER: Final = _param(
    "fieldManager", "query", "A name associated with the actor making these changes."
)
_FIELD_VALIDATION: Final = _param(
    "fieldValidation",
    "query",
    "How the server handles objects with unknown or duplicate fields: Ignore, Warn or Strict.",
)
_FORCE: Final = _param("force", "query", "Force apply requests to take over conflicting fields.", "boolean")
_WRITE_PARAMS: Final = (_DRY_RUN, _FIELD_MANAGER, _FIELD_VALIDATION)
_LIST_PARAMS: Final = (
    _param("allowWatchBookmarks", "query", "Requests watch events of type BOOKMARK.", "boolean"),
    _param("continue", "query", "The continue token from a previous paginated list call."),
    _param("fieldSelector", "query", "A selector restricting the returned objects by their fields."),
    _param("labelSelector", "query", "A selector restricting the returned objects by their labels."),
    _param("limit", "query", "The maximum number of objects to return in one list call.", "integer"),
    _param("resourceVersion", "query", "Which resource version the request is served from."),
    _param("resourceVersionMatch", "query", "How resourceVersion is applied to list calls."),
    _param(
        "sendInitialEvents", "query", "Start a watch with synthetic events for existing objects.", "boolean"
    ),
    _param("timeoutSeconds", "query", "Timeout for the list or watch call.", "integer"),
    _param("watch", "query", "Watch for changes instead of listing.", "boolean"),
)
_DELETE_PARAMS: Final = (
    _DRY_RUN,
    _param("gracePeriodSeconds", "query", "Seconds before the object should be deleted.", "integer"),
    _param("propagationPolicy", "query", "Whether and how garbage collection is performed."),
)


@dataclass(frozen=True)
class _Target:
    """What a set of paths serves: the resource and the definitions of its kind and list."""

    rt: ResourceType
    kind_ref: str
    list_ref: str
    strategic_merge: bool


def _content(definition: str) -> JSON:
    schema = {"$ref": _REF + definition}
    return {"application/json": {"schema": schema}, "application/yaml": {"schema": schema}}


def _operation(
    action: str,
    operation_id: str,
    gvk: Mapping[str, str],
    response: str,
    *,
    params: Iterable[JSON] = (),
    body: str | None = None,
    codes: Iterable[str] = ("200",),
) -> JSON:
    op: JSON = {
        "description": f"{action} {gvk['kind']}",
        "operationId": operation_id,
        "responses": {code: {"content": _content(response), "description": "OK"} for code in codes},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": dict(gvk),
    }
    op["responses"]["401"] = {"description": "Unauthorized"}
    if params:
        op["parameters"] = list(params)
    if body:
        op["requestBody"] = {"content": {"*/*": {"schema": {"$ref": _REF + body}}}, "required": True}
    return op


def _patch_operation(operation_id: str, gvk: Mapping[str, str], response: str, strategic_merge: bool) -> JSON:
    op = _operation(
        "patch", operation_id, gvk, response, params=(*_WRITE_PARAMS, _FORCE), codes=("200", "201")
    )
    types = _PATCH_TYPES if strategic_merge else tuple(t for t in _PATCH_TYPES if "strategic" not in t)
    op["requestBody"] = {"content": {t: {"schema": {"$ref": _REF + _PATCH}} for t in types}, "required": True}
    return op


def _operation_id_stem(group: str, version: str) -> str:
    """Upstream's operation ids name the group version: 'CoreV1', 'RbacAuthorizationV1'."""
    words = (group.removesuffix(".k8s.io") or "core").replace("-", ".").split(".")
    return "".join(w[:1].upper() + w[1:] for w in words) + version[:1].upper() + version[1:]


def _resource_paths(target: _Target) -> tuple[dict[str, JSON], set[str]]:
    """Paths of one resource and the extra definitions (Scale, Status, ...) their operations use."""
    rt = target.rt
    prefix = f"/apis/{rt.group}/{rt.version}" if rt.group else f"/api/{rt.version}"
    scope = "/namespaces/{namespace}" if rt.namespaced else ""
    stem = _operation_id_stem(rt.group, rt.version) + ("Namespaced" if rt.namespaced else "")
    gvk = {"group": rt.group, "kind": rt.kind, "version": rt.version}
    status = f"{_META}.Status"
    refs = {target.kind_ref, target.list_ref, status, _PATCH, f"{_META}.DeleteOptions"}

    namespace = _param("namespace", "path", "object name and auth scope, such as for teams and projects")
    scope_params = [namespace] if rt.namespaced else []
    name = _param("name", "path", f"name of the {rt.kind}")
    collection_params = [*scope_params, _PRETTY]
    item_params = [name, *scope_params, _PRETTY]

    def with_validation(params: list[JSON], ops: JSON) -> JSON:
        # kubectl looks for fieldValidation on PATCH operations; declaring it on the path too
        # keeps every write path self-describing.
        writes = {"post", "put", "patch"} & ops.keys()
        return {**ops, "parameters": params + ([_FIELD_VALIDATION] if writes else [])}

    paths: dict[str, JSON] = {}
    verbs = set(rt.verbs)
    collection: JSON = {}
    if "list" in verbs:
        collection["get"] = _operation(
            "list", f"list{stem}{rt.kind}", gvk, target.list_ref, params=_LIST_PARAMS
        )
    if "create" in verbs:
        collection["post"] = _operation(
            "post",
            f"create{stem}{rt.kind}",
            gvk,
            target.kind_ref,
            params=_WRITE_PARAMS,
            body=target.kind_ref,
            codes=("200", "201", "202"),
        )
    if "deletecollection" in verbs:
        collection["delete"] = _operation(
            "deletecollection",
            f"deletecollection{stem}{rt.kind}",
            gvk,
            status,
            params=(*_DELETE_PARAMS, *_LIST_PARAMS),
        )
    if collection:
        paths[f"{prefix}{scope}/{rt.resource}"] = with_validation(collection_params, collection)
    if rt.namespaced and "list" in verbs:
        paths[f"{prefix}/{rt.resource}"] = {
            "get": _operation(
                "list",
                f"list{_operation_id_stem(rt.group, rt.version)}{rt.kind}ForAllNamespaces",
                gvk,
                target.list_ref,
                params=_LIST_PARAMS,
            ),
            "parameters": [_PRETTY],
        }

    item: JSON = {}
    if "get" in verbs:
        item["get"] = _operation("get", f"read{stem}{rt.kind}", gvk, target.kind_ref)
    if "update" in verbs:
        item["put"] = _operation(
            "put",
            f"replace{stem}{rt.kind}",
            gvk,
            target.kind_ref,
            params=_WRITE_PARAMS,
            body=target.kind_ref,
            codes=("200", "201"),
        )
    if "patch" in verbs:
        item["patch"] = _patch_operation(
            f"patch{stem}{rt.kind}", gvk, target.kind_ref, target.strategic_merge
        )
    if "delete" in verbs:
        item["delete"] = _operation(
            "delete",
            f"delete{stem}{rt.kind}",
            gvk,
            target.kind_ref,
            params=_DELETE_PARAMS,
            body=f"{_META}.DeleteOptions",
            codes=("200", "202"),
        )
    item_path = f"{prefix}{scope}/{rt.resource}/{{name}}"
    if item:
        paths[item_path] = with_validation(item_params, item)

    for sub in rt.subresources:
        ops = _subresource_operations(sub, f"{stem}{rt.kind}", gvk, target, refs)
        if ops:
            paths[f"{item_path}/{sub}"] = with_validation(item_params, ops)
    return paths, refs


def _subresource_operations(
    sub: str, id_stem: str, gvk: Mapping[str, str], target: _Target, refs: set[str]
) -> JSON:
    suffix = sub[:1].upper() + sub[1:]
    read_write = {
        "status": (gvk, target.kind_ref),
        "ephemeralcontainers": (gvk, target.kind_ref),
        "resize": (gvk, target.kind_ref),
        "approval": (gvk, target.kind_ref),
        "scale": (_subresource_gvk("V1Scale"), definition_of("V1Scale")),
    }
    creates = {"binding": "V1Binding", "eviction": "V1Eviction", "token": "AuthenticationV1TokenRequest"}
    if sub in read_write:
        sub_gvk, ref = read_write[sub]
        refs.add(ref)
        return {
            "get": _operation("get", f"read{id_stem}{suffix}", sub_gvk, ref),
            "put": _operation(
                "put",
                f"replace{id_stem}{suffix}",
                sub_gvk,
                ref,
                params=_WRITE_PARAMS,
                body=ref,
                codes=("200", "201"),
            ),
            "patch": _patch_operation(f"patch{id_stem}{suffix}", sub_gvk, ref, target.strategic_merge),
        }
    if sub == "finalize":
        refs.add(target.kind_ref)
        return {
            "put": _operation(
                "put",
                f"replace{id_stem}{suffix}",
                gvk,
                target.kind_ref,
                params=_WRITE_PARAMS,
                body=target.kind_ref,
                codes=("200", "201"),
            )
        }
    if sub in creates:
        model = creates[sub]
        ref = definition_of(model)
        refs.add(ref)
        return {
            "post": _operation(
                "post",
                f"create{id_stem}{suffix}",
                _subresource_gvk(model),
                ref,
                params=_WRITE_PARAMS,
                body=ref,
                codes=("200", "201", "202"),
            )
        }
    if sub == "log":
        op = _operation("get", f"read{id_stem}Log", gvk, target.kind_ref)
        op["responses"]["200"] = {
            "content": {"text/plain": {"schema": {"type": "string"}}},
            "description": "OK",
        }
        return {"get": op}
    return {}


def _subresource_gvk(model: str) -> dict[str, str]:
    group, version, kind = SUBRESOURCE_KINDS[model]
    return {"group": group, "kind": kind, "version": version}


# ---------------------------------------------------------------------------
# Documents
# ---------------------------------------------------------------------------


def _document(paths: Mapping[str, JSON], schemas: Mapping[str, JSON]) -> JSON:
    return {
        "components": {"schemas": dict(sorted(schemas.items()))},
        "info": {"title": "Kubernetes", "version": "unversioned"},
        "openapi": "3.0.0",
        "paths": dict(sorted(paths.items())),
    }


def _digest(doc: JSON) -> str:
    encoded = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha512(encoded).hexdigest().upper()


@lru_cache(maxsize=64)
def _builtin_parts(types: tuple[ResourceType, ...]) -> tuple[dict[str, JSON], dict[str, JSON]]:
    paths: dict[str, JSON] = {}
    refs: set[str] = set()
    for rt in types:
        assert rt.model is not None
        target = _Target(rt, definition_of(rt.model), definition_of(rt.model + "List"), strategic_merge=True)
        rt_paths, rt_refs = _resource_paths(target)
        paths.update(rt_paths)
        refs |= rt_refs
    return paths, _closure(refs)


@lru_cache(maxsize=64)
def _builtin_document(types: tuple[ResourceType, ...]) -> tuple[JSON, str]:
    doc = _document(*_builtin_parts(types))
    return doc, _digest(doc)


def _crd_definition(group: str, version: str, kind: str) -> str:
    """Upstream names CR schemas by the reversed group: stable.example.com -> com.example.stable."""
    return ".".join([*reversed(group.split(".")), version, kind])


def crd_definitions(crds: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """Names of the definitions custom resources add: their kinds and list kinds, per served version."""
    out: set[str] = set()
    for crd in crds:
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        kind = names.get("kind", "")
        for v in spec.get("versions") or []:
            for k in (kind, names.get("listKind") or kind + "List"):
                out.add(_crd_definition(spec.get("group", ""), v.get("name", ""), k))
    return frozenset(out)


@lru_cache(maxsize=64)
def _crd_parts(
    group: str, version: str, types: tuple[ResourceType, ...], crds_json: str
) -> tuple[JSON, JSON]:
    """Paths and schemas of a group/version's custom resources; keyed by the CRDs' JSON for caching."""
    crds = json.loads(crds_json)
    paths: JSON = {}
    refs: set[str] = set()
    schemas: JSON = {}
    for rt in types:
        crd = crd_for(crds, group, plural=rt.resource)
        if crd is None:
            continue
        names = crd["spec"]["names"]
        kind = names.get("kind", rt.kind)
        list_kind = names.get("listKind") or kind + "List"
        kind_ref = _crd_definition(group, version, kind)
        list_ref = _crd_definition(group, version, list_kind)
        schema = json.loads(json.dumps(crd_schema(crd, version)))
        schema.setdefault("type", "object")
        schema["properties"] = {
            **(schema.get("properties") or {}),
            "apiVersion": {"description": "APIVersion of the object", "type": "string"},
            "kind": {"description": "Kind of the object", "type": "string"},
            "metadata": {**_ref(f"{_META}.ObjectMeta"), "description": "Standard object's metadata."},
        }
        schema["x-kubernetes-group-version-kind"] = [{"group": group, "kind": kind, "version": version}]
        schemas[kind_ref] = schema
        schemas[list_ref] = {
            "description": f"{list_kind} is a list of {kind}",
            "properties": {
                "apiVersion": {"type": "string"},
                "items": {"items": {**_ref(kind_ref)}, "type": "array"},
                "kind": {"type": "string"},
                "metadata": {**_ref(f"{_META}.ListMeta"), "default": {}},
            },
            "required": ["items"],
            "type": "object",
            "x-kubernetes-group-version-kind": [{"group": group, "kind": list_kind, "version": version}],
        }
        rt_paths, rt_refs = _resource_paths(_Target(rt, kind_ref, list_ref, strategic_merge=False))
        paths.update(rt_paths)
        refs |= rt_refs | {f"{_META}.ObjectMeta", f"{_META}.ListMeta"}
    return paths, {**_closure(refs - schemas.keys()), **schemas}


def _crds_key(crds: Iterable[Mapping[str, Any]], group: str) -> str:
    mine = [crd for crd in crds if (crd.get("spec") or {}).get("group") == group]
    return json.dumps(mine, sort_keys=True)


def _document_and_digest(registry: Registry, group: str, version: str, crds: list[JSON]) -> tuple[JSON, str]:
    types = registry.in_group_version(group, version)
    builtin = tuple(rt for rt in types if rt.model)
    custom = tuple(rt for rt in types if not rt.model)
    if not custom:
        return _builtin_document(builtin)
    paths, schemas = _builtin_parts(builtin) if builtin else ({}, {})
    crd_paths, crd_schemas = _crd_parts(group, version, custom, _crds_key(crds, group))
    doc = _document({**paths, **crd_paths}, {**schemas, **crd_schemas})
    return doc, _digest(doc)


def group_version_document(registry: Registry, group: str, version: str, crds: list[JSON]) -> JSON:
    """The OpenAPI 3.0 document of one group/version ("" is the core group). Read-only: it is shared."""
    return _document_and_digest(registry, group, version, crds)[0]


def openapi_v3_root(registry: Registry, crds: list[JSON]) -> JSON:
    """The /openapi/v3 index: every served group/version with a URL that changes when its document does."""
    paths: JSON = {}
    for group, versions in registry.groups().items():
        for version in versions:
            key = f"apis/{group}/{version}" if group else f"api/{version}"
            digest = _document_and_digest(registry, group, version, crds)[1]
            paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
    return {"paths": dict(sorted(paths.items()))}
