"""The ReplicaSet controller: keeps `spec.replicas` pods running for every ReplicaSet.

Upstream pkg/controller/replicaset/replica_set.go. The sync itself is
`kcm_shared.replicamanager`, which the ReplicationController controller runs too; this module
gives it the ReplicaSet's adapter (apps/v1 replicasets, LabelSelector selectors) and declares
the controller.
"""

from __future__ import annotations

from kcm_shared import controller, podranking, replicamanager, selectors, subjects
from kcm_shared import replicastatus as status

REPLICASETS = subjects.Resource("apps", "v1", "replicasets")
PODS = replicamanager.PODS

ADAPTER = replicamanager.Adapter(
    resource=REPLICASETS,
    kind="ReplicaSet",
    parse_selector=selectors.label_selector_from_dict,
    noun="replicaset",
)


class ReplicaSetController(replicamanager.ReplicaManager):
    adapter = ADAPTER


def build(ctx: controller.Context) -> controller.Reconcile:
    return ReplicaSetController.start(ctx)


SPEC = controller.Spec(
    name="replicaset-controller",
    alias="replicaset",
    primary=REPLICASETS,
    views={REPLICASETS: status.ReplicaSetView, PODS: podranking.PodView},
    build=build,
    workers=5,
)
