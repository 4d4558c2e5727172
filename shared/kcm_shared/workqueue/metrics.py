"""Upstream work queue metrics (`workqueue_*`, label `name` = upstream's queue name, `Spec.queue_name`;
`kcm_workqueue_dead_letters_total` is ours, labelled by the controller).

Names, labels and buckets follow the Prometheus provider kube-controller-manager registers
for client-go's workqueue, so existing dashboards read our queues unchanged; they live in
prometheus_client's default registry, which `opsserver` serves. `queue.WorkQueue` feeds
`QueueMetrics`; `durable.DurableQueue` counts retries and dead letters.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable

from prometheus_client import Counter, Gauge, Histogram

# 1e-8 .. 10 seconds, by factors of 10, as upstream.
_BUCKETS = tuple(10.0**exp for exp in range(-8, 2))

DEPTH = Gauge("workqueue_depth", "Current depth of workqueue", ["name"])
ADDS = Counter("workqueue_adds_total", "Total number of adds handled by workqueue", ["name"])
QUEUE_DURATION = Histogram(
    "workqueue_queue_duration_seconds",
    "How long in seconds an item stays in workqueue before being requested.",
    ["name"],
    buckets=_BUCKETS,
)
WORK_DURATION = Histogram(
    "workqueue_work_duration_seconds",
    "How long in seconds processing an item from workqueue takes.",
    ["name"],
    buckets=_BUCKETS,
)
UNFINISHED_WORK = Gauge(
    "workqueue_unfinished_work_seconds",
    "How many seconds of work has done that is in progress and hasn't been observed by "
    "work_duration. Large values indicate stuck threads.",
    ["name"],
)
LONGEST_RUNNING = Gauge(
    "workqueue_longest_running_processor_seconds",
    "How many seconds has the longest running processor for workqueue been running.",
    ["name"],
)
RETRIES = Counter("workqueue_retries_total", "Total number of retries handled by workqueue", ["name"])
DEAD_LETTERS = Counter(
    "kcm_workqueue_dead_letters_total",
    "Work items given up on and published to the dead-letter subject",
    ["name"],
)


class QueueMetrics:
    """The metrics of one named queue; `queue.WorkQueue` calls it on add, get and done.

    The two in-progress gauges are computed when scraped (upstream refreshes them every
    500 ms from a goroutine; a scrape-time callback needs no task of its own).
    """

    def __init__(self, name: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._added_at: dict[Hashable, float] = {}
        self._started_at: dict[Hashable, float] = {}
        self._depth = DEPTH.labels(name)
        self._adds = ADDS.labels(name)
        self._latency = QUEUE_DURATION.labels(name)
        self._work = WORK_DURATION.labels(name)
        UNFINISHED_WORK.labels(name).set_function(self._unfinished)
        LONGEST_RUNNING.labels(name).set_function(self._longest)

    def add(self, item: Hashable, depth: int) -> None:
        self._adds.inc()
        self._depth.set(depth)
        self._added_at.setdefault(item, self._clock())

    def get(self, item: Hashable, depth: int) -> None:
        now = self._clock()
        self._depth.set(depth)
        self._started_at[item] = now
        added = self._added_at.pop(item, None)
        if added is not None:
            self._latency.observe(now - added)

    def done(self, item: Hashable) -> None:
        started = self._started_at.pop(item, None)
        if started is not None:
            self._work.observe(self._clock() - started)

    def _unfinished(self) -> float:
        now = self._clock()
        return sum(now - t for t in self._started_at.values())

    def _longest(self) -> float:
        now = self._clock()
        return max((now - t for t in self._started_at.values()), default=0.0)
