"""The endpoints controller: one Endpoints object per Service with a selector, listing the
addresses of the pods it selects.

Upstream pkg/controller/endpoint/endpoints_controller.go (v1.32) on our runtime
(docs/runtime.md). Work keys are Service keys (`namespace/name`). A Service's own events queue
it; a pod's add, delete and relevant updates (readiness, IPs, deletion, labels, hostname) queue
the Services that select it now or did before (`kcm_shared.controllerutil.endpoints.endpointutil`), after
--endpoint-updates-batch-period; an Endpoints object deleted queues its Service. `primary=None`:
a replica that gains a partition queues every cached Service and every cached Endpoints
(upstream's checkLeftoverEndpoints at start-up), so Endpoints whose Service went while no one
was watching are deleted.

The sync (`EndpointsController.sync`):
- Service gone: delete its Endpoints. ExternalName, or no selector: nothing (hand-written
  Endpoints of a selectorless Service are left alone).
- Otherwise every selected pod that should be in endpoints (an IP, not terminal, not
  terminating unless publishNotReadyAddresses) gives one address per Service port, its
  targetPort resolved on that pod (a named port the pod lacks skips that port); ready or not
  ready by the pod's Ready condition, all ready with publishNotReadyAddresses; a headless
  Service without ports gets the addresses without ports. Subsets are repacked to the
  canonical layout (`endpointutil.repack_subsets`).
- Subsets over 1,000 addresses are truncated (`endpoints.kubernetes.io/over-capacity:
  truncated`). Nothing is written when they, the labels (the Service's, plus
  `service.kubernetes.io/headless` for a headless Service) and that annotation are already
  right; otherwise the Endpoints is created or updated, with the last-change-trigger-time
  annotation.
- A failed write records FailedToCreateEndpoint / FailedToUpdateEndpoint (Warning) and is
  retried with backoff; a create refused because the namespace is terminating is dropped.
Called by the runtime through `SPEC`.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

import msgspec
from kcm_shared import runtime
from kcm_shared.apimachinery import codec, goduration, gvr
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import ownwrites, podcontrol
from kcm_shared.controllerutil.endpoints import endpointutil
from kcm_shared.runtime import cache, events

from kcm_controllers.endpoint import subsets as sub

log = logging.getLogger("kcm.endpoint")

SERVICES = gvr.Resource("", "v1", "services")
PODS = gvr.Resource("", "v1", "pods")
ENDPOINTS = gvr.Resource("", "v1", "endpoints")
# Endpoints used as a leader-election lock carry this annotation and have no Service: never
# delete them (upstream resourcelock.LeaderElectionRecordAnnotationKey).
LEADER_ELECTION_ANNOTATION = "control-plane.alpha.kubernetes.io/leader"
EXTERNAL_NAME = "ExternalName"
FAILED_TO_CREATE = "FailedToCreateEndpoint"
FAILED_TO_UPDATE = "FailedToUpdateEndpoint"


class EndpointsView(codec.Meta):
    """An Endpoints object: metadata and its subsets in JSON form."""

    subsets: list[Any] = msgspec.field(default_factory=list)


def _message(exc: Exception) -> str:
    return exc.message if isinstance(exc, kubeclient.ApiError) else str(exc)


class EndpointsController:
    """Handlers and sync; the API client, caches and Event recorder are injected."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        services: cache.Cache[endpointutil.ServiceView],
        pods: cache.Cache[endpointutil.EndpointPodView],
        endpoints: cache.Cache[EndpointsView],
        enqueue: Callable[[str], None],
        enqueue_after: Callable[[str, float], None],
        recorder: events.EventRecorder,
        *,
        batch_period: float = 0.0,
    ) -> None:
        self.client = client
        self.services = services
        self.pods = pods
        self.endpoints = endpoints
        self.enqueue = enqueue
        self.enqueue_after = enqueue_after
        self.recorder = recorder
        self.batch_period = batch_period
        self.selectors = endpointutil.SelectorCache()
        self.trigger_times = endpointutil.TriggerTimeTracker()
        self.own_writes: ownwrites.OwnWrites[EndpointsView] = ownwrites.OwnWrites()
        # Endpoints this replica created that its cache has not shown yet: the next sync
        # updates them instead of creating them again (a 409 and a FailedToCreateEndpoint).
        self._created: dict[str, EndpointsView] = {}

    # --- handlers ---------------------------------------------------------------------------

    def register(self) -> None:
        self.services.add_handler(
            on_add=self._service_changed,
            on_update=lambda _old, new: self._service_changed(new),
            on_delete=self._service_deleted,
        )
        self.pods.add_handler(on_add=self._pod_added, on_update=self._pod_updated, on_delete=self._pod_added)
        self.endpoints.add_handler(on_add=self._endpoints_seen, on_delete=self._endpoints_deleted)

    def _endpoints_seen(self, ep: EndpointsView) -> None:
        self._created.pop(codec.key_of(ep), None)

    def _endpoints_deleted(self, ep: EndpointsView) -> None:
        key = codec.key_of(ep)
        self._created.pop(key, None)
        self.enqueue(key)

    def _service_changed(self, svc: endpointutil.ServiceView) -> None:
        self.enqueue(codec.key_of(svc))

    def _service_deleted(self, svc: endpointutil.ServiceView) -> None:
        key = codec.key_of(svc)
        self.selectors.delete(key)
        self.enqueue(key)

    def _pod_added(self, pod: endpointutil.EndpointPodView) -> None:
        """A pod added or deleted: the Services selecting it, after the batch period (upstream's
        AddAfter: pod changes within it make one sync)."""
        services = self.services.list(pod.metadata.namespace)
        for key in self.selectors.pod_service_memberships(services, pod):
            self.enqueue_after(key, self.batch_period)

    def _pod_updated(self, old: endpointutil.EndpointPodView, new: endpointutil.EndpointPodView) -> None:
        services = self.services.list(new.metadata.namespace)
        for key in endpointutil.services_to_update_on_pod_change(services, self.selectors, old, new):
            self.enqueue_after(key, self.batch_period)

    def keys(self) -> list[str]:
        """Every Service, and every Endpoints but leader-election locks (checkLeftoverEndpoints)."""
        out = {codec.key_of(svc) for svc in self.services.list()}
        out.update(
            codec.key_of(ep)
            for ep in self.endpoints.list()
            if LEADER_ELECTION_ANNOTATION not in ep.metadata.annotations
        )
        return sorted(out)

    # --- sync -------------------------------------------------------------------------------

    async def sync(self, key: str) -> runtime.Result | None:
        namespace, _, name = key.rpartition("/")
        service = self.services.get(namespace, name)
        if service is None:
            self._created.pop(key, None)
            self.own_writes.latest(key, None)  # an object seen gone is forgotten
            await self._delete_endpoints(namespace, name)
            return None
        if service.spec.type == EXTERNAL_NAME or not endpointutil.has_selector(service):
            return None
        selector = self.selectors.get(key, service.spec.selector or {})
        pods = self.pods.list(namespace, selector)
        # Computed even when nothing is written, so the tracker keeps up with every sync.
        trigger_time = self.trigger_times.compute(service, pods)
        desired = endpointutil.repack_subsets(self._subsets(service, pods))
        # Truncated before the comparison (upstream compares the untruncated subsets, so it
        # re-sends an over-capacity Endpoints on every sync): unchanged means no write.
        over_capacity = sub.truncate(desired)
        cached = self.endpoints.get(namespace, name)
        if cached is None:
            current = self._created.get(key)
        else:
            current = self.own_writes.latest(key, cached)
        if current is not None and self._up_to_date(current, service, desired, over_capacity):
            return None
        await self._write(service, current, desired, over_capacity, trigger_time)
        return None

    def _subsets(
        self, service: endpointutil.ServiceView, pods: list[endpointutil.EndpointPodView]
    ) -> list[sub.Obj]:
        publish = service.spec.publish_not_ready_addresses
        out: list[sub.Obj] = []
        for pod in pods:
            if not endpointutil.should_pod_be_in_endpoints(pod, publish):
                continue
            try:
                address = sub.pod_address(service, pod)
            except sub.NoAddressForFamily:
                continue  # a pod without an IP of the Service's family (dual-stack upgrades)
            ready = publish or endpointutil.is_pod_ready(pod)
            if not service.spec.ports:
                if service.spec.cluster_ip == endpointutil.CLUSTER_IP_NONE:
                    out.append(sub.one_address_subset(address, None, ready))
                continue
            for port in service.spec.ports:
                try:
                    number = endpointutil.find_port(pod, port)
                except endpointutil.PortNotFound:
                    continue
                out.append(sub.one_address_subset(address, sub.endpoint_port(port, number), ready))
        return out

    @staticmethod
    def _up_to_date(
        current: EndpointsView, service: endpointutil.ServiceView, desired: list[sub.Obj], over_capacity: bool
    ) -> bool:
        labels = {k: v for k, v in current.metadata.labels.items() if k != endpointutil.IS_HEADLESS_SERVICE}
        return (
            sub.subsets_equal_ignore_resource_version(current.subsets, desired)
            and labels == service.metadata.labels
            and sub.capacity_annotation_set_correctly(current.metadata.annotations, over_capacity)
        )

    async def _write(
        self,
        service: endpointutil.ServiceView,
        current: EndpointsView | None,
        desired: list[sub.Obj],
        over_capacity: bool,
        trigger_time: dt.datetime | None,
    ) -> None:
        namespace, name = service.metadata.namespace, service.metadata.name
        create = current is None
        if current is None:
            meta: dict[str, Any] = {"name": name, "namespace": namespace}
        else:
            meta = msgspec.to_builtins(current.metadata)
        annotations = dict(current.metadata.annotations) if current is not None else {}
        if trigger_time is not None:
            annotations[endpointutil.LAST_CHANGE_TRIGGER_TIME] = endpointutil.format_trigger_time(
                trigger_time
            )
        else:
            annotations.pop(endpointutil.LAST_CHANGE_TRIGGER_TIME, None)
        if over_capacity:
            annotations[sub.OVER_CAPACITY] = sub.TRUNCATED
        else:
            annotations.pop(sub.OVER_CAPACITY, None)
        labels = dict(service.metadata.labels)
        if endpointutil.is_service_ip_set(service):
            labels.pop(endpointutil.IS_HEADLESS_SERVICE, None)
        else:
            labels[endpointutil.IS_HEADLESS_SERVICE] = ""
        meta["labels"] = labels
        meta["annotations"] = annotations
        body = {"apiVersion": "v1", "kind": "Endpoints", "metadata": meta, "subsets": desired}
        key = f"{namespace}/{name}"
        try:
            if current is None:
                result = await self.client.create(
                    kubeclient.resource_path("", "v1", "endpoints", namespace), body
                )
                self._created[key] = msgspec.convert(result, EndpointsView)
            else:
                path = kubeclient.resource_path("", "v1", "endpoints", namespace, name)
                result = await self.client.update(path, body)
                written = msgspec.convert(result, EndpointsView)
                if key in self._created:
                    self._created[key] = written
                else:
                    self.own_writes.record(key, current.metadata.resource_version, written)
        except kubeclient.ApiError as exc:
            if (
                create
                and exc.code == 403
                and podcontrol.has_status_cause(exc, podcontrol.NAMESPACE_TERMINATING_CAUSE)
            ):
                return  # creates keep failing while the namespace terminates: drop the key
            self._record_failure(create, body, service, exc)
            raise
        log.debug(
            "wrote endpoints",
            extra={"service": key, "create": create, "addresses": sub.count_addresses(desired)},
        )

    def _record_failure(
        self, create: bool, body: dict[str, Any], service: endpointutil.ServiceView, exc: Exception
    ) -> None:
        ns, name = service.metadata.namespace, service.metadata.name
        if create:
            message = f"Failed to create endpoint for service {ns}/{name}: {_message(exc)}"
            self.recorder.event(body, events.WARNING, FAILED_TO_CREATE, message)
        else:
            message = f"Failed to update endpoint {ns}/{name}: {_message(exc)}"
            self.recorder.event(body, events.WARNING, FAILED_TO_UPDATE, message)

    async def _delete_endpoints(self, namespace: str, name: str) -> None:
        try:
            await self.client.delete(kubeclient.resource_path("", "v1", "endpoints", namespace, name))
        except kubeclient.ApiError as exc:
            if not exc.not_found:
                raise
        self.trigger_times.delete_service(namespace, name)


def flags(p: runtime.FlagSet) -> None:
    p.add_argument(
        "--endpoint-updates-batch-period",
        type=goduration.non_negative_seconds,
        default=0.0,
        metavar="DURATION",
        help="the length of endpoint updates batching period; processing of pod changes will be "
        "delayed by this duration to join them with potential upcoming updates and reduce the "
        "overall number of endpoints updates (default 0s)",
    )


def build(ctx: runtime.Context) -> runtime.Reconcile:
    ec = EndpointsController(
        ctx.client,
        ctx.caches[SERVICES],
        ctx.caches[PODS],
        ctx.caches[ENDPOINTS],
        ctx.enqueue,
        ctx.enqueue_after,
        ctx.recorder,
        batch_period=float(getattr(ctx.args, "endpoint_updates_batch_period", 0.0)),
    )
    ec.register()
    ctx.keys = ec.keys
    ctx.on_partitions_lost(ec.own_writes.retain)
    return ec.sync


SPEC = runtime.Spec(
    name="endpoints-controller",
    alias="endpoint",
    queue_name="endpoint",
    primary=None,
    views={
        SERVICES: endpointutil.ServiceView,
        PODS: endpointutil.EndpointPodView,
        ENDPOINTS: EndpointsView,
    },
    build=build,
    workers=5,
    flags=flags,
    event_component="endpoint-controller",
    package=__package__,
)
