"""The storage admission plugins of the embedded API server, as kube-apiserver v1.32 runs them
by default.

- `admit_create` (mutating, on creates of the main resource, after defaulting and before the
  registry strategy): StorageObjectInUseProtection puts `kubernetes.io/pvc-protection` on a
  new claim and `kubernetes.io/pv-protection` on a new PersistentVolume; DefaultStorageClass
  gives a claim created without `spec.storageClassName` the default class (the newest class
  annotated `storageclass.kubernetes.io/is-default-class` or its beta twin "true", ties broken
  by name), or leaves it without one when there is no default.
- `validate_update` (validating, on updates of a claim's main resource, after validation):
  PersistentVolumeClaimResize refuses growing `spec.resources.requests.storage` of a claim
  that is not Bound, or whose StorageClass (the same before and after) lacks
  `allowVolumeExpansion: true`, with upstream's 403 messages.

Called by `operations`; reads StorageClasses from the store.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from kcm_shared.apimachinery import quantity

from kcm_apiserver import errors
from kcm_apiserver.registry import ResourceType
from kcm_apiserver.store import Obj, Store

PVC_FINALIZER = "kubernetes.io/pvc-protection"
PV_FINALIZER = "kubernetes.io/pv-protection"
_FINALIZERS = {"persistentvolumeclaims": PVC_FINALIZER, "persistentvolumes": PV_FINALIZER}
_DEFAULT_CLASS = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)
CLASSES_KEY = "storage.k8s.io/storageclasses"


def admit_create(store: Store, rt: ResourceType, obj: Obj) -> None:
    if rt.group != "":
        return
    finalizer = _FINALIZERS.get(rt.resource)
    if finalizer is None:
        return
    meta = obj.setdefault("metadata", {})
    finalizers = meta.setdefault("finalizers", [])
    if finalizer not in finalizers:
        finalizers.append(finalizer)
    if rt.resource == "persistentvolumeclaims":
        spec = obj.setdefault("spec", {})
        if spec.get("storageClassName") is None:
            default = default_class(store.list(CLASSES_KEY, None))
            if default is not None:
                spec["storageClassName"] = default


def _created(obj: Obj) -> dt.datetime:
    stamp = str(obj.get("metadata", {}).get("creationTimestamp") or "")
    try:
        return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return dt.datetime.min.replace(tzinfo=dt.UTC)


def default_class(classes: list[Obj]) -> str | None:
    """The name of the default StorageClass: the newest marked default, then the first by name."""
    marked = [c for c in classes if any(_annotations(c).get(a) == "true" for a in _DEFAULT_CLASS)]
    if not marked:
        return None
    newest = max(_created(c) for c in marked)
    return str(min(c["metadata"]["name"] for c in marked if _created(c) == newest))


def _annotations(obj: Obj) -> dict[str, Any]:
    return obj.get("metadata", {}).get("annotations") or {}


def _storage_request(claim: Obj) -> quantity.Quantity:
    requests = ((claim.get("spec") or {}).get("resources") or {}).get("requests") or {}
    return quantity.parse(requests.get("storage", "0"))


def validate_update(store: Store, rt: ResourceType, new: Obj, old: Obj, subresource: str) -> None:
    if (rt.group, rt.resource) != ("", "persistentvolumeclaims") or subresource:
        return
    try:
        if _storage_request(new) <= _storage_request(old):
            return
    except quantity.QuantityError:
        return  # a malformed request is validation's to refuse
    name = new["metadata"]["name"]
    if (old.get("status") or {}).get("phase") != "Bound":
        raise errors.forbidden("", rt.resource, name, "Only bound persistent volume claims can be expanded")
    if not _allows_resize(store, new, old):
        raise errors.forbidden(
            "",
            rt.resource,
            name,
            "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc "
            "must support resize",
        )


def _claim_class(claim: Obj) -> str:
    return str((claim.get("spec") or {}).get("storageClassName") or "")


def _allows_resize(store: Store, new: Obj, old: Obj) -> bool:
    name = _claim_class(new)
    if not name or name != _claim_class(old):
        return False
    sc = store.get(CLASSES_KEY, "", name)
    return sc is not None and sc.get("allowVolumeExpansion") is True
