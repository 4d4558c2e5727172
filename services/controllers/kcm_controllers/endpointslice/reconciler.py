"""The endpointslice reconciler: turns a Service and its pods into EndpointSlices with few writes.

Upstream staging/src/k8s.io/endpointslice/reconciler.go (the library the endpointslice
controller uses; the mirroring controller has a reconciler of its own) and
trafficdist/trafficdist.go. For each address type of the Service (`utils.address_types_for_service`)
the desired endpoints are grouped by their resolved port set, and each group is placed with
upstream's churn-minimising algorithm (`plan_port_map`):

1. existing slices keep the desired endpoints they hold; a slice whose endpoints changed or
   went is updated (deleted when none is left), one whose Service labels changed is updated;
2. leftover endpoints first fill the slices already being updated, fullest first;
3. the rest go into the unchanged slice they fit in most tightly, if fewer than a slice's
   worth remain, else into new slices of at most `max_endpoints_per_slice`.

A Service without endpoints keeps one placeholder slice (no ports, no endpoints). Before the
writes, a create paired with a delete becomes an update of the deleted slice (`finalize`).
Hints come from `topologycache` when the topology-mode annotation says Auto, else from
spec.trafficDistribution `PreferClose` (each endpoint hinted at its own zone), and are removed
otherwise.

`plan` is pure (the unit tests drive it); `Reconciler.reconcile` plans and writes, recording
every slice it wrote in the `EndpointSliceTracker`.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import msgspec
import prometheus_client
from kcm_shared.apimachinery import codec
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import podcontrol
from kcm_shared.controllerutil.endpoints import endpointutil
from kcm_shared.controllerutil.endpoints.endpointslicetracker import EndpointSliceTracker, Ref

from kcm_controllers.endpointslice import topologycache, utils, views

log = logging.getLogger("kcm.endpointslice")

PREFER_CLOSE = "PreferClose"
TOPOLOGY_MODE = "service.kubernetes.io/topology-mode"
TOPOLOGY_AWARE_HINTS = "service.kubernetes.io/topology-aware-hints"

_SUBSYSTEM = "endpoint_slice_controller"
_PER_SYNC_BUCKETS = [2.0**i for i in range(1, 16)]  # upstream's ExponentialBuckets(2, 2, 15)
CHANGES = prometheus_client.Counter(f"{_SUBSYSTEM}_changes", "Number of EndpointSlice changes", ["operation"])
ADDED_PER_SYNC = prometheus_client.Histogram(
    f"{_SUBSYSTEM}_endpoints_added_per_sync",
    "Number of endpoints added on each Service sync",
    buckets=_PER_SYNC_BUCKETS,
)
REMOVED_PER_SYNC = prometheus_client.Histogram(
    f"{_SUBSYSTEM}_endpoints_removed_per_sync",
    "Number of endpoints removed on each Service sync",
    buckets=_PER_SYNC_BUCKETS,
)


@dataclass
class Plan:
    """The writes one sync needs."""

    create: list[views.EndpointSlice] = field(default_factory=list)
    update: list[views.EndpointSlice] = field(default_factory=list)
    delete: list[views.EndpointSlice] = field(default_factory=list)
    added: int = 0
    removed: int = 0
    events: list[topologycache.Event] = field(default_factory=list)  # recorded on the Service

    def extend(self, other: Plan) -> None:
        self.create += other.create
        self.update += other.update
        self.delete += other.delete
        self.added += other.added
        self.removed += other.removed
        self.events += other.events


# Per port set: the resolved ports and the endpoints that serve them, by endpoint identity.
Desired = dict[utils.PortMapKey, tuple[list[views.EndpointPort], dict[utils.EndpointHash, views.Endpoint]]]


def hints_enabled(annotations: dict[str, str]) -> bool:
    """Whether the topology-mode annotation (or its deprecated predecessor) asks for hints
    (upstream hintsEnabled)."""
    value = (
        annotations[TOPOLOGY_MODE] if TOPOLOGY_MODE in annotations else annotations.get(TOPOLOGY_AWARE_HINTS)
    )
    return value in ("Auto", "auto")


def desired_endpoints(
    svc: views.ServiceView,
    pods: Iterable[endpointutil.EndpointPodView],
    nodes: Callable[[str], codec.Meta | None],
    address_type: str,
) -> tuple[Desired, list[tuple[str, str]]]:
    """The endpoints `svc` wants for one address type, grouped by port set, and the pods left
    out because their node is unknown (only when not-ready addresses are not published)."""
    out: Desired = {}
    missing: list[tuple[str, str]] = []
    for pod in pods:
        if not endpointutil.should_pod_be_in_endpoints(pod, True):
            continue
        ports = utils.endpoint_ports(svc, pod)
        group = out.setdefault(utils.port_map_key(ports), (ports, {}))
        node = nodes(pod.spec.node_name) if pod.spec.node_name else None
        if node is None and pod.spec.node_name and not svc.spec.publish_not_ready_addresses:
            missing.append((pod.metadata.name, pod.spec.node_name))
            continue
        ep = utils.pod_to_endpoint(pod, node, svc, address_type)
        if ep.addresses:
            group[1][utils.endpoint_hash(ep)] = ep
    return out, missing


def plan_port_map(
    svc: views.ServiceView,
    existing: Sequence[views.EndpointSlice],
    desired: dict[utils.EndpointHash, views.Endpoint],
    ports: list[views.EndpointPort],
    address_type: str,
    max_per_slice: int,
    controller_name: str,
) -> Plan:
    """upstream reconcileByPortMapping: place `desired` in the slices of one port set."""
    desired = dict(desired)  # consumed below
    by_name: dict[str, views.EndpointSlice] = {}
    unchanged: dict[str, None] = {}  # ordered sets
    to_update: dict[str, None] = {}
    to_delete: dict[str, None] = {}
    removed = 0
    for old in existing:
        name = old.metadata.name
        by_name[name] = old
        kept: list[views.Endpoint] = []
        endpoint_updated = False
        for ep in old.endpoints or ():
            want = desired.pop(utils.endpoint_hash(ep), None)
            if want is not None:
                kept.append(want)
                if not utils.endpoints_equal_beyond_hash(want, ep):
                    endpoint_updated = True
        labels, labels_changed = utils.slice_labels(old, svc, controller_name)
        if endpoint_updated or len(old.endpoints or ()) != len(kept):
            removed += max(0, len(old.endpoints or ()) - len(kept))
            if not kept:
                to_delete[name] = None
            else:
                by_name[name] = _with(old, kept, labels)
                to_update[name] = None
        elif labels_changed:
            by_name[name] = _with(old, list(old.endpoints or ()), labels)
            to_update[name] = None
        else:
            unchanged[name] = None
    added = len(desired)
    left = list(desired.values())

    # 2. fill the slices being written anyway, fullest first
    if left and to_update:
        for slice_ in sorted((by_name[n] for n in to_update), key=lambda s: -len(s.endpoints or ())):
            room = max_per_slice - len(slice_.endpoints or ())
            if room > 0:
                assert slice_.endpoints is not None
                slice_.endpoints.extend(left[:room])
                left = left[room:]

    # 3. one unchanged slice that takes the rest, else new slices
    create: list[views.EndpointSlice] = []
    while left:
        fill: views.EndpointSlice | None = None
        if len(left) < max_per_slice and unchanged:
            found = utils.get_slice_to_fill((by_name[n] for n in unchanged), len(left), max_per_slice)
            if found is not None:
                fill = by_name[found.metadata.name] = _with(
                    found, list(found.endpoints or ()), dict(found.metadata.labels)
                )
        if fill is None:
            fill = utils.new_endpoint_slice(svc, ports, address_type, controller_name)
        assert fill.endpoints is not None
        room = max_per_slice - len(fill.endpoints)
        fill.endpoints.extend(left[:room])
        left = left[room:]
        if fill.metadata.name:
            to_update[fill.metadata.name] = None
            unchanged.pop(fill.metadata.name, None)
        else:
            create.append(fill)
    return Plan(
        create=create,
        update=[by_name[n] for n in to_update],
        delete=[by_name[n] for n in to_delete],
        added=added,
        removed=removed,
    )


def _with(
    old: views.EndpointSlice, endpoints: list[views.Endpoint], labels: dict[str, str]
) -> views.EndpointSlice:
    """A copy of a cached slice with new endpoints and labels (cached objects are never edited)."""
    return msgspec.structs.replace(
        old, endpoints=endpoints, metadata=msgspec.structs.replace(old.metadata, labels=labels)
    )


def plan_address_type(
    svc: views.ServiceView,
    existing: Sequence[views.EndpointSlice],
    desired: Desired,
    address_type: str,
    max_per_slice: int,
    controller_name: str,
    topology: topologycache.TopologyCache | None = None,
    traffic_distribution: bool = True,
) -> Plan:
    """upstream reconcileByAddressType, after the desired endpoints are known (`topology` None:
    the TopologyAwareHints gate is off; `traffic_distribution`: the ServiceTrafficDistribution
    gate)."""
    plan = Plan()
    by_ports: dict[utils.PortMapKey, list[views.EndpointSlice]] = {}
    for slice_ in existing:
        if utils.owned_by(slice_, svc):
            by_ports.setdefault(utils.port_map_key(slice_.ports), []).append(slice_)
        else:
            plan.delete.append(slice_)
    for key, (ports, endpoints) in desired.items():
        plan.extend(
            plan_port_map(
                svc, by_ports.get(key, []), endpoints, ports, address_type, max_per_slice, controller_name
            )
        )
    for key, slices in by_ports.items():
        if key not in desired:
            plan.delete += slices
    if len(existing) == len(plan.delete) and not plan.create:
        placeholder = utils.new_endpoint_slice(svc, [], address_type, controller_name)
        if len(plan.delete) == 1 and utils.is_placeholder_of(plan.delete[0], placeholder):
            plan.delete = []  # the placeholder is already there
        else:
            plan.create.append(placeholder)
    _hints(svc, plan, existing, address_type, topology, traffic_distribution)
    return plan


def _hints(
    svc: views.ServiceView,
    plan: Plan,
    existing: Sequence[views.EndpointSlice],
    address_type: str,
    topology: topologycache.TopologyCache | None,
    traffic_distribution: bool,
) -> None:
    """Hints as upstream's reconcileByAddressType sets them: from the topology cache when the
    topology-mode annotation says Auto, else from spec.trafficDistribution (trafficdist:
    PreferClose hints each endpoint at its own zone, anything else removes hints); with the
    ServiceTrafficDistribution gate off, the slices written lose their hints and the others
    are left as they are."""
    key = codec.key_of(svc)
    touched = {s.metadata.name for s in plan.update} | {s.metadata.name for s in plan.delete}
    unchanged = [s for s in existing if s.metadata.name not in touched]
    if hints_enabled(svc.metadata.annotations):
        if topology is not None:
            extra, events = topology.add_hints(key, address_type, plan.create, plan.update, unchanged)
            plan.update += extra
            plan.events += events
        else:
            topologycache.remove_hints(plan.create + plan.update)
        return
    if topology is not None:
        if topology.has_populated_hints(key):
            message = topologycache.with_address_type(
                topologycache.TOPOLOGY_AWARE_HINTS_DISABLED, address_type
            )
            plan.events.append(topologycache.Event("Warning", topologycache.DISABLED, message))
        topology.forget(key, address_type)
    if not traffic_distribution:
        topologycache.remove_hints(plan.create + plan.update)
        return
    prefer_close = svc.spec.traffic_distribution == PREFER_CLOSE
    for slice_ in unchanged:
        if any(_hinted(ep, prefer_close) != ep for ep in slice_.endpoints or ()):
            plan.update.append(_with(slice_, list(slice_.endpoints or ()), dict(slice_.metadata.labels)))
    for slice_ in plan.create + plan.update:
        slice_.endpoints = [_hinted(ep, prefer_close) for ep in slice_.endpoints or ()]


def _hinted(ep: views.Endpoint, prefer_close: bool) -> views.Endpoint:
    """upstream trafficdist's heuristics: PreferClose hints each ready endpoint at its own zone
    ("" without one) and leaves a not-ready one as it is (clients skip it anyway); without
    PreferClose no endpoint has hints."""
    if not prefer_close:
        return ep if ep.hints is None else msgspec.structs.replace(ep, hints=None)
    if ep.conditions.ready is not True:
        return ep
    return msgspec.structs.replace(
        ep, hints=views.EndpointHints(for_zones=[views.ForZone(name=ep.zone or "")])
    )


def plan(
    svc: views.ServiceView,
    pods: Sequence[endpointutil.EndpointPodView],
    existing: Sequence[views.EndpointSlice],
    nodes: Callable[[str], codec.Meta | None],
    max_per_slice: int,
    controller_name: str = views.CONTROLLER_NAME,
    topology: topologycache.TopologyCache | None = None,
    traffic_distribution: bool = True,
) -> tuple[list[Plan], list[views.EndpointSlice], list[tuple[str, str]]]:
    """upstream Reconcile without the writes: one plan per address type of the Service, the
    slices of address types it no longer has (to delete), and pods skipped for a missing node."""
    types = utils.address_types_for_service(svc)
    gone = [s for s in existing if s.address_type not in types]
    if topology is not None:
        for slice_ in gone:
            topology.forget(codec.key_of(svc), slice_.address_type)
    plans: list[Plan] = []
    missing: list[tuple[str, str]] = []
    for address_type in types:
        desired, skipped = desired_endpoints(svc, pods, nodes, address_type)
        missing += [p for p in skipped if p not in missing]
        mine = [s for s in existing if s.address_type == address_type]
        plans.append(
            plan_address_type(
                svc,
                mine,
                desired,
                address_type,
                max_per_slice,
                controller_name,
                topology,
                traffic_distribution,
            )
        )
    return plans, gone, missing


def pair_creates_with_deletes(svc: views.ServiceView, p: Plan) -> Plan:
    """upstream finalize's first step: a slice to create takes the name of one to delete of the
    same address type owned by the Service, turning two writes into one update."""
    create = list(p.create)
    update = list(p.update)
    delete: list[views.EndpointSlice] = []
    for old in p.delete:
        if create and old.address_type == create[-1].address_type and utils.owned_by(old, svc):
            new = create.pop()
            meta = msgspec.structs.replace(new.metadata, name=old.metadata.name)
            update.append(msgspec.structs.replace(new, metadata=meta))
        else:
            delete.append(old)
    return Plan(
        create=create, update=update, delete=delete, added=p.added, removed=p.removed, events=p.events
    )


class SyncError(Exception):
    """The errors of one sync, joined as upstream's utilerrors.NewAggregate prints them."""

    def __init__(self, errors: Sequence[str]) -> None:
        super().__init__(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")


# What a failed write raises (runtime.NotOwner is not among them: the runtime must see it).
_WRITE_ERRORS = (kubeclient.ApiError, OSError, TimeoutError)


class Reconciler:
    """Plans and writes one Service's slices; records its writes in `tracker`."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        tracker: EndpointSliceTracker,
        max_per_slice: int,
        controller_name: str = views.CONTROLLER_NAME,
        *,
        topology: topologycache.TopologyCache | None = None,
        record: Callable[[views.ServiceView, topologycache.Event], None] | None = None,
        traffic_distribution: bool = True,
    ) -> None:
        self.client = client
        self.tracker = tracker
        self.max_per_slice = max_per_slice
        self.controller_name = controller_name
        self.topology = topology
        self.record = record
        self.traffic_distribution = traffic_distribution

    async def reconcile(
        self,
        svc: views.ServiceView,
        pods: Sequence[endpointutil.EndpointPodView],
        existing: Sequence[views.EndpointSlice],
        nodes: Callable[[str], codec.Meta | None],
        trigger: dt.datetime | None,
    ) -> None:
        """Write what the plan says; raise SyncError with every failure (and every pod left out
        for a missing node) after writing what could be written, so the sync is retried."""
        ns, name = svc.metadata.namespace, svc.metadata.name
        plans, gone, missing = plan(
            svc,
            pods,
            existing,
            nodes,
            self.max_per_slice,
            self.controller_name,
            self.topology,
            self.traffic_distribution,
        )
        errors = [
            f'skipping Pod {pod} for Service {ns}/{name}: node "{node}" not found' for pod, node in missing
        ]
        for p in plans:
            ADDED_PER_SYNC.observe(p.added)
            REMOVED_PER_SYNC.observe(p.removed)
            writes = pair_creates_with_deletes(svc, p)
            if writes.create or writes.update or writes.delete:
                log.debug(
                    "writing EndpointSlices",
                    extra={
                        "service": f"{ns}/{name}",
                        "create": len(writes.create),
                        "update": len(writes.update),
                        "delete": len(writes.delete),
                    },
                )
            try:
                await self.finalize(svc, writes, trigger)
            except SyncError as exc:
                errors.append(str(exc))
            if self.record is not None:
                for event in p.events:
                    self.record(svc, event)
        for slice_ in gone:
            try:
                await self._delete(svc, slice_)
            except _WRITE_ERRORS as exc:
                errors.append(
                    f"error deleting {slice_.metadata.name} EndpointSlice for Service {ns}/{name}: "
                    f"{podcontrol.error_message(exc)}"
                )
        if errors:
            raise SyncError(errors)

    async def finalize(self, svc: views.ServiceView, p: Plan, trigger: dt.datetime | None) -> None:
        """Create, update, then delete; stop at the first failure (SyncError)."""
        ns, name = svc.metadata.namespace, svc.metadata.name
        key = (ns, name)
        path = kubeclient.resource_path(*_SLICES, ns)
        # No creates for a Service being deleted: the garbage collector would race them.
        if svc.metadata.deletion_timestamp is None:
            for slice_ in p.create:
                body = msgspec.json.encode(utils.with_trigger_time(slice_, trigger))
                try:
                    raw = await self.client.request_bytes("POST", path, body=body)
                except _WRITE_ERRORS as exc:
                    if podcontrol.has_status_cause(exc, podcontrol.NAMESPACE_TERMINATING_CAUSE):
                        return  # every create fails until the namespace is gone
                    raise _failed(exc, f"failed to create EndpointSlice for Service {ns}/{name}") from exc
                self._track(key, raw)
                CHANGES.labels("create").inc()
        for slice_ in p.update:
            body = msgspec.json.encode(utils.with_trigger_time(slice_, trigger))
            target = kubeclient.resource_path(*_SLICES, ns, slice_.metadata.name)
            try:
                raw = await self.client.request_bytes("PUT", target, body=body)
            except _WRITE_ERRORS as exc:
                raise _failed(
                    exc, f"failed to update {slice_.metadata.name} EndpointSlice for Service {ns}/{name}"
                ) from exc
            self._track(key, raw)
            CHANGES.labels("update").inc()
        for slice_ in p.delete:
            try:
                await self._delete(svc, slice_)
            except _WRITE_ERRORS as exc:
                raise _failed(
                    exc, f"failed to delete {slice_.metadata.name} EndpointSlice for Service {ns}/{name}"
                ) from exc

    async def _delete(self, svc: views.ServiceView, slice_: views.EndpointSlice) -> None:
        path = kubeclient.resource_path(*_SLICES, svc.metadata.namespace, slice_.metadata.name)
        try:
            await self.client.delete(path)
        except kubeclient.ApiError as exc:
            if not exc.not_found:
                raise
        self.tracker.expect_deletion(
            (svc.metadata.namespace, svc.metadata.name), Ref(slice_.metadata.uid, slice_.metadata.generation)
        )
        CHANGES.labels("delete").inc()

    def _track(self, key: tuple[str, str], raw: bytes) -> None:
        written = codec.decode(raw, views.EndpointSlice)
        self.tracker.update(key, Ref(written.metadata.uid, written.metadata.generation))


_SLICES = (views.ENDPOINTSLICES.group, views.ENDPOINTSLICES.version, views.ENDPOINTSLICES.resource)


def _failed(exc: BaseException, what: str) -> SyncError:
    return SyncError([f"{what}: {podcontrol.error_message(exc)}"])
