"""The official Python client's models, read as the schemas of built-in kinds.

- `definition_of` names a model ('V1Deployment') as upstream's OpenAPI does
  ('io.k8s.api.apps.v1.Deployment'). The client drops the Go package from most names, so a
  model takes the group of the first served kind that reaches it, core kinds first.
- `fields_of` reflects a model's fields (JSON name, parsed type, description, required).
- `builtin_model` is the model of a served kind or of a kind subresources read and write;
  None for custom resources.

Callers: `openapi_v3` (component schemas), `patchtypes` and `unknownfields` (walking a
kind's fields). Everything is cached for the life of the process, as the models never change.
"""

from __future__ import annotations

import re
import typing
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

import kubernetes.client.models as client_models

from kcm_apiserver.registry import BUILTIN, Registry

OBJECT_META_MODEL: Final = "V1ObjectMeta"


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
    "apiregistration.k8s.io": "io.k8s.kube-aggregator.pkg.apis.apiregistration",
}

# Kinds that subresources read and write, beyond those the registry serves as resources.
SUBRESOURCE_KINDS: Final = {
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
    roots += [(model, gvk[0]) for model, gvk in SUBRESOURCE_KINDS.items()]
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
            for f in fields_of(model).values():
                stack.extend(f.type.models())
    return out


def definition_of(model: str) -> str:
    """Upstream's OpenAPI name of a model: 'V1Deployment' -> 'io.k8s.api.apps.v1.Deployment'."""
    package = _packages().get(model)
    _, version, name = _split_model(model)
    return f"{package or _group_package('') + '.' + version}.{name}"


@cache
def models_by_definition() -> dict[str, str]:
    """Definition name -> model, for every model a served kind reaches."""
    return {definition_of(model): model for model in _packages()}


@cache
def model_gvks() -> dict[str, list[dict[str, str]]]:
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
    for model, (group, version, kind) in SUBRESOURCE_KINDS.items():
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
class ClientType:
    """A parsed client type: 'model', 'list', 'map', 'scalar', 'time', 'intstr', 'object' or 'any'."""

    kind: str
    name: str = ""  # model name, or the JSON type of a scalar
    fmt: str = ""
    inner: ClientType | None = None

    def models(self) -> list[str]:
        if self.kind == "model":
            return [self.name]
        return self.inner.models() if self.inner else []


@dataclass(frozen=True)
class ClientField:
    """One field of a client model, under its JSON name."""

    json_name: str
    type: ClientType
    description: str
    required: bool


def _parse_type(spec: str, annotation: Any) -> ClientType:
    """Read the client's type strings: 'List[V1Container]', 'Dict[str, str]', 'V1PodSpec', 'object'..."""
    if m := re.fullmatch(r"(?:List|list)\[(.+)\]", spec):
        return ClientType("list", inner=_parse_type(m.group(1), None))
    if m := re.fullmatch(r"Dict\[str, (.+)\]|dict\(str, (.+)\)", spec):
        return ClientType("map", inner=_parse_type(m.group(1) or m.group(2), None))
    if spec in _SCALARS:
        json_type, fmt = _SCALARS[spec]
        return ClientType("scalar", json_type, fmt)
    if spec == "datetime":
        return ClientType("time")
    if spec == "object":
        return _classify_object(annotation)
    if _model_class(spec) is not None:
        return ClientType("model", spec)
    return ClientType("any")


def _classify_object(annotation: Any) -> ClientType:
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
        return ClientType("intstr")
    if leaves == {dict}:
        return ClientType("object")
    return ClientType("any")


@cache
def fields_of(model: str) -> dict[str, ClientField]:
    """JSON field name -> field of a client model."""
    cls = _model_class(model)
    if cls is None:
        return {}
    out: dict[str, ClientField] = {}
    for attr, spec in cls.openapi_types.items():
        info = cls.model_fields.get(attr)
        out[cls.attribute_map[attr]] = ClientField(
            json_name=cls.attribute_map[attr],
            type=_parse_type(spec, info.annotation if info else None),
            description=(info.description or "") if info else "",
            required=bool(info and info.is_required()),
        )
    return out


def class_description(model: str) -> str:
    """The model's description: its class docstring without the attribute list."""
    doc = _model_class(model).__doc__ or ""
    return " ".join(doc.split("Attributes:")[0].split())


def builtin_model(registry: Registry, group: str, version: str, kind: str) -> str | None:
    """The client model of a served or subresource kind; None for custom resources and unknown kinds."""
    rt = registry.by_kind(group, version, kind)
    if rt is not None:
        return rt.model
    for model, gvk in SUBRESOURCE_KINDS.items():
        if gvk == (group, version, kind):
            return model
    return None
