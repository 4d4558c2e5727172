"""The node lifecycle controller's metrics, with upstream's names, help and buckets
(pkg/controller/nodelifecycle/metrics.go, v1.32; the deprecated evictions_number is left out).
Set by `controller.NodeLifecycle`."""

from __future__ import annotations

import prometheus_client

ZONE_HEALTH = prometheus_client.Gauge(
    "node_collector_zone_health", "Gauge measuring percentage of healthy nodes per zone.", ["zone"]
)
ZONE_SIZE = prometheus_client.Gauge(
    "node_collector_zone_size", "Gauge measuring number of registered Nodes per zones.", ["zone"]
)
UNHEALTHY_NODES = prometheus_client.Gauge(
    "node_collector_unhealthy_nodes_in_zone", "Gauge measuring number of not Ready Nodes per zones.", ["zone"]
)
EVICTIONS = prometheus_client.Counter(
    "node_collector_evictions",  # exposed as node_collector_evictions_total
    "Number of Node evictions that happened since current instance of NodeController started.",
    ["zone"],
)
UPDATE_NODE_HEALTH = prometheus_client.Histogram(
    "node_collector_update_node_health_duration_seconds",
    "Duration in seconds for NodeController to update the health of a single node.",
    buckets=[0.001 * 4**i for i in range(8)],  # upstream's: 1 ms to ~16 s
)
UPDATE_ALL_NODES_HEALTH = prometheus_client.Histogram(
    "node_collector_update_all_nodes_health_duration_seconds",
    "Duration in seconds for NodeController to update the health of all nodes.",
    buckets=[0.01 * 4**i for i in range(8)],  # upstream's: 10 ms to ~3 min
)
