"""The controller-side cache of one resource, fed by the object stream (client-go's informer).

Controllers read their objects from a `Cache` instead of the API server: `run()` consumes
`kcm.obj.<resource>.>` and the resource's progress subject from the `KCM_OBJECTS` stream
(docs/bus.md) with an ordered push consumer of its own (named by `kcm_shared.bus.consumers`
under its identity's prefix), starting from the last message of
every subject (the current state of every object), then following new messages. Each body
is decoded into the controller's view type (`kcm_shared.apimachinery.codec`); the store is indexed by
`namespace/name` keys, by namespace, by owner uid, and by any index a controller adds.
Event handlers (upstream ResourceEventHandler) are called after the store is updated.

Guarantees and how they are met:
- Ordered, gap-free: every delivered message carries its consumer sequence and idle
  heartbeats carry the last one; any gap, a missed heartbeat or a NATS reconnect drops the
  consumer and starts over from last-per-subject (a re-sync). Heartbeats count as missed over
  time this process ran: while it was starved of CPU or frozen, what the consumer sent waits
  unread, and starting over would re-read the whole stream on top of it (`_Silence`).
- A re-sync diffs against the store: objects that changed arrive as updates, new ones as
  adds, and objects whose subject vanished meanwhile (a tombstone expired after
  `Nats-TTL`, or was never seen) are delivered as deletes with their last known state
  (upstream hands out a DeletedFinalStateUnknown there; here the handler gets the last
  object it saw, which is what upstream's handlers unwrap it to anyway).
- Never ahead of the truth (invariant 5): `last_resource_version` moves only when a
  progress marker is consumed, and during a (re-)sync only once the whole snapshot has been
  consumed: the snapshot delivers each subject's last message, so a marker may arrive before
  objects that were written earlier but updated later.
- Caught up (invariant 6): `wait_caught_up(rv)` asks the watcher (`kcm.watcher.sync`) for a
  marker at or beyond `rv` and waits until this cache has consumed it. Callers get `rv` from
  a fresh list (`catchup.ResourceVersions`); the caches of one process share their asks
  (`catchup.WatcherSync`).
- A body that does not decode is logged and counted, and the previous state is kept: treating
  it as absent would fire a false delete (a ReplicaSet controller would create a replacement
  pod), while keeping the old state is only "late", which the next good message repairs.
- Never back in time (a deposed watcher, a fetch that raced the stream): a message whose
  numeric resourceVersion is older than the state held is ignored (`resourceversion.older`); a DELETED
  at the held resourceVersion (a relist's tombstone) still applies.
- One consumer per resource in a process: caches of the same resource through other views
  `share_consumer` with the first; it applies each message it consumes to them as to itself,
  and starts their snapshots with its own. Every controller's view of pods used to cost a
  consumer of its own, so each pod change crossed NATS, had its headers parsed and its
  progress checked once per view (about 14 times with every default controller).
  A message is decoded once per group of views that merge (`apimachinery.viewmerge`: a
  Struct with every field of each, and each field as its view has it), and that one object
  is held by every cache of the group; groups hold one copy of the metadata between them.
- Too large for a message: an object message with `wire.TOO_LARGE` has no body; the object
  is fetched from the API server (GET by name, retried with backoff until the answer is at
  least that resourceVersion, or 404), and a progress marker that follows counts only once
  the fetches before it are done, so a catch-up never waits on a state it has not got.
- A lost stream is not a mass delete: a re-sync whose snapshot has no progress marker, when
  this cache had one (or would lose objects), means the stream was wiped, purged or
  re-created. The cache keeps its objects and stops reporting caught up (`reset_pending`)
  until the watcher has republished: at the first marker after that, objects not delivered
  since are deleted, as a relist would find them gone.

Created by the controller runtime (`kcm_shared.runtime`), one per resource and view;
handlers run on the event loop and must not block (they compute keys and enqueue). Tests and
offline tools fill one by hand instead of running it (`seed`, `evict`, `feed`; the testing
kit's `kcm_shared.testing.caches` builds such caches).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

import aiohttp
import msgspec
import nats.errors
import prometheus_client
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext, api

from kcm_shared.apimachinery import codec, gvr, resourceversion, selectors, viewmerge
from kcm_shared.base import cancellation, tracing
from kcm_shared.bus import consumers, natsconn, subjects, wire
from kcm_shared.client import kubeclient
from kcm_shared.runtime import catchup
from kcm_shared.runtime.catchup import rv_at_least

log = logging.getLogger("kcm.cache")

T = TypeVar("T", bound=codec.Meta)

OBJECTS = prometheus_client.Gauge("kcm_cache_objects", "Objects held by a cache.", ["resource"])
EVENTS = prometheus_client.Counter(
    "kcm_cache_events_total",
    "Changes applied to a cache, by type (add, update, delete).",
    ["resource", "type"],
)
DECODE_ERRORS = prometheus_client.Counter(
    "kcm_cache_decode_errors_total", "Object messages whose body could not be decoded.", ["resource"]
)
RESYNCS = prometheus_client.Counter(
    "kcm_cache_resyncs_total", "Times a cache re-created its consumer and re-read the stream.", ["resource"]
)
STALE = prometheus_client.Counter(
    "kcm_cache_stale_messages_total",
    "Object messages ignored because the cache held a newer resourceVersion.",
    ["resource"],
)
FETCHES = prometheus_client.Counter(
    "kcm_cache_fetches_total",
    "Objects fetched from the API server because they were too large for a message, by result.",
    ["resource", "result"],
)
STREAM_RESETS = prometheus_client.Counter(
    "kcm_cache_stream_resets_total",
    "Re-syncs that found the stream had lost what the watcher published.",
    ["resource"],
)

NAMESPACE_INDEX = "namespace"
OWNER_UID_INDEX = "owner-uid"

_YIELD_EVERY = 256  # messages handled between yields to the event loop during a large snapshot

# One message of the object stream as `Cache.feed` takes it: subject, headers, body.
Message = tuple[str, Mapping[str, str], bytes]


class _Progress:
    """A `_Target`: the message is the resource's progress marker."""


_PROGRESS = _Progress()
# What a message of the object stream is about: (key, subject, parsed subject) of an object,
# `_PROGRESS`, or None for a subject that names nothing this cache can hold.
_Target = tuple[str, str, subjects.ObjectSubject] | _Progress | None
# One message's objects as the caches fed by one consumer decoded them, by decoded type.
_Decoded = dict[type[Any], Any]


class _Silence:
    """The consumer's silence as the watchdog judges it: the time since the last message or
    heartbeat handled, less the time this process was late to look (starved of CPU or frozen,
    it reads nothing, however much the consumer sends)."""

    def __init__(self, seen: float) -> None:
        self._seen = seen
        self._late = 0.0

    def after(self, seen: float, waited_from: float, interval: float, now: float) -> float:
        """The silence at `now`, after a wait of `interval` seconds begun at `waited_from`;
        `seen`: when the last message or heartbeat was handled."""
        if seen != self._seen:
            self._seen, self._late = seen, 0.0
        self._late += max(0.0, now - waited_from - interval)
        return now - self._seen - self._late


class _Restart(Exception):
    """The consumer can no longer be trusted to be gap-free; start over from last-per-subject."""


@dataclass(frozen=True, slots=True)
class _Handler(Generic[T]):
    on_add: Callable[[T], None] | None
    on_update: Callable[[T, T], None] | None
    on_delete: Callable[[T], None] | None


def _delivery(msg: Msg) -> tuple[int, int]:
    """The consumer sequence and pending count of a pushed message, read from its reply subject.

    `msg.metadata` parses every token and builds a timestamp and three objects per message; a
    cache needs two numbers. The v1 reply subject (`$JS.ACK.<stream>.<consumer>.<delivered>.
    <stream seq>.<consumer seq>.<time>.<pending>`, what nats-server sends without a domain) is
    read here; any other form goes through nats-py's parser.
    """
    tokens = msg.reply.split(".")
    if len(tokens) == 9 and tokens[0] == "$JS" and tokens[1] == "ACK":
        return int(tokens[6]), int(tokens[8])
    meta = msg.metadata
    return meta.sequence.consumer, meta.num_pending


def _namespace_index(obj: codec.Meta) -> list[str]:
    return [obj.metadata.namespace]


def _owner_uid_index(obj: codec.Meta) -> list[str]:
    return [ref.uid for ref in obj.metadata.owner_references if ref.uid]


class Cache(Generic[T]):
    """The objects of one resource as the watcher last published them, decoded into `view`."""

    def __init__(
        self,
        js: JetStreamContext,
        nc: Client,
        resource: gvr.Resource,
        view: type[T],
        *,
        keep_raw: bool = False,
        heartbeat: float = 5.0,
        stream_replicas: int = 1,
        client: kubeclient.KubeClient | None = None,
        sync: catchup.WatcherSync | None = None,
    ) -> None:
        self._js = js
        self._sync = sync if sync is not None else catchup.WatcherSync(nc)
        self._client = client  # fetches objects too large for a message
        self._stream_replicas = stream_replicas
        self._nc = nc
        self.resource = resource
        self._view = view
        # What messages are decoded into: the view, or a Struct with its fields and those of
        # the other views it shares a consumer with (`share_consumer`), decoded once for all.
        self._decoded_as: type[Any] = view
        self._heartbeat = heartbeat
        self._label = str(resource)
        # Metric children bound once: `labels()` takes a lock and builds a tuple, which per
        # event was a visible share of a cache's CPU (bench/cache_events.py). The object count
        # is read when scraped, not set (under a lock) on every change of every view.
        self._events: dict[str, prometheus_client.Counter] = {}
        self._items: dict[str, T] = {}
        OBJECTS.labels(self._label).set_function(self.__len__)
        self._raw: dict[str, bytes] | None = {} if keep_raw else None
        self._indexers: dict[str, Callable[[T], list[str]]] = {}
        self._indices: dict[str, dict[str, set[str]]] = {}
        self._handlers: list[_Handler[T]] = []
        self._synced = asyncio.Event()
        self._marker = asyncio.Event()  # replaced by a fresh one each time the marker advances
        self.last_resource_version = ""
        # State of the current consumer, reset by each (re-)subscription.
        self._snapshot: set[str] | None = None
        self._snapshot_rv = ""
        self._next_cseq = 1
        self._last_seen = 0.0
        self._handled = 0
        # key -> (order, task) of fetches of objects too large for a message; the order says
        # which progress markers (`_deferred`: order of the last fetch before, rv) wait for them.
        self._fetching: dict[str, tuple[int, asyncio.Task[None]]] = {}
        self._fetches = 0
        self._deferred: builtins.list[tuple[int, str]] = []
        # The stream lost what the watcher published (module docstring): keys delivered since.
        self._reset = False
        self._since_reset: set[str] = set()
        # Caches of this resource fed from this cache's consumer, or the cache that feeds this one.
        self._followers: builtins.list[Cache[Any]] = []
        self._leader: Cache[Any] | None = None
        self.add_index(NAMESPACE_INDEX, _namespace_index)
        self.add_index(OWNER_UID_INDEX, _owner_uid_index)

    # --- reading ---------------------------------------------------------------------------

    def get(self, namespace: str, name: str) -> T | None:
        return self._items.get(f"{namespace}/{name}" if namespace else name)

    def get_key(self, key: str) -> T | None:
        return self._items.get(key)

    def raw(self, key: str) -> bytes | None:
        """The JSON body last published for `key` (for writes that must send the whole object)."""
        if self._raw is None:
            raise RuntimeError(f"cache of {self._label} was created without keep_raw=True")
        return self._raw.get(key)

    def list(
        self, namespace: str | None = None, selector: selectors.LabelSelector | None = None
    ) -> builtins.list[T]:
        """Objects in `namespace` (all when None) whose labels match `selector` (all when None)."""
        if namespace is None:
            candidates = builtins.list(self._items.values())
        else:
            candidates = self.by_index(NAMESPACE_INDEX, namespace)
        if selector is None or selector.empty:
            return candidates
        return [obj for obj in candidates if selector.matches(obj.metadata.labels)]

    def by_index(self, index: str, value: str) -> builtins.list[T]:
        keys = self._indices[index].get(value, ())
        return [self._items[k] for k in keys]

    def keys(self) -> builtins.list[str]:
        return builtins.list(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def has_synced(self) -> bool:
        """True once the stream's state at start-up was consumed; it never turns False again.

        A re-sync after a NATS failure keeps serving the previous state (which is behind,
        never ahead) rather than pretending the cache is empty.
        """
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    @property
    def reset_pending(self) -> bool:
        """True while the stream has lost its content and the watcher has not republished it:
        the cache keeps serving what it had, and is caught up with nothing."""
        return self._reset

    # --- wiring ----------------------------------------------------------------------------

    def add_index(self, name: str, fn: Callable[[T], builtins.list[str]]) -> None:
        """Index objects by the values `fn` returns; objects already cached are indexed now.
        Controllers sharing this cache (one view) may each add the same index: the same name
        with the same function is one index; the same name with another function is an error."""
        if self._indexers.get(name) is fn:
            return
        if name in self._indexers:
            raise ValueError(f"index {name!r} already exists on the cache of {self._label}")
        self._indexers[name] = fn
        index: dict[str, set[str]] = {}
        for key, obj in self._items.items():
            for value in fn(obj):
                index.setdefault(value, set()).add(key)
        self._indices[name] = index

    def add_handler(
        self,
        on_add: Callable[[T], None] | None = None,
        on_update: Callable[[T, T], None] | None = None,
        on_delete: Callable[[T], None] | None = None,
    ) -> None:
        """Register callbacks, called in registration order after the store has changed.

        During the initial sync every object arrives through `on_add`. A handler that
        raises is logged; the others still run and the cache carries on.
        """
        self._handlers.append(_Handler(on_add, on_update, on_delete))

    def share_consumer(self, follower: Cache[Any]) -> None:
        """Feed `follower`, a cache of the same resource through another view, from this cache's
        consumer instead of one of its own: its `run()` then only waits to be cancelled. Call
        before either runs; this cache must be running for `follower` to get anything."""
        if follower.resource != self.resource or follower is self:
            raise ValueError(f"only another cache of {self._label} can share its consumer")
        if self._leader is not None or follower._leader is not None or follower._followers:
            raise ValueError(f"the cache of {self._label} already shares a consumer")
        follower._leader = self
        self._followers.append(follower)
        stores = [self, *self._followers]
        decoded_as = viewmerge.decoded_as(store._view for store in stores)
        for store in stores:
            store._decoded_as = decoded_as[store._view]

    @property
    def shares_consumer(self) -> bool:
        """True when another cache's consumer feeds this one (`share_consumer`)."""
        return self._leader is not None

    @property
    def feeds_others(self) -> bool:
        """True when other caches read this cache's consumer (stopping it would starve them)."""
        return bool(self._followers)

    # --- filled by hand: tests and offline tools, never a running cache ---------------------

    def seed(self, obj: T, data: bytes = b"") -> None:
        """Hold `obj` under its key, indexed, without telling the handlers (what upstream's tests
        do with `informer.GetIndexer().Add`); `raw()` then answers `data`."""
        self._put(codec.key_of(obj), obj, data)

    def evict(self, key: str) -> T | None:
        """Stop holding `key`'s object without telling the handlers (upstream's
        `GetIndexer().Delete`); the object, or None when none was held."""
        return self._remove(key) if key in self._items else None

    def feed(self, messages: Iterable[Message], *, snapshot: bool = False) -> None:
        """Apply object-stream messages exactly as the consumer applies them: ordering, tombstones,
        progress markers, fetches of objects too large for a message, and the handlers.

        With `snapshot`, `messages` are a whole (re-)sync's, last-per-subject: once applied, objects
        they did not name are deleted and the cache reports synced (module docstring).
        """
        if snapshot:
            self._snapshot, self._snapshot_rv = set(), ""
        for subject, headers, data in messages:
            self._apply(self._target(subject, headers), headers, data)
        if snapshot:
            self._finish_snapshot()

    # --- catching up (invariant 6) ---------------------------------------------------------

    async def wait_caught_up(self, resource_version: str) -> None:
        """Return once this cache has consumed a progress marker at or beyond `resource_version`.

        Asks the watcher for such a marker (through the process's `catchup.WatcherSync`, which
        retries with backoff while no watcher answers); never gives up by itself: bound it with
        the caller's timeout.
        """
        if self._caught_up(resource_version):
            return
        waiter = asyncio.ensure_future(self._wait_marker(resource_version))
        asked = asyncio.ensure_future(self._sync.ask(self.resource, resource_version))
        try:
            done, _ = await asyncio.wait({waiter, asked}, return_when=asyncio.FIRST_COMPLETED)
            if asked in done and not waiter.done():
                asked.result()  # an ask that failed (not one that was answered) raises here
            await waiter  # the watcher has published the marker; consuming it is our part
        finally:
            waiter.cancel()
            asked.cancel()

    def _caught_up(self, resource_version: str) -> bool:
        return (
            self.has_synced()
            and not self._reset
            and rv_at_least(self.last_resource_version, resource_version)
        )

    async def _wait_marker(self, resource_version: str) -> None:
        while not self._caught_up(resource_version):
            await self._marker.wait()

    def _advance(self, resource_version: str) -> None:
        if resourceversion.older(resource_version, self.last_resource_version):
            return  # an older marker (a deposed watcher's) vouches for nothing new
        self.last_resource_version = resource_version
        event, self._marker = self._marker, asyncio.Event()
        event.set()

    def _reached(self, resource_version: str) -> None:
        """A progress marker consumed (live, or at the end of a snapshot)."""
        if self._reset:
            self._end_reset()
        if self._fetching:
            self._deferred.append((self._fetches, resource_version))
            return
        self._advance(resource_version)

    def _release_deferred(self) -> None:
        """Count the markers whose earlier fetches are all done."""
        pending = min((order for order, _ in self._fetching.values()), default=None)
        while self._deferred and (pending is None or self._deferred[0][0] < pending):
            self._advance(self._deferred.pop(0)[1])

    def _end_reset(self) -> None:
        """The watcher has republished: what it did not republish is gone."""
        self._reset = False
        gone = [key for key in self._items if key not in self._since_reset]
        self._since_reset = set()
        log.info("stream republished", extra={"resource": self._label, "deleted": len(gone)})
        for key in gone:
            self._dispatch_delete(self._remove(key))

    # --- consuming -------------------------------------------------------------------------

    async def run(self) -> None:
        """Consume until cancelled, starting over from last-per-subject after any NATS failure;
        a cache fed by another's consumer only waits (its fetches are its own to cancel)."""
        attempt = 0
        try:
            if self._leader is not None:
                await asyncio.get_running_loop().create_future()
            while True:
                cancellation.checkpoint()
                try:
                    await self._consume()
                except _Restart as exc:
                    log.warning(
                        "cache consumer restarts", extra={"resource": self._label, "reason": str(exc)}
                    )
                    attempt = 0
                except (nats.errors.Error, OSError, TimeoutError) as exc:
                    log.warning("cache consumer failed", extra={"resource": self._label, "error": repr(exc)})
                RESYNCS.labels(self._label).inc()
                await kubeclient.sleep_backoff(attempt, base=0.1, cap=5.0)
                attempt += 1
        finally:
            for _, task in self._fetching.values():
                task.cancel()

    async def _consume(self) -> None:
        await natsconn.ensure_object_stream(self._js, self._stream_replicas, owner=False)
        inbox = self._nc.new_inbox()
        # Each subscription reports to its own future, so a late message of a dropped
        # subscription can never touch the state of the next one.
        failure: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._next_cseq = 1
        for store in (self, *self._followers):
            store._snapshot, store._snapshot_rv = set(), ""
        self._last_seen = time.monotonic()
        reconnects = self._nc.stats["reconnects"]
        sub = await self._nc.subscribe(
            inbox,
            cb=functools.partial(self._on_msg, failure),
            pending_msgs_limit=65536,
            pending_bytes_limit=64 * 1024 * 1024,
        )
        consumer = None
        try:
            info = await consumers.create(
                self._nc,
                wire.OBJECTS_STREAM,
                api.ConsumerConfig(
                    deliver_subject=inbox,
                    deliver_policy=api.DeliverPolicy.LAST_PER_SUBJECT,
                    ack_policy=api.AckPolicy.NONE,
                    filter_subjects=[
                        subjects.object_filter(self.resource),
                        subjects.progress_subject(self.resource),
                    ],
                    flow_control=True,
                    idle_heartbeat=self._heartbeat,
                    mem_storage=True,
                    num_replicas=1,
                    # If this process dies, the server drops the consumer by itself.
                    inactive_threshold=max(30.0, 6 * self._heartbeat),
                ),
            )
            consumer = info.name
            if info.num_pending == 0 and self._snapshot is not None:
                self._finish_snapshots()  # nothing to read: the (empty) snapshot is complete
            silence = _Silence(self._last_seen)
            while not failure.done():
                cancellation.checkpoint()
                waited_from = time.monotonic()
                await asyncio.wait({failure}, timeout=self._heartbeat)
                if self._nc.stats["reconnects"] != reconnects:
                    raise _Restart("NATS reconnected: messages may have been lost in between")
                now = time.monotonic()
                if silence.after(self._last_seen, waited_from, self._heartbeat, now) > 3 * self._heartbeat:
                    raise _Restart("no message nor heartbeat from the consumer")
            raise _Restart(failure.result())
        finally:
            if not failure.done():
                failure.set_result("stopped")
            # Bounded: this runs on cancellation too, and a stop must never hang on NATS.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(sub.unsubscribe(), 2.0)
            if consumer is not None and self._nc.is_connected:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(consumers.delete(self._nc, wire.OBJECTS_STREAM, consumer), 2.0)
            elif consumer is not None:
                consumers.release(self._nc, consumer)  # the server drops it after inactive_threshold

    async def _on_msg(self, failure: asyncio.Future[str], msg: Msg) -> None:
        # Runs in the subscription's task, one message at a time, in delivery order.
        if failure.done():
            return
        self._last_seen = time.monotonic()
        headers = msg.headers or {}
        status = headers.get(api.Header.STATUS.value)
        try:
            if status is not None:
                await self._on_status(msg, status, headers)
                return
            cseq, pending = _delivery(msg)
            if cseq != self._next_cseq:
                raise _Restart(f"consumer sequence gap: expected {self._next_cseq}, got {cseq}")
            self._next_cseq = cseq + 1
            with tracing.continued_from(headers):  # what handlers enqueue continues the change's trace
                target = self._target(msg.subject, headers)  # parsed once for every view
                decoded: _Decoded = {}
                self._apply(target, headers, msg.data, decoded)
                for follower in self._followers:
                    follower._apply(target, headers, msg.data, decoded)
            if self._snapshot is not None and pending == 0:
                self._finish_snapshots()
        except _Restart as exc:
            failure.set_result(str(exc))
            return
        self._handled += 1
        if self._handled % _YIELD_EVERY == 0:
            await asyncio.sleep(0)

    async def _on_status(self, msg: Msg, status: str, headers: dict[str, str]) -> None:
        if status != api.StatusCode.CONTROL_MESSAGE.value:
            raise _Restart(f"consumer status {status} {headers.get(api.Header.DESCRIPTION.value, '')}")
        if msg.reply:
            # Flow control: everything delivered before this request is handled already.
            await self._nc.publish(msg.reply, b"")
            return
        stalled = headers.get(api.Header.CONSUMER_STALLED.value)
        if stalled:
            await self._nc.publish(stalled, b"")
        last = headers.get(api.Header.LAST_CONSUMER.value)
        if last is not None and int(last) != self._next_cseq - 1:
            raise _Restart(f"heartbeat says {last} delivered, {self._next_cseq - 1} received")

    def _target(self, subject: str, headers: Mapping[str, str]) -> _Target:
        """What a message is about: its object's key and subject, a progress marker, or nothing
        usable (logged)."""
        if subjects.is_progress_subject(subject):
            return _PROGRESS
        try:
            where = subjects.parse_object_subject(subject, headers.get(wire.KEY))
        except ValueError:
            log.warning("not an object subject, skipped", extra={"resource": self._label, "subject": subject})
            return None
        return (f"{where.namespace}/{where.name}" if where.namespace else where.name), subject, where

    def _apply(
        self, target: _Target, headers: Mapping[str, str], data: bytes, decoded: _Decoded | None = None
    ) -> None:
        """Apply one message (`target`: what `_target` made of it). `decoded`: what the caches
        fed by the same consumer decoded from this message so far, by type (`_decode`)."""
        rv = headers.get(wire.RESOURCE_VERSION, "")
        if isinstance(target, _Progress):
            if self._snapshot is not None:
                self._snapshot_rv = rv
            else:
                self._reached(rv)
            return None
        if target is None:
            return None
        key, subject, where = target
        if self._snapshot is not None:
            self._snapshot.add(key)
        if self._reset:
            self._since_reset.add(key)
        old = self._items.get(key)
        if old is not None and resourceversion.older(rv, old.metadata.resource_version):
            STALE.labels(self._label).inc()
            return None
        self._cancel_fetch(key)  # this message is newer than what a pending fetch was for
        too_large = wire.TOO_LARGE in headers
        if headers.get(wire.EVENT) == wire.DELETED:
            if old is not None:
                self._remove(key)
                last = self._decode(subject, key, data, decoded) if data and not too_large else None
                self._dispatch_delete(last or old)
            return None
        if old is not None and rv and old.metadata.resource_version == rv:
            return None  # a re-sync re-delivering what we hold already
        if too_large:
            self._fetch(key, where, rv)
            return None
        new = self._decode(subject, key, data, decoded)
        if new is not None:
            self._store(key, new, data)
        return None

    def _store(self, key: str, new: T, data: bytes) -> None:
        """Put a new state of `key` and tell the handlers."""
        old = self._items.get(key)
        self._put(key, new, data)
        if old is None:
            self._count("add")
            for h in self._handlers:
                if h.on_add is not None:
                    self._call(h.on_add, new)
        else:
            self._count("update")
            for h in self._handlers:
                if h.on_update is not None:
                    self._call(h.on_update, old, new)

    # --- objects too large for a message ----------------------------------------------------

    def _fetch(self, key: str, where: subjects.ObjectSubject, rv: str) -> None:
        self._fetches += 1
        task = asyncio.ensure_future(self._fetch_object(key, where, rv))
        self._fetching[key] = (self._fetches, task)

    def _cancel_fetch(self, key: str) -> None:
        pending = self._fetching.pop(key, None)
        if pending is not None:
            pending[1].cancel()
            self._release_deferred()

    async def _fetch_object(self, key: str, where: subjects.ObjectSubject, rv: str) -> None:
        """GET the object until the answer is at least `rv` (or 404: its tombstone follows)."""
        res = self.resource
        path = kubeclient.resource_path(res.group, res.version, res.resource, where.namespace, where.name)
        found: tuple[T, bytes] | None = None
        attempt = 0
        while self._client is not None:
            try:
                data = await self._client.request_bytes("GET", path)
                obj = codec.decode(data, self._decoded_as)
                if not resourceversion.older(obj.metadata.resource_version, rv):
                    found = (obj, data)
                    break
                error = f"the API server answered {obj.metadata.resource_version}, older than {rv}"
            except kubeclient.ApiError as exc:
                if exc.not_found:
                    break
                error = str(exc)
            except (aiohttp.ClientError, OSError, TimeoutError, msgspec.DecodeError) as exc:
                error = repr(exc)
            FETCHES.labels(self._label, "error").inc()
            log.warning(
                "cannot fetch an object too large for a message, retrying",
                extra={"resource": self._label, "key": key, "error": error, "attempt": attempt},
            )
            await kubeclient.sleep_backoff(attempt, base=0.2, cap=30.0)
            attempt += 1
        else:
            log.error(
                "an object too large for a message cannot be fetched: this cache has no API client",
                extra={"resource": self._label, "key": key},
            )
        FETCHES.labels(self._label, "ok" if found else "absent").inc()
        del self._fetching[key]
        if found is not None:
            old = self._items.get(key)
            if old is None or not resourceversion.older(
                found[0].metadata.resource_version, old.metadata.resource_version
            ):
                self._store(key, *found)
        self._release_deferred()

    def _finish_snapshots(self) -> None:
        for store in (self, *self._followers):
            store._finish_snapshot()

    def _finish_snapshot(self) -> None:
        seen, self._snapshot = self._snapshot or set(), None
        unseen = [k for k in self._items if k not in seen]
        if not self._snapshot_rv and (self.last_resource_version or unseen):
            # No marker: the stream lost it, and with it what the watcher had published.
            if not self._reset:
                STREAM_RESETS.labels(self._label).inc()
                log.warning(
                    "the stream lost its content: keeping every object until the watcher republishes",
                    extra={"resource": self._label, "objects": len(self._items), "missing": len(unseen)},
                )
            self._reset, self._since_reset = True, seen
        else:
            self._reset = False
            for key in unseen:
                self._dispatch_delete(self._remove(key))
            if self._snapshot_rv:
                self._reached(self._snapshot_rv)
        if not self._synced.is_set():
            log.info("cache synced", extra={"resource": self._label, "objects": len(self._items)})
            self._synced.set()

    def _decode(self, subject: str, key: str, data: bytes, decoded: _Decoded | None = None) -> T | None:
        """The message's object, decoded as this cache's `_decoded_as`: taken from `decoded` when
        another cache fed by the same consumer decoded it so already (one object shared, never
        modified in place), else decoded and added there."""
        if decoded:
            same = decoded.get(self._decoded_as)
            if same is not None:
                return cast(T, same)
        try:
            obj = codec.decode(data, self._decoded_as)
        except msgspec.DecodeError as exc:
            DECODE_ERRORS.labels(self._label).inc()
            log.error(
                "undecodable object message, previous state kept",
                extra={"resource": self._label, "subject": subject, "error": str(exc)},
            )
            return None
        # Only the watcher may publish here, but JetStream lets any identity that may create a
        # push consumer name a deliver subject (nats-server#8274): a replay of some object's
        # state onto this subject must not pass for this object.
        if codec.key_of(obj.metadata) != key:
            DECODE_ERRORS.labels(self._label).inc()
            log.error(
                "object message names another object than its subject, previous state kept",
                extra={"resource": self._label, "subject": subject, "named": codec.key_of(obj.metadata)},
            )
            return None
        if decoded is not None:
            # Views in other groups decode the same metadata type: one copy per object in the
            # process. Equal means decoded from the same bytes.
            other = next(iter(decoded.values()), None)
            if (
                other is not None
                and type(obj.metadata) is type(other.metadata)
                and obj.metadata == other.metadata
            ):
                obj.metadata = other.metadata
            decoded[self._decoded_as] = obj
        return cast(T, obj)

    # --- the store -------------------------------------------------------------------------

    def _put(self, key: str, obj: T, data: bytes) -> None:
        old = self._items.get(key)
        for name, fn in self._indexers.items():
            index = self._indices[name]
            new_values = fn(obj)
            if old is not None:
                old_values = fn(old)
                if old_values == new_values:
                    continue  # most updates (a pod's status) move no index entry
                for value in old_values:
                    if value not in new_values:
                        self._unindex(index, value, key)
            for value in new_values:
                index.setdefault(value, set()).add(key)
        self._items[key] = obj
        if self._raw is not None:
            self._raw[key] = data

    def _remove(self, key: str) -> T:
        old = self._items.pop(key)
        for name, fn in self._indexers.items():
            for value in fn(old):
                self._unindex(self._indices[name], value, key)
        if self._raw is not None:
            self._raw.pop(key, None)
        return old

    @staticmethod
    def _unindex(index: dict[str, set[str]], value: str, key: str) -> None:
        keys = index.get(value)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del index[value]

    def _dispatch_delete(self, obj: T) -> None:
        self._count("delete")
        for h in self._handlers:
            if h.on_delete is not None:
                self._call(h.on_delete, obj)

    def _count(self, kind: str) -> None:
        counter = self._events.get(kind)
        if counter is None:
            counter = self._events[kind] = EVENTS.labels(self._label, kind)
        counter.inc()

    def _call(self, fn: Callable[..., None], *args: T) -> None:
        try:
            fn(*args)
        except Exception:
            log.exception("cache event handler failed", extra={"resource": self._label})
