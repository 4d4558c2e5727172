"""bench/side_by_side.py at a tiny size: it runs both controller managers on kube-apiserver and
prints a complete table, kcm beside upstream with their ratio. Its figures are not checked: on a
shared machine they say nothing, and the benchmark's own exit status covers failed runs.

One scenario (the Service over churning pods: watches, the simulator's readiness annotation and
kube-apiserver's metrics) at one limit: two fresh stacks, about a minute and a half."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "side_by_side.py"
ARGS = [
    "--scenarios",
    "service",
    "--limits",
    "default",
    "--service-pods",
    "20",
    "--waves",
    "2",
    "--timeout",
    "120",
]


def test_the_benchmark_prints_both_sides_and_their_ratios() -> None:
    run = subprocess.run([sys.executable, str(BENCH), *ARGS], capture_output=True, text=True, timeout=280)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = run.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("service "))
    assert "default limits" in lines[header]
    assert lines[header + 1].split() == ["upstream", "kcm", "kcm/up"]
    rows = {line[:52].strip(): line[52:].split() for line in lines[header + 2 :] if line[52:].strip()}
    for label in (
        "churn: pod changes",
        "churn: EndpointSlice writes per change",
        "churn: Endpoints writes per change",
        "fill: EndpointSlice writes per pod",
        "controller manager, all its processes",
        "kube-apiserver",
        "etcd",
        "kcm sim",
    ):
        upstream, kcm, ratio = rows[label]
        assert float(upstream) > 0 and float(kcm) > 0, (label, rows[label])
        # Of the unrounded figures: the printed ones are rounded to a few digits.
        assert float(ratio) == pytest.approx(float(kcm) / float(upstream), rel=0.1), (label, rows[label])
    # Each side's own processes: the reference's one, kcm's four.
    assert rows["kube-controller-manager"][1] == "n/a" and rows["kcm controllers"][0] == "n/a"
    assert {"kcm watcher", "kcm coordinator", "nats-server"} <= rows.keys()
