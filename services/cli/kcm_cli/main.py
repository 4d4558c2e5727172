"""The `kcm` command line: the launcher, the one place that knows every service.

Each subcommand parses its flags and runs one service (or, for `dev`, the whole local
stack) on uvloop until interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import ipaddress
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

import uvloop
from kcm_apiserver import authz, nodeports
from kcm_apiserver import main as apiserver_main
from kcm_apiserver import strategies as apiserver_strategies
from kcm_coordinator import cli as coordinator_cli
from kcm_coordinator import status as coordinator_status
from kcm_shared.apis import satoken
from kcm_shared.base import errors, gcpolicy, logs
from kcm_shared.runtime import controllerflags, pflag, upstreamflags
from kcm_simulator import control as simulator_control
from kcm_simulator import main as simulator_main
from kcm_simulator import podstatus as simulator_podstatus
from kcm_watcher import cli as watcher_cli

from kcm_cli import controllers, dev, kubeidentities, manifests, natsauth


def _ip_address(text: str) -> str:
    """An IP address that Endpoints may hold (kube-apiserver refuses others at start too)."""
    try:
        ip = ipaddress.ip_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an IP address: {text!r}") from exc
    if ip.is_unspecified or ip.is_loopback or ip.is_link_local or ip.is_multicast:
        raise argparse.ArgumentTypeError(
            f"{text} cannot be published in Endpoints (unspecified, loopback or link-local)"
        )
    return str(ip)


def _int64(text: str) -> int:
    """A Go int64 flag's value (decimal, optional sign)."""
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid syntax: {text!r}") from None
    if not -(2**63) <= value < 2**63:
        raise argparse.ArgumentTypeError(f"value out of range: {text}")
    return value


def _apiserver_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("apiserver", help="run the embedded Kubernetes API server")
    p.add_argument("--port", type=int, default=6443, help="port to listen on (0: any free port)")
    p.add_argument("--bind", default="127.0.0.1", help="address to bind (a token is required off loopback)")
    p.add_argument(
        "--kubeconfig-out", type=Path, required=True, help="where to write a kubeconfig once ready"
    )
    p.add_argument("--data-dir", type=Path, help="keep state in SQLite here (default: in memory)")
    p.add_argument(
        "--token", help="bearer token clients must send (default: none on loopback, random elsewhere)"
    )
    p.add_argument("--token-file", type=Path, help="read the bearer token from this file instead")
    p.add_argument(
        "--watch-history",
        type=int,
        default=10_000,
        help="events kept per resource for watches to resume from",
    )
    _audit_argument(p)
    _node_port_range_argument(p)
    _toleration_seconds_arguments(p)
    p.add_argument(
        "--service-account-key-file",
        type=Path,
        action="append",
        default=[],
        help="PEM file of keys that verify service account tokens (repeatable; default: the signing key)",
    )
    p.add_argument(
        "--service-account-signing-key-file", type=Path, help="PEM private key that signs TokenRequest tokens"
    )
    p.add_argument(
        "--service-account-issuer",
        action="append",
        default=[],
        help=f"issuer of the tokens it signs (the first) and accepts (repeatable; default {satoken.DEFAULT_ISSUER})",
    )
    p.add_argument(
        "--advertise-address",
        type=_ip_address,
        help="the IP address published in the default/kubernetes Endpoints and EndpointSlice "
        "(default: --bind when usable, else the host's default-route address)",
    )
    p.add_argument("--secure-port", type=int, help="also serve https on this port (0: any free port)")
    p.add_argument("--tls-cert-file", type=Path, help="PEM serving certificate for --secure-port")
    p.add_argument("--tls-private-key-file", type=Path, help="PEM private key of --tls-cert-file")
    p.add_argument(
        "--client-ca-file",
        type=Path,
        help="PEM CA bundle: client certificates it signed authenticate on --secure-port as their "
        "common name, their organizations as groups",
    )
    pflag.add_bool(
        p,
        "--enable-bootstrap-token-auth",
        default=False,
        help="authenticate bootstrap tokens (kube-system Secrets of type bootstrap.kubernetes.io/token) "
        "as system:bootstrap:<id>",
    )
    p.add_argument(
        "--api-audiences",
        default="",
        help="comma-separated audiences a bound token must name (default: the issuers)",
    )
    p.add_argument(
        "--authorization-mode",
        type=_authorization_modes,
        default=("AlwaysAllow",),
        help="comma-separated authorizers in order: AlwaysAllow (default), AlwaysDeny, RBAC",
    )
    p.add_argument("--log-level", default="info")


def _authorization_modes(value: str) -> tuple[str, ...]:
    try:
        return authz.parse_modes(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _audit_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--audit-log-path",
        type=Path,
        help="append one JSON line (audit.k8s.io/v1 Event) per write the API server answers",
    )


def _toleration_seconds_arguments(p: argparse.ArgumentParser) -> None:
    """DefaultTolerationSeconds admission: kube-apiserver's names, defaults and help."""
    for flag, taint in (("not-ready", "notReady"), ("unreachable", "unreachable")):
        p.add_argument(
            f"--default-{flag}-toleration-seconds",
            type=_int64,
            default=300,
            metavar="N",
            help=f"Indicates the tolerationSeconds of the toleration for {taint}:NoExecute "
            "that is added by default to every pod that does not already have such a toleration. "
            "(default 300)",
        )


def _toleration_seconds(args: argparse.Namespace) -> apiserver_strategies.TolerationSeconds:
    return apiserver_strategies.TolerationSeconds(
        args.default_not_ready_toleration_seconds, args.default_unreachable_toleration_seconds
    )


def _node_port_range_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--service-node-port-range",
        type=nodeports.parse_range,
        default=nodeports.parse_range(nodeports.DEFAULT_RANGE),
        metavar="A-B",
        help=f"the API server's port range for NodePort Services (default {nodeports.DEFAULT_RANGE})",
    )


def _dev_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
        help="the simulator's --backoff-scale: multiplies its image pull and restart back-offs (10 s doubling to 300 s)",
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
        type=_authorization_modes,
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
    _audit_argument(p)
    _node_port_range_argument(p)
    _toleration_seconds_arguments(p)
    p.add_argument("--log-level", default="info")
    # The controllers' flags, handed on to them (`_passthrough`).
    controllerflags.add_passthrough(p, controllers.BUILTIN)


def _sim_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
        help="multiply the image pull and restart back-offs (10 s doubling to 300 s, as a kubelet's) by this, e.g. 0.01",
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


def _sim_nodes(args: argparse.Namespace) -> int:
    """`kcm sim --add-nodes N` / `--remove-node NAME`: change a running simulator's nodes."""
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


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kcm", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    _apiserver_parser(sub)
    _dev_parser(sub)
    _sim_parser(sub)
    # Bus services describe their own flags; each sets `service` and `run` (args -> coroutine).
    watcher_cli.register(sub)
    coordinator_cli.register(sub)
    coordinator_status.register_status(sub)
    controllers.register(sub)
    natsauth.register(sub)
    kubeidentities.register(sub)
    manifests.register(sub)
    return p


def _run(coro: Coroutine[Any, Any, None]) -> int:
    """Run until done or until SIGINT/SIGTERM/SIGHUP, then cancel cleanly."""

    async def wrapper() -> None:
        task = asyncio.ensure_future(coro)
        loop = asyncio.get_running_loop()
        # SIGHUP too: `kcm dev`'s children are in sessions of their own, so a closed
        # terminal reaches only it, and it must still stop them.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await task

    gcpolicy.configure()
    try:
        uvloop.run(wrapper())
    except (OSError, errors.ConfigError) as exc:
        # Start-up failures such as a taken port or an unreadable kubeconfig are the user's to
        # fix: one line, no traceback. (Services wait out NATS or an API server being down.)
        print(f"kcm: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    return 0


def _replicas(items: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        name, sep, count = item.partition("=")
        if not sep or not count.isdigit():
            raise SystemExit(f"kcm dev: --replicas wants NAME=N, got {item!r}")
        out[name] = int(count)
    return out


def _passthrough(args: argparse.Namespace, normalized: list[str]) -> list[str]:
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


# Subcommands that read their flags as kube-controller-manager does (Go's pflag syntax).
PFLAG_COMMANDS = ("controllers", "controller", "dev", "watcher", "coordinator")


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """`kcm`'s reading of `argv`: the namespace, and the words argparse read, where a
    PFLAG_COMMANDS subcommand's flags are written as pflag reads them (`pflag.normalize`).
    pflag.FlagError for a command line upstream would refuse; SystemExit for argparse's errors.
    `--feature-gates` is judged once every flag has parsed, as upstream's does: ConfigError for
    gates it refuses, and its warnings on stderr."""
    p = parser()
    words = list(argv)
    if words and words[0] in PFLAG_COMMANDS:
        (sub,) = (a for a in p._actions if isinstance(a, argparse._SubParsersAction))
        words = [words[0], *pflag.normalize(sub.choices[words[0]], words[1:])]
    args = p.parse_args(words)
    if isinstance(getattr(args, "feature_gates", None), list):
        args.feature_gates = upstreamflags.set_feature_gates(args.feature_gates, _warn)
    return args, words


def _warn(text: str) -> None:
    print(f"kcm: warning: {text}", file=sys.stderr)


def version() -> str:
    """`kcm --version`'s line: kcm's version and the kube-controller-manager release it follows."""
    return f"kcm v{importlib.metadata.version('kcm')} (kube-controller-manager {upstreamflags.VERSION} compatible)"


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args, words = parse(sys.argv[1:] if argv is None else argv)
    except pflag.FlagError as exc:
        # Upstream's one line (without the usage it prints first), and its exit status.
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    except errors.ConfigError as exc:
        # What upstream refuses after parsing (its "command failed" line), before --version.
        print(f"kcm: {exc}", file=sys.stderr)
        return 1
    if args.command in PFLAG_COMMANDS[:2] and args.version in ("true", "raw"):
        print(version())
        return 0
    if args.command == "apiserver":
        logs.setup("apiserver", args.log_level)
        opts = apiserver_main.Options(
            port=args.port,
            bind=args.bind,
            kubeconfig_out=args.kubeconfig_out,
            data_dir=args.data_dir,
            token=args.token_file.read_text().strip() if args.token_file else args.token,
            watch_history=args.watch_history,
            audit_log_path=args.audit_log_path,
            service_node_port_range=args.service_node_port_range,
            service_account_key_files=args.service_account_key_file,
            service_account_signing_key_file=args.service_account_signing_key_file,
            service_account_issuers=args.service_account_issuer,
            api_audiences=[a for a in args.api_audiences.split(",") if a],
            secure_port=args.secure_port,
            tls_cert_file=args.tls_cert_file,
            tls_private_key_file=args.tls_private_key_file,
            client_ca_file=args.client_ca_file,
            enable_bootstrap_token_auth=args.enable_bootstrap_token_auth,
            advertise_address=args.advertise_address,
            authorization_modes=args.authorization_mode,
            toleration_seconds=_toleration_seconds(args),
        )
        return _run(apiserver_main.serve(opts))
    if args.command == "dev":
        if args.reference and (args.replicas or args.partitions is not None):
            parser().error(
                "kcm dev: --replicas and --partitions are for kcm's controllers, which --reference does not run"
            )
        if args.apiserver == dev.UPSTREAM and args.authorization_mode != ("AlwaysAllow",):
            parser().error(
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
            controller_flags=_passthrough(args, words[1:]),
            audit_log_path=args.audit_log_path,
            service_node_port_range=args.service_node_port_range,
            toleration_seconds=_toleration_seconds(args),
            partitions=args.partitions,
            log_level=args.log_level,
            apiserver=args.apiserver,
            reference=args.reference,
            authorization_modes=args.authorization_mode,
        )
        return _run(dev.run(dev_opts))
    if args.command == "sim" and (args.add_nodes is not None or args.remove_node):
        return _sim_nodes(args)
    if args.command == "sim":
        if args.kubeconfig is None:
            parser().error("kcm sim: --kubeconfig is required to run the simulator")
        if not args.stop_seconds >= 0:
            parser().error(f"kcm sim: --stop-seconds must be 0 or more, not {args.stop_seconds}")
        if not args.backoff_scale > 0:
            parser().error(f"kcm sim: --backoff-scale must be more than 0, not {args.backoff_scale}")
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
            kubelet_client_ca=args.kubelet_client_ca_file.read_bytes()
            if args.kubelet_client_ca_file
            else b"",
        )
        return _run(simulator_main.run(sim_opts))
    if args.command == "nats-auth":
        for path in natsauth.run(args):
            print(path)
        return 0
    if args.command == "manifests":
        return manifests.run(args)
    if args.command == "status":
        return _to_a_reader_that_may_leave(lambda: coordinator_status.main(args))
    if hasattr(args, "run"):
        logs.setup(args.service, controllerflags.log_level(args))
        return _run(args.run(args))
    return 2


def _to_a_reader_that_may_leave(print_all: Callable[[], int]) -> int:
    """`kcm status | head`: when the reader stops early, stop printing, without a traceback."""
    try:
        code = print_all()
        sys.stdout.flush()
    except BrokenPipeError:
        # Python flushes stdout once more on the way out: let that go nowhere.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
