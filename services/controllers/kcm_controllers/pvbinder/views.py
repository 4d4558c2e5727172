"""What the binder reads of PersistentVolumes, claims and StorageClasses, and the
annotation names it shares with the scheduler and the external provisioners. Pods it reads
through the volume controllers' shared view (`controllerutil.podvolumes`).

Upstream k8s.io/component-helpers/storage/volume (pv_helpers.go, helpers.go) for the names;
read by `matching` and `controller`.
"""

from __future__ import annotations

from typing import Any

import msgspec
from kcm_shared.apimachinery import codec

ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_DYNAMICALLY_PROVISIONED = "pv.kubernetes.io/provisioned-by"
ANN_STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
ANN_BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
ANN_DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
ANN_BETA_DEFAULT_CLASS = "storageclass.beta.kubernetes.io/is-default-class"

AVAILABLE, BOUND, RELEASED, FAILED = "Available", "Bound", "Released", "Failed"
PENDING, LOST = "Pending", "Lost"
RETAIN, DELETE, RECYCLE = "Retain", "Delete", "Recycle"
FILESYSTEM = "Filesystem"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"


class VolumeSpec(codec.View):
    capacity: dict[str, Any] = msgspec.field(default_factory=dict)
    access_modes: list[str] = msgspec.field(default_factory=list)
    claim_ref: codec.ObjectReference | None = None
    persistent_volume_reclaim_policy: str = ""
    storage_class_name: str = ""
    volume_mode: str | None = None
    # Only whether it is set: a CSI volume's deleter is always external (upstream
    # findDeletablePlugin).
    csi: dict[str, Any] | None = None


class VolumeStatus(codec.View):
    phase: str = ""
    message: str = ""


class VolumeView(codec.Meta):
    spec: VolumeSpec = msgspec.field(default_factory=VolumeSpec)
    status: VolumeStatus = msgspec.field(default_factory=VolumeStatus)


class ClaimResources(codec.View):
    requests: dict[str, Any] = msgspec.field(default_factory=dict)


class ClaimSpec(codec.View):
    access_modes: list[str] = msgspec.field(default_factory=list)
    selector: dict[str, Any] | None = None
    resources: ClaimResources = msgspec.field(default_factory=ClaimResources)
    volume_name: str = ""
    storage_class_name: str | None = None
    volume_mode: str | None = None


class ClaimStatus(codec.View):
    phase: str = ""
    access_modes: list[str] | None = None
    capacity: dict[str, Any] | None = None


class ClaimView(codec.Meta):
    spec: ClaimSpec = msgspec.field(default_factory=ClaimSpec)
    status: ClaimStatus = msgspec.field(default_factory=ClaimStatus)


class ClassView(codec.Meta):
    provisioner: str = ""
    volume_binding_mode: str | None = None


def claim_key(ref: codec.ObjectReference) -> str:
    """upstream claimrefToClaimKey."""
    return f"{ref.namespace}/{ref.name}"
