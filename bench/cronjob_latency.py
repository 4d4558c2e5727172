"""Benchmark of CronJob start latency: how long after its scheduled minute each Job exists (issue 15).

Runs `kcm dev --nodes 0 --controllers cronjob` and creates CRONJOBS CronJobs scheduled
`* * * * *` in one namespace, then watches that namespace's Jobs for `--minutes` minute
boundaries. A Job's latency is the moment its ADDED event reaches this process minus the
scheduled time its `batch.kubernetes.io/cronjob-scheduled-timestamp` annotation names (the
Job's creationTimestamp has whole seconds only).

Twice, each on a fresh stack, one after the other: the controller as deployed (the replica
count of kcm_controllers/cronjob/deploy.yaml, each replica its own process, client and share
of the work partitions, as k8s/ and docker-compose run it) and as one replica (the shape of
stock kube-controller-manager), with the same per-process limits. The CronJobs each replica
owns (the runtime's key hash over the coordinator's partitions) are printed with it.

Baseline, measured in each run halfway between two boundaries: the same number of Jobs
created at once by this process, each timed from its create request to its ADDED event on
the same watch. That is the floor of the figure above (an API create plus the watch's
delivery), short of the 100 ms upstream waits past each schedule time on purpose
(nextScheduleDelta), which the controller keeps.

The controller runs with upstream's defaults unless told otherwise: 5 workers, and a client
limited to 20 requests/s (burst 30) for its creates, status writes and Events together, as
kube-controller-manager's `--kube-api-qps`/`--kube-api-burst`. With 50 CronJobs due in the
same second that limit, three requests per start, sets the pace: the Job creates are sent
at the client's HIGH priority (docs/runtime.md, "Client rate limit"), so the status writes
and Events wait, and replicas each have a bucket of their own; `--kube-api-qps 0` lifts it.

Printed: the deciles of each boundary, then per shape p50, p99 and max of both figures and
their ratio; the issue's goal is a p99 under 1 s as deployed.
Figures are printed, never enforced: the exit status is non-zero only when the stack does
not start, a request fails, or a scheduled minute passes without its Jobs.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import benchlib
from benchlib import views
from kcm_cli import manifests
from kcm_cli.controllers import BUILTIN
from kcm_coordinator import status
from kcm_shared.bus import subjects
from kcm_shared.runtime import controllerflags

NAMESPACE = "bench-cronjob"
CONTROLLER = "cronjob-controller"
CRONJOBS = 50
ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"
GRACE_S = 20.0  # after the last boundary, how long the Jobs of it may take before it counts as missed


def job_template() -> dict[str, Any]:
    return {
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
            }
        }
    }


class Observer:
    """Wall-clock arrival of each Job's ADDED event, by name, with its scheduled time."""

    def __init__(self) -> None:
        self.seen: dict[str, tuple[float, float | None]] = {}  # name -> (arrival, scheduled)
        self.ready = asyncio.Event()

    async def watch(self, session: aiohttp.ClientSession, url: str) -> None:
        params = {"watch": "1", "allowWatchBookmarks": "false"}
        async with session.get(f"{url}/apis/batch/v1/namespaces/{NAMESPACE}/jobs", params=params) as resp:
            self.ready.set()
            async for batch in benchlib.watch_lines(resp):
                now = time.time()
                for line in batch:
                    event = views.EVENTS.decode(line)
                    if event.type != "ADDED":
                        continue
                    meta = event.object.metadata
                    stamp = (meta.annotations or {}).get(ANNOTATION)
                    scheduled = dt.datetime.fromisoformat(stamp).timestamp() if stamp else None
                    self.seen.setdefault(meta.name, (now, scheduled))


def next_boundary(t: float) -> float:
    return (int(t) // 60 + 1) * 60.0


async def sleep_until(t: float) -> None:
    await asyncio.sleep(max(0.0, t - time.time()))


def report(label: str, values: list[float]) -> str:
    p = benchlib.percentile
    return (
        f"{label} p50 {benchlib.fmt(p(values, 50) * 1000, 0)} ms  p99 {benchlib.fmt(p(values, 99) * 1000, 0)} ms"
        f"  max {benchlib.fmt((values[-1] if values else float('nan')) * 1000, 0)} ms"
    )


async def baseline(
    session: aiohttp.ClientSession, url: str, obs: Observer, count: int, round_: int
) -> list[float]:
    """`count` Jobs created at once by this process: request sent to ADDED seen, seconds."""
    jobs_url = f"{url}/apis/batch/v1/namespaces/{NAMESPACE}/jobs"
    names = [f"baseline-{round_}-{i}" for i in range(count)]
    sent: dict[str, float] = {}

    async def create(name: str) -> None:
        body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, **job_template()}
        sent[name] = time.time()
        await benchlib.call(session, "POST", jobs_url, body)

    await asyncio.gather(*(create(n) for n in names))
    deadline = time.monotonic() + GRACE_S
    while not all(n in obs.seen for n in names):
        if time.monotonic() > deadline:
            raise RuntimeError("baseline Jobs never showed on the watch")
        await asyncio.sleep(0.05)
    return [obs.seen[n][0] - sent[n] for n in names]


@dataclass
class Run:
    """One stack's figures: Job start latencies and baseline latencies, seconds, ascending."""

    replicas: int
    latency: list[float] = field(default_factory=list)
    base: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def label(self, deployed: int) -> str:
        shape = f"{self.replicas} replica{'s' if self.replicas > 1 else ''}"
        if self.replicas == deployed:
            return f"as deployed ({shape})"
        return f"{shape}" + (" (stock kube-controller-manager's shape)" if self.replicas == 1 else "")


def deployed_replicas() -> int:
    """The cronjob controller's replica count in its deploy.yaml (what k8s/ and compose run)."""
    return manifests.load(controllerflags.select(BUILTIN, "cronjob")[0]).replicas


async def partitions_settled(dev: benchlib.Dev, replicas: int) -> dict[int, str]:
    """Partition -> holder once `replicas` replicas hold every partition, one holder each."""
    url = (dev.state / "coordinator.url").read_text().strip()
    deadline = time.monotonic() + 60
    while True:
        try:
            doc = await asyncio.to_thread(status.fetch, url, 2)
        except (OSError, ValueError):
            doc = {}
        info = doc.get("controllers", {}).get(CONTROLLER, {})
        holders = {int(p): h for p, h in (info.get("partitions") or {}).items()}
        if (
            holders
            and all(h and "," not in h for h in holders.values())
            and len(set(holders.values())) == replicas
        ):
            return holders
        if time.monotonic() > deadline:
            raise RuntimeError(f"{replicas} replicas never held the partitions between them: {info}")
        await asyncio.sleep(0.5)


async def measure(args: argparse.Namespace, replicas: int) -> Run:
    """A fresh stack whose cronjob controller runs as `replicas` processes, measured for
    `args.minutes` minute boundaries."""
    run = Run(replicas)
    with tempfile.TemporaryDirectory(prefix="kcm-bench-cronjob-") as tmp:
        dev_args = ["--nodes", "0", "--controllers", "cronjob", "--log-level", "warning"]
        dev_args += [
            f"--replicas=cronjob={replicas}",
            f"--concurrent-cron-job-syncs={args.concurrent_cron_job_syncs}",
            f"--kube-api-qps={args.kube_api_qps:g}",
            f"--kube-api-burst={args.kube_api_burst}",
        ]
        async with (
            benchlib.kcm_dev(benchlib.kcm_command(args), Path(tmp), dev_args) as dev,
            benchlib.client_session(args.cronjobs + 8) as session,
        ):
            holders = await partitions_settled(dev, replicas)
            names = [f"cj-{i}" for i in range(args.cronjobs)]
            # Which replica each CronJob's key goes to (the runtime's own hash), so a lopsided
            # split shows beside the figure it explains.
            share = Counter(holders[subjects.partition_of(f"{NAMESPACE}/{n}", len(holders))] for n in names)
            await benchlib.call(
                session,
                "POST",
                f"{dev.url}/api/v1/namespaces",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            )
            obs = Observer()
            watch = asyncio.create_task(obs.watch(session, dev.url))
            try:
                await asyncio.wait_for(obs.ready.wait(), 10)
                # At least 10 s before a boundary, so every CronJob exists before it.
                if next_boundary(time.time()) - time.time() < 10:
                    await sleep_until(next_boundary(time.time()) + 1)
                cronjobs_url = f"{dev.url}/apis/batch/v1/namespaces/{NAMESPACE}/cronjobs"
                await asyncio.gather(
                    *(
                        benchlib.call(
                            session,
                            "POST",
                            cronjobs_url,
                            {
                                "apiVersion": "batch/v1",
                                "kind": "CronJob",
                                "metadata": {"name": n},
                                "spec": {"schedule": "* * * * *", "jobTemplate": job_template()},
                            },
                        )
                        for n in names
                    )
                )
                first = next_boundary(time.time())
                boundaries = [first + 60 * k for k in range(args.minutes)]
                print(
                    f"{replicas} replica(s), {len(holders)} partitions, CronJobs per replica "
                    f"{' '.join(str(share[h]) for h in sorted(share))}; measuring {args.minutes} minute "
                    f"boundaries from {dt.datetime.fromtimestamp(first, dt.UTC):%H:%M} UTC",
                    flush=True,
                )
                for k, boundary in enumerate(boundaries):
                    await sleep_until(boundary + 30)  # halfway: the controller is quiet
                    run.base += await baseline(session, dev.url, obs, args.cronjobs, k)
                await sleep_until(boundaries[-1] + GRACE_S)
            finally:
                watch.cancel()
    for boundary in boundaries:
        starts = sorted(arrival - sched for arrival, sched in obs.seen.values() if sched == boundary)
        if len(starts) != args.cronjobs:
            run.problems.append(
                f"{replicas} replica(s): {len(starts)} of {args.cronjobs} Jobs for "
                f"{dt.datetime.fromtimestamp(boundary, dt.UTC):%H:%M} showed within {GRACE_S:.0f} s"
            )
        deciles = " ".join(benchlib.fmt(benchlib.percentile(starts, q) * 1000, 0) for q in range(10, 101, 10))
        print(f"  {dt.datetime.fromtimestamp(boundary, dt.UTC):%H:%M}: deciles (ms) {deciles}", flush=True)
        run.latency += starts
    run.latency.sort()
    run.base.sort()
    return run


async def bench(args: argparse.Namespace) -> int:
    deployed = deployed_replicas()
    print(
        f"{args.cronjobs} CronJobs `* * * * *`; the controller as deployed ({deployed} replicas, "
        f"from its deploy.yaml) and as one replica, each with {args.concurrent_cron_job_syncs} workers "
        f"and --kube-api-qps={args.kube_api_qps:g} --kube-api-burst={args.kube_api_burst} per replica"
    )
    runs = [await measure(args, n) for n in dict.fromkeys([deployed, 1])]
    p = benchlib.percentile
    for run in runs:
        print(f"{run.label(deployed)}:")
        print(report(f"  Job start latency ({len(run.latency)} Jobs):", run.latency))
        print(report(f"  baseline: create -> watch ({len(run.base)} Jobs):", run.base))
        print(
            f"  ratio p50 {benchlib.ratio(p(run.latency, 50), p(run.base, 50))}"
            f"  p99 {benchlib.ratio(p(run.latency, 99), p(run.base, 99))}"
        )
    print(f"(upstream adds {100} ms past each schedule time on purpose)")
    print("goal: start latency p99 < 1000 ms as deployed")
    return benchlib.exit_status([problem for run in runs for problem in run.problems])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    benchlib.add_kcm_argument(parser)
    parser.add_argument("--cronjobs", type=int, default=CRONJOBS, help="CronJobs scheduled every minute")
    parser.add_argument("--minutes", type=int, default=3, help="minute boundaries to measure")
    parser.add_argument(
        "--concurrent-cron-job-syncs",
        type=int,
        default=5,
        help="the controller's workers (upstream's default: 5)",
    )
    # Upstream's client-side limit: every create, status write and Event of the controller
    # shares it, so with many CronJobs due at once it, not the controller, sets the pace.
    parser.add_argument("--kube-api-qps", type=float, default=20.0, help="each replica's (0: no limit)")
    parser.add_argument("--kube-api-burst", type=int, default=30, help="each replica's")
    return benchlib.run(bench(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
