"""The leader's work: one `ResourceWatch` per chosen resource, kept in step with discovery.

`main` runs `Supervisor.lead` under leader election; it returns only by cancellation
(leadership lost or shutdown), after stopping every loop and flushing what is in flight.
Every term starts from scratch (each loop re-reads the stream and relists), so a standby
that takes over publishes exactly what its predecessor left out.

It also watches the object stream itself (`_guard`): a stream that is gone is declared again,
and one that was re-created (its creation time changed) or purged (a resource's progress
marker vanished) makes the loops concerned re-read it and relist (`ResourceWatch.reset`), so
subscribers get back everything the stream lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

import aiohttp
import nats.errors
import nats.js.errors
from kcm_shared.apimachinery import gvr
from kcm_shared.base import cancellation
from kcm_shared.bus import natsconn, subjects, wire
from kcm_shared.client import kubeclient
from nats.aio.client import Client

from kcm_watcher import discovery, publisher, resourcewatch, syncserver

log = logging.getLogger("kcm.watcher")


@dataclass(frozen=True, slots=True)
class Options:
    selection: discovery.Selection
    discovery_interval: float = 30.0
    watch_timeout: float = 300.0
    sync_grace: float = 2.0
    sync_timeout: float = 30.0
    stall_limit: float = 60.0  # a resource failing longer than this makes the check unhealthy
    shutdown_flush: float = 5.0  # how long unacknowledged messages may delay a hand-over
    stream_check_interval: float = 2.0  # how often the object stream's identity is checked
    stream_replicas: int = 1


@dataclass(slots=True)
class _Running:
    watch: resourcewatch.ResourceWatch
    lane: publisher.Lane
    task: asyncio.Task[None]


class Supervisor:
    def __init__(
        self, client: kubeclient.KubeClient, nc: Client, pub: publisher.Publisher, options: Options
    ) -> None:
        self._client = client
        self._nc = nc
        self._js = nc.jetstream()
        self._publisher = pub
        self._options = options
        self._running: dict[gvr.Resource, _Running] = {}

    def lookup(self, res: gvr.Resource) -> resourcewatch.ResourceWatch | None:
        running = self._running.get(res)
        return running.watch if running is not None else None

    def running(self) -> list[tuple[resourcewatch.ResourceWatch, publisher.Lane]]:
        """Every resource loop of this term with its lane (empty while standing by)."""
        return [(r.watch, r.lane) for r in self._running.values()]

    def check(self) -> str | None:
        """The `watcher` health check: every loop alive and none failing for long (a standby is healthy)."""
        problems = []
        for res, running in sorted(self._running.items(), key=lambda item: str(item[0])):
            if running.task.done():
                problems.append(f"{res}: loop ended")
            elif running.watch.failing_for() > self._options.stall_limit:
                problems.append(f"{res}: {running.watch.last_error}")
        return "; ".join(problems) or None

    async def lead(self) -> None:
        """Watch and publish until cancelled."""
        opts = self._options
        sync = syncserver.SyncServer(self._nc, self.lookup, grace=opts.sync_grace, timeout=opts.sync_timeout)
        await sync.start()
        log.info("leading: watching resources")
        guard = asyncio.ensure_future(self._guard())
        try:
            while True:
                cancellation.checkpoint()
                if guard.done():
                    guard.result()  # a bug in the guard surfaces here
                await self._refresh()
                await asyncio.sleep(opts.discovery_interval)
        finally:
            guard.cancel()
            await asyncio.wait({guard})
            await sync.stop()
            await self._stop_all()

    async def _guard(self) -> None:
        """Notice the object stream losing what was published; see the module docstring."""
        created = None
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._options.stream_check_interval):
                    await self._publisher.stream_missing.wait()
            self._publisher.stream_missing.clear()
            # Only markers acknowledged before the request must be in its answer.
            marked = [(res, run.watch) for res, run in self._running.items() if run.watch.marked]
            try:
                info = await self._js.stream_info(
                    wire.OBJECTS_STREAM, subjects_filter=subjects.PROGRESS_FILTER
                )
            except nats.js.errors.NotFoundError:
                log.warning("the object stream is gone; declaring it again")
                self._reset_all("the object stream was deleted")
                with contextlib.suppress(nats.errors.Error, TimeoutError):
                    await natsconn.ensure_object_stream(self._js, self._options.stream_replicas)
                created = None
                continue
            except (nats.errors.Error, TimeoutError):
                continue  # NATS is away: the publishes' retries and the next round tell
            if created is not None and info.created != created:
                self._reset_all("the object stream was re-created")
            elif created is not None:
                present = (info.state.subjects or {}) if info.state else {}
                for res, watch in marked:
                    if subjects.progress_subject(res) not in present and watch.marked:
                        watch.reset("its progress marker is gone from the stream")
            created = info.created

    def _reset_all(self, why: str) -> None:
        for running in self._running.values():
            running.watch.reset(why)

    async def _refresh(self) -> None:
        sel = self._options.selection
        keep: set[gvr.Resource] = set()
        if sel.everything:
            try:
                found = await discovery.discover(self._client)
            except (kubeclient.ApiError, aiohttp.ClientError, OSError, TimeoutError) as exc:
                log.warning("discovery failed, keeping the current resources", extra={"error": str(exc)})
                return
            wanted = sel.choose(found.resources)
            keep = {res for res in self._running if res.group in found.failed_groups}
        else:
            wanted = sel.choose(())
        for res, running in list(self._running.items()):
            if running.task.done() and not running.task.cancelled():
                log.error("resource loop crashed, restarting", exc_info=running.task.exception())
                await self._stop(res)
            elif res not in wanted and res not in keep:
                log.info("resource gone from discovery, no longer watched", extra={"resource": str(res)})
                await self._stop(res)
        for res in sorted(wanted - self._running.keys(), key=str):
            self._start(res)

    def _start(self, res: gvr.Resource) -> None:
        lane = self._publisher.lane(str(res))
        watch = resourcewatch.ResourceWatch(
            res, self._client, self._nc, lane, watch_timeout=self._options.watch_timeout
        )
        self._running[res] = _Running(watch, lane, asyncio.ensure_future(watch.run()))
        log.info("watching", extra={"resource": str(res)})

    async def _stop(self, res: gvr.Resource) -> None:
        running = self._running.pop(res)
        running.task.cancel()
        await asyncio.wait({running.task})
        running.lane.close()

    async def _stop_all(self) -> None:
        tasks = [running.task for running in self._running.values()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        # Let what was handed over land, but not for long: a successor relists anyway.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._options.shutdown_flush):
                await self._publisher.flush_all()
        self._publisher.abandon_all()
        for running in self._running.values():
            running.lane.close()
        self._running.clear()
