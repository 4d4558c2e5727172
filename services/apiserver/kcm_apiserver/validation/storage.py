"""Validation of storage.k8s.io kinds, after upstream's pkg/apis/storage/validation.

- StorageClass: a provisioner, a supported reclaim policy and binding mode; once created its
  provisioner, parameters, reclaimPolicy and volumeBindingMode are fixed (ValidateStorageClassUpdate).
- CSIDriver: `spec.attachRequired` is fixed once created (ValidateCSIDriverUpdate; upstream's
  field path is `spec.attachedRequired`, kept as it is).

Callers: the dispatch in `validation/__init__.py`.
"""

from __future__ import annotations

from .fielderrors import Causes, Obj, as_dict, semantic

RECLAIM_POLICIES = ("Delete", "Retain")
BINDING_MODES = ("Immediate", "WaitForFirstConsumer")


def validate_storage_class(c: Causes, obj: Obj, old: Obj | None) -> None:
    if not obj.get("provisioner"):
        c.required("provisioner", "")
    policy = obj.get("reclaimPolicy")
    if policy is not None and policy not in RECLAIM_POLICIES:
        c.not_supported("reclaimPolicy", policy, RECLAIM_POLICIES)
    mode = obj.get("volumeBindingMode")
    if mode is not None and mode not in BINDING_MODES:
        c.not_supported("volumeBindingMode", mode, BINDING_MODES)
    if old is None:
        return
    if semantic(obj.get("parameters")) != semantic(old.get("parameters")):
        c.forbidden("parameters", "updates to parameters are forbidden.")
    if obj.get("provisioner") != old.get("provisioner"):
        c.forbidden("provisioner", "updates to provisioner are forbidden.")
    if obj.get("reclaimPolicy") != old.get("reclaimPolicy"):
        c.forbidden("reclaimPolicy", "updates to reclaimPolicy are forbidden.")
    c.immutable("volumeBindingMode", mode, old.get("volumeBindingMode"))


def validate_csi_driver(c: Causes, obj: Obj, old: Obj | None) -> None:
    if old is None:
        return
    new_spec, old_spec = as_dict(obj.get("spec")), as_dict(old.get("spec"))
    c.immutable("spec.attachedRequired", new_spec.get("attachRequired"), old_spec.get("attachRequired"))
