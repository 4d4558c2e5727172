"""Endpoints -> the EndpointSlices mirroring them: desired state, per-port-set plan, writes.

Upstream pkg/controller/endpointslicemirroring/reconciler.go and reconciler_helpers.go. Each
subset's addresses (ready ones, then not-ready ones) are grouped by address type and port set;
at most `max_per_subset` of a subset's addresses are mirrored, the rest are skipped and counted,
and invalid IPs are skipped with upstream's InvalidIPAddress Event (TooManyAddressesToMirror
when the limit cut some). Every group gets exactly one slice: the first existing one is rewritten
when its endpoints, labels or annotations differ, the others are deleted, and a group without a
slice gets a new one; a create paired with a delete of the same address type becomes an update
(recycleSlices). Groups no longer desired lose their slices. `plan` is pure; `Reconciler.apply`
writes and records each write in the EndpointSliceTracker.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import podcontrol
from kcm_shared.controllerutil.endpoints.endpointslicetracker import EndpointSliceTracker, Ref
from kcm_shared.runtime import events

from kcm_controllers.endpointslicemirroring import metrics, utils
from kcm_controllers.endpointslicemirroring.utils import Obj

log = logging.getLogger("kcm.endpointslicemirroring")

INVALID_IP_ADDRESS = "InvalidIPAddress"
TOO_MANY_ADDRESSES_TO_MIRROR = "TooManyAddressesToMirror"


class SyncError(RuntimeError):
    """A write failed, with upstream's message naming the slice and the Endpoints (retried)."""


@dataclass
class Desired:
    """upstream desiredCalc: endpoints by identity, and the ports, for each port-set key."""

    endpoints: dict[utils.PortMapKey, dict[Any, Obj]] = field(default_factory=dict)
    ports: dict[utils.PortMapKey, list[Obj]] = field(default_factory=dict)

    def init_ports(self, ports: list[utils.EndpointPort]) -> dict[str, utils.PortMapKey]:
        eps_ports = utils.ep_ports_to_eps_ports(ports)
        keys: dict[str, utils.PortMapKey] = {}
        for address_type in (utils.IPV4, utils.IPV6):
            key = utils.port_map_key(eps_ports, address_type)
            keys[address_type] = key
            self.endpoints.setdefault(key, {})
            self.ports[key] = eps_ports
        return keys

    def add_address(
        self, address: utils.EndpointAddress, keys: dict[str, utils.PortMapKey], ready: bool
    ) -> bool:
        converted = utils.address_to_endpoint(address, ready)
        if converted is None:
            return False
        endpoint, address_type = converted
        self.endpoints[keys[address_type]][utils.endpoint_hash(endpoint)] = endpoint
        return True


@dataclass
class Plan:
    """What a sync writes (upstream slicesByAction), and why (the skipped-address counts)."""

    to_create: list[Obj] = field(default_factory=list)
    to_update: list[Obj] = field(default_factory=list)
    to_delete: list[utils.EndpointSliceView] = field(default_factory=list)
    invalid: int = 0
    skipped: int = 0
    added: int = 0
    updated: int = 0
    removed: int = 0


def desired_state(endpoints: utils.EndpointsView, max_per_subset: int, plan: Plan) -> Desired:
    """The slices' contents the Endpoints asks for, counting skipped addresses into `plan`."""
    desired = Desired()
    for subset in endpoints.subsets:
        keys = desired.init_ports(subset.ports)
        total = len(subset.addresses) + len(subset.not_ready_addresses)
        added = 0
        for addresses, ready in ((subset.addresses, True), (subset.not_ready_addresses, False)):
            for address in addresses:
                if added >= max_per_subset:
                    break
                if desired.add_address(address, keys, ready):
                    added += 1
                else:
                    plan.invalid += 1
        plan.skipped += total - added
    return desired


def total_changes(existing: utils.EndpointSliceView, desired: dict[Any, Obj]) -> tuple[int, int, int]:
    """(added, updated, removed) endpoints to turn `existing` into `desired` (totalChanges)."""
    matches = updated = removed = 0
    for endpoint in existing.endpoints or []:
        want = desired.get(utils.endpoint_hash(endpoint))
        if want is None:
            removed += 1
            continue
        matches += 1
        if not utils.endpoints_equal_beyond_hash(want, endpoint):
            updated += 1
    return len(desired) - matches, updated, removed


def _by_port_mapping(
    endpoints: utils.EndpointsView,
    existing: list[utils.EndpointSliceView],
    desired: dict[Any, Obj],
    ports: list[Obj],
    address_type: str,
    max_per_subset: int,
    plan: Plan,
) -> None:
    """upstream reconcileByPortMapping for one address type and port set."""
    if not desired:
        plan.to_delete.extend(existing)
        plan.removed += sum(len(s.endpoints or []) for s in existing)
        return
    name = ""
    if not existing:
        plan.added += len(desired)
    else:
        plan.to_delete.extend(existing[1:])
        first = existing[0]
        added, updated, removed = total_changes(first, desired)
        plan.added += added
        plan.updated += updated
        plan.removed += removed
        labels = {
            k: v
            for k, v in first.metadata.labels.items()
            if k not in (utils.LABEL_MANAGED_BY, utils.LABEL_SERVICE_NAME)
        }
        if (
            added == updated == removed == 0
            and endpoints.metadata.labels == labels
            and utils.copied_annotations(endpoints.metadata.annotations) == first.metadata.annotations
        ):
            return
        name = first.metadata.name
    new = utils.new_endpoint_slice(endpoints, ports, address_type, name)
    new["endpoints"] = list(desired.values())[:max_per_subset]
    (plan.to_update if name else plan.to_create).append(new)


def _recycle(plan: Plan) -> None:
    """upstream recycleSlices: a create and a delete of the same address type become an update
    of the slice that would have been deleted."""
    for create in list(plan.to_create):
        victim = next((s for s in plan.to_delete if s.address_type == create["addressType"]), None)
        if victim is None:
            continue
        plan.to_create.remove(create)
        plan.to_delete.remove(victim)
        meta = create["metadata"]
        meta.pop("generateName", None)
        meta["name"] = victim.metadata.name
        plan.to_update.append(create)


def plan(
    endpoints: utils.EndpointsView, existing: list[utils.EndpointSliceView], max_per_subset: int
) -> Plan:
    """Everything a sync of `endpoints` must write, given its mirrored slices `existing`."""
    result = Plan()
    desired = desired_state(endpoints, max_per_subset, result)
    existing_by_key: dict[utils.PortMapKey, list[utils.EndpointSliceView]] = {}
    for s in sorted(existing, key=lambda s: s.metadata.name):
        existing_by_key.setdefault(utils.port_map_key(s.ports, s.address_type), []).append(s)
    for key, wanted in desired.endpoints.items():
        _by_port_mapping(
            endpoints,
            existing_by_key.get(key, []),
            wanted,
            desired.ports[key],
            key[0],
            max_per_subset,
            result,
        )
    for key, slices in existing_by_key.items():
        if key not in desired.endpoints:
            result.to_delete.extend(slices)
    _recycle(result)
    return result


def written_ref(obj: Obj) -> Ref:
    """The tracker's record of a slice as the API server returned it from a write."""
    meta = obj.get("metadata") or {}
    return Ref(str(meta.get("uid", "")), int(meta.get("generation") or 0))


class Reconciler:
    """Writes a Plan through the API; the client, tracker and Event recorder are injected."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        tracker: EndpointSliceTracker,
        recorder: events.EventRecorder,
        max_per_subset: int,
    ) -> None:
        self.client = client
        self.tracker = tracker
        self.recorder = recorder
        self.max_per_subset = max_per_subset

    async def reconcile(
        self, endpoints: utils.EndpointsView, existing: list[utils.EndpointSliceView]
    ) -> None:
        todo = plan(endpoints, existing, self.max_per_subset)
        metrics.ADDRESSES_SKIPPED.observe(todo.skipped)
        if todo.invalid:
            self.recorder.event(
                endpoints,
                events.WARNING,
                INVALID_IP_ADDRESS,
                f"Skipped {todo.invalid} invalid IP addresses when mirroring to EndpointSlices",
            )
        if todo.skipped > todo.invalid:
            self.recorder.event(
                endpoints,
                events.WARNING,
                TOO_MANY_ADDRESSES_TO_MIRROR,
                f"A max of {self.max_per_subset} addresses can be mirrored to EndpointSlices per "
                f"Endpoints subset. {todo.skipped} addresses were skipped",
            )
        metrics.ENDPOINTS_ADDED.observe(todo.added)
        metrics.ENDPOINTS_UPDATED.observe(todo.updated)
        metrics.ENDPOINTS_REMOVED.observe(todo.removed)
        await self.finalize(endpoints, todo)

    async def finalize(self, endpoints: utils.EndpointsView, todo: Plan) -> None:
        namespace, name = endpoints.metadata.namespace, endpoints.metadata.name
        service = (namespace, name)
        collection = kubeclient.resource_path("discovery.k8s.io", "v1", "endpointslices", namespace)
        # No new slices for an Endpoints on its way out.
        if endpoints.metadata.deletion_timestamp is None:
            for body in todo.to_create:
                try:
                    created = await self.client.create(collection, body)
                except kubeclient.ApiError as exc:
                    if podcontrol.has_status_cause(exc, podcontrol.NAMESPACE_TERMINATING_CAUSE):
                        return
                    raise SyncError(
                        f"failed to create EndpointSlice for Endpoints {namespace}/{name}: {exc}"
                    ) from exc
                self.tracker.update(service, written_ref(created))
                metrics.CHANGES.labels("create").inc()
        for body in todo.to_update:
            slice_name = body["metadata"]["name"]
            path = kubeclient.resource_path("discovery.k8s.io", "v1", "endpointslices", namespace, slice_name)
            try:
                updated = await self.client.update(path, body)
            except kubeclient.ApiError as exc:
                raise SyncError(
                    f"failed to update {slice_name} EndpointSlice for Endpoints {namespace}/{name}: {exc}"
                ) from exc
            self.tracker.update(service, written_ref(updated))
            metrics.CHANGES.labels("update").inc()
        for old in todo.to_delete:
            try:
                await self._delete(namespace, old.metadata.name)
            except kubeclient.ApiError as exc:
                raise SyncError(
                    f"failed to delete {old.metadata.name} EndpointSlice for Endpoints {namespace}/{name}: {exc}"
                ) from exc
            self.tracker.expect_deletion(service, Ref(old.metadata.uid, old.metadata.generation))
            metrics.CHANGES.labels("delete").inc()

    async def delete_all(self, namespace: str, name: str, slices: list[utils.EndpointSliceView]) -> None:
        """upstream deleteEndpoints: every mirrored slice of a gone or unmirrored Endpoints."""
        errors: list[Exception] = []
        for s in slices:
            try:
                await self._delete(namespace, s.metadata.name)
            except kubeclient.ApiError as exc:
                errors.append(exc)
        if errors:
            raise SyncError(
                f"Error(s) deleting {len(errors)}/{len(slices)} EndpointSlices for {namespace}/{name} "
                f"Endpoints, including: {errors[0]}"
            )

    async def _delete(self, namespace: str, name: str) -> None:
        path = kubeclient.resource_path("discovery.k8s.io", "v1", "endpointslices", namespace, name)
        try:
            await self.client.delete(path)
        except kubeclient.ApiError as exc:
            if not exc.not_found:  # already gone is what we want
                raise
