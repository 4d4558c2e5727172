"""`kcm dev`: its flags, and the options it hands kcm_cli.dev, which runs the stack.

The launcher (kcm_cli.main) calls `register`, then the `main` it sets.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kcm_shared.base import logs
from kcm_shared.runtime import controllerflags

from kcm_cli import apiservercmd, command, controllers, dev


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("dev", help="run the whole local stack in the foreground")
    p.add_argument("--state-dir", type=Path, default=Path(".kcm"), help="where state and the kubeconfig go")
    p.add_argument("--kubeconfig-out", type=Path, help="kubeconfig path (default: STATE_DIR/kubeconfig)")
    p.add_argument("--port", type=int, default=0, help="API server port (0: any free port)")
    p.add_argument("--nodes", type=int, default=3, help="simulated nodes to run (0: no simulator)")
    p.add_argument(
        "--pod-start-delay", type=float, default=0.5, help="seconds before a bound pod runs (the simulator's)"
    )
    p.add_argument(
        "--sim-backoff-scale",
        type=float,
        default=1.0,
        help="the simulator's --backoff-scale: multiplies its image pull back-off (10 s doubling to 300 s)",
    )
    p.add_argument(
        "--heartbeat-interval",
        type=float,
        default=10.0,
        help="seconds between the simulated nodes' heartbeats (Lease and status; the simulator's)",
    )
    p.add_argument("--zones", type=int, default=3, help="zones the simulated nodes are spread over")
    p.add_argument("--controllers", default="*", help="which controllers to run (*,-foo,bar)")
    p.add_argument(
        "--replicas",
        action="append",
        default=[],
        metavar="NAME=N",
        help="run controller NAME as N separate replicas (repeatable)",
    )
    p.add_argument("--kube-api-qps", help="passed to the controllers")
    p.add_argument("--kube-api-burst", help="passed to the controllers")
    p.add_argument(
        "--kube-api-content-type", help="passed to the controllers, the watcher and the coordinator"
    )
    p.add_argument(
        "--partitions", type=int, help="work partitions per controller (passed to the coordinator)"
    )
    p.add_argument(
        "--apiserver",
        choices=[dev.EMBEDDED, dev.UPSTREAM],
        default=dev.EMBEDDED,
        help="embedded: kcm's own API server, in this process; upstream: etcd and kube-apiserver "
        "built by `make upstream`, with RBAC, every kcm service authorized by k8s/'s roles",
    )
    p.add_argument(
        "--authorization-mode",
        type=apiservercmd.authorization_modes,
        default=("AlwaysAllow",),
        help="the embedded API server's (kube-apiserver's flag): AlwaysAllow (default), AlwaysDeny, RBAC; "
        "kcm's services and the admin kubeconfig are in system:masters either way",
    )
    p.add_argument(
        "--reference",
        action="store_true",
        help="run upstream kube-controller-manager (`make upstream`) instead of the watcher, the "
        "coordinator and kcm's controllers",
    )
    apiservercmd.add_audit_argument(p)
    apiservercmd.add_node_port_range_argument(p)
    apiservercmd.add_toleration_seconds_arguments(p)
    p.add_argument("--log-level", default="info")
    # The controllers' flags, handed on to them (`passthrough`).
    controllerflags.add_passthrough(p, controllers.BUILTIN)
    p.set_defaults(main=_main)


def _main(args: argparse.Namespace, words: list[str]) -> int:
    if args.reference and (args.replicas or args.partitions is not None):
        raise command.UsageError(
            "kcm dev: --replicas and --partitions are for kcm's controllers, which --reference does not run"
        )
    if args.apiserver == dev.UPSTREAM and args.authorization_mode != ("AlwaysAllow",):
        raise command.UsageError(
            "kcm dev: --authorization-mode is the embedded server's; kube-apiserver runs Node,RBAC"
        )
    logs.setup("dev", args.log_level)
    state = args.state_dir
    state.mkdir(parents=True, exist_ok=True)
    dev_opts = dev.DevOptions(
        state_dir=state,
        kubeconfig_out=args.kubeconfig_out or state / "kubeconfig",
        port=args.port,
        nodes=args.nodes,
        pod_start_delay=args.pod_start_delay,
        sim_backoff_scale=args.sim_backoff_scale,
        heartbeat_interval=args.heartbeat_interval,
        zones=args.zones,
        controllers=args.controllers,
        replicas=_replicas(args.replicas),
        controller_flags=passthrough(args, words[1:]),
        audit_log_path=args.audit_log_path,
        service_node_port_range=args.service_node_port_range,
        toleration_seconds=apiservercmd.toleration_seconds(args),
        partitions=args.partitions,
        log_level=args.log_level,
        apiserver=args.apiserver,
        reference=args.reference,
        authorization_modes=args.authorization_mode,
    )
    return command.run(dev.run(dev_opts))


def _replicas(items: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        name, sep, count = item.partition("=")
        if not sep or not count.isdigit():
            raise SystemExit(f"kcm dev: --replicas wants NAME=N, got {item!r}")
        out[name] = int(count)
    return out


def passthrough(args: argparse.Namespace, normalized: list[str]) -> list[str]:
    """Controller flags `kcm dev` hands on: the client's rate limits and media type, and every
    flag of the controllers' (`controllerflags.add_passthrough`: upstream's, worker counts, the
    work queue's, each controller's) given on its command line, as `--flag=value` (`normalized`
    is pflag's reading)."""
    flags = [
        f"--kube-api-{k}={v}"
        for k in ("qps", "burst", "content-type")
        if (v := getattr(args, f"kube_api_{k.replace('-', '_')}"))
    ]
    known = controllerflags.passthrough_flags(controllers.BUILTIN)
    return flags + [item for item in normalized if item.split("=", 1)[0] in known]
