"""Caches filled by hand, for tests: no NATS, no watcher (upstream's tests fill an informer's
indexer the same way).

- `new` builds a `runtime.cache.Cache` of one resource holding the given objects (JSON
  documents, decoded into the view as the stream's bodies are) as its synced start-up state.
- `deliver` applies one watch event to it as the stream would deliver it: resourceVersion
  ordering, tombstones and the handlers included; `marker` is the watcher's progress marker.
- A test holding views rather than documents calls the cache's own `seed` / `evict`, which
  skip the handlers.

A cache built here must not be `run()`: it has no bus to consume.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar, cast

import msgspec

from kcm_shared.apimachinery import codec, gvr
from kcm_shared.bus import subjects, wire
from kcm_shared.client import kubeclient
from kcm_shared.runtime import cache

T = TypeVar("T", bound=codec.Meta)

# The watch's event types, here so a test feeding a cache need not open the bus.
ADDED = wire.ADDED
MODIFIED = wire.MODIFIED
DELETED = wire.DELETED


def message(resource: gvr.Resource, event: str, doc: Mapping[str, Any]) -> cache.Message:
    """The object-stream message the watcher publishes for `event` of `doc` (ADDED, MODIFIED,
    DELETED: the event's type, as a watch reports it)."""
    meta = doc["metadata"]
    headers = {wire.EVENT: event, wire.RESOURCE_VERSION: meta.get("resourceVersion", "")}
    subject = subjects.object_subject(resource, meta.get("namespace", ""), meta["name"])
    return subject, headers, msgspec.json.encode(doc)


def marker(resource: gvr.Resource, resource_version: str) -> cache.Message:
    """The watcher's progress marker: everything up to `resource_version` is published."""
    return subjects.progress_subject(resource), {wire.RESOURCE_VERSION: resource_version}, b""


def new(
    resource: gvr.Resource,
    view: type[T],
    docs: Iterable[Mapping[str, Any]] = (),
    *,
    resource_version: str = "",
    keep_raw: bool = False,
    client: kubeclient.KubeClient | None = None,
) -> cache.Cache[T]:
    """A synced cache holding `docs`, caught up to `resource_version` when one is given.

    `client` answers the GETs of objects too large for a message, if a test delivers one.
    """
    unfed = cast(Any, None)  # never run: nothing reads the bus
    store = cache.Cache(unfed, unfed, resource, view, keep_raw=keep_raw, client=client)
    messages = [message(resource, ADDED, doc) for doc in docs]
    if resource_version:
        messages.append(marker(resource, resource_version))
    store.feed(messages, snapshot=True)
    return store


def deliver(store: cache.Cache[Any], event: str, doc: Mapping[str, Any]) -> None:
    """Apply `event` of `doc` to `store` as the stream delivers it (handlers called)."""
    store.feed([message(store.resource, event, doc)])
