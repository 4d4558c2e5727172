"""The controller services' command line: upstream's `--controllers` grammar and the flags
of the Specs it runs (worker counts, each Spec's own), `--plugin`, the work queue's, and
upstream's `--use-service-account-credentials` with the namespace of those ServiceAccounts.

Called by the launcher (`kcm controllers`, `kcm controller`, and `kcm dev`, which passes
`passthrough_flags` on to the controllers it starts) and by `manager.run`. `int_in_range` is an
argparse type for a Spec's own flags (the endpoint controllers' slice sizes); their durations
take `kcm_shared.apimachinery.goduration`'s.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kcm_shared.bus import flags, leaderelection
from kcm_shared.runtime.spec import Spec


def load_plugin(path: str) -> Spec:
    """`module:attribute` naming a Spec: a controller that is not built into `kcm`."""
    module, _, attr = path.partition(":")
    if not module or not attr:
        raise ValueError(f"--plugin wants MODULE:ATTRIBUTE, got {path!r}")
    spec = getattr(importlib.import_module(module), attr)
    if not isinstance(spec, Spec):
        raise ValueError(f"{path} is a {type(spec).__name__}, not a controller Spec")
    return spec


def select(specs: Sequence[Spec], expression: str) -> list[Spec]:
    """Upstream's `--controllers` grammar: `*` = all enabled by default, `foo` on, `-foo` off.

    Names may be canonical (`replicaset-controller`), the alias (`replicaset`) or another name
    the Spec is also known as.
    """
    by_name: dict[str, Spec] = {}
    for spec in specs:
        for name in (spec.name, spec.alias, *spec.also_known_as):
            by_name[name] = spec
    on: set[str] = set()
    off: set[str] = set()
    star = False
    for item in (part.strip() for part in expression.split(",")):
        if not item:
            continue
        if item == "*":
            star = True
            continue
        name = item[1:] if item.startswith("-") else item
        if name not in by_name:
            known = ", ".join(sorted(s.alias for s in specs)) or "none"
            raise ValueError(f"unknown controller {name!r} in --controllers (known: {known})")
        (off if item.startswith("-") else on).add(by_name[name].name)
    return [
        spec
        for spec in specs
        if spec.name not in off and (spec.name in on or (star and spec.enabled_by_default))
    ]


def add_arguments(p: argparse.ArgumentParser, specs: Iterable[Spec]) -> None:
    flags.add_common(p, ops_port=10259)
    p.add_argument("--controllers", default="*", help="*: all on by default; foo: on; -foo: off")
    p.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help="also run this controller Spec from an importable module (repeatable)",
    )
    p.add_argument(
        "--use-service-account-credentials",
        type=leaderelection.parse_bool,
        nargs="?",
        const=True,
        default=False,
        help="each controller authenticates as its own ServiceAccount (deploy.yaml names it), "
        "with tokens the --kubeconfig identity requests (TokenRequest) and refreshes",
    )
    p.add_argument(
        "--service-account-credentials-namespace",
        default="kube-system",
        help="namespace of those ServiceAccounts (upstream's is always kube-system, where its "
        "bootstrap roles system:controller:* already authorize them)",
    )
    p.add_argument(
        "--max-deliveries",
        type=_positive,
        default=15,
        help="deliveries of one work item that end without any outcome (the replica died or the ack "
        "deadline passed mid-reconcile) before it is dead-lettered as poison; failures do not count",
    )
    p.add_argument(
        "--ack-wait", type=_seconds, default=30.0, help="seconds before unacked work is redelivered"
    )
    p.add_argument(
        "--stuck-after",
        type=_seconds,
        default=120.0,
        help="seconds without progress before a loop is unhealthy",
    )
    for spec in specs:
        p.add_argument(
            f"--{spec.flag}", type=_positive, default=spec.workers, help=f"workers for {spec.name}"
        )
        if spec.flags is not None:
            spec.flags(_FirstWins(p.add_argument_group(spec.name)))


class _FirstWins:
    """An argument group that skips a flag already declared (two controllers may share one)."""

    def __init__(self, group: argparse._ArgumentGroup) -> None:
        self._group = group

    def add_argument(self, *names: str, **kwargs: Any) -> argparse.Action | None:
        known = self._group._option_string_actions  # shared with the parser it belongs to
        if any(name in known for name in names):
            return None
        return self._group.add_argument(*names, **kwargs)


def passthrough_flags(specs: Iterable[Spec]) -> dict[str, bool]:
    """The controller flags `kcm dev` hands on to the controllers it starts: every worker
    count, the work queue's, and each controller's own; with whether the flag takes a value."""
    p = argparse.ArgumentParser(add_help=False)
    add_arguments(p, specs)
    own = {"--max-deliveries", "--ack-wait", "--stuck-after"}
    for spec in specs:
        own.add(f"--{spec.flag}")
        if spec.flags is not None:
            probe = argparse.ArgumentParser(add_help=False)
            spec.flags(probe)
            own.update(name for action in probe._actions for name in action.option_strings)
    return {name: action.nargs != 0 for name, action in p._option_string_actions.items() if name in own}


def int_in_range(flag: str, low: int, high: int) -> Callable[[str], int]:
    """The argparse type of an integer flag that must lie in [low, high], with upstream's
    "<flag> must be between <low> and <high>, got <value>" error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{flag} must be between {low} and {high}, got {text}")
        return value

    return parse


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"want a positive integer, got {text!r}")
    return int(text)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"want a positive number of seconds, got {text!r}")
    return value
