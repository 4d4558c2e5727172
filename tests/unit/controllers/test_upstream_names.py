"""The names users match on, as upstream v1.32's kube-controller-manager writes them (issue 29
item 4): the `name` label of the `workqueue_*` metrics (each controller's
`workqueue.TypedRateLimitingQueueConfig{Name: ...}`) and the Events' source component (its
`record.EventSource{Component: ...}`), checked on the running queue too."""

from __future__ import annotations

from typing import cast

import pytest
from kcm_cli.controllers import BUILTIN
from kcm_shared.runtime import manager
from kcm_shared.workqueue import durable
from nats.aio.client import Client
from nats.js import JetStreamContext
from prometheus_client import REGISTRY

# alias -> upstream's queue name; where upstream has several queues, its primary one
# (docs/controllers.md "Work queue names").
QUEUES = {
    "deployment": "deployment",
    "replicaset": "replicaset",
    "replicationcontroller": "replicationmanager",
    "garbagecollector": "garbage_collector_attempt_to_delete",
    "serviceaccount": "serviceaccount",
    "root-ca-cert-publisher": "root_ca_cert_publisher",
    "clusterrole-aggregation": "ClusterRoleAggregator",
    "namespace": "namespace",
    "serviceaccount-token": "serviceaccount_tokens_service",
    # Upstream's cleaner has no queue (a periodic loop): the controller's own name stays.
    "legacy-service-account-token-cleaner": "legacy-serviceaccount-token-cleaner-controller",
    "resourcequota": "resourcequota_primary",
    "ttl-after-finished": "ttl_jobs_to_delete",
    "podgc": "orphaned_pods_nodes",
    "job": "job",
    "cronjob": "cronjob",
    "disruption": "disruption",
    "horizontalpodautoscaling": "horizontalpodautoscaler",
    "nodeipam": "cidrallocator_node",
    "statefulset": "statefulset",
    "endpoint": "endpoint",
    "endpointslice": "endpoint_slice",
    "daemonset": "daemonset",
    "endpointslicemirroring": "endpoint_slice_mirroring",
    # Upstream's taint manager has a node and a pod queue: kcm's work is per pod.
    "taint-eviction-controller": "noexec_taint_pod",
    "ttl": "ttlcontroller",
    # Upstream also has node_lifecycle_controller_pods for newly bound pods.
    "nodelifecycle": "node_lifecycle_controller",
    # Upstream's signing and approving controllers are both its certificate controller.
    "csrsigning": "certificate",
    "csrapproving": "certificate",
    # Upstream's cleaner has no queue (a periodic pass): the controller's own name stays.
    "csrcleaner": "certificatesigningrequest-cleaner-controller",
    "bootstrapsigner": "bootstrap_signer_queue",
    "tokencleaner": "token_cleaner",
    "pvc-protection": "pvcprotection",
    "pv-protection": "pvprotection",
    "ephemeral-volume": "ephemeral_volume",
    "persistentvolume-expander": "volume_expand",
    # Upstream has a claim and a volume queue: kcm's one holds both kinds of key.
    "persistentvolume-binder": "claims",
    # Upstream's reconciler is a loop without a queue; its one named queue is the claims'.
    "attachdetach": "pvcs",
    "validatingadmissionpolicy-status-controller": "validatingadmissionpolicy-status",
}

# alias -> upstream's Event source component, for the controllers that record Events.
EVENT_SOURCES = {
    "deployment": "deployment-controller",
    "replicaset": "replicaset-controller",
    "replicationcontroller": "replication-controller",
    "garbagecollector": "garbage-collector-controller",
    "ttl-after-finished": "ttl-after-finished-controller",
    "job": "job-controller",
    "cronjob": "cronjob-controller",
    "disruption": "controllermanager",
    "horizontalpodautoscaling": "horizontal-pod-autoscaler",
    "nodeipam": "cidrAllocator",
    "statefulset": "statefulset-controller",
    "endpoint": "endpoint-controller",
    "endpointslice": "endpoint-slice-controller",
    "daemonset": "daemonset-controller",
    "endpointslicemirroring": "endpoint-slice-mirroring-controller",
    "taint-eviction-controller": "taint-eviction-controller",
    "nodelifecycle": "node-controller",
    "ephemeral-volume": "ephemeral_volume",
    "persistentvolume-expander": "volume_expand",
    "persistentvolume-binder": "persistentvolume-controller",
    "attachdetach": "attachdetach-controller",
}

SPECS = {spec.alias: spec for spec in BUILTIN}


def test_every_builtin_controller_has_a_queue_name() -> None:
    assert set(QUEUES) == set(SPECS)


@pytest.mark.parametrize("alias", sorted(QUEUES))
def test_the_workqueue_metrics_carry_upstreams_queue_name(alias: str) -> None:
    spec = SPECS[alias]
    assert manager.queue_name(spec) == QUEUES[alias]


@pytest.mark.parametrize("alias", sorted(EVENT_SOURCES))
def test_events_carry_upstreams_source_component(alias: str) -> None:
    spec = SPECS[alias]
    assert (spec.event_component or spec.name) == EVENT_SOURCES[alias]


def test_a_durable_queue_labels_its_metrics_with_the_queue_name() -> None:
    """The queue the Manager builds (`metrics_name=spec.queue_name or spec.name`): its
    `workqueue_*` series are upstream's name's, none the controller's."""
    spec = SPECS["endpointslice"]

    async def reconcile(key: str) -> None:
        return None

    js, nc = cast(JetStreamContext, None), cast(Client, None)  # construction opens nothing
    queue = durable.DurableQueue(js, nc, spec.name, reconcile, metrics_name=manager.queue_name(spec))
    before = REGISTRY.get_sample_value("workqueue_adds_total", {"name": "endpoint_slice"}) or 0.0
    queue._queue.add("ns/svc")
    assert REGISTRY.get_sample_value("workqueue_adds_total", {"name": "endpoint_slice"}) == before + 1
    assert REGISTRY.get_sample_value("workqueue_adds_total", {"name": spec.name}) is None
