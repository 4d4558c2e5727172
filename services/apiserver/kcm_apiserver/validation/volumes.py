"""Validation of PersistentVolumeClaims and PersistentVolumes, after upstream's
pkg/apis/core/validation (ValidatePersistentVolumeClaim(Update), ValidatePersistentVolume(Update)).

- A claim needs access modes (each a supported one), a positive `resources.requests.storage`
  and a supported volume mode. Once created its spec is fixed except a `volumeName` set once
  (the binder's) and, for a Bound claim, `resources.requests.storage`, which may not shrink
  (RecoverVolumeExpansionFailure is off in 1.32).
- A volume needs access modes, a capacity and one volume source; the source and the volume
  mode are fixed once created.

Messages are upstream's; where upstream appends a `cmp.Diff` of Go structs to a message this
server ends the message before it (docs/apiserver.md). Callers: the dispatch in
`validation/__init__.py`.
"""

from __future__ import annotations

import copy
from typing import Any

from kcm_shared.apimachinery import quantity

from .fielderrors import Causes, Obj, as_dict, as_list, semantic

ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")
VOLUME_MODES = ("Block", "Filesystem")
RECLAIM_POLICIES = ("Delete", "Recycle", "Retain")
# The fields of upstream's PersistentVolumeSource: a volume has exactly one.
VOLUME_SOURCES = (
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cephfs",
    "cinder",
    "csi",
    "fc",
    "flexVolume",
    "flocker",
    "gcePersistentDisk",
    "glusterfs",
    "hostPath",
    "iscsi",
    "local",
    "nfs",
    "photonPersistentDisk",
    "portworxVolume",
    "quobyte",
    "rbd",
    "scaleIO",
    "storageos",
    "vsphereVolume",
)


def _access_modes(c: Causes, spec: Obj, detail: str) -> None:
    modes = as_list(spec.get("accessModes"))
    if not modes:
        c.required("spec.accessModes", detail)
    for mode in modes:
        if mode not in ACCESS_MODES:
            c.not_supported("spec.accessModes", mode, ACCESS_MODES)


def _volume_mode(c: Causes, spec: Obj) -> None:
    mode = spec.get("volumeMode")
    if mode is not None and mode not in VOLUME_MODES:
        c.not_supported("spec.volumeMode", mode, VOLUME_MODES)


def _storage_request(spec: Obj) -> Any:
    return as_dict(as_dict(spec.get("resources")).get("requests")).get("storage")


def _claim_spec(c: Causes, spec: Obj) -> None:
    _access_modes(c, spec, "at least 1 access mode is required")
    path = "spec.resources[storage]"
    value = _storage_request(spec)
    if value is None:
        c.required(path, "")
    else:
        try:
            amount = quantity.parse(value)
        except quantity.QuantityError as exc:
            c.invalid(path, value, str(exc))
        else:
            if amount.sign() <= 0:
                c.invalid(path, str(amount), "must be greater than zero")
    _volume_mode(c, spec)


def _quantity_or_none(value: Any) -> quantity.Quantity | None:
    try:
        return quantity.parse(value) if value is not None else None
    except quantity.QuantityError:
        return None


def validate_persistent_volume_claim(c: Causes, obj: Obj, old: Obj | None) -> None:
    spec = as_dict(obj.get("spec"))
    _claim_spec(c, spec)
    if old is None:
        return
    old_spec = as_dict(old.get("spec"))
    before, after = copy.deepcopy(old_spec), copy.deepcopy(spec)
    if not old_spec.get("volumeName"):
        # The binder sets volumeName once.
        before["volumeName"] = after.get("volumeName")
    if as_dict(obj.get("status")).get("phase") == "Bound" and isinstance(after.get("resources"), dict):
        requests = as_dict(after["resources"].get("requests"))
        if "storage" in requests or _storage_request(old_spec) is not None:
            after["resources"] = {
                **after["resources"],
                "requests": {**requests, "storage": _storage_request(old_spec)},
            }
    if semantic(before) != semantic(after):
        c.forbidden(
            "spec",
            "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
        )
    new_size, old_size = (
        _quantity_or_none(_storage_request(spec)),
        _quantity_or_none(_storage_request(old_spec)),
    )
    if new_size is not None and old_size is not None and new_size < old_size:
        # RecoverVolumeExpansionFailure (beta, on in 1.32): a request may come back down, to
        # recover from a failed expansion, but never to the capacity the claim already has.
        capacity = _quantity_or_none(as_dict(as_dict(old.get("status")).get("capacity")).get("storage"))
        if capacity is None or new_size <= capacity:
            c.forbidden("spec.resources.requests.storage", "field can not be less than status.capacity")
    c.immutable("volumeMode", spec.get("volumeMode"), old_spec.get("volumeMode"))


def validate_persistent_volume(c: Causes, obj: Obj, old: Obj | None) -> None:
    spec = as_dict(obj.get("spec"))
    _access_modes(c, spec, "")
    if not as_dict(spec.get("capacity")):
        c.required("spec.capacity", "")
    sources = [name for name in VOLUME_SOURCES if spec.get(name) is not None]
    if not sources:
        c.required("spec", "must specify a volume type")
    elif len(sources) > 1:
        c.forbidden(f"spec.{sources[1]}", "may not specify more than 1 volume type")
    policy = spec.get("persistentVolumeReclaimPolicy")
    if policy is not None and policy not in RECLAIM_POLICIES:
        c.not_supported("spec.persistentVolumeReclaimPolicy", policy, RECLAIM_POLICIES)
    _volume_mode(c, spec)
    if old is None:
        return
    old_spec = as_dict(old.get("spec"))
    if semantic({k: spec.get(k) for k in VOLUME_SOURCES}) != semantic(
        {k: old_spec.get(k) for k in VOLUME_SOURCES}
    ):
        c.forbidden("spec.persistentvolumesource", "spec.persistentvolumesource is immutable after creation")
    c.immutable("volumeMode", spec.get("volumeMode"), old_spec.get("volumeMode"))
