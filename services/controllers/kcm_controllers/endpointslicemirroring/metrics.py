"""The endpointslice-mirroring controller's metrics, with upstream's names and buckets.

Upstream pkg/controller/endpointslicemirroring/metrics/metrics.go (subsystem
endpoint_slice_mirroring_controller). The gauges upstream derives from its metrics cache
(endpoints_desired, num_endpoint_slices, desired_endpoint_slices) are not kept.
"""

from __future__ import annotations

import prometheus_client

_SUBSYSTEM = "endpoint_slice_mirroring_controller"
_PER_SYNC_BUCKETS = [2.0 * 2**i for i in range(15)]


def _per_sync(name: str, help_: str) -> prometheus_client.Histogram:
    return prometheus_client.Histogram(f"{_SUBSYSTEM}_{name}", help_, buckets=_PER_SYNC_BUCKETS)


ENDPOINTS_ADDED = _per_sync("endpoints_added_per_sync", "Number of endpoints added on each Endpoints sync")
ENDPOINTS_UPDATED = _per_sync(
    "endpoints_updated_per_sync", "Number of endpoints updated on each Endpoints sync"
)
ENDPOINTS_REMOVED = _per_sync(
    "endpoints_removed_per_sync", "Number of endpoints removed on each Endpoints sync"
)
ADDRESSES_SKIPPED = _per_sync(
    "addresses_skipped_per_sync",
    "Number of addresses skipped on each Endpoints sync due to being invalid or exceeding MaxEndpointsPerSubset",
)
# prometheus_client exposes a Counter as `<name>_total`; upstream's is plain `..._changes`.
CHANGES = prometheus_client.Counter(f"{_SUBSYSTEM}_changes", "Number of EndpointSlice changes", ["operation"])
SYNC_DURATION = prometheus_client.Histogram(
    f"{_SUBSYSTEM}_endpoints_sync_duration",
    "Duration of syncEndpoints() in seconds",
    buckets=[0.001 * 2**i for i in range(15)],
)
