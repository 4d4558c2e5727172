"""`kcm sim`: the simulator (kcm_simulator) as a process, or, with --add-nodes/--remove-node,
a change to the nodes of one that runs.

The launcher (kcm_cli.main) calls `register`, then the `main` it sets.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kcm_shared.base import logs
from kcm_simulator import control as simulator_control
from kcm_simulator import main as simulator_main
from kcm_simulator import podstatus as simulator_podstatus

from kcm_cli import command


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("sim", help="simulate nodes, a scheduler and kubelets against an API server")
    p.add_argument(
        "--kubeconfig", type=Path, help="the API server to simulate a cluster for (required to run)"
    )
    p.add_argument("--nodes", type=int, default=3, help="how many nodes to register")
    p.add_argument("--zones", type=int, default=3, help="zones the nodes are spread over")
    p.add_argument("--pod-start-delay", type=float, default=0.5, help="seconds before a bound pod runs")
    p.add_argument("--node-prefix", default="sim-node-")
    p.add_argument("--heartbeat-interval", type=float, default=10.0, help="seconds between node heartbeats")
    p.add_argument(
        "--stop-seconds",
        type=float,
        default=simulator_podstatus.STOP_SECONDS,
        help="seconds a container takes to exit after SIGTERM on a graceful delete "
        f"(default {simulator_podstatus.STOP_SECONDS})",
    )
    p.add_argument(
        "--ignore-sigterm",
        action="store_true",
        help="containers ignore SIGTERM: each deleted pod runs out its grace period and is killed (137)",
    )
    p.add_argument(
        "--backoff-scale",
        type=float,
        default=1.0,
        help="multiply the image pull back-off (10 s doubling to 300 s, as a kubelet's) by this, e.g. 0.01 in tests",
    )
    p.add_argument("--control-port", type=int, default=0, help="fault-injection port on loopback (0: any)")
    p.add_argument("--control-file", type=Path, help="write the chosen control port here")
    p.add_argument(
        "--kubelet-address",
        default="127.0.0.1",
        help="address of the kubelet server (logs, exec, attach, port-forward), registered on every Node",
    )
    p.add_argument("--kubelet-port", type=int, default=0, help="its port (0: any free one; -1: no server)")
    p.add_argument(
        "--kubelet-client-ca-file",
        type=Path,
        help="serve only clients with a certificate these CAs signed (kube-apiserver's kubelet client)",
    )
    p.add_argument(
        "--node-ipam",
        action="store_true",
        help="register nodes without a podCIDR and run pods once the node IPAM controller gave one",
    )
    p.add_argument(
        "--manage-not-ready-taint",
        action="store_true",
        help="remove the not-ready NoSchedule taint of a Ready node and put it back on a NotReady one, "
        "for a cluster without a node lifecycle controller",
    )
    p.add_argument(
        "--ignore-claims",
        action="store_true",
        help="schedule and start pods whatever the state of their PersistentVolumeClaims, "
        "for a cluster without a PV binder (none of its claims would ever be Bound)",
    )
    p.add_argument(
        "--ignore-attachments",
        action="store_true",
        help="start pods without waiting for their attachable volumes in the node's volumesAttached, "
        "for a cluster without an attach/detach controller",
    )
    # Against a simulator that runs already (its --control-file, or the one `kcm dev` started).
    p.add_argument(
        "--add-nodes", type=int, metavar="N", help="add N nodes to the running simulator, then exit"
    )
    p.add_argument(
        "--remove-node",
        action="append",
        default=[],
        metavar="NAME",
        help="remove a node from the running simulator, then exit (repeatable)",
    )
    p.add_argument(
        "--state-dir", type=Path, help="with --add-nodes/--remove-node: the `kcm dev` stack's state directory"
    )
    p.add_argument("--log-level", default="info")
    p.set_defaults(main=_main)


def _sim_nodes(args: argparse.Namespace) -> int:
    """`kcm sim --add-nodes N` / `--remove-node NAME`: change a running simulator's nodes."""
    # Here, not at the top: kcm_cli.dev brings the API server, and only this one-shot path needs
    # the name of the file `kcm dev` keeps the port in.
    from kcm_cli import dev

    port_file = args.control_file or (
        args.state_dir / dev.SIM_CONTROL_FILE if args.state_dir else Path(".kcm") / dev.SIM_CONTROL_FILE
    )
    try:
        if args.add_nodes is not None:
            answer = simulator_control.call(port_file, "POST", "/nodes", {"count": str(args.add_nodes)})
            for name in answer.get("added", []):
                print(f"node/{name} added")
        for name in args.remove_node:
            simulator_control.call(port_file, "DELETE", simulator_control.node_path(name))
            print(f"node/{name} removed")
    except OSError as exc:
        print(f"kcm: no simulator answers through {port_file}: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"kcm: {exc}", file=sys.stderr)
        return 1
    return 0


def _main(args: argparse.Namespace, words: list[str]) -> int:
    if args.add_nodes is not None or args.remove_node:
        return _sim_nodes(args)
    if args.kubeconfig is None:
        raise command.UsageError("kcm sim: --kubeconfig is required to run the simulator")
    if not args.stop_seconds >= 0:
        raise command.UsageError(f"kcm sim: --stop-seconds must be 0 or more, not {args.stop_seconds}")
    if not args.backoff_scale > 0:
        raise command.UsageError(f"kcm sim: --backoff-scale must be more than 0, not {args.backoff_scale}")
    logs.setup("sim", args.log_level)
    sim_opts = simulator_main.Options(
        kubeconfig=args.kubeconfig,
        nodes=args.nodes,
        zones=args.zones,
        pod_start_delay=args.pod_start_delay,
        node_prefix=args.node_prefix,
        heartbeat_interval=args.heartbeat_interval,
        control_port=args.control_port,
        control_file=args.control_file,
        node_ipam=args.node_ipam,
        stop_seconds=None if args.ignore_sigterm else args.stop_seconds,
        manage_not_ready_taint=args.manage_not_ready_taint,
        backoff_scale=args.backoff_scale,
        ignore_claims=args.ignore_claims,
        ignore_attachments=args.ignore_attachments,
        kubelet_address=args.kubelet_address,
        kubelet_port=None if args.kubelet_port < 0 else args.kubelet_port,
        kubelet_client_ca=args.kubelet_client_ca_file.read_bytes() if args.kubelet_client_ca_file else b"",
    )
    return command.run(simulator_main.run(sim_opts))
