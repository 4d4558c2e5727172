"""A controller's own writes, remembered until its cache has caught up with them.

A controller writes an object with the resourceVersion it read from its cache. The event
for that write comes back through the watcher and NATS, so under load the next sync of the
same key can start before it arrives, read the old resourceVersion again and get 409
Conflict: a wasted write, a retry with backoff, and a status that lags. `OwnWrites` keeps
the object each write returned, keyed by the resourceVersions it replaced; while the cache
still shows one of those, the sync starts from the returned object instead.

resourceVersions are compared for equality only: they are opaque strings to clients.
A change by anyone else gives the cache a version this never saw, and the memory is
dropped, so it can never hide someone else's write.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar


class _Meta(Protocol):
    @property
    def resource_version(self) -> str: ...


class _Object(Protocol):
    @property
    def metadata(self) -> _Meta: ...


T = TypeVar("T", bound=_Object)


@dataclass
class _Written(Generic[T]):
    result: T
    replaced: set[str] = field(default_factory=set)


class OwnWrites(Generic[T]):
    def __init__(self) -> None:
        self._written: dict[str, _Written[T]] = {}

    def record(self, key: str, replaced_version: str, result: T) -> None:
        """`result` is what the API server returned for a write made on `replaced_version`."""
        entry = self._written.get(key)
        if entry is None or entry.result.metadata.resource_version != replaced_version:
            entry = _Written(result)
            self._written[key] = entry
        entry.replaced.add(replaced_version)
        entry.result = result

    def latest(self, key: str, cached: T | None) -> T | None:
        """The object a sync of `key` should start from: `cached`, unless it is one of ours
        that a later write of ours replaced."""
        entry = self._written.get(key)
        if entry is None:
            return cached
        if cached is not None and cached.metadata.resource_version in entry.replaced:
            return entry.result
        del self._written[key]  # caught up, deleted, or changed by someone else
        return cached

    def retain(self, keep: Callable[[str], bool]) -> None:
        """Forget the writes of every key `keep` refuses (a partition moved away)."""
        self._written = {key: entry for key, entry in self._written.items() if keep(key)}

    def __len__(self) -> int:
        return len(self._written)
