"""bench/side_by_side.py's flags and table, on made-up outcomes (the benchmark itself runs in
tests/e2e/test_bench_side_by_side.py)."""

from __future__ import annotations

import math
from collections import Counter

import benchlib
import pytest
import side_by_side as sbs
from benchlib import apimetrics


def outcome(
    pods_per_s: float, controller_cpu: dict[str, float], pod_writes: int, per: int = 100
) -> sbs.Outcome:
    usage = benchlib.Usage(seconds=10.0, stolen_percent=1.0)
    usage.cpu = {**controller_cpu, "kube-apiserver": 2.0, "etcd": 1.0}
    usage.rss = {name: (1024.0, 2048.0) for name in controller_cpu}
    figures = {"pods/s": pods_per_s, "pods created": per}
    writes = apimetrics.Writes(
        Counter({("pods", "201"): pod_writes, ("events", "201"): 10, ("events", "409"): 10})
    )
    return sbs.Outcome(figures=figures, usage=usage, writes=writes, per=per)


def cells(lines: list[str], label: str) -> list[str]:
    """The cells of the first row so labelled."""
    line = next(line for line in lines if line[: sbs.LABEL_WIDTH].strip() == label)
    return line[sbs.LABEL_WIDTH :].split()


def test_the_defaults_are_the_issues_sizes() -> None:
    args = sbs.parse_args([])
    assert (args.pods, args.job_completions, args.job_parallelism, args.service_pods) == (
        3000,
        2000,
        200,
        5000,
    )
    assert args.scenarios == ["deployment", "job", "service"] and args.limits == ["default", "lifted"]
    with pytest.raises(SystemExit):
        sbs.parse_args(["--scenarios", "deployment,nothing"])


def test_each_side_and_limit_runs_its_own_stack_flags() -> None:
    assert sbs.Config("upstream", "default").dev_args() == ["--reference"]
    assert sbs.Config("kcm", "default").dev_args() == []
    lifted = sbs.Config("kcm", "lifted", 1000, 2000).dev_args()
    assert lifted == ["--kube-api-qps", "1000", "--kube-api-burst", "2000"]


def test_the_table_puts_kcm_beside_upstream_with_their_ratio_per_limit() -> None:
    upstream = {"kube-controller-manager": 1.0}
    kcm = {"kcm controllers": 2.0, "kcm watcher": 0.5, "kcm coordinator": 0.1, "nats-server": 0.4}
    outcomes = {
        ("upstream", "default"): outcome(20.0, upstream, 200),
        ("kcm", "default"): outcome(15.0, kcm, 300),
        ("upstream", "lifted"): outcome(400.0, upstream, 200),
        # A run that failed: its figures are n/a, the table still complete.
        ("kcm", "lifted"): sbs.Outcome(problems=["kcm dev did not become ready"]),
    }
    lines = sbs.table("deployment", outcomes, ["default", "lifted"])
    assert "default limits" in lines[0] and "lifted limits" in lines[0]
    assert lines[1].split() == ["upstream", "kcm", "kcm/up"] * 2
    assert cells(lines, "pods/s") == ["20.0", "15.0", "0.75", "400", "n/a", "n/a"]
    assert cells(lines, "pods created") == ["100", "100", "1.00", "100", "n/a", "n/a"]
    # kube-apiserver's write requests per pod, refused ones included.
    assert cells(lines, "all resources") == ["2.20", "3.20", "1.45", "2.20", "n/a", "n/a"]
    assert cells(lines, "pods")[:3] == ["2.00", "3.00", "1.50"]
    assert cells(lines, "events")[:3] == ["0.20", "0.20", "1.00"]
    # CPU ms per pod: the controller manager's processes summed, each shown without a ratio.
    assert cells(lines, sbs.CM_SUM)[:3] == ["10.0", "30.0", "3.00"]
    assert cells(lines, "kcm watcher")[:2] == ["n/a", "5.00"]
    assert cells(lines, "kube-apiserver")[:3] == ["20.0", "20.0", "1.00"]
    assert cells(lines, "all of them")[:3] == ["40.0", "60.0", "1.50"]
    # Peak RSS: 2 MiB per process.
    (rss,) = [i for i, line in enumerate(lines) if "peak RSS" in line]
    assert cells(lines[rss:], sbs.CM_SUM)[:3] == ["2.00", "8.00", "4.00"]


def test_figures_get_the_decimals_their_size_deserves() -> None:
    assert [sbs.number(v) for v in (1234.5, 12.34, 1.234, 0.01234, 7, math.nan)] == [
        "1,234",
        "12.3",
        "1.23",
        "0.012",
        "7",
        "n/a",
    ]
