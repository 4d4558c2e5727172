"""Cost per pod (issue 33): a Deployment scaled 0 -> N, what each process of the stack spends
on it, beside a tight client in the same stack and upstream kube-controller-manager; run by
`make bench` (small sizes by default).

- Every setup is a fresh `kcm dev --nodes N/100` stack (one simulated node per 100 pods):
  kcm with every default controller and with three (deployment, replicaset, garbage
  collector), on the embedded API server and on kube-apiserver (`--apiserver=upstream`), and
  upstream kube-controller-manager (`--reference`, every default controller) on
  kube-apiserver at its default client limits (20 qps, burst 30) and with them lifted. "Lifted"
  is `--kube-api-qps 100000 --kube-api-burst 100000` on either side.
- In each: first a tight client in this process creates N pods on `CONCURRENCY` connections
  (the replicaset controller's pods in all but name: a pod-template-hash label, a generated
  name, a controlling owner reference, to a ConfigMap that exists so the garbage collector
  leaves them be), timed to the moment a watch from this process sees the last one; they are
  deleted and the stack settles. Then the Deployment, created at 0 with its ReplicaSet synced,
  is scaled to N: pods/s to the last pod created and to the Deployment's status reporting all
  N available. CPU seconds of each process (/proc/<pid>/stat) count from the scale request
  until the stack is idle again (at most `SETTLE_LIMIT_S` after the status), divided by N;
  resident memory (/proc/<pid>/status VmRSS) is read once the stack is up (before the tight
  client's pods) and after the scale; the difference per pod is what a process holds per pod.
- `embedded-split` is k8s/'s layout (one process per controller, `kcm dev --replicas NAME=1`
  for every default controller): each process keeps the caches its controller reads, so the
  memory rows there are the sum over the controller processes and the largest of them (what
  one Deployment's memory limit must hold), and "controllers" in the CPU rows is their sum.
- `--scales`: the first setup again at each size, for CPU and memory per pod as the cluster
  grows (issue 33 item 3).
- `--no-client`: skip the tight client (its rate and the ratio are then n/a), for runs that
  only look at CPU and memory as the cluster grows.
- `--repeat`: every setup that many times; medians are printed with the spread.

Ratios are against baselines measured in the same run (the tight client's rate, upstream's
CPU per pod on the same API server at the same limits): on a shared machine only those mean
much. The load average at each run's end is printed. Figures are never enforced: the exit
status is non-zero only when a stack does not start, requests fail, or a scale does not finish.

The issue's full-size run (about 25 minutes on 2 cores):
    .venv/bin/python bench/cost_per_pod.py --pods 3000 --scales 1000,3000,10000,20000 --repeat 2
Both layouts' memory at 20,000 pods, and CPU per pod as the cluster grows:
    .venv/bin/python bench/cost_per_pod.py --no-client --pods 20000 --setups embedded-all,embedded-split
    .venv/bin/python bench/cost_per_pod.py --no-client --setups embedded-all --pods 200 \
        --scales 1000,3000,10000,20000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import benchlib
import deployment
import msgspec
import side_by_side
from benchlib import views
from kcm_cli.controllers import BUILTIN
from kcm_shared.client import kubeclient
from kcm_shared.runtime import controllerflags

CONCURRENCY = 32  # the tight client's connections
PODS_PER_NODE = 100
SETTLE_LIMIT_S = 30.0
LIFTED = ("--kube-api-qps", "100000", "--kube-api-burst", "100000")
THREE = "deployment-controller,replicaset-controller,garbage-collector-controller"
NAMESPACE, RAW_NAMESPACE, NAME = "bench-cost", "bench-cost-raw", "web"
MERGE = {"Content-Type": "application/merge-patch+json"}
# The bus side of kcm (what upstream's one process does) is the controller processes (one, or
# one per controller in k8s/'s layout), the watcher and NATS: its cost is the issue's yardstick.
BUS_SERVICES = ("kcm watcher", "nats-server")
UPSTREAM_KCM = "kube-controller-manager"
# k8s/'s layout: every default controller in a process of its own.
SPLIT = tuple(a for spec in controllerflags.select(BUILTIN, "*") for a in ("--replicas", f"{spec.name}=1"))


@dataclass(frozen=True)
class Setup:
    name: str
    label: str
    args: tuple[str, ...]

    @property
    def upstream_apiserver(self) -> bool:
        return "--apiserver=upstream" in self.args


SETUPS = {
    s.name: s
    for s in (
        Setup("embedded-all", "kcm, embedded, every controller", LIFTED),
        Setup("embedded-three", "kcm, embedded, 3 controllers", (*LIFTED, "--controllers", THREE)),
        Setup("embedded-split", "kcm, embedded, one process per controller", (*LIFTED, *SPLIT)),
        Setup("upstream-all", "kcm, kube-apiserver, every controller", ("--apiserver=upstream", *LIFTED)),
        Setup(
            "upstream-three",
            "kcm, kube-apiserver, 3 controllers",
            ("--apiserver=upstream", *LIFTED, "--controllers", THREE),
        ),
        Setup("reference-default", "upstream KCM, default limits", ("--apiserver=upstream", "--reference")),
        Setup("reference-lifted", "upstream KCM, lifted", ("--apiserver=upstream", "--reference", *LIFTED)),
    )
}


@dataclass
class Result:
    """One setup at one size: rates, and per process CPU seconds and memory over the scale."""

    pods: int  # the pods the scale made: N, or fewer when it did not finish
    client_rate: float = math.nan  # the tight client's pods/s
    created_rate: float = math.nan  # the replicaset controller's, to the last pod seen
    available_rate: float = math.nan  # to the Deployment's status saying all N available
    usage: benchlib.Usage = field(default_factory=benchlib.Usage)
    rss_idle: dict[str, float] = field(default_factory=dict)  # KiB, the stack ready, no pod yet
    load: float = math.nan
    problems: list[str] = field(default_factory=list)

    def cpu_ms(self, names: tuple[str, ...]) -> float:
        spent = [self.usage.cpu[n] for n in names if n in self.usage.cpu]
        return 1000 * sum(spent) / self.pods if spent else math.nan

    def controllers(self) -> tuple[str, ...]:
        """The controller processes: `kcm controllers`, or `kcm controller NAME (pid)` each."""
        return tuple(n for n in self.usage.cpu if n.startswith("kcm controller"))

    def bus_side(self) -> tuple[str, ...]:
        return (*self.controllers(), *BUS_SERVICES)

    def rss_kib(self, names: tuple[str, ...]) -> float:
        """Resident KiB after the scale, summed over `names`."""
        held = [self.usage.rss[n][0] for n in names if n in self.usage.rss]
        return sum(held) if held else math.nan

    def kib_per_pod(self, names: tuple[str, ...]) -> float:
        if not names or any(n not in self.rss_idle or n not in self.usage.rss for n in names):
            return math.nan
        return (self.rss_kib(names) - sum(self.rss_idle[n] for n in names)) / self.pods


# -- one run ---------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def stack(
    command: list[str], workdir: Path, setup: Setup, pods: int
) -> AsyncIterator[side_by_side.Stack]:
    nodes = max(3, math.ceil(pods / PODS_PER_NODE))
    argv = ["--nodes", str(nodes), "--pod-start-delay", "0", "--log-level", "warning", *setup.args]
    async with benchlib.kcm_dev(command, workdir, argv) as dev:
        conn = kubeclient.load_connection(str(dev.state / "kubeconfig"))
        tls = conn.ssl_context if isinstance(conn.ssl_context, ssl.SSLContext) else None
        async with benchlib.client_session(2 * CONCURRENCY + 8, tls) as session:
            s = side_by_side.Stack(dev, session, side_by_side.processes(dev.proc.pid))
            try:
                async with asyncio.timeout(max(120, nodes)):  # 200 nodes under load took longer
                    await deployment.wait_nodes_ready(session, dev.url, nodes)
            except TimeoutError:
                raise RuntimeError(f"not all {nodes} simulated nodes became Ready in time") from None
            yield s


async def namespace(s: side_by_side.Stack, name: str) -> None:
    """A namespace with its `default` ServiceAccount made here: kube-apiserver refuses pods
    without it, and with three controllers no serviceaccount controller runs to make it."""
    await s.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
    url = f"{s.url}/api/v1/namespaces/{name}/serviceaccounts"
    await benchlib.call(s.session, "POST", url, account, allowed=(409,))


class _Uid(msgspec.Struct):
    uid: str


class _Created(msgspec.Struct):
    metadata: _Uid


async def tight_client(s: side_by_side.Stack, n: int, limit_s: float, failures: benchlib.Failures) -> float:
    """Pods/s of N creates sent as fast as `CONCURRENCY` connections allow; the pods are deleted
    again before this returns."""
    pods_url = f"{s.url}/api/v1/namespaces/{RAW_NAMESPACE}/pods"
    owner_body = await benchlib.call(
        s.session,
        "POST",
        f"{s.url}/api/v1/namespaces/{RAW_NAMESPACE}/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "raw-owner"}},
    )
    owner = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "raw-owner",
        "uid": msgspec.json.decode(owner_body, type=_Created).metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    pod = deployment.raw_pod()
    pod["metadata"]["ownerReferences"] = [owner]
    seen: dict[str, float] = {}
    indices = iter(range(n))
    ok = 0

    async def worker() -> None:
        nonlocal ok
        for _ in indices:
            try:
                await benchlib.call(s.session, "POST", pods_url, pod)
                ok += 1
            except (RuntimeError, aiohttp.ClientError) as exc:
                failures.record_error(str(exc))

    async with benchlib.watching(s.session, pods_url, views.EVENTS, benchlib.first_seen(seen)) as watch:
        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        await benchlib.wait_until(lambda: len(seen) >= ok, watch, limit_s, "the tight client's pods")
    rate = ok / (max(seen.values()) - start) if seen else math.nan
    await benchlib.delete_collection(s.session, pods_url, limit_s)
    return rate


def the_deployment() -> dict[str, Any]:
    labels = {"app": NAME}
    spec = {"replicas": 0, "selector": {"matchLabels": labels}, "template": deployment.pod_template(labels)}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": NAME}, "spec": spec}


async def scale(s: side_by_side.Stack, n: int, limit_s: float, out: Result) -> None:
    apps = f"/apis/apps/v1/namespaces/{NAMESPACE}"
    await s.create(f"{apps}/deployments", the_deployment())

    async def warm() -> bool:
        sets = (await s.get(f"{apps}/replicasets", views.List)).items
        return bool(sets) and sets[0].status.observedGeneration >= 1

    await side_by_side.poll(warm, limit_s, "the Deployment's empty ReplicaSet, synced")
    await s.settle()
    created: dict[str, float] = {}
    available: list[float] = []

    def on_deployment(obj: views.Object, now: float) -> None:
        st = obj.status
        done = min(st.availableReplicas, st.updatedReplicas) >= n
        if done and st.observedGeneration >= obj.metadata.generation and not available:
            available.append(now)

    async with (
        benchlib.watching(
            s.session,
            f"{s.url}/api/v1/namespaces/{NAMESPACE}/pods",
            views.EVENTS,
            benchlib.first_seen(created),
        ) as pods,
        benchlib.watching(s.session, f"{s.url}{apps}/deployments", views.EVENTS, on_deployment) as deploys,
    ):
        with benchlib.measure(s.processes, out.usage):
            start = time.perf_counter()
            patch = {"spec": {"replicas": n}}
            url = f"{s.url}{apps}/deployments/{NAME}/scale"
            await benchlib.call(s.session, "PATCH", url, patch, headers=MERGE)
            if problem := await side_by_side.until(s, lambda: bool(available), [pods, deploys], limit_s):
                out.problems.append(
                    f"{len(created)} of {n} pods created, Deployment not available: {problem}"
                )
            # The trailing work (status updates, events, caches catching up) is the scale's too.
            await benchlib.settle(list(s.processes.values()), SETTLE_LIMIT_S)
    if created:
        out.created_rate = len(created) / (max(created.values()) - start)
        # Per pod means per pod made: a scale cut short by the time limit (two 20,000-pod runs
        # at load 23-38 stopped near 3,000) would otherwise spread its cost over pods never made.
        out.pods = min(n, len(created))
    if available:
        out.available_rate = n / (available[0] - start)
    if len(created) > n:
        out.problems.append(f"{len(created)} pods were created for {n} replicas")


async def one_run(
    command: list[str], setup: Setup, n: int, args: argparse.Namespace, workdir: Path
) -> Result:
    out = Result(n)
    tag = f"[{setup.name}, {n:,} pods]"
    print(f"{tag} starting kcm dev {' '.join(setup.args)} ...", flush=True)
    began = time.perf_counter()
    failures = benchlib.Failures()
    try:
        async with stack(command, workdir, setup, n) as s:
            for ns in (NAMESPACE, RAW_NAMESPACE):
                await namespace(s, ns)
            await s.settle()
            # Before any pod: memory a process took for pods is seldom handed back once freed.
            out.rss_idle = {name: benchlib.memory_kib(pid)[0] for name, pid in s.processes.items()}
            if not args.no_client:
                out.client_rate = await tight_client(s, n, args.timeout, failures)
                await s.settle()
            await scale(s, n, args.timeout, out)
            out.problems += [f"{name} exited during the run" for name in s.gone()]
    except RuntimeError as exc:  # the other runs still run; this one's figures are n/a
        out.problems.append(str(exc))
    if failures.failed:
        out.problems.append(f"{failures.failed} tight-client creates failed, e.g. {failures.errors}")
    out.load = os.getloadavg()[0]
    print(
        f"{tag} {out.created_rate:,.0f} pods/s (tight client {out.client_rate:,.0f}/s), "
        f"whole run {time.perf_counter() - began:.0f}s, load {out.load:.1f}",
        flush=True,
    )
    for problem in out.problems:
        print(f"{tag} problem: {problem}", file=sys.stderr, flush=True)
    return out


# -- report ----------------------------------------------------------------------------------------

LABEL_WIDTH = 46
COLUMN_WIDTH = 19


def median(results: list[Result], value: Callable[[Result], float]) -> str:
    """The median over repeats, with the spread when there is more than one."""
    values = sorted(v for v in map(value, results) if not math.isnan(v))
    if not values:
        return "n/a"
    mid = side_by_side.number(statistics.median(values))
    if len(values) == 1:
        return mid
    return f"{mid} ({side_by_side.number(values[0])}-{side_by_side.number(values[-1])})"


def line(label: str, cells: list[str]) -> None:
    print(f"{label:<{LABEL_WIDTH}}" + "".join(f"{c:>{COLUMN_WIDTH}}" for c in cells))


def process_names(columns: list[list[Result]]) -> list[str]:
    names = dict.fromkeys(name for runs in columns for r in runs for name in r.usage.cpu)
    return sorted(names, key=lambda name: (name == benchlib.THIS_PROCESS, name))


def _cpu(names: tuple[str, ...]) -> Callable[[Result], float]:
    return lambda r: r.cpu_ms(names)


def _rss_mib(name: str) -> Callable[[Result], float]:
    return lambda r: r.usage.rss.get(name, (math.nan, math.nan))[0] / 1024


def _largest_controller_mib(r: Result) -> float:
    return max((r.rss_kib((n,)) for n in r.controllers()), default=math.nan) / 1024


def _kib_per_pod(name: str) -> Callable[[Result], float]:
    return lambda r: r.kib_per_pod((name,))


def _over(base: float) -> Callable[[Result], float]:
    return lambda r: r.cpu_ms(r.bus_side()) / base


def rows(columns: list[list[Result]], references: list[list[Result]]) -> None:
    """The figures of each column (the runs of one setup at one size); `references` holds, per
    column, upstream KCM's runs on the same API server at the same limits (empty if none)."""

    def row(label: str, value: Callable[[Result], float]) -> None:
        line(label, [median(runs, value) for runs in columns])

    row("tight client pods/s", lambda r: r.client_rate)
    row("Deployment pods/s, to the last pod created", lambda r: r.created_rate)
    row("  ratio to the tight client (goal >= 0.8)", lambda r: r.created_rate / r.client_rate)
    row("Deployment pods/s, to status all available", lambda r: r.available_rate)
    # One controller's own process is summed with the others (embedded-split), not listed.
    names = [n for n in process_names(columns) if not n.startswith("kcm controller ")]
    print("CPU ms per pod, scale until idle")
    for name in names:
        row(f"  {name}", _cpu((name,)))
    row("  controller processes", lambda r: r.cpu_ms(r.controllers()))
    row("  bus side (controllers, watcher, NATS)", lambda r: r.cpu_ms(r.bus_side()))
    cells = []
    for runs, ref in zip(columns, references, strict=True):
        base = [b for b in map(_cpu((UPSTREAM_KCM,)), ref) if not math.isnan(b)]
        cells.append(median(runs, _over(statistics.median(base))) if base else "n/a")
    line("  bus side / upstream KCM's (goal <= 2)", cells)
    row("  all processes", lambda r: r.cpu_ms(tuple(r.usage.cpu)))
    print("RSS MiB after the scale")
    for name in names:
        if name != benchlib.THIS_PROCESS:
            row(f"  {name}", _rss_mib(name))
    row("  controller processes, summed", lambda r: r.rss_kib(r.controllers()) / 1024)
    row("  controller processes, the largest", _largest_controller_mib)
    row("  controller processes, how many", lambda r: len(r.controllers()) or math.nan)
    print("RSS KiB per pod (after the scale - before any pod) / N")
    row("  controller processes, summed", lambda r: r.kib_per_pod(r.controllers()))
    for name in (UPSTREAM_KCM, *BUS_SERVICES):
        row(f"  {name}", _kib_per_pod(name))
    row("CPU the hypervisor took, % of the machine", lambda r: r.usage.stolen_percent)
    row("load average (1 min) at the run's end", lambda r: r.load)


def reference_for(setup: Setup) -> str:
    if not setup.upstream_apiserver:
        return ""
    return "reference-default" if "--kube-api-qps" not in setup.args else "reference-lifted"


def report(
    by_setup: dict[str, list[Result]], by_scale: dict[int, list[Result]], args: argparse.Namespace
) -> None:
    print()
    print(f"Deployment 0 -> {args.pods:,}, {args.repeat} run(s) each: median (min-max)")
    names = list(by_setup)
    line("", [SETUPS[n].name for n in names])
    rows(
        [by_setup[n] for n in names],
        [by_setup.get(reference_for(SETUPS[n]), []) for n in names],
    )
    if by_scale:
        print()
        first = SETUPS[args.setups[0]]
        print(f"As the cluster grows: {first.label}, one Deployment 0 -> N")
        line("", [f"{n:,} pods" for n in by_scale])
        rows(list(by_scale.values()), [[] for _ in by_scale])
    print()
    print("Setups: " + "; ".join(f"{s.name} = {s.label}" for s in SETUPS.values() if s.name in args.setups))
    print(f"Lifted limits: {' '.join(LIFTED)}; {os.cpu_count()} CPU cores.")
    print("Bus side / upstream KCM's: on kube-apiserver only, against upstream KCM at the same limits.")


async def bench(args: argparse.Namespace) -> int:
    command = benchlib.kcm_command(args)
    began = time.perf_counter()
    print(
        f"pods={args.pods} scales={args.scales} setups={','.join(args.setups)} repeat={args.repeat} "
        f"cpus={os.cpu_count()} load={os.getloadavg()[0]:.1f}",
        flush=True,
    )
    by_setup: dict[str, list[Result]] = {name: [] for name in args.setups}
    by_scale: dict[int, list[Result]] = {n: [] for n in args.scales}
    with tempfile.TemporaryDirectory(prefix="kcm-bench-cost-") as tmp:
        for round_ in range(args.repeat):
            for name in args.setups:
                workdir = Path(tmp, f"{name}-{args.pods}-{round_}")
                os.mkdir(workdir)
                by_setup[name].append(await one_run(command, SETUPS[name], args.pods, args, workdir))
            for n in args.scales:
                workdir = Path(tmp, f"scale-{n}-{round_}")
                os.mkdir(workdir)
                by_scale[n].append(await one_run(command, SETUPS[args.setups[0]], n, args, workdir))
    report(by_setup, by_scale, args)
    print(f"The whole benchmark took {time.perf_counter() - began:.0f}s.")
    problems = [p for runs in (*by_setup.values(), *by_scale.values()) for r in runs for p in r.problems]
    return benchlib.exit_status(problems)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pods", type=int, default=200, help="the Deployment's replicas per setup (default 200)")
    p.add_argument(
        "--scales",
        default="",
        help="sizes to run the first setup at too, comma-separated (e.g. 1000,3000,10000,20000)",
    )
    p.add_argument(
        "--setups",
        # Not embedded-split by default: its 36 processes would double `make bench`'s start-ups.
        default=",".join(name for name in SETUPS if name != "embedded-split"),
        help=f"which setups, comma-separated, the first also for --scales ({','.join(SETUPS)})",
    )
    p.add_argument("--repeat", type=int, default=1, help="runs of every setup and size (default 1)")
    p.add_argument("--timeout", type=float, default=1200, help="give up on a phase after this many seconds")
    p.add_argument(
        "--no-client", action="store_true", help="skip the tight client (for size and memory runs)"
    )
    benchlib.add_kcm_argument(p)
    args = p.parse_args(argv)
    args.scales = [int(n) for n in args.scales.split(",") if n.strip()]
    args.setups = [s for s in args.setups.split(",") if s]
    if unknown := set(args.setups) - set(SETUPS):
        p.error(f"unknown setups: {', '.join(sorted(unknown))}")
    if not args.setups or args.repeat < 1 or args.pods < 1:
        p.error("at least one setup, one run and one pod")
    return args


def main() -> int:
    return benchlib.run(bench(parse_args()))


if __name__ == "__main__":
    sys.exit(main())
