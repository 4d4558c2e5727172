"""OpenAPI v3 documents, patch type information and unknown-field checks for every served kind.

The HTTP layer serves `openapi_v3_root` at /openapi/v3 and `group_version_document`
at /openapi/v3/api/v1 and /openapi/v3/apis/<group>/<version>; kubectl reads them to
`explain` kinds, to learn that the server validates fields itself (the
`fieldValidation` parameter on PATCH operations) and to compute strategic merge
patches (the `x-kubernetes-patch-*` property extensions); `openapi_v2` rewrites the same
documents as /openapi/v2, naming CRD definitions through `crd_definitions`. The patch and apply
engines call `type_info`; create, update and patch handlers call `unknown_fields`
for fieldValidation=Strict and Warn.

Built-in schemas are generated from the official Python client's models (field
names, types, descriptions, required fields) plus `patch_meta`, which holds the
patch and list metadata the client lacks. Custom resources use their CRD's
`openAPIV3Schema`. Generated parts are cached and shared between callers, so
callers must treat returned documents as read-only.
"""

from __future__ import annotations

import hashlib
import json
import re
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import Any, Final

import kubernetes.client.models as client_models

from .patch_meta import ATOMIC_STRUCTS, Extensions, field_extensions
from .registry import BUILTIN, Registry, ResourceType
from .typeinfo import TypeInfo

JSON = dict[str, Any]

_REF: Final = "#/components/schemas/"
_META: Final = "io.k8s.apimachinery.pkg.apis.meta.v1"
_TIME: Final = f"{_META}.Time"
_PATCH: Final = f"{_META}.Patch"
_INT_OR_STRING: Final = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_OBJECT_META_MODEL: Final = "V1ObjectMeta"

# ---------------------------------------------------------------------------
# Client model names -> upstream definition names
# ---------------------------------------------------------------------------

_MODEL_NAME = re.compile(r"(?P<group>[A-Z][a-z]+)?(?P<version>V\d+(?:alpha\d+|beta\d+)?)(?P<name>[A-Z].*)")

# Models from k8s.io/apimachinery's meta/v1 package: the client names them like any other v1 type.
_META_MODELS: Final = frozenset(
    {
        "V1ObjectMeta",
        "V1ListMeta",
        "V1OwnerReference",
        "V1ManagedFieldsEntry",
        "V1LabelSelector",
        "V1LabelSelectorRequirement",
        "V1Condition",
        "V1Status",
        "V1StatusDetails",
        "V1StatusCause",
        "V1DeleteOptions",
        "V1Preconditions",
        "V1WatchEvent",
        "V1APIResource",
        "V1APIResourceList",
        "V1APIGroup",
        "V1APIGroupList",
        "V1APIVersions",
        "V1GroupVersionForDiscovery",
        "V1ServerAddressByClientCIDR",
    }
)

# core/v1 types that no served core kind reaches, so the walk below would file them under another group.
_CORE_ONLY_ELSEWHERE: Final = frozenset({"V1TopologySelectorTerm", "V1TopologySelectorLabelRequirement"})

_GROUP_PACKAGES: Final = {
    "": "io.k8s.api.core",
    "core": "io.k8s.api.core",
    "apiextensions.k8s.io": "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions",
    "apiextensions": "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions",
    "apiregistration": "io.k8s.kube-aggregator.pkg.apis.apiregistration",
}

# Kinds that subresources read and write, beyond those the registry serves as resources.
_SUBRESOURCE_KINDS: Final = {
    "V1Scale": ("autoscaling", "v1", "Scale"),
    "V1Binding": ("", "v1", "Binding"),
    "V1Eviction": ("policy", "v1", "Eviction"),
    "AuthenticationV1TokenRequest": ("authentication.k8s.io", "v1", "TokenRequest"),
    "V1Status": ("", "v1", "Status"),
}


def _group_package(group: str) -> str:
    return _GROUP_PACKAGES.get(group) or "io.k8s.api." + group.split(".")[0]


def _split_model(model: str) -> tuple[str | None, str, str]:
    """'CoreV1Event' -> ('core', 'v1', 'Event'); 'V1Pod' -> (None, 'v1', 'Pod')."""
    m = _MODEL_NAME.fullmatch(model)
    if not m:
        return None, "v1", model
    group = m.group("group")
    return (group.lower() if group else None), m.group("version").lower(), m.group("name")


def _model_class(model: str) -> Any:
    return getattr(client_models, model, None)


@cache
def _packages() -> dict[str, str]:
    """Model name -> Go package ('io.k8s.api.apps.v1') for every model a served kind reaches.

    The client drops the package from unprefixed names (V1DeploymentSpec), so a model
    inherits the group of the first kind that reaches it; core kinds go first because
    other groups embed core types (PodTemplateSpec) but not the other way round.
    """
    roots: list[tuple[str, str]] = []
    for rt in sorted(BUILTIN, key=lambda rt: rt.group != ""):
        if rt.model:
            roots += [(rt.model, rt.group), (rt.model + "List", rt.group)]
    roots += [(model, gvk[0]) for model, gvk in _SUBRESOURCE_KINDS.items()]
    out: dict[str, str] = {}
    for root, group in roots:
        stack = [root]
        while stack:
            model = stack.pop()
            if model in out or _model_class(model) is None:
                continue
            prefix, version, _ = _split_model(model)
            if model in _META_MODELS:
                base = "io.k8s.apimachinery.pkg.apis.meta"
            elif prefix is not None:
                base = _group_package(prefix)
            elif model in _CORE_ONLY_ELSEWHERE:
                base = _group_package("")
            else:
                base = _group_package(group)
            out[model] = f"{base}.{version}"
            for f in _fields(model).values():
                stack.extend(f.type.models())
    return out


def _definition(model: str) -> str:
    package = _packages().get(model)
    _, version, name = _split_model(model)
    return f"{package or _group_package('') + '.' + version}.{name}"


@cache
def _models_by_definition() -> dict[str, str]:
    return {_definition(model): model for model in _packages()}


@cache
def _gvks() -> dict[str, list[dict[str, str]]]:
    """Model -> the x-kubernetes-group-version-kind list of the definition it becomes."""
    out: dict[str, list[dict[str, str]]] = {}

    def add(model: str, group: str, version: str, kind: str) -> None:
        gvk = {"group": group, "kind": kind, "version": version}
        if gvk not in out.setdefault(model, []):
            out[model].append(gvk)

    for rt in BUILTIN:
        if rt.model:
            add(rt.model, rt.group, rt.version, rt.kind)
            add(rt.model + "List", rt.group, rt.version, rt.kind + "List")
    for model, (group, version, kind) in _SUBRESOURCE_KINDS.items():
        add(model, group, version, kind)
    return out


# ---------------------------------------------------------------------------
# Model reflection
# ---------------------------------------------------------------------------

_SCALARS: Final = {
    "str": ("string", ""),
    "int": ("integer", ""),
    "bool": ("boolean", ""),
    "float": ("number", "double"),
    "bytes": ("string", "byte"),
}


@dataclass(frozen=True)
class _Type:
    """A parsed client type: 'model', 'list', 'map', 'scalar', 'time', 'intstr', 'object' or 'any'."""

    kind: str
    name: str = ""  # model name, or the JSON type of a scalar
    fmt: str = ""
    inner: _Type | None = None

    def models(self) -> list[str]:
        if self.kind == "model":
            return [self.name]
        return self.inner.models() if self.inner else []


@dataclass(frozen=True)
class _Field:
    json_name: str
    type: _Type
    description: str
    required: bool


def _parse_type(spec: str, annotation: Any) -> _Type:
    """Read the client's type strings: 'List[V1Container]', 'Dict[str, str]', 'V1PodSpec', 'object'..."""
    if m := re.fullmatch(r"(?:List|list)\[(.+)\]", spec):
        return _Type("list", inner=_parse_type(m.group(1), None))
    if m := re.fullmatch(r"Dict\[str, (.+)\]|dict\(str, (.+)\)", spec):
        return _Type("map", inner=_parse_type(m.group(1) or m.group(2), None))
    if spec in _SCALARS:
        json_type, fmt = _SCALARS[spec]
        return _Type("scalar", json_type, fmt)
    if spec == "datetime":
        return _Type("time")
    if spec == "object":
        return _classify_object(annotation)
    if _model_class(spec) is not None:
        return _Type("model", spec)
    return _Type("any")


def _classify_object(annotation: Any) -> _Type:
    """The client types IntOrString, RawExtension and free-form JSON all as 'object'."""
    leaves: set[Any] = set()
    stack = [annotation]
    while stack:
        item = stack.pop()
        args = typing.get_args(item)
        origin = typing.get_origin(item)
        if origin is typing.Annotated:
            leaves.add(args[0])
        elif args and origin is not dict:
            stack.extend(args)
        else:
            leaves.add(origin or item)
    leaves.discard(type(None))
    if leaves == {int, str}:
        return _Type("intstr")
    if leaves == {dict}:
        return _Type("object")
    return _Type("any")


@cache
def _fields(model: str) -> dict[str, _Field]:
    """JSON field name -> field of a client model."""
    cls = _model_class(model)
    if cls is None:
        return {}
    out: dict[str, _Field] = {}
    for attr, spec in cls.openapi_types.items():
        info = cls.model_fields.get(attr)
        out[cls.attribute_map[attr]] = _Field(
            json_name=cls.attribute_map[attr],
            type=_parse_type(spec, info.annotation if info else None),
            description=(info.description or "") if info else "",
            required=bool(info and info.is_required()),
        )
    return out


def _class_description(model: str) -> str:
    doc = _model_class(model).__doc__ or ""
    return " ".join(doc.split("Attributes:")[0].split())


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


def _type_schema(t: _Type, refs: set[str]) -> JSON:
    if t.kind == "model":
        definition = _definition(t.name)
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
    definition = _definition(model)
    refs: set[str] = set()
    properties: JSON = {}
    required: list[str] = []
    for name, f in _fields(model).items():
        prop = _type_schema(f.type, refs)
        if f.description:
            prop["description"] = f.description
        prop.update(_copy_extensions(field_extensions(definition, name)))
        properties[name] = prop
        if f.required:
            required.append(name)
    schema: JSON = {"description": _class_description(model), "properties": properties, "type": "object"}
    if required:
        schema["required"] = required
    if definition in ATOMIC_STRUCTS:
        schema["x-kubernetes-map-type"] = "atomic"
    if model in _gvks():
        schema["x-kubernetes-group-version-kind"] = [dict(g) for g in _gvks()[model]]
    return schema, frozenset(refs)


def _closure(definitions: Iterable[str]) -> dict[str, JSON]:
    """Component schemas for the given definitions and everything they reference."""
    out: dict[str, JSON] = {}
    stack = list(definitions)
    by_definition = _models_by_definition()
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
        "scale": (_subresource_gvk("V1Scale"), _definition("V1Scale")),
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
        ref = _definition(model)
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
    group, version, kind = _SUBRESOURCE_KINDS[model]
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
        target = _Target(rt, _definition(rt.model), _definition(rt.model + "List"), strategic_merge=True)
        rt_paths, rt_refs = _resource_paths(target)
        paths.update(rt_paths)
        refs |= rt_refs
    return paths, _closure(refs)


@lru_cache(maxsize=64)
def _builtin_document(types: tuple[ResourceType, ...]) -> tuple[JSON, str]:
    doc = _document(*_builtin_parts(types))
    return doc, _digest(doc)


def _crd_for(crds: Iterable[Mapping[str, Any]], group: str, plural: str = "", kind: str = "") -> JSON | None:
    for crd in crds:
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        if spec.get("group") == group and (names.get("plural") == plural or names.get("kind") == kind):
            return dict(crd)
    return None


def _crd_version(crd: Mapping[str, Any], version: str) -> JSON | None:
    for v in (crd.get("spec") or {}).get("versions") or []:
        if v.get("name") == version:
            return dict(v)
    return None


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


def _crd_schema(crd: Mapping[str, Any], version: str) -> JSON:
    v = _crd_version(crd, version) or {}
    schema = (v.get("schema") or {}).get("openAPIV3Schema")
    return (
        schema
        if isinstance(schema, dict)
        else {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    )


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
        crd = _crd_for(crds, group, plural=rt.resource)
        if crd is None:
            continue
        names = crd["spec"]["names"]
        kind = names.get("kind", rt.kind)
        list_kind = names.get("listKind") or kind + "List"
        kind_ref = _crd_definition(group, version, kind)
        list_ref = _crd_definition(group, version, list_kind)
        schema = json.loads(json.dumps(_crd_schema(crd, version)))
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


# ---------------------------------------------------------------------------
# Type information for patch and apply
# ---------------------------------------------------------------------------


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
def _builtin_node(t: _Type, meta: _Meta) -> TypeInfo | None:
    if t.kind == "model":
        model = t.name
        atomic = "atomic" if _definition(model) in ATOMIC_STRUCTS else meta.map_type
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
    f = _fields(model).get(name)
    if f is None:
        return None
    return _builtin_node(f.type, _meta(field_extensions(_definition(model), name)))


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
                return _builtin_node(_Type("model", _OBJECT_META_MODEL), _NO_META)
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


def _builtin_model(registry: Registry, group: str, version: str, kind: str) -> str | None:
    rt = registry.by_kind(group, version, kind)
    if rt is not None:
        return rt.model
    for model, gvk in _SUBRESOURCE_KINDS.items():
        if gvk == (group, version, kind):
            return model
    return None


def _custom_schema(crds: Iterable[Mapping[str, Any]], group: str, version: str, kind: str) -> JSON | None:
    crd = _crd_for(crds, group, kind=kind)
    if crd is None or _crd_version(crd, version) is None:
        return None
    return _crd_schema(crd, version)


def type_info(registry: Registry, group: str, version: str, kind: str, crds: list[JSON]) -> TypeInfo | None:
    """The schema of a kind as patch and apply see it; None when the kind is unknown."""
    model = _builtin_model(registry, group, version, kind)
    if model is not None:
        return _builtin_node(_Type("model", model), _NO_META)
    schema = _custom_schema(crds, group, version, kind)
    return None if schema is None else _schema_node(schema, resource_root=True)


# ---------------------------------------------------------------------------
# Unknown fields
# ---------------------------------------------------------------------------


_ABSENT = object()
# An unknown field found: its JSON path, the object holding it and its key there.
_Unknown = tuple[str, dict[str, Any], str]


def _unknown_in_type(t: _Type, value: Any, path: str, out: list[_Unknown], was: Any = _ABSENT) -> None:
    """Unknown fields of `value`, skipping each part equal to the same part of `was` (what a
    patch was applied to): C-speed equality spares the walk of what the patch left alone."""
    if was is not _ABSENT and value == was:
        return
    if t.kind == "model" and isinstance(value, dict):
        fields = _fields(t.name)
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
            _unknown_in_type(_Type("model", _OBJECT_META_MODEL), sub, here, out)
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
    model = _builtin_model(registry, group, version, kind)
    if model is not None:
        _unknown_in_type(_Type("model", model), obj, "", found, _ABSENT if unchanged is None else unchanged)
    else:
        schema = _custom_schema(crds, group, version, kind)
        if schema is not None:
            _unknown_in_schema(schema, obj, "", found, resource_root=True)
    if drop:
        for _, holder, key in found:
            holder.pop(key, None)
    return [path for path, _, _ in found]
