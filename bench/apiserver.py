"""Benchmark of the embedded API server against a bare aiohttp baseline; run by `make bench`.

Starts `kcm apiserver` and a minimal aiohttp + uvloop echo server, each in its own
process, and drives both from this process (the load generator). Watch streams are read
by a third process so their delivery lag is not inflated by the create workers' loop.
Measures pod creates/s with 4 watchers attached, create latency at a fixed offered rate,
and the time to list 10,000 configmaps, then prints a table of figures, ratios to the
baseline and the project's goals. Timings are printed, never enforced: the exit status
is non-zero only when requests fail or a watcher misses events.

The same file is also the entry point of the helper processes (`--role baseline` and
`--role watch`), so the benchmark is one script.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import socket
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import benchlib
import msgspec
import uvloop
from aiohttp import web

PHASE_ANNOTATION = "bench.kcm.dev/phase"
SENT_ANNOTATION = "bench.kcm.dev/sent"
POD_NAMESPACE = "bench"
LIST_NAMESPACE = "bench2"
WATCHERS = 4
# How long a watcher may go without a new event, once all creates are done, before it
# gives up and reports what it saw.
WATCH_IDLE_TIMEOUT = 10.0


# -- shared figures ------------------------------------------------------------------------------


@dataclass
class LoadResult(benchlib.Failures):
    ok: int = 0
    seconds: float = 0.0
    # CPU this process spent; near `seconds` means the load generator, not the server, was the limit.
    cpu_seconds: float = 0.0
    server_cpu_seconds: float = math.nan
    # Busy CPU of the whole machine, all cores: shows how much went to processes not ours.
    machine_cpu_seconds: float = math.nan
    latencies: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.ok / self.seconds if self.seconds > 0 else math.nan

    @property
    def cpu_percent(self) -> float:
        return 100 * self.cpu_seconds / self.seconds if self.seconds > 0 else math.nan

    @property
    def server_cpu_percent(self) -> float:
        return 100 * self.server_cpu_seconds / self.seconds if self.seconds > 0 else math.nan

    def ms(self, q: float) -> float:
        return benchlib.percentile(sorted(self.latencies), q) * 1000


# -- load generator --------------------------------------------------------------------------------


def pod(name: str, phase: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"app": "bench"},
            # Stamped just before sending: the watcher subtracts it from its receive time.
            "annotations": {PHASE_ANNOTATION: phase, SENT_ANNOTATION: repr(time.time())},
        },
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]},
    }


def configmap(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "data": {"key": "value", "index": name},
    }


async def _post(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any], result: LoadResult, started: float
) -> None:
    try:
        async with session.post(url, data=benchlib.encode(body), headers=benchlib.JSON) as resp:
            payload = await resp.read()
            if resp.status == 201:
                result.ok += 1
                result.latencies.append(time.perf_counter() - started)
            else:
                result.record_error(f"HTTP {resp.status}: {payload.decode(errors='replace')}")
    except aiohttp.ClientError as exc:
        result.record_error(f"{type(exc).__name__}: {exc}")


async def closed_loop(
    session: aiohttp.ClientSession,
    url: str,
    make: Callable[[int], dict[str, Any]],
    count: int,
    concurrency: int,
) -> LoadResult:
    """`concurrency` workers each send the next request as soon as their last one returns."""
    result = LoadResult()
    next_index = iter(range(count))

    async def worker() -> None:
        for i in next_index:
            body = make(i)
            await _post(session, url, body, result, time.perf_counter())

    start, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    result.seconds = time.perf_counter() - start
    result.cpu_seconds = time.process_time() - cpu
    return result


async def open_loop(
    session: aiohttp.ClientSession,
    url: str,
    make: Callable[[int], dict[str, Any]],
    rate: float,
    seconds: float,
) -> LoadResult:
    """Send at a fixed rate whatever the responses do; latency counts from the scheduled send.

    Counting from the schedule rather than the actual send keeps a stalled server from
    hiding its stall (the requests it delayed are charged for the wait).
    """
    result = LoadResult()
    total = int(rate * seconds)
    tasks: list[asyncio.Task[None]] = []
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(total):
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(_post(session, url, make(i), result, due)))
    await asyncio.gather(*tasks)
    result.seconds = time.perf_counter() - start
    result.cpu_seconds = time.process_time() - cpu
    return result


@dataclass
class ListResult:
    seconds: list[float]
    size: int
    items: int
    error: str = ""


async def time_list(session: aiohttp.ClientSession, url: str, repeat: int) -> ListResult:
    timings: list[float] = []
    body = b""
    for _ in range(repeat):
        start = time.perf_counter()
        async with session.get(url) as resp:
            body = await resp.read()
            if resp.status != 200:
                return ListResult([], 0, 0, f"HTTP {resp.status}: {body[:300].decode(errors='replace')}")
        timings.append(time.perf_counter() - start)
    items = len(msgspec.json.decode(body, type=_ItemList).items)
    return ListResult(timings, len(body), items)


class _ItemList(msgspec.Struct):
    items: list[msgspec.Raw]


# -- processes -------------------------------------------------------------------------------------


def _role_command(role: str, *args: str) -> list[str]:
    return [sys.executable, os.path.abspath(__file__), "--role", role, *args]


@contextlib.asynccontextmanager
async def baseline_server() -> AsyncIterator[benchlib.Target]:
    proc = await asyncio.create_subprocess_exec(*_role_command("baseline"), stdout=asyncio.subprocess.PIPE)
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        if not line:
            raise RuntimeError("baseline server exited before listening")
        yield benchlib.Target(line.decode().strip(), proc.pid)
    finally:
        await benchlib.stop(proc)


class WatchReport(msgspec.Struct):
    seen: list[int]
    events: list[int]
    lag_p50_ms: float
    lag_p99_ms: float
    cpu_seconds: float
    problems: list[str]


class Watchers:
    """The watch process: opened before a phase, told how many pods to expect after it."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls, url: str, rv: str, phase: str) -> Watchers:
        proc = await asyncio.create_subprocess_exec(
            *_role_command("watch", "--url", url, "--rv", rv, "--phase", phase),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        if line.strip() != b"ready":
            await benchlib.stop(proc)
            raise RuntimeError(f"watchers failed to start: {line.decode(errors='replace')}")
        return cls(proc)

    async def finish(self, expected: int) -> WatchReport:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{expected}\n".encode())
        await self.proc.stdin.drain()
        line = await asyncio.wait_for(self.proc.stdout.readline(), WATCH_IDLE_TIMEOUT + 60)
        await self.proc.wait()
        if not line:
            raise RuntimeError(f"the watch process exited with {self.proc.returncode} and no report")
        return msgspec.json.decode(line, type=WatchReport)

    async def stop(self) -> None:
        await benchlib.stop(self.proc)


# -- measurements ----------------------------------------------------------------------------------


async def _request(session: aiohttp.ClientSession, method: str, url: str, body: Any = None) -> Any:
    return msgspec.json.decode(await benchlib.call(session, method, url, body, allowed=(409,)))


async def _ensure_namespace(session: aiohttp.ClientSession, url: str, name: str) -> None:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    await _request(session, "POST", f"{url}/api/v1/namespaces", namespace)


async def _resource_version(session: aiohttp.ClientSession, url: str) -> str:
    listing = await _request(session, "GET", f"{url}/api/v1/namespaces/{POD_NAMESPACE}/pods?limit=1")
    return str(listing["metadata"]["resourceVersion"])


@dataclass
class Figures:
    creates: LoadResult
    paced: LoadResult
    cm_creates: LoadResult
    listing: ListResult
    # Only the API server is watched.
    creates_watch: WatchReport | None = None
    paced_watch: WatchReport | None = None


async def _run_phase(
    session: aiohttp.ClientSession,
    target: benchlib.Target,
    phase: str,
    watch: bool,
    load: Callable[[], Awaitable[LoadResult]],
) -> tuple[LoadResult, WatchReport | None]:
    watchers = None
    if watch:
        watchers = await Watchers.start(target.url, await _resource_version(session, target.url), phase)
    try:
        cpu, machine = benchlib.process_cpu_seconds(target.pid), benchlib.machine_cpu_seconds()
        result = await load()
        result.server_cpu_seconds = benchlib.process_cpu_seconds(target.pid) - cpu
        result.machine_cpu_seconds = benchlib.machine_cpu_seconds() - machine
        return result, await watchers.finish(result.ok) if watchers else None
    finally:
        if watchers:
            await watchers.stop()


async def measure(target: benchlib.Target, args: argparse.Namespace, watch: bool) -> Figures:
    """Run the three measurements against one server, with watchers if `watch`."""
    # Open-loop bursts may need more sockets than the closed-loop workers.
    connector = aiohttp.TCPConnector(limit=max(args.concurrency, 256))
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        url = target.url
        if watch:
            for ns in (POD_NAMESPACE, LIST_NAMESPACE):
                await _ensure_namespace(session, url, ns)
        pods_url = f"{url}/api/v1/namespaces/{POD_NAMESPACE}/pods"
        cm_url = f"{url}/api/v1/namespaces/{LIST_NAMESPACE}/configmaps"
        creates, creates_watch = await _run_phase(
            session,
            target,
            "closed",
            watch,
            lambda: closed_loop(
                session, pods_url, lambda i: pod(f"closed-{i:06d}", "closed"), args.pods, args.concurrency
            ),
        )
        paced, paced_watch = await _run_phase(
            session,
            target,
            "paced",
            watch,
            lambda: open_loop(
                session, pods_url, lambda i: pod(f"paced-{i:06d}", "paced"), args.rate, args.seconds
            ),
        )
        cm_creates, _ = await _run_phase(
            session,
            target,
            "configmaps",
            False,
            lambda: closed_loop(
                session, cm_url, lambda i: configmap(f"cm-{i:06d}"), args.configmaps, args.concurrency
            ),
        )
        listing = await time_list(session, cm_url, args.list_repeat)
    return Figures(creates, paced, cm_creates, listing, creates_watch, paced_watch)


async def measure_creates(target: benchlib.Target, args: argparse.Namespace) -> LoadResult:
    """The closed-loop pod creates alone, watched as in `measure`: what `--data-dir` costs."""
    connector = aiohttp.TCPConnector(limit=max(args.concurrency, 256))
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=120)
    ) as session:
        await _ensure_namespace(session, target.url, POD_NAMESPACE)
        pods_url = f"{target.url}/api/v1/namespaces/{POD_NAMESPACE}/pods"
        load, _ = await _run_phase(
            session,
            target,
            "closed",
            True,
            lambda: closed_loop(
                session, pods_url, lambda i: pod(f"closed-{i:06d}", "closed"), args.pods, args.concurrency
            ),
        )
    return load


# -- report ----------------------------------------------------------------------------------------


def report_persisted(persisted: LoadResult, in_memory: LoadResult) -> None:
    print()
    print(
        f"with --data-dir (SQLite, {WATCHERS} watchers): {benchlib.fmt(persisted.rate, 0)} pod creates/s, "
        f"p50 {benchlib.fmt(persisted.ms(50), 1)} ms, p99 {benchlib.fmt(persisted.ms(99), 1)} ms, "
        f"server CPU {benchlib.fmt(persisted.server_cpu_percent, 0)}%; "
        f"ratio to the in-memory run above {benchlib.ratio(persisted.rate, in_memory.rate)}"
    )


def _goal(value: float, target: float, higher_is_better: bool, label: str) -> str:
    if math.isnan(value):
        return label
    met = value >= target if higher_is_better else value < target
    return f"{label} ({'met' if met else 'missed'})"


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan


def _row(
    label: str, api: float | None, base: float | None, digits: int, goal: str = "", ratio: bool = True
) -> None:
    shown = benchlib.ratio(api, base) if ratio else ""
    print(f"{label:<40}{benchlib.fmt(api, digits):>11}{benchlib.fmt(base, digits):>11}{shown:>8}   {goal}")


def _others(load: LoadResult, watch_cpu: float) -> float:
    """CPU % the rest of the machine took during a phase; high means the figures are noisy."""
    ours = load.server_cpu_seconds + load.cpu_seconds + watch_cpu
    # Clamped: the kernel counts in clock ticks, so a quiet machine can come out slightly negative.
    return max(0.0, 100 * (load.machine_cpu_seconds - ours) / load.seconds) if load.seconds > 0 else math.nan


def report(api: Figures, base: Figures, args: argparse.Namespace) -> None:
    cw, pw = api.creates_watch, api.paced_watch
    for phase, load, watch in (("closed-loop", api.creates, cw), ("paced", api.paced, pw)):
        if watch is not None:
            print(f"watchers ({phase}): each saw {watch.seen} of {load.ok} created pods")
    paced = f"@ {args.rate:g}/s ({WATCHERS} watchers)"
    list_s = _median(api.listing.seconds)
    print()
    print(f"{'metric':<40}{'apiserver':>11}{'baseline':>11}{'ratio':>8}   goal")
    _row(
        f"pod creates/s ({WATCHERS} watchers)",
        api.creates.rate,
        base.creates.rate,
        0,
        _goal(api.creates.rate, 2000, True, ">= 2,000"),
    )
    _row("  create p50 ms", api.creates.ms(50), base.creates.ms(50), 1)
    _row("  create p99 ms", api.creates.ms(99), base.creates.ms(99), 1)
    _row("  watch lag p50 ms (send->event)", cw.lag_p50_ms if cw else None, None, 1)
    _row("  watch lag p99 ms (send->event)", cw.lag_p99_ms if cw else None, None, 1)
    _row(f"p50 ms {paced}", api.paced.ms(50), base.paced.ms(50), 1)
    _row(
        f"p99 ms {paced}", api.paced.ms(99), base.paced.ms(99), 1, _goal(api.paced.ms(99), 20, False, "< 20")
    )
    _row(f"max ms {paced}", api.paced.ms(100), base.paced.ms(100), 1)
    _row("  watch lag p99 ms (send->event)", pw.lag_p99_ms if pw else None, None, 1)
    _row("configmap creates/s (no watchers)", api.cm_creates.rate, base.cm_creates.rate, 0)
    _row(
        f"list {args.configmaps:,} configmaps, s (median)",
        list_s,
        _median(base.listing.seconds),
        3,
        _goal(list_s, 0.5, False, "< 0.5"),
    )
    _row("  list size MB", api.listing.size / 1e6, base.listing.size / 1e6, 1)
    # CPU shares say who limited a run; a ratio of them means nothing.
    watch_cpu = cw.cpu_seconds if cw else 0.0
    cpu_rows = [
        ("server", api.creates.server_cpu_percent, base.creates.server_cpu_percent),
        ("load generator", api.creates.cpu_percent, base.creates.cpu_percent),
        ("watch process", 100 * watch_cpu / api.creates.seconds if cw else None, None),
        ("other processes", _others(api.creates, watch_cpu), _others(base.creates, 0.0)),
    ]
    for who, a, b in cpu_rows:
        _row(f"{who} CPU % (pod creates)", a, b, 0, ratio=False)
    print()
    print("ratio = apiserver / baseline; the baseline is an aiohttp + uvloop server that decodes the")
    print("JSON, adds a uid and echoes it (lists: encodes what it kept). Watch lag runs from the")
    print("create being sent to its event arriving at the watcher, so it includes the create itself.")
    print("Paced latency counts from the scheduled send. CPU % is of one core over the phase: a")
    print("server near 100% is the limit; a load generator near 100% capped the rate instead;")
    print("'other processes' is CPU used by the rest of the machine (the figures are noisy if high).")


def problems(api: Figures, base: Figures) -> list[str]:
    """Everything that makes the run fail: failed requests, short lists, missed watch events."""
    found: list[str] = []
    for who, figures in (("apiserver", api), ("baseline", base)):
        loads = {
            "pod creates": figures.creates,
            "paced creates": figures.paced,
            "configmap creates": figures.cm_creates,
        }
        found.extend(
            f"{who}: {load.failed} {name} failed, e.g. {load.errors}"
            for name, load in loads.items()
            if load.failed
        )
        listing = figures.listing
        if listing.error:
            found.append(f"{who}: list failed: {listing.error}")
        elif listing.items != figures.cm_creates.ok:
            found.append(f"{who}: list returned {listing.items} items, {figures.cm_creates.ok} were created")
    for phase, load, watch in (
        ("closed-loop", api.creates, api.creates_watch),
        ("paced", api.paced, api.paced_watch),
    ):
        if watch is None:
            continue
        found.extend(
            f"apiserver: {phase} watcher {i} saw {seen} distinct pods in {events} events, {load.ok} were created"
            for i, (seen, events) in enumerate(zip(watch.seen, watch.events, strict=True))
            if seen != load.ok or events != load.ok
        )
        found.extend(f"apiserver: {phase} watch: {p}" for p in watch.problems)
    return found


async def bench(args: argparse.Namespace) -> int:
    command = benchlib.kcm_command(args)
    print(
        f"pods={args.pods} concurrency={args.concurrency} rate={args.rate:g}/s for {args.seconds:g}s "
        f"configmaps={args.configmaps} watchers={WATCHERS} cpus={os.cpu_count()}"
    )
    with tempfile.TemporaryDirectory(prefix="kcm-bench-") as tmp:
        async with benchlib.apiserver(command, Path(tmp)) as target:
            print(f"apiserver at {target.url}: measuring ...", flush=True)
            api = await measure(target, args, watch=True)
        saved = Path(tmp) / "saved"
        saved.mkdir()
        async with benchlib.apiserver(command, saved, "--data-dir", str(saved / "data")) as target:
            print(f"apiserver with --data-dir at {target.url}: measuring pod creates ...", flush=True)
            persisted = await measure_creates(target, args)
    async with baseline_server() as target:
        print(f"baseline at {target.url}: measuring ...", flush=True)
        base = await measure(target, args, watch=False)
    report(api, base, args)
    report_persisted(persisted, api.creates)
    found = problems(api, base)
    if persisted.failed:
        found.append(f"apiserver --data-dir: {persisted.failed} pod creates failed, e.g. {persisted.errors}")
    return benchlib.exit_status(found)


# -- helper process: baseline server ---------------------------------------------------------------


async def serve_baseline() -> None:
    """Decode the posted object, add a uid and echo it; keep it so collections can be listed."""
    kept: dict[str, list[Any]] = {}
    decode = msgspec.json.decode

    async def create(request: web.Request) -> web.Response:
        obj = decode(await request.read())
        obj["metadata"]["uid"] = str(uuid.uuid4())
        kept.setdefault(request.path, []).append(obj)
        return web.Response(body=benchlib.encode(obj), status=201, content_type="application/json")

    async def collection(request: web.Request) -> web.Response:
        listing = {"kind": "List", "apiVersion": "v1", "metadata": {}, "items": kept.get(request.path, [])}
        return web.Response(body=benchlib.encode(listing), content_type="application/json")

    app = web.Application()
    app.router.add_post("/{tail:.*}", create)
    app.router.add_get("/{tail:.*}", collection)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    sock = socket.socket(socket.AF_INET)
    sock.bind(("127.0.0.1", 0))
    await web.SockSite(runner, sock, backlog=1024).start()
    port = sock.getsockname()[1]
    print(f"http://127.0.0.1:{port}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


# -- helper process: watchers ------------------------------------------------------------------------


class _Meta(msgspec.Struct):
    name: str = ""
    annotations: dict[str, str] = msgspec.field(default_factory=dict)


class _Obj(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)


class _WatchEvent(msgspec.Struct):
    type: str
    object: _Obj


@dataclass
class _Stream:
    names: set[str] = field(default_factory=set)
    events: int = 0
    lags: list[float] = field(default_factory=list)
    last_event: float = field(default_factory=time.monotonic)
    problem: str = ""


async def _consume(resp: aiohttp.ClientResponse, stream: _Stream, phase: str) -> None:
    decoder = msgspec.json.Decoder(_WatchEvent)
    async for lines in benchlib.watch_lines(resp):
        received = time.time()
        for line in lines:
            event = decoder.decode(line)
            if event.type == "ERROR":
                stream.problem = f"ERROR event: {line[:300].decode(errors='replace')}"
                return
            annotations = event.object.metadata.annotations
            if event.type != "ADDED" or annotations.get(PHASE_ANNOTATION) != phase:
                continue
            stream.events += 1
            stream.names.add(event.object.metadata.name)
            stream.lags.append(received - float(annotations[SENT_ANNOTATION]))
        stream.last_event = time.monotonic()
    stream.problem = "the server closed the watch early"


async def run_watchers(url: str, rv: str, phase: str) -> None:
    streams = [_Stream() for _ in range(WATCHERS)]
    timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        params = {"watch": "true", "resourceVersion": rv}
        responses = [
            await session.get(f"{url}/api/v1/namespaces/{POD_NAMESPACE}/pods", params=params)
            for _ in range(WATCHERS)
        ]
        for resp in responses:
            if resp.status != 200:
                print(f"watch: HTTP {resp.status}: {(await resp.read())[:300]!r}", flush=True)
                return
        print("ready", flush=True)
        # Start-up (imports, connecting) is not part of what the watchers cost during a phase.
        cpu_at_start = time.process_time()
        tasks = [asyncio.create_task(_consume(r, s, phase)) for r, s in zip(responses, streams, strict=True)]
        expected = int(await asyncio.to_thread(sys.stdin.readline))
        while not all(len(s.names) >= expected for s in streams):
            if all(t.done() for t in tasks):
                break
            if time.monotonic() - max(s.last_event for s in streams) > WATCH_IDLE_TIMEOUT:
                break
            await asyncio.sleep(0.02)
        for t in tasks:
            t.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        for resp in responses:
            resp.close()
    lags = sorted(lag for s in streams for lag in s.lags)
    found = [s.problem for s in streams if s.problem]
    found += [
        repr(r) for r in results if isinstance(r, Exception) and not isinstance(r, asyncio.CancelledError)
    ]
    out = WatchReport(
        seen=[len(s.names) for s in streams],
        events=[s.events for s in streams],
        lag_p50_ms=benchlib.percentile(lags, 50) * 1000,
        lag_p99_ms=benchlib.percentile(lags, 99) * 1000,
        cpu_seconds=time.process_time() - cpu_at_start,
        problems=found,
    )
    sys.stdout.buffer.write(benchlib.encode(out) + b"\n")
    sys.stdout.flush()


# -- entry point -----------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pods", type=int, default=5000, help="pods to create in the closed-loop run")
    p.add_argument("--concurrency", type=int, default=32, help="closed-loop create workers (connections)")
    p.add_argument("--rate", type=float, default=500, help="offered creates/s in the paced run")
    p.add_argument("--seconds", type=float, default=5, help="length of the paced run")
    p.add_argument("--configmaps", type=int, default=10_000, help="configmaps to create and then list")
    p.add_argument("--list-repeat", type=int, default=5, help="how many times to time the full list")
    benchlib.add_kcm_argument(p)
    # Internal: the same script runs the helper processes.
    p.add_argument("--role", choices=("bench", "baseline", "watch"), default="bench", help=argparse.SUPPRESS)
    p.add_argument("--url", help=argparse.SUPPRESS)
    p.add_argument("--rv", help=argparse.SUPPRESS)
    p.add_argument("--phase", help=argparse.SUPPRESS)
    return p.parse_args()


def main() -> int:
    args = parse_args()
    if args.role == "baseline":
        with contextlib.suppress(KeyboardInterrupt):
            uvloop.run(serve_baseline())
        return 0
    if args.role == "watch":
        uvloop.run(run_watchers(args.url, args.rv, args.phase))
        return 0
    return benchlib.run(bench(args))


if __name__ == "__main__":
    sys.exit(main())
