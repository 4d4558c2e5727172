"""The persistentvolume-binder-controller: binds claims to PersistentVolumes, keeps both
sides' phases, reclaims released volumes and hands dynamic provisioning to the external
provisioner named by the claim's StorageClass.

Upstream pkg/controller/volume/persistentvolume (pv_controller.go, pv_controller_base.go,
index.go) v1.32 with its default gates, for CSI volumes, on our runtime (docs/runtime.md);
which volume fits which claim is `matching.py`. Work keys (`primary=None`):

- `claim/<namespace>/<name>` (upstream's claim queue, syncClaim): a claim without
  `pv.kubernetes.io/bind-completed` is bound to the volume it names, or to the best match
  (`matching.find_best_match`); with none, a class-less claim gets the default class
  (retroactive assignment), a WaitForFirstConsumer claim without a selected node gets a
  WaitForFirstConsumer or WaitForPodScheduled Event, a claim with a class is handed to the
  external provisioner (both provisioner annotations and an ExternalProvisioning Event, or
  ProvisioningFailed), and otherwise FailedBinding. A bound claim whose volume is gone or
  taken becomes Lost (ClaimLost, ClaimMisbound).
- `volume/<name>` (upstream's volume queue, syncVolume): Available without a claim, Bound
  with its claim, Released once the claim is gone, then reclaimed: Retain keeps it; Delete
  waits for the external provisioner that made it (`pv.kubernetes.io/provisioned-by`) or,
  for any CSI volume, for an external deleter, and marks any other volume Failed
  (VolumeFailedDelete): kcm builds no in-tree deleter; a volume a controller bound to a claim bound
  elsewhere is unbound.
- Binding writes the volume (claimRef, `bound-by-controller`), its phase, the claim
  (volumeName, `bind-completed`, `bound-by-controller`) and its status, in upstream's order,
  each a merge patch conditional on the resourceVersion read (upstream's Update); what each
  write returned stands in for the cache until the cache catches up (`OwnWrites`, upstream's
  assume cache), so the next claim does not pick a volume just taken.
- Upstream resyncs every claim and volume each --pvclaimbinder-sync-period; here a claim
  left unbound comes back after the period (`Result.requeue_after`), which is all upstream's
  resync changes: a bound claim or a settled volume is synced again by its own events.
- Events from `persistentvolume-controller` with upstream's reasons and texts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kcm_shared import runtime
from kcm_shared.apimachinery import codec, goduration, gvr
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import ownwrites, podvolumes
from kcm_shared.runtime import cache, events, pflag

from kcm_controllers.pvbinder import matching, views
from kcm_controllers.pvbinder.views import ClaimView, ClassView, VolumeView

log = logging.getLogger("kcm.persistentvolume-binder")

VOLUMES = gvr.Resource("", "v1", "persistentvolumes")
CLAIMS = gvr.Resource("", "v1", "persistentvolumeclaims")
CLASSES = gvr.Resource("storage.k8s.io", "v1", "storageclasses")
PODS = gvr.Resource("", "v1", "pods")
CLAIM_PREFIX = "claim/"
VOLUME_PREFIX = "volume/"
SYNC_PERIOD = 15.0

# In-tree provisioners whose volumes CSI migration (on for all of them in 1.32) hands to a
# CSI driver: csi-translation-lib's names.
MIGRATED = {
    "kubernetes.io/aws-ebs": "ebs.csi.aws.com",
    "kubernetes.io/gce-pd": "pd.csi.storage.gke.io",
    "kubernetes.io/azure-disk": "disk.csi.azure.com",
    "kubernetes.io/azure-file": "file.csi.azure.com",
    "kubernetes.io/cinder": "cinder.csi.openstack.org",
    "kubernetes.io/vsphere-volume": "csi.vsphere.vmware.com",
    "kubernetes.io/portworx-volume": "pxd.portworx.com",
}
IN_TREE_PREFIX = "kubernetes.io/"


def _claim_key(claim: ClaimView) -> str:
    return codec.key_of(claim)


def provisioner_name(provisioner: str) -> str:
    """The name the external provisioner answers to: a migrated in-tree name's CSI driver."""
    return MIGRATED.get(provisioner, provisioner)


class PVController:
    """Handlers and syncs of one process; the API client, recorder and enqueue are injected."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        caches: dict[gvr.Resource, cache.Cache[Any]],
        enqueue: Callable[[str], None],
        recorder: events.EventRecorder,
        *,
        sync_period: float = SYNC_PERIOD,
        dynamic_provisioning: bool = True,
    ) -> None:
        self.client = client
        self.volumes: cache.Cache[VolumeView] = caches[VOLUMES]
        self.claims: cache.Cache[ClaimView] = caches[CLAIMS]
        self.classes: cache.Cache[ClassView] = caches[CLASSES]
        self.pods: cache.Cache[podvolumes.PodView] = caches[PODS]
        self.enqueue = enqueue
        self.recorder = recorder
        self.sync_period = sync_period
        self.dynamic_provisioning = dynamic_provisioning
        self.volume_writes: ownwrites.OwnWrites[VolumeView] = ownwrites.OwnWrites()
        self.claim_writes: ownwrites.OwnWrites[ClaimView] = ownwrites.OwnWrites()

    # -- wiring ---------------------------------------------------------------------------

    def register(self) -> None:
        self.volumes.add_handler(
            on_add=self._volume_changed,
            on_update=lambda _old, new: self._volume_changed(new),
            on_delete=self._volume_deleted,
        )
        self.claims.add_handler(
            on_add=self._claim_changed,
            on_update=lambda _old, new: self._claim_changed(new),
            on_delete=self._claim_deleted,
        )
        # upstream common.PodPVCIndex, on the pod cache the other volume controllers share.
        self.pods.add_index(podvolumes.CLAIM_INDEX, podvolumes.claim_keys)

    def keys(self) -> list[str]:
        return [CLAIM_PREFIX + codec.key_of(c) for c in self.claims.list()] + [
            VOLUME_PREFIX + v.metadata.name for v in self.volumes.list()
        ]

    def forget(self, owned: Callable[[str], bool]) -> None:
        self.volume_writes.retain(lambda name: owned(VOLUME_PREFIX + name))
        self.claim_writes.retain(lambda key: owned(CLAIM_PREFIX + key))

    def _volume_changed(self, volume: VolumeView) -> None:
        self.enqueue(VOLUME_PREFIX + volume.metadata.name)
        ref = volume.spec.claim_ref
        if ref is not None and ref.uid:
            # upstream syncVolume enqueues a claim its volume points at but which does not
            # point back yet: a provisioned volume gets its claim bound at once.
            claim = self.claims.get(ref.namespace, ref.name)
            if claim is not None and not claim.spec.volume_name:
                self.enqueue(CLAIM_PREFIX + views.claim_key(ref))

    def _volume_deleted(self, volume: VolumeView) -> None:
        ref = volume.spec.claim_ref
        if ref is not None:
            # The claim learns it is Lost now, not at the next resync (upstream deleteVolume).
            self.enqueue(CLAIM_PREFIX + views.claim_key(ref))

    def _claim_changed(self, claim: ClaimView) -> None:
        self.enqueue(CLAIM_PREFIX + _claim_key(claim))

    def _claim_deleted(self, claim: ClaimView) -> None:
        if claim.spec.volume_name:
            # The volume is Released now, not at the next resync (upstream deleteClaim).
            self.enqueue(VOLUME_PREFIX + claim.spec.volume_name)

    # -- reading, with our own writes standing in for a cache behind them ----------------

    def _volume(self, name: str) -> VolumeView | None:
        return self.volume_writes.latest(name, self.volumes.get_key(name))

    def _claim(self, namespace: str, name: str) -> ClaimView | None:
        key = f"{namespace}/{name}"
        return self.claim_writes.latest(key, self.claims.get(namespace, name))

    def _all_volumes(self) -> list[VolumeView]:
        out = []
        for volume in self.volumes.list():
            latest = self.volume_writes.latest(volume.metadata.name, volume)
            if latest is not None:
                out.append(latest)
        return out

    async def reconcile(self, key: str) -> runtime.Result | None:
        if key.startswith(CLAIM_PREFIX):
            namespace, _, name = key[len(CLAIM_PREFIX) :].partition("/")
            claim = self._claim(namespace, name)
            if claim is None:
                return None
            claim = await self.sync_claim(claim)
            if claim is not None and views.ANN_BIND_COMPLETED not in claim.metadata.annotations:
                return runtime.Result(requeue_after=self.sync_period)
            return None
        if key.startswith(VOLUME_PREFIX):
            volume = self._volume(key[len(VOLUME_PREFIX) :])
            if volume is not None:
                await self.sync_volume(volume)
            return None
        raise runtime.TerminalError(f"not a claim or volume key: {key!r}")

    # -- claims ---------------------------------------------------------------------------

    async def sync_claim(self, claim: ClaimView) -> ClaimView | None:
        """upstream syncClaim; returns the claim as this sync left it (None: changed, synced again)."""
        if views.ANN_BIND_COMPLETED not in claim.metadata.annotations:
            return await self._sync_unbound_claim(claim)
        await self._sync_bound_claim(claim)
        return claim

    async def _sync_unbound_claim(self, claim: ClaimView) -> ClaimView | None:
        if not claim.spec.volume_name:
            classes = {c.metadata.name: c for c in self.classes.list()}
            delay = matching.delay_binding(claim, classes)
            volume = matching.find_best_match(claim, self._all_volumes(), delay_binding=delay)
            if volume is not None:
                return await self._bind(volume, claim)
            if await self._assign_default_class(claim):
                return None
            if delay and not matching.delay_binding_provisioning(claim):
                self._event_for_delayed_claim(claim)
            elif matching.claim_class(claim):
                await self._provision(claim, classes.get(matching.claim_class(claim)))
                return claim
            else:
                self.recorder.event(
                    claim,
                    events.NORMAL,
                    "FailedBinding",
                    "no persistent volumes available for this claim and no storage class is set",
                )
            return await self._update_claim_status(claim, views.PENDING, None)
        volume = self._volume(claim.spec.volume_name)
        if volume is None:
            # The named volume may appear later: retried each sync period.
            return await self._update_claim_status(claim, views.PENDING, None)
        if volume.spec.claim_ref is None:
            why = matching.check_volume_satisfies_claim(volume, claim)
            if why is not None:
                self.recorder.event(
                    claim,
                    events.WARNING,
                    "VolumeMismatch",
                    f'Cannot bind to requested volume "{volume.metadata.name}": {why}',
                )
                return await self._update_claim_status(claim, views.PENDING, None)
            return await self._bind(volume, claim)
        if matching.is_volume_bound_to_claim(volume, claim):
            return await self._bind(volume, claim)
        self.recorder.event(
            claim,
            events.WARNING,
            "FailedBinding",
            f'volume "{volume.metadata.name}" already bound to a different claim.',
        )
        if views.ANN_BOUND_BY_CONTROLLER not in claim.metadata.annotations:
            # The user asked for a volume someone else holds: wait for it.
            return await self._update_claim_status(claim, views.PENDING, None)
        raise RuntimeError(
            f'Invalid binding of claim "{_claim_key(claim)}" to volume "{claim.spec.volume_name}": '
            f'volume already claimed by "{views.claim_key(volume.spec.claim_ref)}"'
        )

    async def _sync_bound_claim(self, claim: ClaimView) -> None:
        if not claim.spec.volume_name:
            await self._update_claim_status(
                claim,
                views.LOST,
                None,
                event=(
                    "ClaimLost",
                    "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!",
                ),
            )
            return
        volume = self._volume(claim.spec.volume_name)
        if volume is None:
            await self._update_claim_status(
                claim,
                views.LOST,
                None,
                event=("ClaimLost", "Bound claim has lost its PersistentVolume. Data on the volume is lost!"),
            )
            return
        ref = volume.spec.claim_ref
        if ref is None or ref.uid == claim.metadata.uid:
            # Unbound volume (or the cache has not seen our write yet): bind again; all well:
            # bind() only fills in what is missing.
            await self._bind(volume, claim)
            return
        await self._update_claim_status(
            claim,
            views.LOST,
            None,
            event=("ClaimMisbound", "Two claims are bound to the same volume, this one is bound incorrectly"),
        )

    def _event_for_delayed_claim(self, claim: ClaimView) -> None:
        """upstream emitEventForUnboundDelayBindingClaim: name the pods still to be scheduled."""
        waiting = sorted(
            p.metadata.name
            for p in self.pods.by_index(podvolumes.CLAIM_INDEX, _claim_key(claim))
            if not p.spec.node_name
        )
        if not waiting:
            reason, message = (
                "WaitForFirstConsumer",
                "waiting for first consumer to be created before binding",
            )
        elif len(waiting) == 1:
            reason, message = "WaitForPodScheduled", f"waiting for pod {waiting[0]} to be scheduled"
        else:
            reason, message = "WaitForPodScheduled", f"waiting for pods {','.join(waiting)} to be scheduled"
        self.recorder.event(claim, events.NORMAL, reason, message)

    async def _assign_default_class(self, claim: ClaimView) -> bool:
        """upstream assignDefaultStorageClass (retroactive default class, GA in 1.28): a claim
        that never named a class gets the default one; True when the claim was written."""
        if matching.claim_has_class(claim):
            return False
        default = matching.default_class(self.classes.list())
        if default is None:
            return False
        await self._patch_claim(claim, {"spec": {"storageClassName": default.metadata.name}})
        log.info(
            "assigned the default StorageClass",
            extra={"PVC": _claim_key(claim), "class": default.metadata.name},
        )
        return True

    async def _provision(self, claim: ClaimView, storage_class: ClassView | None) -> None:
        """upstream provisionClaim and provisionClaimOperationExternal: CSI and migrated
        classes are provisioned by an external provisioner the claim's annotations name."""
        if not self.dynamic_provisioning:
            return
        if storage_class is None:
            name = matching.claim_class(claim)
            self.recorder.event(
                claim, events.WARNING, "ProvisioningFailed", f'storageclass.storage.k8s.io "{name}" not found'
            )
            return
        provisioner = storage_class.provisioner
        if provisioner.startswith(IN_TREE_PREFIX) and provisioner not in MIGRATED:
            # kcm builds no in-tree volume plugin (upstream's hostpath one is for tests only).
            self.recorder.event(
                claim, events.WARNING, "ProvisioningFailed", f"no volume plugin matched name: {provisioner}"
            )
            return
        name = provisioner_name(provisioner)
        if claim.metadata.annotations.get(views.ANN_STORAGE_PROVISIONER) != name:
            try:
                claim = await self._patch_claim(
                    claim,
                    {
                        "metadata": {
                            "annotations": {
                                views.ANN_BETA_STORAGE_PROVISIONER: name,
                                views.ANN_STORAGE_PROVISIONER: name,
                            }
                        }
                    },
                )
            except kubeclient.ApiError as exc:
                self.recorder.event(claim, events.WARNING, "ProvisioningFailed", f"Error saving claim: {exc}")
                raise
        self.recorder.event(
            claim,
            events.NORMAL,
            "ExternalProvisioning",
            f"Waiting for a volume to be created either by the external provisioner '{name}' or manually by "
            "the system administrator. If volume creation is delayed, please verify that the provisioner is "
            "running and correctly registered.",
        )

    # -- volumes --------------------------------------------------------------------------

    async def sync_volume(self, volume: VolumeView) -> None:
        """upstream syncVolume."""
        ref = volume.spec.claim_ref
        if ref is None or not ref.uid:
            # Unused, or pre-bound to a claim whose sync will finish the binding.
            await self._update_volume_phase(volume, views.AVAILABLE)
            return
        claim = await self._claim_of(volume)
        if claim is None:
            if volume.status.phase not in (views.RELEASED, views.FAILED):
                log.info(
                    "volume is released and reclaim policy will be executed",
                    extra={
                        "PV": volume.metadata.name,
                        "reclaimPolicy": volume.spec.persistent_volume_reclaim_policy,
                    },
                )
                volume = await self._update_volume_phase(volume, views.RELEASED)
            await self._reclaim(volume)
            return
        if not claim.spec.volume_name:
            if matching.volume_mode_mismatch(claim, volume):
                self.recorder.event(
                    volume,
                    events.WARNING,
                    "VolumeMismatch",
                    f'Cannot bind PersistentVolume to requested PersistentVolumeClaim "{claim.metadata.name}" '
                    "due to incompatible volumeMode.",
                )
                self.recorder.event(
                    claim,
                    events.WARNING,
                    "VolumeMismatch",
                    f'Cannot bind PersistentVolume "{volume.metadata.name}" to requested PersistentVolumeClaim '
                    "due to incompatible volumeMode.",
                )
            # Otherwise the claim's sync finishes the binding; the volume's event enqueued it.
            return
        if claim.spec.volume_name == volume.metadata.name:
            await self._update_volume_phase(volume, views.BOUND)
            return
        # Bound to a claim that is bound elsewhere.
        if (
            views.ANN_DYNAMICALLY_PROVISIONED in volume.metadata.annotations
            and volume.spec.persistent_volume_reclaim_policy == views.DELETE
        ):
            if volume.status.phase not in (views.RELEASED, views.FAILED):
                volume = await self._update_volume_phase(volume, views.RELEASED)
            await self._reclaim(volume)
            return
        await self._unbind_volume(volume)

    async def _claim_of(self, volume: VolumeView) -> ClaimView | None:
        """The claim the volume's claimRef names, if it is still that claim (same uid). Before
        a volume is released, a claim missing from the cache or with another uid is looked up
        on the API server: the cache may be behind a claim just created (upstream does the same)."""
        ref = volume.spec.claim_ref
        assert ref is not None
        claim = self._claim(ref.namespace, ref.name)
        settled = volume.status.phase in (views.RELEASED, views.FAILED)
        if (claim is None and not settled) or (claim is not None and claim.metadata.uid != ref.uid):
            claim = await self._get_claim(ref.namespace, ref.name)
        if claim is not None and claim.metadata.uid != ref.uid:
            return None
        return claim

    async def _get_claim(self, namespace: str, name: str) -> ClaimView | None:
        path = kubeclient.resource_path("", "v1", "persistentvolumeclaims", namespace, name)
        try:
            return codec.decode(await self.client.request_bytes("GET", path), ClaimView)
        except kubeclient.ApiError as exc:
            if exc.not_found:
                return None
            raise

    async def _reclaim(self, volume: VolumeView) -> None:
        """upstream reclaimVolume with HonorPVReclaimPolicy on (the v1.32 default)."""
        policy = volume.spec.persistent_volume_reclaim_policy
        if policy == views.RETAIN:
            log.debug("reclaimVolume: policy is Retain, nothing to do", extra={"PV": volume.metadata.name})
        elif policy == views.RECYCLE:
            # Recycling needs an in-tree plugin (NFS, hostPath); a CSI volume has none.
            await self._update_volume_phase(
                volume,
                views.FAILED,
                event=(events.WARNING, "VolumeFailedRecycle", "No recycler plugin found for the volume!"),
            )
        elif policy == views.DELETE:
            await self._delete_volume(volume)
        else:
            await self._update_volume_phase(
                volume,
                views.FAILED,
                event=(
                    events.WARNING,
                    "VolumeUnknownReclaimPolicy",
                    "Volume has unrecognized PersistentVolumeReclaimPolicy",
                ),
            )

    async def _delete_volume(self, volume: VolumeView) -> None:
        """upstream deleteVolumeOperation for a volume no in-tree plugin deletes: one an external
        provisioner made, or any CSI volume (made statically too), waits for its external
        deleter (upstream findDeletablePlugin); any other has no deleter and is marked Failed."""
        provisioned_by = volume.metadata.annotations.get(views.ANN_DYNAMICALLY_PROVISIONED, "")
        if provisioned_by and not provisioned_by.startswith(IN_TREE_PREFIX):
            return
        if provisioned_by in MIGRATED or volume.spec.csi is not None:
            return
        await self._update_volume_phase(
            volume,
            views.FAILED,
            event=(
                events.WARNING,
                "VolumeFailedDelete",
                f'error getting deleter volume plugin for volume "{volume.metadata.name}": '
                "no deletable volume plugin matched",
            ),
        )

    async def _unbind_volume(self, volume: VolumeView) -> None:
        """upstream unbindVolume: a controller's binding is undone; a user's pre-binding keeps
        its claim name and loses only the uid."""
        if views.ANN_BOUND_BY_CONTROLLER in volume.metadata.annotations:
            body: dict[str, Any] = {
                "metadata": {"annotations": {views.ANN_BOUND_BY_CONTROLLER: None}},
                "spec": {"claimRef": None},
            }
        else:
            body = {"spec": {"claimRef": {"uid": None}}}
        volume = await self._patch_volume(volume, body)
        await self._update_volume_phase(volume, views.AVAILABLE)

    # -- binding --------------------------------------------------------------------------

    async def _bind(self, volume: VolumeView, claim: ClaimView) -> ClaimView:
        """upstream bind: the volume, its phase, the claim, its status, in that order; each
        step is skipped when already done, so a retry finishes an interrupted binding."""
        volume = await self._bind_volume_to_claim(volume, claim)
        volume = await self._update_volume_phase(volume, views.BOUND)
        claim = await self._bind_claim_to_volume(claim, volume)
        claim = await self._update_claim_status(claim, views.BOUND, volume)
        log.info("bound", extra={"PVC": _claim_key(claim), "PV": volume.metadata.name})
        return claim

    async def _bind_volume_to_claim(self, volume: VolumeView, claim: ClaimView) -> VolumeView:
        body: dict[str, Any] = {}
        ref = volume.spec.claim_ref
        meta = claim.metadata
        if ref is None or (ref.name, ref.namespace, ref.uid) != (meta.name, meta.namespace, meta.uid):
            body["spec"] = {
                "claimRef": {
                    "kind": "PersistentVolumeClaim",
                    "namespace": meta.namespace,
                    "name": meta.name,
                    "uid": meta.uid,
                    "apiVersion": "v1",
                    "resourceVersion": meta.resource_version,
                }
            }
        by_controller = not matching.is_volume_bound_to_claim(volume, claim)
        if by_controller and views.ANN_BOUND_BY_CONTROLLER not in volume.metadata.annotations:
            body["metadata"] = {"annotations": {views.ANN_BOUND_BY_CONTROLLER: "yes"}}
        if not body:
            return volume
        return await self._patch_volume(volume, body)

    async def _bind_claim_to_volume(self, claim: ClaimView, volume: VolumeView) -> ClaimView:
        annotations: dict[str, str] = {}
        body: dict[str, Any] = {}
        if claim.spec.volume_name != volume.metadata.name:
            body["spec"] = {"volumeName": volume.metadata.name}
            if views.ANN_BOUND_BY_CONTROLLER not in claim.metadata.annotations:
                annotations[views.ANN_BOUND_BY_CONTROLLER] = "yes"
        if views.ANN_BIND_COMPLETED not in claim.metadata.annotations:
            annotations[views.ANN_BIND_COMPLETED] = "yes"
        if annotations:
            body["metadata"] = {"annotations": annotations}
        if not body:
            return claim
        return await self._patch_claim(claim, body)

    # -- writes ---------------------------------------------------------------------------

    async def _patch(self, path: str, base: codec.Meta, body: dict[str, Any]) -> bytes:
        """A merge patch conditional on the resourceVersion read: upstream's Update."""
        meta = dict(body.get("metadata") or {})
        meta["resourceVersion"] = base.metadata.resource_version
        patch = {**body, "metadata": meta}
        return await self.client.request_bytes(
            "PATCH", path, body=patch, content_type=kubeclient.PATCH_TYPES["merge"]
        )

    async def _patch_volume(
        self, volume: VolumeView, body: dict[str, Any], *, status: bool = False
    ) -> VolumeView:
        name = volume.metadata.name
        path = kubeclient.resource_path("", "v1", "persistentvolumes", None, name) + (
            "/status" if status else ""
        )
        written = codec.decode(await self._patch(path, volume, body), VolumeView)
        self.volume_writes.record(name, volume.metadata.resource_version, written)
        return written

    async def _patch_claim(
        self, claim: ClaimView, body: dict[str, Any], *, status: bool = False
    ) -> ClaimView:
        meta = claim.metadata
        path = kubeclient.resource_path("", "v1", "persistentvolumeclaims", meta.namespace, meta.name)
        written = codec.decode(
            await self._patch(path + ("/status" if status else ""), claim, body), ClaimView
        )
        self.claim_writes.record(_claim_key(claim), meta.resource_version, written)
        return written

    async def _update_volume_phase(
        self, volume: VolumeView, phase: str, *, event: tuple[str, str, str] | None = None
    ) -> VolumeView:
        """upstream updateVolumePhase(WithEvent): the API server stamps lastPhaseTransitionTime;
        the Event only when the phase changes."""
        if volume.status.phase == phase:
            return volume
        message = event[2] if event is not None else ""
        written = await self._patch_volume(
            volume, {"status": {"phase": phase, "message": message or None}}, status=True
        )
        if event is not None:
            self.recorder.event(written, *event)
        return written

    async def _update_claim_status(
        self, claim: ClaimView, phase: str, volume: VolumeView | None, *, event: tuple[str, str] | None = None
    ) -> ClaimView:
        """upstream updateClaimStatus(WithEvent): phase, and access modes and capacity from
        the bound volume (cleared without one). With an Event, a claim already in `phase` is
        left as it is, as upstream does."""
        if event is not None and claim.status.phase == phase:
            return claim
        status: dict[str, Any] = {}
        if claim.status.phase != phase:
            status["phase"] = phase
        if volume is None:
            if claim.status.access_modes is not None:
                status["accessModes"] = None
            if claim.status.capacity is not None:
                status["capacity"] = None
        else:
            if claim.status.access_modes != volume.spec.access_modes:
                status["accessModes"] = volume.spec.access_modes
            if "storage" not in volume.spec.capacity:
                raise RuntimeError(f'PersistentVolume "{volume.metadata.name}" is without a storage capacity')
            have = (claim.status.capacity or {}).get("storage")
            if have is None or matching.storage(claim.status.capacity) != matching.storage(
                volume.spec.capacity
            ):
                status["capacity"] = volume.spec.capacity
        if not status:
            return claim
        written = await self._patch_claim(claim, {"status": status}, status=True)
        if event is not None:
            self.recorder.event(written, events.WARNING, *event)
        return written


def flags(p: runtime.FlagSet) -> None:
    p.add_argument(
        "--pvclaimbinder-sync-period",
        type=goduration.positive_seconds,
        default=SYNC_PERIOD,
        metavar="DURATION",
        help="The period for syncing persistent volumes and persistent volume claims (default 15s)",
    )
    pflag.add_bool(
        p,
        "--enable-dynamic-provisioning",
        default=True,
        help="Enable dynamic provisioning for environments that support it. (default true)",
    )


def build(ctx: runtime.Context) -> runtime.Reconcile:
    pc = PVController(
        ctx.client,
        ctx.caches,
        ctx.enqueue,
        ctx.recorder,
        sync_period=ctx.args.pvclaimbinder_sync_period,
        dynamic_provisioning=ctx.args.enable_dynamic_provisioning,
    )
    pc.register()
    ctx.keys = pc.keys
    ctx.on_partitions_lost(pc.forget)
    return pc.reconcile


SPEC = runtime.Spec(
    name="persistentvolume-binder-controller",
    alias="persistentvolume-binder",
    primary=None,
    views={VOLUMES: VolumeView, CLAIMS: ClaimView, CLASSES: ClassView, PODS: podvolumes.PodView},
    build=build,
    flags=flags,
    workers=1,  # upstream runs one claim and one volume worker, with no flag for them
    event_component="persistentvolume-controller",
    queue_name="claims",
    package=__package__,
)
