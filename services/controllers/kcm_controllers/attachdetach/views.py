"""What the attach/detach controller reads of each resource it caches; decoded by the runtime,
read by `desired`, `plan` and `controller`."""

from __future__ import annotations

import msgspec
from kcm_shared.apimachinery import codec
from kcm_shared.controllerutil import podvolumes

MANAGED_ANNOTATION = "volumes.kubernetes.io/controller-managed-attach-detach"
OUT_OF_SERVICE_TAINT = "node.kubernetes.io/out-of-service"


# Pods are read as every volume controller reads them (`controllerutil.podvolumes`).
PodView = podvolumes.PodView


class ClaimSpec(codec.View):
    volume_name: str = ""


class ClaimStatus(codec.View):
    phase: str = ""


class ClaimView(codec.Meta):
    spec: ClaimSpec = msgspec.field(default_factory=ClaimSpec)
    status: ClaimStatus = msgspec.field(default_factory=ClaimStatus)


class CSISource(codec.View):
    driver: str = ""
    volume_handle: str = ""


class ClaimRef(codec.View):
    namespace: str = ""
    name: str = ""
    uid: str = ""


class VolumeSpec(codec.View):
    csi: CSISource | None = None
    claim_ref: ClaimRef | None = None
    access_modes: list[str] = msgspec.field(default_factory=list)


class VolumeView(codec.Meta):
    spec: VolumeSpec = msgspec.field(default_factory=VolumeSpec)


class DriverSpec(codec.View):
    attach_required: bool | None = None


class DriverView(codec.Meta):
    spec: DriverSpec = msgspec.field(default_factory=DriverSpec)


class AttachmentSource(codec.View):
    persistent_volume_name: str | None = None


class AttachmentSpec(codec.View):
    attacher: str = ""
    node_name: str = ""
    source: AttachmentSource = msgspec.field(default_factory=AttachmentSource)


class AttachError(codec.View):
    message: str = ""


class AttachmentStatus(codec.View):
    attached: bool = False
    attach_error: AttachError | None = None


class AttachmentView(codec.Meta):
    spec: AttachmentSpec = msgspec.field(default_factory=AttachmentSpec)
    status: AttachmentStatus = msgspec.field(default_factory=AttachmentStatus)


class Taint(codec.View):
    key: str = ""
    effect: str = ""


class NodeSpec(codec.View):
    taints: list[Taint] = msgspec.field(default_factory=list)


class Condition(codec.View):
    type: str = ""
    status: str = ""


class AttachedVolume(codec.View):
    name: str = ""
    device_path: str = ""


class NodeStatus(codec.View):
    conditions: list[Condition] = msgspec.field(default_factory=list)
    volumes_attached: list[AttachedVolume] = msgspec.field(default_factory=list)
    volumes_in_use: list[str] = msgspec.field(default_factory=list)


class NodeView(codec.Meta):
    spec: NodeSpec = msgspec.field(default_factory=NodeSpec)
    status: NodeStatus = msgspec.field(default_factory=NodeStatus)


def is_managed(node: NodeView) -> bool:
    """The kubelet asked the controller to attach and detach for it (upstream accepts only
    the value "true", case-insensitively)."""
    return node.metadata.annotations.get(MANAGED_ANNOTATION, "").lower() == "true"


def is_healthy(node: NodeView) -> bool:
    """nodeutil.IsNodeReady: its Ready condition is True."""
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)


def has_out_of_service_taint(node: NodeView) -> bool:
    return any(t.key == OUT_OF_SERVICE_TAINT for t in node.spec.taints)
