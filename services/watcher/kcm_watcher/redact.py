"""Keeping Secrets' data off the bus: what the watcher publishes of a Secret.

`resourcewatch` passes every body through `body` just before publishing it. A core/v1 Secret
loses `data` and `stringData` (its metadata, `type` and `immutable` stay) and gains the
annotation `REDACTED`, so a reader can tell a redacted Secret from an empty one; every other
resource goes through untouched, at the cost of one comparison. Controllers that need a
Secret's data read it from the API server (docs/bus.md "What is not on the bus").
"""

from __future__ import annotations

from typing import Any

import msgspec
from kcm_shared.apimachinery import codec, gvr

SECRETS = gvr.Resource("", "v1", "secrets")
REDACTED = "kcm.io/redacted"  # annotation: the fields never published, comma-separated
_FIELDS = ("data", "stringData")

_decode = codec.bounded(msgspec.json.Decoder(dict[str, Any]).decode)


def body(res: gvr.Resource, raw: bytes) -> bytes:
    """`raw` as it may go on the bus: without a Secret's data."""
    if res != SECRETS or not raw:
        return raw
    obj = _decode(raw)
    for field in _FIELDS:
        obj.pop(field, None)
    metadata = obj["metadata"] = obj.get("metadata") or {}
    metadata["annotations"] = {**(metadata.get("annotations") or {}), REDACTED: ",".join(_FIELDS)}
    return msgspec.json.encode(obj)
