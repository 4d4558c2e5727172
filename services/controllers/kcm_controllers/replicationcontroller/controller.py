"""The ReplicationController controller: keeps `spec.replicas` pods running for every RC.

Upstream pkg/controller/replication runs the ReplicaSet controller over RCs through
conversion adapters (replication_controller_utils.go, conversion.go); so does this module:
the sync is `kcm_shared.controllerutil.replicaset.replicamanager`, given the RC's adapter. An RC's `spec.selector` is a
plain label map, read as upstream's conversion reads it (a LabelSelector with those
matchLabels: a missing map selects nothing, an empty one everything); the status fields and
the ReplicaFailure condition are the ReplicaSet's. Events come from "replication-controller",
as upstream's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kcm_shared import runtime
from kcm_shared.apimachinery import gvr, selectors
from kcm_shared.controllerutil import podranking
from kcm_shared.controllerutil.replicaset import replicamanager
from kcm_shared.controllerutil.replicaset import replicastatus as status

RCS = gvr.Resource("", "v1", "replicationcontrollers")
PODS = replicamanager.PODS


def parse_selector(selector: Mapping[str, Any] | None) -> selectors.LabelSelector:
    """An RC's label-map selector as upstream's conversion to a LabelSelector reads it."""
    return selectors.label_selector_from_dict(None if selector is None else {"matchLabels": selector})


ADAPTER = replicamanager.Adapter(
    resource=RCS,
    kind="ReplicationController",
    parse_selector=parse_selector,
    noun="replicationcontroller",
)


class ReplicationManager(replicamanager.ReplicaManager):
    adapter = ADAPTER


SPEC = runtime.Spec(
    name="replicationcontroller-controller",
    alias="replicationcontroller",
    queue_name="replicationmanager",
    primary=RCS,
    views={RCS: status.ReplicaSetView, PODS: podranking.PodView},
    build=ReplicationManager.start,
    workers=5,
    workers_flag="concurrent-rc-syncs",
    event_component="replication-controller",
    package=__package__,
)
