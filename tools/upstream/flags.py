"""Upstream kube-controller-manager's flags, read from the pinned binary's `--help`, as data.

    python3 tools/upstream/flags.py            # rewrite shared/kcm_shared/runtime/upstream_flags.json
    python3 tools/upstream/flags.py --check    # exit 1 (with a diff) when that file has drifted
    python3 tools/upstream/flags.py --binary PATH

- The binary is the one `tools/upstream/build.py --print-dir` names unless `--binary` is given;
  nothing is built here.
- The data file lists every flag (name, shorthand, pflag type, the default as pflag prints it, the
  help section, the first line of its help), the controllers `--controllers` names (all, and those
  off by default), the feature gates with their stage and default, and the version.
- `kcm_shared.runtime.upstreamflags` reads the file; tests/unit/shared/runtime/test_upstreamflags.py
  runs `--check` where the binary is built, so the checked-in table follows the pinned release.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "shared" / "kcm_shared" / "runtime" / "upstream_flags.json"

_SECTION = re.compile(r"^(\S.*) flags:$")
# `      --name type   help` or `  -v, --v Level   help`; a bool flag has no type word.
_FLAG = re.compile(r"^\s+(?:-(?P<short>\w), )?--(?P<name>[a-z0-9-]+)(?: (?P<type>\S+))?\s{2,}(?P<help>.*)$")
_DEFAULT = re.compile(r"\s*\(default (.*)\)\s*$")
_GATE = re.compile(r"^\s+kube:(\w+)=true\|false \((\w+) - default=(true|false)\)")
_CONTROLLERS = re.compile(
    r"^\s+(All controllers|Disabled-by-default controllers): (.*?)(?: \(default .*\))?$"
)
# pflag leaves a zero default out of the help; these are the zero values it would print.
_ZERO = {
    "bool": "false",
    "duration": "0s",
    "int": "0",
    "int32": "0",
    "float": "0",
    "float32": "0",
    "Level": "0",
    "quantity": "0",
    "strings": "[]",
}


def parse_help(text: str) -> dict[str, Any]:
    """The data file's content from `kube-controller-manager --help`."""
    flags: list[dict[str, str]] = []
    gates: dict[str, dict[str, Any]] = {}
    controllers: dict[str, list[str]] = {}
    section = ""
    for line in text.splitlines():
        if header := _SECTION.match(line):
            section = header.group(1)
            continue
        if gate := _GATE.match(line):
            gates[gate.group(1)] = {"stage": gate.group(2), "default": gate.group(3) == "true"}
            continue
        flag = _FLAG.match(line)
        if flag is None:
            if names := _CONTROLLERS.match(line):
                key = "all" if names.group(1) == "All controllers" else "disabled_by_default"
                controllers[key] = [name.strip() for name in names.group(2).split(",")]
            if flags and "(default " in line:
                # A multi-line help whose default comes on its last line (--controllers).
                flags[-1]["default"] = _default(line, flags[-1]["type"])
            continue
        kind = flag.group("type") or "bool"
        help_text = flag.group("help")
        entry = {
            "name": flag.group("name"),
            "shorthand": flag.group("short") or "",
            "type": kind,
            "default": _default(help_text, kind),
            "section": section,
            "help": _DEFAULT.sub("", help_text).strip(),
        }
        flags.append(entry)
    return {
        "flags": sorted(flags, key=lambda f: f["name"]),
        "controllers": controllers,
        "feature_gates": dict(sorted(gates.items())),
    }


def _default(help_text: str, kind: str) -> str:
    found = _DEFAULT.search(help_text)
    if found is None:
        return _ZERO.get(kind, "")
    value = found.group(1)
    return value[1:-1] if value.startswith('"') and value.endswith('"') else value


def read(binary: Path) -> dict[str, Any]:
    """The data file's content for this binary: its help and its version."""
    shown = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60, check=True)
    version = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=60, check=True
    )
    data = parse_help(shown.stdout + shown.stderr)
    return {"version": version.stdout.split()[-1], **data}


def render(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, sort_keys=False) + "\n"


def default_binary() -> Path:
    found = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "upstream" / "build.py"), "--print-dir"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if found.returncode != 0:
        raise SystemExit(
            "flags.py: the upstream binaries are not built (run `make upstream`) and no --binary given"
        )
    return Path(found.stdout.strip()) / "kube-controller-manager"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--binary", type=Path, help="kube-controller-manager to read (default: the pinned build)")
    p.add_argument(
        "--check", action="store_true", help="compare with the checked-in file instead of writing it"
    )
    p.add_argument("--out", type=Path, default=OUT, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    text = render(read(args.binary or default_binary()))
    if not args.check:
        args.out.write_text(text)
        return 0
    current = args.out.read_text() if args.out.exists() else ""
    if current == text:
        return 0
    sys.stdout.writelines(
        difflib.unified_diff(current.splitlines(True), text.splitlines(True), str(args.out), "--help")
    )
    print(
        f"{args.out} differs from the binary's --help: run python3 tools/upstream/flags.py", file=sys.stderr
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
