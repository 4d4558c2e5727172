"""The controller runtime: caches, event handlers, the durable queue and partition ownership.

A controller is a `Spec`: its canonical name and alias (upstream's
`cmd/kube-controller-manager/names`), the resources it reads with the view each is decoded
into, its primary resource (whose keys it reconciles), and `build(ctx)`, which registers the
controller's event handlers on `ctx.caches` and returns its reconcile function.

`run` starts one or more controllers in one process in the order controller-runtime's
Manager uses: ops endpoint, caches, wait until the caches have caught up with the API server
(invariant 6), then membership with the coordinator, and workers only for the partitions
this replica is granted. A NATS or API server that is not up yet, or goes away later, is
waited out with backoff at every step (a component of the task group that fails on such a
transient error is restarted); only a configuration error (`errors.ConfigError`: an
unreadable kubeconfig, credentials NATS refuses) stops the process. Event handlers enqueue
a key only when this replica owns its partition; a newly gained partition is first filled
with every primary key the (caught up) cache holds, the way upstream's initial list enqueues
everything at start-up, so a key whose event the previous owner never saw is still
reconciled; so is a partition whose pending work items were lost with its work stream.
Every API write a reconcile makes is fenced (`kcm_shared.fencing`): it is refused once the
key's partition may be another replica's. Each controller's client identifies the replica in
its User-Agent, `kcm/<controller> (<instance>)`, so an API server's audit log tells two
replicas' writes apart. Called by the launcher (`kcm
controllers`, `kcm controller`) and by third-party controllers built on this runtime.

Controllers whose resources are known only at run time (the garbage collector follows
every resource discovery lists) use the dynamic part of `Context`:
- `open_cache(res, view)` / `close_cache(res)`: a cache opened after start runs in the
  Manager's task group and is part of this controller's catch-up before it gains a
  partition (invariant 6). Open only resources the watcher publishes (`published()` lists
  those with a progress marker on the bus): the catch-up of a dynamic cache is bounded by
  DYNAMIC_CATCH_UP_LIMIT and logged when it runs out, so a resource the watcher stopped
  publishing can delay a hand-over but never block it.
- `keys`: a controller whose work keys are not keys of one primary resource (`primary=None`)
  sets it in `build`; the runtime calls it when it gains partitions, instead of listing the
  primary cache, and keeps the keys of the gained partitions.
- `hand_off(key)`: enqueue durably whichever replica owns the key's partition. `enqueue`
  drops keys of partitions owned elsewhere because their owner sees the same cache event;
  a key found while reconciling (a fan-out from local state) has no such event elsewhere.
- `add_task(coro, ready=event)`: a controller's own loop (e.g. periodic re-discovery), run in
  the Manager's task group; with `ready`, start-up waits for the event before its first
  catch-up, so caches opened by the loop's first round count.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import importlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext

from kcm_shared import (
    cache,
    cancellation,
    codec,
    events,
    fencing,
    flags,
    health,
    kubeclient,
    membership,
    natsconn,
    opsserver,
    subjects,
    tracing,
)
from kcm_shared.workqueue import durable

log = logging.getLogger("kcm.controller")

Reconcile = Callable[[str], Awaitable[durable.Result | None]]
PUBLISH_WINDOW = 256  # work items in flight to JetStream at once, per controller
DYNAMIC_CATCH_UP_LIMIT = 30.0  # seconds a cache opened at run time may take to catch up


@dataclass
class Context:
    """What a controller's `build` gets: the API, its caches, a way to enqueue keys, Events.

    The methods below are the dynamic part described in the module docstring.
    """

    name: str
    client: kubeclient.KubeClient
    caches: dict[subjects.Resource, cache.Cache[Any]]
    enqueue: Callable[[str], None]
    recorder: events.EventRecorder
    manager: Manager | None = field(default=None, repr=False)
    # Every work key, for a controller without a primary resource (set in `build`).
    keys: Callable[[], Iterable[str]] | None = None
    # The process's parsed flags, its Spec's own (`Spec.flags`) among them.
    args: argparse.Namespace = field(default_factory=argparse.Namespace)

    def _manager(self) -> Manager:
        if self.manager is None:
            raise RuntimeError("this Context is not attached to a running Manager")
        return self.manager

    def open_cache(self, res: subjects.Resource, view: type[Any]) -> cache.Cache[Any]:
        """A cache of `res` opened now; `caches[res]` holds it until `close_cache(res)`."""
        store: cache.Cache[Any] = self._manager().open_dynamic(self.name, res, view, self.client)
        self.caches[res] = store
        return store

    def close_cache(self, res: subjects.Resource) -> None:
        """Stop following `res` (gone from discovery); a no-op when it is not open."""
        store = self.caches.pop(res, None)
        if store is not None:
            self._manager().close_dynamic(self.name, res, store)

    async def published(self) -> set[subjects.Resource]:
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
    primary: subjects.Resource | None  # None: `build` sets `Context.keys`
    views: dict[subjects.Resource, type[Any]]
    build: Callable[[Context], Reconcile]
    workers: int = 5
    enabled_by_default: bool = True
    workers_flag: str = ""  # upstream's name where it is not `concurrent-<alias>-syncs`
    # More names `--controllers` takes, where the one in common use differs from upstream's alias.
    also_known_as: tuple[str, ...] = ()
    # Its own flags, with upstream's names and defaults; `build` reads them from `ctx.args`.
    # Two controllers may declare the same flag (e.g. --root-ca-file): the first one counts.
    flags: Callable[[FlagSet], None] | None = None
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

    @property
    def flag(self) -> str:
        """`--concurrent-<alias>-syncs`, as upstream names most per-controller worker flags."""
        return self.workers_flag or f"concurrent-{self.alias}-syncs"


def load_plugin(path: str) -> Spec:
    """`module:attribute` naming a Spec: a controller that is not built into `kcm`."""
    module, _, attr = path.partition(":")
    if not module or not attr:
        raise ValueError(f"--plugin wants MODULE:ATTRIBUTE, got {path!r}")
    spec = getattr(importlib.import_module(module), attr)
    if not isinstance(spec, Spec):
        raise ValueError(f"{path} is a {type(spec).__name__}, not a controller Spec")
    return spec


def select(specs: Sequence[Spec], expression: str) -> list[Spec]:
    """Upstream's `--controllers` grammar: `*` = all enabled by default, `foo` on, `-foo` off.

    Names may be canonical (`replicaset-controller`), the alias (`replicaset`) or another name
    the Spec is also known as.
    """
    by_name: dict[str, Spec] = {}
    for spec in specs:
        for name in (spec.name, spec.alias, *spec.also_known_as):
            by_name[name] = spec
    on: set[str] = set()
    off: set[str] = set()
    star = False
    for item in (part.strip() for part in expression.split(",")):
        if not item:
            continue
        if item == "*":
            star = True
            continue
        name = item[1:] if item.startswith("-") else item
        if name not in by_name:
            known = ", ".join(sorted(s.alias for s in specs)) or "none"
            raise ValueError(f"unknown controller {name!r} in --controllers (known: {known})")
        (off if item.startswith("-") else on).add(by_name[name].name)
    return [
        spec
        for spec in specs
        if spec.name not in off and (spec.name in on or (star and spec.enabled_by_default))
    ]


def add_arguments(p: argparse.ArgumentParser, specs: Iterable[Spec]) -> None:
    flags.add_common(p, ops_port=10259)
    p.add_argument("--controllers", default="*", help="*: all on by default; foo: on; -foo: off")
    p.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help="also run this controller Spec from an importable module (repeatable)",
    )
    p.add_argument(
        "--max-deliveries",
        type=_positive,
        default=15,
        help="deliveries of one work item that end without any outcome (the replica died or the ack "
        "deadline passed mid-reconcile) before it is dead-lettered as poison; failures do not count",
    )
    p.add_argument(
        "--ack-wait", type=_seconds, default=30.0, help="seconds before unacked work is redelivered"
    )
    p.add_argument(
        "--stuck-after",
        type=_seconds,
        default=120.0,
        help="seconds without progress before a loop is unhealthy",
    )
    for spec in specs:
        p.add_argument(
            f"--{spec.flag}", type=_positive, default=spec.workers, help=f"workers for {spec.name}"
        )
        if spec.flags is not None:
            spec.flags(_FirstWins(p.add_argument_group(spec.name)))


class _FirstWins:
    """An argument group that skips a flag already declared (two controllers may share one)."""

    def __init__(self, group: argparse._ArgumentGroup) -> None:
        self._group = group

    def add_argument(self, *names: str, **kwargs: Any) -> argparse.Action | None:
        known = self._group._option_string_actions  # shared with the parser it belongs to
        if any(name in known for name in names):
            return None
        return self._group.add_argument(*names, **kwargs)


def passthrough_flags(specs: Iterable[Spec]) -> dict[str, bool]:
    """The controller flags `kcm dev` hands on to the controllers it starts: every worker
    count, the work queue's, and each controller's own; with whether the flag takes a value."""
    p = argparse.ArgumentParser(add_help=False)
    add_arguments(p, specs)
    own = {"--max-deliveries", "--ack-wait", "--stuck-after"}
    for spec in specs:
        own.add(f"--{spec.flag}")
        if spec.flags is not None:
            probe = argparse.ArgumentParser(add_help=False)
            spec.flags(probe)
            own.update(name for action in probe._actions for name in action.option_strings)
    return {name: action.nargs != 0 for name, action in p._option_string_actions.items() if name in own}


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"want a positive integer, got {text!r}")
    return int(text)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"want a positive number of seconds, got {text!r}")
    return value


@dataclass
class _Running:
    spec: Spec
    ctx: Context
    queue: durable.DurableQueue
    client: kubeclient.KubeClient
    recorder: events.EventRecorder
    # key -> the trace context it was enqueued in (the change that caused it)
    pending: dict[str, tracing.Later] = field(default_factory=dict)
    wake: asyncio.Event = field(default_factory=asyncio.Event)


class Manager:
    """Runs the given controllers in this process; see the module docstring for the order."""

    def __init__(self, specs: Sequence[Spec], args: argparse.Namespace) -> None:
        self.specs = list(specs)
        self.args = args
        self._nats = natsconn.from_args(args)
        self.checks = health.Checks()
        self.caches: dict[tuple[subjects.Resource, type[Any]], cache.Cache[Any]] = {}
        self.running: dict[str, _Running] = {}
        self.members: membership.Membership | None = None
        self._js: JetStreamContext | None = None
        self._nc: Client | None = None
        self._group: asyncio.TaskGroup | None = None
        self._cache_tasks: dict[tuple[subjects.Resource, type[Any]], asyncio.Task[None]] = {}
        self._users: dict[tuple[subjects.Resource, type[Any]], set[str]] = {}
        self._tasks: list[tuple[Coroutine[Any, Any, None], asyncio.Event | None]] = []
        # Caches each controller opened at run time (Context.open_cache), part of its catch-up.
        self._dynamic: dict[str, dict[subjects.Resource, cache.Cache[Any]]] = {}

    def _cache(
        self, res: subjects.Resource, view: type[Any], user: str, client: kubeclient.KubeClient
    ) -> Any:
        # Controllers that read a resource through the same view share one cache; the first
        # one's API client fetches the objects too large for a message.
        assert self._js is not None and self._nc is not None
        key = (res, view)
        if key not in self.caches:
            replicas = self._nats.stream_replicas
            self.caches[key] = cache.Cache(
                self._js, self._nc, res, view, stream_replicas=replicas, client=client
            )
            if self._group is not None:  # opened at run time: start it now
                self._start_cache(key)
        self._users.setdefault(key, set()).add(user)
        return self.caches[key]

    def _start_cache(self, key: tuple[subjects.Resource, type[Any]]) -> None:
        assert self._group is not None
        self._cache_tasks[key] = self._group.create_task(_logged("cache", self.caches[key].run))

    def open_dynamic(
        self, name: str, res: subjects.Resource, view: type[Any], client: kubeclient.KubeClient
    ) -> cache.Cache[Any]:
        store: cache.Cache[Any] = self._cache(res, view, name, client)
        self._dynamic.setdefault(name, {})[res] = store
        return store

    def close_dynamic(self, name: str, res: subjects.Resource, store: cache.Cache[Any]) -> None:
        self._dynamic.get(name, {}).pop(res, None)
        key = next((k for k, c in self.caches.items() if c is store), None)
        if key is None:
            return
        users = self._users.get(key, set())
        users.discard(name)
        if users:
            return  # another controller still reads it
        self.caches.pop(key, None)
        self._users.pop(key, None)
        task = self._cache_tasks.pop(key, None)
        if task is not None:
            task.cancel()

    async def published(self) -> set[subjects.Resource]:
        assert self._js is not None
        try:
            info = await self._js.stream_info(
                subjects.OBJECTS_STREAM, subjects_filter=subjects.PROGRESS_FILTER
            )
        except nats.js.errors.NotFoundError:
            return set()  # the watcher has not declared its stream yet
        found = (info.state.subjects or {}) if info.state else {}
        return {subjects.parse_progress_subject(subject) for subject in found}

    async def hand_off(self, name: str, key: str) -> None:
        count = self.members.partitions(name) if self.members is not None else None
        if count is None:
            raise RuntimeError("no partition count from the coordinator yet")
        await self.running[name].queue.add(key, count)

    def add_task(self, coro: Coroutine[Any, Any, None], ready: asyncio.Event | None) -> None:
        if self._group is not None:
            self._group.create_task(_logged("task", _once(coro), restart=False))
        else:
            self._tasks.append((coro, ready))

    def _enqueue(self, name: str) -> Callable[[str], None]:
        def enqueue(key: str) -> None:
            run = self.running[name]
            if self.members is None:
                return
            count = self.members.partitions(name)
            # Keys of partitions owned elsewhere are their owner's: it sees the same event.
            if count is None or not self.members.owns(name, subjects.partition_of(key, count)):
                return
            run.pending[key] = tracing.later()
            run.wake.set()

        return enqueue

    async def _publish_pending(self, run: _Running) -> None:
        """Drain keys from event handlers onto the durable queue (handlers are synchronous).

        Up to PUBLISH_WINDOW keys are published at once: waiting for each ack in turn made the
        ack round trip, not the reconcile, the limit under load. `DurableQueue.add` retries
        until NATS stores the key, so a key taken from `pending` is never dropped.
        """
        assert self.members is not None
        while True:
            cancellation.checkpoint()
            await run.wake.wait()
            run.wake.clear()
            while run.pending:
                count = self.members.partitions(run.spec.name)
                if count is None:
                    run.pending.clear()  # nothing owned yet: the partition fill on gain covers them
                    break
                adds = []
                for _ in range(min(PUBLISH_WINDOW, len(run.pending))):
                    key, context = run.pending.popitem()
                    if run.queue.holds(key, count):
                        continue  # its message waits for a reconcile, which reads this change too
                    # The task takes the context: its work item, the trace.
                    with tracing.attached(context.context()):
                        adds.append(asyncio.ensure_future(run.queue.add(key, count)))
                await asyncio.gather(*adds)

    async def _caught_up(self, run: _Running) -> None:
        for res, view in run.spec.views.items():
            await _catch_up(self.caches[(res, view)], run.client)
        await asyncio.gather(
            *(
                self._catch_up_dynamic(run, store)
                for store in list(self._dynamic.get(run.spec.name, {}).values())
            )
        )

    async def _catch_up_dynamic(self, run: _Running, store: cache.Cache[Any]) -> None:
        try:
            async with asyncio.timeout(DYNAMIC_CATCH_UP_LIMIT):
                await _catch_up(store, run.client)
        except TimeoutError:
            log.warning(
                "cache opened at run time did not catch up in time; going on without it",
                extra={"controller": run.spec.name, "resource": str(store.resource)},
            )

    async def _on_change(self, name: str, gained: set[int], lost: set[int]) -> None:
        """Start and stop partitions; each step is retried until it is done, because a
        partition the coordinator counts as ours but that nobody consumes loses its changes
        (a NATS or API outage during a hand-over must delay it, never drop it)."""
        run = self.running[name]
        for partition in sorted(lost):
            await _until_done(
                f"stop partition {partition}", name, functools.partial(run.queue.stop_partition, partition)
            )
        if not gained:
            return
        # A new owner acts only on a cache at least as new as the API server is now (invariant 6).
        await _until_done("catch up", name, lambda: self._caught_up(run))
        self._fill(name, gained)
        for partition in sorted(gained):
            await _until_done(
                f"start partition {partition}", name, functools.partial(run.queue.start_partition, partition)
            )

    def _fill(self, name: str, partitions: set[int]) -> None:
        """Enqueue every key of `partitions`: gained ones, or ones whose pending work was lost
        with their consumer (`DurableQueue`'s `on_lost`)."""
        run = self.running[name]
        count = self.members.partitions(name) if self.members is not None else None
        if count is not None:
            keys = self._all_keys(run)
            context = tracing.later()
            run.pending.update(
                (key, context) for key in keys if subjects.partition_of(key, count) in partitions
            )
            run.wake.set()

    def _all_keys(self, run: _Running) -> Iterable[str]:
        if run.ctx.keys is not None:
            return run.ctx.keys()
        primary = run.spec.primary
        assert primary is not None, "a Spec without a primary resource must set Context.keys"
        return (codec.key_of(obj.metadata) for obj in self.caches[(primary, run.spec.views[primary])].list())

    def _claim(self, name: str, key: str, partition: int) -> fencing.Claim | None:
        return None if self.members is None else self.members.claim(name, key, partition)

    def _report(self) -> membership.Report:
        results = self.checks.run()
        return membership.Report(
            health={name: results.get(name) for name in self.running},
            depth={name: run.queue.depth() for name, run in self.running.items()},
        )

    async def run(self) -> None:
        args = self.args
        tracing.setup("controllers")
        # Before waiting for NATS: a configuration error is reported at once.
        clients = {
            spec.name: flags.kube_client(
                args,
                user_agent=user_agent(spec.name, args.instance),
                write_guard=fencing.check_write,
                rate_scale=spec.client_rate_scale,
            )
            for spec in self.specs
        }
        nc = await natsconn.connect(self._nats, f"kcm-controllers-{args.instance}")
        self._js = nc.jetstream()
        self._nc = nc
        runner, port = await opsserver.start(opsserver.app(self.checks), args.ops_bind, args.ops_port)
        try:
            self._build(clients)
            members = self.members = membership.Membership(
                nc,
                service="controllers",
                instance=args.instance,
                controllers=list(self.running),
                ops_url=opsserver.url(args.ops_bind, port),
                report=self._report,
                grants=await membership.grants_bucket(self._js, self._nats.stream_replicas),
            )
            members.on_change(self._on_change)
            async with asyncio.TaskGroup() as group:
                self._group = group
                for key in list(self.caches):
                    self._start_cache(key)
                for coro, _ in self._tasks:
                    group.create_task(_logged("task", _once(coro), restart=False))
                for _, ready in self._tasks:
                    if ready is not None:
                        await ready.wait()
                for name, run in self.running.items():
                    await _until_done("declare the work stream", name, run.queue.setup)
                    # The queue waits out NATS trouble itself, and cannot run again once it stopped.
                    group.create_task(_logged("queue", run.queue.run, restart=False))
                    group.create_task(_logged("events", run.recorder.run))
                    group.create_task(_logged("enqueue", functools.partial(self._publish_pending, run)))
                for name, run in self.running.items():
                    await _until_done("catch up", name, functools.partial(self._caught_up, run))
                # Only now ask for partitions: a replica never acts on a cache behind the API.
                group.create_task(_logged("membership", members.run))
                log.info("controllers running", extra={"controllers": list(self.running)})
        finally:
            await runner.cleanup()
            for run in self.running.values():
                await run.client.close()
            with contextlib.suppress(Exception):
                await nc.drain()

    def _build(self, clients: dict[str, kubeclient.KubeClient]) -> None:
        for spec in self.specs:
            client = clients[spec.name]
            caches = {res: self._cache(res, view, spec.name, client) for res, view in spec.views.items()}
            recorder = events.EventRecorder(client, spec.event_component or spec.name)
            ctx = Context(spec.name, client, caches, self._enqueue(spec.name), recorder, self, args=self.args)
            reconcile = spec.build(ctx)
            workers = getattr(self.args, spec.flag.replace("-", "_"), spec.workers)
            assert self._js is not None and self._nc is not None
            queue = durable.DurableQueue(
                self._js,
                self._nc,
                spec.name,
                reconcile,
                workers=workers,
                max_deliveries=self.args.max_deliveries,
                ack_wait=self.args.ack_wait,
                stuck_after=self.args.stuck_after,
                stream_replicas=self._nats.stream_replicas,
                on_lost=functools.partial(self._fill, spec.name),
                claim=functools.partial(self._claim, spec.name),
            )
            self.running[spec.name] = _Running(spec, ctx, queue, client, recorder)
            self.checks.add(spec.name, queue.check)


def user_agent(controller: str, instance: str) -> str:
    """`kcm/<controller> (<instance>)`; the instance is a flag, so anything but printable ASCII
    (and the parentheses that delimit it) is replaced rather than sent in a header."""
    safe = "".join(ch if " " <= ch <= "~" and ch not in "()" else "_" for ch in instance)
    return f"kcm/{controller} ({safe})"


async def _catch_up(store: cache.Cache[Any], client: kubeclient.KubeClient) -> None:
    await store.wait_synced()
    rv = await cache.current_resource_version(client, store.resource)
    await store.wait_caught_up(rv)


async def _until_done(what: str, controller: str, step: Callable[[], Awaitable[None]]) -> None:
    """Run `step` until it succeeds, backing off 0.2 s doubling to 5 s between failures."""
    delay = 0.2
    while True:
        cancellation.checkpoint()
        try:
            await step()
            return
        except Exception as exc:
            log.warning(f"{what} failed; retrying", extra={"controller": controller, "error": repr(exc)})
        await asyncio.sleep(delay)
        delay = min(5.0, delay * 2)


def _transient(exc: BaseException) -> bool:
    """An error that waiting cures: NATS away, restarting or without a stream for a moment
    (`natsconn.is_transient`), or an API server that is down, unreachable or answering 5xx."""
    if isinstance(exc, kubeclient.ApiError):
        return exc.code >= 500 or exc.code == 429
    return natsconn.is_transient(exc) or isinstance(exc, (OSError, TimeoutError))


def _once(coro: Coroutine[Any, Any, None]) -> Callable[[], Coroutine[Any, Any, None]]:
    return lambda: coro


async def _logged(what: str, start: Callable[[], Coroutine[Any, Any, None]], *, restart: bool = True) -> None:
    """Run one component of the Manager's task group, where a failure stops the process.

    A transient failure (see `_transient`) restarts the component after a backoff instead,
    unless `restart` is False (a controller's own task, a coroutine that cannot run twice).
    Any other failure is logged the moment it happens: the TaskGroup then spends a while
    handing partitions back before the error surfaces, and a supervisor may kill us first.
    """
    attempt = 0
    while True:
        cancellation.checkpoint()
        try:
            await start()
            return
        except Exception as exc:
            if not (restart and _transient(exc)):
                log.exception("component failed; stopping", extra={"component": what})
                raise
            log.warning(
                "component failed on a transient error; restarting",
                extra={"component": what, "error": repr(exc), "attempt": attempt},
            )
        await kubeclient.sleep_backoff(attempt, base=0.2, cap=5.0)
        attempt += 1


async def run(args: argparse.Namespace, specs: Sequence[Spec]) -> None:
    chosen = select(specs, args.controllers) + [load_plugin(path) for path in args.plugin]
    if not chosen:
        raise SystemExit("kcm: no controller selected (see --controllers and --plugin)")
    await Manager(runnable(chosen, args), args).run()


def runnable(chosen: Sequence[Spec], args: argparse.Namespace) -> list[Spec]:
    """The chosen Specs their `disabled_by` lets run with these flags (the others are logged);
    SystemExit when none is left."""
    reasons = {spec.name: spec.disabled_by(args) for spec in chosen if spec.disabled_by is not None}
    for name, reason in reasons.items():
        if reason:
            log.info("controller is disabled", extra={"controller": name, "reason": reason})
    left = [spec for spec in chosen if not reasons.get(spec.name)]
    if not left:
        raise SystemExit(
            f"kcm: every selected controller is disabled: {'; '.join(r for r in reasons.values() if r)}"
        )
    return left
