"""The cached view of a ReplicaSet or ReplicationController and the pure parts of their sync
(upstream replica_set_utils.go, which upstream also runs over RCs through conversion).

`calculate_status` counts the claimed active pods into replicas / fullyLabeledReplicas /
readyReplicas / availableReplicas and sets or clears the `ReplicaFailure` condition after a
failed or successful manage step; `status_unchanged` is upstream's test for skipping the
status write; `status_patch` is the body written to the status subresource;
`pods_to_delete` picks the pods a scale-down removes (getPodsToDelete) and
`deletion_age_ratios` measures that choice for the metric; `requeue_after`
says when availability must be looked at again. No I/O here: the sync in
`kcm_shared.controllerutil.replicaset.replicamanager` calls these, and the unit tests drive them with upstream's cases.
Both kinds decode into `ReplicaSetView`: their status has the same fields and conditions;
`spec.selector` holds a LabelSelector for a ReplicaSet and a plain label map for an RC, which
the manager's adapter reads.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import msgspec

from kcm_shared.apimachinery import codec
from kcm_shared.controllerutil import podcontrol, podranking

REPLICA_FAILURE = "ReplicaFailure"


class ReplicaSetSpec(codec.View):
    replicas: int = 1  # the API server defaults a missing count to 1
    min_ready_seconds: int = 0
    # A LabelSelector (ReplicaSet) or a label map (ReplicationController): see the adapters.
    selector: dict[str, Any] | None = None
    template: podcontrol.PodTemplate = msgspec.field(default_factory=podcontrol.PodTemplate)


class ReplicaSetCondition(codec.View):
    type: str = ""
    status: str = ""
    # Kept as the server's text so a condition written back is byte-for-byte what was read.
    last_transition_time: str | None = None
    reason: str = ""
    message: str = ""


class ReplicaSetStatus(codec.View):
    replicas: int = 0
    fully_labeled_replicas: int = 0
    ready_replicas: int = 0
    available_replicas: int = 0
    observed_generation: int = 0
    conditions: list[ReplicaSetCondition] = msgspec.field(default_factory=list)


class ReplicaSetView(codec.Meta):
    spec: ReplicaSetSpec = msgspec.field(default_factory=ReplicaSetSpec)
    status: ReplicaSetStatus = msgspec.field(default_factory=ReplicaSetStatus)


def _timestamp(now: dt.datetime) -> str:
    return now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def get_condition(status: ReplicaSetStatus, cond_type: str) -> ReplicaSetCondition | None:
    return next((c for c in status.conditions if c.type == cond_type), None)


def calculate_status(
    rs: ReplicaSetView,
    pods: Sequence[podranking.PodView],
    manage_error: str | None,
    now: dt.datetime,
) -> ReplicaSetStatus:
    """The status `pods` (the RS's claimed active pods) give, after a manage step that
    failed with `manage_error` (None: it succeeded or did not run). observedGeneration is
    left as it was: the write sets it."""
    template_labels = rs.spec.template.metadata.labels
    fully_labeled = ready = available = 0
    for pod in pods:
        labels = pod.metadata.labels
        if all(labels.get(k) == v for k, v in template_labels.items()):
            fully_labeled += 1
        if podranking.is_pod_ready(pod):
            ready += 1
            if podranking.is_pod_available(pod, rs.spec.min_ready_seconds, now):
                available += 1
    conditions = list(rs.status.conditions)
    failure = get_condition(rs.status, REPLICA_FAILURE)
    if manage_error is not None and failure is None:
        diff = len(pods) - rs.spec.replicas
        reason = podcontrol.FAILED_CREATE if diff < 0 else podcontrol.FAILED_DELETE if diff > 0 else ""
        conditions.append(
            ReplicaSetCondition(
                type=REPLICA_FAILURE,
                status="True",
                last_transition_time=_timestamp(now),
                reason=reason,
                message=manage_error,
            )
        )
    elif manage_error is None and failure is not None:
        conditions = [c for c in conditions if c.type != REPLICA_FAILURE]
    return msgspec.structs.replace(
        rs.status,
        replicas=len(pods),
        fully_labeled_replicas=fully_labeled,
        ready_replicas=ready,
        available_replicas=available,
        conditions=conditions,
    )


def status_unchanged(rs: ReplicaSetView, new: ReplicaSetStatus) -> bool:
    """True when writing `new` would change nothing (upstream's early return)."""
    old = rs.status
    return (
        old.replicas == new.replicas
        and old.fully_labeled_replicas == new.fully_labeled_replicas
        and old.ready_replicas == new.ready_replicas
        and old.available_replicas == new.available_replicas
        and rs.metadata.generation == old.observed_generation
        and old.conditions == new.conditions
    )


def status_patch(new: ReplicaSetStatus, generation: int, resource_version: str) -> dict[str, Any]:
    """A merge patch of the status subresource that sets every field this controller owns.

    Zero counts are spelled out (a merge patch leaves absent fields alone) and an empty
    condition list is null (which removes it). `resource_version` makes it a conditional
    write, like upstream's UpdateStatus.
    """
    return {
        "metadata": {"resourceVersion": resource_version},
        "status": {
            "replicas": new.replicas,
            "fullyLabeledReplicas": new.fully_labeled_replicas,
            "readyReplicas": new.ready_replicas,
            "availableReplicas": new.available_replicas,
            "observedGeneration": generation,
            "conditions": [msgspec.to_builtins(c) for c in new.conditions] or None,
        },
    }


def pods_to_delete(
    pods: Sequence[podranking.PodView],
    related: Sequence[podranking.PodView],
    diff: int,
    now: dt.datetime,
    *,
    by_deletion_cost: bool = True,
) -> list[podranking.PodView]:
    """The `diff` pods a scale-down deletes first (upstream getPodsToDelete).

    Only when some survive does the order matter: then pods rank by ActivePodsWithRanks,
    with the rank counting the related pods (of every ReplicaSet under the same controller)
    on the pod's node, so doubled-up nodes lose pods first; the pod-deletion-cost annotation
    counts only with `by_deletion_cost` (the PodDeletionCost gate).
    """
    if diff < len(pods):
        ranks = podranking.ranks_by_colocation(pods, related)
        pods = podranking.sort_with_ranks(pods, ranks, now, by_deletion_cost=by_deletion_cost)
    return list(pods[:diff])


def deletion_age_ratios(
    pods: Sequence[podranking.PodView], doomed: Sequence[podranking.PodView], now: dt.datetime
) -> list[float]:
    """For each ready pod chosen for deletion, its age over the youngest ready pod's age, in
    whole milliseconds divided as integers (upstream's sorting_deletion_age_ratio samples):
    near 1 means the scale-down removed young pods, as the ranking intends."""
    ready_created = [
        p.metadata.creation_timestamp
        for p in pods
        if podranking.is_pod_ready(p) and p.metadata.creation_timestamp is not None
    ]
    if not ready_created:
        return []
    youngest_ms = (now - max(ready_created)) // dt.timedelta(milliseconds=1)
    ratios = []
    for pod in doomed:
        created = pod.metadata.creation_timestamp
        if created is None or not podranking.is_pod_ready(pod) or youngest_ms <= 0:
            continue
        ratios.append(float(((now - created) // dt.timedelta(milliseconds=1)) // youngest_ms))
    return ratios


def requeue_after(rs: ReplicaSetView, new: ReplicaSetStatus) -> float | None:
    """Seconds until a ready pod may become available: every pod is ready but not all are
    available yet, which only minReadySeconds explains (upstream's AddAfter in sync)."""
    replicas = rs.spec.replicas
    if (
        rs.spec.min_ready_seconds > 0
        and new.ready_replicas == replicas
        and new.available_replicas != replicas
    ):
        return float(rs.spec.min_ready_seconds)
    return None
