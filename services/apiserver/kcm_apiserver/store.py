"""Object storage with one resourceVersion counter, a bounded event history and watchers.

The store plays etcd plus the watch cache: every write gets the next resourceVersion,
is recorded in a per-resource history of bounded length, and is handed to every
matching watcher without waiting (a watcher that cannot keep up is closed, as upstream
closes slow watchers, so writers never slow down). A watch can resume from any
resourceVersion still inside the history; older ones get 410 Expired.

Handlers (`handlers`) call it; it knows nothing of HTTP. Mutations are synchronous, so
a read-check-write in one handler step is atomic on the event loop.
"""

from __future__ import annotations

import asyncio
import collections
import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kcm_apiserver import persist

ADDED, MODIFIED, DELETED, BOOKMARK = "ADDED", "MODIFIED", "DELETED", "BOOKMARK"
Obj = dict[str, Any]
# Upstream sizes its watch cache per resource type too; a reconnecting client only needs
# the events since its last bookmark, which comes every few seconds.
DEFAULT_HISTORY = 10_000
DEFAULT_WATCH_QUEUE = 10_000


@dataclass(slots=True)
class Event:
    type: str
    rv: int
    key: str  # storage key of the resource type
    namespace: str
    name: str
    obj: Obj
    prev: Obj | None = None
    # Watch lines encoded once per served version and shared by every watcher of it.
    encoded: dict[str, bytes] = field(default_factory=dict)


Predicate = Callable[[Obj], bool]


class Watcher:
    """One open watch: events are queued by writers and drained by the HTTP stream."""

    def __init__(self, key: str, namespace: str | None, predicate: Predicate | None, size: int) -> None:
        self.key = key
        self.namespace = namespace
        self.predicate = predicate
        self.queue: asyncio.Queue[Event] = asyncio.Queue(maxsize=size)
        self.overflowed = asyncio.Event()

    def offer(self, event: Event) -> None:
        """Translate a change through the watcher's filter and queue it without blocking."""
        if self.namespace is not None and event.namespace != self.namespace:
            return
        out = event
        if self.predicate is not None and event.type != BOOKMARK:
            now = self.predicate(event.obj)
            before = event.prev is not None and self.predicate(event.prev)
            if event.type == MODIFIED:
                if now and not before:
                    out = Event(ADDED, event.rv, event.key, event.namespace, event.name, event.obj)
                elif before and not now:
                    out = Event(DELETED, event.rv, event.key, event.namespace, event.name, event.obj)
                elif not now:
                    return
            elif not now:
                return
        try:
            self.queue.put_nowait(out)
        except asyncio.QueueFull:
            self.overflowed.set()


class Store:
    def __init__(
        self,
        db: persist.Database | None = None,
        history: int = DEFAULT_HISTORY,
        watch_queue: int = DEFAULT_WATCH_QUEUE,
    ) -> None:
        self._objects: dict[str, dict[tuple[str, str], Obj]] = collections.defaultdict(dict)
        self._history: dict[str, collections.deque[Event]] = {}
        self._history_size = history
        self._watch_queue = watch_queue
        # The smallest resourceVersion a watch of a resource can resume from.
        self._resumable_from: dict[str, int] = {}
        self._watchers: dict[str, set[Watcher]] = collections.defaultdict(set)
        # The resourceVersion of the last write to each resource: caches derived from a
        # resource (rbac's binding index) rebuild when it moves.
        self._revisions: dict[str, int] = {}
        self._db = db
        self.rv = 0
        if db is not None:
            self.rv = db.load(self._load)
        self._start_rv = self.rv

    def _load(self, key: str, namespace: str, name: str, obj: Obj) -> None:
        self._objects[key][(namespace, name)] = obj

    # -- reads ---------------------------------------------------------------------------------

    def get(self, key: str, namespace: str, name: str) -> Obj | None:
        return self._objects[key].get((namespace, name))

    def list(self, key: str, namespace: str | None) -> list[Obj]:
        """Objects of a resource sorted by namespace/name, as upstream lists are."""
        objs = self._objects[key]
        keys = sorted(k for k in objs if namespace is None or k[0] == namespace)
        return [objs[k] for k in keys]

    def count(self, key: str, namespace: str | None = None) -> int:
        if namespace is None:
            return len(self._objects[key])
        return sum(1 for k in self._objects[key] if k[0] == namespace)

    def count_where(self, key: str, namespace: str, predicate: Callable[[Obj], bool]) -> int:
        """How many objects of a namespace satisfy `predicate` (no copy, no sort)."""
        return sum(1 for (ns, _), obj in self._objects[key].items() if ns == namespace and predicate(obj))

    def keys(self) -> Iterable[str]:
        return list(self._objects)

    def revision(self, key: str) -> int:
        """The resourceVersion of the last write to a resource in this process (0: none yet)."""
        return self._revisions.get(key, 0)

    # -- writes --------------------------------------------------------------------------------

    def put(self, key: str, obj: Obj) -> Obj:
        """Store a created or updated object under the next resourceVersion and announce it."""
        meta = obj["metadata"]
        namespace = meta.get("namespace", "")
        name = meta["name"]
        self.rv += 1
        meta["resourceVersion"] = str(self.rv)
        bucket = self._objects[key]
        prev = bucket.get((namespace, name))
        bucket[(namespace, name)] = obj
        if self._db is not None:
            self._db.put(key, namespace, name, self.rv, obj)
        self._emit(Event(ADDED if prev is None else MODIFIED, self.rv, key, namespace, name, obj, prev))
        return obj

    def remove(self, key: str, namespace: str, name: str) -> Obj | None:
        """Delete for good; the DELETED event carries the final state at a new resourceVersion."""
        prev = self._objects[key].pop((namespace, name), None)
        if prev is None:
            return None
        self.rv += 1
        final = copy.copy(prev)
        final["metadata"] = {**prev["metadata"], "resourceVersion": str(self.rv)}
        if self._db is not None:
            self._db.delete(key, namespace, name, self.rv)
        self._emit(Event(DELETED, self.rv, key, namespace, name, final, prev))
        return final

    def _emit(self, event: Event) -> None:
        self._revisions[event.key] = event.rv
        history = self._history.get(event.key)
        if history is None:
            history = self._history[event.key] = collections.deque()
        if len(history) >= self._history_size:
            evicted = history.popleft()
            self._resumable_from[event.key] = evicted.rv
        history.append(event)
        for watcher in self._watchers.get(event.key, ()):
            watcher.offer(event)

    # -- watch ---------------------------------------------------------------------------------

    def resumable(self, key: str, rv: int) -> bool:
        return rv >= max(self._resumable_from.get(key, 0), self._start_rv)

    def oldest_resumable(self, key: str) -> int:
        return max(self._resumable_from.get(key, 0), self._start_rv)

    def watch(
        self, key: str, namespace: str | None, predicate: Predicate | None, since: int | None
    ) -> Watcher:
        """Open a watch; with `since`, first replay the history after that resourceVersion.

        The caller checks `resumable` first and sends the initial state itself when `since`
        is None.
        """
        watcher = Watcher(key, namespace, predicate, self._watch_queue)
        if since is not None:
            for event in self._history.get(key, ()):
                if event.rv > since:
                    watcher.offer(event)
        self._watchers[key].add(watcher)
        return watcher

    def stop_watch(self, watcher: Watcher) -> None:
        self._watchers[watcher.key].discard(watcher)

    def bookmark_all(self) -> None:
        """Tell every watcher how far the store has got, in order with its events."""
        for key, watchers in self._watchers.items():
            mark = Event(BOOKMARK, self.rv, key, "", "", {})
            for watcher in watchers:
                try:
                    watcher.queue.put_nowait(mark)
                except asyncio.QueueFull:
                    watcher.overflowed.set()

    def watcher_count(self) -> int:
        return sum(len(w) for w in self._watchers.values())

    async def synced(self) -> None:
        """Return once the writes made so far are saved (at once without `--data-dir`)."""
        if self._db is not None:
            await self._db.synced()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
