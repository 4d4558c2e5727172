"""`kcm watcher` flags; the launcher (kcm_cli.main) calls `register` and then `args.run(args)`."""

from __future__ import annotations

import argparse

from kcm_shared.apimachinery import goduration
from kcm_shared.bus import flags, leaderelection

from kcm_watcher import main

OPS_PORT = 10258


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("watcher", help="list and watch the API server, publish every object change to NATS")
    flags.add_common(p, ops_port=OPS_PORT)
    leaderelection.add_arguments(p, "kcm-watcher")
    duration = goduration.seconds
    g = p.add_argument_group("watcher")
    g.add_argument(
        "--resources",
        default="*",
        help="group/version/resource list (core: v1/pods); * = every listable, watchable resource "
        "but events and metrics; -g/v/r excludes (default: *)",
    )
    g.add_argument(
        "--discovery-interval",
        type=duration,
        default=30.0,
        metavar="DURATION",
        help="how often to re-read discovery for new resources such as CRDs (default 30s)",
    )
    g.add_argument(
        "--watch-timeout",
        type=duration,
        default=300.0,
        metavar="DURATION",
        help="watches are renewed after this to twice this, as the reflector does (default 5m)",
    )
    g.add_argument(
        "--sync-grace",
        type=duration,
        default=2.0,
        metavar="DURATION",
        help="how long a kcm.watcher.sync request waits for the watch before a relist (default 2s)",
    )
    g.add_argument(
        "--sync-timeout", type=duration, default=30.0, metavar="DURATION", help="give up on a sync request"
    )
    g.add_argument(
        "--publish-window", type=int, default=512, help="messages in flight without an acknowledgement"
    )
    g.add_argument(
        "--publish-failure-limit",
        type=duration,
        default=30.0,
        metavar="DURATION",
        help="the nats health check fails once publishing has failed this long",
    )
    # It mostly watches; lists at start-up and relists are the only bulk requests.
    p.set_defaults(kube_api_qps=100.0, kube_api_burst=200, service="watcher", run=main.run)
