"""The API server's side of node IPAM and NodePorts, through `Api` on an in-memory store:
Node spec.podCIDR(s) validation (upstream ValidateNode/ValidateNodeUpdate) and nodePort
allocation (upstream portallocator and the service REST's allocation), also across a restart."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from kcm_apiserver import errors, nodeports, persist
from kcm_apiserver.operations import Api, Ctx
from kcm_apiserver.registry import Registry
from kcm_apiserver.store import Store

Obj = dict[str, Any]


def ctx(api: Api, resource: str, namespace: str = "ns") -> Ctx:
    rt = api.registry.lookup("", "v1", resource)
    assert rt is not None
    return Ctx(rt, namespace=namespace if rt.namespaced else "")


def make_api(store: Store | None = None, port_range: str = "30000-30002") -> Api:
    api = Api(store or Store(), Registry(), node_port_range=nodeports.parse_range(port_range))
    try:
        api.get(ctx(api, "namespaces"), "ns")
    except errors.ApiError:
        api.create(
            ctx(api, "namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}
        )
    return api


def node(name: str, spec: Obj) -> Obj:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": spec}


def causes(exc: pytest.ExceptionInfo[errors.ApiError]) -> list[str]:
    return [f"{c['field']}: {c['message']}" for c in exc.value.details["causes"]]  # type: ignore[index]


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        (
            {"podCIDRs": ["10.0.0.0/24", "fd00::/64"]},
            {"podCIDR": "10.0.0.0/24", "podCIDRs": ["10.0.0.0/24", "fd00::/64"]},
        ),
        ({"podCIDR": "10.0.0.0/24"}, {"podCIDR": "10.0.0.0/24", "podCIDRs": ["10.0.0.0/24"]}),
        # podCIDR reads as the first of podCIDRs, as upstream's v1 conversion writes it.
        (
            {"podCIDR": "10.9.0.0/24", "podCIDRs": ["10.0.0.0/24"]},
            {"podCIDR": "10.0.0.0/24", "podCIDRs": ["10.0.0.0/24"]},
        ),
    ],
)
def test_pod_cidrs_are_stored_as_upstream_converts_them(spec: Obj, want: Obj) -> None:
    api = make_api()
    got = api.create(ctx(api, "nodes"), node("n", spec))["spec"]
    assert {k: got[k] for k in want} == want


@pytest.mark.parametrize(
    ("cidrs", "message"),
    [
        (
            ["10.0.0.0/33"],
            'spec.podCIDRs[0]: Invalid value: "10.0.0.0/33": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)',
        ),
        (
            ["10.0.0.0/24", "10.1.0.0/24"],
            'spec.podCIDRs: Invalid value: []string{"10.0.0.0/24", "10.1.0.0/24"}: '
            "may specify no more than one CIDR for each IP family",
        ),
        (["fd00::/64", "fd00::/64"], 'spec.podCIDRs[1]: Duplicate value: "fd00::/64"'),
    ],
)
def test_bad_pod_cidrs_are_refused(cidrs: list[str], message: str) -> None:
    api = make_api()
    with pytest.raises(errors.ApiError) as exc:
        api.create(ctx(api, "nodes"), node("n", {"podCIDRs": cidrs}))
    assert message in causes(exc)


def test_pod_cidrs_may_be_set_once_and_never_changed() -> None:
    api = make_api()
    c = ctx(api, "nodes")
    api.create(c, node("n", {}))
    api.patch(c, "n", "strategic", {"spec": {"podCIDR": "10.0.0.0/24", "podCIDRs": ["10.0.0.0/24"]}})
    edited = copy.deepcopy(api.get(c, "n"))
    edited["spec"]["podCIDRs"] = ["10.0.1.0/24"]
    with pytest.raises(errors.ApiError) as exc:
        api.update(c, "n", edited)
    assert causes(exc) == [
        'spec.podCIDRs: Forbidden: node updates may not change podCIDR except from "" to valid'
    ]


def service(name: str, kind: str = "NodePort", node_port: int = 0, **spec: Any) -> Obj:
    port: Obj = {"port": 80}
    if node_port:
        port["nodePort"] = node_port
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"type": kind, "ports": [port], **spec},
    }


def node_port(svc: Obj) -> Any:
    return svc["spec"]["ports"][0].get("nodePort")


def test_node_ports_are_unique_honoured_refused_and_released() -> None:
    api = make_api()
    c = ctx(api, "services")
    first = node_port(api.create(c, service("a")))
    second = node_port(api.create(c, service("lb", "LoadBalancer")))
    assert {first, second} <= {30000, 30001, 30002} and first != second
    assert (
        node_port(api.create(c, service("no-ports", "LoadBalancer", allocateLoadBalancerNodePorts=False)))
        is None
    )
    assert node_port(api.create(c, service("plain", "ClusterIP"))) is None
    with pytest.raises(errors.ApiError) as exc:
        api.create(c, service("b", node_port=first))
    assert exc.value.code == 422
    assert causes(exc) == [
        f"spec.ports[0].nodePort: Invalid value: {first}: provided port is already allocated"
    ]
    with pytest.raises(errors.ApiError) as exc:
        api.create(c, service("b", node_port=31000))
    assert causes(exc) == [
        "spec.ports[0].nodePort: Invalid value: 31000: provided port is not in the valid range. "
        "The range of valid ports is 30000-30002"
    ]
    third = node_port(api.create(c, service("c")))
    with pytest.raises(errors.ApiError, match="range is full"):
        api.create(c, service("d"))
    api.delete(c, "a", {})
    assert node_port(api.create(c, service("b", node_port=first))) == first
    # A type change to ClusterIP drops the nodePort and frees it; the update keeps the others'.
    api.patch(c, "c", "merge", {"spec": {"type": "ClusterIP"}})
    assert node_port(api.get(c, "c")) is None
    kept = copy.deepcopy(api.get(c, "lb"))
    del kept["spec"]["ports"][0]["nodePort"]
    assert node_port(api.update(c, "lb", kept)) == second
    assert node_port(api.create(c, service("e", node_port=third))) == third


def test_node_ports_in_use_are_known_again_after_a_restart(tmp_path: Path) -> None:
    api = make_api(Store(persist.Database(tmp_path)))
    c = ctx(api, "services")
    taken = node_port(api.create(c, service("a")))
    again = make_api(Store(persist.Database(tmp_path)))
    with pytest.raises(errors.ApiError, match="provided port is already allocated"):
        again.create(ctx(again, "services"), service("b", node_port=taken))


def test_a_node_port_on_a_cluster_ip_service_is_forbidden() -> None:
    api = make_api()
    with pytest.raises(errors.ApiError) as exc:
        api.create(ctx(api, "services"), service("a", "ClusterIP", node_port=30000))
    assert causes(exc) == ["spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"]


@pytest.mark.parametrize(
    ("text", "want"), [("30000-32767", (30000, 2768)), ("30000+10", (30000, 11)), ("8080", (8080, 1))]
)
def test_port_range_forms(text: str, want: tuple[int, int]) -> None:
    r = nodeports.parse_range(text)
    assert (r.base, r.size) == want
