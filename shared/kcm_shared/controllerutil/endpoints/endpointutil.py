"""What the Service-networking controllers share: Service and Pod views and the pure rules that
decide which pods back a Service, on which port, and when a pod change matters.

Upstream pkg/controller/util/endpoint (controller_utils.go, trigger_time_tracker.go; moved to
staging k8s.io/endpointslice/util) and the two pod helpers it leans on from pkg/api/v1/pod
(FindPort, IsPodReady). The endpoints controller (`kcm_controllers.endpoint`), the endpointslice
controller and the endpointslice-mirroring controller import it; nothing here does I/O.

- `ServiceView` / `EndpointPodView`: the fields of a Service and of a Pod those controllers read.
- `should_pod_be_in_endpoints`: a pod with an IP that is not terminal (Succeeded/Failed), and,
  unless the caller includes terminating pods, not being deleted (ShouldPodBeInEndpoints).
- `find_port`: the container port a Service port targets on one pod; a named targetPort is
  looked up per pod among its containers' (and sidecar init containers') ports of the same
  protocol (FindPort); `PortNotFound` when no port has that name.
- `should_set_hostname`: the pod's hostname goes into the address when its subdomain is the
  Service's name in the same namespace (ShouldSetHostname).
- `pod_endpoints_changed`, `SelectorCache`, `services_to_update_on_pod_change`: which Services a
  pod update must requeue (podEndpointsChanged, ServiceSelectorCache, GetServicesToUpdateOnPodChange,
  determineNeededServiceUpdates).
- `repack_subsets`: the canonical layout of Endpoints subsets (pkg/api/v1/endpoints
  RepackSubsets), which the endpoints controller writes and the embedded API server stores;
  ports and subsets in upstream's order, so Endpoints that stock kube-controller-manager wrote
  read as up to date (kube-apiserver 1.32 stores subsets as written).
- `TriggerTimeTracker`: the value of the `endpoints.kubernetes.io/last-change-trigger-time`
  annotation (TriggerTimeTracker), and `ip_family` for an address's family (utilnet.IsIPv6String).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
from collections.abc import Callable, Iterable, Set
from typing import Any

import msgspec

from kcm_shared.apimachinery import codec, selectors
from kcm_shared.controllerutil import podranking

LAST_CHANGE_TRIGGER_TIME = "endpoints.kubernetes.io/last-change-trigger-time"
IS_HEADLESS_SERVICE = "service.kubernetes.io/headless"
CLUSTER_IP_NONE = "None"
IPV4 = "IPv4"
IPV6 = "IPv6"


# --- views -------------------------------------------------------------------------------------


class ServicePort(codec.View):
    name: str = ""
    protocol: str = "TCP"
    app_protocol: str | None = None
    port: int = 0
    # int or string (a container port's name); None when the API server did not default it.
    target_port: int | str | None = None
    node_port: int = 0


class ServiceSpec(codec.View):
    # None (no selector: Endpoints are written by hand) differs from {} (selects every pod).
    selector: dict[str, str] | None = None
    ports: list[ServicePort] = msgspec.field(default_factory=list)
    cluster_ip: str = msgspec.field(default="", name="clusterIP")
    cluster_ips: list[str] = msgspec.field(default_factory=list, name="clusterIPs")
    type: str = "ClusterIP"
    publish_not_ready_addresses: bool = False
    ip_families: list[str] = msgspec.field(default_factory=list)


class ServiceView(codec.Meta):
    """The fields of a core/v1 Service the endpoint controllers read."""

    spec: ServiceSpec = msgspec.field(default_factory=ServiceSpec)


class ContainerPort(codec.View):
    name: str = ""
    container_port: int = 0
    protocol: str = "TCP"


class PodContainer(codec.View):
    name: str = ""
    ports: list[ContainerPort] = msgspec.field(default_factory=list)
    restart_policy: str | None = None  # "Always" on an init container marks a sidecar


class EndpointPodSpec(podranking.PodSpecView):
    hostname: str = ""
    subdomain: str = ""
    restart_policy: str = ""
    containers: list[PodContainer] = msgspec.field(default_factory=list)
    init_containers: list[PodContainer] = msgspec.field(default_factory=list)  # type: ignore[assignment]


class PodIP(codec.View):
    ip: str = ""


class EndpointPodStatus(podranking.PodStatusView):
    pod_ip: str = msgspec.field(default="", name="podIP")
    pod_ips: list[PodIP] = msgspec.field(default_factory=list, name="podIPs")


class EndpointPodView(podranking.PodView):
    """The fields of a Pod the endpoint controllers read (a PodView, so podranking's readiness
    helpers apply)."""

    spec: EndpointPodSpec = msgspec.field(default_factory=EndpointPodSpec)
    status: EndpointPodStatus = msgspec.field(default_factory=EndpointPodStatus)


# --- which pods, which ports --------------------------------------------------------------------


def is_pod_ready(pod: EndpointPodView) -> bool:
    return podranking.is_pod_ready(pod)


def is_pod_terminal(pod: EndpointPodView) -> bool:
    return pod.status.phase in ("Succeeded", "Failed")


def should_pod_be_in_endpoints(pod: EndpointPodView, include_terminating: bool) -> bool:
    """Whether a pod belongs in its Services' Endpoints/EndpointSlices at all (ready or not)."""
    if is_pod_terminal(pod):
        return False
    if not pod.status.pod_ip and not pod.status.pod_ips:
        return False
    return include_terminating or pod.metadata.deletion_timestamp is None


def should_set_hostname(pod: EndpointPodView, service: ServiceView) -> bool:
    return (
        bool(pod.spec.hostname)
        and pod.spec.subdomain == service.metadata.name
        and service.metadata.namespace == pod.metadata.namespace
    )


class PortNotFound(LookupError):
    """A Service port's named targetPort matches no port of the pod."""


def find_port(pod: EndpointPodView, service_port: ServicePort) -> int:
    """The port on `pod` that `service_port` sends to (upstream podutil.FindPort).

    A number is used as it is; a name is looked up among the ports of the pod's containers, then
    of its sidecars (init containers with restartPolicy Always), with the Service port's protocol.
    """
    target = service_port.target_port
    if target is None:
        return service_port.port  # the API server defaults targetPort to port
    if isinstance(target, int):
        return target
    for container in pod.spec.containers:
        for port in container.ports:
            if port.name == target and port.protocol == service_port.protocol:
                return port.container_port
    for container in pod.spec.init_containers:
        if container.restart_policy != "Always":
            continue
        for port in container.ports:
            if port.name == target and port.protocol == service_port.protocol:
                return port.container_port
    raise PortNotFound(f"no suitable port for manifest: {pod.metadata.uid}")


def ip_family(address: str) -> str:
    """IPV6 for an IPv6 address, else IPV4 (upstream utilnet.IsIPv6String, discovery AddressType)."""
    if ":" not in address:
        return IPV4  # IPv4, or no IP at all (which Go counts as not IPv6): no need to parse
    ip = parse_ip(address)
    return IPV6 if ip is not None and ip.version == 6 else IPV4


def parse_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address Go's net.ParseIP gives, or None; an IPv4-mapped IPv6 address is IPv4, as
    Go's To4 says. The endpointslice-mirroring controller and the API server's validation
    read addresses through it."""
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def has_selector(service: ServiceView) -> bool:
    """Whether the Service selects pods. An empty selector counts as none: kube-apiserver stores
    `selector: {}` as absent, so upstream's controllers see nil there."""
    return bool(service.spec.selector)


def is_service_ip_set(service: ServiceView) -> bool:
    """False for a headless Service (clusterIP None or unset): upstream helper.IsServiceIPSet."""
    return service.spec.cluster_ip not in ("", CLUSTER_IP_NONE)


# --- which Services a pod change touches --------------------------------------------------------


def pod_endpoints_changed(old: EndpointPodView, new: EndpointPodView) -> tuple[bool, bool]:
    """(the pod changed in a way that changes its addresses, it may match other Services now).

    NodeName, name, namespace and uid are not compared: they are immutable once the pod has an
    IP, and before that the pod is in no Endpoints.
    """
    labels_changed = (
        new.metadata.labels != old.metadata.labels
        or new.spec.hostname != old.spec.hostname
        or new.spec.subdomain != old.spec.subdomain
    )
    if new.metadata.deletion_timestamp != old.metadata.deletion_timestamp:
        return True, labels_changed
    if is_pod_ready(old) != is_pod_ready(new):
        return True, labels_changed
    if [p.ip for p in old.status.pod_ips] != [p.ip for p in new.status.pod_ips]:
        return True, labels_changed
    return False, labels_changed


class SelectorCache:
    """Parsed Service selectors by Service key, so a pod event does not re-parse every
    selector in its namespace (upstream ServiceSelectorCache). A selector is re-parsed when the
    Service's raw selector differs from the one cached; call `delete` when a Service goes."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[dict[str, str], selectors.LabelSelector]] = {}

    def get(self, key: str, raw: dict[str, str]) -> selectors.LabelSelector:
        hit = self._cache.get(key)
        if hit is not None and hit[0] == raw:
            return hit[1]
        selector = selectors.selector_from_set(raw)
        self._cache[key] = (dict(raw), selector)
        return selector

    def delete(self, key: str) -> None:
        self._cache.pop(key, None)

    def pod_service_memberships(self, services: Iterable[ServiceView], pod: EndpointPodView) -> set[str]:
        """Keys of the Services among `services` (those of the pod's namespace) whose selector
        matches the pod. A Service without a selector matches nothing (not everything)."""
        out: set[str] = set()
        for svc in services:
            if not has_selector(svc) or svc.metadata.namespace != pod.metadata.namespace:
                continue
            key = codec.key_of(svc)
            if self.get(key, svc.spec.selector or {}).matches(pod.metadata.labels):
                out.add(key)
        return out


def determine_needed_service_updates(old: Set[str], new: Set[str], pod_changed: bool) -> set[str]:
    """All Services of both sets when the pod itself changed; otherwise (only its labels did)
    the Services it joined or left."""
    if pod_changed:
        return set(old) | set(new)
    return set(old) ^ set(new)


def services_to_update_on_pod_change(
    services: Iterable[ServiceView], cache: SelectorCache, old: EndpointPodView, new: EndpointPodView
) -> set[str]:
    """Keys of the Services a pod update may change (upstream GetServicesToUpdateOnPodChange).

    `services`: the Services of the pod's namespace (it is read twice when labels changed).
    """
    if new.metadata.resource_version == old.metadata.resource_version:
        return set()  # a resync of the same version
    pod_changed, labels_changed = pod_endpoints_changed(old, new)
    if not pod_changed and not labels_changed:
        return set()
    candidates = list(services)
    current = cache.pod_service_memberships(candidates, new)
    if labels_changed:
        previous = cache.pod_service_memberships(candidates, old)
        return determine_needed_service_updates(previous, current, pod_changed)
    return current


# --- the canonical layout of Endpoints subsets ----------------------------------------------


def _canonical(value: Any) -> bytes:
    return msgspec.json.encode(value, order="sorted")


# Upstream orders ports and subsets by the md5 of Go's dump of the typed value (hashutil's
# DeepHashObject: spew's `%#v` with pointers followed, strings raw). These print the JSON form
# as that dump prints the API types, fields (Go name, Go type, JSON key) in Go's declaration
# order: an absent pointer or list is `<nil>`, an absent string or number its zero value.
_GoFields = tuple[tuple[str, str, str], ...]
_REFERENCE_FIELDS: _GoFields = (
    ("Kind", "string", "kind"),
    ("Namespace", "string", "namespace"),
    ("Name", "string", "name"),
    ("UID", "types.UID", "uid"),
    ("APIVersion", "string", "apiVersion"),
    ("ResourceVersion", "string", "resourceVersion"),
    ("FieldPath", "string", "fieldPath"),
)
_PORT_FIELDS: _GoFields = (  # core/v1 EndpointPort
    ("Name", "string", "name"),
    ("Port", "int32", "port"),
    ("Protocol", "v1.Protocol", "protocol"),
    ("AppProtocol", "*string", "appProtocol"),
)
_SLICE_PORT_FIELDS: _GoFields = (  # discovery/v1 EndpointPort (its package is also `v1`)
    ("Name", "*string", "name"),
    ("Protocol", "*v1.Protocol", "protocol"),
    ("Port", "*int32", "port"),
    ("AppProtocol", "*string", "appProtocol"),
)


def _go(kind: str, value: Any) -> str:
    if value is not None:
        return str(value)
    if kind.startswith("*"):
        return "<nil>"
    return "0" if kind == "int32" else ""


def _go_struct(fields: _GoFields, value: dict[str, Any]) -> str:
    return "{" + " ".join(f"{field}:({kind}){_go(kind, value.get(key))}" for field, kind, key in fields) + "}"


def _go_list(type_name: str, items: list[Any] | None, dump: Callable[[Any], str]) -> str:
    inner = "<nil>" if items is None else f"[{' '.join(dump(item) for item in items)}]"
    return f"([]{type_name}){inner}"


def _dump_port(port: dict[str, Any]) -> str:
    return _go_struct(_PORT_FIELDS, port)


def _dump_address(address: dict[str, Any]) -> str:
    ref = address.get("targetRef")
    target = _go_struct(_REFERENCE_FIELDS, ref) if isinstance(ref, dict) else "<nil>"
    return (
        f"{{IP:(string){_go('string', address.get('ip'))} "
        f"Hostname:(string){_go('string', address.get('hostname'))} "
        f"NodeName:(*string){_go('*string', address.get('nodeName'))} TargetRef:(*v1.ObjectReference){target}}}"
    )


def _md5(text: str) -> bytes:
    return hashlib.md5(text.encode(), usedforsecurity=False).digest()


def _port_order(port: dict[str, Any]) -> bytes:
    """Upstream's sort key of a port (portsByHash)."""
    return _md5(f"(v1.EndpointPort){_dump_port(port)}")


def slice_port_order(port: dict[str, Any]) -> bytes:
    """Upstream's sort key of an EndpointSlice port (JSON form), by which its endpointslice
    controller writes a slice's ports: NewPortMapKey sorts the pod's ports in place by the md5
    of their dump. Upstream sets every pointer but appProtocol: pass name "" rather than none."""
    return _md5(f"(v1.EndpointPort){_go_struct(_SLICE_PORT_FIELDS, port)}")


def _subset_order(subset: dict[str, Any]) -> bytes:
    """Upstream's sort key of a subset whose lists are sorted already (subsetsByHash)."""
    addresses = _go_list("v1.EndpointAddress", subset.get("addresses"), _dump_address)
    not_ready = _go_list("v1.EndpointAddress", subset.get("notReadyAddresses"), _dump_address)
    ports = _go_list("v1.EndpointPort", subset.get("ports"), _dump_port)
    return _md5(f"(v1.EndpointSubset){{Addresses:{addresses} NotReadyAddresses:{not_ready} Ports:{ports}}}")


def _address_key(address: dict[str, Any]) -> tuple[bytes, str]:
    """(IP, pod uid): the identity of an address, and its sort order (IP bytes, then uid)."""
    ref = address.get("targetRef")
    uid = ref.get("uid") if isinstance(ref, dict) else None
    return str(address.get("ip") or "").encode(), str(uid or "")


def repack_subsets(subsets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The canonical layout of `subsets`, JSON-form EndpointSubsets (upstream RepackSubsets of
    pkg/api/v1/endpoints, which upstream's endpoints controller writes): addresses grouped by the
    exact set of ports they serve; an address de-duplicated by IP and pod uid; not ready for
    one port if it is not ready in any subset offering that port; subsets without ports
    (a headless Service without ports) kept, ports without addresses dropped. Addresses sorted
    by IP then uid; ports and subsets in upstream's order (`_port_order`, `_subset_order`)."""
    addresses: dict[tuple[bytes, str], dict[str, Any]] = {}
    # port (canonical JSON, or None for "no ports") -> address key -> ready
    by_port: dict[bytes | None, dict[tuple[bytes, str], bool]] = {}
    port_objs: dict[bytes, dict[str, Any]] = {}
    for subset in subsets:
        ports = subset.get("ports") or []
        port_keys: list[bytes | None] = []
        for port in ports:
            canonical = _canonical(port)
            port_objs[canonical] = port
            port_keys.append(canonical)
        if not port_keys:
            port_keys.append(None)
        for port_key in port_keys:
            for field, is_ready in (("addresses", True), ("notReadyAddresses", False)):
                for address in subset.get(field) or []:
                    key = _address_key(address)
                    addresses.setdefault(key, address)
                    # A port is kept only with an address that serves it; not ready trumps ready.
                    readiness = by_port.setdefault(port_key, {})
                    if readiness.get(key, True):
                        readiness[key] = is_ready
    groups: dict[tuple[tuple[tuple[bytes, str], bool], ...], list[dict[str, Any]]] = {}
    for port_key, readiness in by_port.items():
        members = tuple(sorted(readiness.items()))
        group = groups.setdefault(members, [])
        if port_key is not None:
            group.append(port_objs[port_key])
    out: list[dict[str, Any]] = []
    for members, group_ports in groups.items():
        packed: dict[str, Any] = {}
        ready_addresses = [addresses[k] for k, r in members if r]
        not_ready_addresses = [addresses[k] for k, r in members if not r]
        if ready_addresses:
            packed["addresses"] = ready_addresses
        if not_ready_addresses:
            packed["notReadyAddresses"] = not_ready_addresses
        if group_ports:
            packed["ports"] = sorted(group_ports, key=_port_order)
        out.append(packed)
    if len(out) > 1:
        out.sort(key=_subset_order)
    return out


# --- last-change-trigger-time -------------------------------------------------------------------


def _pod_trigger_time(pod: EndpointPodView) -> dt.datetime | None:
    cond = podranking.ready_condition(pod)
    return cond.last_transition_time if cond is not None else None


class _ServiceState(msgspec.Struct):
    service_time: dt.datetime | None
    pod_times: dict[str, dt.datetime]
    # The earliest Ready transition of a pod that went since the last sync, newer than that
    # sync saw: the sync that removes its endpoint reports it, as upstream's does when it sees
    # the pod's last status before its deletion.
    gone_time: dt.datetime | None = None


class TriggerTimeTracker:
    """The time of the change that triggered an Endpoints/EndpointSlice update: the earliest
    pod Ready transition or Service creation that is newer than at the Service's previous sync;
    the Service's creation time on its first sync; None (no annotation) when nothing changed.

    Like upstream's it may misjudge an object changed several times between two syncs. Unlike
    upstream's, a pod whose last status (its Ready transition as it stopped) and deletion arrive
    in one sync counts through `pod_deleted`: upstream syncs between the two, kcm's event path
    is slow enough to merge them. One call per Service key at a time (the work queue guarantees
    it); state is per process, so a new partition owner's first sync of a Service reports the
    Service's creation time.
    """

    def __init__(self) -> None:
        self._states: dict[tuple[str, str], _ServiceState] = {}

    def compute(self, service: ServiceView, pods: Iterable[EndpointPodView]) -> dt.datetime | None:
        key = (service.metadata.namespace, service.metadata.name)
        state = self._states.get(key)
        known = state.pod_times if state is not None else {}
        earliest: dt.datetime | None = None
        pod_times: dict[str, dt.datetime] = {}
        for pod in pods:
            t = _pod_trigger_time(pod)
            if t is None:
                continue
            pod_times[pod.metadata.name] = t
            last = known.get(pod.metadata.name)
            if last is None or t > last:
                earliest = t if earliest is None or t < earliest else earliest
        gone = state.gone_time if state is not None else None
        if gone is not None and (earliest is None or gone < earliest):
            earliest = gone
        service_time = service.metadata.creation_timestamp
        if service_time is not None and (
            state is None or state.service_time is None or service_time > state.service_time
        ):
            earliest = service_time if earliest is None or service_time < earliest else earliest
        self._states[key] = _ServiceState(service_time, pod_times)
        if state is None:
            return service_time
        return earliest

    def pod_deleted(self, services: Iterable[str], pod: EndpointPodView) -> None:
        """Note the last state of a pod that went (the delete event's object) for the next sync
        of each of `services` (keys `namespace/name`, those selecting it)."""
        t = _pod_trigger_time(pod)
        for key in services:
            namespace, _, name = key.partition("/")
            state = self._states.get((namespace, name))
            if state is None or t is None:
                continue  # a first sync reports the Service's creation anyway
            last = state.pod_times.get(pod.metadata.name)
            if last is not None and t <= last:
                continue  # the last sync saw this status
            if state.gone_time is None or t < state.gone_time:
                state.gone_time = t

    def delete_service(self, namespace: str, name: str) -> None:
        self._states.pop((namespace, name), None)


def format_trigger_time(t: dt.datetime) -> str:
    """RFC 3339 with nanoseconds trimmed of trailing zeros, in UTC, as Go's time.RFC3339Nano."""
    t = t.astimezone(dt.UTC)
    text = t.strftime("%Y-%m-%dT%H:%M:%S")
    if t.microsecond:
        text += "." + f"{t.microsecond:06d}".rstrip("0")
    return text + "Z"
