"""The pinned upstream binaries: `tools/upstream/build.py` builds them (or finds them in its cache)
and each one says it is the release that tools/upstream/*/go.mod pins.

No skip: without a Go the build script can use, this fails with the script's one-line reason.
The first run on a machine compiles everything; later runs reuse `.upstream/`.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "tools" / "upstream" / "build.py"


def pinned(module: str, go_mod: Path) -> str:
    """The version a go.mod requires `module` at, read here rather than through the build script."""
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)} (v\S+)", go_mod.read_text(), re.MULTILINE)
    assert match, f"{go_mod} does not require {module}"
    return match.group(1)


KUBERNETES = pinned("k8s.io/kubernetes", ROOT / "tools" / "upstream" / "kubernetes" / "go.mod")
ETCD = pinned("go.etcd.io/etcd/server/v3", ROOT / "tools" / "upstream" / "etcd" / "go.mod")


def version_output(binary: Path, *args: str) -> str:
    result = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, (
        f"{binary.name} {' '.join(args)} exited {result.returncode}: {result.stderr}"
    )
    return result.stdout.strip()


# With empty Go caches the build compiles all of Kubernetes' server code: about 11 minutes on two
# busy cores when measured, 40 s with warm caches, well under a second when .upstream/ is current.
@pytest.mark.timeout(1800)
def test_each_binary_reports_the_pinned_version() -> None:
    build = subprocess.run([sys.executable, str(BUILD)], capture_output=True, text=True, timeout=1750)
    reason = (build.stderr.strip().splitlines() or ["(nothing on stderr)"])[-1]
    assert build.returncode == 0, f"build.py exited {build.returncode}: {reason}"
    bin_dir = Path(build.stdout.strip())
    assert bin_dir == ROOT / ".upstream" / f"{KUBERNETES}-{ETCD}" / "bin"

    for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        assert version_output(bin_dir / name, "--version") == f"Kubernetes {KUBERNETES}", name
        # version.Info{Major:"1", Minor:"32", GitVersion:"v1.32.13", ...}: what `kubectl version` shows.
        info = dict(re.findall(r'(\w+):"([^"]*)"', version_output(bin_dir / name, "--version=raw")))
        major, minor = KUBERNETES.removeprefix("v").split(".")[:2]
        got = (info.get("GitVersion"), info.get("Major"), info.get("Minor"))
        assert got == (KUBERNETES, major, minor), (name, info)

    etcd = version_output(bin_dir / "etcd", "--version").splitlines()
    assert etcd[0] == f"etcd Version: {ETCD.removeprefix('v')}"

    # A second run reuses the cache and names the same directory.
    again = subprocess.run(
        [sys.executable, str(BUILD), "--print-dir"], capture_output=True, text=True, timeout=60
    )
    assert (again.returncode, again.stdout.strip()) == (0, str(bin_dir)), again.stderr
