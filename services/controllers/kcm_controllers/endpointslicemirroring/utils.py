"""Views and pure helpers of the endpointslice-mirroring controller.

Upstream pkg/controller/endpointslicemirroring/utils.go (newEndpointSlice, addressToEndpoint,
epPortsToEpsPorts, skipMirror, hasLeaderElection, getEndpointSlicePrefix) and the endpoint
identity of staging k8s.io/endpointslice/util (the EndpointSet hash, EndpointsEqualBeyondHash).
Slices are plain JSON-form dicts, the shape the reconciler sends and compares; the Endpoints
and EndpointSlice views are what the caches decode. Nothing here does I/O.
"""

from __future__ import annotations

from typing import Any

import msgspec
from kcm_shared.apimachinery import codec, gvr
from kcm_shared.controllerutil import controllerref
from kcm_shared.controllerutil.endpoints import endpointutil

ENDPOINTS = gvr.Resource("", "v1", "endpoints")
SERVICES = gvr.Resource("", "v1", "services")
ENDPOINTSLICES = gvr.Resource("discovery.k8s.io", "v1", "endpointslices")

CONTROLLER_NAME = "endpointslicemirroring-controller.k8s.io"
LABEL_SERVICE_NAME = "kubernetes.io/service-name"
LABEL_MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
LABEL_SKIP_MIRROR = "endpointslice.kubernetes.io/skip-mirror"
LAST_CHANGE_TRIGGER_TIME = "endpoints.kubernetes.io/last-change-trigger-time"
LAST_APPLIED_CONFIG = "kubectl.kubernetes.io/last-applied-configuration"
LEADER_ELECTION_RECORD = "control-plane.alpha.kubernetes.io/leader"
IPV4 = "IPv4"
IPV6 = "IPv6"
# Annotations of the Endpoints never copied to its slices (upstream newEndpointSlice).
SKIPPED_ANNOTATIONS = (LAST_CHANGE_TRIGGER_TIME, LAST_APPLIED_CONFIG)
# A generateName prefix may be at most this long (ValidateEndpointSliceName with prefix=true:
# a DNS-1123 subdomain once the 5 random characters are appended).
_MAX_PREFIX = 253 - 5

Obj = dict[str, Any]


class ObjectReference(codec.View):
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    uid: str | None = None
    api_version: str | None = None
    resource_version: str | None = None
    field_path: str | None = None


class EndpointAddress(codec.View):
    ip: str = ""
    hostname: str = ""
    node_name: str | None = None
    target_ref: ObjectReference | None = None


class EndpointPort(codec.View):
    name: str = ""
    port: int = 0
    protocol: str = "TCP"
    app_protocol: str | None = None


class EndpointSubset(codec.View):
    addresses: list[EndpointAddress] = msgspec.field(default_factory=list)
    not_ready_addresses: list[EndpointAddress] = msgspec.field(default_factory=list)
    ports: list[EndpointPort] = msgspec.field(default_factory=list)


class EndpointsView(codec.Meta):
    subsets: list[EndpointSubset] = msgspec.field(default_factory=list)


class EndpointSliceView(codec.Meta):
    """A slice as the cache holds it; endpoints and ports stay JSON so they compare as written."""

    address_type: str = ""
    endpoints: list[Obj] | None = None
    ports: list[Obj] | None = None


def skip_mirror(labels: dict[str, str]) -> bool:
    return labels.get(LABEL_SKIP_MIRROR) == "true"


def has_leader_election(annotations: dict[str, str]) -> bool:
    return LEADER_ELECTION_RECORD in annotations


def should_mirror(endpoints: EndpointsView | None) -> bool:
    """upstream shouldMirror: not opted out, and not a leader-election lock."""
    return not (
        endpoints is None
        or skip_mirror(endpoints.metadata.labels)
        or has_leader_election(endpoints.metadata.annotations)
    )


def managed_by_controller(labels: dict[str, str]) -> bool:
    return labels.get(LABEL_MANAGED_BY) == CONTROLLER_NAME


def address_to_endpoint(address: EndpointAddress, ready: bool) -> tuple[Obj, str] | None:
    """An Endpoints address as a slice endpoint and its address type, None for an invalid IP.
    The IP is re-rendered in its canonical form (upstream re-stringifies it too)."""
    ip = endpointutil.parse_ip(address.ip)
    if ip is None:
        return None
    endpoint: Obj = {"addresses": [str(ip)], "conditions": {"ready": ready}}
    if address.target_ref is not None:
        endpoint["targetRef"] = msgspec.to_builtins(address.target_ref)
    if address.node_name is not None:
        endpoint["nodeName"] = address.node_name
    if address.hostname:
        endpoint["hostname"] = address.hostname
    return endpoint, IPV4 if ip.version == 4 else IPV6


def ep_ports_to_eps_ports(ports: list[EndpointPort]) -> list[Obj]:
    """upstream epPortsToEpsPorts: name (also when empty), port, protocol, appProtocol."""
    out: list[Obj] = []
    for p in ports:
        port: Obj = {"name": p.name, "port": p.port, "protocol": p.protocol}
        if p.app_protocol is not None:
            port["appProtocol"] = p.app_protocol
        out.append(port)
    return out


PortMapKey = tuple[str, tuple[tuple[str, int, str, str], ...]]


def port_map_key(ports: list[Obj] | None, address_type: str) -> PortMapKey:
    """upstream addrTypePortMapKey: the address type and the set of ports, order ignored."""
    return address_type, tuple(
        sorted(
            (
                str(p.get("name") or ""),
                int(p.get("port") or 0),
                str(p.get("protocol") or "TCP"),
                str(p.get("appProtocol") or ""),
            )
            for p in ports or []
        )
    )


def endpoint_hash(endpoint: Obj) -> tuple[tuple[str, ...], str, str, str]:
    """upstream's endpoint hash: an endpoint's identity across syncs (addresses, hostname and
    the target's namespace/name); the rest is compared by `endpoints_equal_beyond_hash`."""
    ref = endpoint.get("targetRef") or {}
    return (
        tuple(sorted(endpoint.get("addresses") or [])),
        endpoint.get("hostname") or "",
        ref.get("namespace") or "",
        ref.get("name") or "",
    )


def endpoints_equal_beyond_hash(a: Obj, b: Obj) -> bool:
    """upstream EndpointsEqualBeyondHash: nodeName, zone, the three conditions and targetRef
    but its resourceVersion. Hints are not compared (mirrored slices carry none of their own),
    nor is a targetRef's resourceVersion, which moves with every change of the pod: a slice
    is not rewritten for either."""
    conditions_a, conditions_b = a.get("conditions") or {}, b.get("conditions") or {}
    return (
        a.get("nodeName") == b.get("nodeName")
        and a.get("zone") == b.get("zone")
        and all(conditions_a.get(c) == conditions_b.get(c) for c in ("ready", "serving", "terminating"))
        and _without_version(a.get("targetRef")) == _without_version(b.get("targetRef"))
    )


def _without_version(ref: Obj | None) -> Obj | None:
    return None if ref is None else {k: v for k, v in ref.items() if k != "resourceVersion"}


def endpoint_slice_prefix(name: str) -> str:
    """upstream getEndpointSlicePrefix: `<name>-` unless that is too long for a generateName."""
    prefix = f"{name}-"
    return prefix if len(prefix) <= _MAX_PREFIX else name


def copied_annotations(annotations: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in annotations.items() if k not in SKIPPED_ANNOTATIONS}


def new_endpoint_slice(endpoints: EndpointsView, ports: list[Obj], address_type: str, name: str) -> Obj:
    """upstream newEndpointSlice: owned by the Endpoints, its labels (with the Service name and
    this controller as manager) and its annotations but the skipped ones; `name` empty means
    a new slice named after the Endpoints by the API server."""
    ref = controllerref.new_controller_ref(endpoints, "v1", "Endpoints")
    labels = dict(endpoints.metadata.labels)
    labels[LABEL_SERVICE_NAME] = endpoints.metadata.name
    labels[LABEL_MANAGED_BY] = CONTROLLER_NAME
    meta: Obj = {
        "namespace": endpoints.metadata.namespace,
        "labels": labels,
        "annotations": copied_annotations(endpoints.metadata.annotations),
        "ownerReferences": [msgspec.to_builtins(ref)],
    }
    if name:
        meta["name"] = name
    else:
        meta["generateName"] = endpoint_slice_prefix(endpoints.metadata.name)
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": meta,
        "addressType": address_type,
        "endpoints": [],
        "ports": ports,
    }
