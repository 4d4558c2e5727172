"""The `default/kubernetes` Service's Endpoints and EndpointSlice, pointing at this API server.

kube-apiserver publishes where it serves (pkg/controlplane/reconcilers, endpointsadapter.go):
the Service's port 443 targets its secure port, the Endpoints `kubernetes` (labelled
`endpointslice.kubernetes.io/skip-mirror: "true"`, so the mirroring controller leaves it alone)
has one subset with its address and the port `https`, and the EndpointSlice `kubernetes`
(labelled `kubernetes.io/service-name: kubernetes` only, no managed-by: no endpointslice
controller owns it, and the Service has no selector) has one ready endpoint per address, of the
address's type. Other slices labelled for the Service are deleted, as upstream deletes stale ones.

`serve` (main.py) calls `reconcile` once the port is known, and again on every restart, so a
moved address or port is corrected; writes go through the normal create/update paths
(validation, watch events). `advertise_address` is kube-apiserver's default when
--advertise-address is not given: the bind address when it is a usable one, else the
address of the host's default-route interface.
"""

from __future__ import annotations

import copy
import ipaddress
import logging
import socket

from kcm_apiserver import errors
from kcm_apiserver.operations import Api, Ctx
from kcm_apiserver.registry import ResourceType
from kcm_apiserver.store import Obj

log = logging.getLogger("kcm.apiserver")

NAMESPACE = "default"
NAME = "kubernetes"
PORT_NAME = "https"
LABEL_SKIP_MIRROR = "endpointslice.kubernetes.io/skip-mirror"
LABEL_SERVICE_NAME = "kubernetes.io/service-name"
# Where the routing table would send traffic to the internet; connecting a UDP socket sends nothing.
_PROBE_V4 = ("192.0.2.1", 9)  # TEST-NET-1: any routable address gives the default route
_PROBE_V6 = ("2001:db8::1", 9)


def _usable(ip: str) -> bool:
    """Not unspecified, loopback or link-local: what Endpoints validation accepts."""
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        return False
    return not (addr.is_unspecified or addr.is_loopback or addr.is_link_local or addr.is_multicast)


def _default_route_address(family: socket.AddressFamily, probe: tuple[str, int]) -> str | None:
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect(probe)
            ip: str = s.getsockname()[0]
    except OSError:
        return None
    return ip if _usable(ip) else None


def advertise_address(bind: str, configured: str | None = None) -> str | None:
    """The address to publish, or None when the host has no usable one (nothing is published)."""
    if configured:
        return configured
    if _usable(bind):
        return bind
    return _default_route_address(socket.AF_INET, _PROBE_V4) or _default_route_address(
        socket.AF_INET6, _PROBE_V6
    )


def _address_type(ip: str) -> str:
    return "IPv6" if ipaddress.ip_address(ip).version == 6 else "IPv4"


def desired_endpoints(ip: str, port: int) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": {LABEL_SKIP_MIRROR: "true"}},
        "subsets": [
            {"addresses": [{"ip": ip}], "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}]}
        ],
    }


def desired_slice(ip: str, port: int) -> Obj:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": {LABEL_SERVICE_NAME: NAME}},
        "addressType": _address_type(ip),
        "endpoints": [{"addresses": [ip], "conditions": {"ready": True}}],
        "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}],
    }


def _put(api: Api, rt: ResourceType, want: Obj, fields: tuple[str, ...]) -> None:
    """Create `want`, or update the stored object when one of `fields` (or its labels) differs."""
    ctx = Ctx(rt, NAMESPACE, field_manager="kube-apiserver")
    try:
        current = api.get(ctx, NAME)
    except errors.ApiError as exc:
        if exc.code != 404:
            raise
        api.create(ctx, want)
        return
    if (
        all(current.get(f) == want.get(f) for f in fields)
        and (current["metadata"].get("labels") or {}) == (want["metadata"]["labels"])
    ):
        return
    body = copy.deepcopy(current)
    body["metadata"]["labels"] = want["metadata"]["labels"]
    for f in fields:
        body[f] = want[f]
    api.update(Ctx(rt, NAMESPACE, field_manager="kube-apiserver"), NAME, body)


def _service_port(api: Api, port: int) -> None:
    """The Service's https port targets the port actually served (kube-apiserver's
    CreateOrUpdateMasterServiceIfNeeded reconciles its ports the same way)."""
    rt = api._rt("", "v1", "services")
    ctx = Ctx(rt, NAMESPACE, field_manager="kube-apiserver")
    svc = api.get(ctx, NAME)
    ports = svc["spec"].get("ports") or []
    if [p.get("targetPort") for p in ports if p.get("name") == PORT_NAME] == [port]:
        return
    body = copy.deepcopy(svc)
    for p in body["spec"]["ports"]:
        if p.get("name") == PORT_NAME:
            p["targetPort"] = port
    api.update(Ctx(rt, NAMESPACE, field_manager="kube-apiserver"), NAME, body)


def reconcile(api: Api, ip: str, port: int) -> None:
    """Make the Service's target port, the Endpoints and the EndpointSlice name `ip`:`port`."""
    _service_port(api, port)
    _put(api, api._rt("", "v1", "endpoints"), desired_endpoints(ip, port), ("subsets",))
    slices_rt = api._rt("discovery.k8s.io", "v1", "endpointslices")
    want = desired_slice(ip, port)
    ctx = Ctx(slices_rt, NAMESPACE)
    for other in api.list_objects(ctx, label_selector=f"{LABEL_SERVICE_NAME}={NAME}").items:
        meta = other["metadata"]
        if meta["name"] != NAME or other.get("addressType") != want["addressType"]:
            api.delete(Ctx(slices_rt, NAMESPACE), meta["name"], {})
    _put(api, slices_rt, want, ("addressType", "endpoints", "ports"))
    log.info("published default/kubernetes", extra={"address": ip, "port": port})
