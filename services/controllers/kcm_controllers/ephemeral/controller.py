"""The ephemeral-volume controller: gives each generic ephemeral volume of a pod its claim.

Upstream pkg/controller/volume/ephemeral/controller.go (v1.32) on our runtime
(docs/runtime.md); the claim itself is `claims.py`.

- A pod is enqueued when it is added (its spec is immutable, so updates change nothing here)
  unless it is being deleted, and only if it has an ephemeral volume. A claim that is deleted
  enqueues the pods whose ephemeral volume it was (a pod index by claim), so it is re-created
  while the pod lives; the garbage collector deletes the claims with their pod.
- A reconcile reads the pod from the cache; gone or being deleted, nothing is done. For each
  ephemeral volume, the cached claim `<pod>-<volume>` is checked: made for this pod, nothing to
  do; someone else's, a Warning FailedBinding Event
  (`ephemeral volume <volume>: PVC <ns>/<claim> was not created for pod <ns>/<pod> (pod is not
  owner)`) and the pod is retried with backoff; missing, it is created (an AlreadyExists
  answer means the cache is behind: the pod is retried).
- `ephemeral_volume_controller_create_total` counts create requests,
  `..._create_failures_total` the failed ones. Events come from `ephemeral_volume`, as
  upstream's recorder names itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import prometheus_client
from kcm_shared import runtime
from kcm_shared.apimachinery import codec, gvr
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import volumeprotection
from kcm_shared.runtime import cache, events

from kcm_controllers.ephemeral import claims
from kcm_controllers.ephemeral.claims import ClaimView, PodView

log = logging.getLogger("kcm.ephemeral-volume")

PODS = gvr.Resource("", "v1", "pods")
CLAIMS = gvr.Resource("", "v1", "persistentvolumeclaims")
CLAIM_INDEX = "ephemeral-pvc"
FAILED_BINDING = "FailedBinding"

CREATE_ATTEMPTS = prometheus_client.Counter(
    "ephemeral_volume_controller_create_total", "Number of PersistenVolumeClaims creation requests"
)
CREATE_FAILURES = prometheus_client.Counter(
    "ephemeral_volume_controller_create_failures_total", "Number of PersistenVolumeClaims creation requests"
)


class VolumeError(Exception):
    """One volume's claim could not be had; the pod is retried."""


class EphemeralController:
    """Handlers and sync of one process; the API client and the recorder are injected."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        pods: cache.Cache[PodView],
        claims_cache: cache.Cache[ClaimView],
        enqueue: Callable[[str], None],
        recorder: events.EventRecorder,
    ) -> None:
        self.client = client
        self.pods = pods
        self.claims = claims_cache
        self.enqueue = enqueue
        self.recorder = recorder

    def register(self) -> None:
        self.pods.add_index(CLAIM_INDEX, claims.claim_keys)
        self.pods.add_handler(on_add=self._pod_added)
        self.claims.add_handler(on_delete=self._claim_deleted)

    def _pod_added(self, pod: PodView) -> None:
        if pod.metadata.deletion_timestamp is None and claims.ephemeral_volumes(pod):
            self.enqueue(codec.key_of(pod))

    def _claim_deleted(self, claim: ClaimView) -> None:
        for pod in self.pods.by_index(CLAIM_INDEX, codec.key_of(claim)):
            self._pod_added(pod)

    async def reconcile(self, key: str) -> None:
        pod = self.pods.get_key(key)
        if pod is None or pod.metadata.deletion_timestamp is not None:
            return
        for volume in claims.ephemeral_volumes(pod):
            try:
                await self._handle(pod, volume)
            except VolumeError as exc:
                self.recorder.event(
                    pod, events.WARNING, FAILED_BINDING, f"ephemeral volume {volume.name}: {exc}"
                )
                raise VolumeError(f"pod {key}, ephemeral volume {volume.name}: {exc}") from exc

    async def _handle(self, pod: PodView, volume: claims.Volume) -> None:
        ns = pod.metadata.namespace
        name = volumeprotection.ephemeral_claim_name(pod.metadata.name, volume.name)
        existing = self.claims.get(ns, name)
        if existing is not None:
            why = claims.not_for_pod(pod, existing)
            if why is not None:
                raise VolumeError(why)
            return
        CREATE_ATTEMPTS.inc()
        path = kubeclient.resource_path("", "v1", "persistentvolumeclaims", ns)
        try:
            await self.client.create(path, claims.new_claim(pod, volume))
        except kubeclient.REQUEST_ERRORS as exc:
            CREATE_FAILURES.inc()
            raise VolumeError(f"create PVC {name}: {exc}") from exc


def build(ctx: runtime.Context) -> runtime.Reconcile:
    ec = EphemeralController(ctx.client, ctx.caches[PODS], ctx.caches[CLAIMS], ctx.enqueue, ctx.recorder)
    ec.register()
    return ec.reconcile


SPEC = runtime.Spec(
    name="ephemeral-volume-controller",
    alias="ephemeral-volume",
    primary=PODS,
    views={PODS: PodView, CLAIMS: ClaimView},
    build=build,
    workers=5,
    workers_flag="concurrent-ephemeralvolume-syncs",
    event_component="ephemeral_volume",
    queue_name="ephemeral_volume",
    package=__package__,
)
