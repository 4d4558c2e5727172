"""The controller Manager: runs Specs in one process, with caches, the durable queue and
partition ownership.

`run` starts one or more controllers in one process in the order controller-runtime's
Manager uses: endpoints (upstream's secure port, `kcm_shared.bus.secure`, with `/configz`;
the plain ops port only when `--ops-port` is given), caches, wait until the caches have caught up with the API server
(invariant 6), then membership with the coordinator, and workers only for the partitions
this replica is granted. A NATS or API server that is not up yet, or goes away later, is
waited out with backoff at every step (a component of the task group that fails on such a
transient error is restarted); only a configuration error (`errors.ConfigError`: an
unreadable kubeconfig, credentials NATS refuses) stops the process. Event handlers enqueue
a key only when this replica owns its partition; a newly gained partition is first filled
with every primary key the (caught up) cache holds, the way upstream's initial list enqueues
everything at start-up, so a key whose event the previous owner never saw is still
reconciled; so is a partition whose pending work items were lost with its work stream.
Every API write a reconcile makes is fenced (`kcm_shared.bus.fencing`): it is refused once the
key's partition may be another replica's. Each controller's client identifies the replica in
its User-Agent, `kcm/<controller> (<instance>)`, so an API server's audit log tells two
replicas' writes apart. With `--use-service-account-credentials` each controller's client is
also its own identity, as upstream's: the ServiceAccount its deploy.yaml names
(`runtime.deployfile`), in `--service-account-credentials-namespace`, with tokens the
`--kubeconfig` identity requests (`kcm_shared.client.clientbuilder`); that root client makes no
other request. Called by the launcher (`kcm controllers`, `kcm controller`) and by
third-party controllers built on this runtime.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import nats.js.errors
from aiohttp import web
from nats.aio.client import Client
from nats.js import JetStreamContext

from kcm_shared.apimachinery import codec, gvr
from kcm_shared.base import cancellation, errors, tracing
from kcm_shared.bus import fencing, flags, health, membership, natsconn, opsserver, subjects, wire
from kcm_shared.bus.secure import server
from kcm_shared.client import clientbuilder, kubeclient
from kcm_shared.runtime import cache, catchup, configz, controllerflags, deployfile, events
from kcm_shared.runtime.spec import Context, Spec
from kcm_shared.workqueue import durable, ratelimit

log = logging.getLogger("kcm.controller")

PUBLISH_WINDOW = 256  # work items in flight to JetStream at once, per controller
DYNAMIC_CATCH_UP_LIMIT = 30.0  # seconds a cache opened at run time may take to catch up
PAIR_NAME = "kube-controller-manager"  # upstream's self-signed pair in --cert-dir


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
        self.caches: dict[tuple[gvr.Resource, type[Any]], cache.Cache[Any]] = {}
        self.running: dict[str, _Running] = {}
        self.members: membership.Membership | None = None
        self._js: JetStreamContext | None = None
        self._nc: Client | None = None
        self._group: asyncio.TaskGroup | None = None
        self._cache_tasks: dict[tuple[gvr.Resource, type[Any]], asyncio.Task[None]] = {}
        self._users: dict[tuple[gvr.Resource, type[Any]], set[str]] = {}
        self._tasks: list[tuple[Coroutine[Any, Any, None], asyncio.Event | None]] = []
        # Caches each controller opened at run time (Context.open_cache), part of its catch-up.
        self._dynamic: dict[str, dict[gvr.Resource, cache.Cache[Any]]] = {}
        # Shared by every cache and controller of this process (`catchup`): one LIST and one
        # watcher request per resource for a burst of catch-ups.
        self._versions = catchup.ResourceVersions()
        self._sync: catchup.WatcherSync | None = None

    def _cache(self, res: gvr.Resource, view: type[Any], user: str, client: kubeclient.KubeClient) -> Any:
        # Controllers that read a resource through the same view share one cache; the first
        # one's API client fetches the objects too large for a message.
        assert self._js is not None and self._nc is not None
        key = (res, view)
        if key not in self.caches:
            replicas = self._nats.stream_replicas
            store: cache.Cache[Any] = cache.Cache(
                self._js, self._nc, res, view, stream_replicas=replicas, client=client, sync=self._sync
            )
            if self._group is not None:  # opened at run time (and perhaps closed again): on its own
                self.caches[key] = store
                self._start_cache(key)
            else:
                # Views of one resource opened at start-up read one consumer: the first's.
                first = next(
                    (c for (r, _), c in self.caches.items() if r == res and not c.shares_consumer), None
                )
                if first is not None:
                    first.share_consumer(store)
                self.caches[key] = store
        self._users.setdefault(key, set()).add(user)
        return self.caches[key]

    def _start_cache(self, key: tuple[gvr.Resource, type[Any]]) -> None:
        assert self._group is not None
        self._cache_tasks[key] = self._group.create_task(_logged("cache", self.caches[key].run))

    def open_dynamic(
        self, name: str, res: gvr.Resource, view: type[Any], client: kubeclient.KubeClient
    ) -> cache.Cache[Any]:
        store: cache.Cache[Any] = self._cache(res, view, name, client)
        self._dynamic.setdefault(name, {})[res] = store
        return store

    def close_dynamic(self, name: str, res: gvr.Resource, store: cache.Cache[Any]) -> None:
        self._dynamic.get(name, {}).pop(res, None)
        key = next((k for k, c in self.caches.items() if c is store), None)
        if key is None:
            return
        users = self._users.get(key, set())
        users.discard(name)
        if users or store.feeds_others:
            return  # another controller still reads it, or reads its consumer
        self.caches.pop(key, None)
        self._users.pop(key, None)
        task = self._cache_tasks.pop(key, None)
        if task is not None:
            task.cancel()

    async def published(self) -> set[gvr.Resource]:
        assert self._js is not None
        try:
            info = await self._js.stream_info(wire.OBJECTS_STREAM, subjects_filter=subjects.PROGRESS_FILTER)
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
        # All at once: on kube-apiserver a list's resourceVersion is the whole cluster's, so an
        # idle resource's catch-up waits out the watcher's grace and a relist, and one after the
        # other those waits added up to minutes at start. A TaskGroup, so that a failure stops
        # the rest before `_until_done` tries again.
        async with asyncio.TaskGroup() as group:
            for res, view in run.spec.views.items():
                group.create_task(self._catch_up(self.caches[(res, view)], run.client))
            for store in list(self._dynamic.get(run.spec.name, {}).values()):
                group.create_task(self._catch_up_dynamic(run, store))

    async def _catch_up(self, store: cache.Cache[Any], client: kubeclient.KubeClient) -> None:
        await store.wait_synced()
        await store.wait_caught_up(await self._versions.current(store.resource, client))

    async def _catch_up_dynamic(self, run: _Running, store: cache.Cache[Any]) -> None:
        try:
            async with asyncio.timeout(DYNAMIC_CATCH_UP_LIMIT):
                await self._catch_up(store, run.client)
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
        if lost:
            run.ctx.partitions_lost(functools.partial(self._keeps, name, frozenset(lost)))
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

    def _keeps(self, name: str, lost: frozenset[int], key: str) -> bool:
        """Whether memory of `key` (expectations, own writes) outlives the loss of `lost`: only
        when its partition is owned now and is not one of them. A lapsed grant is lost and granted
        back at once, so by the time the partitions are stopped they are often owned again; yet
        what was remembered under the old grant is void. Kept, a ReplicaSet's expectations of a
        sync the stop cancelled mid-way waited for pods never to be made, and no more were made
        (issue 33)."""
        count = self.members.partitions(name) if self.members is not None else None
        if count is None or self.members is None:
            return False
        partition = subjects.partition_of(key, count)
        return partition not in lost and self.members.owns(name, partition)

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
        builder = _client_builder(args)
        clients = {
            spec.name: flags.kube_client(
                args,
                user_agent=user_agent(spec.name, args.instance),
                write_guard=fencing.check_write,
                rate_scale=spec.client_rate_scale,
                credentials=builder.credentials(_service_account(spec)) if builder else None,
            )
            for spec in self.specs
        }
        nc = await natsconn.connect(self._nats, f"kcm-controllers-{args.instance}")
        self._js = nc.jetstream()
        self._nc = nc
        self._sync = catchup.WatcherSync(nc)
        secure, ops, url, reviews = await self._serve()
        try:
            self._build(clients)
            members = self.members = membership.Membership(
                nc,
                service="controllers",
                instance=args.instance,
                controllers=list(self.running),
                ops_url=url,
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
                async with asyncio.TaskGroup() as catching_up:
                    for name, run in self.running.items():
                        catching_up.create_task(
                            _until_done("catch up", name, functools.partial(self._caught_up, run))
                        )
                # Only now ask for partitions: a replica never acts on a cache behind the API.
                group.create_task(_logged("membership", members.run))
                log.info("controllers running", extra={"controllers": list(self.running)})
        finally:
            for runner in (secure, ops):
                if runner is not None:
                    await runner.cleanup()
            for client in reviews:
                await client.close()
            for run in self.running.values():
                await run.client.close()
            if builder is not None:
                await builder.root.close()
            with contextlib.suppress(Exception):
                await nc.drain()

    async def _serve(
        self,
    ) -> tuple[web.AppRunner | None, web.AppRunner | None, str, list[kubeclient.KubeClient]]:
        """Upstream's secure port (unless --secure-port=0) and the plain ops port (only when
        --ops-port is given); the URL membership reports (the ops port's when served)."""
        args = self.args
        secure = await server.start(self._routes(), args, PAIR_NAME)
        url = ""
        if secure is not None:
            host = args.bind_address if args.bind_address not in ("", "0.0.0.0", "::") else "127.0.0.1"
            url = f"https://{host}:{secure[1]}"
        ops = None
        if args.ops_port is not None:
            ops, port = await opsserver.start(opsserver.app(self.checks), args.ops_bind, args.ops_port)
            url = opsserver.url(args.ops_bind, port)
        runner, reviews = (secure[0], secure[2]) if secure is not None else (None, [])
        return runner, ops, url, reviews

    def _routes(self) -> web.Application:
        """The ops routes plus upstream's /configz and the controllers' debug handlers."""
        application = opsserver.app(self.checks)
        body = json.dumps(configz.componentconfig(self.args), default=str)

        async def config(request: web.Request) -> web.Response:
            return web.Response(text=body, content_type="application/json")

        application.router.add_get("/configz", config)
        for spec in self.specs:
            for path in spec.debug_handlers:
                route = f"/debug/controllers/{spec.name}/{path}"
                application.router.add_get(route, functools.partial(self._debug, spec.name, path))
        return application

    async def _debug(self, name: str, path: str, request: web.Request) -> web.StreamResponse:
        """A controller's debug handler; 404 until its `build` has set it, as upstream mounts
        a controller's handler only once the controller started."""
        run = self.running.get(name)
        handler = run.ctx.debug.get(path) if run is not None else None
        if handler is None:
            raise web.HTTPNotFound()
        return await handler(request)

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
                rate_limiter=retry_limiter(spec),
                metrics_name=queue_name(spec),
            )
            self.running[spec.name] = _Running(spec, ctx, queue, client, recorder)
            self.checks.add(spec.name, queue.check)


def queue_name(spec: Spec) -> str:
    """The `name` label of the Spec's `workqueue_*` metrics: upstream's queue name."""
    return spec.queue_name or spec.name


def retry_limiter(spec: Spec) -> ratelimit.RateLimiter:
    """The limiter of a Spec's failed reconciles (`Spec.retry_backoff`, `Spec.retry_bucket`)."""
    per_key = ratelimit.ItemExponentialFailureRateLimiter(*spec.retry_backoff)
    if not spec.retry_bucket:
        return per_key
    return ratelimit.MaxOfRateLimiter(per_key, ratelimit.BucketRateLimiter(10.0, 100))


def _client_builder(args: argparse.Namespace) -> clientbuilder.ClientBuilder | None:
    """Under --use-service-account-credentials, what makes each controller's ServiceAccount
    credentials, requesting tokens with the --kubeconfig identity; None without the flag."""
    if not getattr(args, "use_service_account_credentials", False):
        return None
    root = flags.kube_client(args, user_agent=user_agent("controller-manager", args.instance))
    return clientbuilder.ClientBuilder(root, args.service_account_credentials_namespace)


def _service_account(spec: Spec) -> str:
    """The ServiceAccount a controller runs as, from its deploy.yaml."""
    try:
        return deployfile.read(spec).service_account
    except (OSError, ValueError) as exc:
        raise errors.ConfigError(
            f"--use-service-account-credentials: no ServiceAccount for {spec.name}: {exc}"
        ) from exc


def user_agent(controller: str, instance: str) -> str:
    """`kcm/<controller> (<instance>)`; the instance is a flag, so anything but printable ASCII
    (and the parentheses that delimit it) is replaced rather than sent in a header."""
    safe = "".join(ch if " " <= ch <= "~" and ch not in "()" else "_" for ch in instance)
    return f"kcm/{controller} ({safe})"


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
    """Run the Specs `--controllers` and `--plugin` choose; each controller of upstream's
    registry that would have started but does not here is logged once with why."""
    controllerflags.refuse_leader_elect_false(args)
    chosen = controllerflags.select(specs, args.controllers) + [
        controllerflags.load_plugin(path) for path in args.plugin
    ]
    gates = getattr(args, "feature_gates", None) or {}
    for name, reason in controllerflags.not_started(specs, args.controllers, gates):
        log.info("controller not started", extra={"controller": name, "reason": reason})
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
