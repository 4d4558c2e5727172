"""What a controller is to the runtime: its `Spec`, and the `Context` its `build` gets.

A controller is a `Spec`: its canonical name and alias (upstream's
`cmd/kube-controller-manager/names`), the folder it lives in, the resources it reads with the
view each is decoded into, its primary resource (whose keys it reconciles), and `build(ctx)`,
which registers the controller's event handlers on `ctx.caches` and returns its reconcile
function. The Manager (`kcm_shared.runtime.manager`) runs Specs; the launcher's registry and
`--plugin` name them. Event handlers enqueue keys with `ctx.enqueue(key)`, or with
`ctx.enqueue_after(key, delay)` later (upstream's AddAfter, `kcm_shared.runtime.delaying`).

Controllers whose resources are known only at run time (the garbage collector follows
every resource discovery lists) use the dynamic part of `Context`:
- `open_cache(res, view)` / `close_cache(res)`: a cache opened after start runs in the
  Manager's task group and is part of this controller's catch-up before it gains a
  partition (invariant 6). Open only resources the watcher publishes (`published()` lists
  those with a progress marker on the bus): the catch-up of a dynamic cache is bounded by
  `manager.DYNAMIC_CATCH_UP_LIMIT` and logged when it runs out, so a resource the watcher
  stopped publishing can delay a hand-over but never block it.
- `keys`: a controller whose work keys are not keys of one primary resource (`primary=None`)
  sets it in `build`; the runtime calls it when it gains partitions, instead of listing the
  primary cache, and keeps the keys of the gained partitions.
- `hand_off(key)`: enqueue durably whichever replica owns the key's partition. `enqueue`
  drops keys of partitions owned elsewhere because their owner sees the same cache event;
  a key found while reconciling (a fan-out from local state) has no such event elsewhere.
- `on_partitions_lost(forget)`: memory kept per key (own writes, expectations, backoff) is
  dropped for the keys of partitions this replica no longer owns, or lost and got back (a
  lapsed grant): what it remembered under the old grant is void.
- `add_task(coro, ready=event)`: a controller's own loop (e.g. periodic re-discovery), run in
  the Manager's task group; with `ready`, start-up waits for the event before its first
  catch-up, so caches opened by the loop's first round count.
- `serve_debug(path, handler)`: the handler of one of `Spec.debug_handlers`, set in `build`
  (it reads the running controller's state); the Manager serves it on the secure port at
  `/debug/controllers/<name>/<path>`, behind the same authentication and authorization as
  every other path there (upstream's `controller.Debuggable`).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiohttp import web

from kcm_shared import reconcile
from kcm_shared.apimachinery import gvr
from kcm_shared.client import kubeclient
from kcm_shared.runtime import cache, delaying, events

DebugHandler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Host(Protocol):
    """The running Manager, as a Context reaches it (`kcm_shared.runtime.manager.Manager`)."""

    def open_dynamic(
        self, name: str, res: gvr.Resource, view: type[Any], client: kubeclient.KubeClient
    ) -> cache.Cache[Any]: ...

    def close_dynamic(self, name: str, res: gvr.Resource, store: cache.Cache[Any]) -> None: ...

    async def published(self) -> set[gvr.Resource]: ...

    async def hand_off(self, name: str, key: str) -> None: ...

    def add_task(self, coro: Coroutine[Any, Any, None], ready: asyncio.Event | None) -> None: ...


@dataclass
class Context:
    """What a controller's `build` gets: the API, its caches, ways to enqueue keys (now, or
    later), Events.

    `enqueue_after` is the delayed enqueue; the other methods are the dynamic part described
    in the module docstring.
    """

    name: str
    client: kubeclient.KubeClient
    caches: dict[gvr.Resource, cache.Cache[Any]]
    enqueue: Callable[[str], None]
    recorder: events.EventRecorder
    manager: Host | None = field(default=None, repr=False)
    # Every work key, for a controller without a primary resource (set in `build`).
    keys: Callable[[], Iterable[str]] | None = None
    # The process's parsed flags, its Spec's own (`Spec.flags`) among them.
    args: argparse.Namespace = field(default_factory=argparse.Namespace)
    # What `enqueue_after` waits on: the event loop's, or a test's fake.
    clock: delaying.Clock = field(default_factory=delaying.LoopClock, repr=False)
    _delayed: delaying.DelayedEnqueue = field(init=False, repr=False)
    _forgetters: list[Callable[[Callable[[str], bool]], None]] = field(default_factory=list, repr=False)
    # The handlers of the Spec's debug paths, by path (`serve_debug`).
    debug: dict[str, DebugHandler] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._delayed = delaying.DelayedEnqueue(self.enqueue, self.clock)

    def enqueue_after(self, key: str, delay: float) -> None:
        """`enqueue(key)` once `delay` seconds passed, for event handlers (upstream's AddAfter):
        a key already waiting keeps its earliest time, and a delay <= 0 enqueues at once.
        In memory only; a reconcile's own "again later" is `Result(requeue_after=...)`."""
        self._delayed(key, delay)

    def on_partitions_lost(self, forget: Callable[[Callable[[str], bool]], None]) -> None:
        """Have `forget(owned)` called once this replica stopped some partitions; it drops
        what it remembers (own writes, expectations, backoff, history) of every key for which
        `owned(key)` is False: that key's new owner keeps its own, and ours would only grow.
        `owned` is False for the stopped partitions' keys even when they are granted back by
        then: a reconcile the stop cancelled left its memory half-updated."""
        self._forgetters.append(forget)

    def serve_debug(self, path: str, handler: DebugHandler) -> None:
        """Serve `handler` at `/debug/controllers/<name>/<path>`; only the Spec's
        `debug_handlers` are routed (the secure port's routes are fixed before `build`)."""
        self.debug[path] = handler

    def partitions_lost(self, owned: Callable[[str], bool]) -> None:
        """Called by the Manager after it stopped partitions: each `on_partitions_lost` callback."""
        for forget in self._forgetters:
            forget(owned)

    def _manager(self) -> Host:
        if self.manager is None:
            raise RuntimeError("this Context is not attached to a running Manager")
        return self.manager

    def open_cache(self, res: gvr.Resource, view: type[Any]) -> cache.Cache[Any]:
        """A cache of `res` opened now; `caches[res]` holds it until `close_cache(res)`."""
        store: cache.Cache[Any] = self._manager().open_dynamic(self.name, res, view, self.client)
        self.caches[res] = store
        return store

    def close_cache(self, res: gvr.Resource) -> None:
        """Stop following `res` (gone from discovery); a no-op when it is not open."""
        store = self.caches.pop(res, None)
        if store is not None:
            self._manager().close_dynamic(self.name, res, store)

    async def published(self) -> set[gvr.Resource]:
        """Resources the watcher publishes: those with a progress marker on the bus."""
        return await self._manager().published()

    async def hand_off(self, key: str) -> None:
        """Enqueue `key` durably for whichever replica owns its partition."""
        await self._manager().hand_off(self.name, key)

    def add_task(self, coro: Coroutine[Any, Any, None], *, ready: asyncio.Event | None = None) -> None:
        """Run `coro` in the Manager's task group (a failure stops the process, like a cache's)."""
        self._manager().add_task(coro, ready)


class FlagSet(Protocol):
    """Where a Spec declares its own flags: `add_argument` as argparse's."""

    def add_argument(self, *names: str, **kwargs: Any) -> Any: ...


@dataclass(frozen=True)
class Spec:
    name: str
    alias: str
    primary: gvr.Resource | None  # None: `build` sets `Context.keys`
    views: dict[gvr.Resource, type[Any]]
    build: Callable[[Context], reconcile.Reconcile]
    workers: int = 5
    enabled_by_default: bool = True
    workers_flag: str = ""  # upstream's name where it is not `concurrent-<alias>-syncs`
    # More names `--controllers` takes, where the one in common use differs from upstream's alias.
    also_known_as: tuple[str, ...] = ()
    # Its own flags, with upstream's names and defaults; `build` reads them from `ctx.args`.
    # Two controllers may declare the same flag (e.g. --root-ca-file): the first one counts.
    flags: Callable[[FlagSet], None] | None = None
    # The retries of failed reconciles, as the controller's upstream queue: per key, (first,
    # max) seconds doubling with each failure in a row; with `retry_bucket`, also no more than
    # 10 retries/s (burst 100) over all keys. The default is client-go's default controller
    # limiter; the Job controller's queues are 1 s -> 60 s without the bucket, the namespace
    # controller's 5 ms -> 60 s with it.
    retry_backoff: tuple[float, float] = (0.005, 1000.0)
    retry_bucket: bool = True
    # Multiplies --kube-api-qps and --kube-api-burst for this controller's client: upstream
    # gives the chatty namespace controller 20x the qps and 100x the burst.
    client_rate_scale: tuple[float, float] = (1.0, 1.0)
    # Why the parsed flags leave it off, or None: upstream starts some controllers only when
    # configured (the token controller needs --service-account-private-key-file). `run`
    # logs the reason and runs the others.
    disabled_by: Callable[[argparse.Namespace], str | None] | None = None
    # The Events' source component where upstream's differs from `name` (the RC controller
    # records as "replication-controller").
    event_component: str = ""
    # Upstream's work queue name, the `name` label of the `workqueue_*` metrics, where it differs
    # from `name` (the Deployment controller's queue is "deployment"). Where upstream splits
    # the work into several queues and we keep one, it is upstream's primary queue's
    # (docs/controllers.md "Work queue names").
    queue_name: str = ""
    # The package of the controller's folder, whose deploy.yaml `kcm manifests` reads: every
    # built-in Spec sets `package=__package__`; a plugin may leave it empty.
    package: str = ""
    # Paths under `/debug/controllers/<name>/` whose handlers `build` sets with
    # `ctx.serve_debug` (upstream's Debuggable controllers: the garbage collector's "graph").
    debug_handlers: tuple[str, ...] = ()

    @property
    def flag(self) -> str:
        """`--concurrent-<alias>-syncs`, as upstream names most per-controller worker flags."""
        return self.workers_flag or f"concurrent-{self.alias}-syncs"
