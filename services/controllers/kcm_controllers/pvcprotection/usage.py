"""Whether a pod keeps a claim that is being deleted: upstream's pure decisions.

Upstream pkg/controller/volume/pvcprotection/pvc_protection_controller.go (v1.32):
`pod_uses_claim` is podUsesPVC with podIsShutDown, `claim_keys` the claims a pod names
(the PodPVCIndex of pkg/controller/volume/common, and enqueuePVCs), `can_release` the filter
enqueuePVCs applies before it looks at a pod's claims (volumeutil.IsPodTerminated). Called by
`controller`, which caches pods and claims in the views below.
"""

from __future__ import annotations

import msgspec
from kcm_shared.apimachinery import codec
from kcm_shared.controllerutil import volumeprotection


class PodSpecView(codec.View):
    node_name: str = ""
    volumes: list[volumeprotection.PodVolume] = msgspec.field(default_factory=list)


class ContainerState(codec.View):
    running: dict[str, object] | None = None
    waiting: dict[str, object] | None = None
    terminated: dict[str, object] | None = None


class ContainerStatus(codec.View):
    state: ContainerState = msgspec.field(default_factory=ContainerState)


class PodStatusView(codec.View):
    phase: str = ""
    container_statuses: list[ContainerStatus] = msgspec.field(default_factory=list)


class PodView(codec.Meta):
    spec: PodSpecView = msgspec.field(default_factory=PodSpecView)
    status: PodStatusView = msgspec.field(default_factory=PodStatusView)


class ClaimView(codec.Meta):
    """A claim as this controller reads it: metadata (finalizers, deletion, owners) only."""


def claim_keys(pod: PodView) -> list[str]:
    names = volumeprotection.claim_names(pod.metadata.name, pod.spec.volumes)
    return [f"{pod.metadata.namespace}/{name}" for name in names]


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


def _not_running(pod: PodView) -> bool:
    return all(
        s.state.terminated is not None or s.state.waiting is not None for s in pod.status.container_statuses
    )


def is_terminated(pod: PodView) -> bool:
    """volumeutil.IsPodTerminated: finished, or deleted with no container running."""
    if pod.status.phase in ("Failed", "Succeeded"):
        return True
    return pod.metadata.deletion_timestamp is not None and _not_running(pod)


def can_release(pod: PodView, *, deleted: bool) -> bool:
    """Whether this pod event may free one of its claims: the pod is gone, finished, or not
    scheduled (a running, scheduled pod frees nothing)."""
    return deleted or is_terminated(pod) or not pod.spec.node_name
