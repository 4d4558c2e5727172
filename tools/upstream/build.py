"""Build the pinned upstream kube-apiserver, kube-controller-manager, kube-scheduler and etcd.

`make upstream` runs this. The versions are the ones `tools/upstream/kubernetes/go.mod` and
`tools/upstream/etcd/go.mod` pin; the Go module proxy supplies the source, as PyPI supplies a wheel,
and nothing upstream is kept in this repository. The binaries land in a git-ignored cache,
`.upstream/<kubernetes>-<etcd>/bin/`, whose path is the one line this script prints on stdout
(progress goes to stderr). A later run reuses them while the stamp beside them matches: the two
versions and a hash of both go.mod/go.sum pairs and of this script, so a pin change or a change to
the recipe rebuilds; a newer Go alone does not (the stamp records which Go built them).

    python3 tools/upstream/build.py              # build unless current; print the bin dir
    python3 tools/upstream/build.py --print-dir  # print the bin dir if current, else fail; never build
    python3 tools/upstream/build.py --force      # rebuild even if current

The recipe follows upstream's release builds (kubernetes' hack/lib/golang.sh and version.sh):
static (CGO_ENABLED=0), `-trimpath`, `-ldflags "-s -w -X ..."` setting the version variables of
k8s.io/component-base/version and k8s.io/client-go/pkg/version, tags `selinux,notest`. The build
date is the release's own time from the module proxy (SOURCE_DATE_EPOCH's role), so two builds of
one pin give the same bytes; `-buildvcs=false` keeps this repository's commit out of them. The git
commit is left empty, as the proxy does not say which commit a release tag is, and the tree state
is `archive`, upstream's word for a build from a source archive. etcd's version is a constant in
its module, so its build sets nothing (its Git SHA reads "Not provided").

Go is looked for in $GO, then on PATH, then at /usr/local/go/bin/go. A missing Go, or one older than
a go.mod's `go` line, ends the script with one line on stderr and exit status 1. Unless GOTOOLCHAIN
is set, the build runs with GOTOOLCHAIN=local so Go never fetches another toolchain by itself.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CACHE = ROOT / ".upstream"
KUBERNETES_MODULE = HERE / "kubernetes"
ETCD_MODULE = HERE / "etcd"

KUBERNETES_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
ETCD_PACKAGE = "go.etcd.io/etcd/server/v3"
BINARIES = (*KUBERNETES_COMMANDS, "etcd")

# Staging replaces that may differ from the release's v0.<minor>.<patch>, keyed by (module, version)
# so a new pin has to look again. Why each is safe is written beside it in kubernetes/go.mod.
STAGING_EXCEPTIONS = {("k8s.io/endpointslice", "v0.32.12"): "v1.32.13"}

KUBERNETES_TAGS = "selinux,notest"
COMMON_FLAGS = ("-trimpath", "-buildvcs=false")
VERSION_PACKAGES = ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")


class BuildError(Exception):
    """A failure worth one line on stderr rather than a traceback."""


@dataclass(frozen=True)
class GoMod:
    go: tuple[int, int, int]
    requires: dict[str, str]
    replaces: dict[str, str]


@dataclass(frozen=True)
class Pins:
    kubernetes: str
    etcd: str
    min_go: tuple[int, int, int]
    inputs_sha256: str

    @property
    def directory(self) -> Path:
        return CACHE / f"{self.kubernetes}-{self.etcd}"

    @property
    def bin_dir(self) -> Path:
        return self.directory / "bin"

    def stamp(self) -> dict[str, object]:
        return {
            "kubernetes": self.kubernetes,
            "etcd": self.etcd,
            "inputs_sha256": self.inputs_sha256,
        }


def parse_version(text: str) -> tuple[int, int, int] | None:
    """(1, 26, 8) from "1.26.8", "go1.26.8", "1.26" or "go1.26rc1"; None if there is no version."""
    match = re.match(r"(?:go)?(\d+)\.(\d+)(?:\.(\d+))?", text)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def dotted(version: tuple[int, int, int]) -> str:
    return ".".join(map(str, version))


def read_go_mod(path: Path) -> GoMod:
    """The `go` line, requirements and replacements of a go.mod (the subset of the syntax go writes)."""
    go: tuple[int, int, int] | None = None
    requires: dict[str, str] = {}
    replaces: dict[str, str] = {}
    block = ""
    for raw in path.read_text().splitlines():
        line = raw.split("//", 1)[0].strip()
        if not line:
            continue
        if line == ")":
            block = ""
            continue
        words = line.split()
        if words[-1] == "(":
            block = words[0]
            continue
        if block:
            words = [block, *words]
        if words[0] == "go" and len(words) == 2:
            go = parse_version(words[1])
        elif words[0] == "require" and len(words) == 3:
            requires[words[1]] = words[2]
        elif words[0] == "replace" and "=>" in words:
            arrow = words.index("=>")
            replaces[words[1]] = " ".join(words[arrow + 1 :])
    if go is None:
        raise BuildError(f"{path}: no `go` line")
    return GoMod(go=go, requires=requires, replaces=replaces)


def read_pins() -> Pins:
    kubernetes_mod = read_go_mod(KUBERNETES_MODULE / "go.mod")
    etcd_mod = read_go_mod(ETCD_MODULE / "go.mod")
    kubernetes = kubernetes_mod.requires.get("k8s.io/kubernetes")
    etcd = etcd_mod.requires.get(ETCD_PACKAGE)
    if kubernetes is None or etcd is None:
        raise BuildError("tools/upstream/*/go.mod must require k8s.io/kubernetes and " + ETCD_PACKAGE)
    check_staging(kubernetes, kubernetes_mod.replaces)
    digest = hashlib.sha256()
    inputs = [module / name for module in (KUBERNETES_MODULE, ETCD_MODULE) for name in ("go.mod", "go.sum")]
    for path in [*inputs, Path(__file__).resolve()]:
        digest.update(f"{path.relative_to(HERE)}\0".encode())
        digest.update(path.read_bytes())
    return Pins(
        kubernetes=kubernetes,
        etcd=etcd,
        min_go=max(kubernetes_mod.go, etcd_mod.go),
        inputs_sha256=digest.hexdigest(),
    )


def check_staging(kubernetes: str, replaces: dict[str, str]) -> None:
    """Each k8s.io staging module must be replaced by its own release of the pinned version."""
    wanted = "v0." + kubernetes.removeprefix("v1.")
    for module, target in sorted(replaces.items()):
        if not module.startswith("k8s.io/"):
            continue
        path, _, version = target.partition(" ")
        if path != module:
            raise BuildError(
                f"kubernetes/go.mod: {module} is replaced by {target}, not by a release of itself"
            )
        if version != wanted and STAGING_EXCEPTIONS.get((module, version)) != kubernetes:
            raise BuildError(
                f"kubernetes/go.mod: {module} is replaced by {version}, but k8s.io/kubernetes {kubernetes} "
                f"goes with {wanted}"
            )


def find_go(min_go: tuple[int, int, int]) -> str:
    chosen = os.environ.get("GO")
    if chosen:
        if not (os.access(chosen, os.X_OK) and os.path.isfile(chosen)):
            raise BuildError(f"GO={chosen} is not an executable file")
        return chosen
    for candidate in (shutil.which("go"), "/usr/local/go/bin/go"):
        if candidate and os.access(candidate, os.X_OK) and os.path.isfile(candidate):
            return candidate
    raise BuildError(
        "Go not found (on PATH or at /usr/local/go/bin/go); "
        f"building the upstream binaries needs Go {dotted(min_go)} or newer"
    )


def go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("GOTOOLCHAIN", "local")
    env.update({"CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly", "GOWORK": "off"})
    return env


def check_go(go: str, min_go: tuple[int, int, int], env: dict[str, str]) -> str:
    """`go env GOVERSION`, after making sure it is at least every go.mod's `go` line."""
    wanted = dotted(min_go)
    try:
        result = subprocess.run(
            [go, "env", "GOVERSION"], env=env, capture_output=True, text=True, timeout=300, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise BuildError(
            f"{go} does not run ({error}); building the upstream binaries needs Go {wanted}"
        ) from None
    version = result.stdout.strip()
    if result.returncode != 0 or not version:
        detail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise BuildError(
            f"`{go} env GOVERSION` failed ({detail}); building the upstream binaries needs Go {wanted}"
        )
    have = parse_version(version)
    if have is not None and have < min_go:
        raise BuildError(f"{go} is {version}; building the upstream binaries needs Go {wanted} or newer")
    return version


def module_time(go: str, env: dict[str, str], module: str) -> str:
    """The release's time as the module proxy gives it, e.g. 2026-02-27T00:14:55Z."""
    result = run([go, "list", "-m", "-json", module], env, KUBERNETES_MODULE, capture=True)
    stamp = json.loads(result).get("Time")
    if not isinstance(stamp, str) or not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stamp):
        raise BuildError(f"`go list -m -json {module}` gave no UTC Time to date the build with: {stamp!r}")
    return stamp


def kubernetes_ldflags(version: str, build_date: str) -> str:
    parsed = parse_version(version.removeprefix("v"))
    if parsed is None:
        raise BuildError(f"k8s.io/kubernetes {version} is not a vMAJOR.MINOR.PATCH release")
    major, minor, _ = parsed
    values = {
        "gitVersion": version,
        "gitMajor": str(major),
        "gitMinor": str(minor),
        "buildDate": build_date,
        "gitCommit": "",
        "gitTreeState": "archive",
    }
    flags = ["-s", "-w"]
    for package in VERSION_PACKAGES:
        flags += [f"-X={package}.{key}={value}" for key, value in values.items()]
    return " ".join(flags)


def run(command: list[str], env: dict[str, str], cwd: Path, capture: bool = False) -> str:
    print("+ " + " ".join(command), file=sys.stderr, flush=True)
    result = subprocess.run(
        command, env=env, cwd=cwd, stdout=subprocess.PIPE if capture else sys.stderr, check=False, text=True
    )
    if result.returncode != 0:
        raise BuildError(
            f"`{' '.join(command[:3])} ...` in {cwd.relative_to(ROOT)} exited {result.returncode}"
        )
    return result.stdout if capture else ""


def version_output(binary: Path, flag: str) -> str:
    try:
        result = subprocess.run([str(binary), flag], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise BuildError(f"{binary.name} {flag} did not run: {error}") from None
    return result.stdout.strip()


def check_versions(bin_dir: Path, pins: Pins) -> None:
    """Each binary must say it is the pinned release, as `--version` and as `kubectl version` sees it."""
    major, minor = pins.kubernetes.removeprefix("v").split(".")[:2]
    for name in KUBERNETES_COMMANDS:
        printed = version_output(bin_dir / name, "--version")
        if printed != f"Kubernetes {pins.kubernetes}":
            raise BuildError(f"{name} --version printed {printed!r}, not 'Kubernetes {pins.kubernetes}'")
        raw = version_output(bin_dir / name, "--version=raw")
        for field, value in (("Major", major), ("Minor", minor), ("GitVersion", pins.kubernetes)):
            if f'{field}:"{value}"' not in raw:
                raise BuildError(f"{name} --version=raw printed {raw!r}, without {field}:{value!r}")
    etcd = version_output(bin_dir / "etcd", "--version").splitlines()
    if not etcd or etcd[0] != f"etcd Version: {pins.etcd.removeprefix('v')}":
        raise BuildError(
            f"etcd --version printed {etcd!r}, not 'etcd Version: {pins.etcd.removeprefix('v')}'"
        )


def is_current(pins: Pins) -> bool:
    try:
        stamp = json.loads((pins.directory / "stamp.json").read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(stamp, dict) or stamp.get("key") != pins.stamp():
        return False
    return all((pins.bin_dir / name).is_file() for name in BINARIES)


@contextlib.contextmanager
def locked() -> Iterator[None]:
    """One build at a time (pytest workers, a parallel `make upstream`)."""
    CACHE.mkdir(exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def build(pins: Pins) -> None:
    go = find_go(pins.min_go)
    env = go_env()
    go_version = check_go(go, pins.min_go, env)
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix=".build-", dir=CACHE))
    try:
        staged = scratch / "bin"
        staged.mkdir()
        ldflags = kubernetes_ldflags(pins.kubernetes, module_time(go, env, "k8s.io/kubernetes"))
        packages = [f"k8s.io/kubernetes/cmd/{name}" for name in KUBERNETES_COMMANDS]
        command = [go, "build", "-o", f"{staged}/", *COMMON_FLAGS, f"-tags={KUBERNETES_TAGS}"]
        run([*command, f"-ldflags={ldflags}", *packages], env, KUBERNETES_MODULE)
        kubernetes_seconds = time.monotonic() - started
        command = [go, "build", "-o", str(staged / "etcd"), *COMMON_FLAGS, "-ldflags=-s -w", ETCD_PACKAGE]
        run(command, env, ETCD_MODULE)
        check_versions(staged, pins)
        seconds = time.monotonic() - started
        stamp = {
            "key": pins.stamp(),
            "go": go_version,
            "kubernetes_seconds": round(kubernetes_seconds, 1),
            "total_seconds": round(seconds, 1),
        }
        (scratch / "stamp.json").write_text(json.dumps(stamp, indent=2) + "\n")
        shutil.rmtree(pins.directory, ignore_errors=True)
        scratch.rename(pins.directory)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"built {', '.join(BINARIES)} with {go_version} in {seconds:.0f}s", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--print-dir", action="store_true", help="print the bin dir if it is current; never build"
    )
    mode.add_argument("--force", action="store_true", help="rebuild even if the cache is current")
    args = parser.parse_args(argv)
    name = "tools/upstream/build.py"
    try:
        pins = read_pins()
        if args.print_dir:
            if not is_current(pins):
                raise BuildError(f"no current build in {pins.bin_dir.relative_to(ROOT)}; run `make upstream`")
        else:
            with locked():
                if args.force or not is_current(pins):
                    build(pins)
    except BuildError as error:
        print(f"{name}: {error}", file=sys.stderr)
        return 1
    print(pins.bin_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
