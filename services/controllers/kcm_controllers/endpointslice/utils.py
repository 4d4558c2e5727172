"""Pure helpers of the endpointslice reconciler: a pod's endpoint, a Service's address types and
ports, the labels of its slices, and the identities the reconciler matches endpoints and port
sets by.

Upstream staging/src/k8s.io/endpointslice/utils.go (podToEndpoint, getEndpointPorts,
getEndpointAddresses, newEndpointSlice, setEndpointSliceLabels, ownedBy, getSliceToFill,
addTriggerTimeAnnotation, getAddressTypesForService) and util/controller_utils.go
(EndpointsEqualBeyondHash, the endpoint hash, NewPortMapKey). Called by `reconciler`.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Sequence

import msgspec
from kcm_shared.apimachinery import codec
from kcm_shared.controllerutil import controllerref
from kcm_shared.controllerutil.endpoints import endpointutil

from kcm_controllers.endpointslice import views

log = logging.getLogger("kcm.endpointslice")

LABEL_ZONE = views.LABEL_ZONE
_RESERVED = (views.LABEL_SERVICE_NAME, views.LABEL_MANAGED_BY, views.LABEL_HEADLESS)

EndpointHash = tuple[tuple[str, ...], str, str, str]
PortMapKey = tuple[tuple[str, str, int, str], ...]


def address_types_for_service(svc: endpointutil.ServiceView) -> list[str]:
    """The address types a Service's slices carry: one per ipFamilies entry; for a Service
    written before dual-stack, its clusterIP's family; a headless one without families, both."""
    types = [f for f in (endpointutil.IPV4, endpointutil.IPV6) if f in svc.spec.ip_families]
    if types:
        return types
    if endpointutil.is_service_ip_set(svc):
        return [endpointutil.ip_family(svc.spec.cluster_ip)]
    return [views.IPV4, views.IPV6]


def endpoint_ports(
    svc: endpointutil.ServiceView, pod: endpointutil.EndpointPodView
) -> list[views.EndpointPort]:
    """Each Service port resolved on `pod`, in upstream's order (`endpointutil.slice_port_order`,
    which is the order of a new slice's ports); one whose named targetPort the pod lacks is left out."""
    if not svc.spec.ports and svc.spec.cluster_ip == endpointutil.CLUSTER_IP_NONE:
        return []  # a headless Service may have no ports
    out = []
    for port in svc.spec.ports:
        try:
            number = endpointutil.find_port(pod, port)
        except endpointutil.PortNotFound as exc:
            log.debug(
                "failed to find port for service", extra={"service": codec.key_of(svc), "error": str(exc)}
            )
            continue
        out.append(
            views.EndpointPort(
                name=port.name, protocol=port.protocol, port=number, app_protocol=port.app_protocol
            )
        )
    return sorted(out, key=_port_order)


def _port_order(port: views.EndpointPort) -> bytes:
    return endpointutil.slice_port_order(
        {
            "name": port.name or "",
            "protocol": port.protocol or "",
            "port": port.port or 0,
            "appProtocol": port.app_protocol,
        }
    )


def endpoint_addresses(pod: endpointutil.EndpointPodView, address_type: str) -> list[str]:
    ips = [p.ip for p in pod.status.pod_ips] or ([pod.status.pod_ip] if pod.status.pod_ip else [])
    return [ip for ip in ips if endpointutil.ip_family(ip) == address_type]


def pod_to_endpoint(
    pod: endpointutil.EndpointPodView,
    node: codec.Meta | None,
    svc: endpointutil.ServiceView,
    address_type: str,
) -> views.Endpoint:
    """The endpoint of one pod: ready only when serving and not terminating, unless the Service
    publishes not-ready addresses; the zone from its node's topology label."""
    serving = endpointutil.is_pod_ready(pod)
    terminating = pod.metadata.deletion_timestamp is not None
    ready = svc.spec.publish_not_ready_addresses or (serving and not terminating)
    zone = node.metadata.labels.get(LABEL_ZONE) if node is not None else None
    return views.Endpoint(
        addresses=endpoint_addresses(pod, address_type),
        conditions=views.EndpointConditions(ready=ready, serving=serving, terminating=terminating),
        target_ref=views.TargetRef(
            kind="Pod", namespace=pod.metadata.namespace, name=pod.metadata.name, uid=pod.metadata.uid
        ),
        node_name=pod.spec.node_name or None,
        zone=zone or None,
        hostname=pod.spec.hostname if endpointutil.should_set_hostname(pod, svc) else None,
    )


def endpoint_hash(ep: views.Endpoint) -> EndpointHash:
    """What identifies an endpoint across syncs: its addresses, hostname and target pod."""
    ref = ep.target_ref
    return (
        tuple(sorted(ep.addresses)),
        ep.hostname or "",
        ref.namespace if ref is not None else "",
        ref.name if ref is not None else "",
    )


def endpoints_equal_beyond_hash(a: views.Endpoint, b: views.Endpoint) -> bool:
    """Whether two endpoints of the same hash agree on everything the reconciler sets besides
    hints: node, zone, conditions and target (UID included)."""
    return (
        a.node_name == b.node_name
        and a.zone == b.zone
        and a.conditions == b.conditions
        and a.target_ref == b.target_ref
    )


def port_map_key(ports: Iterable[views.EndpointPort] | None) -> PortMapKey:
    """The set of ports a slice serves, order-insensitive: slices are grouped by it."""
    return tuple(
        sorted((p.name or "", p.protocol or "", p.port or 0, p.app_protocol or "") for p in ports or ())
    )


def owned_by(slice_: views.EndpointSlice, svc: endpointutil.ServiceView) -> bool:
    return any(
        ref.uid == svc.metadata.uid and ref.kind == "Service" and ref.api_version == "v1"
        for ref in slice_.metadata.owner_references
    )


def slice_labels(
    slice_: views.EndpointSlice, svc: endpointutil.ServiceView, controller_name: str
) -> tuple[dict[str, str], bool]:
    """The labels a slice should carry (the Service's, plus the reserved ones) and whether the
    Service's own labels differ from the slice's. Like upstream, a change of the headless label
    alone is not reported as a change."""
    current = {k: v for k, v in slice_.metadata.labels.items() if k not in _RESERVED}
    wanted = {k: v for k, v in svc.metadata.labels.items() if k not in _RESERVED}
    changed = current != wanted
    if endpointutil.is_service_ip_set(svc):
        wanted.pop(views.LABEL_HEADLESS, None)
    else:
        wanted[views.LABEL_HEADLESS] = ""
    wanted[views.LABEL_SERVICE_NAME] = svc.metadata.name
    wanted[views.LABEL_MANAGED_BY] = controller_name
    return wanted, changed


def new_endpoint_slice(
    svc: endpointutil.ServiceView,
    ports: Sequence[views.EndpointPort],
    address_type: str,
    controller_name: str,
) -> views.EndpointSlice:
    """An empty slice for `svc` (generateName `<service>-`, owned by the Service)."""
    owner = controllerref.new_controller_ref(svc, "v1", "Service")
    slice_ = views.EndpointSlice(
        metadata=codec.ObjectMeta(
            namespace=svc.metadata.namespace,
            # Service names are DNS-1035 labels (at most 63), so the dash always fits.
            generate_name=f"{svc.metadata.name}-",
            owner_references=[owner],
        ),
        kind="EndpointSlice",
        api_version="discovery.k8s.io/v1",
        address_type=address_type,
        ports=list(ports),
        endpoints=[],
    )
    labels, _ = slice_labels(slice_, svc, controller_name)
    slice_.metadata.labels = labels
    return slice_


def get_slice_to_fill(
    slices: Iterable[views.EndpointSlice], count: int, max_endpoints: int
) -> views.EndpointSlice | None:
    """The slice `count` more endpoints fit in most tightly, or None."""
    closest_diff = max_endpoints
    closest = None
    for slice_ in slices:
        diff = max_endpoints - (count + len(slice_.endpoints or ()))
        if 0 <= diff < closest_diff:
            closest_diff, closest = diff, slice_
            if diff == 0:
                return closest
    return closest


def with_trigger_time(slice_: views.EndpointSlice, trigger: dt.datetime | None) -> views.EndpointSlice:
    """`slice_` annotated with the last-change-trigger-time, or without it when there is none."""
    annotations = dict(slice_.metadata.annotations)
    if trigger is not None:
        annotations[views.LAST_CHANGE_TRIGGER_TIME] = endpointutil.format_trigger_time(trigger)
    else:
        annotations.pop(views.LAST_CHANGE_TRIGGER_TIME, None)
    meta = msgspec.structs.replace(slice_.metadata, annotations=annotations)
    return msgspec.structs.replace(slice_, metadata=meta)


def is_placeholder_of(existing: views.EndpointSlice, placeholder: views.EndpointSlice) -> bool:
    """Whether an existing slice is the placeholder the reconciler would create (same namespace,
    labels, owners, address type; no endpoints, no ports)."""
    return (
        existing.metadata.namespace == placeholder.metadata.namespace
        and existing.metadata.labels == placeholder.metadata.labels
        and existing.metadata.owner_references == placeholder.metadata.owner_references
        and existing.address_type == placeholder.address_type
        and not existing.endpoints
        and not existing.ports
    )
