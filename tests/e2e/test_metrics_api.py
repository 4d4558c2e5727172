"""metrics.k8s.io served by the embedded API server: what `kubectl top` and the HPA read."""

from __future__ import annotations

from typing import Any

import requests

from tests.conftest import ApiServer

METRICS = "/apis/metrics.k8s.io/v1beta1"


def _pod(apiserver: ApiServer, name: str, node: str, labels: dict[str, str], running: bool = True) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {"sim.kcm.dev/cpu-usage": "250m", "sim.kcm.dev/memory-usage": "64Mi"},
        },
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "nginx"}]},
    }
    r = requests.post(f"{apiserver.url}/api/v1/namespaces/default/pods", json=body, timeout=10)
    assert r.status_code == 201, r.text
    if running:
        r = requests.patch(
            f"{apiserver.url}/api/v1/namespaces/default/pods/{name}/status",
            json={"status": {"phase": "Running"}},
            headers={"Content-Type": "application/merge-patch+json"},
            timeout=10,
        )
        assert r.status_code == 200, r.text


def _get(apiserver: ApiServer, path: str, **params: str) -> requests.Response:
    return requests.get(f"{apiserver.url}{METRICS}{path}", params=params, timeout=10)


def test_pod_metrics_report_annotated_usage(apiserver: ApiServer) -> None:
    _pod(apiserver, "mx-web", "mx-node", {"app": "mx"})
    r = _get(apiserver, "/namespaces/default/pods/mx-web")
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    assert (body["kind"], body["apiVersion"], body["window"]) == (
        "PodMetrics",
        "metrics.k8s.io/v1beta1",
        "10s",
    )
    assert body["metadata"]["labels"] == {"app": "mx"}
    assert body["containers"] == [{"name": "app", "usage": {"cpu": "250m", "memory": "64Mi"}}]


def test_pod_metrics_list_only_running_pods_and_honours_selectors(apiserver: ApiServer) -> None:
    _pod(apiserver, "mx-a", "mx-node2", {"app": "sel"})
    _pod(apiserver, "mx-b", "mx-node2", {"app": "other"})
    _pod(apiserver, "mx-pending", "mx-node2", {"app": "sel"}, running=False)
    by_label = _get(apiserver, "/namespaces/default/pods", labelSelector="app=sel").json()
    assert by_label["kind"] == "PodMetricsList"
    assert [i["metadata"]["name"] for i in by_label["items"]] == ["mx-a"]
    by_name = _get(apiserver, "/pods", fieldSelector="metadata.name=mx-b").json()
    assert [i["metadata"]["name"] for i in by_name["items"]] == ["mx-b"]
    missing = _get(apiserver, "/namespaces/default/pods/mx-pending")
    assert missing.status_code == 404
    assert missing.json()["message"] == 'podmetrics.metrics.k8s.io "mx-pending" not found'


def test_node_metrics_sum_the_running_pods_on_the_node(apiserver: ApiServer) -> None:
    r = requests.post(
        f"{apiserver.url}/api/v1/nodes",
        json={"apiVersion": "v1", "kind": "Node", "metadata": {"name": "mx-node3"}},
        timeout=10,
    )
    assert r.status_code == 201, r.text
    _pod(apiserver, "mx-n1", "mx-node3", {"app": "n"})
    _pod(apiserver, "mx-n2", "mx-node3", {"app": "n"})
    body = _get(apiserver, "/nodes/mx-node3").json()
    assert body["kind"] == "NodeMetrics"
    assert body["usage"] == {"cpu": "500m", "memory": "128Mi"}
    names = [i["metadata"]["name"] for i in _get(apiserver, "/nodes").json()["items"]]
    assert "mx-node3" in names


def test_metrics_are_read_only(apiserver: ApiServer) -> None:
    r = requests.post(f"{apiserver.url}{METRICS}/namespaces/default/pods", json={}, timeout=10)
    assert r.status_code == 405
    r = requests.delete(f"{apiserver.url}{METRICS}/nodes/x", timeout=10)
    assert r.status_code == 405


def test_discovery_lists_the_metrics_group(apiserver: ApiServer) -> None:
    groups = requests.get(f"{apiserver.url}/apis", timeout=10).json()["groups"]
    assert "metrics.k8s.io" in [g["name"] for g in groups]
    resources = _get(apiserver, "").json()["resources"]
    assert {(r["name"], tuple(r["verbs"])) for r in resources} == {
        ("pods", ("get", "list")),
        ("nodes", ("get", "list")),
    }


def test_kubectl_top_pod_and_node(apiserver: ApiServer) -> None:
    _pod(apiserver, "mx-top", "mx-node4", {"app": "top"})
    out = apiserver.kubectl("top", "pod", "mx-top")
    assert "mx-top" in out and "250m" in out
    requests.post(
        f"{apiserver.url}/api/v1/nodes",
        json={"apiVersion": "v1", "kind": "Node", "metadata": {"name": "mx-node4"}},
        timeout=10,
    )
    assert "mx-node4" in apiserver.kubectl("top", "node", "mx-node4")


def test_openapi_documents_the_metrics_group_version(apiserver: ApiServer) -> None:
    paths = requests.get(f"{apiserver.url}/openapi/v3", timeout=10).json()["paths"]
    assert "apis/metrics.k8s.io/v1beta1" in paths
    r = requests.get(f"{apiserver.url}/openapi/v3/apis/metrics.k8s.io/v1beta1", timeout=10)
    assert r.status_code == 200, r.text


def test_table_form_names_the_metrics_objects(apiserver: ApiServer) -> None:
    _pod(apiserver, "mx-table", "mx-node5", {"app": "table"})
    r = requests.get(
        f"{apiserver.url}{METRICS}/namespaces/default/pods",
        params={"labelSelector": "app=table"},
        headers={"Accept": "application/json;as=Table;g=meta.k8s.io;v=v1"},
        timeout=10,
    )
    table = r.json()
    assert table["kind"] == "Table"
    assert [row["cells"][0] for row in table["rows"]] == ["mx-table"]
