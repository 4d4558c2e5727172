"""The watcher's Prometheus metrics (default registry, served by kcm_shared.bus.opsserver).

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
TOO_LARGE = prometheus_client.Counter(
    "kcm_watcher_too_large",
    "Object messages published without their body because they exceed the server's max_payload.",
)
DROPPED = prometheus_client.Counter(
    "kcm_watcher_publish_dropped", "Messages JetStream refused for good (not retried)."
)
CONFLICTS = prometheus_client.Counter(
    "kcm_watcher_publish_conflicts",
    "Publishes refused because the subject's last sequence was not the expected one.",
)
SUPERSEDED = prometheus_client.Counter(
    "kcm_watcher_publish_superseded",
    "Messages dropped after a conflict because the stream already held that state or a newer one.",
)
STREAM_RESETS = prometheus_client.Counter(
    "kcm_watcher_stream_resets",
    "Times the object stream was found to have lost what this watcher published, by resource.",
    ["resource"],
)
