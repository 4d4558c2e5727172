"""Go pflag's command-line syntax on top of an argparse parser, as kube-controller-manager reads it.

- `normalize(parser, argv)` rewrites `argv` the way pflag would read it into what argparse reads
  the same way: every flag is looked up by its exact long name, `_` read as `-` (upstream's
  cliflag.WordSepNormalizeFunc), never by a prefix; a bool is `--x`, `--x=true` or `--x=false`
  (any strconv.ParseBool spelling) and never takes the next word; other flags take `--x=v` or
  `--x v` (a value may start with `-`); `-v3`, `-v=3`, `-v 3` for a shorthand; `--` ends the
  flags. Each value is checked by its declared type first, so a bad one fails as upstream's
  does, in one line (`FlagError`): `unknown flag: --foo`, `invalid argument "x" for
  "--kube-api-qps" flag: strconv.ParseFloat: parsing "x": invalid syntax`, `flag needs an
  argument: --kubeconfig`.
- A bool flag is declared with `add_bool` (argparse's `nargs="?"`, `type=pflagvalue.boolean`);
  a list or map flag (`strings`, `stringToString`, `--feature-gates`) with `action=Merge`, which
  replaces the default on its first use and adds to it on the next ones, as pflag's do.
- Called by the launcher (`kcm controllers`, `kcm controller`, `kcm dev`) before argparse parses.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from kcm_shared.apimachinery import pflagvalue


class FlagError(Exception):
    """A command line upstream would refuse; the message is upstream's, without its `Error: `."""


def add_bool(group: Any, *names: str, default: bool, help: str | None = None) -> argparse.Action:
    """Declare a pflag bool flag on a parser or argument group."""
    action: argparse.Action = group.add_argument(
        *names,
        type=pflagvalue.boolean,
        nargs="?",
        const=True,
        default=default,
        metavar="true|false",
        help=help,
    )
    return action


def is_bool(action: argparse.Action) -> bool:
    return action.nargs == "?" and action.const is True and action.type is pflagvalue.boolean


class Merge(argparse.Action):
    """A list or map flag used more than once: the first use replaces the default, later uses
    add to it (pflag's StringSlice, StringToString and feature gates)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        seen: set[str] = namespace.__dict__.setdefault("_merged", set())
        current = getattr(namespace, self.dest, None)
        if self.dest not in seen or current is None:
            seen.add(self.dest)
            setattr(namespace, self.dest, values)
        elif isinstance(current, dict):
            setattr(namespace, self.dest, {**current, **values})
        else:
            setattr(namespace, self.dest, [*current, *values])


def normalize(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """`argv` as pflag reads it, written so argparse reads the same: each flag as `--name=value`
    (`--name` alone for one that takes no value, such as `--help`), positionals as they were.
    FlagError for what pflag refuses."""
    actions = parser._option_string_actions
    out: list[str] = []
    words = list(argv)
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if word == "--":
            out += words[i - 1 :]
            break
        if not word.startswith("-") or word == "-":
            out.append(word)
            continue
        if word.startswith("--"):
            name, equals, value = word[2:].partition("=")
            has_value = bool(equals)
            name = name.replace("_", "-")
            option = f"--{name}"
            if not name or option not in actions:
                raise FlagError(f"unknown flag: {option}" if name else f"bad flag syntax: {word}")
        else:
            short, rest = word[1], word[2:]
            option = f"-{short}"
            if option not in actions:
                raise FlagError(f"unknown shorthand flag: '{short}' in {word}")
            has_value, value = bool(rest), rest.removeprefix("=")
        action = actions[option]
        shown = _display(action)
        if action.nargs == 0:
            if has_value:
                raise FlagError(f"flag {shown} takes no value")
            out.append(_long(action))
            continue
        if not has_value:
            if is_bool(action) or action.const is not None:
                value = "true" if is_bool(action) else str(action.const)
            elif i < len(words):
                value = words[i]
                i += 1
            else:
                raise FlagError(f"flag needs an argument: {shown}")
        _check(action, value, shown)
        out.append(f"{_long(action)}={value}")
    return out


def _check(action: argparse.Action, value: str, shown: str) -> None:
    convert: Callable[[str], Any] | None = action.type if callable(action.type) else None
    try:
        parsed = convert(value) if convert is not None else value
    except (ValueError, TypeError, argparse.ArgumentTypeError) as exc:
        raise FlagError(f'invalid argument "{value}" for "{shown}" flag: {exc}') from None
    if action.choices is not None and parsed not in action.choices:
        allowed = ", ".join(map(str, action.choices))
        raise FlagError(f'invalid argument "{value}" for "{shown}" flag: must be one of: {allowed}')


def _long(action: argparse.Action) -> str:
    return max(action.option_strings, key=len)


def _display(action: argparse.Action) -> str:
    """How pflag names a flag in its messages: `--name`, or `-v, --v` with its shorthand."""
    short = [o for o in action.option_strings if len(o) == 2]
    return f"{short[0]}, {_long(action)}" if short else _long(action)
