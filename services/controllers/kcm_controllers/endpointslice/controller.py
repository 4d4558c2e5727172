"""The endpointslice controller: EndpointSlices for every Service with a selector.

Upstream pkg/controller/endpointslice/endpointslice_controller.go on our runtime
(docs/runtime.md); the placement of endpoints in slices is `reconciler` (upstream's
k8s.io/endpointslice library). Work keys are Service keys. Handlers, as upstream's:

- a Service added, changed or deleted: its key at once;
- a pod added, changed (`endpointutil.services_to_update_on_pod_change`) or deleted: the keys
  of the Services selecting it, after `--endpointslice-updates-batch-period` (0: at once); a
  deleted pod's last Ready transition counts for the trigger time (`TriggerTimeTracker.pod_deleted`);
- a slice managed by this controller changed by someone else (the EndpointSliceTracker tells
  our own writes apart) or deleted when we did not delete it: its Service after at least 1 s
  (upstream endpointSliceChangeMinSyncDelay), so a burst of such changes costs one sync.

The sync skips ExternalName Services and those without a selector, refuses to act while the
slice cache has not caught up with this controller's own last writes (`StaleInformerCache`,
retried with backoff), computes the last-change-trigger-time and lets the reconciler write;
a failed write records the FailedToUpdateEndpointSlices Event and the key is retried.
"""

from __future__ import annotations

import prometheus_client
from kcm_shared import runtime
from kcm_shared.apimachinery import codec, goduration, gvr
from kcm_shared.controllerutil.endpoints import endpointutil
from kcm_shared.controllerutil.endpoints.endpointslicetracker import EndpointSliceTracker, Ref
from kcm_shared.runtime import cache, controllerflags, events, upstreamflags

from kcm_controllers.endpointslice import reconciler, topologycache, views

SERVICES = gvr.Resource("", "v1", "services")
PODS = gvr.Resource("", "v1", "pods")
NODES = gvr.Resource("", "v1", "nodes")
SLICES = views.ENDPOINTSLICES

MIN_SLICE_CHANGE_SYNC_DELAY = 1.0  # upstream endpointSliceChangeMinSyncDelay
MAX_ENDPOINTS_PER_SLICE_RANGE = (1, 1000)  # upstream's validation of the flag
_SERVICE_INDEX = "endpointslice-controller/service"

SYNCS = prometheus_client.Counter(
    "endpoint_slice_controller_syncs", "Number of EndpointSlice syncs", ["result"]
)


class StaleInformerCache(Exception):
    """The slice cache is older than this controller's own last writes (upstream's error of the
    same name): retried with backoff until the cache has caught up."""


def _service_of(slice_: views.EndpointSlice) -> list[str]:
    """The Service key a slice managed by this controller belongs to (the index's value)."""
    labels = slice_.metadata.labels
    name = labels.get(views.LABEL_SERVICE_NAME)
    if not name or labels.get(views.LABEL_MANAGED_BY) != views.CONTROLLER_NAME:
        return []
    return [f"{slice_.metadata.namespace}/{name}"]


class EndpointSliceController:
    """Handlers and sync of one process; caches, client, recorder and enqueue are injected."""

    def __init__(
        self,
        ctx: runtime.Context,
        *,
        max_per_slice: int,
        batch_period: float,
        topology_aware_hints: bool = True,
        traffic_distribution: bool = True,
    ) -> None:
        """`topology_aware_hints`, `traffic_distribution`: the TopologyAwareHints and
        ServiceTrafficDistribution gates; with the first off there is no topology cache and no
        node handler, as upstream's NewController builds it."""
        self.services: cache.Cache[views.ServiceView] = ctx.caches[SERVICES]
        self.pods: cache.Cache[endpointutil.EndpointPodView] = ctx.caches[PODS]
        self.slices: cache.Cache[views.EndpointSlice] = ctx.caches[SLICES]
        self.nodes: cache.Cache[views.NodeView] = ctx.caches[NODES]
        self.enqueue = ctx.enqueue
        self.recorder = ctx.recorder
        self.batch_period = batch_period
        self.tracker = EndpointSliceTracker()
        self.triggers = endpointutil.TriggerTimeTracker()
        self.selectors = endpointutil.SelectorCache()
        self.topology = topologycache.TopologyCache() if topology_aware_hints else None
        self.reconciler = reconciler.Reconciler(
            ctx.client,
            self.tracker,
            max_per_slice,
            topology=self.topology,
            record=self._record,
            traffic_distribution=traffic_distribution,
        )
        self.enqueue_after = ctx.enqueue_after

    def register(self) -> None:
        self.slices.add_index(_SERVICE_INDEX, _service_of)
        self.services.add_handler(
            on_add=self.on_service,
            on_update=lambda _old, cur: self.on_service(cur),
            on_delete=self.on_service_delete,
        )
        self.pods.add_handler(on_add=self.on_pod, on_update=self.on_pod_update, on_delete=self.on_pod_delete)
        self.slices.add_handler(
            on_add=self.on_slice_add, on_update=self.on_slice_update, on_delete=self.on_slice_delete
        )
        if self.topology is not None:
            self.nodes.add_handler(
                on_add=lambda _node: self.on_nodes(),
                on_update=self.on_node_update,
                on_delete=lambda _node: self.on_nodes(),
            )

    # --- event handlers ---------------------------------------------------------------------

    def on_service(self, svc: views.ServiceView) -> None:
        self.enqueue(codec.key_of(svc))

    def on_service_delete(self, svc: views.ServiceView) -> None:
        key = codec.key_of(svc)
        self.selectors.delete(key)
        self.enqueue(key)

    def on_pod(self, pod: endpointutil.EndpointPodView) -> None:
        services = self.services.list(pod.metadata.namespace)
        for key in self.selectors.pod_service_memberships(services, pod):
            self.enqueue_after(key, self.batch_period)

    def on_pod_delete(self, pod: endpointutil.EndpointPodView) -> None:
        keys = self.selectors.pod_service_memberships(self.services.list(pod.metadata.namespace), pod)
        self.triggers.pod_deleted(keys, pod)
        for key in keys:
            self.enqueue_after(key, self.batch_period)

    def on_pod_update(self, old: endpointutil.EndpointPodView, cur: endpointutil.EndpointPodView) -> None:
        services = self.services.list(cur.metadata.namespace)
        for key in endpointutil.services_to_update_on_pod_change(services, self.selectors, old, cur):
            self.enqueue_after(key, self.batch_period)

    def _queue_for_slice(self, slice_: views.EndpointSlice) -> None:
        for key in _service_of(slice_):
            self.enqueue_after(key, max(MIN_SLICE_CHANGE_SYNC_DELAY, self.batch_period))

    def on_slice_add(self, slice_: views.EndpointSlice) -> None:
        if _service_of(slice_) and self.tracker.should_sync(self._owner(slice_), Ref.of(slice_)):
            self._queue_for_slice(slice_)

    def on_slice_update(self, old: views.EndpointSlice, cur: views.EndpointSlice) -> None:
        # A slice moved to another Service, or taken over from (or handed to) another manager.
        if old.metadata.labels.get(views.LABEL_SERVICE_NAME) != cur.metadata.labels.get(
            views.LABEL_SERVICE_NAME
        ):
            self._queue_for_slice(old)
        managed_changed = old.metadata.labels.get(views.LABEL_MANAGED_BY) != cur.metadata.labels.get(
            views.LABEL_MANAGED_BY
        )
        if managed_changed:
            self._queue_for_slice(old)
        if managed_changed or (_service_of(cur) and self.tracker.should_sync(self._owner(cur), Ref.of(cur))):
            self._queue_for_slice(cur)

    def on_slice_delete(self, slice_: views.EndpointSlice) -> None:
        # Unlike upstream, a deletion this replica has no record of (it restarted, or gained the
        # partition since) syncs the Service too: upstream's tracker would not know it either,
        # and it would wait for the next Service or pod change to replace the slice.
        if _service_of(slice_) and not self.tracker.handle_deletion(self._owner(slice_), Ref.of(slice_)):
            self._queue_for_slice(slice_)

    def on_node_update(self, old: views.NodeView, cur: views.NodeView) -> None:
        # A zone label set late (by a cloud provider), readiness or CPU changed: the shares move.
        if (
            old.ready() != cur.ready()
            or old.metadata.labels.get(views.LABEL_ZONE) != cur.metadata.labels.get(views.LABEL_ZONE)
            or old.status.allocatable.get("cpu") != cur.status.allocatable.get("cpu")
        ):
            self.on_nodes()

    def on_nodes(self) -> None:
        """upstream checkNodeTopologyDistribution: new CPU shares per zone, and a sync of every
        Service whose slices carry hints (upstream picks only those now overloaded)."""
        if self.topology is None:
            return
        self.topology.set_nodes(self.nodes.list())
        for key in {service for service, _ in self.topology.populated}:
            self.enqueue(key)

    def _record(self, svc: views.ServiceView, event: topologycache.Event) -> None:
        self.recorder.event(svc, event.type, event.reason, event.message)

    @staticmethod
    def _owner(slice_: views.EndpointSlice) -> tuple[str, str]:
        return slice_.metadata.namespace, slice_.metadata.labels.get(views.LABEL_SERVICE_NAME, "")

    # --- sync -------------------------------------------------------------------------------

    async def reconcile(self, key: str) -> runtime.Result | None:
        try:
            await self.sync_service(key)
        except StaleInformerCache:
            SYNCS.labels("stale").inc()
            raise
        except Exception:
            SYNCS.labels("error").inc()
            raise
        SYNCS.labels("success").inc()
        return None

    async def sync_service(self, key: str) -> None:
        namespace, _, name = key.partition("/")
        svc = self.services.get_key(key)
        if svc is None:
            self.triggers.delete_service(namespace, name)
            self.tracker.delete_service((namespace, name))
            if self.topology is not None:
                self.topology.forget_service(key)
            return  # its slices go with it: the garbage collector follows their owner reference
        if svc.spec.type == "ExternalName" or not endpointutil.has_selector(svc):
            return  # no slices from this controller: ExternalName has none, selectorless are hand-made
        pods = self.pods.list(namespace, self.selectors.get(key, svc.spec.selector or {}))
        slices = [
            s for s in self.slices.by_index(_SERVICE_INDEX, key) if s.metadata.deletion_timestamp is None
        ]
        if self.tracker.stale_slices((namespace, name), [Ref.of(s) for s in slices]):
            raise StaleInformerCache("EndpointSlice informer cache is out of date")
        trigger = self.triggers.compute(svc, pods)
        try:
            await self.reconciler.reconcile(svc, pods, slices, self._node, trigger)
        except reconciler.SyncError as exc:
            self.recorder.event(
                svc,
                events.WARNING,
                "FailedToUpdateEndpointSlices",
                f"Error updating Endpoint Slices for Service {namespace}/{name}: {exc}",
            )
            raise

    def _node(self, name: str) -> views.NodeView | None:
        return self.nodes.get("", name)


def build(ctx: runtime.Context) -> runtime.Reconcile:
    args = ctx.args
    eps = EndpointSliceController(
        ctx,
        max_per_slice=getattr(args, "max_endpoints_per_slice", 100),
        batch_period=getattr(args, "endpointslice_updates_batch_period", 0.0),
        topology_aware_hints=upstreamflags.gate(args, "TopologyAwareHints"),
        traffic_distribution=upstreamflags.gate(args, "ServiceTrafficDistribution"),
    )
    eps.register()
    return eps.reconcile


def flags(p: runtime.FlagSet) -> None:
    p.add_argument(
        "--max-endpoints-per-slice",
        type=controllerflags.int_in_range("max-endpoints-per-slice", *MAX_ENDPOINTS_PER_SLICE_RANGE),
        default=100,
        help="the maximum number of endpoints that will be added to an EndpointSlice",
    )
    p.add_argument(
        "--endpointslice-updates-batch-period",
        type=goduration.non_negative_seconds,
        default=0.0,
        help="the length of endpoint slice updates batching period: pod changes wait this long, "
        "so that several changes of one Service are written together",
    )


SPEC = runtime.Spec(
    name="endpointslice-controller",
    alias="endpointslice",
    event_component="endpoint-slice-controller",  # upstream's EventSource
    queue_name="endpoint_slice",
    primary=SERVICES,
    views={
        SERVICES: views.ServiceView,
        PODS: endpointutil.EndpointPodView,
        SLICES: views.EndpointSlice,
        NODES: views.NodeView,
    },
    build=build,
    workers=5,
    workers_flag="concurrent-service-endpoint-syncs",
    flags=flags,
    package=__package__,
)
