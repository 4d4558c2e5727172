"""The controller services' command line: every flag of upstream kube-controller-manager v1.32,
upstream's `--controllers` grammar over upstream's whole registry, the flags of the Specs it
runs (worker counts, each Spec's own), `--plugin`, the work queue's, and upstream's
`--use-service-account-credentials` with the namespace of those ServiceAccounts.

- `add_arguments` declares them (pflag's syntax comes from `runtime.pflag.normalize`, which the
  launcher runs first); upstream flags kcm does not implement are declared by
  `upstreamflags.add_accepted` and listed in docs/flags.md.
- `select` picks the built Specs `--controllers` turns on; `not_started` says why each other
  controller upstream would start does not run here.

Called by the launcher (`kcm controllers`, `kcm controller`, and `kcm dev`, which declares
`add_passthrough`'s flags and hands them on to the controllers it starts) and by `manager.run`. `int_in_range` is an
argparse type for a Spec's own flags (the endpoint controllers' slice sizes); their durations
take `kcm_shared.apimachinery.goduration`'s.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kcm_shared.apimachinery import pflagvalue
from kcm_shared.base import errors
from kcm_shared.bus import flags
from kcm_shared.runtime import pflag, upstreamflags
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


def select(specs: Sequence[Spec], expression: str | Sequence[str]) -> list[Spec]:
    """The Specs upstream's `--controllers` grammar turns on: `*` = all enabled by default,
    `foo` on, `-foo` off, the first mention of a controller deciding (upstream's
    IsControllerEnabled).

    Names may be canonical (`replicaset-controller`), the alias (`replicaset`) or another name
    the Spec is also known as; a name of upstream's registry that kcm does not build is known
    (`not_started` says why it does not run). errors.ConfigError, with upstream's message, for a
    name nobody knows.
    """
    items = _canonical(specs, expression)
    return [spec for spec in specs if upstreamflags.enabled(items, spec.name, not spec.enabled_by_default)]


def not_started(
    specs: Sequence[Spec], expression: str | Sequence[str], gates: dict[str, bool]
) -> list[tuple[str, str]]:
    """Each controller of upstream's registry that kcm does not build and upstream would have
    considered starting, with why it does not run here (upstream's wording where it has one)."""
    items = _canonical(specs, expression)
    built = {spec.name for spec in specs}
    out = []
    for c in upstreamflags.CONTROLLERS:
        if c.name in built or not upstreamflags.enabled(items, c.name, c.disabled_by_default):
            continue
        if not upstreamflags.gates_on(gates, c.feature_gates):
            out.append((c.name, f"disabled by a feature gate (requires {', '.join(c.feature_gates)})"))
        elif c.cloud:
            out.append((c.name, "skipping a cloud provider controller (no --cloud-provider)"))
        else:
            out.append((c.name, "not built in kcm"))
    return out


def _canonical(specs: Sequence[Spec], expression: str | Sequence[str]) -> list[str]:
    items = expression.split(",") if isinstance(expression, str) else list(expression)
    by_name: dict[str, str] = {}
    for c in upstreamflags.CONTROLLERS:
        for name in (c.name, *c.aliases):
            by_name[name] = c.name
    for spec in specs:
        for name in (spec.name, spec.alias, *spec.also_known_as):
            by_name[name] = spec.name
    out = []
    for item in (part.strip() for part in items):
        if not item or item == "*":
            out += [item] if item else []
            continue
        off = item.startswith("-")
        name = item[1:] if off else item
        if name not in by_name:
            raise errors.ConfigError(f'"{name}" is not in the list of known controllers')
        out.append(("-" if off else "") + by_name[name])
    return out


def add_arguments(p: argparse.ArgumentParser, specs: Iterable[Spec]) -> None:
    """Every flag of `kcm controllers` and `kcm controller`: the bus services' common ones,
    `--controllers`, `--plugin`, `--version`, and `add_passthrough`'s."""
    flags.add_common(p, ops_port=None)
    p.add_argument(
        "--controllers",
        type=pflagvalue.strings,
        action=pflag.Merge,
        default=["*"],
        help="*: all on by default; foo: on; -foo: off (upstream's names and aliases)",
    )
    p.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help="also run this controller Spec from an importable module (repeatable)",
    )
    p.add_argument(
        "--version",
        nargs="?",
        const="true",
        default="false",
        metavar="true|raw",
        help="print kcm's version and the kube-controller-manager version it follows, and quit",
    )
    add_passthrough(p, specs)


def add_passthrough(p: argparse.ArgumentParser, specs: Iterable[Spec]) -> None:
    """The controller flags `kcm dev` also takes and hands on to the controllers it starts:
    the ServiceAccount credentials', the work queue's, every worker count, each Spec's own, and
    the rest of upstream's (`upstreamflags.add_accepted`), but not the bus services' common ones,
    which `kcm dev` sets itself. A flag `p` has already is left as it is."""
    g = _FirstWins(p)
    pflag.add_bool(
        g,
        "--use-service-account-credentials",
        default=False,
        help="each controller authenticates as its own ServiceAccount (deploy.yaml names it), "
        "with tokens the --kubeconfig identity requests (TokenRequest) and refreshes",
    )
    g.add_argument(
        "--service-account-credentials-namespace",
        default="kube-system",
        help="namespace of those ServiceAccounts (upstream's is always kube-system, where its "
        "bootstrap roles system:controller:* already authorize them)",
    )
    g.add_argument(
        "-v",
        "--v",
        type=pflagvalue.level,
        default=0,
        metavar="Level",
        help="upstream's log verbosity: 4 and above turn on debug logs (see log_level)",
    )
    pflag.add_bool(
        g,
        "--leader-elect",
        default=True,
        help="upstream's leader election: true only here (refuse_leader_elect_false)",
    )
    g.add_argument(
        "--feature-gates",
        type=upstreamflags.feature_gates,
        default=[],
        action=pflag.Merge,
        metavar="colonSeparatedMultimapStringString",
        help="upstream v1.32's feature gates, A=true,B=false (upstreamflags.gate)",
    )
    g.add_argument(
        "--max-deliveries",
        type=_positive,
        default=15,
        help="deliveries of one work item that end without any outcome (the replica died or the ack "
        "deadline passed mid-reconcile) before it is dead-lettered as poison; failures do not count",
    )
    g.add_argument(
        "--ack-wait", type=_seconds, default=30.0, help="seconds before unacked work is redelivered"
    )
    g.add_argument(
        "--stuck-after",
        type=_seconds,
        default=120.0,
        help="seconds without progress before a loop is unhealthy",
    )
    for spec in specs:
        g.add_argument(
            f"--{spec.flag}", type=_positive, default=spec.workers, help=f"workers for {spec.name}"
        )
        if spec.flags is not None:
            spec.flags(_FirstWins(p.add_argument_group(spec.name)))
    common = argparse.ArgumentParser(add_help=False)
    flags.add_common(common, ops_port=0)
    upstreamflags.add_accepted(p, skip={*common._option_string_actions, "--controllers"})


class _FirstWins:
    """A parser or argument group that skips a flag already declared (two controllers may share
    one; `kcm dev` declares some of the controllers' flags itself)."""

    def __init__(self, group: argparse._ActionsContainer) -> None:
        self._group = group

    def add_argument(self, *names: str, **kwargs: Any) -> argparse.Action | None:
        known = self._group._option_string_actions  # shared with the parser it belongs to
        if any(name in known for name in names):
            return None
        return self._group.add_argument(*names, **kwargs)


LEADER_ELECT_FALSE = (
    "--leader-elect=false is not supported by kcm's controllers: each replica runs only the "
    "partitions the coordinator grants it, so none may run without it (docs/flags.md "
    '"Leader election"); give --leader-elect=false to kcm watcher and kcm coordinator instead'
)


def refuse_leader_elect_false(args: argparse.Namespace) -> None:
    """ConfigError for `--leader-elect=false`. Upstream's meaning, one replica running every
    controller with no Lease, would here be a replica owning every partition without the
    coordinator's grant: two such replicas would reconcile one key at once and a paused one
    would write what it no longer owns (architecture invariants 2, 8 and 9), so it is refused
    rather than ignored."""
    if getattr(args, "leader_elect", True) is False:
        raise errors.ConfigError(LEADER_ELECT_FALSE)


def passthrough_flags(specs: Iterable[Spec]) -> frozenset[str]:
    """The option strings `add_passthrough` declares: what `kcm dev` hands on."""
    p = argparse.ArgumentParser(add_help=False)
    add_passthrough(p, specs)
    return frozenset(p._option_string_actions)


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
