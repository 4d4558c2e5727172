"""Static PersistentVolume binding, kcm's binder beside upstream's (issue 31); run by `make bench`.

Each side on a fresh `kcm dev --apiserver=upstream --nodes 0` (etcd, kube-apiserver v1.32) with
the persistentvolume-binder and the PV/PVC protection controllers:
- kcm: `--replicas persistentvolume-binder=1`, the binder in a process of its own (the
  protection controllers share another);
- upstream (the baseline): `--reference`, kube-controller-manager running the same three.
Both with the client limits lifted (`--kube-api-qps`/`--kube-api-burst` `--qps`, 1000 by
default: at upstream's 20 each bind's four writes wait for the limiter). Then:
1. `--volumes` (2,000) CSI PersistentVolumes of 1Gi, class `bench`, created `--concurrency`
   (32) at a time; the binder makes each Available.
2. Once all are Available, as many claims of 1Gi in class `bench`, created the same way; the
   time from the first create to the last claim Bound (a list polled every half second) gives
   claims Bound per second, and the CPU time of the binder's process over the same span (from
   /proc: the whole kube-controller-manager upstream, the binder's own process in kcm, whose
   watcher's share is printed beside it) per bind.
Figures are printed, never enforced: the exit status is non-zero only when a stack does not
start or a wait runs out.

Run: `.venv/bin/python bench/pv_binding.py [--volumes 2000] [--concurrency 32] [--qps 1000]`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import benchlib
from kcm_shared.client.kubeclient import KubeClient, load_connection

UPSTREAM, KCM = "upstream", "kcm"
NAMESPACE = "bench"
CLASS = "bench"
POLL_S = 0.5


@dataclass
class Figures:
    seconds: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)


def volume(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"bench-{i}"},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": CLASS,
            "csi": {"driver": "csi.sim.kcm.dev", "volumeHandle": f"bench-{i}"},
        },
    }


def claim(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": f"bench-{i}"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": CLASS,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


async def create_all(client: KubeClient, path: str, docs: list[dict[str, Any]], concurrency: int) -> None:
    todo = iter(docs)

    async def worker() -> None:
        for doc in todo:
            await client.create(path, doc)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def count_phase(client: KubeClient, path: str, phase: str) -> int:
    items = (await client.get(path)).get("items", [])
    return sum(1 for item in items if item.get("status", {}).get("phase") == phase)


async def wait_phase(client: KubeClient, path: str, phase: str, count: int, limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while (seen := await count_phase(client, path, phase)) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{seen} of {count} {path} {phase} after {limit_s:.0f} s")
        await asyncio.sleep(POLL_S)


def processes(dev_pid: int, name: str) -> dict[str, int]:
    """The processes whose CPU is measured: the controller manager (kcm: the binder's own
    process, and the watcher beside it)."""
    found: dict[str, int] = {}
    for pid in benchlib.descendants(dev_pid):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [a.decode(errors="replace") for a in argv]
        if name == UPSTREAM and words[0].endswith("kube-controller-manager"):
            found["kube-controller-manager"] = pid
        elif name == KCM and "controller" in words and "persistentvolume-binder-controller" in words:
            found["kcm binder process"] = pid
        elif name == KCM and "watcher" in words:
            found["kcm watcher"] = pid
    return found


async def side(name: str, args: argparse.Namespace, command: list[str]) -> Figures:
    dev_args = ["--apiserver=upstream", "--nodes", "0", "--log-level", "warning"]
    dev_args += ["--controllers", "persistentvolume-binder,pv-protection,pvc-protection"]
    dev_args += [f"--kube-api-qps={args.qps:g}", f"--kube-api-burst={int(args.qps * 2)}"]
    dev_args += ["--replicas", "persistentvolume-binder=1"] if name == KCM else ["--reference"]
    figures = Figures()
    n = args.volumes
    with tempfile.TemporaryDirectory(prefix=f"bench-pv-{name}-") as tmp:
        async with benchlib.kcm_dev(command, Path(tmp), dev_args) as dev:
            client = KubeClient(load_connection(str(dev.state / "kubeconfig")), qps=0)
            try:
                await client.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
                await create_all(
                    client, "/api/v1/persistentvolumes", [volume(i) for i in range(n)], args.concurrency
                )
                await wait_phase(client, "/api/v1/persistentvolumes", "Available", n, args.timeout)
                watched = processes(dev.proc.pid, name)
                claims_path = f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims"
                usage = benchlib.Usage()
                with benchlib.measure(watched, usage):
                    began = time.perf_counter()
                    await create_all(client, claims_path, [claim(i) for i in range(n)], args.concurrency)
                    await wait_phase(client, claims_path, "Bound", n, args.timeout)
                    figures.seconds = time.perf_counter() - began
                figures.cpu = {k: v for k, v in usage.cpu.items() if k != benchlib.THIS_PROCESS}
            finally:
                await client.close()
    return figures


async def bench(args: argparse.Namespace) -> int:
    command = benchlib.kcm_command(args)
    results = {name: await side(name, args, command) for name in (UPSTREAM, KCM)}
    n = args.volumes
    print(
        f"static binding: {n} PersistentVolumes, then {n} claims created {args.concurrency} at a time, "
        f"on kube-apiserver (client limits {args.qps:g}/{int(args.qps * 2)})"
    )
    rates = {name: n / f.seconds for name, f in results.items()}
    print(f"{'side':<10} {'claims Bound/s':>15} {'seconds':>9}  CPU ms per bind")
    for name, f in results.items():
        cpu = ", ".join(f"{proc} {benchlib.fmt(s / n * 1e3, 2)}" for proc, s in sorted(f.cpu.items()))
        print(f"{name:<10} {benchlib.fmt(rates[name], 0):>15} {f.seconds:>9.1f}  {cpu}")
    print(f"ratio kcm/upstream, claims Bound per second: {benchlib.ratio(rates[KCM], rates[UPSTREAM])}")
    return 0


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--volumes", type=int, default=300, help="PersistentVolumes, and claims (issue 31: 2000)")
    p.add_argument("--concurrency", type=int, default=32, help="creates in flight")
    p.add_argument("--qps", type=float, default=1000.0, help="both sides' --kube-api-qps (burst twice that)")
    p.add_argument("--timeout", type=float, default=600.0, help="give up on a phase after this many seconds")
    benchlib.add_kcm_argument(p)
    return p.parse_args()


if __name__ == "__main__":
    sys.exit(benchlib.run(bench(parse_args())))
