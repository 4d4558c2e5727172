"""Upstream kube-controller-manager's flags, read from the pinned binary's `--help`, as data.

    python3 tools/upstream/flags.py            # rewrite shared/kcm_shared/runtime/upstream_flags.json
    python3 tools/upstream/flags.py --check    # exit 1 (with a diff) when that file has drifted
    python3 tools/upstream/flags.py --binary PATH

- The binary is the one `tools/upstream/build.py --print-dir` names unless `--binary` is given;
  nothing is built here.
- The data file lists every flag (name, shorthand, pflag type, the default as pflag prints it, the
  help section, the first line of its help), the controllers `--controllers` names (all, and those
  off by default), the feature gates with their stage, default and lock, and the version.
- `--help` lists the alpha and beta gates only. The GA and deprecated ones are found by probing the
  binary (`probe_gates`) with every gate name the Go sources of its release declare
  (`GATE_SOURCES` in the Go module cache; without it, the names the data file already holds):
  `--feature-gates=N=true` and `=false` for all of them at once answer with upstream's warnings
  (`Setting GA feature gate ...`) and lock errors, an unknown name being dropped and the probe run
  again. The default of a gate that is neither listed nor locked comes from the same sources.
- `kcm_shared.runtime.upstreamflags` reads the file; tests/unit/shared/runtime/test_upstreamflags.py
  runs `--check` where the binary is built, so the checked-in table follows the pinned release.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable
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


# Where v1.32's components declare their gates, under the Go module cache (`{kube}` is the
# kubernetes module's version, `{staging}` the matching v0.x of the staging modules).
GATE_SOURCES = (
    "k8s.io/kubernetes@{kube}/pkg/features/kube_features.go",
    "k8s.io/kubernetes@{kube}/pkg/features/versioned_kube_features.go",
    "k8s.io/apiserver@{staging}/pkg/features/kube_features.go",
    "k8s.io/apiextensions-apiserver@{staging}/pkg/features/kube_features.go",
    "k8s.io/client-go@{staging}/features/known_features.go",
    "k8s.io/component-base@{staging}/logs/api/v1/kube_features.go",
    "k8s.io/component-base@{staging}/metrics/features/kube_features.go",
    "k8s.io/component-base@{staging}/zpages/features/kube_features.go",
    "k8s.io/controller-manager@{staging}/pkg/features/kube_features.go",
)
_DECLARED = re.compile(r'\bFeature\s*(?:=\s*"(\w+)"|\("(\w+)"\))')
# A versioned spec list: `Name: {\n {Version: version.MustParse("1.29"), Default: false, ...},\n ...}`.
_VERSIONED = re.compile(r"(\w+):\s*\{((?:\s*\{Version:[^{}]*\},?[^\n]*)+)\s*\}")
_SPEC = re.compile(r'MustParse\("(\d+)\.(\d+)"\),\s*Default:\s*(true|false)')
_WARNED = re.compile(r"Setting (GA|deprecated) feature gate (\w+)=(?:true|false)\.")
_LOCKED = re.compile(r"cannot set feature gate (\w+) to (?:true|false), feature is locked to (true|false)")
_UNKNOWN = re.compile(r"unrecognized feature gate: (\w+)")


def gate_sources(version: str) -> list[str]:
    """The Go source of the files that declare `version`'s gates; [] without the module cache."""
    cache = os.environ.get("GOMODCACHE") or str(Path.home() / "go" / "pkg" / "mod")
    minor_patch = version.removeprefix("v").split(".", 1)[1]
    paths = [Path(cache) / s.format(kube=version, staging=f"v0.{minor_patch}") for s in GATE_SOURCES]
    return [path.read_text() for path in paths if path.exists()]


def declared_gates(sources: Iterable[str]) -> set[str]:
    """Every gate name the sources declare (`X featuregate.Feature = "X"`)."""
    return {a or b for text in sources for a, b in _DECLARED.findall(text)}


def source_default(sources: Iterable[str], name: str, minor: int) -> bool | None:
    """A gate's default at v1.<minor> from its versioned specs, or None when the sources lack it."""
    for text in sources:
        for found in _VERSIONED.finditer(text):
            if found.group(1) != name:
                continue
            specs: list[tuple[int, bool]] = [
                (int(m), d == "true") for _, m, d in _SPEC.findall(found.group(2)) if int(m) <= minor
            ]
            if specs:
                return max(specs)[1]
    return None


def _probe(binary: Path, names: list[str], value: str) -> str:
    done = subprocess.run(
        [str(binary), f"--feature-gates={','.join(f'{n}={value}' for n in names)}", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stderr


def probe_gates(binary: Path, names: Iterable[str]) -> tuple[dict[str, str], dict[str, bool]]:
    """The stage (`GA`, `DEPRECATED`) of each of `names` the binary warns about when it is set,
    and the value of each it locks; names it does not know are left out."""
    left = sorted(set(names) - {"AllAlpha", "AllBeta"})
    stages: dict[str, str] = {}
    locked: dict[str, bool] = {}
    for value in ("true", "false"):
        while left:
            answer = _probe(binary, left, value)
            # Upstream stops at the first unknown name (in Go's map order): drop it and ask again.
            if unknown := _UNKNOWN.search(answer):
                left.remove(unknown.group(1))
                continue
            break
        stages |= {name: stage.upper() for stage, name in _WARNED.findall(answer)}
        locked |= {name: to == "true" for name, to in _LOCKED.findall(answer)}
    return stages, locked


def hidden_gates(binary: Path, version: str, listed: dict[str, Any], known: dict[str, Any]) -> dict[str, Any]:
    """The gates `--help` leaves out (GA, deprecated), and the lock of every gate, by probing
    the binary with the names the sources declare (else those `known` from the data file, whose
    defaults stand in for the sources')."""
    sources = gate_sources(version)
    names = (declared_gates(sources) or set(known)) | set(listed)
    stages, locked = probe_gates(binary, names)
    minor = int(version.removeprefix("v").split(".")[1])
    gates: dict[str, Any] = {}
    for name in sorted(set(listed) | set(stages) | set(locked)):
        if name in listed:
            gates[name] = {**listed[name], "locked": name in locked}
            continue
        default = locked.get(name, source_default(sources, name, minor))
        if default is None and name in known:
            default = known[name]["default"]
        if default is None:
            raise SystemExit(f"flags.py: no default for feature gate {name} in the Go module cache")
        gates[name] = {"stage": stages.get(name, "GA"), "default": default, "locked": name in locked}
    return gates


def read(binary: Path, known_gates: dict[str, Any] | None = None) -> dict[str, Any]:
    """The data file's content for this binary: its help, its version and its feature gates."""
    shown = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60, check=True)
    version = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=60, check=True
    )
    data = parse_help(shown.stdout + shown.stderr)
    release = version.stdout.split()[-1]
    data["feature_gates"] = hidden_gates(binary, release, data["feature_gates"], known_gates or {})
    return {"version": release, **data}


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
    current = args.out.read_text() if args.out.exists() else ""
    known = json.loads(current)["feature_gates"] if current else {}
    text = render(read(args.binary or default_binary(), known))
    if not args.check:
        args.out.write_text(text)
        return 0
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
