"""Benchmark of a Deployment scaled 0 -> N through the whole stack (issue 5); run by `make bench`.

Runs the stack as a user does, `kcm dev` (embedded API server and simulator in its own
process; nats-server, watcher, coordinator and the deployment and replicaset controllers
as its children), once with the controllers' client rate limit lifted (`--kube-api-qps 0`)
and once with upstream's default (`--kube-api-qps 20 --kube-api-burst 30`), each on a
fresh stack. In each run:

1. Baseline: a tight client loop in this process creates N pods on `CONCURRENCY`
   connections: the API server's raw pod-create rate, with the simulator scheduling and
   running those pods as it does the controller's. They are the pods the controller sends
   (the Deployment's template, a pod-template-hash label, a generated name, a controlling
   owner reference), in another namespace, with labels the Deployment does not select. A watch from this process times it to
   the last pod seen, as the scale is timed, so both rates include the same watch delivery
   (the loop's own time to its last reply is printed too). The pods are then deleted.
2. A Deployment created at 0 replicas is scaled to N through the scale subresource; watches
   from this process see each pod appear and become Ready, and the Deployment's status
   reach N available. Pods created per second by the replicaset controller count from the
   scale request to the last pod's creation; divided by the baseline, that is the figure
   the issue's goal (>= 0.8 with the rate limit lifted) is about.
3. The Deployment is scaled back to 0 (its pods then deleted at once) and the baseline runs
   again. The raw rate is the mean of the two: on a shared VM the CPU the hypervisor leaves
   the guest drifts by tens of percent within a minute (its share is printed per phase),
   and bracketing the scale keeps that drift out of the ratio. Runs in which it took 10% or
   more in some phase are told apart, and the median of the others is printed too.
4. Resident memory (current and peak, from /proc) and CPU time of each service process.

Timings are printed, never enforced: the exit status is non-zero only when the stack does
not start, requests fail, or the pods do not all become Ready in time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import benchlib
import msgspec
from benchlib import views

NAMESPACE = "bench"
RAW_NAMESPACE = "bench-raw"
DEPLOYMENT = "web"
CONCURRENCY = 32
MERGE = {"Content-Type": "application/merge-patch+json"}
# Upstream kube-controller-manager's client defaults.
UPSTREAM_QPS, UPSTREAM_BURST = 20, 30
CONTROLLERS = ("deployment-controller", "replicaset-controller")
PODS_PER_NODE = 100  # below the simulated nodes' 110-pod capacity
SETTLE_LIMIT_S = 30.0
QUIET_STOLEN_PERCENT = 10  # a run counts as quiet when the hypervisor took less in each phase


# -- the stack -------------------------------------------------------------------------------------


def check_controllers(command: list[str]) -> None:
    """Fail early, and clearly, when this kcm does not have the controllers under test."""
    res = subprocess.run([*command, "controllers", "--help"], capture_output=True, text=True, timeout=60)
    missing = [name for name in CONTROLLERS if name not in res.stdout]
    if res.returncode != 0 or missing:
        raise RuntimeError(
            f"`kcm controllers --help` does not know {', '.join(missing) or 'its controllers'}: "
            "this benchmark needs the deployment and replicaset controllers built in "
            f"(services/cli/kcm_cli/controllers.py BUILTIN).\n{res.stderr[-500:]}"
        )


@dataclass
class Service:
    """One process of the stack, named after the service it runs."""

    name: str
    pid: int


@dataclass
class Stack:
    url: str
    dev: asyncio.subprocess.Process
    services: list[Service] = field(default_factory=list)

    def discover(self) -> None:
        """The kcm dev process (API server and simulator) and the services it supervises."""
        pids = [self.dev.pid]
        for pid in pids:
            pids.extend(benchlib.children(pid))
        self.services = [Service("kcm dev (apiserver + sim)", self.dev.pid)]
        self.services += [Service(benchlib.service_name(pid), pid) for pid in pids[1:]]

    def cpu_seconds(self) -> dict[int, float]:
        return {s.pid: benchlib.process_cpu_seconds(s.pid) for s in self.services}


@contextlib.asynccontextmanager
async def dev_stack(
    command: list[str], workdir: Path, nodes: int, qps: int, burst: int
) -> AsyncIterator[Stack]:
    """Run `kcm dev` until the block exits; yields once it says it is ready."""
    argv = ["--nodes", str(nodes), "--controllers", ",".join(CONTROLLERS), "--kube-api-qps", str(qps)]
    argv += ["--log-level", "warning"]
    if burst:
        argv += ["--kube-api-burst", str(burst)]
    stack: Stack | None = None
    try:
        async with benchlib.kcm_dev(command, workdir, argv) as dev:
            stack = Stack(dev.url, dev.proc)
            stack.discover()
            yield stack
    finally:
        # kcm dev stops its children on SIGTERM; any it could not are ended here, by pid.
        benchlib.kill_all([service.pid for service in stack.services[1:]] if stack else [])


# -- API objects and calls -------------------------------------------------------------------------


def pod_template(labels: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"labels": labels},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]},
    }


def deployment(replicas: int) -> dict[str, Any]:
    labels = {"app": DEPLOYMENT}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": DEPLOYMENT, "labels": labels},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": pod_template(labels)},
    }


# The baseline's pods are the replicaset controller's in all but names (a pod-template-hash
# label, a generated name, a controlling owner reference to a ReplicaSet that does not exist;
# no garbage collector runs here), so both phases ask the same of the API server. On a bare
# API server such pods cost about a sixth more per create than plainly named ones.
RAW_OWNER = {
    "apiVersion": "apps/v1",
    "kind": "ReplicaSet",
    "name": "raw-5d8f6b7c9a",
    "uid": "0b1c2d3e-4f50-4a61-8b72-9c8d7e6f5a4b",
    "controller": True,
    "blockOwnerDeletion": True,
}


def raw_pod() -> dict[str, Any]:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        **pod_template({"app": "raw", "pod-template-hash": "5d8f6b7c9a"}),
    }
    pod["metadata"]["generateName"] = f"{RAW_OWNER['name']}-"
    pod["metadata"]["ownerReferences"] = [RAW_OWNER]
    return pod


def watch(session: aiohttp.ClientSession, url: str, rv: str, seen: Any) -> Coroutine[Any, Any, str]:
    return benchlib.watch(session, url, rv, views.EVENTS, seen)


# -- measurements ----------------------------------------------------------------------------------


@contextlib.contextmanager
def measure(stack: Stack, usage: benchlib.Usage) -> Any:
    with benchlib.measure({s.name: s.pid for s in stack.services}, usage):
        yield


@dataclass
class Baseline:
    """One run of the tight client loop."""

    seconds: float = math.nan  # to the last pod seen by the watch
    loop_seconds: float = math.nan  # to the loop's last reply
    ok: int = 0
    usage: benchlib.Usage = field(default_factory=benchlib.Usage)

    @property
    def rate(self) -> float:
        return self.ok / self.seconds if self.seconds > 0 else math.nan

    @property
    def loop_rate(self) -> float:
        return self.ok / self.loop_seconds if self.loop_seconds > 0 else math.nan


@dataclass
class Run:
    qps: int
    burst: int
    number: int = 0  # its place in the benchmark, for the report's columns
    before: Baseline = field(default_factory=Baseline)  # the raw loop just before the scale
    after: Baseline = field(default_factory=Baseline)  # ... and just after it
    created: int = 0
    first_create_s: float = math.nan
    last_create_s: float = math.nan
    all_bound_s: float = math.nan
    all_ready_s: float = math.nan
    available_s: float = math.nan
    scale_usage: benchlib.Usage = field(default_factory=benchlib.Usage)
    failures: benchlib.Failures = field(default_factory=benchlib.Failures)
    problems: list[str] = field(default_factory=list)

    @property
    def quiet(self) -> bool:
        """Whether the hypervisor left the machine alone enough, in every phase, for the ratio
        to be about this code: a phase it took a tenth of the CPU in can move it by half."""
        phases = (self.before.usage, self.scale_usage, self.after.usage)
        return all(u.stolen_percent < QUIET_STOLEN_PERCENT for u in phases)

    @property
    def raw_rate(self) -> float:
        """The mean of the loop's rate before and after the scale: on a shared VM the CPU the
        hypervisor leaves us drifts, and bracketing the scale keeps that drift out of the ratio."""
        rates = [b.rate for b in (self.before, self.after) if b.rate > 0]
        return statistics.mean(rates) if rates else math.nan

    @property
    def controller_rate(self) -> float:
        return self.created / self.last_create_s if self.last_create_s > 0 else math.nan


async def wait_nodes_ready(session: aiohttp.ClientSession, url: str, nodes: int) -> None:
    while True:
        listing = msgspec.json.decode(
            await benchlib.call(session, "GET", f"{url}/api/v1/nodes"), type=views.List
        )
        if sum(1 for n in listing.items if views.true_condition(n, "Ready")) >= nodes:
            return
        await asyncio.sleep(0.5)


async def settle(stack: Stack) -> None:
    await benchlib.settle([service.pid for service in stack.services], SETTLE_LIMIT_S)


async def create_raw_pods(
    session: aiohttp.ClientSession, url: str, count: int, result: Baseline, failures: benchlib.Failures
) -> None:
    """The baseline: `CONCURRENCY` workers each send the next create as soon as the last returned."""
    pods_url = f"{url}/api/v1/namespaces/{RAW_NAMESPACE}/pods"
    indices = iter(range(count))

    async def worker() -> None:
        for _ in indices:
            try:
                await benchlib.call(session, "POST", pods_url, raw_pod())
                result.ok += 1
            except (RuntimeError, aiohttp.ClientError) as exc:
                failures.record_error(str(exc))

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))


async def baseline(
    stack: Stack, session: aiohttp.ClientSession, args: argparse.Namespace, result: Baseline, run: Run
) -> None:
    """The raw loop, timed as the scale is: to the moment a watch from this process sees its
    last pod, so both rates include the same watch delivery (and the API server serves this
    watch in both phases)."""
    url = stack.url
    pods_url = f"{url}/api/v1/namespaces/{RAW_NAMESPACE}/pods"
    seen: dict[str, float] = {}
    rv = (await views.list_of(session, pods_url, limit="1")).metadata.resourceVersion
    watcher = asyncio.create_task(
        watch(session, pods_url, rv, lambda obj, now: seen.setdefault(obj.metadata.name, now))
    )
    try:
        with measure(stack, result.usage):
            start = time.perf_counter()
            await create_raw_pods(session, url, args.pods, result, run.failures)
            result.loop_seconds = time.perf_counter() - start
            deadline = time.monotonic() + args.timeout
            while len(seen) < result.ok and not watcher.done():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the watch saw {len(seen)} of {result.ok} baseline pods")
                await asyncio.sleep(0.05)
        if len(seen) < result.ok:
            raise RuntimeError(f"the baseline's watch ended: {watcher.result() or 'no reason given'}")
        result.seconds = max(seen.values()) - start
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError):
            await watcher
    await delete_pods(session, pods_url, args.timeout)


async def delete_pods(session: aiohttp.ClientSession, pods_url: str, limit_s: float) -> None:
    """Delete a namespace's pods at once (grace 0), so the next phase starts on an API server
    holding no other pods."""
    await benchlib.call(session, "DELETE", pods_url, params={"gracePeriodSeconds": "0"})
    deadline = time.monotonic() + limit_s
    while (await views.list_of(session, pods_url, limit="1")).items:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the pods of {pods_url} were not deleted in time")
        await asyncio.sleep(0.5)


async def scale_down(stack: Stack, session: aiohttp.ClientSession, args: argparse.Namespace) -> None:
    """Back to the state the first baseline ran in: the Deployment at 0 and its pods gone."""
    apps = f"{stack.url}/apis/apps/v1/namespaces/{NAMESPACE}"
    await benchlib.call(
        session, "PATCH", f"{apps}/deployments/{DEPLOYMENT}/scale", {"spec": {"replicas": 0}}, headers=MERGE
    )
    deadline = time.monotonic() + args.timeout
    while any(rs.status.replicas for rs in (await views.list_of(session, f"{apps}/replicasets")).items):
        if time.monotonic() > deadline:
            raise RuntimeError("the ReplicaSet did not scale down to 0 in time")
        await asyncio.sleep(0.5)
    # The scale-down deleted them with the default grace: the simulated kubelet would wait it out.
    await delete_pods(session, f"{stack.url}/api/v1/namespaces/{NAMESPACE}/pods", args.timeout)


async def scale(stack: Stack, session: aiohttp.ClientSession, args: argparse.Namespace, run: Run) -> None:
    url, n = stack.url, args.pods
    apps = f"{url}/apis/apps/v1/namespaces/{NAMESPACE}"
    pods_url = f"{url}/api/v1/namespaces/{NAMESPACE}/pods"
    await benchlib.call(session, "POST", f"{apps}/deployments", deployment(0))
    # The deployment controller makes the (empty) ReplicaSet before anything is timed.
    deadline = time.monotonic() + args.timeout
    while not (await views.list_of(session, f"{apps}/replicasets")).items:
        if time.monotonic() > deadline:
            raise RuntimeError("the deployment controller made no ReplicaSet for the new Deployment")
        await asyncio.sleep(0.2)
    await settle(stack)

    created: dict[str, float] = {}
    bound: dict[str, float] = {}
    ready: dict[str, float] = {}
    available: list[float] = []

    def on_pod(obj: views.Object, now: float) -> None:
        created.setdefault(obj.metadata.name, now)
        if obj.spec.nodeName:
            bound.setdefault(obj.metadata.name, now)
        if views.true_condition(obj, "Ready"):
            ready.setdefault(obj.metadata.name, now)

    def on_deployment(obj: views.Object, now: float) -> None:
        st = obj.status
        done = st.availableReplicas >= n and st.updatedReplicas >= n
        if done and st.observedGeneration >= obj.metadata.generation and not available:
            available.append(now)

    pods_rv = (await views.list_of(session, pods_url, limit="1")).metadata.resourceVersion
    deploys_rv = (await views.list_of(session, f"{apps}/deployments")).metadata.resourceVersion
    watches = [
        asyncio.create_task(watch(session, pods_url, pods_rv, on_pod)),
        asyncio.create_task(watch(session, f"{apps}/deployments", deploys_rv, on_deployment)),
    ]
    try:
        with measure(stack, run.scale_usage):
            start = time.perf_counter()
            await benchlib.call(
                session,
                "PATCH",
                f"{apps}/deployments/{DEPLOYMENT}/scale",
                {"spec": {"replicas": n}},
                headers=MERGE,
            )
            while len(ready) < n or not available:
                ended = [w for w in watches if w.done()]
                if ended:
                    run.problems.append(ended[0].result() or "a watch ended")
                    break
                if stack.dev.returncode is not None:
                    run.problems.append("kcm dev exited during the scale")
                    break
                if time.perf_counter() - start > args.timeout:
                    run.problems.append(f"{len(ready)} of {n} pods Ready after {args.timeout:.0f}s")
                    break
                await asyncio.sleep(0.1)
    finally:
        for w in watches:
            w.cancel()
        for w in watches:
            with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError):
                await w
    run.created = len(created)
    if created:
        run.first_create_s = min(created.values()) - start
        run.last_create_s = max(created.values()) - start
    if len(ready) >= n:
        run.all_ready_s = max(ready.values()) - start
    if len(bound) >= n:
        run.all_bound_s = max(bound.values()) - start
    if available:
        run.available_s = available[0] - start
    if run.created > n:
        run.problems.append(f"{run.created} pods were created for {n} replicas")


async def one_run(command: list[str], args: argparse.Namespace, qps: int, workdir: Path) -> Run:
    burst = UPSTREAM_BURST if qps else 0
    run = Run(qps, burst)
    limit = f"--kube-api-qps {qps}" + (f" --kube-api-burst {burst}" if burst else "")
    print(f"[{limit}] starting kcm dev with {args.nodes} simulated nodes ...", flush=True)
    async with (
        dev_stack(command, workdir, args.nodes, qps, burst) as stack,
        benchlib.client_session(CONCURRENCY * 2) as session,
    ):
        url = stack.url
        for ns in (NAMESPACE, RAW_NAMESPACE):
            await benchlib.call(session, "POST", f"{url}/api/v1/namespaces", {"metadata": {"name": ns}})
        try:
            async with asyncio.timeout(args.timeout):
                await wait_nodes_ready(session, url, args.nodes)
        except TimeoutError:
            raise RuntimeError(f"not all {args.nodes} simulated nodes became Ready in time") from None
        await settle(stack)
        print(f"[{limit}] baseline: {args.pods} pod creates from a tight client loop ...", flush=True)
        await baseline(stack, session, args, run.before, run)
        await settle(stack)
        print(f"[{limit}] scaling Deployment {NAMESPACE}/{DEPLOYMENT} 0 -> {args.pods} ...", flush=True)
        await scale(stack, session, args, run)
        if not run.problems:
            print(f"[{limit}] scaling back to 0, then the tight client loop again ...", flush=True)
            await scale_down(stack, session, args)
            await settle(stack)
            await baseline(stack, session, args, run.after, run)
    return run


# -- report ----------------------------------------------------------------------------------------


def _label(run: Run) -> str:
    return f"{run.number}: qps={run.qps}" + (f",burst={run.burst}" if run.burst else " (no limit)")


def _row(label: str, values: list[str]) -> None:
    print(f"{label:<46}" + "".join(f"{v:>22}" for v in values))


def report(runs: list[Run], args: argparse.Namespace) -> None:
    n = args.pods
    fmt = benchlib.fmt
    print()
    _row("metric", [_label(r) for r in runs])
    _row(f"raw pod creates/s (tight loop, {CONCURRENCY} conns)", [fmt(r.raw_rate, 0) for r in runs])
    _row("  before the scale", [fmt(r.before.rate, 0) for r in runs])
    _row("  after the scale", [fmt(r.after.rate, 0) for r in runs])
    _row(
        "  by the loop's own replies (before, after)",
        [f"{fmt(r.before.loop_rate, 0)}, {fmt(r.after.loop_rate, 0)}" for r in runs],
    )
    _row("replicaset-controller pod creates/s", [fmt(r.controller_rate, 0) for r in runs])
    _row(
        "  ratio to raw (goal >= 0.8 without limit)",
        [benchlib.ratio(r.controller_rate, r.raw_rate) for r in runs],
    )
    unlimited = [r for r in runs if r.qps == 0 and r.raw_rate > 0]
    _median_ratio(f"  ratio without limit, median of {len(unlimited)} runs", unlimited)
    quiet = [r for r in unlimited if r.quiet]
    if len(quiet) < len(unlimited):
        _median_ratio(
            f"  ... of the {len(quiet)} runs the hypervisor took under {QUIET_STOLEN_PERCENT}% of the "
            "machine in every phase",
            quiet,
        )
    _row("pods created", [f"{r.created:,}" for r in runs])
    _row("first pod created after scale, s", [fmt(r.first_create_s, 2) for r in runs])
    _row(f"all {n:,} pods created after, s", [fmt(r.last_create_s, 1) for r in runs])
    _row(f"all {n:,} pods bound by the simulator after, s", [fmt(r.all_bound_s, 1) for r in runs])
    _row(f"all {n:,} pods Ready after, s", [fmt(r.all_ready_s, 1) for r in runs])
    _row("Deployment status all available after, s", [fmt(r.available_s, 1) for r in runs])
    names = list(dict.fromkeys(name for r in runs for name in r.scale_usage.cpu))
    print()
    _row("CPU % of one core, scale phase", [_label(r) for r in runs])
    for name in names:
        _row(f"  {name}", [fmt(_percent(r.scale_usage, name), 0) for r in runs])
    _row("CPU % of one core, baseline before the scale", [_label(r) for r in runs])
    for name in names:
        _row(f"  {name}", [fmt(_percent(r.before.usage, name), 0) for r in runs])
    _row("CPU taken by the hypervisor, % of the machine", [_label(r) for r in runs])
    _row("  baseline before the scale", [fmt(r.before.usage.stolen_percent, 0) for r in runs])
    _row("  scale", [fmt(r.scale_usage.stolen_percent, 0) for r in runs])
    _row("  baseline after the scale", [fmt(r.after.usage.stolen_percent, 0) for r in runs])
    print()
    _row("RSS MiB at all Ready (peak)", [_label(r) for r in runs])
    for name in names:
        if name in runs[0].scale_usage.rss:
            _row(f"  {name}", [_rss(r.scale_usage, name) for r in runs])
    print()
    print("Times count from the scale request (PATCH of the scale subresource) or the loop's first")
    print("request to the moment a watch from this process sees the last pod created. The baseline")
    print("creates the same number of the same pods as the controller (names aside), on the same")
    print("API server in the same run, once before the scale and once after it (the Deployment")
    print("back at 0), with the simulator scheduling and running them as it does the controller's;")
    print("`kcm dev` runs the API server and the simulator in one process.")
    print(f"Each run is a fresh stack with {args.nodes} nodes; {os.cpu_count()} CPU cores.")


def _median_ratio(label: str, runs: list[Run]) -> None:
    ratios = sorted(r.controller_rate / r.raw_rate for r in runs)
    if len(ratios) > 1:
        print(f"{label}: {statistics.median(ratios):.2f} (from {ratios[0]:.2f} to {ratios[-1]:.2f})")
    else:
        print(f"{label}: {ratios[0]:.2f}" if ratios else f"{label}: none")


def _percent(usage: benchlib.Usage, name: str) -> float:
    spent = usage.cpu.get(name, math.nan)
    return 100 * spent / usage.seconds if usage.seconds > 0 else math.nan


def _rss(usage: benchlib.Usage, name: str) -> str:
    now, peak = usage.rss.get(name, (math.nan, math.nan))
    return f"{benchlib.fmt(now / 1024, 0)} ({benchlib.fmt(peak / 1024, 0)})"


def problems(runs: list[Run]) -> list[str]:
    found = []
    for r in runs:
        found += [f"{_label(r)}: {p}" for p in r.problems]
        if r.failures.failed:
            found.append(
                f"{_label(r)}: {r.failures.failed} baseline creates failed, e.g. {r.failures.errors}"
            )
    return found


async def bench(args: argparse.Namespace) -> int:
    command = benchlib.kcm_command(args)
    began = time.perf_counter()
    print(f"pods={args.pods} nodes={args.nodes} qps runs={args.qps} cpus={os.cpu_count()}", flush=True)
    runs = []
    with tempfile.TemporaryDirectory(prefix="kcm-bench-deploy-") as tmp:
        for i, qps in enumerate(args.qps):
            workdir = Path(tmp, f"run{i}")
            os.mkdir(workdir)
            runs.append(await one_run(command, args, qps, workdir))
            runs[-1].number = i + 1
    report(runs, args)
    print(f"The whole benchmark took {time.perf_counter() - began:.0f}s.")
    return benchlib.exit_status(problems(runs))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pods", type=int, default=None, help="replicas to scale to (default 3000; --quick: 100)")
    p.add_argument(
        "--nodes", type=int, default=0, help=f"simulated nodes (default: one per {PODS_PER_NODE} pods)"
    )
    p.add_argument(
        "--qps",
        default=f"0,0,0,{UPSTREAM_QPS}",
        help="the controllers' --kube-api-qps of each run, comma-separated (0: no limit; "
        f"{UPSTREAM_QPS} runs with upstream's burst {UPSTREAM_BURST}). The no-limit run is made "
        "three times by default: on a small shared machine one run can be off by a third either way",
    )
    p.add_argument("--timeout", type=float, default=900, help="give up on a phase after this many seconds")
    p.add_argument(
        "--quick", action="store_true", help="a fast smoke run: 100 pods unless --pods says otherwise"
    )
    benchlib.add_kcm_argument(p)
    args = p.parse_args()
    if args.pods is None:
        args.pods = 100 if args.quick else 3000
    args.nodes = args.nodes or max(3, math.ceil(args.pods / PODS_PER_NODE))
    args.qps = [int(q) for q in args.qps.split(",") if q.strip()]
    return args


def main() -> int:
    args = parse_args()
    try:
        check_controllers(benchlib.kcm_command(args))
    except RuntimeError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    return benchlib.run(bench(args))


if __name__ == "__main__":
    sys.exit(main())
