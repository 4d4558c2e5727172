"""The HPA's replica calculator against upstream's replica_calculator_test.go table rows.

Upstream's harness: one request of 1.0 cpu per pod (two containers there, one here: the
ratios are the same), pods Ready since their start time, a start time far in the past
("cool") unless "hot" (now), a 2 min CPU initialization period, a 10 s readiness delay, a
0.1 tolerance, and samples taken now over a 1 min window.
"""

from __future__ import annotations

import datetime as dt

import msgspec
import pytest
from kcm_controllers.podautoscaler import controller as horizontal
from kcm_controllers.podautoscaler import replica_calculator as calc

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
COOL = NOW - dt.timedelta(minutes=3)
HOT = NOW
SETTINGS = calc.Settings(
    tolerance=0.1,
    cpu_initialization_period=dt.timedelta(minutes=2),
    initial_readiness_delay=dt.timedelta(seconds=10),
)


def run(
    current: int,
    levels: list[int],
    target: int,
    *,
    readiness: list[str] | None = None,
    phases: list[str] | None = None,
    starts: list[dt.datetime] | None = None,
    deleted: list[bool] | None = None,
    pods: int | None = None,
    resource: str = "cpu",
) -> tuple[int, int, int]:
    count = pods if pods is not None else len(levels)
    infos = []
    for i in range(count):
        start = starts[i] if starts else COOL
        infos.append(
            calc.PodInfo(
                name=f"pod-{i}",
                phase=phases[i] if phases else "Running",
                deleted=deleted[i] if deleted else False,
                start_time=start,
                ready=(readiness[i] if readiness else "True", start),
                requests={"c": {resource: 1000}},
            )
        )
    samples = {f"pod-{i}": calc.Sample(level, NOW, dt.timedelta(minutes=1)) for i, level in enumerate(levels)}
    return calc.resource_replicas(current, target, resource, infos, samples, SETTINGS, NOW)


@pytest.mark.parametrize(
    ("name", "current", "levels", "target", "options", "want"),
    [
        ("ScaleUp", 3, [300, 500, 700], 30, {}, (5, 50, 500)),
        (
            "ScaleUpUnreadyLessScale",
            3,
            [300, 500, 700],
            30,
            {"readiness": ["False", "True", "True"]},
            (4, 60, 600),
        ),
        ("ScaleUpHotCpuLessScale", 3, [300, 500, 700], 30, {"starts": [HOT, COOL, COOL]}, (4, 60, 600)),
        (
            "ScaleUpUnreadyNoScale",
            3,
            [400, 500, 700],
            30,
            {"readiness": ["True", "False", "False"]},
            (3, 40, 400),
        ),
        (
            "ScaleHotCpuNoScale",
            3,
            [400, 500, 700],
            30,
            {"readiness": ["True", "False", "False"], "starts": [COOL, HOT, HOT]},
            (3, 40, 400),
        ),
        (
            "ScaleUpIgnoresFailedPods",
            2,
            [500, 700],
            30,
            {
                "readiness": ["True", "True", "False", "False"],
                "phases": ["Running"] * 2 + ["Failed"] * 2,
                "pods": 4,
            },
            (4, 60, 600),
        ),
        (
            "ScaleUpIgnoresDeletionPods",
            2,
            [500, 700],
            30,
            {
                "readiness": ["True", "True", "False", "False"],
                "deleted": [False, False, True, True],
                "pods": 4,
            },
            (4, 60, 600),
        ),
        ("ScaleDown", 5, [100, 300, 500, 250, 250], 50, {}, (3, 28, 280)),
        (
            "ScaleDownIncludeUnreadyPods",
            5,
            [100, 300, 500, 250, 250],
            50,
            {"readiness": ["True", "True", "True", "False", "False"]},
            (2, 30, 300),
        ),
        (
            "ScaleDownExcludeUnscheduledPods",
            5,
            [100],
            50,
            {"readiness": ["True"] + ["False"] * 4, "phases": ["Running"] + ["Pending"] * 4, "pods": 5},
            (1, 10, 100),
        ),
        (
            "ScaleDownIgnoreHotCpuPods",
            5,
            [100, 300, 500, 250, 250],
            50,
            {"starts": [COOL, COOL, COOL, HOT, HOT]},
            (2, 30, 300),
        ),
        ("Tolerance", 3, [1020, 1010, 1030], 100, {}, (3, 102, 1020)),
        # Missing metrics below target count at 100% of their request (upstream MissingMetrics).
        ("MissingMetrics", 4, [400, 95], 100, {"pods": 4}, (3, 24, 247)),
        # Above target they count as idle: here that flips the direction, so no change.
        ("MissingMetricsWouldReverse", 4, [900, 900], 50, {"pods": 4}, (4, 90, 900)),
        # Exactly at target they are left out: the ratio stays 1, no change (not a scale-down).
        ("MissingMetricsAtTarget", 4, [500, 500], 50, {"pods": 4}, (4, 50, 500)),
    ],
)
def test_resource_replicas_table(
    name: str, current: int, levels: list[int], target: int, options: dict, want: tuple[int, int, int]
) -> None:
    assert run(current, levels, target, **options) == want, name


@pytest.mark.parametrize(
    ("levels", "options", "message"),
    [
        ([], {"pods": 0}, "no pods returned by selector while calculating replica count"),
        (
            [100],
            {"readiness": ["False"], "starts": [HOT]},
            "did not receive metrics for targeted pods (pods might be unready)",
        ),
    ],
)
def test_resource_replicas_errors(levels: list[int], options: dict, message: str) -> None:
    with pytest.raises(calc.CalculationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run(1, levels, 50, **options)


def test_missing_request_names_the_container() -> None:
    pod = calc.PodInfo(name="p", start_time=COOL, ready=("True", COOL), requests={"c": {}})
    samples = {"p": calc.Sample(100, NOW)}
    with pytest.raises(calc.CalculationError, match="missing request for cpu in container c of Pod p"):
        calc.resource_replicas(1, 50, "cpu", [pod], samples, SETTINGS, NOW)


def test_memory_ignores_cpu_readiness_rules() -> None:
    # A hot, unready pod still counts for memory (upstream checks readiness for cpu only).
    assert run(2, [800, 800], 40, readiness=["False", "False"], starts=[HOT, HOT], resource="memory")[0] == 4


@pytest.mark.parametrize(
    ("current", "levels", "target", "want"),
    [
        ("3", [20000, 10000, 30000], 15000, (4, 20000)),  # upstream ScaleUpCM (same arithmetic)
        ("5", [12000] * 5, 20000, (3, 12000)),  # upstream ScaleDownCM
    ],
)
def test_raw_resource_replicas(current: str, levels: list[int], target: int, want: tuple[int, int]) -> None:
    infos = [calc.PodInfo(name=f"p{i}", start_time=COOL, ready=("True", COOL)) for i in range(len(levels))]
    samples = {f"p{i}": calc.Sample(v, NOW) for i, v in enumerate(levels)}
    assert calc.raw_resource_replicas(int(current), target, "memory", infos, samples, SETTINGS, NOW) == want


def _pod_with_sidecar(sidecar_requests: dict[str, str]) -> calc.PodInfo:
    doc = {
        "metadata": {"name": "p"},
        "spec": {
            "containers": [{"name": "app", "resources": {"requests": {"cpu": "100m"}}}],
            "initContainers": [
                {"name": "setup", "resources": {"requests": {"cpu": "1"}}},  # done before the app
                {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": sidecar_requests}},
            ],
        },
    }
    return horizontal.pod_info(msgspec.json.decode(msgspec.json.encode(doc), type=horizontal.PodView))


@pytest.mark.parametrize(
    ("container", "want"), [("", {"p": 120}), ("app", {"p": 100}), ("proxy", {"p": 20}), ("setup", {"p": 0})]
)
def test_sidecar_requests_count_as_upstreams_calculate_pod_requests(
    container: str, want: dict[str, int]
) -> None:
    assert calc.pod_requests([_pod_with_sidecar({"cpu": "20m"})], "cpu", container) == want


def test_sidecar_without_the_request_is_a_missing_request() -> None:
    with pytest.raises(calc.CalculationError, match="missing request for cpu in container proxy of Pod p"):
        calc.pod_requests([_pod_with_sidecar({})], "cpu")
