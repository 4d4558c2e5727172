"""Legacy discovery documents (`/api`, `/apis`, `/apis/<group>`, resource lists).

kubectl asks for aggregated discovery first and falls back to these when the answer is
plain `application/json`, which is what we serve: every list is computed from the
registry, so CRDs show up as soon as they are established.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from kcm_apiserver.registry import Registry, ResourceType

Obj = dict[str, Any]

# Subresources and what a client may do with them, as upstream's discovery lists them.
_SUBRESOURCE_VERBS: dict[str, tuple[str, ...]] = {
    "status": ("get", "patch", "update"),
    "scale": ("get", "patch", "update"),
    "binding": ("create",),
    "eviction": ("create",),
    "finalize": ("update",),
    "approval": ("get", "patch", "update"),
    "token": ("create",),
    "log": ("get",),
    "exec": ("create", "get"),
    "attach": ("create", "get"),
    "portforward": ("create", "get"),
    "ephemeralcontainers": ("get", "patch", "update"),
    "resize": ("get", "patch", "update"),
    "proxy": ("create", "delete", "get", "patch", "update"),
}
_SUBRESOURCE_KIND = {
    "exec": ("", "v1", "PodExecOptions"),
    "attach": ("", "v1", "PodAttachOptions"),
    "portforward": ("", "v1", "PodPortForwardOptions"),
    "scale": ("autoscaling", "v1", "Scale"),
    "binding": ("", "v1", "Binding"),
    "eviction": ("policy", "v1", "Eviction"),
    "token": ("authentication.k8s.io", "v1", "TokenRequest"),
}


def api_versions(server_address: str) -> Obj:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group(registry: Registry, name: str, versions: list[str]) -> Obj:
    gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}


def api_group_list(registry: Registry) -> Obj:
    groups = [_group(registry, g, vs) for g, vs in registry.groups().items() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: Registry, name: str) -> Obj | None:
    versions = registry.groups().get(name)
    if not versions or not name:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(registry, name, versions)}


def _storage_hash(rt: ResourceType) -> str:
    digest = hashlib.sha256(f"{rt.group}/{rt.stored_version}/{rt.kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def resource_list(registry: Registry, group: str, version: str) -> Obj | None:
    types = registry.in_group_version(group, version)
    if not types:
        return None
    resources: list[Obj] = []
    for rt in types:
        entry: Obj = {
            "name": rt.resource,
            "singularName": rt.singular_name,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(rt.verbs),
            "storageVersionHash": _storage_hash(rt),
        }
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        resources.append(entry)
        for sub in rt.subresources:
            sub_entry: Obj = {
                "name": f"{rt.resource}/{sub}",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": list(_SUBRESOURCE_VERBS.get(sub, ("get",))),
            }
            if sub == "proxy":
                sub_entry["kind"] = f"{rt.kind}ProxyOptions"
            elif sub in _SUBRESOURCE_KIND:
                g, v, k = _SUBRESOURCE_KIND[sub]
                # Upstream names the group and version only where they are not the resource's.
                if (g, v) != (rt.group, rt.version):
                    sub_entry.update({"group": g, "version": v})
                sub_entry["kind"] = k
            resources.append(sub_entry)
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}
