"""The watcher's Prometheus metrics (default registry, served by kcm_shared.opsserver).

Updated by `publisher` and `resourcewatch`; names are part of the ops contract.
"""

from __future__ import annotations

import prometheus_client

EVENTS = prometheus_client.Counter(
    "kcm_watcher_events", "Watch events received from the API server.", ["resource", "type"]
)
PUBLISHED = prometheus_client.Counter("kcm_watcher_published", "Messages acknowledged by JetStream.")
PUBLISH_ERRORS = prometheus_client.Counter(
    "kcm_watcher_publish_errors", "Publish attempts that failed and will be retried."
)
RELISTS = prometheus_client.Counter(
    "kcm_watcher_relists", "Full lists of a resource, by why they happened.", ["resource", "reason"]
)
INFLIGHT = prometheus_client.Gauge(
    "kcm_watcher_inflight_publishes", "Messages handed to JetStream and not yet acknowledged."
)
