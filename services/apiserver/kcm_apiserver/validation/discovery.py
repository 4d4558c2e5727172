"""Validation of discovery.k8s.io/v1 EndpointSlices, after upstream's pkg/apis/discovery/validation.

addressType required, supported and immutable; 1 to 100 addresses per endpoint, valid for
that type (IPs through `core`'s ValidateNonSpecialIP, FQDNs as fully qualified names); at
most 1,000 endpoints and 20,000 ports; well-formed hostnames, node names, topology labels,
zone hints and ports.

Called by the dispatch in `validation/__init__.py`.
"""

from __future__ import annotations

from kcm_shared.apimachinery.selectors import (
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_value,
    is_qualified_name,
)
from kcm_shared.controllerutil.endpoints import endpointutil

from .core import PROTOCOLS, validate_non_special_ip
from .fielderrors import Causes, Obj, as_dict, as_list
from .metav1 import validate_labels

_ADDRESS_TYPES = ("FQDN", "IPv4", "IPv6")
_SLICE_MAX_ENDPOINTS = 1000
_SLICE_MAX_ADDRESSES = 100
_SLICE_MAX_PORTS = 20000
_SLICE_MAX_ZONE_HINTS = 8
_SLICE_MAX_TOPOLOGY_LABELS = 16


def _fqdn(c: Causes, value: str, path: str) -> None:
    """upstream IsFullyQualifiedDomainName (an FQDN EndpointSlice's addresses)."""
    if not value:
        c.required(path, "")
        return
    name = value.removesuffix(".")
    errs = is_dns1123_subdomain(name)
    if errs:
        c.invalid(path, name, ",".join(errs))
        return
    labels = name.split(".")
    if len(labels) < 2:
        c.invalid(path, name, "should be a domain with at least two segments separated by dots")
        return
    for label in labels:
        errs = is_dns1123_label(label)
        if errs:
            c.invalid(path, label, ",".join(errs))
            return


def _slice_address(c: Causes, address: str, address_type: str, path: str) -> None:
    if address_type in ("IPv4", "IPv6"):
        ip = endpointutil.parse_ip(address)
        if ip is None or (ip.version == 4) != (address_type == "IPv4"):
            c.invalid(path, address, f"must be a valid {address_type} address")
        else:
            validate_non_special_ip(c, address, path)
    elif address_type == "FQDN":
        _fqdn(c, address, path)
    # Other (deprecated or unknown) types' addresses are not checked, as upstream.


def _slice_endpoint(c: Causes, ep: Obj, address_type: str, path: str) -> None:
    addresses = as_list(ep.get("addresses"))
    if not addresses:
        c.required(f"{path}.addresses", "must contain at least 1 address")
    elif len(addresses) > _SLICE_MAX_ADDRESSES:
        c.too_many(f"{path}.addresses", len(addresses), _SLICE_MAX_ADDRESSES)
    for i, address in enumerate(addresses):
        _slice_address(c, str(address), address_type, f"{path}.addresses[{i}]")
    node_name = ep.get("nodeName")
    if node_name is not None:
        for msg in is_dns1123_subdomain(str(node_name)):
            c.invalid(f"{path}.nodeName", node_name, msg)
    topology = as_dict(ep.get("deprecatedTopology"))
    if len(topology) > _SLICE_MAX_TOPOLOGY_LABELS:
        c.too_many(f"{path}.deprecatedTopology", len(topology), _SLICE_MAX_TOPOLOGY_LABELS)
    validate_labels(c, topology, f"{path}.deprecatedTopology")
    hostname = ep.get("hostname")
    if hostname is not None:
        for msg in is_dns1123_label(str(hostname)):
            c.invalid(f"{path}.hostname", hostname, msg)
    hints = ep.get("hints")
    if hints is not None:
        zones = as_list(as_dict(hints).get("forZones"))
        if len(zones) > _SLICE_MAX_ZONE_HINTS:
            c.too_many(f"{path}.hints.forZones", len(zones), _SLICE_MAX_ZONE_HINTS)
            return
        seen: set[str] = set()
        for i, zone in enumerate(zones):
            name = str(as_dict(zone).get("name") or "")
            at = f"{path}.hints.forZones[{i}].name"
            if name in seen:
                c.duplicate(at, name)
            seen.add(name)
            for msg in is_label_value(name):
                c.invalid(at, name, msg)


def _slice_port(c: Causes, port: Obj, names: set[str], path: str) -> None:
    name = str(port.get("name") or "")
    if name:
        for msg in is_dns1123_label(name):
            c.invalid(f"{path}.name", name, msg)
    if name in names:
        c.duplicate(f"{path}.name", name)
    names.add(name)
    protocol = port.get("protocol")
    if protocol is None:
        c.required(f"{path}.protocol", "")
    elif protocol not in PROTOCOLS:
        c.not_supported(f"{path}.protocol", protocol, PROTOCOLS)
    app_protocol = port.get("appProtocol")
    if app_protocol is not None:
        for msg in is_qualified_name(str(app_protocol)):
            c.invalid(f"{path}.appProtocol", app_protocol, msg)


def validate_endpoint_slice(c: Causes, obj: Obj, old: Obj | None) -> None:
    """upstream ValidateEndpointSlice(Create/Update): addressType required, supported and
    immutable; 1..100 addresses per endpoint, valid for the address type; at most 1,000
    endpoints and 20,000 ports; ports, hostnames, node names and zone hints well-formed."""
    address_type = str(obj.get("addressType") or "")
    if not address_type:
        c.required("addressType", "")
    elif address_type not in _ADDRESS_TYPES:
        c.not_supported("addressType", address_type, _ADDRESS_TYPES)
    endpoints = as_list(obj.get("endpoints"))
    if len(endpoints) > _SLICE_MAX_ENDPOINTS:
        c.too_many("endpoints", len(endpoints), _SLICE_MAX_ENDPOINTS)
    else:
        for i, ep in enumerate(endpoints):
            _slice_endpoint(c, as_dict(ep), address_type, f"endpoints[{i}]")
    ports = as_list(obj.get("ports"))
    if len(ports) > _SLICE_MAX_PORTS:
        c.too_many("ports", len(ports), _SLICE_MAX_PORTS)
    else:
        names: set[str] = set()
        for i, port in enumerate(ports):
            _slice_port(c, as_dict(port), names, f"ports[{i}]")
    if old is not None:
        c.immutable("addressType", address_type, old.get("addressType"))
