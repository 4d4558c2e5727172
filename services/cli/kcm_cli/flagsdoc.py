"""docs/flags.md: every flag `kcm controllers` and `kcm controller` accept, in one table.

    .venv/bin/python -m kcm_cli.flagsdoc           # rewrite docs/flags.md
    .venv/bin/python -m kcm_cli.flagsdoc --check   # exit 1 when it is out of date

- Upstream's flags (`upstreamflags.FLAGS`) with their type, default and meaning, and what each
  does here: "takes effect", or "accepted, no effect: <why>" (`upstreamflags.no_effect`);
  kcm's own flags ("ours") with their help.
- tests/unit/cli/test_flagsdoc.py fails when the file and this rendering differ, so the table
  follows the flags and upstream's table (which follows the pinned binary) without drifting.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kcm_shared.runtime import controllerflags, upstreamflags

from kcm_cli import controllers

DOC = Path(__file__).resolve().parents[3] / "docs" / "flags.md"

_HEADER = f"""# Flags

`kcm controllers` and `kcm controller NAME` take every flag of upstream kube-controller-manager
{upstreamflags.VERSION}, read as upstream's pflag reads them: a bool as `--x`, `--x=true` or
`--x=false` (or another strconv.ParseBool spelling), durations as Go writes them (`1m30s`), `_`
for `-` in a name, lists as `--x=a,b` (repeating one adds to it), maps as
`--feature-gates=A=true,B=false`, and never a prefix of a name. A flag nobody declares, or a bad
value, ends the command with upstream's one line (`Error: unknown flag: --foo`) and exit status 1.
`--version` prints kcm's version and the upstream release it follows. `kcm dev` takes the same
flags (except the bus services' own: it sets `--kubeconfig`, `--nats-*` and `--ops-*` itself) and
hands them on to the controllers it starts; with `--reference`, upstream's are handed to
kube-controller-manager.

`--controllers` knows every name and alias of upstream's registry. A controller upstream would
start that kcm does not build is logged once at start (`controller not started`, with the reason:
not built in kcm, a cloud provider controller, or a feature gate that is off); a name nobody
knows ends the command with one line. kubeadm's `*,bootstrapsigner,tokencleaner` and k3s's
`*,-service,-route,-cloud-node-lifecycle` start.

The table is generated (`python -m kcm_cli.flagsdoc`) from the flags `kcm controllers` declares
and upstream's table `shared/kcm_shared/runtime/upstream_flags.json`, itself generated from the
pinned binary's `--help` (`tools/upstream/flags.py`); tests fail when either drifts.

| flag | type | default | upstream's meaning (or ours) | here |
| --- | --- | --- | --- | --- |
"""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def render() -> str:
    p = argparse.ArgumentParser(add_help=True)
    controllerflags.add_arguments(p, controllers.BUILTIN)
    built = [spec.name for spec in controllers.BUILTIN]
    accepted = {
        option
        for group in p._action_groups
        if group.title == upstreamflags.ACCEPTED_GROUP
        for action in group._group_actions
        for option in action.option_strings
    }
    rows = []
    seen: set[str] = set()
    for action in p._actions:
        option = max(action.option_strings, key=len, default="")
        if not option or option in seen:
            continue
        seen.add(option)
        name = option.removeprefix("--")
        flag = upstreamflags.FLAGS.get(name)
        shown = ", ".join(f"`{o}`" for o in sorted(action.option_strings, key=len))
        if flag is None:
            meaning = action.help if action.help != argparse.SUPPRESS else "a test's knob"
            # --instance's default names this host and process: its help says so instead.
            shown_default = action.default not in (None, [], "") and option != "--instance"
            default = f"`{action.default}`" if shown_default else ""
            rows.append((name, f"| {shown} | | {default} | {_cell(meaning or '')} | ours |"))
            continue
        reason = upstreamflags.no_effect(flag, built)
        if option in accepted and reason is None:
            raise ValueError(
                f"{option} is accepted with no effect, and nothing says why (upstreamflags.NO_EFFECT)"
            )
        note = upstreamflags.NOTES.get(name)
        here = (
            f"accepted, no effect: {reason}"
            if reason
            else f"takes effect: {note}"
            if note
            else "takes effect"
        )
        default = f"`{flag.default}`" if flag.default else ""
        rows.append((name, f"| {shown} | {flag.type} | {default} | {_cell(flag.help)} | {_cell(here)} |"))
    missing = set(upstreamflags.FLAGS) - {name for name, _ in rows}
    if missing:
        raise ValueError(f"upstream flags kcm controllers does not declare: {sorted(missing)}")
    return _HEADER + "".join(row + "\n" for _, row in sorted(rows))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="exit 1 when docs/flags.md is out of date")
    args = p.parse_args(argv)
    text = render()
    if not args.check:
        DOC.write_text(text)
        return 0
    if DOC.read_text() != text:
        print(f"{DOC} is out of date: run python -m kcm_cli.flagsdoc", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
