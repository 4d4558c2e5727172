"""`kcm coordinator` flags; the launcher (kcm_cli.main) calls `register` and runs `args.run(args)`."""

from __future__ import annotations

import argparse

from kcm_shared.apimachinery import goduration
from kcm_shared.bus import flags, leaderelection

from kcm_coordinator import service


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("coordinator", help="leases, partition ownership, membership and health of replicas")
    flags.add_common(p, ops_port=10257)
    leaderelection.add_arguments(p, "kcm-coordinator")
    g = p.add_argument_group("coordination")
    g.add_argument("--partitions", type=_count, default=8, help="work partitions per controller")
    g.add_argument(
        "--partitions-for",
        action="append",
        type=_override,
        default=[],
        metavar="NAME=N",
        help="partitions of one controller (repeatable); overrides --partitions",
    )
    g.add_argument(
        "--member-lease",
        type=goduration.seconds,
        default=5.0,
        metavar="DURATION",
        help="how long a partition grant lasts without a fresh heartbeat",
    )
    g.add_argument(
        "--member-fence-margin",
        type=goduration.seconds,
        default=1.0,
        metavar="DURATION",
        help="extra wait, beyond the lease, before a silent replica's partitions go to another",
    )
    g.add_argument("--ops-url-file", help="write the ops endpoint's URL here once it serves")
    p.set_defaults(service="coordinator", run=service.run)


def _count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"want a positive integer, got {text!r}")
    return int(text)


def _override(text: str) -> tuple[str, int]:
    name, sep, count = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"want NAME=N, got {text!r}")
    return name, _count(count)
