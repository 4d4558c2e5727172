"""Benchmark of the statefulset controller's pod creation rate (issue 16); run by `make bench`.

Runs `kcm dev --controllers statefulset` with the controllers' client rate limit lifted
(`--kube-api-qps 0`, as bench/job_pods.py) and the simulator starting bound pods at once, then:

1. Baseline, in another namespace: a tight client creating the same N pods the controller
   sends for a Parallel StatefulSet (names `<set>-<ordinal>`, the template's labels plus the
   pod-name, pod-index and controller-revision-hash labels, hostname and subdomain, a
   controlling owner reference to a StatefulSet that does not exist) on `CONCURRENCY`
   connections, timed by a watch from this process to the last pod seen, then deleted.
2. A StatefulSet with `podManagementPolicy: Parallel` and 0 replicas, scaled to N through the
   scale subresource: the same watch times from the scale write to the last of its N pods
   appearing (and to `status.readyReplicas` N, printed for scale). Besides the creates the
   controller records Events and writes the status, as upstream does. The reaction to the
   scale write (watcher, NATS, the controller's cache) is part of the figure; the rate from
   the first pod to the last, without it, is printed for scale.
3. The set's pods are deleted with it and the baseline runs again; a round's ratio divides by the
   mean of the baselines before and after it, which keeps the drift of a shared VM's CPU out of
   the ratio. Steps 2 and 3 repeat `--rounds` times (5) and the median ratio is the figure: one
   burst lasts about 0.15 s, so a single round moves by a tenth with the machine's other work.

Figures are printed, never enforced: the exit status is non-zero only when the stack does not
start, requests fail, or the pods do not appear in time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import benchlib
from benchlib import views

NAMESPACE = "bench"
RAW_NAMESPACE = "bench-raw"
SET = "web"
CONCURRENCY = 32


def template() -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": SET}},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]},
    }


def statefulset() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": SET},
        "spec": {
            "replicas": 0,
            "serviceName": SET,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": SET}},
            "template": template(),
        },
    }


RAW_OWNER = {
    "apiVersion": "apps/v1",
    "kind": "StatefulSet",
    "name": SET,
    "uid": "0b1c2d3e-4f50-4a61-8b72-9c8d7e6f5a4c",
    "controller": True,
    "blockOwnerDeletion": True,
}


def raw_pod(ordinal: int) -> dict[str, Any]:
    """What the controller sends for one ordinal."""
    name = f"{SET}-{ordinal}"
    labels = {
        "app": SET,
        "statefulset.kubernetes.io/pod-name": name,
        "apps.kubernetes.io/pod-index": str(ordinal),
        "controller-revision-hash": f"{SET}-5b8f7c9d6",
    }
    spec = {**template()["spec"], "hostname": name, "subdomain": SET}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "generateName": f"{SET}-",
            "labels": labels,
            "ownerReferences": [RAW_OWNER],
        },
        "spec": spec,
    }


async def baseline(session: aiohttp.ClientSession, url: str, count: int, limit_s: float) -> float:
    """Pods per second of the tight client, to the last pod its watch saw."""
    pods_url = f"{url}/api/v1/namespaces/{RAW_NAMESPACE}/pods"
    seen: dict[str, float] = {}
    todo = iter(range(count))

    async def worker() -> None:
        for ordinal in todo:
            await benchlib.call(session, "POST", pods_url, raw_pod(ordinal))

    async with benchlib.watching(session, pods_url, views.EVENTS, benchlib.first_seen(seen)) as task:
        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        await benchlib.wait_until(lambda: len(seen) >= count, task, limit_s, f"{count} baseline pods")
    rate = count / (max(seen.values()) - start)
    await benchlib.delete_collection(session, pods_url, limit_s)
    return rate


async def run_set(
    session: aiohttp.ClientSession, url: str, count: int, limit_s: float
) -> tuple[float, float, float]:
    """Seconds from the scale write to the first pod created, to the last, and to
    readyReplicas == count."""
    pods_url = f"{url}/api/v1/namespaces/{NAMESPACE}/pods"
    sets_url = f"{url}/apis/apps/v1/namespaces/{NAMESPACE}/statefulsets"
    created: dict[str, float] = {}
    ready: list[float] = []

    def on_set(obj: views.Object, now: float) -> None:
        if not ready and obj.status.readyReplicas == count:
            ready.append(now)

    await benchlib.call(session, "POST", sets_url, statefulset())
    # Scale only once the controller has synced the new set: its first sync (the first
    # revision, the status) is not pod creation, and it runs behind whatever the watcher and
    # the controller's caches still have to carry from the baseline's pods.
    deadline = time.monotonic() + limit_s
    while (
        json.loads(await benchlib.call(session, "GET", f"{sets_url}/{SET}"))
        .get("status", {})
        .get("observedGeneration")
        != 1
    ):
        if time.monotonic() > deadline:
            raise RuntimeError("the controller did not sync the new StatefulSet in time")
        await asyncio.sleep(0.05)
    async with (
        benchlib.watching(session, pods_url, views.EVENTS, benchlib.first_seen(created)) as pods,
        benchlib.watching(session, sets_url, views.EVENTS, on_set) as sets,
    ):
        start = time.perf_counter()
        await benchlib.call(
            session,
            "PATCH",
            f"{sets_url}/{SET}/scale",
            {"spec": {"replicas": count}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        deadline = time.monotonic() + limit_s
        while len(created) < count or not ready:
            if pods.done() or sets.done():
                raise RuntimeError("a watch ended during the scale-up")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(created)} of {count} pods in {limit_s:.0f}s, ready: {bool(ready)}")
            await asyncio.sleep(0.05)
    await benchlib.call(session, "DELETE", f"{sets_url}/{SET}")
    await benchlib.delete_collection(session, pods_url, limit_s)
    return min(created.values()) - start, max(created.values()) - start, ready[0] - start


async def bench(args: argparse.Namespace) -> int:
    command = benchlib.kcm_command(args)
    n = args.pods
    argv = [
        "--nodes",
        str(math.ceil(n / 100) + 1),
        "--controllers",
        "statefulset",
        "--kube-api-qps",
        "0",
        "--log-level",
        "warning",
    ]
    argv += ["--pod-start-delay", "0"]
    baselines: list[float] = []
    runs: list[tuple[float, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="kcm-bench-sts-") as tmp:
        async with (
            benchlib.kcm_dev(command, Path(tmp), argv) as dev,
            benchlib.client_session(CONCURRENCY + 4) as s,
        ):
            for ns in (NAMESPACE, RAW_NAMESPACE):
                await benchlib.call(s, "POST", f"{dev.url}/api/v1/namespaces", {"metadata": {"name": ns}})
            baselines.append(await baseline(s, dev.url, n, args.timeout))
            for _ in range(args.rounds):
                runs.append(await run_set(s, dev.url, n, args.timeout))
                baselines.append(await baseline(s, dev.url, n, args.timeout))
    print(f"statefulset controller pod creation: Parallel StatefulSet scaled 0 -> {n}, {args.rounds} rounds")
    rates = [n / created_s for _, created_s, _ in runs]
    rounds = benchlib.between_baselines(rates, baselines)
    ratios = [r for _, r in rounds]
    steady_ratios: list[float] = []
    for i, (first_s, created_s, ready_s) in enumerate(runs):
        rate, base = rates[i], rounds[i][0]
        # Without the reaction to the scale write (watcher -> NATS -> controller), for scale.
        if created_s > first_s:
            steady_ratios.append((n - 1) / (created_s - first_s) / base)
        print(
            f"  round {i + 1}: statefulset controller {rate:,.0f} pods/s ({n} pods in {created_s:.2f} s, the first "
            f"after {first_s:.3f} s; all ready after {ready_s:.2f} s), baseline before/after "
            f"{baselines[i]:,.0f}/{baselines[i + 1]:,.0f} pods/s (tight client, {CONCURRENCY} connections, the "
            f"same pods), ratio {benchlib.ratio(rate, base)}"
        )
    print(f"  ratio, median of the rounds: {statistics.median(ratios):.2f} (goal >= 0.8)")
    if steady_ratios:
        print(f"  for scale: first to last pod, median ratio {statistics.median(steady_ratios):.2f}")
    return 0


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pods", type=int, default=300, help="the set's replicas and the baseline's pods")
    p.add_argument("--timeout", type=float, default=300, help="give up on a phase after this many seconds")
    p.add_argument("--rounds", type=int, default=5, help="scale-ups run, each between two baselines")
    benchlib.add_kcm_argument(p)
    return p.parse_args()


if __name__ == "__main__":
    sys.exit(benchlib.run(bench(parse_args())))
