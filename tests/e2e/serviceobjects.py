"""Objects the Service-networking e2e modules share: Pod and Service manifests, the addresses of
an Endpoints object, and one Service whose Endpoints have several subsets and ports.

Used by tests/e2e/test_endpoints.py and test_reference.py (upstream kube-controller-manager's
layout of the same Endpoints); each keeps its own stack.
"""

from __future__ import annotations

from typing import Any


def pod(
    ns: str,
    name: str,
    labels: dict[str, str],
    *,
    ready: bool = True,
    ignore_sigterm: bool = False,
    ports: list[dict[str, Any]] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A pod the simulator runs; with `ignore_sigterm` a delete leaves it running (and
    terminating) for its whole grace period."""
    annotations = {"sim.kcm.dev/ready": "true" if ready else "false"}
    if ignore_sigterm:
        annotations["sim.kcm.dev/ignore-sigterm"] = "true"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels, "annotations": annotations},
        "spec": {"containers": [{"name": "c", "image": "nginx", "ports": ports or []}], **spec},
    }


def service(ns: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def addresses(ep: dict[str, Any] | None, field: str = "addresses") -> list[dict[str, Any]]:
    if ep is None:
        return []
    return [a for s in ep.get("subsets") or [] for a in s.get(field) or []]


def ips(ep: dict[str, Any] | None, field: str = "addresses") -> set[str]:
    return {a["ip"] for a in addresses(ep, field)}


def several_subsets_and_ports(ns: str) -> list[dict[str, Any]]:
    """Pods and a Service whose Endpoints have three subsets, one with two ports: `web` resolves to
    8080 on one pod and to 8081 on the others (one of them not ready); `metrics` and `dns` are
    served by the ready pods alike."""
    web8080 = [{"name": "web", "containerPort": 8080}]
    web8081 = [{"name": "web", "containerPort": 8081}]
    ports = [
        {"name": "web", "port": 80, "targetPort": "web"},
        {"name": "metrics", "port": 9090},
        {"name": "dns", "port": 53, "protocol": "UDP"},
    ]
    return [
        pod(ns, "a", {"app": "m"}, ports=web8080),
        pod(ns, "b", {"app": "m"}, ports=web8081),
        pod(ns, "c", {"app": "m"}, ready=False, ports=web8081),
        service(ns, "m", selector={"app": "m"}, ports=ports),
    ]


def settled(ep: dict[str, Any]) -> bool:
    return len(ep.get("subsets") or []) == 3 and ips(ep) and len(ips(ep, "notReadyAddresses")) == 1
