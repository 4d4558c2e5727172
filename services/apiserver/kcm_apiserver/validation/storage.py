"""Validation of storage.k8s.io kinds, after upstream's pkg/apis/storage/validation.

- StorageClass: a provisioner, a supported reclaim policy and binding mode; once created its
  provisioner, parameters, reclaimPolicy and volumeBindingMode are fixed (ValidateStorageClassUpdate).
- CSIDriver: `spec.attachRequired` is fixed once created (ValidateCSIDriverUpdate; upstream's
  field path is `spec.attachedRequired`, kept as it is).
- VolumeAttachment (ValidateVolumeAttachment with the v1 checks of ValidateVolumeAttachmentV1,
  ValidateVolumeAttachmentUpdate): an attacher that is a CSI driver name, exactly one source
  (a PV name that is a valid one; an inline spec is not checked further here), a valid node
  name, bounded status metadata and error messages; the spec is
  fixed once created (the status goes through `/status`, the strategies keep the rest).
- CSINode (ValidateCSINode, ValidateCSINodeUpdate with long node IDs allowed, as 1.32's
  strategy does): each driver a CSI driver name, once, with a node ID of at most 256
  characters, a non-negative allocatable count and unique, qualified topology keys; a
  driver's entry is fixed once listed (drivers may still be added or removed).

Callers: the dispatch in `validation/__init__.py`.
"""

from __future__ import annotations

from typing import Any

from kcm_shared.apimachinery.selectors import is_dns1123_subdomain, is_qualified_name

from .fielderrors import IMMUTABLE, Causes, Obj, as_dict, as_list, is_int, semantic

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


CSI_DRIVER_NAME_MAX = 63
CSI_NODE_ID_MAX = 256  # csiNodeIDLongerMaxLength: 1.32 allows long node IDs
MAX_ATTACHMENT_METADATA = 256 * 1024
MAX_VOLUME_ERROR_MESSAGE = 1024


def _csi_driver_name(c: Causes, name: Any, path: str) -> None:
    """core ValidateCSIDriverName."""
    text = name if isinstance(name, str) else ""
    if not text:
        c.required(path, "")
    if len(text) > CSI_DRIVER_NAME_MAX:
        c.too_long(path, CSI_DRIVER_NAME_MAX)
    for msg in is_dns1123_subdomain(text.lower()):
        c.invalid(path, text, msg)


def _volume_error(c: Causes, err: Any, path: str) -> None:
    if not isinstance(err, dict):
        return
    if len(str(err.get("message") or "")) > MAX_VOLUME_ERROR_MESSAGE:
        # Upstream reports the metadata limit here, not the message's own.
        c.too_long(f"{path}.message", MAX_ATTACHMENT_METADATA)


def validate_volume_attachment(c: Causes, obj: Obj, old: Obj | None) -> None:
    _volume_attachment(c, obj)
    if old is None:
        # ValidateVolumeAttachmentV1, on create only (the strategy's v1 check).
        spec = as_dict(obj.get("spec"))
        _csi_driver_name(c, spec.get("attacher") or "", "spec.attacher")
        pv = as_dict(spec.get("source")).get("persistentVolumeName")
        if isinstance(pv, str):
            for msg in is_dns1123_subdomain(pv):
                c.invalid("spec.source.persistentVolumeName", pv, msg)
        return
    # The update strategies validate the object, then ValidateVolumeAttachmentUpdate, which
    # validates it again: kube-apiserver lists each such cause twice.
    _volume_attachment(c, obj)
    if semantic(as_dict(obj.get("spec"))) != semantic(as_dict(old.get("spec"))):
        # Upstream prints the Go struct (with pointer addresses) as the value.
        c.invalid_omitted("spec", IMMUTABLE)


def _volume_attachment(c: Causes, obj: Obj) -> None:
    """ValidateVolumeAttachment less the metadata (checked for every kind)."""
    spec = as_dict(obj.get("spec"))
    attacher = spec.get("attacher") or ""
    if not attacher:
        c.required("spec.attacher", "")
    source = as_dict(spec.get("source"))
    pv, inline = source.get("persistentVolumeName"), source.get("inlineVolumeSpec")
    exactly_one = "must specify exactly one of inlineVolumeSpec and persistentVolumeName"
    if pv is None and inline is None:
        c.required("spec.source", exactly_one)
    elif pv is not None and inline is not None:
        c.forbidden("spec.source", exactly_one)
    elif pv is not None and not pv:
        c.required("spec.source.persistentVolumeName", "must specify non empty persistentVolumeName")
    node = spec.get("nodeName") or ""
    for msg in is_dns1123_subdomain(str(node)):
        c.invalid("spec.nodeName", node, msg)
    status = as_dict(obj.get("status"))
    metadata = as_dict(status.get("attachmentMetadata"))
    if sum(len(str(k)) + len(str(v)) for k, v in metadata.items()) > MAX_ATTACHMENT_METADATA:
        c.too_long("status.attachmentMetadata", MAX_ATTACHMENT_METADATA)
    _volume_error(c, status.get("attachError"), "status.attachError")
    _volume_error(c, status.get("detachError"), "status.detachError")


def validate_csi_node(c: Causes, obj: Obj, old: Obj | None) -> None:
    drivers = as_list(as_dict(obj.get("spec")).get("drivers"))
    seen: set[str] = set()
    for i, raw in enumerate(drivers):
        driver, path = as_dict(raw), f"spec.drivers[{i}]"
        name = driver.get("name") or ""
        _csi_driver_name(c, name, f"{path}.name")
        node_id = str(driver.get("nodeID") or "")
        if not node_id:
            c.required(f"{path}.nodeID", "")
        if len(node_id) > CSI_NODE_ID_MAX:
            c.invalid(f"{path}.nodeID", node_id, f"must be {CSI_NODE_ID_MAX} characters or less")
        count = as_dict(driver.get("allocatable")).get("count")
        if is_int(count) and count < 0:
            c.invalid(f"{path}.allocatable.count", count, "must be greater than or equal to 0")
        if name in seen:
            c.duplicate(f"{path}.name", name)
        seen.add(name)
        keys: set[str] = set()
        for key in as_list(driver.get("topologyKeys")):
            text = str(key)
            if not text:
                c.required(path, "")
            if text in keys:
                c.duplicate(path, text)
            keys.add(text)
            for msg in is_qualified_name(text):
                c.invalid(path, text, msg)
    if old is None:
        return
    before = {as_dict(d).get("name"): d for d in as_list(as_dict(old.get("spec")).get("drivers"))}
    for raw in drivers:
        prior = before.get(as_dict(raw).get("name"))
        if prior is not None and semantic(raw) != semantic(prior):
            # 1.32's field path is the type's name, and the value the Go struct.
            c.invalid_omitted("CSINodeDriver", IMMUTABLE)
