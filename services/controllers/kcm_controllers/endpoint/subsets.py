"""Pure helpers of the endpoints controller: a pod's address for a Service, the canonical
subset layout, truncation to the Endpoints capacity, and the no-op check before a write.

Upstream pkg/controller/endpoint/endpoints_controller.go (podToEndpointAddressForService,
addEndpointSubset, endpointPortFromServicePort, truncateEndpoints, capacityAnnotationSetCorrectly,
endpointSubsetsEqualIgnoreResourceVersion) and pkg/api/v1/endpoints/util.go (RepackSubsets,
SortSubsets). Subsets, addresses and ports are their JSON form (plain dicts), the shape the
controller writes and the Endpoints cache decodes. Called by `endpoints_controller`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import msgspec
from kcm_shared import endpointutil

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


def _canonical(value: Any) -> bytes:
    return msgspec.json.encode(value, order="sorted")


def _address_key(address: Obj) -> tuple[bytes, str]:
    ref = address.get("targetRef") or {}
    return address.get("ip", "").encode(), ref.get("uid", "")


def repack_subsets(subsets: list[Obj]) -> list[Obj]:
    """The canonical layout of `subsets` (upstream RepackSubsets): addresses grouped by the
    exact set of ports they serve; an address de-duplicated by IP and pod uid; not ready for
    one port if it is not ready in any subset offering that port; subsets without ports
    (a headless Service without ports) kept. Addresses sorted by IP then uid; ports and
    subsets in a fixed order of their content."""
    addresses: dict[tuple[bytes, str], Obj] = {}
    # port (canonical JSON, or None for "no ports") -> address key -> ready
    by_port: dict[bytes | None, dict[tuple[bytes, str], bool]] = {}
    port_objs: dict[bytes, Obj] = {}
    for subset in subsets:
        ports = subset.get("ports") or []
        port_keys: list[bytes | None] = []
        for port in ports:
            canonical = _canonical(port)
            port_objs[canonical] = port
            port_keys.append(canonical)
        if not port_keys:
            port_keys.append(None)
        for pk in port_keys:
            readiness = by_port.setdefault(pk, {})
            for field, is_ready in (("addresses", True), ("notReadyAddresses", False)):
                for address in subset.get(field) or []:
                    key = _address_key(address)
                    addresses.setdefault(key, address)
                    # Not ready trumps ready.
                    if readiness.get(key, True):
                        readiness[key] = is_ready
    groups: dict[tuple[tuple[tuple[bytes, str], bool], ...], list[Obj]] = {}
    for port_key, readiness in by_port.items():
        members = tuple(sorted(readiness.items()))
        group = groups.setdefault(members, [])
        if port_key is not None:
            group.append(port_objs[port_key])
    out: list[Obj] = []
    for members, group_ports in groups.items():
        packed: Obj = {}
        ready_addresses = [addresses[k] for k, r in members if r]
        not_ready_addresses = [addresses[k] for k, r in members if not r]
        if ready_addresses:
            packed["addresses"] = ready_addresses
        if not_ready_addresses:
            packed["notReadyAddresses"] = not_ready_addresses
        if group_ports:
            packed["ports"] = sorted(group_ports, key=_canonical)
        out.append(packed)
    out.sort(key=_canonical)
    return out


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


def capacity_annotation_set_correctly(annotations: Mapping[str, str], subsets: list[Obj]) -> bool:
    """False when the Endpoints are over capacity (they must be truncated) or the annotation
    is there without being needed."""
    if count_addresses(subsets) > MAX_CAPACITY:
        return False
    return OVER_CAPACITY not in annotations


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


def subsets_equal_ignore_resource_version(a: list[Any], b: list[Any]) -> bool:
    return bool(_normal(a) == _normal(b))
