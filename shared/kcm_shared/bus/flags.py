"""Command-line flags every bus service shares, named as kube-controller-manager names them.

Each service's `cli.register` calls `add_common` on its subparser; `kube_client` (which
turns an unreadable kubeconfig into `errors.ConfigError`) and `opsserver` then read the
parsed namespace, so `--kubeconfig`, `--master`,
`--kube-api-qps`, `--kube-api-burst`, `--kube-api-content-type`, the `--nats-*` options and the ops endpoint mean the
same thing everywhere. The argparse types of duration flags are `apimachinery.goduration`'s.
"""

from __future__ import annotations

import argparse
import os
import socket

from kcm_shared.base import errors
from kcm_shared.bus import natsconn
from kcm_shared.client import clientbuilder, contenttype, kubeclient


def log_level(args: argparse.Namespace) -> str:
    """The level of this process's logs: debug from upstream's `-v=4` on (the controller
    services' flag, kcm_shared.runtime.controllerflags), else `--log-level`."""
    return "debug" if getattr(args, "v", 0) >= 4 else str(args.log_level)


def add_common(p: argparse.ArgumentParser, ops_port: int | None) -> None:
    """`ops_port=None`: the ops endpoint is served only when `--ops-port` is given (the
    controller services, whose endpoint is upstream's secure port; `kcm dev` asks for it)."""
    g = p.add_argument_group("Kubernetes API")
    g.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster service account)")
    g.add_argument("--master", help="API server URL, overriding the kubeconfig")
    g.add_argument("--kube-api-qps", type=float, default=20.0, help="client-side rate limit (0: none)")
    g.add_argument("--kube-api-burst", type=int, default=30)
    g.add_argument(
        "--kube-api-content-type",
        default=contenttype.JSON,
        # Any string parses, as upstream's (whose --version then exits 0); kube_client refuses
        # what kcm cannot read, at start, with one line.
        help='media type of reads of built-in objects (docs/flags.md "API content type")',
    )
    o = p.add_argument_group("operations")
    o.add_argument("--ops-bind", default="0.0.0.0", help="address of /healthz and /metrics")
    o.add_argument(
        "--ops-port",
        type=int,
        default=ops_port,
        help="port of plain-HTTP /healthz and /metrics (0: any)"
        + ("; a development option: not served unless given" if ops_port is None else ""),
    )
    o.add_argument("--instance", default=default_instance(), help="this replica's name (default: host-pid)")
    p.add_argument(
        "--log-level", default="info", help="the least level logged: debug, info, warning or error"
    )
    natsconn.add_arguments(p)


def default_instance() -> str:
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"


def kube_client(
    args: argparse.Namespace,
    user_agent: str,
    write_guard: kubeclient.WriteGuard | None = None,
    rate_scale: tuple[float, float] = (1.0, 1.0),
    credentials: clientbuilder.Credentials | None = None,
) -> kubeclient.KubeClient:
    """The API client the flags describe, its qps and burst multiplied by `rate_scale`, and
    authenticated by `credentials` when given (a ServiceAccount's, `clientbuilder`) rather than
    by the kubeconfig's own. Raises `errors.ConfigError` when the kubeconfig (or the in-cluster
    configuration) cannot be read, or `--kube-api-content-type` names a media type kcm cannot
    read. Makes no request: a server that is down is the caller's to
    wait out."""
    if args.kube_api_content_type not in contenttype.CHOICES:
        raise errors.ConfigError(
            f"--kube-api-content-type {args.kube_api_content_type!r} is not a media type kcm reads: "
            f"use {' or '.join(contenttype.CHOICES)}"
        )
    conn, tokens = (credentials.conn, credentials.tokens) if credentials else (connection(args), None)
    return kubeclient.KubeClient(
        conn,
        qps=args.kube_api_qps * rate_scale[0],
        burst=max(1, round(args.kube_api_burst * rate_scale[1])),
        user_agent=user_agent,
        write_guard=write_guard,
        token_source=tokens,
        content_type=args.kube_api_content_type,
    )


def connection(args: argparse.Namespace) -> kubeclient.Connection:
    """The connection `--kubeconfig` / `--master` (or the in-cluster configuration) describe;
    `errors.ConfigError` when it cannot be read."""
    try:
        return kubeclient.load_connection(args.kubeconfig, args.master)
    except Exception as exc:  # the kubernetes loader raises many kinds; each is a bad config
        where = f"kubeconfig {args.kubeconfig}" if args.kubeconfig else "in-cluster configuration"
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise errors.ConfigError(f"cannot load the {where}: {detail}") from exc
