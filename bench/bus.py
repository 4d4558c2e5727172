"""Benchmark of the NATS bus (watcher, durable work queue, cache); run by `make bench`.

Four measurements, each beside a baseline measured in the same run:

1. Watcher throughput: API events to acknowledged JetStream publishes per second, for the
   initial list (configmaps created before `kcm watcher` starts) and for a live watch
   (configmaps created at full speed while it runs). Baselines: a plain paged LIST and a
   plain watch from this process (the API's ceiling), and raw windowed JetStream publishes of
   same-sized messages (the bus's ceiling).
2. Event-to-reconcile-start latency through the whole stack (apiserver, nats-server,
   watcher, coordinator, one replica of the controller `SPEC` below), idle and loaded.
   Baseline: a bare watch process's send-to-event latency at the same rates.
3. Durable work-queue throughput with 1, 2 and 4 replicas (in-process `DurableQueue`s
   sharing one nats-server, partitions split evenly), no-op reconciles. Baseline: the
   in-memory `WorkQueue` with the same workers.
4. Cache memory for 10,000 realistic pods, with and without the raw bodies kept.
   Baseline: the same bodies as plain dicts from json.loads.
5. Coordinator failover: the longest pause in reconciles (the longest time between two
   reconcile starts of the latency controller while writes arrive at a steady rate) across a
   kill -9 of the leading coordinator, two coordinators electing a leader with the default
   15 s Lease. Baseline: the longest pause under the same load before the kill.

Timings are printed, never enforced: the exit status is non-zero only when something was
lost (an object never published, a key never reconciled, a failed request).

The same file is the plugin of `kcm controller --plugin bus:SPEC` (with bench/ on
PYTHONPATH), and with `--role watch` the baseline's watch process.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import gc
import itertools
import json
import math
import os
import sys
import tempfile
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import benchlib
import msgspec
import nats
import nats.js.errors
import uvloop
from benchlib import footprint
from kcm_shared import runtime
from kcm_shared.apimachinery import codec, gvr
from kcm_shared.bus import natsconn, subjects, wire
from kcm_shared.runtime import cache
from kcm_shared.workqueue import durable, queue
from kcm_simulator import podstatus
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext, api

CONFIGMAPS = gvr.Resource("", "v1", "configmaps")
PODS = gvr.Resource("", "v1", "pods")
RECORDS_ENV = "KCM_BENCH_RECORDS"  # where the latency controller appends its records
SENT = "sent"  # configmap data key: unix time the client sent the write
CONCURRENCY = 32  # connections of the closed-loop writers
PUBLISH_WINDOW = 512  # unacknowledged publishes of the raw baseline: the watcher's default
WORKERS = 5  # per work-queue replica: the controller runtime's default
PARTITIONS = 8  # work partitions: the coordinator's default, divisible by 1, 2 and 4 replicas
SCRIPT = Path(__file__).resolve()
HERE = SCRIPT.parent


# -- the latency controller: runs inside `kcm controller --plugin bus:SPEC` ------------------------


class SentView(codec.Meta):
    data: dict[str, str] | None = None


def _build(ctx: runtime.Context) -> runtime.Reconcile:
    store = ctx.caches[CONFIGMAPS]
    store.add_handler(
        on_add=lambda obj: ctx.enqueue(codec.key_of(obj.metadata)),
        on_update=lambda old, new: ctx.enqueue(codec.key_of(new.metadata)),
    )
    # O_APPEND, one write per record: lines never interleave and nothing is buffered in here.
    fd = os.open(os.environ[RECORDS_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    async def reconcile(key: str) -> runtime.Result | None:
        start = time.time()
        obj = store.get_key(key)
        sent = (obj.data or {}).get(SENT) if obj is not None else None
        if sent is not None:
            os.write(fd, f"{key} {sent} {start}\n".encode())
        return None

    return reconcile


SPEC = runtime.Spec(
    name="bench-latency",
    alias="bench-latency",
    primary=CONFIGMAPS,
    views={CONFIGMAPS: SentView},
    build=_build,
    workers=WORKERS,
)


# -- API calls -------------------------------------------------------------------------------------


def _session() -> aiohttp.ClientSession:
    # Paced runs may have more requests in flight than the closed-loop workers.
    connector = aiohttp.TCPConnector(limit=256)
    return aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120))


def configmap(name: str, sent: float | None = None) -> dict[str, Any]:
    data = {"app": "bench", "index": name, "payload": "x" * 200}
    if sent is not None:
        data[SENT] = repr(sent)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


@dataclass
class Writes(benchlib.Failures):
    ok: int = 0
    first: float = math.nan  # unix time the first write was sent
    last: float = math.nan  # unix time the last answer came back
    seconds: float = math.nan

    @property
    def rate(self) -> float:
        return self.ok / self.seconds if self.seconds > 0 else math.nan


async def _post(session: aiohttp.ClientSession, url: str, body: dict[str, Any], writes: Writes) -> None:
    try:
        async with session.post(url, data=benchlib.encode(body), headers=benchlib.JSON) as resp:
            payload = await resp.read()
            if resp.status == 201:
                writes.ok += 1
            else:
                writes.record_error(f"HTTP {resp.status}: {payload[:300].decode(errors='replace')}")
    except aiohttp.ClientError as exc:
        writes.record_error(f"{type(exc).__name__}: {exc}")


def _cm_url(url: str, namespace: str) -> str:
    return f"{url}/api/v1/namespaces/{namespace}/configmaps"


async def create_closed_loop(session: aiohttp.ClientSession, url: str, namespace: str, count: int) -> Writes:
    """`CONCURRENCY` workers each send the next create as soon as their last one returned."""
    writes = Writes()
    indices = iter(range(count))
    target = _cm_url(url, namespace)

    async def worker() -> None:
        for i in indices:
            await _post(session, target, configmap(f"cm-{i:06d}"), writes)

    writes.first = time.time()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    writes.last = time.time()
    writes.seconds = writes.last - writes.first
    return writes


async def create_paced(
    session: aiohttp.ClientSession, url: str, namespace: str, prefix: str, rate: float, count: int
) -> Writes:
    """Creates at a fixed rate whatever the answers do, each stamped with its scheduled send time.

    Stamping the schedule rather than the actual send charges a stalled client or server for
    the wait instead of hiding it.
    """
    writes = Writes()
    target = _cm_url(url, namespace)
    tasks: list[asyncio.Task[None]] = []
    start, wall = time.perf_counter(), time.time()
    writes.first = wall
    for i in range(count):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        body = configmap(f"{prefix}-{i:05d}", sent=wall + i / rate)
        tasks.append(asyncio.create_task(_post(session, target, body, writes)))
    await asyncio.gather(*tasks)
    writes.last = time.time()
    writes.seconds = time.perf_counter() - start
    return writes


async def ensure_namespace(session: aiohttp.ClientSession, url: str, name: str) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    async with session.post(
        f"{url}/api/v1/namespaces", data=benchlib.encode(body), headers=benchlib.JSON
    ) as resp:
        if resp.status not in (201, 409):
            raise RuntimeError(f"create namespace {name}: HTTP {resp.status}: {(await resp.text())[:300]}")


class _ListMeta(msgspec.Struct):
    resourceVersion: str = ""
    # `continue` is a Python keyword: named through rename.
    next: str = msgspec.field(default="", name="continue")


class _List(msgspec.Struct):
    items: list[msgspec.Raw]
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)


@dataclass
class Listing:
    items: int = 0
    bytes: int = 0
    seconds: float = math.nan
    resource_version: str = ""

    @property
    def rate(self) -> float:
        return self.items / self.seconds if self.seconds > 0 else math.nan


async def list_all(session: aiohttp.ClientSession, url: str, path: str, limit: int = 500) -> Listing:
    """A paged LIST, as the watcher's reflector does it (pages of 500)."""
    listing = Listing()
    decoder = msgspec.json.Decoder(_List)
    token = ""
    start = time.perf_counter()
    while True:
        params = {"limit": str(limit), **({"continue": token} if token else {})}
        async with session.get(f"{url}{path}", params=params) as resp:
            body = await resp.read()
            if resp.status != 200:
                raise RuntimeError(f"LIST {path}: HTTP {resp.status}: {body[:300].decode(errors='replace')}")
        page = decoder.decode(body)
        listing.items += len(page.items)
        listing.bytes += sum(len(item) for item in page.items)
        listing.resource_version = listing.resource_version or page.metadata.resourceVersion
        token = page.metadata.next
        if not token:
            break
    listing.seconds = time.perf_counter() - start
    return listing


_NO_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_read=None)


class _Event(msgspec.Struct):
    type: str


async def watch_count(
    session: aiohttp.ClientSession, url: str, namespace: str, rv: str, expected: int, seen: list[float]
) -> None:
    """Count ADDED events of a namespace's configmaps; append each arrival time to `seen`."""
    decoder = msgspec.json.Decoder(_Event)
    params = {"watch": "true", "resourceVersion": rv}
    async with session.get(_cm_url(url, namespace), params=params, timeout=_NO_TIMEOUT) as resp:
        if resp.status != 200:
            raise RuntimeError(f"watch: HTTP {resp.status}")
        async for lines in benchlib.watch_lines(resp):
            now = time.time()
            seen.extend(now for line in lines if decoder.decode(line).type == "ADDED")
            if len(seen) >= expected:
                return


# -- NATS ------------------------------------------------------------------------------------------


async def connect(url: str) -> Client:
    return await nats.connect(url, max_reconnect_attempts=0, pending_size=64 * 1024 * 1024)


async def publish_windowed(
    js: JetStreamContext, messages: Iterable[tuple[str, bytes, dict[str, str]]], window: int
) -> tuple[int, float]:
    """Publish with at most `window` unacknowledged, as the watcher does; (acked, seconds)."""
    slots = asyncio.Semaphore(window)
    acked = 0

    async def one(subject: str, data: bytes, headers: dict[str, str]) -> None:
        nonlocal acked
        try:
            await js.publish(subject, data, headers=headers)
            acked += 1
        finally:
            slots.release()

    tasks: list[asyncio.Task[None]] = []
    start = time.perf_counter()
    for subject, data, headers in messages:
        await slots.acquire()
        tasks.append(asyncio.create_task(one(subject, data, headers)))
    await asyncio.gather(*tasks)
    return acked, time.perf_counter() - start


async def stream_state(js: JetStreamContext, stream: str) -> api.StreamState:
    info = await js.stream_info(stream)
    return info.state


async def stored_at(js: JetStreamContext, stream: str, seq: int) -> float:
    """Unix time the server stored message `seq`."""
    msg = await js.get_msg(stream, seq)
    assert msg.time is not None
    return msg.time.timestamp()


async def last_object_time(js: JetStreamContext, last_seq: int) -> float:
    """When the newest object message (not a progress marker) was stored."""
    seq = last_seq
    while True:
        msg = await js.get_msg(wire.OBJECTS_STREAM, seq)
        if msg.subject and not subjects.is_progress_subject(msg.subject) and msg.time is not None:
            return msg.time.timestamp()
        seq -= 1


async def poll(condition: Callable[[], Awaitable[bool]], limit: float, what: str) -> None:
    deadline = time.monotonic() + limit
    while not await condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {limit:g}s waiting for {what}")
        await asyncio.sleep(0.02)


# -- 1. watcher throughput -------------------------------------------------------------------------


@dataclass
class WatcherFigures:
    base_list: Listing = field(default_factory=Listing)
    base_live: Writes = field(default_factory=Writes)
    base_live_seconds: float = math.nan  # first create sent -> last watch event received
    raw_acked: int = 0
    raw_seconds: float = math.nan
    raw_size: int = 0
    initial_objects: int = 0
    initial_seconds: float = math.nan  # first -> last publish stored
    initial_from_start_seconds: float = math.nan  # process spawned -> last publish stored
    initial_cpu: float = math.nan
    live: Writes = field(default_factory=Writes)
    live_seconds: float = math.nan  # first create sent -> last publish stored
    live_cpu: float = math.nan
    problems: list[str] = field(default_factory=list)


def _watcher_argv(api: benchlib.ApiServer, nats_url: str, name: str) -> list[str]:
    return [
        "watcher",
        "--resources",
        "v1/configmaps",
        "--leader-elect=false",
        *_service_flags(api, nats_url, name),
    ]


def _service_flags(api: benchlib.ApiServer, nats_url: str, name: str) -> list[str]:
    return [
        "--kubeconfig",
        str(api.kubeconfig),
        "--nats-url",
        nats_url,
        "--ops-bind",
        "127.0.0.1",
        "--ops-port",
        "0",
        "--instance",
        name,
        "--log-level",
        "warning",
    ]


async def raw_publish_baseline(js: JetStreamContext, count: int, body: bytes) -> tuple[int, float]:
    """The bus's ceiling: same-sized messages, one subject each, windowed like the watcher's."""
    stream = "BENCH_RAW"
    await js.add_stream(
        api.StreamConfig(
            name=stream,
            subjects=["bench.raw.>"],
            storage=api.StorageType.FILE,
            max_msgs_per_subject=1,
        )
    )
    headers = {wire.EVENT: wire.ADDED, wire.RESOURCE_VERSION: "1000000"}
    messages = (
        (f"bench.raw.bench.cm-{i:06d}", body, {**headers, wire.MSG_ID: f"{i:036d}:1000000:{wire.ADDED}"})
        for i in range(count)
    )
    try:
        return await publish_windowed(js, messages, PUBLISH_WINDOW)
    finally:
        await js.delete_stream(stream)


async def watcher_throughput(command: list[str], args: argparse.Namespace, workdir: Path) -> WatcherFigures:
    figures = WatcherFigures()
    count = args.configmaps
    async with (
        benchlib.apiserver(command, workdir) as server,
        benchlib.nats_server(workdir) as natsd,
        _session() as session,
    ):
        url = server.url
        nc = await connect(natsd.url)
        js = nc.jetstream()
        try:
            for ns in ("bench-list", "bench-live"):
                await ensure_namespace(session, url, ns)
            print(f"[1] watcher throughput: {count:,} configmaps under a bare watch ...", flush=True)
            rv = (
                await list_all(session, url, "/api/v1/namespaces/bench-list/configmaps", 1)
            ).resource_version
            seen: list[float] = []
            watch = asyncio.create_task(watch_count(session, url, "bench-list", rv, count, seen))
            figures.base_live = await create_closed_loop(session, url, "bench-list", count)
            try:
                await asyncio.wait_for(asyncio.shield(watch), 60)
            except TimeoutError:
                figures.problems.append(f"bare watch saw {len(seen)} of {figures.base_live.ok} creates")
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)
            if seen:
                figures.base_live_seconds = max(seen) - figures.base_live.first
            figures.base_list = await list_all(session, url, "/api/v1/configmaps")
            objects = figures.base_list.items
            body_size = figures.base_list.bytes // max(objects, 1)
            figures.raw_size = body_size

            print(f"[1] raw JetStream publishes of {count:,} x {body_size} B ...", flush=True)
            figures.raw_acked, figures.raw_seconds = await raw_publish_baseline(js, count, b"x" * body_size)

            print(f"[1] kcm watcher: initial list of {objects:,} configmaps ...", flush=True)
            spawned = time.time()
            argv = _watcher_argv(server, natsd.url, "bench-watcher")
            async with benchlib.kcm_process(command, argv, workdir / "watcher.log") as watcher:
                cpu0 = benchlib.process_cpu_seconds(watcher.pid)

                async def listed() -> bool:
                    if watcher.returncode is not None:
                        raise RuntimeError("kcm watcher exited")
                    try:
                        state = await stream_state(js, wire.OBJECTS_STREAM)
                    except nats.js.errors.NotFoundError:
                        return False
                    return state.messages >= objects + 1  # every object, and the list's progress marker

                await poll(listed, args.timeout, "the watcher's initial publishes")
                state = await stream_state(js, wire.OBJECTS_STREAM)
                figures.initial_cpu = benchlib.process_cpu_seconds(watcher.pid) - cpu0
                first = await stored_at(js, wire.OBJECTS_STREAM, state.first_seq)
                last = await last_object_time(js, state.last_seq)
                figures.initial_objects = objects
                figures.initial_seconds = last - first
                figures.initial_from_start_seconds = last - spawned

                print(f"[1] kcm watcher: {count:,} configmaps created while it watches ...", flush=True)
                before = state.messages
                cpu0 = benchlib.process_cpu_seconds(watcher.pid)
                figures.live = await create_closed_loop(session, url, "bench-live", count)

                async def published() -> bool:
                    state = await stream_state(js, wire.OBJECTS_STREAM)
                    return state.messages >= before + figures.live.ok

                try:
                    await poll(published, 60, "the watcher's live publishes")
                except TimeoutError as exc:
                    figures.problems.append(str(exc))
                state = await stream_state(js, wire.OBJECTS_STREAM)
                figures.live_cpu = benchlib.process_cpu_seconds(watcher.pid) - cpu0
                figures.live_seconds = await last_object_time(js, state.last_seq) - figures.live.first
        finally:
            await nc.close()
    for who, writes in (("bare watch", figures.base_live), ("watcher", figures.live)):
        if writes.failed:
            figures.problems.append(f"{who} phase: {writes.failed} creates failed, e.g. {writes.errors}")
    return figures


# -- 2. event-to-reconcile latency -----------------------------------------------------------------


@dataclass
class Phase:
    writes: Writes
    latencies: list[float]  # seconds, ascending
    on_bus: list[float] = field(default_factory=list)  # sent -> object message seen on NATS

    def ms(self, q: float) -> float:
        return benchlib.percentile(self.latencies, q) * 1000

    def on_bus_ms(self, q: float) -> float:
        return benchlib.percentile(self.on_bus, q) * 1000


@dataclass
class LatencyFigures:
    bus_idle: Phase | None = None
    bus_loaded: Phase | None = None
    base_idle: Phase | None = None
    base_loaded: Phase | None = None
    ready_seconds: float = math.nan
    problems: list[str] = field(default_factory=list)


class Records:
    """Lines `key sent start` appended by the latency controller or the bare watch process."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.first: dict[str, tuple[float, float]] = {}
        self.starts: list[float] = []  # every reconcile's start, in file order

    def read(self) -> None:
        if not self.path.exists():
            return
        with self.path.open("rb") as f:
            f.seek(self.offset)
            chunk = f.read()
        complete = chunk.rfind(b"\n") + 1  # a line being written is read next time
        self.offset += complete
        for line in chunk[:complete].decode().splitlines():
            key, sent, start = line.split()
            # The first reconcile of a key is the one its creation caused.
            self.first.setdefault(key, (float(sent), float(start)))
            self.starts.append(float(start))

    async def wait(self, keys: list[str], limit: float) -> list[str]:
        """Until every key has a record; returns those still missing after `limit` seconds."""
        deadline = time.monotonic() + limit
        while True:
            self.read()
            missing = [k for k in keys if k not in self.first]
            if not missing or time.monotonic() > deadline:
                return missing
            await asyncio.sleep(0.05)


async def run_phase(
    session: aiohttp.ClientSession,
    url: str,
    records: Records,
    prefix: str,
    rate: float,
    count: int,
    problems: list[str],
) -> Phase:
    writes = await create_paced(session, url, "bench", prefix, rate, count)
    if writes.failed:
        problems.append(f"{prefix}: {writes.failed} creates failed, e.g. {writes.errors}")
    keys = [f"bench/{prefix}-{i:05d}" for i in range(count)]
    missing = await records.wait(keys, 60)
    if len(missing) > writes.failed:
        problems.append(f"{prefix}: {len(missing)} of {count} keys never reached, e.g. {missing[:3]}")
    latencies = sorted(start - sent for k in keys if k in records.first for sent, start in [records.first[k]])
    return Phase(writes, latencies)


async def run_phases(
    session: aiohttp.ClientSession,
    url: str,
    records: Records,
    who: str,
    args: argparse.Namespace,
    problems: list[str],
) -> tuple[Phase, Phase]:
    print(f"[2] {who}: idle, {args.idle_writes} writes at {args.idle_rate:g}/s ...", flush=True)
    idle = await run_phase(session, url, records, f"{who}-idle", args.idle_rate, args.idle_writes, problems)
    loaded_count = int(args.rate * args.loaded_seconds)
    print(f"[2] {who}: loaded, {loaded_count} writes at {args.rate:g}/s ...", flush=True)
    loaded = await run_phase(session, url, records, f"{who}-loaded", args.rate, loaded_count, problems)
    return idle, loaded


@contextlib.asynccontextmanager
async def bus_arrivals(nats_url: str) -> AsyncIterator[dict[str, float]]:
    """Sent -> seen on NATS for each configmap the watcher publishes: the watcher's share."""
    seen: dict[str, float] = {}
    nc = await connect(nats_url)

    async def on_msg(msg: Msg) -> None:
        where = subjects.parse_object_subject(msg.subject)
        key = f"{where.namespace}/{where.name}"
        sent = (codec.decode(msg.data, SentView).data or {}).get(SENT)
        if sent is not None and key not in seen:
            seen[key] = time.time() - float(sent)

    try:
        # A plain subscription sees what JetStream stores, the moment the server takes it.
        await nc.subscribe(f"{wire.OBJECT_PREFIX}.{subjects.resource_tokens(CONFIGMAPS)}.bench.*", cb=on_msg)
        yield seen
    finally:
        await nc.close()


def _on_bus(phase: Phase, prefix: str, seen: dict[str, float]) -> None:
    phase.on_bus = sorted(v for k, v in seen.items() if k.startswith(f"bench/{prefix}-"))


@dataclass
class LatencyStack:
    """An API server and a nats-server, and what the latency controller's process needs."""

    server: benchlib.ApiServer
    natsd: benchlib.Target
    session: aiohttp.ClientSession
    records: Records
    env: dict[str, str]  # of the controller process: where it appends its records
    controller_argv: list[str]


@contextlib.asynccontextmanager
async def latency_stack(command: list[str], workdir: Path, records: str) -> AsyncIterator[LatencyStack]:
    async with (
        benchlib.apiserver(command, workdir) as server,
        benchlib.nats_server(workdir) as natsd,
        _session() as session,
    ):
        await ensure_namespace(session, server.url, "bench")
        found = Records(workdir / records)
        yield LatencyStack(
            server,
            natsd,
            session,
            found,
            {RECORDS_ENV: str(found.path), "PYTHONPATH": str(HERE)},
            [
                "controller",
                "--plugin",
                "bus:SPEC",
                *_service_flags(server, natsd.url, "ctl-0"),
                "--secure-port=0",
            ],
        )


async def latency(command: list[str], args: argparse.Namespace, workdir: Path) -> LatencyFigures:
    figures = LatencyFigures()
    async with latency_stack(command, workdir, "records-bus") as bed:
        server, natsd, session, records = bed.server, bed.natsd, bed.session, bed.records
        env, controller_argv, url = bed.env, bed.controller_argv, bed.server.url
        print("[2] starting watcher, coordinator and the latency controller ...", flush=True)
        coordinator_argv = ["coordinator", "--leader-elect=false", "--partitions", str(PARTITIONS)]
        coordinator_argv += _service_flags(server, natsd.url, "coordinator-0")
        started = time.perf_counter()
        async with (
            benchlib.kcm_process(command, _watcher_argv(server, natsd.url, "w"), workdir / "watcher.log"),
            benchlib.kcm_process(command, coordinator_argv, workdir / "coordinator.log"),
            benchlib.kcm_process(command, controller_argv, workdir / "controller.log", env),
        ):
            # Ready when a write makes it all the way to a reconcile.
            warm = Writes()
            await _post(session, _cm_url(url, "bench"), configmap("warm-up", sent=time.time()), warm)
            if await records.wait(["bench/warm-up"], args.timeout):
                raise RuntimeError(f"the stack did not reconcile a first configmap within {args.timeout:g}s")
            figures.ready_seconds = time.perf_counter() - started
            async with bus_arrivals(natsd.url) as seen:
                bus = await run_phases(session, url, records, "bus", args, figures.problems)
            _on_bus(bus[0], "bus-idle", seen)
            _on_bus(bus[1], "bus-loaded", seen)
            figures.bus_idle, figures.bus_loaded = bus
        print("[2] bare watch process ...", flush=True)
        base_records = Records(workdir / "records-base")
        async with bare_watch(url, base_records.path):
            base = await run_phases(session, url, base_records, "base", args, figures.problems)
            figures.base_idle, figures.base_loaded = base
    return figures


@contextlib.asynccontextmanager
async def bare_watch(url: str, records: Path) -> AsyncIterator[None]:
    argv = [sys.executable, str(SCRIPT), "--role", "watch", "--url", url]
    proc = await asyncio.create_subprocess_exec(
        *argv, "--records", str(records), stdout=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        if line.strip() != b"ready":
            raise RuntimeError(f"the bare watch process failed to start: {line.decode(errors='replace')}")
        yield
    finally:
        await benchlib.stop(proc)


class _Data(msgspec.Struct):
    data: dict[str, str] = msgspec.field(default_factory=dict)
    metadata: codec.ObjectMeta = msgspec.field(default_factory=codec.ObjectMeta)


class _DataEvent(msgspec.Struct):
    type: str
    object: _Data


async def serve_bare_watch(url: str, records: Path) -> None:
    """The latency baseline: one watch of the namespace, a record per ADDED event, no bus."""
    decoder = msgspec.json.Decoder(_DataEvent)
    fd = os.open(records, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    async with aiohttp.ClientSession(timeout=_NO_TIMEOUT) as session:
        path = "/api/v1/namespaces/bench/configmaps"
        rv = (await list_all(session, url, path, 1)).resource_version
        params = {"watch": "true", "resourceVersion": rv, "allowWatchBookmarks": "true"}
        async with session.get(f"{url}{path}", params=params) as resp:
            if resp.status != 200:
                print(f"watch: HTTP {resp.status}", flush=True)
                return
            print("ready", flush=True)
            async for lines in benchlib.watch_lines(resp):
                received = time.time()
                out = []
                for line in lines:
                    event = decoder.decode(line)
                    sent = event.object.data.get(SENT)
                    if event.type == "ADDED" and sent is not None:
                        out.append(f"{codec.key_of(event.object.metadata)} {sent} {received}\n")
                if out:
                    os.write(fd, "".join(out).encode())


# -- 5. coordinator failover ---------------------------------------------------------------------


@dataclass
class FailoverFigures:
    before_pause: float = math.nan  # longest gap between reconcile starts before the kill, s
    across_pause: float = math.nan  # ... from the kill to the end of the load, s
    takeover_seconds: float = math.nan  # kill -> the standby leads
    writes: Writes = field(default_factory=Writes)
    problems: list[str] = field(default_factory=list)


def longest_gap(starts: list[float], begin: float, end: float) -> float:
    """The longest time within [begin, end] with no reconcile start (the edges count)."""
    inside = sorted(t for t in starts if begin <= t <= end)
    points = [begin, *inside, end]
    return max(b - a for a, b in itertools.pairwise(points))


async def leader_of(urls: dict[str, Path]) -> str | None:
    """Which coordinator (by name) says it leads; None while none does."""
    async with aiohttp.ClientSession() as session:
        for name, url_file in urls.items():
            with contextlib.suppress(OSError, aiohttp.ClientError, ValueError):
                async with session.get(url_file.read_text().strip() + "/status") as resp:
                    if (await resp.json()).get("leader"):
                        return name
    return None


async def failover(command: list[str], args: argparse.Namespace, workdir: Path) -> FailoverFigures:
    figures = FailoverFigures()
    async with latency_stack(command, workdir, "records") as bed:
        server, natsd, session, records = bed.server, bed.natsd, bed.session, bed.records
        env, controller_argv, url = bed.env, bed.controller_argv, bed.server.url
        print("[5] starting watcher, two coordinators and the latency controller ...", flush=True)
        urls = {name: workdir / f"{name}.url" for name in ("coordinator-a", "coordinator-b")}
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(
                benchlib.kcm_process(command, _watcher_argv(server, natsd.url, "w"), workdir / "watcher.log")
            )
            coordinators = {
                name: await stack.enter_async_context(
                    benchlib.kcm_process(
                        command,
                        [
                            "coordinator",
                            "--partitions",
                            str(PARTITIONS),
                            "--ops-url-file",
                            str(url_file),
                            *_service_flags(server, natsd.url, name),
                        ],
                        workdir / f"{name}.log",
                    )
                )
                for name, url_file in urls.items()
            }
            await stack.enter_async_context(
                benchlib.kcm_process(command, controller_argv, workdir / "controller.log", env)
            )
            warm = Writes()
            await _post(session, _cm_url(url, "bench"), configmap("warm-up", sent=time.time()), warm)
            if await records.wait(["bench/warm-up"], args.timeout):
                raise RuntimeError(f"the stack did not reconcile a first configmap within {args.timeout:g}s")
            leader = await _until(lambda: leader_of(urls), args.timeout, "a coordinator leading")
            count = int(args.failover_rate * args.failover_seconds)
            print(
                f"[5] {count} writes at {args.failover_rate:g}/s, kill -9 of {leader} after "
                f"{args.failover_kill_after:g}s ...",
                flush=True,
            )
            load = asyncio.create_task(
                create_paced(session, url, "bench", "failover", args.failover_rate, count)
            )
            began = time.time()
            await asyncio.sleep(args.failover_kill_after)
            coordinators[leader].kill()
            killed = time.time()
            standby = await _until(
                lambda: _other_leader(urls, leader), args.timeout, "the standby coordinator leading"
            )
            figures.takeover_seconds = time.time() - killed
            print(f"[5] {standby} leads {figures.takeover_seconds:.1f}s after the kill", flush=True)
            figures.writes = await load
            keys = [f"bench/failover-{i:05d}" for i in range(count)]
            missing = await records.wait(keys, args.timeout)
            if len(missing) > figures.writes.failed:
                figures.problems.append(f"failover: {len(missing)} of {count} keys never reconciled")
            if figures.writes.failed:
                figures.problems.append(f"failover: {figures.writes.failed} creates failed")
            ended = began + count / args.failover_rate
            figures.before_pause = longest_gap(records.starts, began + 1.0, killed)
            figures.across_pause = longest_gap(records.starts, killed, ended)
    return figures


async def _other_leader(urls: dict[str, Path], old: str) -> str | None:
    leader = await leader_of(urls)
    return leader if leader not in (None, old) else None


async def _until(probe: Callable[[], Awaitable[str | None]], limit: float, what: str) -> str:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if (found := await probe()) is not None:
            return found
        await asyncio.sleep(0.1)
    raise RuntimeError(f"timed out after {limit:g}s waiting for {what}")


# -- 3. durable work-queue throughput --------------------------------------------------------------


@dataclass
class QueueRun:
    replicas: int
    keys: int
    add_seconds: float = math.nan
    seconds: float = math.nan

    @property
    def rate(self) -> float:
        return self.keys / self.seconds if self.seconds > 0 else math.nan


@dataclass
class QueueFigures:
    baseline: QueueRun | None = None
    runs: list[QueueRun] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _keys(count: int) -> list[str]:
    return [f"ns-{i % 10}/key-{i:06d}" for i in range(count)]


async def inmemory_queue(count: int) -> QueueRun:
    """The ceiling without the bus: the same keys and no-op workers on the in-memory WorkQueue."""
    work: queue.WorkQueue[str] = queue.WorkQueue()
    done = 0
    finished = asyncio.Event()

    async def worker() -> None:
        nonlocal done
        while True:
            key = await work.get()
            done += 1
            work.done(key)
            if done == count:
                finished.set()

    run = QueueRun(0, count)
    start = time.perf_counter()
    for key in _keys(count):
        work.add(key)
    run.add_seconds = time.perf_counter() - start
    tasks = [asyncio.create_task(worker()) for _ in range(WORKERS)]
    start = time.perf_counter()
    await asyncio.wait_for(finished.wait(), 60)
    run.seconds = time.perf_counter() - start
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return run


async def durable_queue(nats_url: str, replicas: int, count: int, limit: float) -> tuple[QueueRun, str]:
    """`replicas` DurableQueues (one NATS connection each) draining `count` pre-published keys."""
    name = f"bench-queue-{replicas}"
    run = QueueRun(replicas, count)
    reconciled: set[str] = set()
    finished = asyncio.Event()

    async def reconcile(key: str) -> runtime.Result | None:
        reconciled.add(key)
        if len(reconciled) == count:
            finished.set()
        return None

    conns = [await connect(nats_url) for _ in range(replicas)]
    queues = [durable.DurableQueue(nc.jetstream(), nc, name, reconcile, workers=WORKERS) for nc in conns]
    tasks: list[asyncio.Task[None]] = []
    problem = ""
    try:
        await queues[0].setup()
        slots = asyncio.Semaphore(PUBLISH_WINDOW)

        async def add(key: str) -> None:
            try:
                await queues[0].add(key, PARTITIONS)
            finally:
                slots.release()

        start = time.perf_counter()
        adds: list[asyncio.Task[None]] = []
        for key in _keys(count):
            await slots.acquire()
            adds.append(asyncio.create_task(add(key)))
        await asyncio.gather(*adds)
        run.add_seconds = time.perf_counter() - start
        tasks = [asyncio.create_task(q.run()) for q in queues]
        start = time.perf_counter()
        for partition in range(PARTITIONS):
            await queues[partition % replicas].start_partition(partition)
        try:
            await asyncio.wait_for(finished.wait(), limit)
            run.seconds = time.perf_counter() - start
        except TimeoutError:
            problem = f"{replicas} replica(s): {len(reconciled)} of {count} keys reconciled in {limit:g}s"
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for nc in conns:
            await nc.close()
    return run, problem


async def queue_throughput(args: argparse.Namespace, workdir: Path) -> QueueFigures:
    figures = QueueFigures()
    print(f"[3] work queue: {args.keys:,} keys, in memory ...", flush=True)
    figures.baseline = await inmemory_queue(args.keys)
    async with benchlib.nats_server(workdir) as natsd:
        for replicas in (1, 2, 4):
            print(f"[3] work queue: {args.keys:,} keys, {replicas} durable replica(s) ...", flush=True)
            run, problem = await durable_queue(natsd.url, replicas, args.keys, args.timeout)
            figures.runs.append(run)
            if problem:
                figures.problems.append(problem)
    return figures


# -- 4. cache memory -------------------------------------------------------------------------------


class _Container(codec.View):
    name: str = ""
    image: str = ""


class _Condition(codec.View):
    type: str = ""
    status: str = ""


class _PodSpec(codec.View):
    node_name: str = ""
    containers: list[_Container] = msgspec.field(default_factory=list)


class _PodStatus(codec.View):
    phase: str = ""
    pod_ip: str = ""
    conditions: list[_Condition] = msgspec.field(default_factory=list)


class PodView(codec.Meta):
    """What a controller such as the ReplicaSet's reads of a pod."""

    spec: _PodSpec = msgspec.field(default_factory=_PodSpec)
    status: _PodStatus = msgspec.field(default_factory=_PodStatus)


def realistic_pod(i: int) -> dict[str, Any]:
    """A pod of a ReplicaSet as the API server holds it once the simulator runs it."""
    name = f"web-7d9f8b6c5-{i:06d}"
    uid = f"{i:08x}-1b2c-4d3e-8f40-{i:012x}"
    now = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=dt.UTC).isoformat().replace("+00:00", "Z")
    container = {
        "name": "web",
        "image": "registry.k8s.io/nginx-slim:0.27",
        "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
        "env": [
            {
                "name": "POD_NAME",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
            }
        ],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
        "readinessProbe": {
            "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
            "periodSeconds": 10,
            "timeoutSeconds": 1,
            "successThreshold": 1,
            "failureThreshold": 3,
        },
        "volumeMounts": [
            {
                "name": "kube-api-access",
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                "readOnly": True,
            }
        ],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "generateName": "web-7d9f8b6c5-",
            "namespace": f"team-{i % 20}",
            "uid": uid,
            "resourceVersion": str(100000 + i),
            "creationTimestamp": now,
            "labels": {"app": "web", "pod-template-hash": "7d9f8b6c5", "tier": "frontend"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web-7d9f8b6c5",
                    "uid": "5c3a1e2b-0d4f-4a6b-9c8d-7e6f5a4b3c2d",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "containers": [container],
            "volumes": [
                {
                    "name": "kube-api-access",
                    "projected": {
                        "defaultMode": 420,
                        "sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}],
                    },
                }
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "nodeName": f"sim-node-{i % 1000}",
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {"qosClass": "Burstable"},
    }
    pod["status"] = podstatus.running(
        pod,
        now=now,
        start_time=now,
        host_ip=f"10.0.{i % 250}.{i % 200 + 1}",
        pod_ip=f"10.244.{i // 250 % 250}.{i % 250 + 1}",
        ready=True,
    )
    return pod


@dataclass
class CacheFigures:
    pods: int = 0
    body_bytes: int = 0
    view_bytes: int = 0
    raw_bytes: int = 0
    dict_bytes: int = 0
    problems: list[str] = field(default_factory=list)


def dict_footprint(bodies: list[bytes], keys: list[str]) -> int:
    """The baseline: the bodies decoded with json.loads, kept in a dict by key."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = {key: json.loads(body) for key, body in zip(keys, bodies, strict=True)}
        gc.collect()
        size = tracemalloc.get_traced_memory()[0] - before
        del kept
        return size
    finally:
        tracemalloc.stop()


async def cache_memory(args: argparse.Namespace, workdir: Path) -> CacheFigures:
    figures = CacheFigures(pods=args.pods)
    bodies = [benchlib.encode(realistic_pod(i)) for i in range(args.pods)]
    figures.body_bytes = sum(len(b) for b in bodies)
    keys: list[str] = []
    messages = []
    for i, body in enumerate(bodies):
        pod = realistic_pod(i)["metadata"]
        keys.append(f"{pod['namespace']}/{pod['name']}")
        subject = subjects.object_subject(PODS, pod["namespace"], pod["name"])
        messages.append(
            (subject, body, {wire.EVENT: wire.ADDED, wire.RESOURCE_VERSION: pod["resourceVersion"]})
        )
    async with benchlib.nats_server(workdir) as natsd:
        nc = await connect(natsd.url)
        try:
            js = nc.jetstream()
            await natsconn.ensure_object_stream(js)
            print(f"[4] cache: publishing {args.pods:,} pods ...", flush=True)
            await publish_windowed(js, messages, PUBLISH_WINDOW)
            for keep_raw in (False, True):
                print(f"[4] cache: syncing (keep_raw={keep_raw}) under tracemalloc ...", flush=True)
                store: cache.Cache[PodView] = cache.Cache(js, nc, PODS, PodView, keep_raw=keep_raw)
                size = await asyncio.wait_for(footprint.sync_footprint(store), args.timeout)
                if len(store) != args.pods:
                    figures.problems.append(
                        f"cache (keep_raw={keep_raw}) holds {len(store)} of {args.pods} pods"
                    )
                if keep_raw:
                    figures.raw_bytes = size
                else:
                    figures.view_bytes = size
                del store
        finally:
            await nc.close()
    figures.dict_bytes = dict_footprint(bodies, keys)
    return figures


# -- report ----------------------------------------------------------------------------------------


def _row(label: str, value: float | None, base: float | None, digits: int, goal: str = "") -> None:
    shown = benchlib.ratio(value, base)
    print(f"{label:<52}{benchlib.fmt(value, digits):>11}{benchlib.fmt(base, digits):>11}{shown:>8}   {goal}")


def _header(title: str, base: str) -> None:
    print()
    print(f"{title:<52}{'bus':>11}{base:>11}{'ratio':>8}   goal")


def _goal(value: float, target: float, higher_is_better: bool, label: str) -> str:
    if math.isnan(value):
        return label
    met = value >= target if higher_is_better else value < target
    return f"{label} ({'met' if met else 'missed'})"


def _per_second(count: float, seconds: float) -> float:
    return count / seconds if seconds > 0 else math.nan


def _cpu_percent(cpu: float, seconds: float) -> float:
    return 100 * cpu / seconds if seconds > 0 else math.nan


def report_watcher(w: WatcherFigures) -> None:
    initial = _per_second(w.initial_objects, w.initial_seconds)
    from_start = _per_second(w.initial_objects, w.initial_from_start_seconds)
    raw = _per_second(w.raw_acked, w.raw_seconds)
    live = _per_second(w.live.ok, w.live_seconds)
    base_live = _per_second(w.base_live.ok, w.base_live_seconds)
    goal = _goal(initial, 10_000, True, ">= 10,000")
    _header("1. watcher: API events -> acked publishes", "baseline")
    _row(
        f"initial list+publish objects/s ({w.initial_objects:,}) vs LIST", initial, w.base_list.rate, 0, goal
    )
    _row(f"  ... vs raw JetStream publishes/s of {w.raw_size} B", initial, raw, 0)
    _row("  incl. process start-up, objects/s", from_start, w.base_list.rate, 0)
    _row(
        "  watcher CPU % (start-up + initial list)",
        _cpu_percent(w.initial_cpu, w.initial_from_start_seconds),
        None,
        0,
    )
    _row(f"live events/s published ({w.live.ok:,} creates) vs bare watch", live, base_live, 0)
    _row("  creates/s the API took in that phase", w.live.rate, w.base_live.rate, 0)
    _row("  ... vs raw JetStream publishes/s (bus ceiling)", live, raw, 0)
    _row(
        "  last create answered -> last publish stored, ms",
        1000 * (w.live.first + w.live_seconds - w.live.last),
        1000 * (w.base_live.first + w.base_live_seconds - w.base_live.last),
        0,
    )
    _row("  watcher CPU % (live)", _cpu_percent(w.live_cpu, w.live_seconds), None, 0)


def report_latency(lat: LatencyFigures, args: argparse.Namespace) -> None:
    _header("2. write sent -> reconcile start (ms)", "bare watch")
    for label, bus, base, goal_ms in (
        (f"idle ({args.idle_rate:g}/s)", lat.bus_idle, lat.base_idle, 50.0),
        (f"loaded ({args.rate:g}/s offered)", lat.bus_loaded, lat.base_loaded, 250.0),
    ):
        if bus is None or base is None:
            print(f"{label}: not measured")
            continue
        _row(f"{label} p50", bus.ms(50), base.ms(50), 1)
        _row(f"{label} p99", bus.ms(99), base.ms(99), 1, _goal(bus.ms(99), goal_ms, False, f"< {goal_ms:g}"))
        _row(f"{label} max", bus.ms(100), base.ms(100), 1)
        _row("  sent -> on the bus (watcher's share) p50", bus.on_bus_ms(50), base.ms(50), 1)
        _row("  sent -> on the bus (watcher's share) p99", bus.on_bus_ms(99), base.ms(99), 1)
        _row("  creates/s reached", bus.writes.rate, base.writes.rate, 0)
    _row("stack start -> first reconcile, s", lat.ready_seconds, None, 1)


def report_queue(q: QueueFigures) -> None:
    base = q.baseline.rate if q.baseline else math.nan
    _header(f"3. work queue, no-op reconcile, {WORKERS} workers/replica", "in-memory")
    for run in q.runs:
        _row(f"{run.replicas} replica(s): keys/s reconciled ({run.keys:,})", run.rate, base, 0)
        _row("  durable adds/s (publish, windowed)", _per_second(run.keys, run.add_seconds), None, 0)
        _row("  bus cost per key, us", 1e6 * (1 / run.rate - 1 / base), None, 1)


def report_cache(c: CacheFigures) -> None:
    per = 10_000 / c.pods / 1e6 if c.pods else math.nan
    view, raw, plain = c.view_bytes * per, c.raw_bytes * per, c.dict_bytes * per
    _header(f"4. cache memory, MB per 10,000 pods ({c.pods:,} measured)", "json dicts")
    _row("PodView cache (keep_raw=False)", view, plain, 1, _goal(view, 40, False, "< 40"))
    _row("PodView cache + raw bodies (keep_raw=True)", raw, plain, 1, _goal(raw, 40, False, "< 40"))
    _row("  raw JSON bodies themselves", c.body_bytes * per, None, 1)
    _row("  average body, bytes", c.body_bytes / c.pods if c.pods else math.nan, None, 0)


def report_failover(f: FailoverFigures) -> None:
    _header("5. longest pause in reconciles, s", "no kill")
    _row(
        "across kill -9 of the leading coordinator",
        f.across_pause,
        f.before_pause,
        2,
        _goal(f.across_pause, 2.0, False, "< 2"),
    )
    _row("  the standby leading after, s", f.takeover_seconds, None, 1)
    _row("  creates/s reached", f.writes.rate, None, 0)


def report(figures: Figures, args: argparse.Namespace) -> None:
    if figures.watcher:
        report_watcher(figures.watcher)
    if figures.latency:
        report_latency(figures.latency, args)
    if figures.queue:
        report_queue(figures.queue)
    if figures.cache:
        report_cache(figures.cache)
    if figures.failover:
        report_failover(figures.failover)
    print()
    print("ratio = bus / baseline. 1: the watcher's baselines are a paged LIST and a bare watch from")
    print("the load generator (the API's ceiling) and raw windowed JetStream publishes of the same")
    print("size (the bus's ceiling); rates run from the first to the last message the server stored.")
    print("Live rates are capped by how fast the API takes creates, which drops while the watcher and")
    print("nats-server share the machine's cores with it. 2: latency counts from the scheduled send")
    print("stamped into the configmap, so it includes the create itself; 'on the bus' is when a plain")
    print("NATS subscriber saw the watcher's publish. The baseline is a bare watch process at the same")
    print("rates. 3: all replicas share this one process (one core); keys are published before the")
    print("replicas start. 4: tracemalloc of the synced cache (decoded views, indexes, raw bodies).")
    print("5: the baseline is the longest pause under the same load before the kill.")
    load = " ".join(f"{v:.1f}" for v in os.getloadavg())
    print(f"Machine: {os.cpu_count()} cores, load average {load} at the end (others' work adds noise).")


@dataclass
class Figures:
    watcher: WatcherFigures | None = None
    latency: LatencyFigures | None = None
    queue: QueueFigures | None = None
    cache: CacheFigures | None = None
    failover: FailoverFigures | None = None

    def problems(self) -> list[str]:
        parts = (self.watcher, self.latency, self.queue, self.cache, self.failover)
        return [problem for part in parts if part is not None for problem in part.problems]


PARTS = ("watcher", "latency", "queue", "cache", "failover")


async def bench(args: argparse.Namespace) -> int:
    command = benchlib.kcm_command(args)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise RuntimeError(f"unknown --parts {sorted(unknown)} (known: {', '.join(PARTS)})")
    print(
        f"configmaps={args.configmaps} idle={args.idle_writes}@{args.idle_rate:g}/s "
        f"loaded={args.rate:g}/s x {args.loaded_seconds:g}s keys={args.keys} pods={args.pods} "
        f"cpus={os.cpu_count()}",
        flush=True,
    )
    figures = Figures()
    with tempfile.TemporaryDirectory(prefix="kcm-bench-bus-") as tmp:
        dirs = {part: Path(tmp, part) for part in PARTS}
        for d in dirs.values():
            d.mkdir()
        if "watcher" in parts:
            figures.watcher = await watcher_throughput(command, args, dirs["watcher"])
        if "latency" in parts:
            figures.latency = await latency(command, args, dirs["latency"])
        if "queue" in parts:
            figures.queue = await queue_throughput(args, dirs["queue"])
        if "cache" in parts:
            figures.cache = await cache_memory(args, dirs["cache"])
        if "failover" in parts:
            figures.failover = await failover(command, args, dirs["failover"])
    report(figures, args)
    return benchlib.exit_status(figures.problems())


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--parts", default=",".join(PARTS), help="which measurements to run (comma-separated)")
    p.add_argument("--configmaps", type=int, default=10_000, help="configmaps per watcher phase")
    p.add_argument("--idle-writes", type=int, default=200, help="writes in the idle latency phase")
    p.add_argument("--idle-rate", type=float, default=20, help="writes/s in the idle latency phase")
    p.add_argument("--rate", type=float, default=1000, help="writes/s offered in the loaded latency phase")
    p.add_argument("--loaded-seconds", type=float, default=3, help="length of the loaded latency phase")
    p.add_argument("--keys", type=int, default=20_000, help="work-queue keys per replica count")
    p.add_argument("--pods", type=int, default=10_000, help="pods in the cache")
    p.add_argument("--failover-rate", type=float, default=100, help="writes/s during the failover phase")
    p.add_argument("--failover-seconds", type=float, default=30, help="length of the failover phase's load")
    p.add_argument(
        "--failover-kill-after", type=float, default=8, help="seconds into that load the leader is killed"
    )
    p.add_argument("--timeout", type=float, default=120, help="give up waiting for one step after this")
    benchlib.add_kcm_argument(p)
    # Internal: the same script runs the bare watch process of the latency baseline.
    p.add_argument("--role", choices=("bench", "watch"), default="bench", help=argparse.SUPPRESS)
    p.add_argument("--url", help=argparse.SUPPRESS)
    p.add_argument("--records", help=argparse.SUPPRESS)
    return p.parse_args()


def main() -> int:
    args = parse_args()
    if args.role == "watch":
        with contextlib.suppress(KeyboardInterrupt):
            uvloop.run(serve_bare_watch(args.url, Path(args.records)))
        return 0
    return benchlib.run(bench(args))


if __name__ == "__main__":
    sys.exit(main())
