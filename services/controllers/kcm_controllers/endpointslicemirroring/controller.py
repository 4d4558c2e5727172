"""The endpointslice-mirroring controller: EndpointSlices mirroring hand-written Endpoints.

Upstream pkg/controller/endpointslicemirroring/endpointslicemirroring_controller.go on our
runtime (docs/runtime.md); what a sync writes is `reconciler`. Work keys are Endpoints keys
(`namespace/name`, the same as their Service's). Handlers, as upstream's:

- Endpoints added, changed or deleted: its key, unless it is not mirrored (the
  `endpointslice.kubernetes.io/skip-mirror: "true"` label or a leader-election annotation; an
  update is queued when either version is mirrored, so opting out removes the slices);
- a Service added or deleted without a selector, or changed from or to having one: its key;
- a slice managed by this controller changed by someone else (the EndpointSliceTracker tells
  our own writes apart), moved to another Service or manager, or deleted when we did not
  delete it: its Service's key after `--mirroring-endpointslice-updates-batch-period`.

The sync removes every mirrored slice of an Endpoints that is gone, not mirrored, or whose
Service is gone or has a selector; otherwise it refuses to act while the slice cache has not
caught up with its own last writes (StaleInformerCache, retried with backoff) and lets the
reconciler write. Errors are retried by the runtime with capped backoff, for ever.
"""

from __future__ import annotations

import time

from kcm_shared import runtime
from kcm_shared.apimachinery import codec, goduration
from kcm_shared.controllerutil.endpoints import endpointutil
from kcm_shared.controllerutil.endpoints.endpointslicetracker import EndpointSliceTracker, Ref
from kcm_shared.runtime import cache, controllerflags

from kcm_controllers.endpointslicemirroring import metrics, reconciler, utils
from kcm_controllers.endpointslicemirroring.utils import ENDPOINTS, ENDPOINTSLICES, SERVICES

MAX_ENDPOINTS_PER_SUBSET_RANGE = (1, 1000)  # upstream's validation of the flag
_MIRRORED_INDEX = "endpointslicemirroring/endpoints"


class StaleInformerCache(Exception):
    """The slice cache is older than this controller's own last writes (upstream's error)."""


def _mirrored_for(slice_: utils.EndpointSliceView) -> list[str]:
    """The Endpoints key a slice this controller manages mirrors (the index's value)."""
    labels = slice_.metadata.labels
    name = labels.get(utils.LABEL_SERVICE_NAME)
    if not name or not utils.managed_by_controller(labels):
        return []
    return [f"{slice_.metadata.namespace}/{name}"]


def _owner(slice_: utils.EndpointSliceView) -> tuple[str, str]:
    return slice_.metadata.namespace, slice_.metadata.labels.get(utils.LABEL_SERVICE_NAME, "")


class MirroringController:
    """Handlers and sync of one process; caches, client, recorder and enqueue are injected."""

    def __init__(self, ctx: runtime.Context, *, max_per_subset: int, batch_period: float) -> None:
        self.endpoints: cache.Cache[utils.EndpointsView] = ctx.caches[ENDPOINTS]
        self.services: cache.Cache[endpointutil.ServiceView] = ctx.caches[SERVICES]
        self.slices: cache.Cache[utils.EndpointSliceView] = ctx.caches[ENDPOINTSLICES]
        self.enqueue = ctx.enqueue
        self.batch_period = batch_period
        self.tracker = EndpointSliceTracker()
        self.reconciler = reconciler.Reconciler(ctx.client, self.tracker, ctx.recorder, max_per_subset)
        self.enqueue_after = ctx.enqueue_after

    def register(self) -> None:
        self.slices.add_index(_MIRRORED_INDEX, _mirrored_for)
        self.endpoints.add_handler(
            on_add=self.on_endpoints, on_update=self.on_endpoints_update, on_delete=self.on_endpoints
        )
        self.services.add_handler(
            on_add=self.on_service, on_update=self.on_service_update, on_delete=self.on_service
        )
        self.slices.add_handler(
            on_add=self.on_slice_add, on_update=self.on_slice_update, on_delete=self.on_slice_delete
        )

    # --- event handlers ---------------------------------------------------------------------

    def on_endpoints(self, ep: utils.EndpointsView) -> None:
        if utils.should_mirror(ep):
            self.enqueue(codec.key_of(ep))

    def on_endpoints_update(self, old: utils.EndpointsView, cur: utils.EndpointsView) -> None:
        if utils.should_mirror(old) or utils.should_mirror(cur):
            self.enqueue(codec.key_of(cur))

    def on_service(self, svc: endpointutil.ServiceView) -> None:
        if not endpointutil.has_selector(svc):
            self.enqueue(codec.key_of(svc))

    def on_service_update(self, old: endpointutil.ServiceView, cur: endpointutil.ServiceView) -> None:
        if endpointutil.has_selector(old) != endpointutil.has_selector(cur):
            self.enqueue(codec.key_of(cur))

    def _queue_for_slice(self, slice_: utils.EndpointSliceView) -> None:
        name = slice_.metadata.labels.get(utils.LABEL_SERVICE_NAME)
        if name:
            self.enqueue_after(f"{slice_.metadata.namespace}/{name}", self.batch_period)

    def on_slice_add(self, slice_: utils.EndpointSliceView) -> None:
        if _mirrored_for(slice_) and self.tracker.should_sync(_owner(slice_), Ref.of(slice_)):
            self._queue_for_slice(slice_)

    def on_slice_update(self, old: utils.EndpointSliceView, cur: utils.EndpointSliceView) -> None:
        if old.metadata.labels.get(utils.LABEL_SERVICE_NAME) != cur.metadata.labels.get(
            utils.LABEL_SERVICE_NAME
        ):
            self._queue_for_slice(cur)
            self._queue_for_slice(old)
            return
        managed_changed = utils.managed_by_controller(old.metadata.labels) != utils.managed_by_controller(
            cur.metadata.labels
        )
        if managed_changed or (_mirrored_for(cur) and self.tracker.should_sync(_owner(cur), Ref.of(cur))):
            self._queue_for_slice(cur)

    def on_slice_delete(self, slice_: utils.EndpointSliceView) -> None:
        # Unlike upstream, a deletion this replica has no record of (it restarted, or gained the
        # partition since) syncs too: it would otherwise wait for the next Endpoints change.
        if _mirrored_for(slice_) and not self.tracker.handle_deletion(_owner(slice_), Ref.of(slice_)):
            self._queue_for_slice(slice_)

    # --- sync -------------------------------------------------------------------------------

    async def reconcile(self, key: str) -> runtime.Result | None:
        start = time.monotonic()
        try:
            await self.sync_endpoints(key)
        finally:
            metrics.SYNC_DURATION.observe(time.monotonic() - start)
        return None

    async def sync_endpoints(self, key: str) -> None:
        namespace, _, name = key.partition("/")
        endpoints = self.endpoints.get_key(key)
        svc = self.services.get_key(key)
        if (
            endpoints is None
            or not utils.should_mirror(endpoints)
            or svc is None
            or endpointutil.has_selector(svc)
        ):
            await self.delete_mirrored(namespace, name)
            return
        slices = self._mirrored(key)
        if self.tracker.stale_slices((namespace, name), [Ref.of(s) for s in slices]):
            raise StaleInformerCache("EndpointSlice informer cache is out of date")
        await self.reconciler.reconcile(endpoints, slices)

    def _mirrored(self, key: str) -> list[utils.EndpointSliceView]:
        return [
            s for s in self.slices.by_index(_MIRRORED_INDEX, key) if s.metadata.deletion_timestamp is None
        ]

    async def delete_mirrored(self, namespace: str, name: str) -> None:
        """upstream deleteMirroredSlices: forget the tracker's entries and delete every slice."""
        self.tracker.delete_service((namespace, name))
        slices = self._mirrored(f"{namespace}/{name}")
        if slices:
            await self.reconciler.delete_all(namespace, name, slices)


def build(ctx: runtime.Context) -> runtime.Reconcile:
    args = ctx.args
    mirror = MirroringController(
        ctx,
        max_per_subset=getattr(args, "mirroring_max_endpoints_per_subset", 1000),
        batch_period=getattr(args, "mirroring_endpointslice_updates_batch_period", 0.0),
    )
    mirror.register()
    return mirror.reconcile


max_endpoints_per_subset = controllerflags.int_in_range(
    "mirroring-max-endpoints-per-subset", *MAX_ENDPOINTS_PER_SUBSET_RANGE
)


def flags(p: runtime.FlagSet) -> None:
    p.add_argument(
        "--mirroring-max-endpoints-per-subset",
        type=max_endpoints_per_subset,
        default=1000,
        help="the maximum number of endpoints that will be added to an EndpointSlice by the "
        "EndpointSliceMirroring controller",
    )
    p.add_argument(
        "--mirroring-endpointslice-updates-batch-period",
        type=goduration.non_negative_seconds,
        default=0.0,
        help="the length of EndpointSlice updates batching period for EndpointSliceMirroring "
        "controller: changes of mirrored slices wait this long, so that several are handled together",
    )


SPEC = runtime.Spec(
    name="endpointslice-mirroring-controller",
    alias="endpointslicemirroring",
    event_component="endpoint-slice-mirroring-controller",  # upstream's EventSource
    queue_name="endpoint_slice_mirroring",
    primary=ENDPOINTS,
    views={
        ENDPOINTS: utils.EndpointsView,
        SERVICES: endpointutil.ServiceView,
        ENDPOINTSLICES: utils.EndpointSliceView,
    },
    build=build,
    workers=5,
    workers_flag="mirroring-concurrent-service-endpoint-syncs",
    flags=flags,
    package=__package__,
)
