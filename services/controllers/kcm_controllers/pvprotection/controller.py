"""The PV protection controller: keeps `kubernetes.io/pv-protection` on live PersistentVolumes
and lifts it from a deleted one once it is no longer Bound.

Upstream pkg/controller/volume/pvprotection/pv_protection_controller.go (v1.32) on our
runtime (docs/runtime.md).

- PVs are enqueued when added or changed while they lack the finalizer and are not being
  deleted, or are being deleted and hold it.
- A reconcile reads the PV from the cache. Being deleted with the finalizer: while its
  `status.phase` is Bound it is kept (the binder moves it to Released once its claim is
  gone, which enqueues it again); otherwise the finalizer is removed. Not being deleted and
  without the finalizer: it is added.
- Writes are strategic-merge patches of the finalizer with a uid precondition
  (`controllerutil.volumeprotection`). No Events, as upstream records none.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import msgspec
from kcm_shared import runtime
from kcm_shared.apimachinery import codec, gvr
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import volumeprotection
from kcm_shared.runtime import cache

log = logging.getLogger("kcm.pv-protection")

VOLUMES = gvr.Resource("", "v1", "persistentvolumes")
FINALIZER = volumeprotection.PV_FINALIZER
# Upstream's log lines for what a sync did.
_LOGGED = {
    volumeprotection.Outcome.KEPT: "Keeping PV because it is being used",
    volumeprotection.Outcome.REMOVED: "Removed protection finalizer from PV",
    volumeprotection.Outcome.ADDED: "Added protection finalizer to PV",
}


class VolumeStatus(codec.View):
    phase: str = ""


class VolumeView(codec.Meta):
    status: VolumeStatus = msgspec.field(default_factory=VolumeStatus)


async def _in_use(pv: VolumeView) -> bool:
    """upstream isBeingUsed: the binder's phase says whether a claim holds the volume."""
    return pv.status.phase == "Bound"


class PVProtectionController:
    """Handlers and sync of one process; the API client is injected."""

    def __init__(
        self, client: kubeclient.KubeClient, volumes: cache.Cache[VolumeView], enqueue: Callable[[str], None]
    ) -> None:
        self.client = client
        self.volumes = volumes
        self.enqueue = enqueue

    def register(self) -> None:
        self.volumes.add_handler(on_add=self._changed, on_update=lambda _old, new: self._changed(new))

    def _changed(self, pv: VolumeView) -> None:
        meta = pv.metadata
        if volumeprotection.needs_finalizer(meta, FINALIZER) or volumeprotection.is_deletion_candidate(
            meta, FINALIZER
        ):
            self.enqueue(meta.name)

    async def reconcile(self, key: str) -> None:
        pv = self.volumes.get_key(key)
        if pv is None:
            return
        meta = pv.metadata
        path = kubeclient.resource_path("", "v1", "persistentvolumes", None, meta.name)
        outcome = await volumeprotection.sync(self.client, path, meta, FINALIZER, lambda: _in_use(pv))
        if outcome in _LOGGED:
            log.debug(_LOGGED[outcome], extra={"PV": key})


def build(ctx: runtime.Context) -> runtime.Reconcile:
    pc = PVProtectionController(ctx.client, ctx.caches[VOLUMES], ctx.enqueue)
    pc.register()
    return pc.reconcile


SPEC = runtime.Spec(
    name="persistentvolume-protection-controller",
    alias="pv-protection",
    primary=VOLUMES,
    views={VOLUMES: VolumeView},
    build=build,
    workers=1,  # upstream runs one worker and has no flag for it
    queue_name="pvprotection",
    package=__package__,
)
