"""Benchmark of HPA reaction time: seconds from a metric change to the scale write (issue 16).

Runs `kcm dev --controllers horizontal-pod-autoscaler-controller,replicaset` with the given
sync period (upstream's 15 s by default) and one ReplicaSet of pods using 50Mi of memory
under an HPA with a memory AverageValue target of 100Mi (min 1, max 8). Each round sets every
pod's `sim.kcm.dev/memory-usage` to 200Mi (what metrics.k8s.io then reports) and times, from
the last of those patches, the ReplicaSet's `spec.replicas` change (read every 20 ms): the HPA
doubles it (1 -> 2 -> 4 -> 8). Each round starts at a random phase of the sync period, which
bounds the figure: the change is seen at the HPA's next sync, on average half a period later.

Baseline, measured in the same run: this process writing the ReplicaSet's `/scale` itself,
timed from its request until the same reads see it (the floor of any scale write).

Printed: each round's latency, their mean and max, the sync period, the baseline, and the
ratios latency/period and latency/baseline. Figures are printed, never enforced: the exit
status is non-zero only when the stack does not start, a call fails or a round never scales.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import benchlib

NAMESPACE = "bench-hpa"
MERGE = {"Content-Type": "application/merge-patch+json"}
ROUND_TIMEOUT = 120.0


async def get_json(session: aiohttp.ClientSession, url: str) -> Any:
    return json.loads(await benchlib.call(session, "GET", url))


async def wait_running(session: aiohttp.ClientSession, url: str, count: int) -> list[str]:
    """Names of the namespace's Running pods once there are `count`."""
    deadline = time.monotonic() + ROUND_TIMEOUT
    while time.monotonic() < deadline:
        pods = (await get_json(session, f"{url}/api/v1/namespaces/{NAMESPACE}/pods"))["items"]
        running = [p["metadata"]["name"] for p in pods if p.get("status", {}).get("phase") == "Running"]
        if len(running) == count:
            return running
        await asyncio.sleep(0.2)
    phases = [p.get("status", {}).get("phase") for p in pods]
    raise RuntimeError(f"{count} pods never ran: {phases}")


async def replicas_change(session: aiohttp.ClientSession, url: str, old: int) -> float:
    """perf_counter time at which the ReplicaSet's spec.replicas left `old` (polled every 20 ms)."""
    rs_url = f"{url}/apis/apps/v1/namespaces/{NAMESPACE}/replicasets/web"
    deadline = time.monotonic() + ROUND_TIMEOUT
    while time.monotonic() < deadline:
        if (await get_json(session, rs_url))["spec"]["replicas"] != old:
            return time.perf_counter()
        await asyncio.sleep(0.02)
    raise RuntimeError(f"the ReplicaSet never left {old} replicas")


async def bench(args: argparse.Namespace) -> int:
    command = benchlib.kcm_command(args)
    with tempfile.TemporaryDirectory(prefix="kcm-bench-hpa-") as tmp:
        dev_args = [
            "--controllers",
            "horizontal-pod-autoscaler-controller,replicaset",
            "--nodes",
            "2",
            "--log-level",
            "warning",
            f"--horizontal-pod-autoscaler-sync-period={args.sync_period:g}s",
        ]
        async with (
            benchlib.kcm_dev(command, Path(tmp), dev_args) as dev,
            benchlib.client_session(8) as session,
        ):
            url = dev.url
            await benchlib.call(
                session,
                "POST",
                f"{url}/api/v1/namespaces",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            )
            template = {
                "metadata": {"labels": {"app": "web"}, "annotations": {"sim.kcm.dev/memory-usage": "50Mi"}},
                "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "c", "image": "nginx"}]},
            }
            await benchlib.call(
                session,
                "POST",
                f"{url}/apis/apps/v1/namespaces/{NAMESPACE}/replicasets",
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "metadata": {"name": "web"},
                    "spec": {
                        "replicas": 1,
                        "selector": {"matchLabels": {"app": "web"}},
                        "template": template,
                    },
                },
            )
            await wait_running(session, url, 1)
            target = {"type": "AverageValue", "averageValue": "100Mi"}
            await benchlib.call(
                session,
                "POST",
                f"{url}/apis/autoscaling/v2/namespaces/{NAMESPACE}/horizontalpodautoscalers",
                {
                    "apiVersion": "autoscaling/v2",
                    "kind": "HorizontalPodAutoscaler",
                    "metadata": {"name": "web"},
                    "spec": {
                        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web"},
                        "minReplicas": 1,
                        "maxReplicas": 8,
                        "metrics": [{"type": "Resource", "resource": {"name": "memory", "target": target}}],
                    },
                },
            )
            await asyncio.sleep(1.0)  # its first sync sees usage below target
            latencies = []
            replicas = 1
            for _ in range(3):
                pods = await wait_running(session, url, replicas)
                # At a random phase of the sync period: the rounds would otherwise all start
                # right after a sync (the one that scaled), measuring a whole period each.
                await asyncio.sleep(random.uniform(0, args.sync_period))
                watcher = asyncio.create_task(replicas_change(session, url, replicas))
                for name in pods:
                    await benchlib.call(
                        session,
                        "PATCH",
                        f"{url}/api/v1/namespaces/{NAMESPACE}/pods/{name}",
                        {"metadata": {"annotations": {"sim.kcm.dev/memory-usage": "200Mi"}}},
                        headers=MERGE,
                    )
                changed_from = time.perf_counter()
                latencies.append(await watcher - changed_from)
                replicas *= 2
                print(f"  {replicas // 2} -> {replicas}: {latencies[-1]:.2f} s")
            # Baseline: our own scale write, timed to the same observation.
            base = []
            for replicas_now in (replicas, replicas - 1):
                await benchlib.call(
                    session,
                    "DELETE",
                    f"{url}/apis/autoscaling/v2/namespaces/{NAMESPACE}/horizontalpodautoscalers/web",
                    allowed=(404,),
                )
                watcher = asyncio.create_task(replicas_change(session, url, replicas_now))
                sent = time.perf_counter()
                await benchlib.call(
                    session,
                    "PATCH",
                    f"{url}/apis/apps/v1/namespaces/{NAMESPACE}/replicasets/web/scale",
                    {"spec": {"replicas": replicas_now - 1}},
                    headers=MERGE,
                )
                base.append(await watcher - sent)
            mean = sum(latencies) / len(latencies)
            base_mean = sum(base) / len(base)
            print(
                f"metric change -> scale write: mean {mean:.2f} s  max {max(latencies):.2f} s  "
                f"(sync period {args.sync_period:g} s; ratio mean/period {benchlib.ratio(mean, args.sync_period)})"
            )
            print(
                f"baseline: own scale write -> observed: mean {base_mean * 1000:.0f} ms  "
                f"ratio {benchlib.ratio(mean, base_mean)}"
            )
            return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    benchlib.add_kcm_argument(parser)
    parser.add_argument("--sync-period", type=float, default=15.0, help="seconds (upstream's default: 15)")
    return benchlib.run(bench(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
