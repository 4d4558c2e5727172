"""Pure helpers of the endpoints controller: a pod's address for a Service, truncation to the
Endpoints capacity, and the no-op check before a write.

Upstream pkg/controller/endpoint/endpoints_controller.go (podToEndpointAddressForService,
addEndpointSubset, endpointPortFromServicePort, truncateEndpoints, capacityAnnotationSetCorrectly,
endpointSubsetsEqualIgnoreResourceVersion); the canonical layout (RepackSubsets) is
`kcm_shared.controllerutil.endpoints.endpointutil.repack_subsets`, in upstream's order. Subsets,
addresses and ports are their JSON form (plain dicts), the shape the controller writes and the
Endpoints cache decodes. Called by `endpoints_controller`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from kcm_shared.controllerutil.endpoints import endpointutil

MAX_CAPACITY = 1000
OVER_CAPACITY = "endpoints.kubernetes.io/over-capacity"
TRUNCATED = "truncated"

Obj = dict[str, Any]


class NoAddressForFamily(LookupError):
    """The pod has no IP of the Service's IP family."""


def service_ip_family(service: endpointutil.ServiceView, pod: endpointutil.EndpointPodView) -> str:
    """The family of the address a Service wants from a pod: its first ipFamilies entry; with
    none (an API server that does not default them), its clusterIP's, or for a headless
    Service the pod's primary IP's."""
    if service.spec.ip_families:
        return service.spec.ip_families[0]
    if endpointutil.is_service_ip_set(service):
        return endpointutil.ip_family(service.spec.cluster_ip)
    return endpointutil.ip_family(pod.status.pod_ip)


def pod_address(service: endpointutil.ServiceView, pod: endpointutil.EndpointPodView) -> Obj:
    """The pod's EndpointAddress for this Service: its IP of the Service's family, nodeName,
    targetRef, and hostname when the pod's subdomain names the Service."""
    family = service_ip_family(service, pod)
    ip = next((p.ip for p in pod.status.pod_ips if endpointutil.ip_family(p.ip) == family), "")
    if not ip:
        raise NoAddressForFamily(f"failed to find a matching endpoint for service {service.metadata.name}")
    address: Obj = {"ip": ip}
    if endpointutil.should_set_hostname(pod, service):
        address["hostname"] = pod.spec.hostname
    address["nodeName"] = pod.spec.node_name
    address["targetRef"] = {
        "kind": "Pod",
        "namespace": pod.metadata.namespace,
        "name": pod.metadata.name,
        "uid": pod.metadata.uid,
    }
    return address


def endpoint_port(service_port: endpointutil.ServicePort, port: int) -> Obj:
    out: Obj = {}
    if service_port.name:
        out["name"] = service_port.name
    out["port"] = port
    out["protocol"] = service_port.protocol
    if service_port.app_protocol is not None:
        out["appProtocol"] = service_port.app_protocol
    return out


def one_address_subset(address: Obj, port: Obj | None, ready: bool) -> Obj:
    """addEndpointSubset: a subset of one address (ready or not) and at most one port."""
    subset: Obj = {"addresses" if ready else "notReadyAddresses": [address]}
    if port is not None:
        subset["ports"] = [port]
    return subset


def count_addresses(subsets: list[Obj]) -> int:
    return sum(len(s.get("addresses") or []) + len(s.get("notReadyAddresses") or []) for s in subsets)


def truncate(subsets: list[Obj]) -> bool:
    """Cut `subsets` (in place) to MAX_CAPACITY addresses, ready ones first, each subset keeping
    its proportional share rounded up (upstream truncateEndpoints). True if anything was cut."""
    total_ready = sum(len(s.get("addresses") or []) for s in subsets)
    total_not_ready = sum(len(s.get("notReadyAddresses") or []) for s in subsets)
    if total_ready + total_not_ready <= MAX_CAPACITY:
        return False
    truncate_ready = total_ready > MAX_CAPACITY
    limit = MAX_CAPACITY if truncate_ready else MAX_CAPACITY - total_ready
    total = total_ready if truncate_ready else total_not_ready
    can_be_added = limit
    for subset in subsets:
        field = "addresses" if truncate_ready else "notReadyAddresses"
        members = subset.get(field) or []
        to_add = min(math.ceil(len(members) / total * limit), can_be_added)
        kept = members[:to_add]
        if kept:
            subset[field] = kept
        else:
            subset.pop(field, None)
        if truncate_ready:
            subset.pop("notReadyAddresses", None)
        can_be_added -= len(kept)
    return True


def capacity_annotation_set_correctly(annotations: Mapping[str, str], over_capacity: bool) -> bool:
    """Whether the over-capacity annotation is there exactly when the addresses were truncated
    (upstream capacityAnnotationSetCorrectly, judged on the truncated subsets)."""
    return annotations.get(OVER_CAPACITY) == (TRUNCATED if over_capacity else None)


def _normal(value: Any) -> Any:
    """The JSON form with what Go's semantic equality cannot see removed: empty lists, maps and
    strings and nulls (absent), and a targetRef's resourceVersion (a pod's own updates)."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "targetRef" and isinstance(v, dict):
                v = {rk: rv for rk, rv in v.items() if rk != "resourceVersion"}
            n = _normal(v)
            if n in (None, "", [], {}):
                continue
            out[k] = n
        return out
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


_SUBSET_FIELDS = ("addresses", "notReadyAddresses", "ports")


def subsets_equal_ignore_resource_version(a: list[Any], b: list[Any]) -> bool:
    """Upstream endpointSubsetsEqualIgnoreResourceVersion on the JSON form. Items are compared
    as they are first and normalized (`_normal`) only when that differs, so the usual case,
    thousands of identical addresses, costs one C-level comparison each."""
    if len(a) != len(b):
        return False
    for sa, sb in zip(a, b, strict=True):
        if not isinstance(sa, dict) or not isinstance(sb, dict):
            if _normal(sa) != _normal(sb):
                return False
            continue
        for field in _SUBSET_FIELDS:
            la, lb = sa.get(field) or [], sb.get(field) or []
            if len(la) != len(lb):
                return False
            if any(x != y and _normal(x) != _normal(y) for x, y in zip(la, lb, strict=True)):
                return False
    return True
