"""Which volumes a node should have attached: upstream's desired state of the world for one
node, computed from the caches each time instead of kept in memory.

Upstream pkg/controller/volume/attachdetach (v1.32): populator and util.ProcessPodVolumes
with util.CreateVolumeSpec (a claim counts once Bound to a PV whose claimRef holds the
claim's uid; a generic ephemeral volume's claim only when the pod owns it), csi_plugin.go
CanAttach/skipAttach (a PV with spec.csi is attachable unless its CSIDriver says
attachRequired false; an absent CSIDriver means attach), DetermineVolumeAction (a terminated
pod's volumes are not wanted). Inline CSI volumes are never attached, and in-tree plugins
are not built (docs/controllers.md). Called by `controller` for each node it reconciles.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kcm_shared.controllerutil import podvolumes, volumeprotection

from kcm_controllers.attachdetach import names
from kcm_controllers.attachdetach.views import ClaimView, DriverView, PodView, VolumeView

# util.IsMultiAttachAllowed: these let a volume be attached to several nodes at once.
_SHARED_MODES = frozenset({"ReadWriteMany", "ReadOnlyMany"})


@dataclass
class Want:
    """One volume a node should have attached, and the pods that use it there."""

    attachment: str  # the VolumeAttachment's name
    unique_name: str  # as node.status.volumesAttached lists it
    pv: str
    driver: str
    handle: str
    multi_attach: bool
    pods: list[PodView] = field(default_factory=list)


@dataclass(frozen=True)
class Lookups:
    """The caches `wanted` reads, as plain lookups (a test passes dicts' `get`)."""

    claim: Callable[[str, str], ClaimView | None]  # (namespace, name)
    volume: Callable[[str], VolumeView | None]
    driver: Callable[[str], DriverView | None]


def multi_attach_allowed(pv: VolumeView) -> bool:
    """A volume without access modes is let through, as upstream (the attacher decides)."""
    modes = pv.spec.access_modes
    return not modes or any(m in _SHARED_MODES for m in modes)


def _claim_of(pod: PodView, claim_name: str, ephemeral: bool, look: Lookups) -> ClaimView | None:
    claim = look.claim(pod.metadata.namespace, claim_name)
    if claim is None:
        return None
    if ephemeral and not any(
        ref.controller and ref.uid == pod.metadata.uid for ref in claim.metadata.owner_references
    ):
        return None  # someone else's claim under the generated name: not this pod's volume
    if claim.status.phase != "Bound" or not claim.spec.volume_name:
        return None
    return claim


def attachable_volume(claim: ClaimView, look: Lookups) -> VolumeView | None:
    """The claim's PV when the controller must attach it, else None."""
    pv = look.volume(claim.spec.volume_name)
    if pv is None or pv.spec.csi is None:
        return None
    if pv.spec.claim_ref is None or pv.spec.claim_ref.uid != claim.metadata.uid:
        return None
    driver = look.driver(pv.spec.csi.driver)
    if driver is not None and driver.spec.attach_required is False:
        return None
    return pv


def wanted(node: str, pods: Iterable[PodView], look: Lookups) -> dict[str, Want]:
    """The node's wanted attachments by VolumeAttachment name, for the pods bound to it."""
    out: dict[str, Want] = {}
    for pod in pods:
        if pod.spec.node_name != node or podvolumes.is_terminated(pod):
            continue
        for vol in pod.spec.volumes:
            if vol.persistent_volume_claim is not None:
                claim = _claim_of(pod, vol.persistent_volume_claim.claim_name, False, look)
            elif vol.ephemeral is not None:
                generated = volumeprotection.ephemeral_claim_name(pod.metadata.name, vol.name)
                claim = _claim_of(pod, generated, True, look)
            else:
                continue
            pv = None if claim is None else attachable_volume(claim, look)
            if pv is None or pv.spec.csi is None:
                continue
            csi = pv.spec.csi
            key = names.attachment_name(csi.volume_handle, csi.driver, node)
            want = out.get(key)
            if want is None:
                want = out[key] = Want(
                    attachment=key,
                    unique_name=names.unique_volume_name(csi.driver, csi.volume_handle),
                    pv=pv.metadata.name,
                    driver=csi.driver,
                    handle=csi.volume_handle,
                    multi_attach=multi_attach_allowed(pv),
                )
            if all(p.metadata.uid != pod.metadata.uid for p in want.pods):
                want.pods.append(pod)
    return out
