"""How long a dead node's pods take to run Ready elsewhere, beside upstream (issue 30); run by
`make bench`.

Each side on a fresh `kcm dev --apiserver=upstream --nodes 5 --zones 1` (etcd, kube-apiserver
v1.32 and the simulator, heartbeating every `--heartbeat-interval` s), every controller on:
kcm's in one `kcm controllers` process, upstream's as kube-controller-manager (`--reference`);
both with `--node-monitor-grace-period` `--grace` and `--node-monitor-period` `--monitor-period`.
Each of `--rounds` rounds:
- a Deployment of `--replicas` pods (2 a node: the simulator's scheduler takes the least loaded)
  tolerating `node.kubernetes.io/unreachable` and `not-ready` NoExecute for 0 s is created and
  waited for, all nodes Ready and untainted;
- the heartbeats of the node holding most of its pods stop (the simulator's control port);
- watches of the nodes, the pods and the Deployment note the wall-clock time of each step: the
  node's Ready `Unknown`, its NoExecute taint, every pod of it deleting, the replacements Running
  and Ready on the other nodes, the Deployment's `availableReplicas` back at `--replicas`;
- each is counted from the node's last heartbeat, its Lease's last `renewTime`;
- then the heartbeats resume and the Deployment is deleted; the next round waits for its pods
  to go and the node to be Ready and untainted again.
The medians are printed beside the floor no controller can beat (`--grace` + `--monitor-period`
+ the simulator's `--pod-start-delay`) and the controllers' share (median minus floor), with
kcm's over upstream's. Figures are printed, never enforced: the exit status is non-zero only when
a stack does not start or a wait runs out.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import benchlib
from kcm_cli import dev as kcm_dev_cli
from kcm_cli import upstream
from kcm_shared.client.kubeclient import KubeClient, load_connection
from kcm_simulator import control

Obj = dict[str, Any]

UPSTREAM, KCM = "upstream", "kcm"
UNREACHABLE, NOT_READY = "node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"
NS, NAME = "failover", "web"
LABELS = {"app": NAME}
# The steps of a failover, in order, with what the table calls them.
STEPS = {
    "unknown": "node Ready Unknown",
    "tainted": "NoExecute taint on it",
    "evicted": "its pods deleting",
    "ready": "replacements Running, Ready",
    "available": "availableReplicas back",
}


# -- one round's steps, from watch events (pure) ---------------------------------------------------


def _ready_status(obj: Obj) -> str | None:
    for condition in obj.get("status", {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return str(condition.get("status"))
    return None


def no_execute_tainted(node: Obj) -> bool:
    """Whether the node carries the unreachable or not-ready NoExecute taint."""
    return any(
        t.get("key") in (UNREACHABLE, NOT_READY) and t.get("effect") == "NoExecute"
        for t in node.get("spec", {}).get("taints") or []
    )


def ready_untainted(node: Obj) -> bool:
    return _ready_status(node) == "True" and not node.get("spec", {}).get("taints")


@dataclass
class _Pod:
    node: str
    deleting: bool
    running_ready: bool


def _pod(obj: Obj) -> _Pod:
    return _Pod(
        node=obj.get("spec", {}).get("nodeName") or "",
        deleting=bool(obj.get("metadata", {}).get("deletionTimestamp")),
        running_ready=obj.get("status", {}).get("phase") == "Running" and _ready_status(obj) == "True",
    )


@dataclass
class Round:
    """When each step of one failover was first seen (wall-clock seconds), fed watch events of
    the nodes, the Deployment's pods and the Deployment."""

    victim: str
    replicas: int
    victim_pods: frozenset[str]
    seen: dict[str, float] = field(default_factory=dict)
    pods: dict[str, _Pod] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)  # pods seen DELETED
    # availableReplicas must fall below `replicas` before its coming back counts.
    dropped: bool = False

    def _note(self, step: str, now: float) -> None:
        self.seen.setdefault(step, now)

    def node(self, obj: Obj, now: float) -> None:
        if obj.get("metadata", {}).get("name") != self.victim:
            return
        if _ready_status(obj) == "Unknown":
            self._note("unknown", now)
        if no_execute_tainted(obj):
            self._note("tainted", now)

    def pod(self, kind: str, obj: Obj, now: float) -> None:
        name = obj.get("metadata", {}).get("name", "")
        if kind == "DELETED":
            self.pods.pop(name, None)
            self.gone.add(name)
        else:
            self.pods[name] = _pod(obj)
        # A victim's pod not seen yet (the watch's list still feeding) is not gone.
        if all(p in self.gone or (p in self.pods and self.pods[p].deleting) for p in self.victim_pods):
            self._note("evicted", now)
        elsewhere = sum(
            1 for p in self.pods.values() if p.node != self.victim and not p.deleting and p.running_ready
        )
        if elsewhere >= self.replicas:
            self._note("ready", now)

    def deployment(self, obj: Obj, now: float) -> None:
        available = int(obj.get("status", {}).get("availableReplicas") or 0)
        if available < self.replicas:
            self.dropped = True
        elif self.dropped:
            self._note("available", now)

    def done(self) -> bool:
        return all(step in self.seen for step in STEPS)

    def since(self, last_heartbeat: float) -> dict[str, float]:
        """Each step's seconds after the last heartbeat."""
        return {step: self.seen[step] - last_heartbeat for step in STEPS if step in self.seen}


def victim_of(pods: list[Obj]) -> str:
    """The node holding most of these pods (the first by name among equals)."""
    counts: dict[str, int] = {}
    for pod in pods:
        node = pod.get("spec", {}).get("nodeName") or ""
        if node:
            counts[node] = counts.get(node, 0) + 1
    if not counts:
        raise RuntimeError("no pod of the Deployment is bound to a node")
    return min(counts, key=lambda n: (-counts[n], n))


def micro_time(text: str) -> float:
    """A metav1.MicroTime (or Time) as seconds since the epoch."""
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def medians(rounds: list[dict[str, float]]) -> dict[str, float]:
    """Per step, the median over the rounds that reached it (NaN where none did)."""
    out = {}
    for step in STEPS:
        values = [r[step] for r in rounds if step in r]
        out[step] = statistics.median(values) if values else math.nan
    return out


def floor_s(grace: float, monitor_period: float, pod_start_delay: float) -> float:
    """What no controller beats: the grace period, the wait for the monitor pass after it (at
    most a period), the simulator's delay before a pod runs."""
    return grace + monitor_period + pod_start_delay


# -- the stacks ------------------------------------------------------------------------------------


def deployment(replicas: int) -> Obj:
    tolerations = [
        {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0}
        for key in (NOT_READY, UNREACHABLE)
    ]
    pod_spec = {
        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}],
        "tolerations": tolerations,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": NAME},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": LABELS},
            "template": {"metadata": {"labels": LABELS}, "spec": pod_spec},
        },
    }


PODS = f"/api/v1/namespaces/{NS}/pods"
DEPLOYMENTS = f"/apis/apps/v1/namespaces/{NS}/deployments"


async def _wait(what: str, limit_s: float, check: Callable[[], Awaitable[bool]]) -> None:
    deadline = time.monotonic() + limit_s
    while not await check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)


async def _follow(
    client: KubeClient, path: str, params: dict[str, str], seen: Callable[[str, Obj], None]
) -> None:
    """Feed `seen(type, object)` every object of `path` (as ADDED), then every event from there
    on, resuming the watch when the server ends it; runs until cancelled."""
    listed = await client.get(path, params)
    for obj in listed["items"]:
        seen("ADDED", obj)
    rv = listed["metadata"]["resourceVersion"]
    while True:
        async for event in client.watch(
            path, {**params, "resourceVersion": rv, "allowWatchBookmarks": "true"}
        ):
            obj = event.get("object") or {}
            rv = obj.get("metadata", {}).get("resourceVersion") or rv
            if event.get("type") != "BOOKMARK":
                seen(str(event.get("type")), obj)


async def _all_nodes_ready(client: KubeClient, nodes: int) -> bool:
    items = (await client.get("/api/v1/nodes"))["items"]
    return len(items) == nodes and all(ready_untainted(n) for n in items)


async def _pods(client: KubeClient) -> list[Obj]:
    return list((await client.get(PODS, {"labelSelector": "app=" + NAME}))["items"])


async def one_round(client: KubeClient, state: Path, args: argparse.Namespace) -> dict[str, float]:
    await _wait("every node Ready and untainted", args.limit, lambda: _all_nodes_ready(client, args.nodes))
    await client.create(DEPLOYMENTS, deployment(args.replicas))

    async def available() -> bool:
        status = (await client.get(f"{DEPLOYMENTS}/{NAME}")).get("status", {})
        return bool(status.get("availableReplicas") == args.replicas)

    await _wait(f"{args.replicas} available replicas", args.limit, available)
    pods = await _pods(client)
    victim = victim_of(pods)
    names = frozenset(p["metadata"]["name"] for p in pods if p["spec"].get("nodeName") == victim)
    track = Round(victim, args.replicas, names)
    watches = [
        asyncio.create_task(_follow(client, "/api/v1/nodes", {}, lambda _k, o: track.node(o, time.time()))),
        asyncio.create_task(
            _follow(client, PODS, {"labelSelector": "app=" + NAME}, lambda k, o: track.pod(k, o, time.time()))
        ),
        asyncio.create_task(_follow(client, DEPLOYMENTS, {}, lambda _k, o: track.deployment(o, time.time()))),
    ]
    port_file = state / kcm_dev_cli.SIM_CONTROL_FILE
    try:
        await asyncio.sleep(0.5)  # the watches are open
        stopped = time.time()
        control.call(port_file, "POST", f"{control.node_path(victim)}/stop-heartbeat")

        async def done() -> bool:
            if failed := [w for w in watches if w.done()]:
                raise RuntimeError(f"a watch ended: {failed[0].exception()!r}")
            return track.done()

        try:
            await _wait(f"the failover of {victim}", args.limit, done)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}; steps seen: {sorted(track.seen)}") from None
        # Read before the heartbeats resume: the Lease's renewTime is the last heartbeat's.
        lease = await client.get(f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{victim}")
    finally:
        for w in watches:
            w.cancel()
        for w in watches:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await w
        control.call(port_file, "POST", f"{control.node_path(victim)}/resume-heartbeat")
    last = micro_time(lease["spec"]["renewTime"])
    figures = track.since(last)
    steps = " ".join(f"{step} {figures[step]:.2f}" for step in STEPS)
    print(
        f"  {victim} ({len(names)} pods) stopped {stopped - last:.2f} s after its last heartbeat: {steps}",
        flush=True,
    )
    await client.delete(f"{DEPLOYMENTS}/{NAME}", {"propagationPolicy": "Background"})

    async def gone() -> bool:
        # Its ReplicaSet too: the next round's Deployment makes one of the same name.
        sets = await client.get(f"/apis/apps/v1/namespaces/{NS}/replicasets")
        return not sets["items"] and not await _pods(client)

    await _wait("the Deployment's ReplicaSet and pods gone", args.limit, gone)
    return figures


async def side(name: str, args: argparse.Namespace, command: list[str]) -> list[dict[str, float]]:
    dev_args = ["--apiserver=upstream", "--nodes", str(args.nodes), "--zones", "1", "--log-level", "warning"]
    dev_args += ["--heartbeat-interval", str(args.heartbeat_interval)]
    dev_args += ["--pod-start-delay", str(args.pod_start_delay)]
    dev_args += [
        f"--node-monitor-grace-period={args.grace:g}s",
        f"--node-monitor-period={args.monitor_period:g}s",
    ]
    dev_args += ["--reference"] if name == UPSTREAM else []
    rounds = []
    with tempfile.TemporaryDirectory(prefix=f"bench-failover-{name}-") as tmp:
        async with benchlib.kcm_dev(command, Path(tmp), dev_args) as dev:
            client = KubeClient(load_connection(str(dev.state / "kubeconfig")), qps=0)
            try:
                await client.create(
                    "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
                )

                async def account() -> bool:
                    # kube-apiserver's ServiceAccount admission refuses pods until it exists.
                    found = await client.get(f"/api/v1/namespaces/{NS}/serviceaccounts")
                    return any(a["metadata"]["name"] == "default" for a in found["items"])

                await _wait("the namespace's default ServiceAccount", args.limit, account)
                for _ in range(args.rounds):
                    rounds.append(await one_round(client, dev.state, args))
            finally:
                await client.close()
    return rounds


def table(results: dict[str, list[dict[str, float]]], floor: float) -> list[str]:
    """The medians per side and step, the floor, the controllers' share, kcm over upstream."""
    sides = list(results)
    meds = {s: medians(r) for s, r in results.items()}
    head = f"{'s after the last heartbeat':34}" + "".join(f"{s:>10}" for s in sides)
    both = UPSTREAM in meds and KCM in meds
    lines = [head + (f"{'kcm/upstream':>14}" if both else "")]

    def row(label: str, values: dict[str, float]) -> str:
        line = f"{label:34}" + "".join(f"{benchlib.fmt(values[s], 2):>10}" for s in sides)
        return line + (f"{benchlib.ratio(values[KCM], values[UPSTREAM]):>14}" if both else "")

    for step, label in STEPS.items():
        lines.append(row(label, {s: meds[s][step] for s in sides}))
    lines.append(row("floor", dict.fromkeys(sides, floor)))
    for step in ("ready", "available"):
        lines.append(row(f"controllers' share ({step})", {s: meds[s][step] - floor for s in sides}))
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=None, help="failovers per side (default 5; --quick: 2)")
    p.add_argument(
        "--quick", action="store_true", help="a fast smoke run: 2 rounds unless --rounds says otherwise"
    )
    p.add_argument("--nodes", type=int, default=5)
    p.add_argument("--replicas", type=int, default=10)
    p.add_argument("--grace", type=float, default=10.0, help="--node-monitor-grace-period on both sides, s")
    p.add_argument(
        "--monitor-period",
        type=float,
        default=1.0,
        help="--node-monitor-period on both sides, s (upstream's 5 s would add up to 5 s of chance to each round)",
    )
    p.add_argument(
        "--heartbeat-interval", type=float, default=2.0, help="the simulator's, s (within the grace)"
    )
    p.add_argument("--pod-start-delay", type=float, default=0.5, help="the simulator's, s")
    p.add_argument("--limit", type=float, default=180.0, help="seconds any wait may take")
    p.add_argument("--sides", default=f"{UPSTREAM},{KCM}")
    benchlib.add_kcm_argument(p)
    args = p.parse_args()
    if args.rounds is None:
        args.rounds = 2 if args.quick else 5
    upstream.binaries()  # one clear line when `make upstream` has not run
    return benchlib.run(bench(args, benchlib.kcm_command(args)))


async def bench(args: argparse.Namespace, command: list[str]) -> int:
    results: dict[str, list[dict[str, float]]] = {}
    for name in args.sides.split(","):
        load = os.getloadavg()[0]
        what = f"{args.rounds} failovers of {args.replicas} replicas on {args.nodes} nodes"
        print(f"== {name}: {what} (load average {load:.1f})", flush=True)
        results[name] = await side(name, args, command)
    floor = floor_s(args.grace, args.monitor_period, args.pod_start_delay)
    print()
    print(
        f"medians of {args.rounds} rounds; floor = grace {args.grace:g} s + monitor period "
        f"{args.monitor_period:g} s + pod start delay {args.pod_start_delay:g} s; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    for line in table(results, floor):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
