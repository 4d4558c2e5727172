"""The `kcm` command line: the launcher, the one place that knows every subcommand.

- `SUBCOMMANDS` names, in `kcm --help`'s order, each subcommand and the module whose
  `register(sub)` adds it (kcm_cli.command says what `register` sets).
- `kcm SUB ...` imports only SUB's module: every service process starts as `kcm watcher`,
  `kcm coordinator`, `kcm controllers` or `kcm sim`, and importing every service's code cost
  each of them about 2 s of CPU. `kcm --help`, a mistyped subcommand and `parser()` load all.
- Flags, defaults, messages and exit codes are the subcommands' own.

Called as the `kcm` console script, and by `kcm dev` for the services it supervises.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import sys
from collections.abc import Callable, Sequence

from kcm_shared.base import errors, logs
from kcm_shared.runtime import pflag, upstreamflags

from kcm_cli import command

# `kcm --help`'s description.
DESCRIPTION = """The `kcm` command line: the launcher, the one place that knows every service.

Each subcommand parses its flags and runs one service (or, for `dev`, the whole local
stack) on uvloop until interrupted.
"""

# The subcommands each module registers, and its registering function ("module:function").
SUBCOMMANDS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("apiserver",), "kcm_cli.apiservercmd:register"),
    (("dev",), "kcm_cli.devcmd:register"),
    (("sim",), "kcm_cli.simcmd:register"),
    (("watcher",), "kcm_watcher.cli:register"),
    (("coordinator",), "kcm_coordinator.cli:register"),
    (("status",), "kcm_coordinator.status:register_status"),
    (("controllers", "controller"), "kcm_cli.controllers:register"),
    (("nats-auth",), "kcm_cli.natsauth:register"),
    (("kube-identities",), "kcm_cli.kubeidentities:register"),
    (("manifests",), "kcm_cli.manifests:register"),
)


def _registrar(entry: str) -> Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]:
    module, _, attr = entry.partition(":")
    register: Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None] = getattr(
        importlib.import_module(module), attr
    )
    return register


def parser(only: str | None = None) -> argparse.ArgumentParser:
    """`kcm`'s parser: every subcommand, or with `only` just the module that registers that one
    (the same parser for any command line that names it first)."""
    p = argparse.ArgumentParser(prog="kcm", description=DESCRIPTION)
    sub = p.add_subparsers(dest="command", required=True)
    for names, entry in SUBCOMMANDS:
        if only is None or only in names:
            _registrar(entry)(sub)
    return p


# Subcommands that read their flags as kube-controller-manager does (Go's pflag syntax).
PFLAG_COMMANDS = ("controllers", "controller", "dev", "watcher", "coordinator")


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """`kcm`'s reading of `argv`: the namespace, and the words argparse read, where a
    PFLAG_COMMANDS subcommand's flags are written as pflag reads them (`pflag.normalize`).
    pflag.FlagError for a command line upstream would refuse; SystemExit for argparse's errors.
    `--feature-gates` is judged once every flag has parsed, as upstream's does: ConfigError for
    gates it refuses, and its warnings on stderr."""
    words = list(argv)
    p = parser(words[0] if words and any(words[0] in names for names, _ in SUBCOMMANDS) else None)
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
    if hasattr(args, "run"):
        # Here, not at the top: the bus services' own modules have loaded it already, and the
        # commands that run no bus service (`kcm sim`, `kcm dev`, `kcm status`) need none of it.
        from kcm_shared.bus import flags

        logs.setup(args.service, flags.log_level(args))
        return command.run(args.run(args))
    try:
        return _to_a_reader_that_may_leave(lambda: args.main(args, words))
    except command.UsageError as exc:
        parser().error(str(exc))


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
