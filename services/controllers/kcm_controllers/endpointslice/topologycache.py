"""Topology-aware hints for Services annotated `service.kubernetes.io/topology-mode: Auto`.

Upstream staging/src/k8s.io/endpointslice/topologycache (topologycache.go, sliceinfo.go,
utils.go, event.go). Ready endpoints are allotted to zones in proportion to the allocatable
CPU of the ready nodes of each zone (`set_nodes`): every ready endpoint is first hinted at its
own zone, then endpoints of zones holding more than their maximum share are re-hinted at
zones below their minimum (each zone gets at least its CPU share divided by 1.2, the 20%
overload threshold). Hints are dropped, with a TopologyAwareHintsDisabled Event, when the
node information is insufficient, fewer endpoints than zones are ready, an endpoint has no
zone, or the minimum allocations cannot all be met; TopologyAwareHintsEnabled is recorded
when a Service first gets hints. State (which Services carry hints) is per process.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import msgspec
from kcm_shared.apimachinery import quantity

from kcm_controllers.endpointslice import views

OVERLOAD_THRESHOLD = 0.2
EXCLUDED_NODE_LABELS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")

NO_ZONE_SPECIFIED = "One or more endpoints do not have a zone specified"
NO_ALLOCATED_HINTS_FOR_ZONES = "No hints allocated for zones"
TOPOLOGY_AWARE_HINTS_ENABLED = "Topology Aware Hints has been enabled"
TOPOLOGY_AWARE_HINTS_DISABLED = "Topology Aware Hints has been disabled"
INSUFFICIENT_NODE_INFO = (
    "Insufficient Node information: allocatable CPU or zone not specified on one or more nodes"
)
NODES_READY_IN_ONE_ZONE_ONLY = "Nodes only ready in one zone"
INSUFFICIENT_NUMBER_OF_ENDPOINTS = "Insufficient number of endpoints"
MIN_ALLOCATION_EXCEEDS_OVERLOAD_THRESHOLD = (
    "Unable to allocate minimum required endpoints to each zone without exceeding overload threshold"
)
ENABLED = "TopologyAwareHintsEnabled"
DISABLED = "TopologyAwareHintsDisabled"


@dataclass(frozen=True)
class Event:
    type: str  # "Normal" or "Warning"
    reason: str
    message: str


@dataclass(frozen=True)
class Allocation:
    minimum: int
    maximum: int
    desired: float  # the zone's CPU share of the endpoints, at least its minimum


def with_address_type(message: str, address_type: str) -> str:
    return f"{message}, addressType: {address_type}"


def endpoint_ready(ep: views.Endpoint) -> bool:
    return ep.conditions.ready is None or ep.conditions.ready


def _hint(zone: str) -> views.EndpointHints:
    return views.EndpointHints(for_zones=[views.ForZone(name=zone)])


def remove_hints(slices: Iterable[views.EndpointSlice]) -> None:
    for slice_ in slices:
        slice_.endpoints = [msgspec.structs.replace(ep, hints=None) for ep in slice_.endpoints or ()]


class TopologyCache:
    """CPU share per zone of the ready nodes, and which Services' slices carry hints."""

    def __init__(self) -> None:
        self.cpu_ratios: dict[str, float] | None = None
        self.populated: set[tuple[str, str]] = set()  # (service key, address type)

    def set_nodes(self, nodes: Iterable[views.NodeView]) -> None:
        """upstream SetNodes: ratios only when every ready node has a zone and CPU and at
        least two zones have some."""
        by_zone: dict[str, int] = {}
        for node in nodes:
            if any(label in node.metadata.labels for label in EXCLUDED_NODE_LABELS) or not node.ready():
                continue
            zone = node.metadata.labels.get(views.LABEL_ZONE, "")
            try:
                milli = quantity.parse(node.status.allocatable.get("cpu", "0")).nanos // 10**6
            except ValueError:
                milli = 0
            if not zone or milli <= 0:
                self.cpu_ratios = None
                return
            by_zone[zone] = by_zone.get(zone, 0) + milli
        total = sum(by_zone.values())
        if total <= 0 or len(by_zone) < 2:
            self.cpu_ratios = None
            return
        self.cpu_ratios = {zone: cpu / total for zone, cpu in by_zone.items()}

    def has_populated_hints(self, service: str) -> bool:
        return any(key == service for key, _ in self.populated)

    def forget(self, service: str, address_type: str) -> None:
        self.populated.discard((service, address_type))

    def forget_service(self, service: str) -> None:
        """A deleted Service's hints (upstream Reconciler.DeleteService)."""
        self.populated = {entry for entry in self.populated if entry[0] != service}

    def allocations(self, endpoints: int) -> tuple[dict[str, Allocation] | None, str]:
        """upstream getAllocations: each zone's minimum and maximum, or why there are none."""
        ratios = self.cpu_ratios
        if ratios is None:
            return None, INSUFFICIENT_NODE_INFO
        if len(ratios) < 2:
            return None, NODES_READY_IN_ONE_ZONE_ONLY
        if len(ratios) > endpoints:
            return None, f"{INSUFFICIENT_NUMBER_OF_ENDPOINTS} ({endpoints} endpoints, {len(ratios)} zones)"
        minimums: dict[str, int] = {}
        desired: dict[str, float] = {}
        remaining = endpoints
        for zone, ratio in ratios.items():
            share = ratio * endpoints
            minimums[zone] = math.ceil(share / (1 + OVERLOAD_THRESHOLD))
            desired[zone] = max(share, minimums[zone])
            remaining -= minimums[zone]
            if remaining < 0:
                return (
                    None,
                    f"{MIN_ALLOCATION_EXCEEDS_OVERLOAD_THRESHOLD} ({endpoints} endpoints, {len(ratios)} zones)",
                )
        spare = endpoints - sum(minimums.values())
        return {zone: Allocation(m, m + spare, desired[zone]) for zone, m in minimums.items()}, ""

    def add_hints(
        self,
        service: str,
        address_type: str,
        create: list[views.EndpointSlice],
        update: list[views.EndpointSlice],
        unchanged: list[views.EndpointSlice],
    ) -> tuple[list[views.EndpointSlice], list[Event]]:
        """upstream AddHints. Hints are set on `create` and `update` in place (they are the
        reconciler's own copies); unchanged slices whose hints no longer fit are returned
        (copied) to be updated as well."""
        total = sum(
            1 for s in (*create, *update, *unchanged) for ep in s.endpoints or () if endpoint_ready(ep)
        )
        allocations, why = self.allocations(total)
        if allocations is None:
            return self._disable(service, address_type, create, update, why)
        allocated: dict[str, int] = {}
        extra: list[views.EndpointSlice] = []
        for slice_ in unchanged:
            counted = _hints_by_zone(slice_, allocated, allocations)
            if counted is None:
                extra.append(msgspec.structs.replace(slice_, endpoints=list(slice_.endpoints or ())))
            else:
                for zone, n in counted.items():
                    allocated[zone] = allocated.get(zone, 0) + n
        writable = [*create, *update, *extra]
        for slice_ in writable:
            hinted = []
            for ep in slice_.endpoints or ():
                if not endpoint_ready(ep):
                    hinted.append(msgspec.structs.replace(ep, hints=None))
                    continue
                if not ep.zone:
                    return self._disable(service, address_type, create, update, NO_ZONE_SPECIFIED, extra)
                allocated[ep.zone] = allocated.get(ep.zone, 0) + 1
                hinted.append(msgspec.structs.replace(ep, hints=_hint(ep.zone)))
            slice_.endpoints = hinted
        giving, receiving = _giving_and_receiving(allocations, allocated)
        for zone, diff in _redistribute(writable, giving, receiving).items():
            allocated[zone] = allocated.get(zone, 0) + diff
        if not allocated:
            return self._disable(service, address_type, create, update, NO_ALLOCATED_HINTS_FOR_ZONES, extra)
        events = []
        if not self.has_populated_hints(service):
            events.append(
                Event("Normal", ENABLED, with_address_type(TOPOLOGY_AWARE_HINTS_ENABLED, address_type))
            )
        self.populated.add((service, address_type))
        return extra, events

    def _disable(
        self,
        service: str,
        address_type: str,
        create: list[views.EndpointSlice],
        update: list[views.EndpointSlice],
        why: str,
        extra: Sequence[views.EndpointSlice] = (),
    ) -> tuple[list[views.EndpointSlice], list[Event]]:
        self.forget(service, address_type)
        remove_hints([*create, *update, *extra])
        return list(extra), [Event("Warning", DISABLED, with_address_type(why, address_type))]


def _hints_by_zone(
    slice_: views.EndpointSlice, allocated: dict[str, int], allocations: dict[str, Allocation]
) -> dict[str, int] | None:
    """upstream getHintsByZone: an unchanged slice's hints per zone, or None when the slice
    must be rewritten (a ready endpoint without hints, a hint for a zone not allotted, or more
    hints for a zone than its maximum)."""
    counted: dict[str, int] = {}
    for ep in slice_.endpoints or ():
        if not endpoint_ready(ep):
            continue
        if ep.hints is None or not ep.hints.for_zones:
            return None
        for zone in ep.hints.for_zones:
            if zone.name not in allocations:
                return None
            counted[zone.name] = counted.get(zone.name, 0) + 1
    for name, n in counted.items():
        if n + allocated.get(name, 0) > allocations[name].maximum:
            return None
    return counted


def _giving_and_receiving(
    allocations: dict[str, Allocation], allocated: dict[str, int]
) -> tuple[dict[str, int], dict[str, int]]:
    """upstream getGivingAndReceivingZones: how many endpoints each zone gives or receives to
    come near its desired share (not merely inside its minimum and maximum). Whole endpoints
    move from the zone with the most to give to the zone with the most to receive while both
    have at least half an endpoint and one of them a whole one; ties go to the first zone by
    name (upstream's map order is random)."""
    to_give: dict[str, float] = {}
    to_receive: dict[str, float] = {}
    for zone, allocation in sorted(allocations.items()):
        have = allocated.get(zone, 0)
        if have > allocation.desired:
            to_give[zone] = have - allocation.desired
        elif have < allocation.desired:
            to_receive[zone] = allocation.desired - have
    giving: dict[str, int] = {}
    receiving: dict[str, int] = {}
    while True:
        giver, give = _most(to_give)
        receiver, receive = _most(to_receive)
        if not giver or not receiver or (give < 1.0 and receive < 1.0) or give < 0.5 or receive < 0.5:
            return giving, receiving
        giving[giver] = giving.get(giver, 0) + 1
        to_give[giver] -= 1
        receiving[receiver] = receiving.get(receiver, 0) + 1
        to_receive[receiver] -= 1


def _most(zones: dict[str, float]) -> tuple[str, float]:
    """The zone with the largest positive number, and the number ("", 0.0 when none)."""
    best, most = "", 0.0
    for zone, n in zones.items():
        if n > most:
            best, most = zone, n
    return best, most


def _redistribute(
    slices: list[views.EndpointSlice], giving: dict[str, int], receiving: dict[str, int]
) -> dict[str, int]:
    """upstream redistributeHints: re-hint endpoints of over-allotted zones at zones below
    their minimum, in slice order."""
    moved: dict[str, int] = {}
    for slice_ in slices:
        endpoints = list(slice_.endpoints or ())
        for i, ep in enumerate(endpoints):
            if not giving or not receiving:
                slice_.endpoints = endpoints
                return moved
            if not endpoint_ready(ep) or not ep.zone or giving.get(ep.zone, 0) <= 0:
                continue
            to = next(zone for zone, n in receiving.items() if n > 0)
            endpoints[i] = msgspec.structs.replace(ep, hints=_hint(to))
            for table, zone in ((giving, ep.zone), (receiving, to)):
                table[zone] -= 1
                if table[zone] == 0:
                    del table[zone]
            moved[to] = moved.get(to, 0) + 1
            moved[ep.zone] = moved.get(ep.zone, 0) - 1
        slice_.endpoints = endpoints
    return moved
