"""Upstream kube-controller-manager and kcm side by side on kube-apiserver, in one run (issue 27
item 7); run by `make bench` and `make bench-upstream`.

Every scenario runs once per configuration, each on a fresh `kcm dev --apiserver=upstream` stack
(etcd, kube-apiserver v1.32 and the simulator as the node agent, from `make upstream`):
- upstream: `--reference`, upstream kube-controller-manager as kubeadm runs it;
- kcm: nats-server, the watcher, the coordinator and kcm's controllers (all of them, in one
  `kcm controllers` process, as the reference runs all of its own);
each at its default client limits (no flag: `--kube-api-qps 20 --kube-api-burst 30` on both) and
with them lifted (`--kube-api-qps 1000 --kube-api-burst 2000` by default; kcm's watcher keeps its
own 100/200). The scenarios (sizes are flags, the issue's by default):
1. deployment: a Deployment scaled 0 -> `--pods` (3,000): pods/s until its status reports them
   all ready, updated and available.
2. job: a Job of `--job-completions` (2,000) at `--job-parallelism` (200) whose pods succeed at
   once: the time from its creation to its Complete condition.
3. service: a Service over `--service-pods` (5,000) pods made ready by the simulator, then
   `--waves` (5) waves each changing `--churn` (10%) of them: half turned unready or ready again
   (the simulator's readiness annotation), half deleted and replaced. Each wave waits until the
   Service's EndpointSlices show it. EndpointSlice and Endpoints writes (every write request
   kube-apiserver served, conflicts included, from its `apiserver_request_total`) per pod
   change; a change is a pod turning ready or unready, appearing or going.
Beside each: the CPU time of every process of the stack (from /proc) per pod or per change, the
controller manager's processes summed, and their peak resident memory. The table's ratio columns
divide kcm's figure by upstream's at the same limits.

The simulator binds and runs both sides' pods alike, after `--pod-start-delay` (0 by default, so
a pod's start does not cap a Job's rate). Times are seen through watches from this process.
Figures are printed, never enforced: the exit status is non-zero only when a stack does not
start, requests fail, or a scenario does not finish in time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import random
import ssl
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import benchlib
import msgspec
from benchlib import apimetrics, views
from benchlib import endpoints as eb
from kcm_cli import upstream
from kcm_shared.client import kubeclient

UPSTREAM, KCM = "upstream", "kcm"
DEFAULT, LIFTED = "default", "lifted"
SCENARIOS = ("deployment", "job", "service")
PODS_PER_NODE = 100  # below the simulated nodes' 110-pod capacity
CONCURRENCY = 16  # this process's requests in flight
MERGE = {"Content-Type": "application/merge-patch+json"}
SIM_SUCCEEDS = {"sim.kcm.dev/exit-code": "0"}
SIM_READY = "sim.kcm.dev/ready"
SETTLE_LIMIT_S = 30.0
QUIET_WRITES_S = 2.0  # no EndpointSlice or Endpoints write for this long: the controllers are done
# The controller manager's own processes, on either side: what its cost sums.
CONTROLLER_MANAGER = (
    "kube-controller-manager",
    "kcm controllers",
    "kcm watcher",
    "kcm coordinator",
    "nats-server",
)
SHARED = ("kube-apiserver", "etcd", "kcm sim", "kcm dev", benchlib.THIS_PROCESS)
CM_SUM = "controller manager, all its processes"


@dataclass(frozen=True)
class Config:
    side: str  # UPSTREAM or KCM
    limits: str  # DEFAULT or LIFTED
    qps: int = 0  # with LIFTED
    burst: int = 0

    @property
    def label(self) -> str:
        return f"{self.side} {self.limits}"

    def dev_args(self) -> list[str]:
        args = ["--reference"] if self.side == UPSTREAM else []
        if self.limits == LIFTED:
            args += ["--kube-api-qps", str(self.qps), "--kube-api-burst", str(self.burst)]
        return args


@dataclass
class Outcome:
    """One scenario under one configuration: its figures (label -> value, in print order), the
    processes' usage and kube-apiserver's write requests over the measured phase, and what those
    are divided by."""

    figures: dict[str, float] = field(default_factory=dict)
    usage: benchlib.Usage = field(default_factory=benchlib.Usage)
    writes: apimetrics.Writes = field(default_factory=apimetrics.Writes)
    per: int = 0
    per_what: str = "pod"
    problems: list[str] = field(default_factory=list)


# -- the stack -------------------------------------------------------------------------------------


@dataclass
class Stack:
    dev: benchlib.Dev
    session: aiohttp.ClientSession
    processes: dict[str, int]  # name (benchlib.service_name) -> pid

    @property
    def url(self) -> str:
        return self.dev.url

    async def settle(self) -> None:
        await benchlib.settle(list(self.processes.values()), SETTLE_LIMIT_S)

    def gone(self) -> list[str]:
        """The processes that exited since the stack started (the supervisor restarts them under
        a new pid, whose CPU time this run would not count)."""
        return [name for name, pid in self.processes.items() if not Path(f"/proc/{pid}").exists()]

    async def writes(self) -> apimetrics.Writes:
        body = await benchlib.call(self.session, "GET", f"{self.url}/metrics")
        return apimetrics.write_counts(body.decode())

    async def get(self, path: str, type_: type[Any]) -> Any:
        return msgspec.json.decode(await benchlib.call(self.session, "GET", f"{self.url}{path}"), type=type_)

    async def create(self, path: str, obj: dict[str, Any]) -> None:
        await benchlib.call(self.session, "POST", f"{self.url}{path}", obj)


def processes(dev_pid: int) -> dict[str, int]:
    """The stack's processes by name; a name met twice gets its pid appended."""
    out: dict[str, int] = {}
    for pid in [dev_pid, *benchlib.descendants(dev_pid)]:
        name = benchlib.service_name(pid)
        out[f"{name} ({pid})" if name in out else name] = pid
    return out


@contextlib.asynccontextmanager
async def stack(
    command: list[str], workdir: Path, config: Config, nodes: int, args: argparse.Namespace
) -> AsyncIterator[Stack]:
    argv = ["--apiserver=upstream", "--nodes", str(nodes), "--pod-start-delay", str(args.pod_start_delay)]
    argv += ["--log-level", "warning", *config.dev_args()]
    async with benchlib.kcm_dev(command, workdir, argv) as dev:
        conn = kubeclient.load_connection(str(dev.state / "kubeconfig"))
        tls = conn.ssl_context if isinstance(conn.ssl_context, ssl.SSLContext) else None
        async with benchlib.client_session(2 * CONCURRENCY + 8, tls) as session:
            yield Stack(dev, session, processes(dev.proc.pid))


async def namespace(s: Stack, name: str, limit_s: float) -> None:
    """A new namespace, once its `default` ServiceAccount is there: until then kube-apiserver's
    ServiceAccount admission refuses every pod in it (the serviceaccount controller makes it)."""
    await s.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )

    async def made() -> bool:
        async with s.session.get(f"{s.url}/api/v1/namespaces/{name}/serviceaccounts/default") as resp:
            return resp.status == 200

    await poll(made, limit_s, f"the ServiceAccount {name}/default")


@contextlib.asynccontextmanager
async def counting(s: Stack, out: Outcome) -> AsyncIterator[None]:
    """kube-apiserver's write requests over the block into `out.writes` (the scrapes outside
    the CPU measurement it wraps)."""
    before = await s.writes()
    yield
    out.writes = (await s.writes()).since(before)


async def poll(check: Callable[[], Awaitable[bool]], limit_s: float, what: str) -> None:
    deadline = time.monotonic() + limit_s
    while not await check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)


async def until(s: Stack, done: Callable[[], bool], watches: list[asyncio.Task[str]], limit_s: float) -> str:
    """Wait for `done`; what stopped the wait early (a watch ended, kcm dev exited, time ran
    out), or "" once done."""
    deadline = time.monotonic() + limit_s
    while not done():
        if ended := [w for w in watches if w.done()]:
            return ended[0].result() or "a watch ended"
        if s.dev.proc.returncode is not None:
            return "kcm dev exited"
        if time.monotonic() > deadline:
            return f"not done after {limit_s:.0f}s"
        await asyncio.sleep(0.05)
    return ""


# -- API objects -----------------------------------------------------------------------------------


def pod_spec(**extra: Any) -> dict[str, Any]:
    return {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}], **extra}


# -- scenarios -------------------------------------------------------------------------------------


async def deployment_scenario(s: Stack, args: argparse.Namespace) -> Outcome:
    n, ns, name = args.pods, "bench-deploy", "web"
    out = Outcome(per=n)
    apps = f"/apis/apps/v1/namespaces/{ns}"
    labels = {"app": name}
    await namespace(s, ns, args.timeout)
    spec = {"replicas": 0, "selector": {"matchLabels": labels}}
    spec["template"] = {"metadata": {"labels": labels}, "spec": pod_spec()}
    await s.create(
        f"{apps}/deployments",
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "spec": spec},
    )

    async def warm() -> bool:
        # Both controllers have synced it: the ReplicaSet's status is the replicaset controller's.
        sets = (await s.get(f"{apps}/replicasets", views.List)).items
        return bool(sets) and sets[0].status.observedGeneration >= 1

    await poll(warm, args.timeout, "the Deployment's empty ReplicaSet, synced")
    await s.settle()
    created: dict[str, float] = {}
    ready: list[float] = []

    def on_deployment(obj: views.Object, now: float) -> None:
        st = obj.status
        done = min(st.readyReplicas, st.availableReplicas, st.updatedReplicas) >= n
        if done and st.observedGeneration >= obj.metadata.generation and not ready:
            ready.append(now)

    async with (
        benchlib.watching(
            s.session, f"{s.url}/api/v1/namespaces/{ns}/pods", views.EVENTS, benchlib.first_seen(created)
        ) as pods,
        benchlib.watching(
            s.session, f"{s.url}{apps}/deployments", views.EVENTS, on_deployment
        ) as deployments,
        counting(s, out),
    ):
        with benchlib.measure(s.processes, out.usage):
            start = time.perf_counter()
            await benchlib.call(
                s.session,
                "PATCH",
                f"{s.url}{apps}/deployments/{name}/scale",
                {"spec": {"replicas": n}},
                headers=MERGE,
            )
            if problem := await until(s, lambda: bool(ready), [pods, deployments], args.timeout):
                out.problems.append(f"{len(created)} of {n} pods created, Deployment not ready: {problem}")
    if ready:
        out.figures[f"pods/s, 0 -> {n:,} ready per Deployment status"] = n / (ready[0] - start)
        out.figures["all ready per Deployment status after, s"] = ready[0] - start
    if created:
        out.figures["all pods created after, s"] = max(created.values()) - start
    out.figures["pods created"] = len(created)
    return out


def job(name: str, completions: int, parallelism: int) -> dict[str, Any]:
    template = {"metadata": {"annotations": SIM_SUCCEEDS}, "spec": pod_spec(restartPolicy="Never")}
    spec = {"completions": completions, "parallelism": parallelism, "template": template}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


async def job_scenario(s: Stack, args: argparse.Namespace) -> Outcome:
    n, ns = args.job_completions, "bench-job"
    out = Outcome(per=n)
    jobs = f"/apis/batch/v1/namespaces/{ns}/jobs"
    await namespace(s, ns, args.timeout)
    # A one-pod Job first: the job controller is running and synced before the clock starts.
    await s.create(jobs, job("warm-up", 1, 1))

    async def warm() -> bool:
        return views.true_condition(await s.get(f"{jobs}/warm-up", views.Object), "Complete")

    await poll(warm, args.timeout, "the warm-up Job's completion")
    await s.settle()
    complete: list[float] = []

    def on_job(obj: views.Object, now: float) -> None:
        if obj.metadata.name == "work" and views.true_condition(obj, "Complete") and not complete:
            complete.append(now)

    async with (
        benchlib.watching(s.session, f"{s.url}{jobs}", views.EVENTS, on_job) as watch,
        counting(s, out),
    ):
        with benchlib.measure(s.processes, out.usage):
            start = time.perf_counter()
            await s.create(jobs, job("work", n, args.job_parallelism))
            if problem := await until(s, lambda: bool(complete), [watch], args.timeout):
                out.problems.append(f"the Job did not complete: {problem}")
    if complete:
        out.figures[f"Job {n:,} @ {args.job_parallelism}: completion time, s"] = complete[0] - start
        out.figures["pods/s (completions / completion time)"] = n / (complete[0] - start)
    final: views.Object = await s.get(f"{jobs}/work", views.Object)
    out.figures["pods succeeded per Job status"] = final.status.succeeded
    return out


class Churn:
    """The Service's pods and what its slices should say of them: pod -> ready."""

    def __init__(self, s: Stack, ns: str, app: str) -> None:
        self.s, self.ns, self.app = s, ns, app
        self.expected: dict[str, bool] = {}
        self.pods = f"/api/v1/namespaces/{ns}/pods"

    async def create(self, name: str) -> None:
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": self.app}}}
        await self.s.create(self.pods, {**pod, "spec": pod_spec()})
        self.expected[name] = True

    async def toggle(self, name: str) -> None:
        ready = not self.expected[name]
        patch = {"metadata": {"annotations": {SIM_READY: "true" if ready else "false"}}}
        await benchlib.call(self.s.session, "PATCH", f"{self.s.url}{self.pods}/{name}", patch, headers=MERGE)
        self.expected[name] = ready

    async def delete(self, name: str) -> None:
        url = f"{self.s.url}{self.pods}/{name}"
        await benchlib.call(self.s.session, "DELETE", url, {"gracePeriodSeconds": 0})
        del self.expected[name]


async def quiet_writes(s: Stack, limit_s: float) -> apimetrics.Writes:
    """Scrape until two scrapes `QUIET_WRITES_S` apart count the same EndpointSlice and Endpoints
    writes; the last scrape."""
    deadline = time.monotonic() + limit_s
    last = await s.writes()
    while True:
        await asyncio.sleep(QUIET_WRITES_S)
        now = await s.writes()
        if all(now.of(r) == last.of(r) for r in ("endpointslices", "endpoints")):
            return now
        if time.monotonic() > deadline:
            raise RuntimeError("EndpointSlice and Endpoints writes did not stop")
        last = now


async def service_scenario(s: Stack, args: argparse.Namespace) -> Outcome:
    n, ns, app = args.service_pods, "bench-churn", "churn"
    out = Outcome(per_what="change")
    await namespace(s, ns, args.timeout)
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": app}}
    svc["spec"] = {"selector": {"app": app}, "ports": [{"port": 80, "targetPort": 8080}]}
    await s.create(f"/api/v1/namespaces/{ns}/services", svc)
    tracker = eb.Tracker()
    tasks = await tracker.follow(eb.Api(s.session, s.url), ns, app, pods=False)
    churn = Churn(s, ns, app)

    def converged() -> bool:
        return tracker.members() == churn.expected

    async def wait(what: str) -> None:
        def state() -> str:
            members = tracker.members()
            want = churn.expected
            return f"{sum(members.values())} of {len(members)} ready in the slices, want {sum(want.values())} of {len(want)}"

        await eb.wait_until(converged, what, args.timeout, state)
        if tracker.errors:
            raise RuntimeError(tracker.errors[0])

    try:
        # Both controllers have synced the Service: its (placeholder) slice and its Endpoints.
        await eb.wait_until(
            lambda: bool(tracker.in_slices) and tracker.endpoints_writes > 0,
            "the Service's first slice and Endpoints",
            args.timeout,
        )
        await s.settle()
        before = await s.writes()
        start = time.perf_counter()
        await eb.in_parallel(CONCURRENCY, [f"{app}-{i}" for i in range(n)], churn.create)
        await wait(f"{n} ready pods in the slices")
        out.figures[f"fill: {n:,} pods ready in the slices after, s"] = time.perf_counter() - start
        filled = await quiet_writes(s, args.timeout)
        fill = filled.since(before)
        out.figures["fill: EndpointSlice writes per pod"] = fill.of("endpointslices") / n
        out.figures["fill: Endpoints writes per pod"] = fill.of("endpoints") / n
        await s.settle()
        before = await s.writes()
        rng = random.Random(17)  # the same pods each run and on each side
        changes = 0
        with benchlib.measure(s.processes, out.usage):
            start = time.perf_counter()
            for wave in range(args.waves):
                chosen = rng.sample(sorted(churn.expected), max(2, round(args.churn * len(churn.expected))))
                flipped, replaced = chosen[: len(chosen) // 2], chosen[len(chosen) // 2 :]
                fresh = [f"{app}-w{wave}-{i}" for i in range(len(replaced))]

                async def replace(pair: tuple[str, str]) -> None:
                    await churn.delete(pair[0])
                    await churn.create(pair[1])

                await asyncio.gather(
                    eb.in_parallel(CONCURRENCY // 2, flipped, churn.toggle),
                    eb.in_parallel(CONCURRENCY // 2, list(zip(replaced, fresh, strict=True)), replace),
                )
                changes += len(flipped) + 2 * len(replaced)
                await wait(f"wave {wave + 1} in the slices")
            out.figures[f"churn: {args.waves} waves of {args.churn:.0%} in the slices after, s"] = (
                time.perf_counter() - start
            )
            after = await quiet_writes(s, args.timeout)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    writes = out.writes = after.since(before)
    out.per = changes
    out.figures["churn: pod changes"] = changes
    out.figures["churn: EndpointSlice writes per change"] = writes.of("endpointslices") / changes
    out.figures["churn: Endpoints writes per change"] = writes.of("endpoints") / changes
    # A conflict is a write from a stale cache: counted above too, and retried.
    out.figures["churn: EndpointSlice writes refused 409 Conflict"] = writes.of(
        "endpointslices", code_prefix="409"
    )
    out.figures["churn: Endpoints writes refused 409 Conflict"] = writes.of("endpoints", code_prefix="409")
    return out


SCENARIO_RUNS: dict[str, Callable[[Stack, argparse.Namespace], Awaitable[Outcome]]] = {
    "deployment": deployment_scenario,
    "job": job_scenario,
    "service": service_scenario,
}


def nodes_for(scenario: str, args: argparse.Namespace) -> int:
    """Simulated nodes enough for the pods that run at once."""
    size: int = {"deployment": args.pods, "job": args.job_parallelism, "service": args.service_pods}[scenario]
    return max(3, math.ceil(size / PODS_PER_NODE))


async def one_run(
    command: list[str], scenario: str, config: Config, args: argparse.Namespace, workdir: Path
) -> Outcome:
    nodes = nodes_for(scenario, args)
    began = time.perf_counter()
    print(
        f"[{scenario}, {config.label}] starting kcm dev --apiserver=upstream with {nodes} simulated nodes ...",
        flush=True,
    )
    try:
        async with stack(command, workdir, config, nodes, args) as s:
            out = await SCENARIO_RUNS[scenario](s, args)
            out.problems += [f"{name} exited during the run" for name in s.gone()]
    except RuntimeError as exc:  # the other runs still run; this one's figures are n/a
        print(f"[{scenario}, {config.label}] failed: {exc}", file=sys.stderr, flush=True)
        return Outcome(problems=[str(exc)])
    print(
        f"[{scenario}, {config.label}] measured phase {out.usage.seconds:.1f}s, "
        f"whole run {time.perf_counter() - began:.0f}s",
        flush=True,
    )
    return out


# -- report ----------------------------------------------------------------------------------------

LABEL_WIDTH = 52
COLUMN_WIDTH = 12


def number(value: float | None) -> str:
    """A figure with as many decimals as its size deserves."""
    if value is None or math.isnan(value):
        return "n/a"
    if isinstance(value, int):  # a count
        return f"{value:,}"
    size = abs(value)
    digits = 0 if size >= 100 else 1 if size >= 10 else 2 if size >= 0.1 else 3
    return benchlib.fmt(value, digits)


def cpu_ms(out: Outcome, names: tuple[str, ...]) -> float:
    """CPU milliseconds these processes spent per pod (or change) together."""
    spent = [out.usage.cpu[name] for name in names if name in out.usage.cpu]
    return 1000 * sum(spent) / out.per if spent and out.per else math.nan


def _figure(label: str) -> Callable[[Outcome], float]:
    return lambda out: out.figures.get(label, math.nan)


def _writes(resource: str) -> Callable[[Outcome], float]:
    return lambda out: out.writes.of(resource) / out.per if out.per else math.nan


def _cpu(names: tuple[str, ...]) -> Callable[[Outcome], float]:
    return lambda out: cpu_ms(out, names)


def _peak(names: tuple[str, ...]) -> Callable[[Outcome], float]:
    """Peak resident MiB of these processes, summed (an upper bound of their sum's peak)."""

    def peak(out: Outcome) -> float:
        peaks = [out.usage.rss[name][1] for name in names if name in out.usage.rss]
        return sum(peaks) / 1024 if peaks else math.nan

    return peak


Results = dict[tuple[str, str], Outcome]  # (side, limits) -> one scenario's outcome


def table(scenario: str, outcomes: Results, limits: list[str]) -> list[str]:
    """The scenario's rows: per limit, upstream's figure, kcm's and kcm / upstream."""
    groups = "".join(f"{lim + ' limits':^{3 * COLUMN_WIDTH}}" for lim in limits)
    lines = [f"{scenario:<{LABEL_WIDTH}}{groups}"]
    lines.append(_line("", [cell for _ in limits for cell in (UPSTREAM, KCM, "kcm/up")]))
    empty = Outcome()

    def row(label: str, value: Callable[[Outcome], float], compare: bool = True) -> None:
        cells = []
        for lim in limits:
            a, b = (value(outcomes.get((side, lim), empty)) for side in (UPSTREAM, KCM))
            cells += [number(a), number(b), benchlib.ratio(b, a) if compare else ""]
        lines.append(_line(label, cells))

    labels = list(dict.fromkeys(label for out in outcomes.values() for label in out.figures))
    for label in labels:
        row(f"  {label}", _figure(label))
    per_what = next(iter(outcomes.values())).per_what
    resources = Counter[str]()
    for out in outcomes.values():
        resources.update({resource: n for (resource, _), n in out.writes.counts.items()})
    lines.append(f"  kube-apiserver write requests per {per_what}, by resource")
    row("    all resources", lambda out: sum(out.writes.counts.values()) / out.per if out.per else math.nan)
    for resource, _ in resources.most_common():
        row(f"    {resource}", _writes(resource))
    names = list(dict.fromkeys(name for out in outcomes.values() for name in out.usage.cpu))
    own = [name for name in CONTROLLER_MANAGER if name in names]
    others = [name for name in names if name not in CONTROLLER_MANAGER]
    lines.append(f"  CPU ms per {per_what}, by process")
    row(f"    {CM_SUM}", _cpu(CONTROLLER_MANAGER))
    for name in own:
        row(f"      {name}", _cpu((name,)), compare=False)
    for name in others:
        row(f"    {name}", _cpu((name,)))
    row("    all of them", lambda out: cpu_ms(out, tuple(out.usage.cpu)))
    lines.append("  peak RSS MiB, by process")
    row(f"    {CM_SUM}", _peak(CONTROLLER_MANAGER))
    for name in own:
        row(f"      {name}", _peak((name,)), compare=False)
    row("  CPU the hypervisor took, % of the machine", lambda out: out.usage.stolen_percent, compare=False)
    return lines


def _line(label: str, cells: list[str]) -> str:
    return f"{label:<{LABEL_WIDTH}}" + "".join(f"{c:>{COLUMN_WIDTH}}" for c in cells)


def report(results: dict[str, Results], args: argparse.Namespace, bin_dir: Path) -> None:
    print()
    print(
        f"kcm vs upstream kube-controller-manager on kube-apiserver ({bin_dir.parent.name}), each run a fresh stack"
    )
    print(
        f"limits: default = no flag (20 qps, burst 30 on both); lifted = --kube-api-qps {args.lifted_qps} "
        f"--kube-api-burst {args.lifted_burst} (kcm's watcher keeps its own 100/200)"
    )
    print(
        f"simulator (the node agent, the same on both sides): --pod-start-delay {args.pod_start_delay}s, "
        f"one node per {PODS_PER_NODE} pods (at least 3); {os.cpu_count()} CPU cores, "
        f"load average {os.getloadavg()[0]:.1f} at the end"
    )
    print(
        "kcm/up: kcm's figure over upstream's (above 1: kcm's is larger: faster in pods/s, costlier in s, CPU, MiB, writes)"
    )
    for scenario, outcomes in results.items():
        print()
        for line in table(scenario, outcomes, args.limits):
            print(line)
    print()
    print(
        f"The controller manager's processes: upstream's {CONTROLLER_MANAGER[0]}; kcm's {', '.join(CONTROLLER_MANAGER[1:])}."
    )
    print("CPU counts over the measured phase only (from the scale, the Job's creation, the first wave);")
    print("peak RSS over the stack's life.")


async def bench(args: argparse.Namespace) -> int:
    command = benchlib.kcm_command(args)
    bin_dir = upstream.binaries()  # one clear line when `make upstream` has not run
    began = time.perf_counter()
    print(
        f"scenarios={','.join(args.scenarios)} limits={','.join(args.limits)} pods={args.pods} "
        f"job={args.job_completions}@{args.job_parallelism} service-pods={args.service_pods} "
        f"waves={args.waves}x{args.churn:.0%} cpus={os.cpu_count()} load={os.getloadavg()[0]:.1f}",
        flush=True,
    )
    configs = [
        Config(side, lim, args.lifted_qps, args.lifted_burst)
        for lim in args.limits
        for side in (UPSTREAM, KCM)
    ]
    results: dict[str, Results] = {}
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="kcm-bench-side-by-side-") as tmp:
        for scenario in args.scenarios:
            results[scenario] = {}
            for i, config in enumerate(configs):
                workdir = Path(tmp, f"{scenario}-{i}")
                os.mkdir(workdir)
                out = await one_run(command, scenario, config, args, workdir)
                results[scenario][config.side, config.limits] = out
                problems += [f"{scenario}, {config.label}: {p}" for p in out.problems]
    report(results, args, bin_dir)
    print(f"The whole benchmark took {time.perf_counter() - began:.0f}s.")
    return benchlib.exit_status(problems)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pods", type=int, default=3000, help="the Deployment's replicas (default 3000)")
    p.add_argument("--job-completions", type=int, default=2000, help="the Job's completions (default 2000)")
    p.add_argument("--job-parallelism", type=int, default=200, help="the Job's parallelism (default 200)")
    p.add_argument("--service-pods", type=int, default=5000, help="the Service's pods (default 5000)")
    p.add_argument("--waves", type=int, default=5, help="churn waves over the Service's pods (default 5)")
    p.add_argument(
        "--churn", type=float, default=0.1, help="share of the pods each wave changes (default 0.1)"
    )
    p.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        help=f"which to run, comma-separated ({','.join(SCENARIOS)})",
    )
    p.add_argument(
        "--limits",
        default=f"{DEFAULT},{LIFTED}",
        help=f"which client limits to run, comma-separated ({DEFAULT},{LIFTED})",
    )
    p.add_argument(
        "--lifted-qps", type=int, default=1000, help="--kube-api-qps of the lifted runs (default 1000)"
    )
    p.add_argument(
        "--lifted-burst", type=int, default=2000, help="--kube-api-burst of the lifted runs (default 2000)"
    )
    p.add_argument(
        "--pod-start-delay", type=float, default=0.0, help="the simulator's, on both sides (default 0)"
    )
    p.add_argument("--timeout", type=float, default=1800, help="give up on a phase after this many seconds")
    benchlib.add_kcm_argument(p)
    args = p.parse_args(argv)
    args.scenarios = [s for s in args.scenarios.split(",") if s]
    args.limits = [lim for lim in args.limits.split(",") if lim]
    if unknown := set(args.scenarios) - set(SCENARIOS):
        p.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    if unknown := set(args.limits) - {DEFAULT, LIFTED}:
        p.error(f"unknown limits: {', '.join(sorted(unknown))}")
    return args


def main() -> int:
    return benchlib.run(bench(parse_args()))


if __name__ == "__main__":
    sys.exit(main())
