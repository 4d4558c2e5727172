"""Benchmark of the job controller's pod creation rate (issue 15); run by `make bench`.

Runs `kcm dev --controllers job` with the controllers' client rate limit lifted
(`--kube-api-qps 0`, as bench/deployment.py's main figure) and the simulator starting bound
pods at once (`--pod-start-delay 0`; with kcm dev's default 0.5 s a Job whose pods must
finish before the next ones start is capped at parallelism / 0.5 s), then:

1. Baselines, in another namespace, with the pods the job controller sends (the template's
   labels, the simulator's exit-code 0 so they succeed at once, a generated name, a
   controlling owner reference to a Job that does not exist), timed by a watch from this
   process to the last pod seen, then deleted:
   - paced: a tight client running the same Job by hand, at most `PARALLELISM` pods not yet
     Succeeded, creating the next pod the moment its watch sees one succeed. It pays the
     simulator's pod cycle (bind, run, report) as the controller must; the issue's figure is
     the controller's rate divided by this one (goal >= 0.8).
   - unpaced: N pods created on `CONCURRENCY` connections as fast as the API server takes
     them, the ceiling of creation alone, printed for scale.
2. A Job with completions N and parallelism `PARALLELISM` whose pods succeed at once: the
   same watch times from the Job's creation to the last of its N pods appearing, and to its
   Complete condition. Besides the pod cycle the controller also writes each pod's
   uncounted/counted status and removes its tracking finalizer: that is what a Job costs.
3. The Job and its pods are deleted and the paced baseline runs again; a round's ratio divides
   the controller's rate by the mean of the baselines before and after it, which keeps the
   drift of a shared VM's CPU out of the ratio. Steps 2 and 3 repeat `--rounds` times (3) and
   the median ratio is the figure: single rounds moved by a tenth and more with the machine's
   other work, in both directions.
4. For scale, the paced client once more, now with the API work per pod the controller cannot
   leave out: its pods carry the tracking finalizer and it removes it from each pod that
   succeeded, with the controller's patch. That write and its watch events are about a fifth
   more work per pod for this stack, so this client's own ratio to the baseline is near the most
   a job controller can reach here; the controller's ratio to it shows the rest of its overhead.

5. Beside each rate, the machine's busy CPU time (every process: the stack, NATS and this
   client) per pod, over the same window as the rate, and the share of all cores it kept busy.
   Where both phases keep the machine about equally busy, the rate ratio follows the ratio of
   CPU per pod: what a Job's pod costs the whole stack beyond the baseline's shows there.

Figures are printed, never enforced: the exit status is non-zero only when the stack does
not start, requests fail, or the Job does not complete in time.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import benchlib
from benchlib import views

NAMESPACE = "bench"
RAW_NAMESPACE = "bench-raw"
JOB = "work"
PARALLELISM = 200
CONCURRENCY = 32
SIM = {"sim.kcm.dev/exit-code": "0"}


class _Window:
    """The machine's busy CPU time from `start()` to the moment the last of `count` pods is
    first seen (a watch callback calls `seen` with how many it saw so far)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self._start = (math.nan, math.nan)
        self._end: tuple[float, float] | None = None

    def start(self) -> float:
        """Start the window; returns its start on `time.perf_counter`'s clock, which the
        phase's rate is timed from too."""
        self._start = (benchlib.machine_cpu_seconds(), time.perf_counter())
        return self._start[1]

    def seen(self, how_many: int) -> None:
        if how_many >= self.count and self._end is None:
            self._end = (benchlib.machine_cpu_seconds(), time.perf_counter())

    def measured(self, rate: float) -> Measured:
        if self._end is None:
            return Measured(rate, math.nan, math.nan)
        cpu, wall = self._end[0] - self._start[0], self._end[1] - self._start[1]
        cores = os.cpu_count() or 1
        return Measured(rate, cpu / self.count * 1e3, cpu / (wall * cores) if wall > 0 else math.nan)


@dataclass
class Measured:
    """A phase's pods per second, the machine's busy CPU per pod (ms) over the same window,
    and the share of all cores that was busy then."""

    rate: float
    cpu_ms: float
    busy: float


def pod_spec() -> dict[str, Any]:
    return {"restartPolicy": "Never", "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]}


def job(completions: int, name: str = JOB) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completions": completions,
            "parallelism": PARALLELISM,
            "template": {"metadata": {"annotations": SIM}, "spec": pod_spec()},
        },
    }


TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
REMOVE_TRACKING = {"metadata": {"$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER]}}

RAW_OWNER = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "name": "raw",
    "uid": "0b1c2d3e-4f50-4a61-8b72-9c8d7e6f5a4b",
    "controller": True,
    "blockOwnerDeletion": True,
}


def raw_pod() -> dict[str, Any]:
    labels = {"batch.kubernetes.io/job-name": "raw", "job-name": "raw"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "raw-",
            "labels": labels,
            "annotations": SIM,
            "ownerReferences": [RAW_OWNER],
        },
        "spec": pod_spec(),
    }


async def baseline(session: aiohttp.ClientSession, url: str, count: int, limit_s: float) -> float:
    """Pods per second of the tight loop, to the last pod its watch saw."""
    pods_url = f"{url}/api/v1/namespaces/{RAW_NAMESPACE}/pods"
    seen: dict[str, float] = {}
    todo = iter(range(count))

    async def worker() -> None:
        for _ in todo:
            await benchlib.call(session, "POST", pods_url, raw_pod())

    async with benchlib.watching(session, pods_url, views.EVENTS, benchlib.first_seen(seen)) as task:
        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        await benchlib.wait_until(lambda: len(seen) >= count, task, limit_s, f"{count} baseline pods")
    rate = count / (max(seen.values()) - start)
    await benchlib.delete_collection(session, pods_url, limit_s)
    return rate


async def paced_baseline(
    session: aiohttp.ClientSession, url: str, count: int, limit_s: float, *, tracking: bool = False
) -> Measured:
    """Pods per second of a client doing the Job's work by hand: `PARALLELISM` pods at a time,
    each next one created when the watch sees one succeed. With `tracking`, the pods carry the
    tracking finalizer and the client removes it from each pod that succeeded, with the patch
    the job controller sends: the same API work per pod as the controller, less its status."""
    pods_url = f"{url}/api/v1/namespaces/{RAW_NAMESPACE}/pods"
    seen: dict[str, float] = {}
    done: set[str] = set()
    freed: asyncio.Queue[None] = asyncio.Queue()
    removals: set[asyncio.Task[bytes]] = set()
    note = benchlib.first_seen(seen)
    window = _Window(count)

    def on_pod(obj: views.Object, now: float) -> None:
        note(obj, now)
        window.seen(len(seen))
        if obj.status.phase == "Succeeded" and obj.metadata.name not in done:
            done.add(obj.metadata.name)
            freed.put_nowait(None)
            if tracking:
                removals.add(
                    asyncio.ensure_future(
                        benchlib.call(
                            session,
                            "PATCH",
                            f"{pods_url}/{obj.metadata.name}",
                            REMOVE_TRACKING,
                            headers={"Content-Type": "application/strategic-merge-patch+json"},
                        )
                    )
                )

    async def create() -> None:
        pod = raw_pod()
        if tracking:
            pod["metadata"]["finalizers"] = [TRACKING_FINALIZER]
        await benchlib.call(session, "POST", pods_url, pod)

    async with benchlib.watching(session, pods_url, views.EVENTS, on_pod) as task:
        start = window.start()
        deadline = time.monotonic() + limit_s
        first = min(PARALLELISM, count)
        sem = asyncio.Semaphore(CONCURRENCY)

        async def limited() -> None:
            async with sem:
                await create()

        in_flight = {asyncio.create_task(limited()) for _ in range(first)}
        for _ in range(count - first):
            await asyncio.wait_for(freed.get(), max(0.0, deadline - time.monotonic()))
            in_flight.add(asyncio.create_task(limited()))
            in_flight = {t for t in in_flight if not t.done() or t.result()}
        await asyncio.gather(*in_flight)
        await benchlib.wait_until(lambda: len(seen) >= count, task, limit_s, f"{count} paced baseline pods")
        rate = count / (max(seen.values()) - start)
        if tracking:
            # A pod keeps its finalizer until it succeeded and lost it; only then can it be deleted.
            await benchlib.wait_until(lambda: len(done) >= count, task, limit_s, f"{count} pods succeeded")
            await asyncio.gather(*removals)
    await benchlib.delete_collection(session, pods_url, limit_s)
    return window.measured(rate)


async def run_job(
    session: aiohttp.ClientSession, url: str, count: int, limit_s: float, name: str = JOB
) -> tuple[Measured, float]:
    """(the rate at which the Job's pods were created, to the last of them; seconds to its
    Complete condition)."""
    pods_url = f"{url}/api/v1/namespaces/{NAMESPACE}/pods"
    jobs_url = f"{url}/apis/batch/v1/namespaces/{NAMESPACE}/jobs"
    created: dict[str, float] = {}
    complete: list[float] = []
    note = benchlib.first_seen(created)
    window = _Window(count)

    def on_pod(obj: views.Object, now: float) -> None:
        note(obj, now)
        window.seen(len(created))

    def on_job(obj: views.Object, now: float) -> None:
        if not complete and any(c.type == "Complete" and c.status == "True" for c in obj.status.conditions):
            complete.append(now)

    async with (
        benchlib.watching(session, pods_url, views.EVENTS, on_pod) as pods,
        benchlib.watching(session, jobs_url, views.EVENTS, on_job) as jobs,
    ):
        start = window.start()
        await benchlib.call(session, "POST", jobs_url, job(count, name))
        deadline = time.monotonic() + limit_s
        while not complete:
            if pods.done() or jobs.done():
                raise RuntimeError("a watch ended during the Job")
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the Job did not complete in {limit_s:.0f}s ({len(created)} pods created)"
                )
            await asyncio.sleep(0.1)
    if len(created) != count:
        print(f"note: {len(created)} pods were created for {count} completions", file=sys.stderr)
    return window.measured(count / (max(created.values()) - start)), complete[0] - start


async def bench(args: argparse.Namespace) -> int:
    command = benchlib.kcm_command(args)
    n = args.pods
    nodes = max(3, math.ceil(PARALLELISM / 100) + 1)
    argv = ["--nodes", str(nodes), "--controllers", "job", "--kube-api-qps", "0", "--log-level", "warning"]
    argv += ["--pod-start-delay", str(args.pod_start_delay)]
    with tempfile.TemporaryDirectory(prefix="kcm-bench-job-") as tmp:
        async with (
            benchlib.kcm_dev(command, Path(tmp), argv) as dev,
            benchlib.client_session(CONCURRENCY + 4) as s,
        ):
            for ns in (NAMESPACE, RAW_NAMESPACE):
                await benchlib.call(s, "POST", f"{dev.url}/api/v1/namespaces", {"metadata": {"name": ns}})
            unpaced = await baseline(s, dev.url, n, args.timeout)
            baselines = [await paced_baseline(s, dev.url, n, args.timeout)]
            rounds: list[tuple[Measured, float]] = []
            for i in range(args.rounds):
                rounds.append(await run_job(s, dev.url, n, args.timeout, f"{JOB}-{i}"))
                # The Job goes first (its pods' finalizers are off), then its pods, at once.
                await benchlib.call(
                    s, "DELETE", f"{dev.url}/apis/batch/v1/namespaces/{NAMESPACE}/jobs/{JOB}-{i}"
                )
                await benchlib.delete_collection(
                    s, f"{dev.url}/api/v1/namespaces/{NAMESPACE}/pods", args.timeout
                )
                baselines.append(await paced_baseline(s, dev.url, n, args.timeout))
            same_work = await paced_baseline(s, dev.url, n, args.timeout, tracking=True)
    print(
        f"job controller pod creation: Job with completions {n}, parallelism {PARALLELISM}, pods succeed "
        f"at once (simulator pod start delay {args.pod_start_delay:g} s), {args.rounds} rounds; machine CPU "
        f"is the busy time of all {os.cpu_count()} cores per pod, every process included"
    )
    rates = [job.rate for job, _ in rounds]
    ratios = [r for _, r in benchlib.between_baselines(rates, [b.rate for b in baselines])]
    for i, (job, complete_s) in enumerate(rounds):
        before, after = baselines[i], baselines[i + 1]
        base_cpu = statistics.mean([before.cpu_ms, after.cpu_ms])
        print(
            f"  round {i + 1}: job controller {job.rate:,.0f} pods/s ({n / job.rate:.1f} s to the last pod; "
            f"Complete after {complete_s:.1f} s), baseline before/after {before.rate:,.0f}/{after.rate:,.0f} "
            f"pods/s (tight client keeping {PARALLELISM} pods running), ratio {ratios[i]:.2f}; machine CPU "
            f"{_cpu(job)} per pod against the baselines' {_cpu(before)}/{_cpu(after)}, "
            f"CPU ratio {benchlib.ratio(base_cpu, job.cpu_ms)}"
        )
    print(f"  ratio, median of the rounds: {statistics.median(ratios):.2f} (goal >= 0.8)")
    rate = statistics.median(rates)
    print(
        f"  for scale: creation alone ({CONCURRENCY} connections, no pod waited for): {unpaced:,.0f} pods/s, "
        f"ratio {benchlib.ratio(rate, unpaced)} (median controller rate)"
    )
    last = baselines[-2:]
    paced = statistics.mean([b.rate for b in last])
    print(
        f"  for scale: a tight client doing the same API work per pod (the pods with the tracking finalizer, "
        f"removed when each succeeds): {same_work.rate:,.0f} pods/s, ratio {benchlib.ratio(rate, same_work.rate)}; "
        f"its own ratio to the last baselines {benchlib.ratio(same_work.rate, paced)}, machine CPU "
        f"{_cpu(same_work)} per pod, CPU ratio {benchlib.ratio(statistics.mean([b.cpu_ms for b in last]), same_work.cpu_ms)}"
    )
    return 0


def _cpu(m: Measured) -> str:
    """Machine CPU per pod and how busy the cores were, e.g. `4.1 ms (83% busy)`."""
    return f"{benchlib.fmt(m.cpu_ms, 2)} ms ({benchlib.fmt(m.busy * 100, 0)}% busy)"


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pods", type=int, default=2000, help="the Job's completions and the baseline's pods")
    p.add_argument("--timeout", type=float, default=600, help="give up on a phase after this many seconds")
    p.add_argument("--rounds", type=int, default=3, help="Jobs run, each between two baselines")
    p.add_argument(
        "--pod-start-delay",
        type=float,
        default=0.0,
        help="the simulator's delay before a bound pod runs (kcm dev's default 0.5 s alone caps a "
        "200-pod-parallel Job at 400 pods/s)",
    )
    benchlib.add_kcm_argument(p)
    return p.parse_args()


if __name__ == "__main__":
    sys.exit(benchlib.run(bench(parse_args())))
