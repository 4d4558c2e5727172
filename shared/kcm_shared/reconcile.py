"""Layer 5, the reconcile vocabulary: what a reconcile returns or raises, and what each means.

A controller's reconcile is a `Reconcile`: given a work key, it reads current state from its
caches, makes its writes and ends in one of the outcomes below. Controllers name them through
`kcm_shared.runtime` (`runtime.Result`, `runtime.TerminalError`, `runtime.NotOwner`); the
durable work queue (`kcm_shared.workqueue.durable`) carries them out and the write fence
(`kcm_shared.bus.fencing`) raises `NotOwner`. This module is their one definition, apart from
the transport, and its table is the one place that says what each does (docs/runtime.md
points here):

    the reconcile...        what happens
    ----------------------  ------------------------------------------------------------------
    returns None            success (forget): the work item is acked, the key's backoff is over.
    raises an exception     backoff retry, for ever, never dead-lettered: after the key's
                            backoff (client-go's `DefaultControllerRateLimiter`: 5 ms doubling
                            with each failure in a row, capped at 1000 s, combined by max with an
                            overall 10 qps / burst 100 bucket; or the Spec's `retry_backoff`
                            and `retry_bucket`, as upstream's Job and namespace queues), while
                            other keys keep flowing.
                            The count of failures in a row is stored with the work item
                            (`Kcm-Failures`), so the backoff survives a restart and a hand-over.
                            A change to the key stored meanwhile runs at once, as upstream's
                            `Add` does; if that reconcile fails too the count goes on (the
                            replica owning the partition remembers it; a change that lands right
                            after a hand-over starts it over). Each retry counts in
                            `workqueue_retries_total`.
    raises TerminalError    dead letter: no retry, straight to `kcm.dlq.<controller>` with the
                            error. The controller's explicit verdict that no later state can make
                            the reconcile succeed; use it sparingly, since nothing reconciles the
                            key again until it changes.
    raises NotOwner         handed back to the partition's next owner, no retry counted: a write
                            was refused because the key's partition is no longer this replica's.
                            The item is re-published in its own place, due at once, with no
                            delivery counted and nothing dead-lettered. The same when the
                            reconcile's claim is void by the time it ends, whatever it raised or
                            returned.
    returns Result(         timed retry: reconciled again after `d` seconds, durably (the delay
      requeue_after=d)      is a work item on the bus: it survives a restart and a hand-over),
                            unless a change to the key was stored while it ran: that runs at once
                            instead, and decides again.
    never finishes (the     JetStream redelivers the work item; after `--max-deliveries`
      replica dies, or the  deliveries that ended without any outcome above (a poison message:
      ack deadline passes)  say, one that crashes the process) it is dead-lettered instead of run
                            again. Failures and requeues are outcomes and never count towards
                            this bound; a partition handed over before the item ran (or while its
                            reconcile outlived the drain) does.

Besides those, a work message the queue cannot handle at all is dead-lettered at once: one whose
subject holds no key, or whose `Kcm-Not-Before` / `Kcm-Failures` header is not a number
(docs/bus.md describes the dead letters).

When to look at a key again later, `Result(requeue_after=d)` or `Context.enqueue_after(key, d)`:
the result is the reconcile's own "again later" (a progress deadline, a TTL, a sync period,
minReadySeconds still running), a work item on the bus that must outlive a restart.
`enqueue_after` (upstream's `AddAfter`, `kcm_shared.runtime.delaying`) is for event handlers: a
batch period that gathers several events into one reconcile, or a wake-up once a pod that just
became ready is available. Its timer lives in this process only, which is enough there: a
restart or a hand-over enqueues every key of the partition anyway.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Result:
    """What a reconcile returns; returning None means plain success."""

    requeue_after: float | None = None  # reconcile the key again after this many seconds


class TerminalError(Exception):
    """Raised by a reconcile that retrying cannot fix: the key is dead-lettered at once.

    Any other exception is retried for ever with backoff; raise this only when no later
    state of the object or the cluster can make the reconcile succeed.
    """


class NotOwner(Exception):
    """The key's partition is no longer this replica's: stop, do not retry here.

    Raised by the write fence (`kcm_shared.bus.fencing`); the durable queue hands the work
    item back (no ack, no retry counted, no dead letter) and the partition's next owner
    reconciles the key. A reconcile may catch it to tidy up, then must raise it again.
    """


# A controller's reconcile: the work key in, one of the outcomes above out.
Reconcile = Callable[[str], Awaitable[Result | None]]
