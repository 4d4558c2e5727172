"""pods/log, exec, attach, portforward: the checks and the kubelet URL (kcm_apiserver.podstreams)."""

from __future__ import annotations

from typing import Any

import pytest
from kcm_apiserver import errors, podstreams
from multidict import MultiDict


def pod(*containers: str, init: tuple[str, ...] = (), node: str = "n1") -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {
            "nodeName": node,
            "containers": [{"name": c} for c in containers],
            "initContainers": [{"name": c} for c in init],
        },
    }


NODE = {
    "status": {
        "addresses": [
            {"type": "InternalIP", "address": "10.0.0.1"},
            {"type": "InternalDNS", "address": "127.0.0.1"},
            {"type": "Hostname", "address": "n1"},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 4321}},
    }
}


def url(p: dict[str, Any], sub: str, **query: Any) -> str | None:
    q: MultiDict[str] = MultiDict()
    for k, v in query.items():
        for item in v if isinstance(v, list) else [v]:
            q.add(k, item)
    return podstreams.location(p, NODE, sub, q).url


def test_kubelet_urls_use_the_preferred_address_and_the_kubelets_query_names() -> None:
    assert url(pod("c"), "log", tailLines="2", follow="true", other="x") == (
        "https://127.0.0.1:4321/containerLogs/ns/p/c?follow=true&tailLines=2"
    )
    assert url(
        pod("a", "b"), "exec", container="b", command=["sh", "-c", "x y"], stdin="True", stdout="1"
    ) == ("https://127.0.0.1:4321/exec/ns/p/b?input=1&output=1&command=sh&command=-c&command=x+y")
    assert (
        url(pod("c"), "attach", stdout="true", tty="true")
        == "https://127.0.0.1:4321/attach/ns/p/c?output=1&tty=1"
    )
    assert url(pod("c"), "portforward", ports=["80,8080", "9"]) == (
        "https://127.0.0.1:4321/portForward/ns/p?port=80&port=8080&port=9"
    )


@pytest.mark.parametrize(
    ("p", "sub", "query", "message"),
    [
        (
            pod("a", "b", init=("i",)),
            "log",
            {},
            "a container name must be specified for pod p, choose one of: [a b] or one of the init containers: [i]",
        ),
        (
            pod("a", "b"),
            "exec",
            {"command": "x"},
            "a container name must be specified for pod p, choose one of: [a b]",
        ),
        (pod("a"), "log", {"container": "z"}, "container z is not valid for pod p"),
        (pod("a"), "exec", {}, "you must specify at least 1 command"),
        (pod("a", node=""), "exec", {"command": "x"}, "pod p does not have a host assigned"),
        (pod("a"), "portforward", {"ports": "0"}, "port 0 must be in the range 1 - 65535"),
        (pod("a"), "portforward", {"ports": "http"}, "invalid port 'http'"),
    ],
)
def test_upstreams_refusals(p: dict[str, Any], sub: str, query: dict[str, str], message: str) -> None:
    with pytest.raises(errors.ApiError) as caught:
        url(p, sub, **query)
    assert (caught.value.code, caught.value.status()["message"]) == (400, message)


def test_an_unscheduled_pods_log_is_empty() -> None:
    assert url(pod("a", node=""), "log") is None
