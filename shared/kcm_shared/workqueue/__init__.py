"""The work queue of the shared controller runtime: what every controller's keys wait in.

Two layers, like client-go's `util/workqueue` plus a bus underneath:

- `queue.WorkQueue`: an in-process queue with upstream's guarantees:
  * Fair: items are handed out in the order they were added.
  * Stingy: an item is never handed to two workers at once, and an item added many times
    before a worker takes it is handed out once.
  * Re-add while processing is fine: the item is handed out again after `done()`.
  * Shutdown: `shutdown()` makes `get()` raise `queue.ShutDown` once the queue is drained,
    so workers can stop.
- `durable.DurableQueue`: the same guarantees over NATS JetStream, across processes and
  restarts. Keys are published to `kcm.work.<controller>.<partition>.<key>` (one pending
  message per key, so re-adding a pending key replaces it); each partition is consumed by
  at most one replica at a time (the coordinator decides which; `stop_partition` hands it
  back cleanly), and inside a replica `WorkQueue` keeps one key on one worker. A message is
  acked only after its reconcile succeeded or it was dead-lettered, so a crash at any
  moment loses no change (architecture invariants 1 to 4).

`ratelimit` holds the per-item and overall retry delays (upstream's default controller rate
limiter) and `metrics` the upstream `workqueue_*` Prometheus metrics. The controller runner
(`kcm_shared.runtime.manager`) imports this package; controllers never do (an import-linter
contract): what a reconcile may return or raise is `kcm_shared.reconcile`'s.
"""
