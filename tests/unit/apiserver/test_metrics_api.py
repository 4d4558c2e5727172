"""Derivation of metrics.k8s.io PodMetrics and NodeMetrics from stored pods and nodes."""

from __future__ import annotations

from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import pytest
from kcm_apiserver import metrics_api

NOW = datetime(2026, 11, 22, 8, 0, 0, tzinfo=UTC)


def _pod(
    name: str,
    containers: tuple[str, ...] = ("app",),
    annotations: dict[str, str] | None = None,
    phase: str = "Running",
    node: str = "n1",
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "annotations": annotations or {}}
    if labels:
        meta["labels"] = labels
    return {
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [{"name": c} for c in containers]},
        "status": {"phase": phase},
    }


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("250m", Fraction(1, 4)),
        ("2", Fraction(2)),
        ("1.5", Fraction(3, 2)),
        ("64Mi", Fraction(64 * 2**20)),
        ("1Ki", Fraction(1024)),
        ("1Gi", Fraction(2**30)),
        ("2k", Fraction(2000)),
        ("3M", Fraction(3 * 10**6)),
        ("1G", Fraction(10**9)),
        ("500n", Fraction(500, 10**9)),
    ],
)
def test_parse_quantity_reads_decimal_and_binary_suffixes(text: str, value: Fraction) -> None:
    assert metrics_api.parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1Xi", "m", "1.2.3", "-1"])
def test_parse_quantity_rejects_malformed_text(text: str) -> None:
    with pytest.raises(ValueError):
        metrics_api.parse_quantity(text)


@pytest.mark.parametrize(
    ("cores", "text"),
    [(Fraction(1, 4), "250m"), (Fraction(2), "2000m"), (Fraction(1, 3000), "333333n"), (Fraction(0), "0m")],
)
def test_format_cpu_uses_millicores_or_nanocores(cores: Fraction, text: str) -> None:
    assert metrics_api.format_cpu(cores) == text


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (Fraction(64 * 2**20), "64Mi"),
        (Fraction(2**30), "1Gi"),
        (Fraction(3072), "3Ki"),
        (Fraction(1000), "1000"),
    ],
)
def test_format_memory_uses_largest_dividing_binary_unit(size: Fraction, text: str) -> None:
    assert metrics_api.format_memory(size) == text


@pytest.mark.parametrize(
    ("containers", "annotations", "expected"),
    [
        (("app",), {}, [("app", "1m", "1Mi")]),
        (
            ("app",),
            {"sim.kcm.dev/cpu-usage": "250m", "sim.kcm.dev/memory-usage": "64Mi"},
            [("app", "250m", "64Mi")],
        ),
        (
            ("a", "b"),
            {"sim.kcm.dev/cpu-usage": "500m", "sim.kcm.dev/memory-usage": "64Mi"},
            [("a", "250m", "32Mi"), ("b", "250m", "32Mi")],
        ),
        (
            ("a", "b", "c"),
            {"sim.kcm.dev/cpu-usage": "200m", "sim.kcm.dev/cpu-usage.a": "1"},
            [("a", "1000m", "1Mi"), ("b", "100m", "1Mi"), ("c", "100m", "1Mi")],
        ),
        (("a", "b"), {"sim.kcm.dev/cpu-usage.b": "30m"}, [("a", "1m", "1Mi"), ("b", "30m", "1Mi")]),
        (("app",), {"sim.kcm.dev/cpu-usage": "lots"}, [("app", "1m", "1Mi")]),
    ],
)
def test_pod_metrics_split_annotated_usage_over_containers(
    containers: tuple[str, ...], annotations: dict[str, str], expected: list[tuple[str, str, str]]
) -> None:
    metrics = metrics_api.pod_metrics(_pod("p", containers, annotations), NOW)
    assert metrics is not None
    got = [(c["name"], c["usage"]["cpu"], c["usage"]["memory"]) for c in metrics["containers"]]
    assert got == expected


def test_pod_metrics_report_sidecars_but_not_init_containers() -> None:
    pod = _pod("p", ("app",), {"sim.kcm.dev/cpu-usage": "300m"})
    pod["spec"]["initContainers"] = [
        {"name": "setup", "image": "x"},
        {"name": "proxy", "image": "x", "restartPolicy": "Always"},
    ]
    metrics = metrics_api.pod_metrics(pod, NOW)
    assert metrics is not None
    assert [(c["name"], c["usage"]["cpu"]) for c in metrics["containers"]] == [
        ("app", "150m"),
        ("proxy", "150m"),
    ]


def test_pod_metrics_have_metrics_server_shape() -> None:
    metrics = metrics_api.pod_metrics(_pod("p", labels={"app": "web"}), NOW)
    assert metrics is not None
    assert metrics["kind"] == "PodMetrics"
    assert metrics["apiVersion"] == "metrics.k8s.io/v1beta1"
    assert metrics["metadata"] == {
        "name": "p",
        "namespace": "default",
        "creationTimestamp": "2026-11-22T08:00:00Z",
        "labels": {"app": "web"},
    }
    assert (metrics["timestamp"], metrics["window"]) == ("2026-11-22T08:00:00Z", "10s")


@pytest.mark.parametrize(
    ("phase", "listed"), [("Running", True), ("Pending", False), ("Succeeded", False), ("", False)]
)
def test_only_running_pods_have_metrics(phase: str, listed: bool) -> None:
    pods = [_pod("p", phase=phase)]
    assert (metrics_api.pod_metrics(pods[0], NOW) is not None) == listed
    assert len(metrics_api.all_pod_metrics(pods, NOW)) == int(listed)


def test_node_metrics_sum_running_pods_bound_to_the_node() -> None:
    cpu = "sim.kcm.dev/cpu-usage"
    mem = "sim.kcm.dev/memory-usage"
    pods = [
        _pod("a", annotations={cpu: "250m", mem: "64Mi"}, node="n1"),
        _pod("b", ("x", "y"), annotations={cpu: "100m", mem: "32Mi"}, node="n1"),
        _pod("c", annotations={cpu: "4", mem: "1Gi"}, node="n2"),
        _pod("d", annotations={cpu: "4", mem: "1Gi"}, node="n1", phase="Pending"),
    ]
    nodes = [{"metadata": {"name": n, "labels": {"zone": "z"}}} for n in ("n1", "n2", "n3")]
    got = {m["metadata"]["name"]: m["usage"] for m in metrics_api.all_node_metrics(nodes, pods, NOW)}
    assert got == {
        "n1": {"cpu": "350m", "memory": "96Mi"},
        "n2": {"cpu": "4000m", "memory": "1Gi"},
        "n3": {"cpu": "0m", "memory": "0"},
    }
    node = metrics_api.node_metrics(nodes[0], pods, NOW)
    assert node["kind"] == "NodeMetrics"
    assert node["metadata"] == {
        "name": "n1",
        "creationTimestamp": "2026-11-22T08:00:00Z",
        "labels": {"zone": "z"},
    }
