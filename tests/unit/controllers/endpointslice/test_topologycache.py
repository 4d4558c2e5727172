"""Topology-aware hints (upstream staging/src/k8s.io/endpointslice/topologycache
topologycache_test.go's kinds of cases): CPU shares from nodes, allocations with the 20%
overload threshold, own-zone hints then redistribution, and when hints are dropped."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from kcm_controllers.endpointslice import reconciler, topologycache, views
from kcm_shared.apimachinery import codec
from kcm_shared.controllerutil.endpoints import endpointutil

TC = topologycache


def node(
    name: str, zone: str | None, cpu: str | None = "4", ready: bool = True, **labels: str
) -> views.NodeView:
    doc: dict[str, Any] = {
        "metadata": {"name": name, "labels": {**({views.LABEL_ZONE: zone} if zone else {}), **labels}},
        "status": {
            "allocatable": {"cpu": cpu} if cpu else {},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }
    return codec.decode(msgspec.json.encode(doc), views.NodeView)


def slice_of(
    *zones: str | None, name: str = "", ready: bool = True, hinted: bool = False
) -> views.EndpointSlice:
    eps = [
        views.Endpoint(
            addresses=[f"10.0.0.{i}"],
            conditions=views.EndpointConditions(ready=ready),
            zone=zone,
            hints=TC._hint(zone) if hinted and zone else None,
        )
        for i, zone in enumerate(zones)
    ]
    return views.EndpointSlice(metadata=codec.ObjectMeta(name=name), address_type="IPv4", endpoints=eps)


def hints(s: views.EndpointSlice) -> list[str | None]:
    return [ep.hints.for_zones[0].name if ep.hints else None for ep in s.endpoints or ()]


def cache(**ratios: float) -> TC.TopologyCache:
    t = TC.TopologyCache()
    t.cpu_ratios = dict(ratios)
    return t


def test_set_nodes_shares_cpu_by_zone_of_ready_nodes() -> None:
    t = TC.TopologyCache()
    t.set_nodes([node("a", "zone-a", "3"), node("b", "zone-b", "1"), node("c", "zone-c", "8", ready=False)])
    assert t.cpu_ratios == {"zone-a": 0.75, "zone-b": 0.25}
    t.set_nodes([node("a", "zone-a"), node("b", None)])  # a node without a zone: no hints at all
    assert t.cpu_ratios is None
    t.set_nodes([node("a", "zone-a"), node("b", "zone-b", None)])  # a node without CPU
    assert t.cpu_ratios is None
    t.set_nodes([node("a", "zone-a"), node("b", "zone-a")])  # one zone
    assert t.cpu_ratios is None
    cp = node("cp", "zone-c", "100", **{"node-role.kubernetes.io/control-plane": ""})
    t.set_nodes([node("a", "zone-a", "500m"), node("b", "zone-b", "500m"), cp])  # control plane excluded
    assert t.cpu_ratios == {"zone-a": 0.5, "zone-b": 0.5}


@pytest.mark.parametrize(
    ("ratios", "endpoints", "expected"),
    [
        ({"a": 0.5, "b": 0.5}, 4, {"a": (2, 2), "b": (2, 2)}),
        ({"a": 0.5, "b": 0.5}, 10, {"a": (5, 5), "b": (5, 5)}),
        ({"a": 0.75, "b": 0.25}, 20, {"a": (13, 15), "b": (5, 7)}),
        ({"a": 0.1, "b": 0.9}, 3, None),  # ceil(0.1*3/1.2)=1 + ceil(0.9*3/1.2)=3 > 3
    ],
)
def test_allocations(
    ratios: dict[str, float], endpoints: int, expected: dict[str, tuple[int, int]] | None
) -> None:
    got, why = cache(**ratios).allocations(endpoints)
    if expected is None:
        assert got is None and why.startswith(TC.MIN_ALLOCATION_EXCEEDS_OVERLOAD_THRESHOLD)
    else:
        assert {z: (a.minimum, a.maximum) for z, a in (got or {}).items()} == expected


def test_own_zone_hints_and_the_enabled_event_once() -> None:
    t = cache(**{"zone-a": 0.5, "zone-b": 0.5})
    s = slice_of("zone-a", "zone-b", "zone-a", "zone-b")
    extra, events = t.add_hints("ns/svc", "IPv4", [s], [], [])
    assert hints(s) == ["zone-a", "zone-b", "zone-a", "zone-b"] and extra == []
    assert events == [
        TC.Event("Normal", TC.ENABLED, "Topology Aware Hints has been enabled, addressType: IPv4")
    ]
    s2 = slice_of("zone-a", "zone-b", "zone-a", "zone-b")
    assert t.add_hints("ns/svc", "IPv4", [], [s2], [])[1] == []


def test_endpoints_of_one_zone_are_shared_with_the_other() -> None:
    t = cache(**{"zone-a": 0.5, "zone-b": 0.5})
    s = slice_of("zone-a", "zone-a", "zone-a", "zone-a")
    t.add_hints("ns/svc", "IPv4", [s], [], [])
    assert sorted(h or "" for h in hints(s)) == ["zone-a", "zone-a", "zone-b", "zone-b"]


def test_endpoints_move_until_each_zone_has_its_cpu_share() -> None:
    # upstream getGivingAndReceivingZones aims at each zone's desired share (10/5/5 here), not
    # only inside minimum (9/5/5) and maximum (10/6/6): zone-b gives 3 and zone-c 1 to zone-a.
    t = cache(**{"zone-a": 0.5, "zone-b": 0.25, "zone-c": 0.25})
    s = slice_of(*["zone-a"] * 6, *["zone-b"] * 8, *["zone-c"] * 6)
    t.add_hints("ns/svc", "IPv4", [s], [], [])
    counts = {zone: hints(s).count(zone) for zone in ("zone-a", "zone-b", "zone-c")}
    assert counts == {"zone-a": 10, "zone-b": 5, "zone-c": 5}


@pytest.mark.parametrize(
    ("zones", "message"),
    [
        (("zone-a",), "Insufficient number of endpoints (1 endpoints, 2 zones), addressType: IPv4"),
        (
            ("zone-a", None, "zone-b", "zone-b"),
            "One or more endpoints do not have a zone specified, addressType: IPv4",
        ),
    ],
)
def test_hints_dropped_with_a_warning(zones: tuple[str | None, ...], message: str) -> None:
    t = cache(**{"zone-a": 0.5, "zone-b": 0.5})
    s = slice_of(*zones, hinted=True)
    _, events = t.add_hints("ns/svc", "IPv4", [], [s], [])
    assert events == [TC.Event("Warning", TC.DISABLED, message)]
    assert all(h is None for h in hints(s))
    assert not t.has_populated_hints("ns/svc")


def test_insufficient_node_info() -> None:
    _, events = TC.TopologyCache().add_hints("ns/svc", "IPv4", [slice_of("zone-a", "zone-b")], [], [])
    assert events[0].message == f"{TC.INSUFFICIENT_NODE_INFO}, addressType: IPv4"


def test_unchanged_slices_are_rewritten_only_when_their_hints_do_not_fit() -> None:
    t = cache(**{"zone-a": 0.5, "zone-b": 0.5})
    good = slice_of("zone-a", "zone-b", name="good", hinted=True)
    bare = slice_of("zone-a", "zone-b", name="bare")
    extra, _ = t.add_hints("ns/svc", "IPv4", [], [], [good, bare])
    assert [s.metadata.name for s in extra] == ["bare"]
    assert hints(extra[0]) == ["zone-a", "zone-b"]
    assert hints(bare) == [None, None]  # the cached slice is not edited


def test_reconciler_records_disabled_when_the_annotation_goes() -> None:
    t = cache(**{"zone-a": 0.5, "zone-b": 0.5})
    zone_node = {"n1": node("n1", "zone-a"), "n2": node("n2", "zone-b")}
    doc = {
        "metadata": {
            "name": "svc",
            "namespace": "ns",
            "uid": "u",
            "annotations": {reconciler.TOPOLOGY_MODE: "Auto"},
        },
        "spec": {
            "selector": {"a": "b"},
            "ports": [{"port": 80}],
            "clusterIP": "10.0.0.1",
            "ipFamilies": ["IPv4"],
        },
    }
    svc = codec.decode(msgspec.json.encode(doc), views.ServiceView)
    pods = []
    for i in range(4):
        pod = {
            "metadata": {"name": f"p{i}", "namespace": "ns", "uid": f"u{i}"},
            "spec": {"nodeName": f"n{i % 2 + 1}"},
            "status": {"podIP": f"10.1.0.{i}", "conditions": [{"type": "Ready", "status": "True"}]},
        }
        pods.append(codec.decode(msgspec.json.encode(pod), endpointutil.EndpointPodView))
    plans, _, _ = reconciler.plan(svc, pods, [], zone_node.get, 100, topology=t)
    assert [e.reason for e in plans[0].events] == [TC.ENABLED]
    assert sorted(h or "" for h in hints(plans[0].create[0])) == ["zone-a", "zone-a", "zone-b", "zone-b"]
    plain = msgspec.structs.replace(svc, metadata=msgspec.structs.replace(svc.metadata, annotations={}))
    plans, _, _ = reconciler.plan(plain, pods, [], zone_node.get, 100, topology=t)
    assert [(e.reason, e.message) for e in plans[0].events] == [
        (TC.DISABLED, "Topology Aware Hints has been disabled, addressType: IPv4")
    ]
    assert hints(plans[0].create[0]) == [None] * 4
