"""The StatefulSet view and the pure parts of its sync (upstream stateful_set_utils.go and the
status helpers of stateful_set_control.go).

Identity: a pod's ordinal and parent come from its name (`<set>-<ordinal>`); `new_pod` builds
the pod of one ordinal from a template (the template's metadata, the labels
`statefulset.kubernetes.io/pod-name`, `apps.kubernetes.io/pod-index` (PodIndexLabel, on by
default in 1.32) and `controller-revision-hash`, hostname and subdomain, a volume per claim
template); `new_claims` the PersistentVolumeClaims `<template>-<set>-<ordinal>`.
Retention: `claim_owner_up_to_date` and `claim_owner_refs` are upstream's
isClaimOwnerUpToDate / updateClaimOwnerRefForSetAndPod (the set controls a claim for
whenDeleted=Delete, the pod of a condemned ordinal for whenScaled=Delete).
Revisions: `revision_data` is upstream's getPatch (the template under `$patch: replace`, as
canonical JSON: sorted keys, as Go's json.Marshal of a map writes them) and
`template_of_revision` its ApplyRevision, which only ever restores the template.
Status: `replica_status`, `complete_rolling_update` and `inconsistent_status`.
No I/O here: `control.py` calls these and the unit tests drive them with upstream's cases.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
from kcm_shared.apimachinery import codec, intstr
from kcm_shared.controllerutil import controllerref, podcontrol, podranking

API_VERSION = "apps/v1"
KIND = "StatefulSet"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
REVISION_LABEL = "controller-revision-hash"  # apps/v1 StatefulSetRevisionLabel
RETAIN = "Retain"
DELETE = "Delete"
PARALLEL = "Parallel"
ROLLING_UPDATE = "RollingUpdate"
ON_DELETE = "OnDelete"

_POD_NAME = re.compile(r"^(.*)-([0-9]+)$", re.DOTALL)
_INT32_MAX = 2**31 - 1


def _raw_null() -> msgspec.Raw:
    return msgspec.Raw(b"null")


class RollingUpdate(codec.View):
    partition: int = 0
    max_unavailable: int | str | None = None  # read only with MaxUnavailableStatefulSet on


class UpdateStrategy(codec.View):
    type: str = ROLLING_UPDATE
    rolling_update: RollingUpdate | None = None


class RetentionPolicy(codec.View):
    when_deleted: str = RETAIN
    when_scaled: str = RETAIN


class Ordinals(codec.View):
    start: int = 0


class StatefulSetSpec(codec.View):
    replicas: int = 1
    selector: dict[str, Any] | None = None
    template: msgspec.Raw = msgspec.field(default_factory=_raw_null)
    service_name: str = ""
    pod_management_policy: str = "OrderedReady"
    update_strategy: UpdateStrategy = msgspec.field(default_factory=UpdateStrategy)
    revision_history_limit: int = 10
    min_ready_seconds: int = 0
    volume_claim_templates: list[dict[str, Any]] = msgspec.field(default_factory=list)
    persistent_volume_claim_retention_policy: RetentionPolicy | None = None
    ordinals: Ordinals | None = None


class StatefulSetStatus(codec.View):
    observed_generation: int = 0
    replicas: int = 0
    ready_replicas: int = 0
    current_replicas: int = 0
    updated_replicas: int = 0
    available_replicas: int = 0
    current_revision: str = ""
    update_revision: str = ""
    collision_count: int | None = None


class StatefulSetView(codec.Meta):
    spec: StatefulSetSpec = msgspec.field(default_factory=StatefulSetSpec)
    status: StatefulSetStatus = msgspec.field(default_factory=StatefulSetStatus)


# --- ordinals and identity ---------------------------------------------------------------


def parent_and_ordinal(name: str) -> tuple[str, int]:
    """The set's name and the ordinal a pod name carries; ("", -1) when it carries none
    (getParentNameAndOrdinal: the ordinal must fit an int32)."""
    m = _POD_NAME.match(name)
    if m is None:
        return "", -1
    ordinal = int(m.group(2))
    return m.group(1), ordinal if ordinal <= _INT32_MAX else -1


def ordinal_of(name: str) -> int:
    return parent_and_ordinal(name)[1]


def is_member_of(sts: StatefulSetView, pod_name: str) -> bool:
    return parent_and_ordinal(pod_name)[0] == sts.metadata.name


def start_ordinal(sts: StatefulSetView) -> int:
    return sts.spec.ordinals.start if sts.spec.ordinals is not None else 0


def end_ordinal(sts: StatefulSetView) -> int:
    """The last ordinal of the set's replicas (inclusive)."""
    return start_ordinal(sts) + sts.spec.replicas - 1


def in_ordinal_range(sts: StatefulSetView, ordinal: int) -> bool:
    return start_ordinal(sts) <= ordinal <= end_ordinal(sts)


def pod_name(sts: StatefulSetView, ordinal: int) -> str:
    return f"{sts.metadata.name}-{ordinal}"


def claim_name(template_name: str, sts: StatefulSetView, ordinal: int) -> str:
    return f"{template_name}-{sts.metadata.name}-{ordinal}"


def identity_labels(sts: StatefulSetView, ordinal: int) -> dict[str, str]:
    """The labels updateIdentity sets on the pod of `ordinal`."""
    return {POD_NAME_LABEL: pod_name(sts, ordinal), POD_INDEX_LABEL: str(ordinal)}


def identity_matches(sts: StatefulSetView, pod: podranking.PodView) -> bool:
    """identityMatches: the pod's name, namespace and pod-name label are the set's."""
    m = pod.metadata
    parent, ordinal = parent_and_ordinal(m.name)
    return (
        ordinal >= 0
        and parent == sts.metadata.name
        and m.namespace == sts.metadata.namespace
        and m.labels.get(POD_NAME_LABEL) == m.name
    )


# --- pods and claims -----------------------------------------------------------------------


def _template_name(template: Mapping[str, Any]) -> str:
    name = (template.get("metadata") or {}).get("name")
    return name if isinstance(name, str) else ""


def new_claims(sts: StatefulSetView, ordinal: int) -> list[dict[str, Any]]:
    """The claims of one ordinal, in template order (getPersistentVolumeClaims): each
    template's copy renamed, in the set's namespace, its labels plus the selector's matchLabels."""
    match_labels = (sts.spec.selector or {}).get("matchLabels") or {}
    claims = []
    for template in sts.spec.volume_claim_templates:
        claim = copy.deepcopy(template)
        claim.pop("status", None)
        meta = claim.setdefault("metadata", {})
        meta["name"] = claim_name(_template_name(template), sts, ordinal)
        meta["namespace"] = sts.metadata.namespace
        meta["labels"] = {**(meta.get("labels") or {}), **match_labels}
        claim["apiVersion"] = "v1"
        claim["kind"] = "PersistentVolumeClaim"
        claims.append(claim)
    return claims


def new_pod(sts: StatefulSetView, template: Mapping[str, Any], ordinal: int, revision: str) -> dict[str, Any]:
    """The pod of `ordinal` from `template` at `revision` (newStatefulSetPod + setPodRevision)."""
    name = pod_name(sts, ordinal)
    tmeta = template.get("metadata") or {}
    labels = {**(tmeta.get("labels") or {}), **identity_labels(sts, ordinal), REVISION_LABEL: revision}
    ref = controllerref.new_controller_ref(sts, API_VERSION, KIND)
    meta: dict[str, Any] = {
        "name": name,
        "namespace": sts.metadata.namespace,
        "generateName": podcontrol.pod_name_prefix(sts.metadata.name),
        "labels": labels,
        "ownerReferences": [msgspec.to_builtins(ref)],
    }
    if tmeta.get("annotations"):
        meta["annotations"] = dict(tmeta["annotations"])
    if tmeta.get("finalizers"):
        meta["finalizers"] = list(tmeta["finalizers"])
    spec = dict(template.get("spec") or {})
    spec["hostname"] = name
    if sts.spec.service_name:
        spec["subdomain"] = sts.spec.service_name
    claim_volumes = [
        {
            "name": _template_name(t),
            "persistentVolumeClaim": {"claimName": claim_name(_template_name(t), sts, ordinal)},
        }
        for t in sts.spec.volume_claim_templates
    ]
    if claim_volumes:
        # updateStorage: a claim replaces the template's volume of the same name.
        claimed = {v["name"] for v in claim_volumes}
        others = [v for v in spec.get("volumes") or [] if v.get("name") not in claimed]
        spec["volumes"] = claim_volumes + others
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def use_current_revision(sts: StatefulSetView, ordinal: int) -> bool:
    """Whether a missing pod of `ordinal` is made at the current revision rather than the
    update revision (newVersionedStatefulSetPod, keeping its operator precedence: a partition
    counts whatever the strategy type)."""
    strategy = sts.spec.update_strategy
    start = start_ordinal(sts)
    if strategy.rolling_update is not None:
        return ordinal < start + strategy.rolling_update.partition
    return strategy.type == ROLLING_UPDATE and ordinal < start + sts.status.current_replicas


# --- PVC retention ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Owner:
    """The set or a pod as an owner of claims: what matchesRef and hasOwnerRef compare."""

    api_version: str
    kind: str
    name: str
    uid: str


def set_owner(sts: StatefulSetView) -> Owner:
    return Owner(API_VERSION, KIND, sts.metadata.name, sts.metadata.uid)


def pod_owner(name: str, uid: str) -> Owner:
    return Owner("v1", "Pod", name, uid)


def retention_policy(sts: StatefulSetView) -> RetentionPolicy:
    return sts.spec.persistent_volume_claim_retention_policy or RetentionPolicy()


def _matches(ref: codec.OwnerReference, owner: Owner) -> bool:
    return ref.api_version == owner.api_version and ref.kind == owner.kind and ref.name == owner.name


def _has_ref(refs: Sequence[codec.OwnerReference], owner: Owner) -> bool:
    return any(r.uid == owner.uid for r in refs)


def _has_stale_ref(refs: Sequence[codec.OwnerReference], owner: Owner) -> bool:
    for ref in refs:
        if _matches(ref, owner):
            return ref.uid != owner.uid
    return False


def _has_unexpected_controller(
    refs: Sequence[codec.OwnerReference], policy: RetentionPolicy, sset: Owner, pod: Owner
) -> bool:
    if policy.when_scaled == RETAIN and policy.when_deleted == RETAIN:
        return False  # nothing of ours to set, so another controller is no conflict
    for ref in refs:
        if _matches(ref, sset):
            if ref.uid != sset.uid:
                return True  # a ref to an earlier set of the same name: leave it to the GC
            continue
        if _matches(ref, pod):
            if ref.uid != pod.uid:
                return True
            continue
        if ref.controller:
            return True
    return False


def claim_owner_up_to_date(
    refs: Sequence[codec.OwnerReference], sts: StatefulSetView, pod: Owner, ordinal: int
) -> bool:
    """isClaimOwnerUpToDate: whether a claim's ownerReferences already say what the policy
    wants (stale refs and foreign controllers count as up to date: such claims are left alone)."""
    sset = set_owner(sts)
    policy = retention_policy(sts)
    if _has_stale_ref(refs, sset) or _has_stale_ref(refs, pod):
        return True
    if _has_unexpected_controller(refs, policy, sset, pod):
        return not (_has_ref(refs, sset) or _has_ref(refs, pod))
    if any((r.uid in (sset.uid, pod.uid)) and not r.controller for r in refs):
        return False  # ours but not as controller: made by an earlier version, fix it
    has_set, has_pod = _has_ref(refs, sset), _has_ref(refs, pod)
    scaled_down = not in_ordinal_range(sts, ordinal)
    if policy.when_scaled == DELETE and policy.when_deleted == DELETE:
        return scaled_down != has_set and scaled_down == has_pod
    if policy.when_scaled == DELETE:
        return not has_set and scaled_down == has_pod
    if policy.when_deleted == DELETE:
        return has_set and not has_pod
    return not has_set and not has_pod


def _controller_ref(owner: Owner) -> codec.OwnerReference:
    return codec.OwnerReference(
        api_version=owner.api_version,
        kind=owner.kind,
        name=owner.name,
        uid=owner.uid,
        controller=True,
        block_owner_deletion=True,
    )


def claim_owner_refs(
    refs: Sequence[codec.OwnerReference], sts: StatefulSetView, pod: Owner, ordinal: int
) -> list[codec.OwnerReference]:
    """updateClaimOwnerRefForSetAndPod: the claim's ownerReferences with ours scrubbed and
    then added back as the policy says, each as a controller reference."""
    sset = set_owner(sts)
    policy = retention_policy(sts)
    unexpected = _has_unexpected_controller(refs, policy, sset, pod)
    kept = [r for r in refs if not (_matches(r, sset) or _matches(r, pod))]
    if unexpected:
        return kept
    scaled_down = not in_ordinal_range(sts, ordinal)
    wanted: list[Owner] = []
    if policy.when_scaled == DELETE and scaled_down:
        wanted.append(pod)
    elif policy.when_deleted == DELETE and (policy.when_scaled == RETAIN or not scaled_down):
        wanted.append(sset)
    for owner in wanted:
        if not any(r.uid == owner.uid for r in kept):
            kept.append(_controller_ref(owner))
    return kept


def claim_is_stale(refs: Sequence[codec.OwnerReference], pod: Owner) -> bool:
    """A claim still owned by an earlier pod of the same name (PodClaimIsStale's test)."""
    return _has_stale_ref(refs, pod)


# --- revisions -------------------------------------------------------------------------------


def canonical_json(value: Any) -> bytes:
    """JSON with sorted keys and no spaces, the bytes Go's json.Marshal writes for a map."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def revision_data(template: Mapping[str, Any]) -> bytes:
    """getPatch: a strategic merge patch that puts `template` back in place."""
    return canonical_json({"spec": {"template": {**template, "$patch": "replace"}}})


def template_of_revision(data: bytes) -> dict[str, Any]:
    """The pod template a revision's data restores (ApplyRevision, for the only field the
    patch holds); raises ValueError when the data holds none."""
    doc = json.loads(data)
    template = (doc.get("spec") or {}).get("template") if isinstance(doc, dict) else None
    if not isinstance(template, dict):
        raise ValueError("the revision's data holds no spec.template")
    return {k: v for k, v in template.items() if k != "$patch"}


# --- status ----------------------------------------------------------------------------------


def is_created(pod: podranking.PodView) -> bool:
    return pod.status.phase != ""


def is_terminating(pod: podranking.PodView) -> bool:
    return pod.metadata.deletion_timestamp is not None


def is_running_and_ready(pod: podranking.PodView) -> bool:
    return pod.status.phase == "Running" and podranking.is_pod_ready(pod)


def is_running_and_available(pod: podranking.PodView, min_ready_seconds: int, now: dt.datetime) -> bool:
    # Upstream's IsPodAvailable does not look at the phase: a ready pod is running.
    return podranking.is_pod_available(pod, min_ready_seconds, now)


def is_unavailable(pod: podranking.PodView, min_ready_seconds: int, now: dt.datetime) -> bool:
    return not podranking.is_pod_available(pod, min_ready_seconds, now) or is_terminating(pod)


def is_healthy(pod: podranking.PodView) -> bool:
    """Running, ready and not terminating (upstream's isHealthy)."""
    return is_running_and_ready(pod) and not is_terminating(pod)


def max_unavailable(sts: StatefulSetView) -> int:
    """How many of the set's pods a rolling update may have unavailable at once, at least 1
    (getStatefulSetMaxUnavailable: a percentage of spec.replicas rounded down); ValueError
    with upstream's wording for a malformed value."""
    rolling = sts.spec.update_strategy.rolling_update
    value = rolling.max_unavailable if rolling is not None and rolling.max_unavailable is not None else 1
    return max(1, intstr.scaled_value(value, sts.spec.replicas, round_up=False))


def revision_of(pod: podranking.PodView) -> str:
    return pod.metadata.labels.get(REVISION_LABEL, "")


@dataclass
class ReplicaCounts:
    replicas: int = 0
    ready: int = 0
    available: int = 0
    current: int = 0
    updated: int = 0


def replica_status(
    pods: Iterable[podranking.PodView],
    min_ready_seconds: int,
    current_revision: str,
    update_revision: str,
    now: dt.datetime,
) -> ReplicaCounts:
    """computeReplicaStatus over the created pods of `pods`."""
    counts = ReplicaCounts()
    for pod in pods:
        created = is_created(pod)
        if created:
            counts.replicas += 1
        if is_running_and_ready(pod):
            counts.ready += 1
            if is_running_and_available(pod, min_ready_seconds, now):
                counts.available += 1
        if created and not is_terminating(pod):
            revision = revision_of(pod)
            if revision == current_revision:
                counts.current += 1
            if revision == update_revision:
                counts.updated += 1
    return counts


def complete_rolling_update(sts: StatefulSetView, status: StatefulSetStatus) -> None:
    """completeRollingUpdate: once every replica is updated and ready, the update revision
    becomes the current one (in place on `status`)."""
    want = sts.spec.replicas
    if (
        sts.spec.update_strategy.type == ROLLING_UPDATE
        and status.updated_replicas == want
        and status.ready_replicas == want
        and status.replicas == want
    ):
        status.current_replicas = status.updated_replicas
        status.current_revision = status.update_revision


def inconsistent_status(sts: StatefulSetView, status: StatefulSetStatus) -> bool:
    """inconsistentStatus: whether `status` must be written (collisionCount included, which
    upstream's test leaves out but writes whenever it writes)."""
    old = sts.status
    return (
        status.observed_generation > old.observed_generation
        or status.replicas != old.replicas
        or status.current_replicas != old.current_replicas
        or status.ready_replicas != old.ready_replicas
        or status.updated_replicas != old.updated_replicas
        or status.current_revision != old.current_revision
        or status.available_replicas != old.available_replicas
        or status.update_revision != old.update_revision
        or (status.collision_count or 0) != (old.collision_count or 0)
    )


def status_patch(status: StatefulSetStatus) -> dict[str, Any]:
    """The merge patch of the status subresource: every field, zeroes included, as upstream's
    UpdateStatus sends the whole status. Unconditional: only this controller writes them."""
    return {
        "status": {
            "observedGeneration": status.observed_generation,
            "replicas": status.replicas,
            "readyReplicas": status.ready_replicas,
            "currentReplicas": status.current_replicas,
            "updatedReplicas": status.updated_replicas,
            "availableReplicas": status.available_replicas,
            "currentRevision": status.current_revision,
            "updateRevision": status.update_revision,
            "collisionCount": status.collision_count or 0,
        },
    }
