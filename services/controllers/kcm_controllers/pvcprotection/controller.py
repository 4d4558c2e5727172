"""The PVC protection controller: keeps `kubernetes.io/pvc-protection` on live claims and
lifts it from a deleted claim once no pod uses it.

Upstream pkg/controller/volume/pvcprotection/pvc_protection_controller.go (v1.32) on our
runtime (docs/runtime.md); which pod keeps which claim is `usage.py`.

- Claims are enqueued when added or changed while they lack the finalizer and are not being
  deleted, or are being deleted and hold it. Pods enqueue the claims they name when they are
  deleted, finished, or not scheduled (only such an event can free a claim); a pod replaced
  under the same name enqueues its predecessor's claims too.
- A reconcile reads the claim from the cache. Being deleted with the finalizer: the cached
  pods naming it (an index by claim) are asked first; when none uses it, the namespace's pods
  are listed from the API server, since a pod may not have reached the cache yet; unused by
  those too, the finalizer is removed and the claim goes. Not being deleted and without the
  finalizer (one made before StorageObjectInUseProtection admission ran, or with it off): the
  finalizer is added.
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
from kcm_shared.controllerutil import podvolumes, volumeprotection
from kcm_shared.runtime import cache

from kcm_controllers.pvcprotection import usage
from kcm_controllers.pvcprotection.usage import ClaimView, PodView

log = logging.getLogger("kcm.pvc-protection")

PODS = gvr.Resource("", "v1", "pods")
CLAIMS = gvr.Resource("", "v1", "persistentvolumeclaims")
CLAIM_INDEX = podvolumes.CLAIM_INDEX
FINALIZER = volumeprotection.PVC_FINALIZER
# Upstream's log lines for what a sync did.
_LOGGED = {
    volumeprotection.Outcome.KEPT: "Keeping PVC because it is being used",
    volumeprotection.Outcome.REMOVED: "Removed protection finalizer from PVC",
    volumeprotection.Outcome.ADDED: "Added protection finalizer to PVC",
}


class _PodList(codec.Meta):
    items: list[PodView] = msgspec.field(default_factory=list)


class PVCProtectionController:
    """Handlers and sync of one process; the API client is injected."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        claims: cache.Cache[ClaimView],
        pods: cache.Cache[PodView],
        enqueue: Callable[[str], None],
    ) -> None:
        self.client = client
        self.claims = claims
        self.pods = pods
        self.enqueue = enqueue

    def register(self) -> None:
        self.claims.add_handler(
            on_add=self._claim_changed, on_update=lambda _old, new: self._claim_changed(new)
        )
        self.pods.add_index(CLAIM_INDEX, usage.claim_keys)
        self.pods.add_handler(
            on_add=lambda pod: self._pod_changed(pod, deleted=False),
            on_update=self._pod_updated,
            on_delete=lambda pod: self._pod_changed(pod, deleted=True),
        )

    def _claim_changed(self, claim: ClaimView) -> None:
        meta = claim.metadata
        if volumeprotection.needs_finalizer(meta, FINALIZER) or volumeprotection.is_deletion_candidate(
            meta, FINALIZER
        ):
            self.enqueue(codec.key_of(claim))

    def _pod_updated(self, old: PodView, new: PodView) -> None:
        self._pod_changed(new, deleted=False)
        # An update may hide a deletion and a re-creation under the same name: the old pod's
        # claims may be free now.
        if old.metadata.uid != new.metadata.uid:
            self._pod_changed(old, deleted=True)

    def _pod_changed(self, pod: PodView, *, deleted: bool) -> None:
        if usage.can_release(pod, deleted=deleted):
            for key in usage.claim_keys(pod):
                self.enqueue(key)

    async def reconcile(self, key: str) -> None:
        claim = self.claims.get_key(key)
        if claim is None:
            return
        meta = claim.metadata
        path = kubeclient.resource_path("", "v1", "persistentvolumeclaims", meta.namespace, meta.name)
        outcome = await volumeprotection.sync(self.client, path, meta, FINALIZER, lambda: self._in_use(claim))
        if outcome in _LOGGED:
            log.info(_LOGGED[outcome], extra={"PVC": key})

    async def _in_use(self, claim: ClaimView) -> bool:
        key = codec.key_of(claim)
        if any(usage.pod_uses_claim(pod, claim) for pod in self.pods.by_index(CLAIM_INDEX, key)):
            return True
        # Not in the cache does not mean no such pod: it may not have arrived yet.
        path = kubeclient.resource_path("", "v1", "pods", claim.metadata.namespace)
        live = codec.decode(await self.client.request_bytes("GET", path), _PodList)
        if any(usage.pod_uses_claim(pod, claim) for pod in live.items):
            return True
        log.info("PVC is unused", extra={"PVC": key})
        return False


def build(ctx: runtime.Context) -> runtime.Reconcile:
    pc = PVCProtectionController(ctx.client, ctx.caches[CLAIMS], ctx.caches[PODS], ctx.enqueue)
    pc.register()
    return pc.reconcile


SPEC = runtime.Spec(
    name="persistentvolumeclaim-protection-controller",
    alias="pvc-protection",
    primary=CLAIMS,
    views={CLAIMS: ClaimView, PODS: PodView},
    build=build,
    workers=1,  # upstream runs one worker and has no flag for it
    queue_name="pvcprotection",
    package=__package__,
)
