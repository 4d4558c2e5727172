"""Keeping Secrets' data off the bus: what the watcher publishes of a Secret, by allow-list.

`resourcewatch` passes every body through `body` just before publishing it. A core/v1 Secret
goes out as its metadata only, what a PartialObjectMetadata watch gives (`METADATA`), plus
`type`, and of its annotations only those a controller reads from its cache (`ANNOTATIONS`);
it gains the annotation `REDACTED`, so a reader can tell a redacted Secret from an empty one.
`data`, `stringData`, every other annotation (client-side `kubectl apply` keeps the whole
manifest, data included, in `kubectl.kubernetes.io/last-applied-configuration`) and any field
a future API version adds never reach a subject. Every other resource goes through untouched,
at the cost of one comparison. Controllers that need a Secret's data read it from the API
server (docs/bus.md "What is not on the bus").

Why not a metadata-only watch, which would keep the data out of the watcher too: a
PartialObjectMetadata has no `type`, which the service account token controllers select
token Secrets by.

`REPUBLISHED` are the resources whose every object the watcher's first relist publishes again
even at an unchanged resourceVersion: a stream written before this allow-list may hold more.
"""

from __future__ import annotations

from typing import Any

import msgspec
from kcm_shared.apimachinery import codec, gvr
from kcm_shared.controllerutil import serviceaccounts

SECRETS = gvr.Resource("", "v1", "secrets")
REPUBLISHED = frozenset({SECRETS})
REDACTED = "kcm.io/redacted"  # annotation: the fields never published, comma-separated
_REDACTED_VALUE = "data,stringData"
METADATA = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "labels",
    "ownerReferences",
    "finalizers",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
# The token controllers match a token Secret to its ServiceAccount by these.
ANNOTATIONS = (serviceaccounts.NAME_KEY, serviceaccounts.UID_KEY)
_TOP = ("apiVersion", "kind", "type")

_decode = codec.bounded(msgspec.json.Decoder(dict[str, Any]).decode)


def body(res: gvr.Resource, raw: bytes) -> bytes:
    """`raw` as it may go on the bus: a Secret reduced to its allow-list."""
    if res != SECRETS or not raw:
        return raw
    obj = _decode(raw)
    metadata = obj.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    kept: dict[str, Any] = {field: metadata[field] for field in METADATA if field in metadata}
    kept["annotations"] = {key: annotations[key] for key in ANNOTATIONS if key in annotations}
    kept["annotations"][REDACTED] = _REDACTED_VALUE
    out = {field: obj[field] for field in _TOP if field in obj}
    out["metadata"] = kept
    return msgspec.json.encode(out)
