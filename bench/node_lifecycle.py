"""The node lifecycle controller at 1,000 simulated nodes, beside upstream's (issue 30); run by
`make bench`.

Each side on a fresh `kcm dev --apiserver=upstream --nodes N` (etcd, kube-apiserver v1.32 and
the simulator, its nodes heartbeating every `--heartbeat-interval` s):
- kcm: `--controllers nodelifecycle --replicas nodelifecycle=1`, the controller in a process of
  its own (its cache ingest of every node and Lease update counts, as upstream's informers do);
- upstream: `--reference --controllers nodelifecycle`, kube-controller-manager running only its
  node lifecycle controller.
Both run with `--node-monitor-grace-period` `--grace` (120 s: a simulator heartbeating 1,000
nodes on a busy machine lags past upstream's 50 s). Once every node is Ready and untainted, and
after a warm-up, the controller process's CPU time
is read from /proc over `--window` s: CPU per monitor pass (`--node-monitor-period`, 5 s, as
upstream's default; for kcm the passes are counted from its
`node_collector_update_all_nodes_health_duration_seconds_count`, for upstream the window over the
period) and per node and pass. Then (unless `--zone-nodes 0`) the heartbeats of one zone's nodes
(`--zone-nodes`, by default all 200 of zone-a: the simulator spreads the nodes over `--zones`)
stop, and the NoExecute unreachable taints are counted as they appear over `--taint-window` s:
the tainting rate beside `--node-eviction-rate` (the zone is fully disrupted while the others
are not: upstream's rule keeps the normal rate there; one taint at once, then one per 1/rate s).
Figures are printed, never enforced: the exit status is non-zero only when a stack does not
start or a wait runs out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import benchlib
from kcm_cli import dev as kcm_dev_cli
from kcm_cli import upstream
from kcm_shared.client.kubeclient import KubeClient, load_connection
from kcm_simulator import control

UPSTREAM, KCM = "upstream", "kcm"
PASSES = "node_collector_update_all_nodes_health_duration_seconds_count"
UNREACHABLE = "node.kubernetes.io/unreachable"


@dataclass
class Figures:
    cpu_s: float = 0.0
    window_s: float = 0.0
    passes: float = 0.0
    taint_rate: float | None = None  # NoExecute taints per second in the failed zone
    tainted: int = 0


def _descendant(dev_pid: int, word: bytes) -> int:
    for pid in benchlib.descendants(dev_pid):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(word in a for a in argv[:3]):
            return pid
    raise RuntimeError(f"no {word.decode()} process under kcm dev")


def _kcm_passes(state: Path) -> float:
    """The kcm controller's monitor passes so far, from its /metrics (found through the coordinator)."""
    url = (state / "coordinator.url").read_text().strip()
    with urllib.request.urlopen(url + "/status", timeout=5) as resp:
        members = json.load(resp).get("members", [])
    for member in members:
        if "node-lifecycle-controller" in member.get("controllers", []):
            with urllib.request.urlopen(member["ops_url"] + "/metrics", timeout=5) as resp:
                for line in resp.read().decode().splitlines():
                    if line.startswith(PASSES + " "):
                        return float(line.split()[1])
    return 0.0


async def _nodes(client: KubeClient) -> list[dict[str, Any]]:
    return list((await client.get("/api/v1/nodes")).get("items", []))


def _ready_untainted(node: dict[str, Any]) -> bool:
    conditions = {c["type"]: c["status"] for c in node.get("status", {}).get("conditions", [])}
    return conditions.get("Ready") == "True" and not node.get("spec", {}).get("taints")


async def _wait(what: str, limit_s: float, check: Any) -> None:
    deadline = time.monotonic() + limit_s
    while not await check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(1.0)


async def side(name: str, args: argparse.Namespace, command: list[str]) -> Figures:
    dev_args = ["--apiserver=upstream", "--nodes", str(args.nodes), "--log-level", "warning"]
    dev_args += ["--heartbeat-interval", str(args.heartbeat_interval), "--zones", str(args.zones)]
    dev_args += ["--controllers", "nodelifecycle"]
    dev_args += ["--replicas", "nodelifecycle=1"] if name == KCM else ["--reference"]
    dev_args += [
        f"--node-eviction-rate={args.node_eviction_rate}",
        f"--node-monitor-grace-period={args.grace:g}s",
    ]
    figures = Figures()
    with tempfile.TemporaryDirectory(prefix=f"bench-nlc-{name}-") as tmp:
        async with benchlib.kcm_dev(command, Path(tmp), dev_args) as dev:
            client = KubeClient(load_connection(str(dev.state / "kubeconfig")), qps=0)
            try:
                pid = _descendant(
                    dev.proc.pid, b"kube-controller-manager" if name == UPSTREAM else b"controller"
                )

                async def all_ready() -> bool:
                    nodes = await _nodes(client)
                    return len(nodes) == args.nodes and all(_ready_untainted(n) for n in nodes)

                await _wait(f"{args.nodes} nodes Ready and untainted ({name})", args.limit, all_ready)
                await asyncio.sleep(args.warmup)
                passes0 = _kcm_passes(dev.state) if name == KCM else 0.0
                cpu0, t0 = benchlib.process_cpu_seconds(pid), time.monotonic()
                await asyncio.sleep(args.window)
                figures.cpu_s = benchlib.process_cpu_seconds(pid) - cpu0
                figures.window_s = time.monotonic() - t0
                figures.passes = (
                    _kcm_passes(dev.state) - passes0
                    if name == KCM
                    else figures.window_s / args.monitor_period
                )
                if args.zone_nodes:
                    await _zone_down(client, dev.state, args, figures)
            finally:
                await client.close()
    return figures


async def _zone_down(client: KubeClient, state: Path, args: argparse.Namespace, figures: Figures) -> None:
    zone = [
        n["metadata"]["name"]
        for n in await _nodes(client)
        if n["metadata"]["labels"].get("topology.kubernetes.io/zone") == "zone-a"
    ]
    zone = sorted(zone)[: args.zone_nodes]
    port_file = state / kcm_dev_cli.SIM_CONTROL_FILE
    for name in zone:
        control.call(port_file, "POST", f"{control.node_path(name)}/stop-heartbeat")
    first: float | None = None
    last = 0.0
    deadline = time.monotonic() + args.taint_window + args.limit
    while time.monotonic() < deadline:
        nodes = {n["metadata"]["name"]: n for n in await _nodes(client)}
        tainted = sum(
            1
            for name in zone
            if any(
                t["key"] == UNREACHABLE and t["effect"] == "NoExecute"
                for t in nodes[name]["spec"].get("taints") or []
            )
        )
        now = time.monotonic()
        if tainted and first is None:
            first = now
        if tainted > figures.tainted:
            figures.tainted, last = tainted, now
        if first is not None and (now - first >= args.taint_window or tainted == len(zone)):
            break
        await asyncio.sleep(0.5)
    if first is not None and figures.tainted > 1 and last > first:
        figures.taint_rate = (figures.tainted - 1) / (last - first)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--heartbeat-interval", type=float, default=10.0)
    p.add_argument("--monitor-period", type=float, default=5.0, help="the controllers' (upstream's default)")
    p.add_argument("--window", type=float, default=60.0, help="seconds of steady state measured")
    p.add_argument("--warmup", type=float, default=15.0)
    p.add_argument("--zones", type=int, default=5, help="zones the nodes are spread over (5: 200-node zones)")
    p.add_argument(
        "--zone-nodes", type=int, default=200, help="nodes of zone-a whose heartbeats stop (0: none)"
    )
    p.add_argument("--taint-window", type=float, default=120.0, help="seconds of tainting watched")
    p.add_argument("--node-eviction-rate", type=float, default=0.1)
    p.add_argument(
        "--grace",
        type=float,
        default=120.0,
        help="--node-monitor-grace-period on both sides: longer than upstream's 50 s, so that a "
        "simulator slowed by a busy machine does not turn healthy nodes Unknown",
    )
    p.add_argument("--limit", type=float, default=300.0, help="seconds any wait may take")
    p.add_argument("--sides", default=f"{UPSTREAM},{KCM}")
    benchlib.add_kcm_argument(p)
    args = p.parse_args()
    upstream.binaries()  # one clear line when `make upstream` has not run
    command = benchlib.kcm_command(args)
    results: dict[str, Figures] = {}
    for name in args.sides.split(","):
        print(f"== {name}: {args.nodes} nodes, heartbeats every {args.heartbeat_interval:g} s", flush=True)
        results[name] = asyncio.run(side(name, args, command))
    print()
    head = f"{'side':10} {'CPU s':>8} {'window s':>9} {'passes':>7} {'ms/pass':>9} {'us/node/pass':>13}"
    print(f"{head} {'taints/s':>9} (--node-eviction-rate {args.node_eviction_rate:g})")
    for name, f in results.items():
        per_pass = 1000 * f.cpu_s / f.passes if f.passes else float("nan")
        per_node = 1000 * per_pass / args.nodes if f.passes else float("nan")
        rate = benchlib.fmt(f.taint_rate, 3) if f.taint_rate is not None else "-"
        row = f"{name:10} {f.cpu_s:8.2f} {f.window_s:9.1f} {f.passes:7.1f} {per_pass:9.1f} {per_node:13.1f}"
        print(f"{row} {rate:>9} ({f.tainted} tainted)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
