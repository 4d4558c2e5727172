"""The local APIServices: one per built-in group-version this server serves, as kube-apiserver's
aggregator registers them at start (kube-aggregator's autoregistration, with the priorities of
pkg/controlplane/apiserver/aggregator.go).

- `local_apiservices(registry)`: each as upstream has it, `v1.` for the core group and
  `<version>.<group>` for the others, labelled `kube-aggregator.kubernetes.io/automanaged:
  onstart`, with `groupPriorityMinimum` and `versionPriority` and no `service` (served here).
- `available_status(now)`: the status every local one carries.

`Api.__init__` creates each one that is absent and writes its status, so `kubectl get
apiservices` and clients that wait for an APIService to be Available find them. Nothing is
aggregated: an APIService someone else creates is stored and listed, never proxied to. Custom
resources get none (upstream's crd-registration controller adds theirs, `automanaged: "true"`),
nor does apiregistration.k8s.io itself, which kube-apiserver does not list either.
"""

from __future__ import annotations

from typing import Any

from kcm_apiserver.registry import Registry

AUTOMANAGED = "kube-aggregator.kubernetes.io/automanaged"
# group -> (groupPriorityMinimum, versionPriority by version), upstream's table for the groups
# served here. metrics.k8s.io is not in it (an aggregated metrics-server registers it there):
# its numbers are the ones metrics-server's own APIService asks for.
_PRIORITIES: dict[str, tuple[int, dict[str, int]]] = {
    "": (18000, {"v1": 1}),
    "apps": (17800, {"v1": 15}),
    "events.k8s.io": (17750, {"v1": 15}),
    "authentication.k8s.io": (17700, {"v1": 15}),
    "authorization.k8s.io": (17600, {"v1": 15}),
    "autoscaling": (17500, {"v1": 15, "v2": 30}),
    "batch": (17400, {"v1": 15}),
    "certificates.k8s.io": (17300, {"v1": 15}),
    "networking.k8s.io": (17200, {"v1": 15}),
    "policy": (17100, {"v1": 15}),
    "rbac.authorization.k8s.io": (17000, {"v1": 15}),
    "storage.k8s.io": (16800, {"v1": 15}),
    "apiextensions.k8s.io": (16700, {"v1": 15}),
    "admissionregistration.k8s.io": (16700, {"v1": 15}),
    "scheduling.k8s.io": (16600, {"v1": 15}),
    "coordination.k8s.io": (16500, {"v1": 15}),
    "node.k8s.io": (16300, {"v1": 15}),
    "discovery.k8s.io": (16200, {"v1": 15}),
    "flowcontrol.apiserver.k8s.io": (16100, {"v1": 21}),
    "metrics.k8s.io": (100, {"v1beta1": 100}),
}


def name_of(group: str, version: str) -> str:
    return f"{version}.{group}"


def local_apiservices(registry: Registry) -> list[dict[str, Any]]:
    """An APIService (without status) for every group-version of upstream's table served here."""
    out = []
    for group, versions in registry.groups().items():
        if group not in _PRIORITIES:
            continue
        group_priority, version_priorities = _PRIORITIES[group]
        for version in versions:
            if version not in version_priorities:
                continue
            spec: dict[str, Any] = {"group": group} if group else {}
            spec.update(
                version=version,
                groupPriorityMinimum=group_priority,
                versionPriority=version_priorities[version],
            )
            out.append(
                {
                    "apiVersion": "apiregistration.k8s.io/v1",
                    "kind": "APIService",
                    "metadata": {"name": name_of(group, version), "labels": {AUTOMANAGED: "onstart"}},
                    "spec": spec,
                }
            )
    return out


def available_status(now: str) -> dict[str, Any]:
    condition = {
        "type": "Available",
        "status": "True",
        "lastTransitionTime": now,
        "reason": "Local",
        "message": "Local APIServices are always available",
    }
    return {"conditions": [condition]}
