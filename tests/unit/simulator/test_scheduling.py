"""The simulator's scheduling predicates: selectors, affinity, taints, resources, spreading, wording."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from kcm_shared.apimachinery import quantity
from kcm_simulator import scheduling

Obj = dict[str, Any]


def _node(
    name: str, labels: dict[str, str] | None = None, taints: list[Obj] | None = None, **spec: Any
) -> Obj:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"taints": taints or [], **spec},
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
    }


def _pod(cpu: str | None = None, memory: str | None = None, **spec: Any) -> Obj:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    return {
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}], **spec},
    }


def _affinity(*terms: Obj) -> Obj:
    return {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
    }


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("100m", Fraction(1, 10)),
        ("2", Fraction(2)),
        ("0.5", Fraction(1, 2)),
        ("16Gi", Fraction(16 * 2**30)),
        ("1G", Fraction(10**9)),
        ("1e3", Fraction(1000)),
        (3, Fraction(3)),
    ],
)
def test_quantities_parse_to_exact_amounts(text: object, value: Fraction) -> None:
    assert quantity.exact(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1Q", "--1"])
def test_malformed_quantities_are_rejected(text: str) -> None:
    with pytest.raises(ValueError):
        quantity.exact(text)


SSD = _node("n1", {"disk": "ssd", "gen": "5"})


@pytest.mark.parametrize(
    ("spec", "fits"),
    [
        ({}, True),
        ({"nodeSelector": {"disk": "ssd"}}, True),
        ({"nodeSelector": {"disk": "hdd"}}, False),
        (
            {
                "affinity": _affinity(
                    {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}
                )
            },
            True,
        ),
        (
            {
                "affinity": _affinity(
                    {"matchExpressions": [{"key": "disk", "operator": "NotIn", "values": ["ssd"]}]}
                )
            },
            False,
        ),
        ({"affinity": _affinity({"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]})}, True),
        ({"affinity": _affinity({"matchExpressions": [{"key": "gpu", "operator": "Exists"}]})}, False),
        (
            {
                "affinity": _affinity(
                    {"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["4"]}]}
                )
            },
            True,
        ),
        (
            {
                "affinity": _affinity(
                    {"matchExpressions": [{"key": "gen", "operator": "Lt", "values": ["4"]}]}
                )
            },
            False,
        ),
        # Terms are ORed: the second one matches.
        (
            {
                "affinity": _affinity(
                    {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]},
                    {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]},
                )
            },
            True,
        ),
        # The DaemonSet controller pins pods with matchFields on metadata.name.
        (
            {
                "affinity": _affinity(
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
                )
            },
            True,
        ),
        (
            {
                "affinity": _affinity(
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}
                )
            },
            False,
        ),
        # An empty term matches nothing.
        ({"affinity": _affinity({})}, False),
    ],
)
def test_node_selector_and_required_affinity(spec: Obj, fits: bool) -> None:
    assert scheduling.matches_node_selector({"spec": spec}, SSD) is fits


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        (
            {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
            {"key": "k", "value": "v", "effect": "NoSchedule"},
            True,
        ),
        ({"key": "k", "value": "other"}, {"key": "k", "value": "v", "effect": "NoSchedule"}, False),
        ({"key": "k", "operator": "Exists"}, {"key": "k", "value": "v", "effect": "NoExecute"}, True),
        ({"operator": "Exists"}, {"key": "anything", "effect": "NoSchedule"}, True),
        (
            {"key": "k", "operator": "Exists", "effect": "NoExecute"},
            {"key": "k", "effect": "NoSchedule"},
            False,
        ),
        ({"key": "j", "operator": "Exists"}, {"key": "k", "effect": "NoSchedule"}, False),
    ],
)
def test_toleration_matching(toleration: Obj, taint: Obj, tolerated: bool) -> None:
    assert scheduling.tolerates(toleration, taint) is tolerated


def test_prefer_no_schedule_taints_do_not_block() -> None:
    node = _node("n", taints=[{"key": "soft", "effect": "PreferNoSchedule"}])
    assert scheduling.filter_node(_pod(), node, {}) == []


@pytest.mark.parametrize(
    ("pod", "node", "in_use", "reasons"),
    [
        (_pod("1", "1Gi"), _node("n"), {}, []),
        (_pod("5"), _node("n"), {}, ["Insufficient cpu"]),
        (
            _pod("1", "1Gi"),
            _node("n"),
            {"cpu": Fraction("3.5"), "memory": Fraction(16 * 2**30)},
            ["Insufficient cpu", "Insufficient memory"],
        ),
        (_pod(), _node("n"), {"pods": Fraction(110)}, ["Too many pods"]),
        (
            _pod(),
            _node("n", taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]),
            {},
            ["node(s) had untolerated taint {dedicated: db}"],
        ),
        (_pod(), _node("n", unschedulable=True), {}, ["node(s) were unschedulable"]),
        (
            _pod(nodeSelector={"x": "y"}),
            _node("n"),
            {},
            ["node(s) didn't match Pod's node affinity/selector"],
        ),
    ],
)
def test_filter_reasons(pod: Obj, node: Obj, in_use: dict[str, Fraction], reasons: list[str]) -> None:
    assert scheduling.filter_node(pod, node, in_use) == reasons


def test_requests_default_to_limits_and_init_containers_count_as_a_maximum() -> None:
    pod = {
        "spec": {
            "containers": [
                {"name": "a", "resources": {"limits": {"cpu": "500m"}}},
                {"name": "b", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}},
            ],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2"}}}],
        }
    }
    assert scheduling.pod_requests(pod) == {"cpu": Fraction(2), "memory": Fraction(2**30)}


def test_pick_node_prefers_the_least_loaded_feasible_node() -> None:
    nodes = [_node("a"), _node("b"), _node("c", {"x": "y"})]
    in_use = {"a": {"cpu": Fraction(2), "memory": Fraction(0), "pods": Fraction(3)}}
    assert scheduling.pick_node(_pod("1"), nodes, in_use) == ("b", {})


def test_pick_node_reports_every_nodes_reasons_when_nothing_fits() -> None:
    nodes = [_node("a"), _node("b", {"disk": "ssd"})]
    chosen, failures = scheduling.pick_node(_pod("8", nodeSelector={"disk": "ssd"}), nodes, {})
    assert chosen is None
    assert scheduling.unschedulable_message(2, failures) == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector."
    )


@pytest.mark.parametrize(
    ("total", "wanted"),
    [(0, 0), (3, 3), (99, 99), (100, 100), (200, 100), (1000, 420), (5000, 500), (10_000, 500)],
)
def test_large_clusters_are_searched_for_a_share_of_feasible_nodes(total: int, wanted: int) -> None:
    assert scheduling.nodes_to_find(total) == wanted


@pytest.mark.parametrize(
    ("start", "chosen"),
    [(0, "n000"), (150, "n150"), (950, "n000")],
)
def test_pick_node_stops_after_enough_feasible_nodes_from_the_start_index(start: int, chosen: str) -> None:
    # 1,000 equally loaded nodes: the search sees 420 from `start` on and the tie goes to the first name.
    nodes = [_node(f"n{i:03d}") for i in range(1000)]
    assert scheduling.pick_node(_pod("1"), nodes, {}, start) == (chosen, {})


def test_pick_node_searches_every_node_when_few_fit() -> None:
    nodes = [_node(f"n{i:03d}", {"disk": "ssd"} if i == 999 else {}) for i in range(1000)]
    chosen, failures = scheduling.pick_node(_pod("1", nodeSelector={"disk": "ssd"}), nodes, {}, start=500)
    assert chosen == "n999" and len(failures) == 999
