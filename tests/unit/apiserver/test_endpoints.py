"""The embedded API server stores Endpoints as kube-apiserver 1.32 does: validated and defaulted,
then with their subsets as the client wrote them (the endpoints strategy's Canonicalize does
nothing; only writers such as the endpoints controller repack), so a rewrite in another layout
is a change."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kcm_apiserver import errors
from kcm_apiserver.operations import Api, Ctx
from kcm_apiserver.registry import Registry
from kcm_apiserver.store import Store

Obj = dict[str, Any]


@pytest.fixture
def api() -> Api:
    made = Api(Store(), Registry())
    made.create(
        ctx(made, "namespaces", ""), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}
    )
    return made


def ctx(api: Api, resource: str, namespace: str = "ns") -> Ctx:
    rt = api.registry.lookup("", "v1", resource)
    assert rt is not None
    return Ctx(rt, namespace=namespace)


def scattered() -> Obj:
    """What a client may write: one subset per address and port, duplicates included."""
    return {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": "svc", "namespace": "ns"},
        "subsets": [
            {"addresses": [{"ip": "10.0.0.2"}], "ports": [{"name": "a", "port": 80}]},
            {"addresses": [{"ip": "10.0.0.1"}], "ports": [{"name": "a", "port": 80}]},
            {"notReadyAddresses": [{"ip": "10.0.0.3"}], "ports": [{"name": "a", "port": 80}]},
            {"addresses": [{"ip": "10.0.0.1"}], "ports": [{"name": "a", "port": 80}]},
        ],
    }


def as_written() -> list[Obj]:
    """scattered()'s subsets with the one default kube-apiserver adds: protocol TCP."""
    subsets: list[Obj] = scattered()["subsets"]
    for subset in subsets:
        for port in subset["ports"]:
            port["protocol"] = "TCP"
    return subsets


def test_create_stores_the_subsets_as_written(api: Api) -> None:
    stored = api.create(ctx(api, "endpoints"), scattered())
    assert stored["subsets"] == as_written()


def test_a_rewrite_in_another_layout_is_stored_as_written(api: Api) -> None:
    created = api.create(ctx(api, "endpoints"), scattered())
    again = scattered()
    again["subsets"].reverse()
    again["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
    updated = api.update(ctx(api, "endpoints"), "svc", copy.deepcopy(again))
    assert updated["subsets"] == list(reversed(as_written()))
    assert updated["metadata"]["resourceVersion"] != created["metadata"]["resourceVersion"]


def test_invalid_endpoints_are_refused_before_anything_is_stored(api: Api) -> None:
    bad = scattered()
    bad["subsets"][0]["addresses"][0]["ip"] = "127.0.0.1"
    with pytest.raises(errors.ApiError) as refused:
        api.create(ctx(api, "endpoints"), bad)
    assert refused.value.code == 422
    assert "may not be in the loopback range (127.0.0.0/8, ::1/128)" in str(refused.value.status)
