"""Upstream's patch and list metadata for built-in types, which the Python client does not carry.

Kubernetes declares these as Go struct tags (`patchStrategy`, `patchMergeKey`) and
markers (`+listType`, `+listMapKey`, `+structType`); its published OpenAPI carries
them as `x-kubernetes-*` extensions. `schemas.openapi_v3` copies them into the OpenAPI
documents it serves (kubectl computes strategic merge patches from them) and
`schemas.patchtypes` into the `TypeInfo` trees patch and apply read.

Keys are OpenAPI definition names plus a JSON field name; values are the extensions
as they appear on that property in upstream's v3 spec.
"""

from __future__ import annotations

from typing import Final

Extensions = dict[str, str | list[str]]

_CORE: Final = "io.k8s.api.core.v1."
_APPS: Final = "io.k8s.api.apps.v1."
_BATCH: Final = "io.k8s.api.batch.v1."
_POLICY: Final = "io.k8s.api.policy.v1."
_AUTOSCALING_V2: Final = "io.k8s.api.autoscaling.v2."
_CERTIFICATES: Final = "io.k8s.api.certificates.v1."
_DISCOVERY: Final = "io.k8s.api.discovery.v1."
_RBAC: Final = "io.k8s.api.rbac.v1."
_STORAGE: Final = "io.k8s.api.storage.v1."
_APIEXT: Final = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1."
_META: Final = "io.k8s.apimachinery.pkg.apis.meta.v1."


def _merge(merge_key: str, *map_keys: str, retain: bool = False, list_type: str = "map") -> Extensions:
    """A list merged by key; its list-map keys default to the merge key."""
    ext: Extensions = {
        "x-kubernetes-patch-merge-key": merge_key,
        "x-kubernetes-patch-strategy": "merge,retainKeys" if retain else "merge",
        "x-kubernetes-list-type": list_type,
    }
    if list_type == "map":
        ext["x-kubernetes-list-map-keys"] = list(map_keys or (merge_key,))
    return ext


def _list_map(*keys: str) -> Extensions:
    """A list-map for server-side apply that strategic merge patch replaces whole."""
    return {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": list(keys)}


_ATOMIC: Final[Extensions] = {"x-kubernetes-list-type": "atomic"}
_SET: Final[Extensions] = {"x-kubernetes-list-type": "set"}
_MERGE_SET: Final[Extensions] = {"x-kubernetes-patch-strategy": "merge", "x-kubernetes-list-type": "set"}
_CONDITIONS: Final[Extensions] = _merge("type")

_CONTAINER: Final[dict[str, Extensions]] = {
    "args": _ATOMIC,
    "command": _ATOMIC,
    "env": _merge("name"),
    "envFrom": _ATOMIC,
    "ports": _merge("containerPort", "containerPort", "protocol"),
    "resizePolicy": _ATOMIC,
    "volumeDevices": _merge("devicePath"),
    "volumeMounts": _merge("mountPath"),
}

_BY_TYPE: Final[dict[str, dict[str, Extensions]]] = {
    # core/v1: pods and their templates
    _CORE + "Container": _CONTAINER,
    _CORE + "EphemeralContainer": _CONTAINER,
    _CORE + "PodSpec": {
        "containers": _merge("name"),
        "initContainers": _merge("name"),
        "ephemeralContainers": _merge("name"),
        "volumes": _merge("name", retain=True),
        "imagePullSecrets": _merge("name"),
        "hostAliases": _merge("ip"),
        "topologySpreadConstraints": _merge("topologyKey", "topologyKey", "whenUnsatisfiable"),
        "schedulingGates": _merge("name"),
        "resourceClaims": _merge("name", retain=True),
        "tolerations": _ATOMIC,
        "readinessGates": _ATOMIC,
    },
    _CORE + "PodStatus": {
        "conditions": _CONDITIONS,
        "podIPs": _merge("ip"),
        "hostIPs": _merge("ip", list_type="atomic"),
        "resourceClaimStatuses": _merge("name", retain=True),
        "containerStatuses": _ATOMIC,
        "initContainerStatuses": _ATOMIC,
        "ephemeralContainerStatuses": _ATOMIC,
    },
    _CORE + "ContainerStatus": {
        "allocatedResourcesStatus": _merge("name"),
        "volumeMounts": _merge("mountPath"),
    },
    _CORE + "PodDNSConfig": {"nameservers": _ATOMIC, "searches": _ATOMIC, "options": _ATOMIC},
    _CORE + "HostAlias": {"hostnames": _ATOMIC},
    _CORE + "NodeSelector": {"nodeSelectorTerms": _ATOMIC},
    _CORE + "NodeSelectorTerm": {"matchExpressions": _ATOMIC, "matchFields": _ATOMIC},
    _CORE + "NodeSelectorRequirement": {"values": _ATOMIC},
    _CORE + "Capabilities": {"add": _ATOMIC, "drop": _ATOMIC},
    # core/v1: other kinds
    _CORE + "ServiceSpec": {
        "ports": _merge("port", "port", "protocol"),
        "clusterIPs": _ATOMIC,
        "externalIPs": _ATOMIC,
        "ipFamilies": _ATOMIC,
        "loadBalancerSourceRanges": _ATOMIC,
    },
    _CORE + "ServiceStatus": {"conditions": _CONDITIONS},
    _CORE + "LoadBalancerStatus": {"ingress": _ATOMIC},
    _CORE + "NodeSpec": {"podCIDRs": _MERGE_SET, "taints": _ATOMIC},
    _CORE + "NodeStatus": {
        "addresses": _merge("type"),
        "conditions": _CONDITIONS,
        "volumesInUse": _ATOMIC,
        "volumesAttached": _ATOMIC,
        "images": _ATOMIC,
    },
    _CORE + "NamespaceStatus": {"conditions": _CONDITIONS},
    _CORE + "NamespaceSpec": {"finalizers": _ATOMIC},
    _CORE + "PersistentVolumeClaimSpec": {"accessModes": _ATOMIC},
    _CORE + "PersistentVolumeClaimStatus": {"conditions": _CONDITIONS, "accessModes": _ATOMIC},
    _CORE + "PersistentVolumeSpec": {"accessModes": _ATOMIC, "mountOptions": _ATOMIC},
    _CORE + "ReplicationControllerStatus": {"conditions": _CONDITIONS},
    _CORE + "ServiceAccount": {"secrets": _merge("name"), "imagePullSecrets": _ATOMIC},
    _CORE + "Endpoints": {"subsets": _ATOMIC},
    _CORE + "EndpointSubset": {"addresses": _ATOMIC, "notReadyAddresses": _ATOMIC, "ports": _ATOMIC},
    _CORE + "LimitRangeSpec": {"limits": _ATOMIC},
    _CORE + "ResourceQuotaSpec": {"scopes": _ATOMIC},
    # apps/v1
    _APPS + "DeploymentSpec": {"strategy": {"x-kubernetes-patch-strategy": "retainKeys"}},
    _APPS + "DeploymentStatus": {"conditions": _CONDITIONS},
    _APPS + "ReplicaSetStatus": {"conditions": _CONDITIONS},
    _APPS + "StatefulSetStatus": {"conditions": _CONDITIONS},
    _APPS + "DaemonSetStatus": {"conditions": _CONDITIONS},
    _APPS + "StatefulSetSpec": {"volumeClaimTemplates": _ATOMIC},
    # batch/v1
    _BATCH + "JobStatus": {"conditions": _merge("type", list_type="atomic")},
    # policy/v1
    _POLICY + "PodDisruptionBudgetSpec": {"selector": {"x-kubernetes-patch-strategy": "replace"}},
    _POLICY + "PodDisruptionBudgetStatus": {"conditions": _CONDITIONS},
    # autoscaling/v2
    _AUTOSCALING_V2 + "HorizontalPodAutoscalerSpec": {"metrics": _ATOMIC},
    _AUTOSCALING_V2 + "HorizontalPodAutoscalerStatus": {"conditions": _CONDITIONS, "currentMetrics": _ATOMIC},
    _AUTOSCALING_V2 + "HPAScalingRules": {"policies": _ATOMIC},
    # certificates.k8s.io/v1: conditions are a list-map but not strategic-merged
    _CERTIFICATES + "CertificateSigningRequestStatus": {"conditions": _list_map("type")},
    _CERTIFICATES + "CertificateSigningRequestSpec": {"usages": _ATOMIC, "groups": _ATOMIC},
    # discovery.k8s.io/v1
    _DISCOVERY + "EndpointSlice": {"endpoints": _ATOMIC, "ports": _ATOMIC},
    _DISCOVERY + "Endpoint": {"addresses": _SET},
    # rbac.authorization.k8s.io/v1
    _RBAC + "Role": {"rules": _ATOMIC},
    _RBAC + "ClusterRole": {"rules": _ATOMIC},
    _RBAC + "RoleBinding": {"subjects": _ATOMIC},
    _RBAC + "ClusterRoleBinding": {"subjects": _ATOMIC},
    _RBAC + "PolicyRule": {
        "apiGroups": _ATOMIC,
        "resources": _ATOMIC,
        "resourceNames": _ATOMIC,
        "verbs": _ATOMIC,
        "nonResourceURLs": _ATOMIC,
    },
    # storage.k8s.io/v1
    _STORAGE + "CSINodeSpec": {"drivers": _merge("name")},
    # apiextensions.k8s.io/v1
    _APIEXT + "CustomResourceDefinitionStatus": {"conditions": _list_map("type"), "storedVersions": _ATOMIC},
    _APIEXT + "CustomResourceDefinitionSpec": {"versions": _ATOMIC},
    # meta/v1
    _META + "ObjectMeta": {"finalizers": _MERGE_SET, "ownerReferences": _merge("uid")},
    _META + "LabelSelector": {"matchExpressions": _ATOMIC},
    _META + "LabelSelectorRequirement": {"values": _ATOMIC},
}

# Structs that server-side apply replaces as a unit (`+structType=atomic`).
ATOMIC_STRUCTS: Final[frozenset[str]] = frozenset(
    {
        _META + "LabelSelector",
        _CORE + "LocalObjectReference",
        _CORE + "ObjectReference",
        _CORE + "TypedLocalObjectReference",
        _CORE + "NodeSelector",
        _CORE + "NodeSelectorTerm",
        _CORE + "TopologySelectorTerm",
        _CORE + "ConfigMapKeySelector",
        _CORE + "SecretKeySelector",
        _CORE + "ObjectFieldSelector",
        _CORE + "ResourceFieldSelector",
        _CORE + "ConfigMapEnvSource",
        _CORE + "SecretEnvSource",
        _CORE + "SecretReference",
        _CORE + "ScopeSelector",
    }
)


def field_extensions(definition: str, field: str) -> Extensions:
    """The `x-kubernetes-*` extensions upstream puts on one property; empty when none."""
    return _BY_TYPE.get(definition, {}).get(field, {})
