"""What the benchmarks in bench/ share: running `kcm` processes, their CPU time, the report's figures.

A package rather than a module beside the scripts, so `make bench` (every `bench/*.py`) does not
run it as a benchmark. The scripts import it as `benchlib`: Python puts the directory of the
script it runs first on sys.path.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import shlex
import signal
import ssl
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import uvloop
import yaml
from kcm_cli import natsd

JSON = {"Content-Type": "application/json"}

encode = msgspec.json.encode


@dataclass
class Failures:
    """Failed requests: how many, and the first few answers."""

    failed: int = 0
    errors: list[str] = field(default_factory=list)

    def record_error(self, text: str) -> None:
        self.failed += 1
        # A failing server fails every request the same way; a few samples say enough.
        if len(self.errors) < 3:
            self.errors.append(text[:300])


# -- processes -------------------------------------------------------------------------------------


def process_cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process from /proc; NaN where there is no /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return math.nan
    # Fields after the parenthesised command name, which may itself hold spaces.
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _machine_ticks() -> list[int] | None:
    """The whole machine's CPU ticks so far from /proc/stat's first line: user nice system
    idle iowait irq softirq steal (guest and guest_nice, already in user and nice, left out);
    None where there is no /proc."""
    try:
        with open("/proc/stat") as f:
            return [int(t) for t in f.readline().split()[1:9]]
    except OSError:
        return None


def machine_cpu_seconds() -> float:
    """CPU time all cores have spent busy since boot, from /proc/stat; NaN without it."""
    ticks = _machine_ticks()
    if ticks is None:
        return math.nan
    idle, iowait = ticks[3], ticks[4]
    return (sum(ticks) - idle - iowait) / os.sysconf("SC_CLK_TCK")


def machine_cpu_ticks() -> tuple[int, int]:
    """(ticks stolen by the hypervisor, all ticks) of the whole machine so far, from /proc/stat;
    (0, 0) where there is none. On a shared VM the stolen share moves the figures."""
    ticks = _machine_ticks()
    if ticks is None:
        return 0, 0
    return (ticks[7] if len(ticks) > 7 else 0), sum(ticks)


def tail(path: Path) -> str:
    """The last lines of a log, for an error message."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-20:])
    except OSError:
        return ""


def children(pid: int) -> list[int]:
    """The pids whose parent is `pid` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def descendants(pid: int) -> list[int]:
    pids = [pid]
    for each in pids:
        pids.extend(children(each))
    return pids[1:]


def service_name(pid: int) -> str:
    """What a process of a `kcm dev` stack runs: `kcm <service>` (`kcm controller <name>` for one
    controller's own process), else its program's name (`etcd`, `kube-apiserver`, ...)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return f"pid {pid}"
    # A console script runs as `python .../kcm ...`, a module as `python -m kcm_cli.main ...`.
    if Path(argv[0]).name.startswith("python") and len(argv) > 1:
        argv = argv[2:] if argv[1] == "-m" else argv[1:]
    program = Path(argv[0]).name
    if program == "kcm" or program.startswith("kcm_cli"):
        sub = argv[1:3] if argv[1:2] == ["controller"] else argv[1:2]
        return " ".join(["kcm", *sub])
    return program


def memory_kib(pid: int) -> tuple[float, float]:
    """(resident now, peak resident) of a process in KiB, from /proc; NaN when it is gone."""
    values = {"VmRSS": math.nan, "VmHWM": math.nan}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in values:
                values[key] = float(rest.split()[0])
    except OSError:
        pass
    return values["VmRSS"], values["VmHWM"]


async def settle(pids: list[int], limit_s: float = 30.0, idle_cpu_s: float = 0.2) -> None:
    """Wait (at most `limit_s`) until these processes together spend under `idle_cpu_s` of CPU
    in a second, so one phase's leftovers (watch fan-out, cache updates) do not count against
    the next."""
    deadline = time.monotonic() + limit_s
    before = sum(process_cpu_seconds(pid) for pid in pids)
    while time.monotonic() < deadline:
        await asyncio.sleep(1.0)
        after = sum(process_cpu_seconds(pid) for pid in pids)
        if after - before < idle_cpu_s:
            return
        before = after


def kill_all(pids: list[int]) -> None:
    """SIGKILL what is left of `pids` (what a stopped `kcm dev` could not stop in time)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


async def stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is not None:
        return
    proc.terminate()
    try:
        await asyncio.wait_for(proc.wait(), 10)
    except TimeoutError:
        proc.kill()
        await proc.wait()


async def start_logged(argv: list[str], log_path: Path) -> asyncio.subprocess.Process:
    """Start a process whose output goes to a log file (read back with `tail` if it fails)."""
    with log_path.open("wb") as log:
        return await asyncio.create_subprocess_exec(*argv, stdout=log, stderr=log)


@dataclass
class Target:
    """A server under measurement: where to send requests, and which process to read CPU of."""

    url: str
    pid: int


@dataclass
class ApiServer(Target):
    kubeconfig: Path


@contextlib.asynccontextmanager
async def apiserver(command: list[str], workdir: Path, *extra: str) -> AsyncIterator[ApiServer]:
    """Run `kcm apiserver` (with `extra` arguments) until the block exits; yields its URL once
    the kubeconfig appears."""
    kubeconfig = workdir / "kubeconfig"
    log_path = workdir / "apiserver.log"
    argv = ["apiserver", "--port", "0", "--kubeconfig-out", str(kubeconfig), "--log-level", "warning", *extra]
    proc = await start_logged([*command, *argv], log_path)
    try:
        deadline = time.monotonic() + 60
        while not kubeconfig.exists():
            if proc.returncode is not None or time.monotonic() > deadline:
                raise RuntimeError(f"kcm apiserver did not become ready:\n{tail(log_path)}")
            await asyncio.sleep(0.05)
        config = yaml.safe_load(kubeconfig.read_text())
        yield ApiServer(str(config["clusters"][0]["cluster"]["server"]), proc.pid, kubeconfig)
    finally:
        await stop(proc)


@contextlib.asynccontextmanager
async def nats_server(workdir: Path) -> AsyncIterator[Target]:
    """Run a nats-server with JetStream (files under `workdir`) until the block exits."""
    planned = natsd.plan(workdir / "jetstream")
    log_path = workdir / "nats.log"
    proc = await start_logged(planned.args(), log_path)
    try:
        try:
            await asyncio.wait_for(natsd.wait_ready(planned.port), 20)
        except TimeoutError:
            raise RuntimeError(f"nats-server did not become ready:\n{tail(log_path)}") from None
        yield Target(planned.url, proc.pid)
    finally:
        await stop(proc)


@contextlib.asynccontextmanager
async def kcm_process(
    command: list[str], argv: list[str], log_path: Path, env: dict[str, str] | None = None
) -> AsyncIterator[asyncio.subprocess.Process]:
    """Run one `kcm` service until the block exits; its log tail is shown if it died on its own."""
    with log_path.open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            *command, *argv, stdout=log, stderr=log, env={**os.environ, **(env or {})}
        )
    try:
        yield proc
    finally:
        died = proc.returncode is not None
        await stop(proc)
        if died:
            print(f"{argv[0]} exited with {proc.returncode}:\n{tail(log_path)}", file=sys.stderr)


@dataclass
class Dev:
    """A running `kcm dev`: its process, state directory, API server URL and NATS URL (empty
    under `--reference`, which runs no NATS)."""

    proc: asyncio.subprocess.Process
    state: Path
    url: str
    nats_url: str


@contextlib.asynccontextmanager
async def kcm_dev(command: list[str], workdir: Path, args: list[str]) -> AsyncIterator[Dev]:
    """Run `kcm dev --state-dir WORKDIR/state --port 0 ARGS` until the block exits; yields once
    it printed its ready line (its output goes to WORKDIR/dev.log)."""
    state = workdir / "state"
    log_path = workdir / "dev.log"
    proc = await start_logged([*command, "dev", "--state-dir", str(state), "--port", "0", *args], log_path)
    services: list[int] = []
    try:
        # A loaded 2-core machine starting 200 simulated nodes or 36 controller processes (a
        # cost_per_pod run at 20,000 pods) took more than two minutes.
        deadline = time.monotonic() + 360
        while "kcm dev ready" not in (text := log_path.read_text(errors="replace")):
            if proc.returncode is not None or time.monotonic() > deadline:
                raise RuntimeError(f"kcm dev did not become ready:\n{tail(log_path)}")
            await asyncio.sleep(0.1)
        config = yaml.safe_load((state / "kubeconfig").read_text())
        ready = text.split("kcm dev ready", 1)[1]
        nats_url = ready.split(", nats ", 1)[1].split(",", 1)[0] if ", nats " in ready else ""
        services = descendants(proc.pid)
        yield Dev(proc, state, str(config["clusters"][0]["cluster"]["server"]), nats_url)
    finally:
        # Listed again here: a stack that never got ready has children too (a run that timed
        # out starting left 25 processes of its stack running after it).
        if proc.returncode is None:
            services = list(dict.fromkeys([*services, *descendants(proc.pid)]))
        await stop(proc)
        # kcm dev stops its children on SIGTERM; any it could not are ended here, by pid.
        kill_all(services)


@dataclass
class Usage:
    """Per process (by name): CPU seconds over a phase, resident and peak resident KiB at its
    end; the phase's wall time, and the share of the machine's CPU time the hypervisor took
    meanwhile."""

    seconds: float = math.nan
    cpu: dict[str, float] = field(default_factory=dict)
    rss: dict[str, tuple[float, float]] = field(default_factory=dict)
    stolen_percent: float = math.nan


THIS_PROCESS = "load generator (this process)"


@contextlib.contextmanager
def measure(processes: dict[str, int], usage: Usage) -> Iterator[None]:
    """Fill `usage` over the block for these processes (name -> pid) and for this one, under
    `THIS_PROCESS`; nothing when the block raises."""
    start = time.perf_counter()
    before = {name: process_cpu_seconds(pid) for name, pid in processes.items()}
    load0 = time.process_time()
    stolen0, ticks0 = machine_cpu_ticks()
    yield
    usage.seconds = time.perf_counter() - start
    stolen1, ticks1 = machine_cpu_ticks()
    if ticks1 > ticks0:
        usage.stolen_percent = 100 * (stolen1 - stolen0) / (ticks1 - ticks0)
    for name, pid in processes.items():
        usage.cpu[name] = process_cpu_seconds(pid) - before[name]
        usage.rss[name] = memory_kib(pid)
    usage.cpu[THIS_PROCESS] = time.process_time() - load0


# -- API calls -------------------------------------------------------------------------------------


def client_session(connections: int, tls: ssl.SSLContext | None = None) -> aiohttp.ClientSession:
    """A session for load against the API server: `connections` at most, no overall deadline
    (a watch or a long run), but a stalled read still ends. `tls`: how to reach an https server
    (kube-apiserver: its CA and a client certificate, `kubeclient.load_connection`'s)."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=connections, ssl=True if tls is None else tls),
        timeout=aiohttp.ClientTimeout(total=None, sock_read=120),
    )


async def call(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    body: Any = None,
    *,
    headers: dict[str, str] = JSON,
    allowed: tuple[int, ...] = (),
    **kw: Any,
) -> bytes:
    """One API call's response body; any status from 300 up, unless `allowed`, is an error."""
    data = None if body is None else encode(body)
    async with session.request(method, url, data=data, headers=headers, **kw) as resp:
        payload = await resp.read()
        if resp.status >= 300 and resp.status not in allowed:
            raise RuntimeError(
                f"{method} {url}: HTTP {resp.status}: {payload[:300].decode(errors='replace')}"
            )
        return payload


async def watch(
    session: aiohttp.ClientSession,
    url: str,
    rv: str,
    decoder: msgspec.json.Decoder[Any],
    seen: Callable[[Any, float], None],
) -> str:
    """Follow a watch from `rv` (resuming when the server ends it), calling `seen(obj, now)`
    per event; `decoder` decodes one event line into a struct with `type` and `object`
    (whose `metadata.resourceVersion` the watch resumes from). Returns an error description
    when the watch fails; runs until cancelled otherwise."""
    while True:
        params = {"watch": "true", "resourceVersion": rv, "allowWatchBookmarks": "true"}
        async with session.get(url, params=params) as resp:
            if resp.status != 200:
                return f"watch {url}: HTTP {resp.status}"
            async for lines in watch_lines(resp):
                now = time.perf_counter()
                for line in lines:
                    event = decoder.decode(line)
                    if event.type == "ERROR":
                        return f"watch {url}: {line[:300].decode(errors='replace')}"
                    rv = event.object.metadata.resourceVersion or rv
                    if event.type != "BOOKMARK":
                        seen(event.object, now)


class _ListMeta(msgspec.Struct):
    resourceVersion: str = ""


class _ListHead(msgspec.Struct):
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[msgspec.Raw] = msgspec.field(default_factory=list)


async def list_head(session: aiohttp.ClientSession, url: str) -> _ListHead:
    """A collection's resourceVersion and (at most) its first item, undecoded."""
    body = await call(session, "GET", url, params={"limit": "1"})
    return msgspec.json.decode(body, type=_ListHead)


@contextlib.asynccontextmanager
async def watching(
    session: aiohttp.ClientSession,
    url: str,
    decoder: msgspec.json.Decoder[Any],
    seen: Callable[[Any, float], None],
) -> AsyncIterator[asyncio.Task[str]]:
    """`watch` of `url` from now on, in a task (done only if the watch failed), cancelled on exit."""
    rv = (await list_head(session, url)).metadata.resourceVersion
    task = asyncio.create_task(watch(session, url, rv, decoder, seen))
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError):
            await task


async def delete_collection(session: aiohttp.ClientSession, url: str, limit_s: float) -> None:
    """Delete everything in a collection at once (grace period 0) and wait until it is empty. A
    DELETE the server gave up on (504: kube-apiserver's 60 s, thousands of pods on a loaded
    machine, or the connection dropped meanwhile) is sent again for what is left."""
    deadline = time.monotonic() + limit_s
    while True:
        try:
            async with session.delete(url, params={"gracePeriodSeconds": "0"}) as resp:
                status, payload = resp.status, await resp.read()
        except aiohttp.ServerDisconnectedError as exc:  # how kube-apiserver ended one such DELETE here
            status, payload = 504, repr(exc).encode()
        if status < 300:
            break
        if status != 504 or time.monotonic() > deadline:
            raise RuntimeError(f"DELETE {url}: HTTP {status}: {payload[:300].decode(errors='replace')}")
    while (await list_head(session, url)).items:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} was not emptied in time")
        await asyncio.sleep(0.5)


def first_seen(seen: dict[str, float]) -> Callable[[Any, float], None]:
    """A `watching` callback noting when each object (by `metadata.name`) was first seen."""

    def note(obj: Any, now: float) -> None:
        seen.setdefault(obj.metadata.name, now)

    return note


async def wait_until(done: Callable[[], bool], task: asyncio.Task[Any], limit_s: float, what: str) -> None:
    """Poll `done` until true; fail when the watch `task` feeding it ended or `limit_s` passed."""
    deadline = time.monotonic() + limit_s
    while not done():
        if task.done() or time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def watch_lines(resp: aiohttp.ClientResponse) -> AsyncIterator[list[bytes]]:
    """A watch response's events, one JSON line each, in the batches the network delivers them."""
    pending = b""
    async for chunk in resp.content.iter_any():
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        yield [line for line in lines if line.strip()]


# -- command line ----------------------------------------------------------------------------------


def add_kcm_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kcm", default="", help="command that runs kcm (default: the kcm beside this python)"
    )


def kcm_command(args: argparse.Namespace) -> list[str]:
    return shlex.split(args.kcm) if args.kcm else [str(Path(sys.executable).with_name("kcm"))]


def run(bench: Coroutine[Any, Any, int]) -> int:
    """Run a benchmark to its exit status; a RuntimeError is reported, not raised."""
    # Turn SIGTERM into an exception so the servers are stopped on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        return uvloop.run(bench)
    except RuntimeError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1


def exit_status(problems: list[str]) -> int:
    """Report what made the run fail, if anything; the figures alone never do."""
    for problem in problems:
        print(f"ERROR: {problem}", file=sys.stderr)
    return 1 if problems else 0


# -- report ----------------------------------------------------------------------------------------


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list; NaN when it is empty."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def between_baselines(rates: list[float], baselines: list[float]) -> list[tuple[float, float]]:
    """(baseline, ratio) of each round: round i ran between baselines i and i + 1, and its rate is
    divided by their mean, which keeps the drift of a shared VM's CPU out of the ratio."""
    out = []
    for i, rate in enumerate(rates):
        base = statistics.mean(baselines[i : i + 2])
        out.append((base, rate / base))
    return out


def fmt(value: float | None, digits: int) -> str:
    if value is None or math.isnan(value):
        return "n/a"
    return f"{value:,.{digits}f}"


def ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or math.isnan(a) or math.isnan(b) or b == 0:
        return "n/a"
    return f"{a / b:.2f}"
