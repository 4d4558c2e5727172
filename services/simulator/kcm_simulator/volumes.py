"""Pure decisions of the simulated CSI driver `csi.sim.kcm.dev` and of upstream's volume binding.

- `claim_names` / `claim_keys`: the claims a pod uses (its persistentVolumeClaim volumes and
  the `<pod>-<volume>` claims of its generic ephemeral volumes).
- The external-provisioner's: `wants_provisioning` (a claim the PV binder handed to this
  driver, with its node chosen when the class waits for the first consumer), `new_volume`
  (the PV it creates: reclaim policy, mount options, parameters, topology from the class and
  the selected node) and `wants_deletion` (a Released PV of ours whose reclaim is Delete, or a
  deleted one still holding our finalizer).
- The external-resizer's and kubelet's: `wants_controller_resize`, `wants_node_resize`.
- The scheduler's VolumeBinding plugin: `unbound_immediate`, `volume_misfit` (PV node
  affinity of bound claims, allowedTopologies of claims still to be provisioned) and
  `claims_to_select` (the claims that get `volume.kubernetes.io/selected-node`).

Called by `csi.py` and `scheduler.py`; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from kcm_shared.apimachinery import quantity
from kcm_shared.apis import nodeaffinity

Obj = dict[str, Any]

DRIVER = "csi.sim.kcm.dev"
PROVISIONER_ANNOTATION = "volume.kubernetes.io/storage-provisioner"
BETA_PROVISIONER_ANNOTATION = "volume.beta.kubernetes.io/storage-provisioner"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
FINALIZER = "external-provisioner.volume.kubernetes.io/finalizer"
PROVISIONER_IDENTITY = "storage.kubernetes.io/csiProvisionerIdentity"
FSTYPE_PARAMETER = "csi.storage.k8s.io/fstype"
# The simulated driver's own parameter: CreateVolume fails with its value as the message.
FAIL_PARAMETER = "sim.kcm.dev/fail-provisioning"
ZONE_LABEL = "topology.kubernetes.io/zone"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
RESIZING = "Resizing"
FS_RESIZE_PENDING = "FileSystemResizePending"
FS_RESIZE_PENDING_MESSAGE = (
    "Waiting for user to (re-)start a pod to finish file system resize of volume on node."
)

# The scheduler's reasons, upstream's VolumeBinding plugin's words.
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
NODE_AFFINITY_CONFLICT = "node(s) had volume node affinity conflict"
NO_VOLUME_TO_BIND = "node(s) didn't find available persistent volumes to bind"


class ProvisioningError(Exception):
    """CreateVolume failed; the text follows `failed to provision volume with StorageClass "x": `."""


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _annotations(obj: Obj) -> Mapping[str, Any]:
    value = _meta(obj).get("annotations")
    return value if isinstance(value, dict) else {}


def key(obj: Obj) -> str:
    meta = _meta(obj)
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def claim_names(pod: Obj) -> list[str]:
    names = []
    pod_name = _meta(pod).get("name", "")
    for volume in pod.get("spec", {}).get("volumes") or []:
        source = volume.get("persistentVolumeClaim")
        if source:
            names.append(str(source.get("claimName", "")))
        elif volume.get("ephemeral"):
            names.append(f"{pod_name}-{volume.get('name', '')}")
    return names


def claim_keys(pod: Obj) -> list[str]:
    ns = _meta(pod).get("namespace", "")
    return [f"{ns}/{name}" for name in claim_names(pod)]


def storage(amounts: Any) -> Fraction:
    """The `storage` amount of a requests/capacity map; missing or malformed counts as zero."""
    if not isinstance(amounts, dict):
        return Fraction(0)
    try:
        return quantity.exact(amounts.get("storage", "0"))
    except ValueError:
        return Fraction(0)


def is_bound(claim: Obj) -> bool:
    return bool(claim.get("status", {}).get("phase") == "Bound")


def class_name(claim: Obj) -> str:
    return str(claim.get("spec", {}).get("storageClassName") or "")


def waits_for_consumer(storage_class: Obj | None) -> bool:
    return storage_class is not None and storage_class.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER


def volume_name_for(claim: Obj) -> str:
    """The external-provisioner's PV name: `pvc-<claim uid>`, so a repeated create is a 409."""
    return f"pvc-{_meta(claim).get('uid', '')}"


# -- external-provisioner ---------------------------------------------------------------------


def wants_provisioning(claim: Obj, storage_class: Obj | None) -> bool:
    """A claim handed to this driver (the binder's annotation), not bound to a volume, whose
    class is ours, with its node selected when the class waits for the first consumer."""
    annotations = _annotations(claim)
    handed = annotations.get(PROVISIONER_ANNOTATION) or annotations.get(BETA_PROVISIONER_ANNOTATION)
    if handed != DRIVER or _meta(claim).get("deletionTimestamp"):
        return False
    if claim.get("spec", {}).get("volumeName") or claim.get("status", {}).get("phase") not in (
        None,
        "",
        "Pending",
    ):
        return False
    if storage_class is None or storage_class.get("provisioner") != DRIVER:
        return False
    return not waits_for_consumer(storage_class) or bool(annotations.get(SELECTED_NODE))


def _topology(storage_class: Obj, node: Obj | None) -> dict[str, str] | None:
    """The segment the volume is made in: the selected node's zone (WaitForFirstConsumer), else
    the first allowed topology's first values, else none (reachable from every node)."""
    allowed = storage_class.get("allowedTopologies") or []
    if node is not None:
        labels = _meta(node).get("labels") or {}
        zone = labels.get(ZONE_LABEL)
        if allowed and not nodeaffinity_matches_terms(allowed, labels):
            raise ProvisioningError(
                f"rpc error: code = ResourceExhausted desc = node {_meta(node).get('name')} "
                "is outside the class's allowedTopologies"
            )
        return {ZONE_LABEL: str(zone)} if zone else None
    for term in allowed:
        segment = {
            str(expr.get("key")): str(expr["values"][0])
            for expr in term.get("matchLabelExpressions") or []
            if expr.get("values")
        }
        if segment:
            return segment
    return None


def nodeaffinity_matches_terms(terms: list[Obj], labels: Mapping[str, Any]) -> bool:
    """upstream's MatchTopologySelectorTerms: terms ORed, a term's expressions ANDed, each its
    label's value among the listed ones; no terms match every node."""
    if not terms:
        return True
    return any(
        all(
            labels.get(expr.get("key")) in (expr.get("values") or [])
            for expr in term.get("matchLabelExpressions") or []
        )
        for term in terms
    )


def new_volume(claim: Obj, storage_class: Obj, node: Obj | None, identity: str) -> Obj:
    """The PV the external-provisioner creates for `claim` once CreateVolume succeeded; raises
    ProvisioningError when the simulated CreateVolume fails."""
    parameters = {str(k): str(v) for k, v in (storage_class.get("parameters") or {}).items()}
    if FAIL_PARAMETER in parameters:
        raise ProvisioningError(f"rpc error: code = Internal desc = {parameters[FAIL_PARAMETER]}")
    segment = _topology(storage_class, node)
    spec = claim.get("spec", {})
    meta = _meta(claim)
    name = volume_name_for(claim)
    mode = spec.get("volumeMode") or "Filesystem"
    # The volume context the driver returns: its own parameters (the csi.storage.k8s.io/ ones
    # are the sidecar's, never passed on) and the provisioner's identity.
    context = {k: v for k, v in parameters.items() if not k.startswith("csi.storage.k8s.io/")}
    context[PROVISIONER_IDENTITY] = identity
    csi: Obj = {"driver": DRIVER, "volumeHandle": name, "volumeAttributes": context}
    if mode == "Filesystem" and parameters.get(FSTYPE_PARAMETER):
        csi["fsType"] = parameters[FSTYPE_PARAMETER]
    reclaim = storage_class.get("reclaimPolicy") or "Delete"
    pv_spec: Obj = {
        "accessModes": list(spec.get("accessModes") or []),
        "capacity": {"storage": (spec.get("resources") or {}).get("requests", {}).get("storage", "0")},
        "claimRef": {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "namespace": meta.get("namespace"),
            "name": meta.get("name"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "persistentVolumeReclaimPolicy": reclaim,
        "storageClassName": _meta(storage_class).get("name"),
        "volumeMode": mode,
        "csi": csi,
    }
    if storage_class.get("mountOptions"):
        pv_spec["mountOptions"] = list(storage_class["mountOptions"])
    if segment:
        expressions = [{"key": k, "operator": "In", "values": [v]} for k, v in sorted(segment.items())]
        pv_spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}}
    pv_meta: Obj = {"name": name, "annotations": {PROVISIONED_BY: DRIVER}}
    if reclaim == "Delete":
        pv_meta["finalizers"] = [FINALIZER]
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": pv_meta, "spec": pv_spec}


def is_ours(pv: Obj) -> bool:
    return (pv.get("spec", {}).get("csi") or {}).get("driver") == DRIVER


def wants_deletion(pv: Obj) -> bool:
    """A PV this provisioner made (`pv.kubernetes.io/provisioned-by`, as the external-provisioner
    checks: a static PV of the driver is not its to delete) to delete: Released with reclaim
    Delete, or deleted by someone while it still holds our finalizer (HonorPVReclaimPolicy)."""
    if not is_ours(pv) or _annotations(pv).get(PROVISIONED_BY) != DRIVER:
        return False
    if pv.get("spec", {}).get("persistentVolumeReclaimPolicy") != "Delete":
        return False
    if pv.get("status", {}).get("phase") == "Released":
        return True
    return bool(_meta(pv).get("deletionTimestamp")) and FINALIZER in (_meta(pv).get("finalizers") or [])


def without_finalizer(pv: Obj) -> list[str] | None:
    """The PV's finalizers less ours, or None when ours is not there."""
    finalizers = list(_meta(pv).get("finalizers") or [])
    if FINALIZER not in finalizers:
        return None
    return [f for f in finalizers if f != FINALIZER]


# -- external-resizer and the kubelet's node expansion ---------------------------------------


def has_condition(claim: Obj, kind: str) -> bool:
    return any(c.get("type") == kind for c in claim.get("status", {}).get("conditions") or [])


def wants_controller_resize(claim: Obj, pv: Obj | None) -> bool:
    """A Bound claim of ours asking for more than its PV holds."""
    if pv is None or not is_ours(pv) or not is_bound(claim):
        return False
    requested = storage((claim.get("spec", {}).get("resources") or {}).get("requests"))
    return requested > storage(claim.get("status", {}).get("capacity")) and requested > storage(
        pv.get("spec", {}).get("capacity")
    )


def needs_node_expansion(pv: Obj) -> bool:
    """A filesystem must be grown on the node too; a raw block volume needs nothing there."""
    return (pv.get("spec", {}).get("volumeMode") or "Filesystem") == "Filesystem"


def wants_node_resize(claim: Obj, pv: Obj | None) -> bool:
    """The resizer grew the PV and left the filesystem to the kubelet."""
    return pv is not None and is_ours(pv) and has_condition(claim, FS_RESIZE_PENDING)


def condition(kind: str, now: str, message: str = "") -> Obj:
    out: Obj = {"type": kind, "status": "True", "lastTransitionTime": now}
    if message:
        out["message"] = message
    return out


def other_conditions(claim: Obj, *dropped: str) -> list[Obj]:
    return [c for c in claim.get("status", {}).get("conditions") or [] if c.get("type") not in dropped]


# -- the scheduler's VolumeBinding plugin ------------------------------------------------------


def unbound_immediate(claims: list[Obj], classes: Mapping[str, Obj]) -> bool:
    """Some claim is not Bound and its class binds at once: the binder, not a node, decides."""
    return any(not is_bound(c) and not waits_for_consumer(classes.get(class_name(c))) for c in claims)


def volume_misfit(
    claims: list[Obj], pvs: Mapping[str, Obj], classes: Mapping[str, Obj], node: Obj
) -> str | None:
    """Why the node cannot have these claims' volumes, or None: a bound claim's PV node
    affinity, or an unbound WaitForFirstConsumer claim's class that cannot provision there."""
    for claim in claims:
        if is_bound(claim):
            pv = pvs.get(str(claim.get("spec", {}).get("volumeName") or ""))
            required = ((pv or {}).get("spec", {}).get("nodeAffinity") or {}).get("required")
            terms = (required or {}).get("nodeSelectorTerms") or []
            if terms and not any(nodeaffinity.term_matches(term, node) for term in terms):
                return NODE_AFFINITY_CONFLICT
            continue
        storage_class = classes.get(class_name(claim)) or {}
        if storage_class.get("provisioner") in (None, "", NO_PROVISIONER):
            return NO_VOLUME_TO_BIND
        labels = _meta(node).get("labels") or {}
        if not nodeaffinity_matches_terms(storage_class.get("allowedTopologies") or [], labels):
            return NO_VOLUME_TO_BIND
    return None


def claims_to_select(claims: list[Obj], node: str) -> list[Obj]:
    """The unbound claims still without this node as their selected one."""
    return [c for c in claims if not is_bound(c) and _annotations(c).get(SELECTED_NODE) != node]
