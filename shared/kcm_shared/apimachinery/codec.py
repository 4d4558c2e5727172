"""Typed, partial views of Kubernetes objects, decoded with msgspec.

A cache (`kcm_shared.runtime.cache`) decodes every object message body into a view: a msgspec
Struct that names only the fields its controller reads, so unknown fields cost nothing
and 10,000 cached pods stay small. Every view extends `Meta` (kind, apiVersion, metadata);
controllers define their own (`class PodView(codec.Meta): spec: PodSpecView ...`) and
get camelCase JSON names from snake_case attributes through the inherited `rename`.
A cached object is shared by every handler and reader and must never be edited in place
(upstream's rule for informer objects): make a copy with `msgspec.structs.replace`. (Views
are not `frozen`: mypy would then demand `frozen=True` on every controller's subclass.)

`key_of` and `controller_ref` are upstream's MetaNamespaceKeyFunc and GetControllerOf.

Hostile bodies: `decode` (and any decoder wrapped in `bounded`) raises `msgspec.DecodeError`,
never RecursionError, for a body nested deeper than Python's recursion budget decodes, so a
caller's per-message error handling covers it. `MAX_DEPTH` is how deep the embedded API server
lets an object nest (`exceeds_depth`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec


class View(msgspec.Struct, gc=False, omit_defaults=True, rename="camel"):
    """Base of every decoded struct: camelCase JSON names, no GC tracking.

    gc=False is safe because a decoded JSON document cannot form reference cycles.
    """


class OwnerReference(View):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(View):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    generate_name: str = ""
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    owner_references: list[OwnerReference] = msgspec.field(default_factory=list)
    finalizers: list[str] = msgspec.field(default_factory=list)
    creation_timestamp: dt.datetime | None = None
    deletion_timestamp: dt.datetime | None = None
    deletion_grace_period_seconds: int | None = None


class ObjectReference(View):
    """core/v1 ObjectReference (a CronJob's active Jobs, a PersistentVolume's claimRef)."""

    kind: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""
    api_version: str = ""
    resource_version: str = ""


class Meta(View):
    """The part of every object a cache needs; controllers' views extend it."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    kind: str = ""
    api_version: str = ""


class NamespaceStatus(View):
    phase: str = ""


class NamespaceView(Meta):
    """A namespace as the controllers that act per namespace read it: whether it is Active
    or Terminating (and since when, in metadata). One view, so they share one cache."""

    status: NamespaceStatus = msgspec.field(default_factory=NamespaceStatus)


T = TypeVar("T", bound=Meta)
R = TypeVar("R")

_decoders: dict[type[Any], msgspec.json.Decoder[Any]] = {}

# kube-apiserver refuses JSON nested deeper than 10,000 levels (Go's encoding/json scanner,
# `exceeded max depth`). Python decodes, and the API server's patch, apply and validation code
# walks objects, recursively within one budget of 1,000 frames shared with the caller's
# stack: the embedded API server refuses objects nested deeper than this (one level per
# object or array, the outermost counting 1), which leaves every walk room to spare. Real
# objects nest a few dozen levels; a CRD's schema of a pod template about 40.
MAX_DEPTH = 256


def bounded(decode: Callable[[bytes], R]) -> Callable[[bytes], R]:
    """`decode`, raising msgspec.DecodeError instead of RecursionError for a body nested too
    deeply to decode (a kube-apiserver serves objects up to 10,000 levels deep)."""

    def run(raw: bytes) -> R:
        try:
            return decode(raw)
        except RecursionError:
            raise msgspec.DecodeError("the body is nested too deeply to decode") from None

    return run


def exceeds_depth(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether decoded JSON nests objects and arrays deeper than `limit` (iteratively)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def decode(raw: bytes, view: type[T]) -> T:
    """Decode one object's JSON into `view`; raises msgspec.DecodeError (a ValueError) on bad
    input, a body nested too deeply included."""
    decoder = _decoders.get(view)
    if decoder is None:
        decoder = _decoders[view] = msgspec.json.Decoder(view)
    try:
        result: T = decoder.decode(raw)
    except RecursionError:
        raise msgspec.DecodeError("the body is nested too deeply to decode") from None
    return result


def key_of(meta: ObjectMeta | Meta) -> str:
    """`namespace/name`, or `name` for cluster-scoped objects (upstream MetaNamespaceKeyFunc)."""
    m = meta.metadata if isinstance(meta, Meta) else meta
    return f"{m.namespace}/{m.name}" if m.namespace else m.name


def controller_ref(meta: ObjectMeta | Meta) -> OwnerReference | None:
    """The owner reference with `controller: true`, if any (upstream metav1.GetControllerOf)."""
    m = meta.metadata if isinstance(meta, Meta) else meta
    for ref in m.owner_references:
        if ref.controller:
            return ref
    return None
