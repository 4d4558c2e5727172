"""Benchmark of the cluster simulator at scale (issue 3); run by `make bench`.

Starts `kcm apiserver` and `kcm sim --nodes N` against it, waits for every node to be
Ready and rid of its not-ready taint (schedulable), creates the pods from this process (the
load generator) and follows them with a watch until all are bound and Running. The baseline, against a fresh API server in the
same run, is the load generator itself doing the same writes the simulator causes per
pod (create, binding, status patch) with no simulator, so the ratio shows what the
simulator costs on top of the API server. CPU % of the API server, the simulator and the
load generator is read from /proc. Timings are printed, never enforced: the exit status
is non-zero only when requests fail or pods do not all reach Running in time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import benchlib
import msgspec

NAMESPACE = "bench"
CONCURRENCY = 32
MERGE = {"Content-Type": "application/merge-patch+json"}


# -- processes -------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def simulator(
    command: list[str], kubeconfig: Path, args: argparse.Namespace, workdir: Path
) -> AsyncIterator[asyncio.subprocess.Process]:
    log_path = workdir / "sim.log"
    argv = ["sim", "--kubeconfig", str(kubeconfig), "--nodes", str(args.nodes)]
    argv += ["--pod-start-delay", str(args.pod_start_delay)]
    argv += ["--heartbeat-interval", str(args.heartbeat_interval), "--log-level", "warning"]
    # No node lifecycle controller runs here: the simulator lifts the not-ready taint itself.
    argv += ["--manage-not-ready-taint"]
    proc = await benchlib.start_logged([*command, *argv], log_path)
    try:
        yield proc
    finally:
        await benchlib.stop(proc)
        if proc.returncode not in (0, -signal.SIGTERM):
            print(f"simulator log tail:\n{benchlib.tail(log_path)}", file=sys.stderr)


# -- API calls -------------------------------------------------------------------------------------


@dataclass
class Writes(benchlib.Failures):
    ok: int = 0


async def _send(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    body: Any,
    writes: Writes,
    headers: dict[str, str] = benchlib.JSON,
) -> None:
    try:
        async with session.request(method, url, data=benchlib.encode(body), headers=headers) as resp:
            payload = await resp.read()
            if resp.status < 300:
                writes.ok += 1
            else:
                writes.record_error(f"{method} HTTP {resp.status}: {payload.decode(errors='replace')}")
    except aiohttp.ClientError as exc:
        writes.record_error(f"{method} {type(exc).__name__}: {exc}")


def pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]},
    }


def binding(name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


async def _workers(count: int, job: Any) -> None:
    """`CONCURRENCY` workers each take the next index as soon as their last job returned."""
    indices = iter(range(count))

    async def worker() -> None:
        for i in indices:
            await job(i)

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))


class _Condition(msgspec.Struct):
    type: str = ""
    status: str = ""


class _NodeStatus(msgspec.Struct):
    conditions: list[_Condition] = msgspec.field(default_factory=list)


class _Taint(msgspec.Struct):
    key: str = ""
    effect: str = ""


class _NodeSpec(msgspec.Struct):
    taints: list[_Taint] = msgspec.field(default_factory=list)


class _Node(msgspec.Struct):
    spec: _NodeSpec = msgspec.field(default_factory=_NodeSpec)
    status: _NodeStatus = msgspec.field(default_factory=_NodeStatus)


def _schedulable(n: _Node) -> bool:
    """Ready, and rid of the not-ready taint the API server put on it at creation."""
    ready = any(c.type == "Ready" and c.status == "True" for c in n.status.conditions)
    return ready and not any(t.key == "node.kubernetes.io/not-ready" for t in n.spec.taints)


class _NodeList(msgspec.Struct):
    items: list[_Node]


async def ready_nodes(session: aiohttp.ClientSession, url: str) -> int:
    async with session.get(f"{url}/api/v1/nodes") as resp:
        listing = msgspec.json.decode(await resp.read(), type=_NodeList)
    return sum(1 for n in listing.items if _schedulable(n))


class _Meta(msgspec.Struct):
    name: str = ""
    resourceVersion: str = ""


class _PodSpec(msgspec.Struct):
    nodeName: str = ""


class _PodStatus(msgspec.Struct):
    phase: str = ""


class _Pod(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    spec: _PodSpec = msgspec.field(default_factory=_PodSpec)
    status: _PodStatus = msgspec.field(default_factory=_PodStatus)


class _Event(msgspec.Struct):
    type: str
    object: _Pod


@dataclass
class Progress:
    """When each pod was first seen bound and Running, from a watch of the namespace."""

    bound: dict[str, float] = field(default_factory=dict)
    running: dict[str, float] = field(default_factory=dict)
    problem: str = ""


async def follow_pods(session: aiohttp.ClientSession, url: str, rv: str, progress: Progress) -> None:
    decoder = msgspec.json.Decoder(_Event)
    while True:
        params = {"watch": "true", "resourceVersion": rv, "allowWatchBookmarks": "true"}
        async with session.get(f"{url}/api/v1/namespaces/{NAMESPACE}/pods", params=params) as resp:
            if resp.status != 200:
                progress.problem = f"watch: HTTP {resp.status}"
                return
            async for lines in benchlib.watch_lines(resp):
                now = time.perf_counter()
                for line in lines:
                    event = decoder.decode(line)
                    if event.type == "ERROR":
                        progress.problem = f"watch ERROR event: {line[:300].decode(errors='replace')}"
                        return
                    obj = event.object
                    rv = obj.metadata.resourceVersion or rv
                    if event.type == "BOOKMARK":
                        continue
                    if obj.spec.nodeName:
                        progress.bound.setdefault(obj.metadata.name, now)
                    if obj.status.phase == "Running":
                        progress.running.setdefault(obj.metadata.name, now)
        # The server ended the watch (its timeout): carry on from the last version seen.


async def _ensure_namespace(session: aiohttp.ClientSession, url: str) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    async with session.post(
        f"{url}/api/v1/namespaces", data=benchlib.encode(body), headers=benchlib.JSON
    ) as resp:
        if resp.status not in (201, 409):
            raise RuntimeError(f"create namespace: HTTP {resp.status}: {(await resp.text())[:300]}")


async def _resource_version(session: aiohttp.ClientSession, url: str) -> str:
    async with session.get(f"{url}/api/v1/namespaces/{NAMESPACE}/pods?limit=1") as resp:
        return str(msgspec.json.decode(await resp.read())["metadata"]["resourceVersion"])


# -- measurements ----------------------------------------------------------------------------------


@dataclass
class Cpu:
    """CPU seconds each process spent over a phase."""

    apiserver: float = math.nan
    sim: float = math.nan
    load: float = math.nan
    seconds: float = math.nan

    def percent(self, spent: float) -> float:
        return 100 * spent / self.seconds if self.seconds > 0 else math.nan


@contextlib.contextmanager
def measure_cpu(cpu: Cpu, apiserver_pid: int, sim_pid: int | None) -> Any:
    start = time.perf_counter()
    api0, load0 = benchlib.process_cpu_seconds(apiserver_pid), time.process_time()
    sim0 = benchlib.process_cpu_seconds(sim_pid) if sim_pid else math.nan
    yield
    cpu.seconds = time.perf_counter() - start
    cpu.apiserver = benchlib.process_cpu_seconds(apiserver_pid) - api0
    cpu.load = time.process_time() - load0
    if sim_pid:
        cpu.sim = benchlib.process_cpu_seconds(sim_pid) - sim0


@dataclass
class SimFigures:
    nodes_ready_s: float = math.nan
    nodes_cpu: Cpu = field(default_factory=Cpu)
    create_s: float = math.nan
    all_bound_s: float = math.nan
    all_running_s: float = math.nan
    pods_cpu: Cpu = field(default_factory=Cpu)
    bound: int = 0
    running: int = 0
    writes: Writes = field(default_factory=Writes)
    problems: list[str] = field(default_factory=list)


async def run_with_simulator(command: list[str], args: argparse.Namespace, workdir: Path) -> SimFigures:
    figures = SimFigures()
    async with (
        benchlib.apiserver(command, workdir) as server,
        benchlib.client_session(CONCURRENCY * 2) as session,
    ):
        url = server.url
        await _ensure_namespace(session, url)
        print(f"apiserver at {url}: starting {args.nodes} simulated nodes ...", flush=True)
        async with simulator(command, server.kubeconfig, args, workdir) as sim:
            with measure_cpu(figures.nodes_cpu, server.pid, sim.pid):
                start = time.perf_counter()
                while await ready_nodes(session, url) < args.nodes:
                    if sim.returncode is not None or time.perf_counter() - start > args.timeout:
                        figures.problems.append("not all nodes became Ready")
                        return figures
                    await asyncio.sleep(0.5)
                figures.nodes_ready_s = time.perf_counter() - start
            print(
                f"nodes Ready after {figures.nodes_ready_s:.1f}s: creating {args.pods} pods ...", flush=True
            )
            progress = Progress()
            watch = asyncio.create_task(
                follow_pods(session, url, await _resource_version(session, url), progress)
            )
            pods_url = f"{url}/api/v1/namespaces/{NAMESPACE}/pods"
            try:
                with measure_cpu(figures.pods_cpu, server.pid, sim.pid):
                    start = time.perf_counter()
                    await _workers(
                        args.pods,
                        lambda i: _send(session, "POST", pods_url, pod(f"p-{i:06d}"), figures.writes),
                    )
                    figures.create_s = time.perf_counter() - start
                    expected = figures.writes.ok
                    while len(progress.running) < expected and not progress.problem and not watch.done():
                        if sim.returncode is not None or time.perf_counter() - start > args.timeout:
                            break
                        await asyncio.sleep(0.1)
            finally:
                watch.cancel()
                with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError):
                    await watch
    figures.bound, figures.running = len(progress.bound), len(progress.running)
    if progress.bound:
        figures.all_bound_s = max(progress.bound.values()) - start
    if progress.running:
        figures.all_running_s = max(progress.running.values()) - start
    if progress.problem:
        figures.problems.append(progress.problem)
    if figures.running < expected:
        figures.problems.append(
            f"{figures.running} of {expected} pods reached Running ({figures.bound} bound)"
        )
    return figures


@dataclass
class BaseFigures:
    create_s: float = math.nan
    total_s: float = math.nan
    cpu: Cpu = field(default_factory=Cpu)
    writes: Writes = field(default_factory=Writes)


async def run_baseline(command: list[str], args: argparse.Namespace, workdir: Path) -> BaseFigures:
    """The same per-pod writes the simulator causes, sent by the load generator itself."""
    figures = BaseFigures()
    async with (
        benchlib.apiserver(command, workdir) as server,
        benchlib.client_session(CONCURRENCY * 2) as session,
    ):
        url = server.url
        await _ensure_namespace(session, url)
        print(f"baseline apiserver at {url}: {args.pods} pods x (create, bind, status) ...", flush=True)
        pods_url = f"{url}/api/v1/namespaces/{NAMESPACE}/pods"
        running = {"status": {"phase": "Running"}}
        with measure_cpu(figures.cpu, server.pid, None):
            start = time.perf_counter()
            await _workers(
                args.pods, lambda i: _send(session, "POST", pods_url, pod(f"p-{i:06d}"), figures.writes)
            )
            figures.create_s = time.perf_counter() - start

            async def bind_and_run(i: int) -> None:
                name = f"p-{i:06d}"
                node = f"sim-node-{i % max(args.nodes, 1)}"
                await _send(
                    session, "POST", f"{pods_url}/{name}/binding", binding(name, node), figures.writes
                )
                await _send(session, "PATCH", f"{pods_url}/{name}/status", running, figures.writes, MERGE)

            await _workers(args.pods, bind_and_run)
            figures.total_s = time.perf_counter() - start
    return figures


# -- report ----------------------------------------------------------------------------------------


def _row(label: str, sim: float | None, base: float | None, digits: int, ratio: bool = True) -> None:
    shown = benchlib.ratio(sim, base) if ratio else ""
    print(f"{label:<44}{benchlib.fmt(sim, digits):>11}{benchlib.fmt(base, digits):>11}{shown:>8}")


def _rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else math.nan


def report(sim: SimFigures, base: BaseFigures, args: argparse.Namespace) -> None:
    pods = args.pods
    nc, pc, bc = sim.nodes_cpu, sim.pods_cpu, base.cpu
    print()
    print(f"{'metric':<44}{'with sim':>11}{'baseline':>11}{'ratio':>8}")
    _row(f"time until {args.nodes:,} nodes Ready, s", sim.nodes_ready_s, None, 1)
    _row("  apiserver CPU % (nodes coming up)", nc.percent(nc.apiserver), None, 0, ratio=False)
    _row("  sim CPU % (nodes coming up)", nc.percent(nc.sim), None, 0, ratio=False)
    _row("pod creates/s", _rate(pods, sim.create_s), _rate(pods, base.create_s), 0)
    _row(f"time until {pods:,} pods bound, s", sim.all_bound_s, None, 1)
    _row(f"time until {pods:,} pods Running, s", sim.all_running_s, base.total_s, 1)
    _row("pods bound/s", _rate(sim.bound, sim.all_bound_s), None, 0)
    _row("pods Running/s", _rate(sim.running, sim.all_running_s), _rate(pods, base.total_s), 0)
    for who, a, b in (
        ("apiserver", pc.percent(pc.apiserver), bc.percent(bc.apiserver)),
        ("sim", pc.percent(pc.sim), None),
        ("load generator", pc.percent(pc.load), bc.percent(bc.load)),
    ):
        _row(f"{who} CPU % (pods phase)", a, b, 0, ratio=False)
    _row("apiserver CPU s (pods phase)", pc.apiserver, bc.apiserver, 1)
    print()
    print("Times count from the first pod create. The baseline is the load generator sending, per")
    print("pod, the create, the binding and the Running status patch the simulator causes, to a")
    print(f"fresh API server with no simulator ({CONCURRENCY} connections); its 'Running' time is")
    print("when its last write returned. The run with the simulator also carries the heartbeats")
    print(f"({args.nodes:,} nodes x (status patch + lease) every {args.heartbeat_interval:g}s).")
    print("CPU % is of one core over the phase (the machine has", os.cpu_count(), "cores).")


def problems(sim: SimFigures, base: BaseFigures) -> list[str]:
    found = list(sim.problems)
    for who, writes in (("with sim", sim.writes), ("baseline", base.writes)):
        if writes.failed:
            found.append(f"{who}: {writes.failed} writes failed, e.g. {writes.errors}")
    return found


async def bench(args: argparse.Namespace) -> int:
    command = benchlib.kcm_command(args)
    print(
        f"nodes={args.nodes} pods={args.pods} heartbeat={args.heartbeat_interval:g}s "
        f"pod-start-delay={args.pod_start_delay:g}s cpus={os.cpu_count()}"
    )
    with tempfile.TemporaryDirectory(prefix="kcm-bench-sim-") as tmp:
        sim_dir, base_dir = Path(tmp, "sim"), Path(tmp, "base")
        os.mkdir(sim_dir)
        os.mkdir(base_dir)
        sim = await run_with_simulator(command, args, sim_dir)
        base = await run_baseline(command, args, base_dir)
    report(sim, base, args)
    return benchlib.exit_status(problems(sim, base))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=1000, help="simulated nodes")
    p.add_argument("--pods", type=int, default=30_000, help="pods to create and bring to Running")
    p.add_argument("--heartbeat-interval", type=float, default=10.0, help="the simulator's heartbeat period")
    p.add_argument("--pod-start-delay", type=float, default=0.5, help="the simulator's bind-to-Running delay")
    p.add_argument("--timeout", type=float, default=600, help="give up waiting for nodes or pods after this")
    benchlib.add_kcm_argument(p)
    return p.parse_args()


def main() -> int:
    return benchlib.run(bench(parse_args()))


if __name__ == "__main__":
    sys.exit(main())
