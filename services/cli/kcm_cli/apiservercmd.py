"""`kcm apiserver`: the embedded API server as a process of its own; its flags, some of which
`kcm dev` (kcm_cli.devcmd) shares, as it runs the same server in its own process.

The launcher (kcm_cli.main) calls `register`, then the `main` it sets.
"""

from __future__ import annotations

import argparse
import ipaddress
from pathlib import Path

from kcm_apiserver import authz, nodeports, strategies
from kcm_apiserver import main as apiserver_main
from kcm_shared.apis import satoken
from kcm_shared.base import logs
from kcm_shared.runtime import pflag

from kcm_cli import command


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    add_audit_argument(p)
    add_node_port_range_argument(p)
    add_toleration_seconds_arguments(p)
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
        type=authorization_modes,
        default=("AlwaysAllow",),
        help="comma-separated authorizers in order: AlwaysAllow (default), AlwaysDeny, RBAC",
    )
    p.add_argument("--log-level", default="info")
    p.set_defaults(main=_main)


def _main(args: argparse.Namespace, words: list[str]) -> int:
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
        toleration_seconds=toleration_seconds(args),
    )
    return command.run(apiserver_main.serve(opts))


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


def authorization_modes(value: str) -> tuple[str, ...]:
    try:
        return authz.parse_modes(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def add_audit_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--audit-log-path",
        type=Path,
        help="append one JSON line (audit.k8s.io/v1 Event) per write the API server answers",
    )


def add_toleration_seconds_arguments(p: argparse.ArgumentParser) -> None:
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


def toleration_seconds(args: argparse.Namespace) -> strategies.TolerationSeconds:
    return strategies.TolerationSeconds(
        args.default_not_ready_toleration_seconds, args.default_unreachable_toleration_seconds
    )


def add_node_port_range_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--service-node-port-range",
        type=nodeports.parse_range,
        default=nodeports.parse_range(nodeports.DEFAULT_RANGE),
        metavar="A-B",
        help=f"the API server's port range for NodePort Services (default {nodeports.DEFAULT_RANGE})",
    )
