"""The ReplicaSet controller: keeps `spec.replicas` pods running for every ReplicaSet.

Upstream pkg/controller/replicaset/replica_set.go. The sync itself is
`kcm_shared.controllerutil.replicaset.replicamanager`, which the ReplicationController controller runs too; this module
gives it the ReplicaSet's adapter (apps/v1 replicasets, LabelSelector selectors) and declares
the controller.
"""

from __future__ import annotations

from kcm_shared import runtime
from kcm_shared.apimachinery import gvr, selectors
from kcm_shared.controllerutil import podranking
from kcm_shared.controllerutil.replicaset import replicamanager
from kcm_shared.controllerutil.replicaset import replicastatus as status

REPLICASETS = gvr.Resource("apps", "v1", "replicasets")
PODS = replicamanager.PODS

ADAPTER = replicamanager.Adapter(
    resource=REPLICASETS,
    kind="ReplicaSet",
    parse_selector=selectors.label_selector_from_dict,
    noun="replicaset",
)


class ReplicaSetController(replicamanager.ReplicaManager):
    adapter = ADAPTER


SPEC = runtime.Spec(
    name="replicaset-controller",
    alias="replicaset",
    queue_name="replicaset",
    primary=REPLICASETS,
    views={REPLICASETS: status.ReplicaSetView, PODS: podranking.PodView},
    build=ReplicaSetController.start,
    workers=5,
    package=__package__,
)
