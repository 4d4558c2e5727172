"""The API server's own default/kubernetes Endpoints and EndpointSlice (kcm_apiserver.kubernetesendpoints,
upstream pkg/controlplane/reconcilers endpointsadapter.go): created, corrected when the address
or port moves, stale slices of the Service removed, left alone when right."""

from __future__ import annotations

from typing import Any

from kcm_apiserver import kubernetesendpoints
from kcm_apiserver.operations import Api, Ctx
from kcm_apiserver.registry import Registry
from kcm_apiserver.store import Store


def read(api: Api, group: str, resource: str, name: str = "kubernetes") -> dict[str, Any]:
    version = "v1"
    return api.get(Ctx(api._rt(group, version, resource), "default"), name)


def test_publishes_address_and_port() -> None:
    api = Api(Store(None), Registry())
    kubernetesendpoints.reconcile(api, "192.0.2.7", 34567)
    svc = read(api, "", "services")
    assert [(p["port"], p["targetPort"]) for p in svc["spec"]["ports"]] == [(443, 34567)]
    ep = read(api, "", "endpoints")
    assert ep["metadata"]["labels"] == {"endpointslice.kubernetes.io/skip-mirror": "true"}
    assert ep["subsets"] == [
        {"addresses": [{"ip": "192.0.2.7"}], "ports": [{"name": "https", "port": 34567, "protocol": "TCP"}]}
    ]
    eps = read(api, "discovery.k8s.io", "endpointslices")
    assert eps["metadata"]["labels"] == {"kubernetes.io/service-name": "kubernetes"}
    assert eps["addressType"] == "IPv4"
    assert eps["endpoints"] == [{"addresses": ["192.0.2.7"], "conditions": {"ready": True}}]
    assert eps["ports"] == [{"name": "https", "port": 34567, "protocol": "TCP"}]


def test_moved_address_is_corrected_and_unchanged_is_not_rewritten() -> None:
    api = Api(Store(None), Registry())
    kubernetesendpoints.reconcile(api, "192.0.2.7", 34567)
    kubernetesendpoints.reconcile(api, "2001:db8::5", 6443)
    eps = read(api, "discovery.k8s.io", "endpointslices")
    assert eps["addressType"] == "IPv6" and eps["endpoints"][0]["addresses"] == ["2001:db8::5"]
    assert read(api, "", "endpoints")["subsets"][0]["ports"][0]["port"] == 6443
    versions = [
        read(api, g, r)["metadata"]["resourceVersion"]
        for g, r in (("", "endpoints"), ("discovery.k8s.io", "endpointslices"), ("", "services"))
    ]
    kubernetesendpoints.reconcile(api, "2001:db8::5", 6443)
    assert versions == [
        read(api, g, r)["metadata"]["resourceVersion"]
        for g, r in (("", "endpoints"), ("discovery.k8s.io", "endpointslices"), ("", "services"))
    ]


def test_advertise_address() -> None:
    assert kubernetesendpoints.advertise_address("10.1.2.3") == "10.1.2.3"
    assert kubernetesendpoints.advertise_address("127.0.0.1", "10.9.9.9") == "10.9.9.9"
    found = kubernetesendpoints.advertise_address("0.0.0.0")
    assert found is None or kubernetesendpoints._usable(found)
