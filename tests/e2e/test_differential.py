"""tools/differential end to end: the deployment and job scenarios played under upstream
kube-controller-manager and then kcm on one upstream API server (`make upstream`'s binaries).

What kcm writes differently there is listed in tools/differential/known.yaml and
docs/controllers.md; the tool must report those and nothing else: a new difference (or a
scenario that fails) makes it exit 1, and this test with it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


# Two control plane start-ups and two scenarios on each side: about 3.5 minutes on two busy
# cores, more than the suite's default 300 s when the machine is loaded.
@pytest.mark.timeout(900)
def test_deployment_and_job_differ_from_upstream_only_as_documented(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    argv = [sys.executable, "-m", "tools.differential", "deployment", "job"]
    argv += ["--state-dir", str(tmp_path / "state"), "--json", str(report), "--jobs", "2"]
    res = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, f"{res.stdout[-6000:]}\n{res.stderr[-3000:]}"
    doc = json.loads(report.read_text())
    deployment = doc["deployment"]["differences"]
    # The documented difference always shows: kcm's pod-template-hash is another function.
    # Two ReplicaSets are left: revisions 2 and 3 (the rollback made the first one revision 3).
    hashes = [d for d in deployment if "pod-template-hash at rev" in d["line"]]
    assert len(hashes) == 2, deployment
    assert all(d["verdict"] in ("admitted", "bug") for d in deployment)
    assert doc["job"]["differences"] == []
