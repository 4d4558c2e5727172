"""The schema of a custom resource: its CRD, and the `openAPIV3Schema` of one of its versions.

`custom_schema` is what `patchtypes` and `unknownfields` walk for a custom kind (None when no
CRD serves that group, version and kind); `openapi_v3` builds custom resources' documents
from `crd_for` and `crd_schema`. CRDs come in as stored (`crds.CrdRegistrar.crds()`);
nothing is cached here. A version without a schema reads as an object that keeps unknown fields.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

JSON = dict[str, Any]


def crd_for(crds: Iterable[Mapping[str, Any]], group: str, plural: str = "", kind: str = "") -> JSON | None:
    """The CRD serving `group` under the resource name `plural` or the kind `kind`; None if none does."""
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


def crd_schema(crd: Mapping[str, Any], version: str) -> JSON:
    """The `openAPIV3Schema` of one version; a schemaless version keeps every field."""
    v = _crd_version(crd, version) or {}
    schema = (v.get("schema") or {}).get("openAPIV3Schema")
    return (
        schema
        if isinstance(schema, dict)
        else {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    )


def custom_schema(crds: Iterable[Mapping[str, Any]], group: str, version: str, kind: str) -> JSON | None:
    """The schema of a custom kind at `version`; None when no CRD serves it."""
    crd = crd_for(crds, group, kind=kind)
    if crd is None or _crd_version(crd, version) is None:
        return None
    return crd_schema(crd, version)
