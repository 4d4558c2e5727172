"""The type information that patching and server-side apply need about a field.

`schemas.patchtypes` builds these from the official client's models plus upstream's patch
metadata; `patch` (strategic merge) and `apply` (managed fields) only read them.
A `None` where a `TypeInfo` is expected means "unknown type": treat the value as
opaque JSON (what upstream does for custom resources without a schema).
"""

from __future__ import annotations

from typing import Protocol


class TypeInfo(Protocol):
    """One node of a kind's schema, as seen by patch and apply logic."""

    @property
    def kind(self) -> str:
        """'object' (named fields), 'map' (free-form string keys), 'array' or 'scalar'."""

    @property
    def patch_strategy(self) -> frozenset[str]:
        """Upstream `patchStrategy` tags of this field: {'merge'}, {'retainKeys'},
        {'merge', 'retainKeys'}, {'replace'} or empty (replace, the default)."""

    @property
    def patch_merge_key(self) -> str | None:
        """Upstream `patchMergeKey` for lists of objects merged by key."""

    @property
    def list_type(self) -> str | None:
        """`x-kubernetes-list-type`: 'atomic', 'set', 'map' or None."""

    @property
    def list_map_keys(self) -> tuple[str, ...]:
        """`x-kubernetes-list-map-keys` for list_type 'map'."""

    def field(self, name: str) -> TypeInfo | None:
        """The type of a named field of an object, None when unknown."""

    def elem(self) -> TypeInfo | None:
        """The type of array items or map values, None when unknown."""


def child(info: TypeInfo | None, key: str) -> TypeInfo | None:
    """The type under `key` of an object's field or a map's value; None when unknown."""
    if info is None:
        return None
    if info.kind == "object":
        return info.field(key)
    if info.kind == "map":
        return info.elem()
    return None
