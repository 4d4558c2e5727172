"""The persistentvolume-expander controller: hands CSI claims' growth to the external resizer.

Upstream pkg/controller/volume/expand/expand_controller.go (v1.32) on our runtime
(docs/runtime.md), for CSI volumes: upstream's controller keeps only in-tree plugins, which
kcm does not build (in-tree volumes are gone or migrated to CSI), so every volume it meets is
left to the CSI driver's external-resizer.

- A Bound claim is enqueued when added or deleted, and when an update grows its requested
  size or its reported capacity (`sizes.grew`).
- A reconcile reads the claim from the cache (gone: nothing to do), then `get`s its PV from
  the API server as upstream does. A PV that cannot be read, or whose claimRef is not this
  claim, is an error retried with backoff. A claim whose request does not exceed its
  capacity, on a PV without the pre-resize capacity annotation, needs nothing.
- Otherwise the claim gets upstream's Normal `ExternalExpanding`
  `waiting for an external controller to expand this PVC` from source `volume_expand` (no
  in-tree plugin claims a CSI volume) and is not retried: the resizer takes it from there.
  The `volume.kubernetes.io/storage-resizer` annotation is set upstream only for in-tree
  volumes migrated to CSI, never for a CSI PV, so it is not set here either.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import msgspec
from kcm_shared import runtime
from kcm_shared.apimachinery import codec, gvr
from kcm_shared.client import kubeclient
from kcm_shared.runtime import cache, events

from kcm_controllers.expand import sizes
from kcm_controllers.expand.sizes import ClaimView

log = logging.getLogger("kcm.persistentvolume-expander")

CLAIMS = gvr.Resource("", "v1", "persistentvolumeclaims")
EXTERNAL_EXPANDING = "ExternalExpanding"
WAITING = "waiting for an external controller to expand this PVC"


class ClaimRef(codec.View):
    namespace: str = ""
    uid: str = ""


class VolumeSpec(codec.View):
    claim_ref: ClaimRef | None = None


class VolumeView(codec.Meta):
    spec: VolumeSpec = msgspec.field(default_factory=VolumeSpec)


class NotBound(Exception):
    """The claim's PV names another claim (or none): retried, as upstream's error is."""


class ExpandController:
    """Handlers and sync of one process; the API client and the recorder are injected."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        claims: cache.Cache[ClaimView],
        enqueue: Callable[[str], None],
        recorder: events.EventRecorder,
    ) -> None:
        self.client = client
        self.claims = claims
        self.enqueue = enqueue
        self.recorder = recorder

    def register(self) -> None:
        self.claims.add_handler(on_add=self._enqueue, on_update=self._updated, on_delete=self._enqueue)

    def _enqueue(self, claim: ClaimView) -> None:
        if sizes.is_bound(claim):
            self.enqueue(codec.key_of(claim))

    def _updated(self, old: ClaimView, new: ClaimView) -> None:
        if sizes.grew(old, new):
            self._enqueue(new)

    async def reconcile(self, key: str) -> None:
        claim = self.claims.get_key(key)
        if claim is None:
            return
        path = kubeclient.resource_path("", "v1", "persistentvolumes", name=claim.spec.volume_name)
        try:
            pv = codec.decode(await self.client.request_bytes("GET", path), VolumeView)
        except kubeclient.REQUEST_ERRORS as exc:
            raise RuntimeError(f'failed to get PV "{claim.spec.volume_name}": {exc}') from exc
        ref = pv.spec.claim_ref
        meta = claim.metadata
        if ref is None or ref.namespace != meta.namespace or ref.uid != meta.uid:
            raise NotBound(f"persistent Volume is not bound to PVC being updated : {key}")
        if not sizes.wants_expansion(claim, pv.metadata.annotations):
            return
        self.recorder.event(claim, events.NORMAL, EXTERNAL_EXPANDING, WAITING)
        log.info(
            "Waiting for an external controller to expand the PVC", extra={"pvcKey": key, "pvcUID": meta.uid}
        )


def build(ctx: runtime.Context) -> runtime.Reconcile:
    ec = ExpandController(ctx.client, ctx.caches[CLAIMS], ctx.enqueue, ctx.recorder)
    ec.register()
    return ec.reconcile


SPEC = runtime.Spec(
    name="persistentvolume-expander-controller",
    alias="persistentvolume-expander",
    primary=CLAIMS,
    views={CLAIMS: ClaimView},
    build=build,
    workers=10,  # upstream's defaultWorkerCount; it has no flag for it
    event_component="volume_expand",
    queue_name="volume_expand",
    package=__package__,
)
