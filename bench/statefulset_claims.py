"""Benchmark of pods with claims on the simulated CSI driver (issue 31); run by `make bench`.

A Parallel StatefulSet of N replicas with one claim each on the default class `standard`
(WaitForFirstConsumer, provisioner `csi.sim.kcm.dev`), beside the same StatefulSet without
claims, in the same run and on the same stack: pods Running per second, timed by a watch from
the StatefulSet's create to the last of its pods seen Running. With claims, each pod is
scheduled, its claim gets the selected node, the PV binder hands it to the driver, the
simulated external-provisioner makes its PV, the binder binds them, the scheduler binds the
pod and the kubelet starts it: the ratio says what volume binding costs.

The stack is `kcm dev` with kcm's controllers (`--stack kcm`, the default; its PV binder binds),
or `kcm dev --reference` (`--stack reference`: upstream kube-controller-manager's binder). Both
sets are deleted, with their claims, between rounds; the plain set runs first in each round.

Figures are printed, never enforced: the exit status is non-zero only when the stack does not
start, requests fail, or the pods are not Running in time.
"""

from __future__ import annotations

import argparse
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

PLAIN, CLAIMS = "bench-plain", "bench-claims"


def statefulset(replicas: int, *, claims: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "replicas": replicas,
        "serviceName": "web",
        "podManagementPolicy": "Parallel",
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]},
        },
    }
    if claims:
        spec["volumeClaimTemplates"] = [
            {
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            }
        ]
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web"}, "spec": spec}


async def run_set(session: aiohttp.ClientSession, url: str, ns: str, count: int, limit_s: float) -> float:
    """Seconds from the StatefulSet's create to its last pod seen Running; then deletes it all."""
    pods_url = f"{url}/api/v1/namespaces/{ns}/pods"
    sets_url = f"{url}/apis/apps/v1/namespaces/{ns}/statefulsets"
    running: dict[str, float] = {}

    def on_pod(obj: views.Object, now: float) -> None:
        if obj.status.phase == "Running":
            running.setdefault(obj.metadata.name, now)

    async with benchlib.watching(session, pods_url, views.EVENTS, on_pod) as task:
        start = time.perf_counter()
        await benchlib.call(session, "POST", sets_url, statefulset(count, claims=ns == CLAIMS))
        await benchlib.wait_until(
            lambda: len(running) >= count, task, limit_s, f"{count} pods Running in {ns}"
        )
    seconds = max(running.values()) - start
    await benchlib.call(session, "DELETE", f"{sets_url}/web")
    await benchlib.delete_collection(session, pods_url, limit_s)
    await benchlib.delete_collection(session, f"{url}/api/v1/namespaces/{ns}/persistentvolumeclaims", limit_s)
    return seconds


async def bench(args: argparse.Namespace) -> int:
    command = benchlib.kcm_command(args)
    n = args.replicas
    argv = ["--nodes", str(math.ceil(n / 100) + 1), "--pod-start-delay", "0", "--log-level", "warning"]
    argv += ["--reference"] if args.stack == "reference" else ["--kube-api-qps", "0"]
    rounds: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory(prefix="kcm-bench-claims-") as tmp:
        async with benchlib.kcm_dev(command, Path(tmp), argv) as dev, benchlib.client_session(8) as s:
            for ns in (PLAIN, CLAIMS):
                await benchlib.call(s, "POST", f"{dev.url}/api/v1/namespaces", {"metadata": {"name": ns}})
            for _ in range(args.rounds):
                plain = await run_set(s, dev.url, PLAIN, n, args.timeout)
                claims = await run_set(s, dev.url, CLAIMS, n, args.timeout)
                rounds.append((n / plain, n / claims))
    print(f"StatefulSet with claims ({args.stack} controllers): Parallel, {n} replicas, {args.rounds} rounds")
    for i, (plain_rate, claims_rate) in enumerate(rounds):
        print(
            f"  round {i + 1}: with one claim each {claims_rate:,.1f} pods Running/s, without claims "
            f"{plain_rate:,.1f} pods Running/s, ratio {benchlib.ratio(claims_rate, plain_rate)}"
        )
    print(f"  ratio, median of the rounds: {statistics.median(c / p for p, c in rounds):.2f}")
    return 0


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--replicas", type=int, default=50, help="each StatefulSet's replicas (issue 31 asks for 300)"
    )
    p.add_argument("--rounds", type=int, default=1, help="rounds, each running both sets")
    p.add_argument("--stack", choices=("reference", "kcm"), default="kcm", help="whose controllers run")
    p.add_argument("--timeout", type=float, default=300, help="give up on a phase after this many seconds")
    benchlib.add_kcm_argument(p)
    return p.parse_args()


if __name__ == "__main__":
    sys.exit(benchlib.run(bench(parse_args())))
