"""The ReplicaSet's cached view and the pure parts of its sync, under the names this package
has always had them: they live in `kcm_shared.replicastatus`, shared with the
ReplicationController controller."""

from kcm_shared.replicastatus import (
    REPLICA_FAILURE,
    ReplicaSetCondition,
    ReplicaSetSpec,
    ReplicaSetStatus,
    ReplicaSetView,
    calculate_status,
    deletion_age_ratios,
    get_condition,
    pods_to_delete,
    requeue_after,
    status_patch,
    status_unchanged,
)

__all__ = [
    "REPLICA_FAILURE",
    "ReplicaSetCondition",
    "ReplicaSetSpec",
    "ReplicaSetStatus",
    "ReplicaSetView",
    "calculate_status",
    "deletion_age_ratios",
    "get_condition",
    "pods_to_delete",
    "requeue_after",
    "status_patch",
    "status_unchanged",
]
