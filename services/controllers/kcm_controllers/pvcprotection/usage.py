"""Whether a pod keeps a claim that is being deleted: upstream's pure decisions.

Upstream pkg/controller/volume/pvcprotection/pvc_protection_controller.go (v1.32):
`pod_uses_claim` is podUsesPVC with podIsShutDown, `claim_keys` the claims a pod names
(the PodPVCIndex of pkg/controller/volume/common, and enqueuePVCs), `can_release` the filter
enqueuePVCs applies before it looks at a pod's claims (volumeutil.IsPodTerminated). Called by
`controller`, which caches pods and claims in the views below.
"""

from __future__ import annotations

from kcm_shared.apimachinery import codec
from kcm_shared.controllerutil import podvolumes, volumeprotection

# The pod as read here is the volume controllers' shared view (`controllerutil.podvolumes`).
PodView = podvolumes.PodView


class ClaimView(codec.Meta):
    """A claim as this controller reads it: metadata (finalizers, deletion, owners) only."""


claim_keys = podvolumes.claim_keys


def _is_shut_down(pod: PodView) -> bool:
    """The kubelet is done with the pod, or it was force-deleted: deleted with grace 0."""
    return pod.metadata.deletion_timestamp is not None and pod.metadata.deletion_grace_period_seconds == 0


def _controlled_by(claim: ClaimView, pod: PodView) -> bool:
    ref = codec.controller_ref(claim)
    return ref is not None and ref.uid == pod.metadata.uid


def pod_uses_claim(pod: PodView, claim: ClaimView) -> bool:
    """Whether `pod` keeps `claim`: only a scheduled pod can (the kubelet starts no pod on a
    claim being deleted). A persistentVolumeClaim volume keeps it whatever the pod's phase, as
    upstream's; an ephemeral volume only while the pod is not shut down and the claim is the
    one made for this pod."""
    if not pod.spec.node_name:
        return False
    for v in pod.spec.volumes:
        if (
            v.persistent_volume_claim is not None
            and v.persistent_volume_claim.claim_name == claim.metadata.name
        ):
            return True
        if (
            v.ephemeral is not None
            and not _is_shut_down(pod)
            and volumeprotection.ephemeral_claim_name(pod.metadata.name, v.name) == claim.metadata.name
            and _controlled_by(claim, pod)
        ):
            return True
    return False


def can_release(pod: PodView, *, deleted: bool) -> bool:
    """Whether this pod event may free one of its claims: the pod is gone, finished, or not
    scheduled (a running, scheduled pod frees nothing)."""
    return deleted or podvolumes.is_terminated(pod) or not pod.spec.node_name
