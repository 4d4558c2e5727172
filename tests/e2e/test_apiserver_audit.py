"""`kcm apiserver --audit-log-path`: one audit.k8s.io/v1 line per write, none for reads."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from tests.conftest import start_apiserver, stop_process


def call(url: str, method: str, path: str, body: dict[str, Any] | None, agent: str) -> int:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method=method)
    request.add_header("User-Agent", agent)
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as resp:
        status: int = resp.status
        return status


def test_writes_are_recorded_with_who_made_them_and_reads_are_not(tmp_path: Path) -> None:
    audit = tmp_path / "audit.log"
    server = start_apiserver(tmp_path / "apiserver", "--audit-log-path", str(audit))
    try:
        agent = "kcm/replicaset-controller (host-1234)"
        ns = "/api/v1/namespaces"
        call(server.url, "POST", ns, {"metadata": {"name": "audited"}}, agent)
        pod = {
            "metadata": {"generateName": "web-"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        }
        call(server.url, "POST", f"{ns}/audited/pods", pod, agent)
        call(server.url, "GET", f"{ns}/audited/pods", None, agent)
        name = json.loads(urllib.request.urlopen(f"{server.url}{ns}/audited/pods").read())["items"][0][
            "metadata"
        ]["name"]
        call(server.url, "DELETE", f"{ns}/audited/pods/{name}", None, "kubectl/v1.32.0")
    finally:
        stop_process(server.proc)
    events = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(e["verb"], e["objectRef"], e["userAgent"], e["responseStatus"]["code"]) for e in events] == [
        ("create", {"resource": "namespaces", "name": "audited", "apiVersion": "v1"}, agent, 201),
        (
            "create",
            {"resource": "pods", "namespace": "audited", "name": name, "apiVersion": "v1"},
            agent,
            201,
        ),
        (
            "delete",
            {"resource": "pods", "namespace": "audited", "name": name, "apiVersion": "v1"},
            "kubectl/v1.32.0",
            200,
        ),
    ]
    assert all(e["kind"] == "Event" and e["apiVersion"] == "audit.k8s.io/v1" for e in events)
    # No credentials on a loopback server without a token: the local admin.
    admin = {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]}
    assert all(e["user"] == admin for e in events)
    assert events[1]["requestURI"] == f"{ns}/audited/pods"
