"""The storage-object-in-use protection finalizers, as the PVC and PV protection controllers
keep them.

- `needs_finalizer` / `is_deletion_candidate`: upstream's protectionutil predicates (a live
  object lacking the finalizer gets it; a deleted one holding it is checked for use).
- `set_finalizer`: adds or removes one finalizer with a strategic-merge patch carrying a uid
  precondition, so the object's other finalizers are left alone and an object re-created
  under the same name is never touched for its predecessor.
- `sync`: one protection controller's decision for one object: a deletion candidate loses the
  finalizer unless `in_use` says otherwise; a live object lacking it gets it.
- `ephemeral_claim_name`: the claim name of a pod's generic ephemeral volume
  (component-helpers/storage/ephemeral.VolumeClaimName), shared with the ephemeral-volume
  controller.
- `PodVolume` and `claim_names`: the claims a pod's volumes name (upstream's PodPVCIndex of
  pkg/controller/volume/common), shared with the persistentvolume binder.

Called by kcm_controllers.pvcprotection and kcm_controllers.pvprotection.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Iterable

from kcm_shared.apimachinery import codec
from kcm_shared.client import kubeclient

PVC_FINALIZER = "kubernetes.io/pvc-protection"
PV_FINALIZER = "kubernetes.io/pv-protection"


def needs_finalizer(meta: codec.ObjectMeta, finalizer: str) -> bool:
    return meta.deletion_timestamp is None and finalizer not in meta.finalizers


def is_deletion_candidate(meta: codec.ObjectMeta, finalizer: str) -> bool:
    return meta.deletion_timestamp is not None and finalizer in meta.finalizers


def finalizer_patch(uid: str, finalizer: str, *, present: bool) -> dict[str, object]:
    """Strategic-merge patch adding (`present`) or removing `finalizer`, with a uid precondition."""
    field = "finalizers" if present else "$deleteFromPrimitiveList/finalizers"
    return {"metadata": {field: [finalizer], "uid": uid}}


async def set_finalizer(
    client: kubeclient.KubeClient, path: str, meta: codec.ObjectMeta, finalizer: str, *, present: bool
) -> bool:
    """Patch `finalizer` onto (or off) the object at `path`; False when it is gone (404, or
    a 409 because another object now has its name)."""
    try:
        await client.patch(path, finalizer_patch(meta.uid, finalizer, present=present), "strategic")
    except kubeclient.ApiError as exc:
        if exc.not_found or exc.code == 409:
            return False
        raise
    return True


class Outcome(enum.Enum):
    NOTHING = "nothing"
    KEPT = "kept"  # being deleted, still in use: the finalizer stays
    REMOVED = "removed"
    ADDED = "added"


async def sync(
    client: kubeclient.KubeClient,
    path: str,
    meta: codec.ObjectMeta,
    finalizer: str,
    in_use: Callable[[], Awaitable[bool]],
) -> Outcome:
    """Upstream's processPVC / processPV for the object at `path` as cached (`meta`); `in_use`
    is asked only for a deletion candidate."""
    if is_deletion_candidate(meta, finalizer):
        if await in_use():
            return Outcome.KEPT
        done = await set_finalizer(client, path, meta, finalizer, present=False)
        return Outcome.REMOVED if done else Outcome.NOTHING
    if needs_finalizer(meta, finalizer) and await set_finalizer(client, path, meta, finalizer, present=True):
        return Outcome.ADDED
    return Outcome.NOTHING


def ephemeral_claim_name(pod_name: str, volume_name: str) -> str:
    return f"{pod_name}-{volume_name}"


class ClaimSource(codec.View):
    claim_name: str = ""


class EphemeralSource(codec.View):
    """Only its presence matters here: the claim's name comes from the pod and the volume."""


class PodVolume(codec.View):
    name: str = ""
    persistent_volume_claim: ClaimSource | None = None
    ephemeral: EphemeralSource | None = None


def claim_names(pod_name: str, volumes: Iterable[PodVolume]) -> list[str]:
    """The claims a pod names: its persistentVolumeClaim volumes' and the `<pod>-<volume>`
    claims of its generic ephemeral volumes."""
    names = []
    for v in volumes:
        if v.persistent_volume_claim is not None:
            names.append(v.persistent_volume_claim.claim_name)
        elif v.ephemeral is not None:
            names.append(ephemeral_claim_name(pod_name, v.name))
    return names
