"""The durable, partitioned work queue of a controller, on NATS JetStream.

The controller runner builds one `DurableQueue` per controller: event handlers call
`add(key, partitions)`, the coordinator's partition assignments turn into
`start_partition` / `stop_partition`, and `run()` is the worker pool that calls the
controller's reconcile. Architecture invariants 1 to 4 are kept here:

- No lost change: a work message is acked only after its reconcile succeeded, its retry was
  stored (below) or it was dead-lettered; a replica that dies mid-reconcile leaves it
  unacked, and JetStream redelivers it after `ack_wait`. Long reconciles send in-progress
  acks so that does not happen while they are merely slow.
- What is durable is the work stream's messages (file storage); each partition consumer's
  delivery state (what was delivered, what is acked) nats-server holds in memory, as a file
  written over on every ack was most of its cost per work item. A restarted NATS has lost the
  consumers but not the items: the fetch loop declares them again (below) and they deliver
  every item not acked, as the lost delivery state would have after `ack_wait`.
- One key, one worker: a partition is consumed through one durable consumer by the one
  replica that owns it; inside the replica `queue.WorkQueue` never hands a key to two
  workers. `stop_partition` returns only after the partition's reconciles finished (or
  were cancelled), so the next owner cannot overlap them.
- Coalescing: the work stream keeps one message per key, so adds while pending replace each
  other; a message for a key that is being processed is held and the key runs again after.
  An add of a key whose message this replica stored and whose reconcile has not started
  yet publishes nothing (client-go's dirty set): that reconcile reads the cache after the
  change anyway. Under load this spares a JetStream publish per event.
- Fencing (architecture invariant 8): each reconcile holds a `fencing.Claim` on its key's
  partition (from the `claim` the runtime passes) and the controller's API writes are checked
  against it. A deferred item is re-published only in place of the message it came from
  (expected last subject sequence), so a replica that lost the partition can never replace a
  newer change's message with its deferral.
- Outcomes: what each return or exception of a reconcile leads to (backoff retry, dead
  letter, hand-back to the next owner, timed retry, success) is the table in
  `kcm_shared.reconcile`; this module carries it out, as below.

A retry, like `Result(requeue_after=d)`, does not nak: a nak counts a delivery, so the
delivery count could not tell failures from deliveries that never finished. Instead the key
is re-published with a `Kcm-Not-Before` header (and, for a retry, `Kcm-Failures`, its count
of failures in a row) as a fresh message, delivery count 1, and the old one acked. Both
headers are in the stream, so the backoff survives a restart and a hand-over. A replica that
receives the message early naks it with the remaining delay. A real change published
meanwhile replaces it and runs at once, as upstream's `Add` overtakes `AddAfter`; its
message carries no count, but the replica remembers the key's count while it owns the
partition, so a failure after the change continues the backoff as upstream's limiter does
(after a hand-over as well, the change starts it over). One change published while the
reconcile ran makes the retry unnecessary, so none is published (it would replace that
change's message and postpone it).

NATS trouble is waited out, never fatal: publishing retries with capped backoff, the fetch
loop backs off and declares the stream and its consumer again (a restarted NATS that lost
them, or a stream deleted by hand), and settling a message only logs a failure (it costs a
redelivery). A partition whose consumer had to be declared anew lost its pending items with
it: `on_lost` tells the owner, which enqueues the partition's keys again.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext, api
from nats.js.errors import APIError, NoStreamResponseError, NotFoundError

from kcm_shared.base import cancellation, tracing
from kcm_shared.bus import fencing, health, natsconn, subjects, wire

# By name, not as a module: plugins written before the outcomes had a module of their own
# (issue 26) still return `durable.Result` and raise `durable.TerminalError`.
from kcm_shared.reconcile import NotOwner, Reconcile, Result, TerminalError
from kcm_shared.workqueue import metrics, queue, ratelimit

log = logging.getLogger("kcm.workqueue")

_JS_API = "$JS.API"  # the JetStream API prefix of `nc.jetstream()`, which every service uses
_STATUS = api.Header.STATUS
_TRACE_HEADERS = (wire.TRACEPARENT, wire.TRACESTATE)  # carried over when a deferred item is re-published
FETCH_BATCH = 64  # most messages one pull request asks for
MAX_BACKOFF = 5.0  # seconds between fetch retries while NATS is unreachable
# How long a pull request waits at the server for work. Each partition of each controller keeps
# one open: with about 35 controllers of 8 partitions each, a 1 s expiry made ~280 requests and
# as many 408 answers a second on an idle cluster, half of nats-server's messages under load and
# a visible share of the controllers' CPU. A partition stops by withdrawing its interest (drain),
# not by waiting the request out, so a long expiry costs no hand-over time.
PULL_EXPIRES = 30.0


# (key, partition) -> the claim writes for the key are checked against; None: not owned now.
ClaimFor = Callable[[str, int], fencing.Claim | None]


@dataclass(eq=False)
class _Item:
    """The newest work message this replica holds for a key."""

    key: str
    msg: Msg  # replaced by a redelivery of the same message, so the ack uses the live one
    seq: int  # stream sequence: tells a newer message from a redelivery or a stale one
    partition: int
    failures: int = 0  # failed reconciles in a row before this message (its `Kcm-Failures`)
    task: asyncio.Future[Result | None] | None = None  # the running reconcile
    started: float = 0.0  # monotonic time its reconcile began


@dataclass(eq=False)
class _Stored:
    """A key `add` published (or is publishing) and whose reconcile has not started since."""

    partition: int
    since: float  # monotonic time of the publish
    done: asyncio.Event = field(default_factory=asyncio.Event)  # the publish is over
    stored: bool = False  # ... and succeeded


@dataclass(eq=False)
class _Partition:
    index: int
    inbox: str  # where the answers to pull requests come
    next_subject: str  # where pull requests go
    sub: Subscription | None = None  # the inbox's subscription, set once subscribed
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    # The open pull request: messages it may still bring, set when it is over (served, expired,
    # refused: `refused` says why) so the fetch loop makes the next one.
    expected: int = 0
    over: asyncio.Event = field(default_factory=asyncio.Event)
    refused: str | None = None
    released: asyncio.Event = field(default_factory=asyncio.Event)
    idle: asyncio.Event = field(default_factory=asyncio.Event)  # set while nothing is in flight
    inflight: int = 0
    fetcher: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        self.idle.set()


class DurableQueue:
    def __init__(
        self,
        js: JetStreamContext,
        nc: Client,
        controller: str,
        reconcile: Reconcile,
        *,
        workers: int = 5,
        max_deliveries: int = 15,
        ack_wait: float = 30.0,
        rate_limiter: ratelimit.RateLimiter | None = None,
        max_ack_pending: int = 10_000,
        prefetch: int | None = None,
        fetch_wait: float = 1.0,
        drain_timeout: float = 10.0,
        stuck_after: float = 120.0,
        stream_replicas: int = 1,
        on_lost: Callable[[set[int]], None] | None = None,
        claim: ClaimFor | None = None,
        metrics_name: str = "",
    ) -> None:
        """`max_ack_pending` bounds the messages of one partition that are out with a replica or
        waiting out a retry delay (a nak'd message counts until redelivered), so it must exceed
        the number of keys expected to be failing at once. `prefetch` (default 4 per worker)
        bounds the messages this replica holds locally; `fetch_wait` is how often a fetch loop that
        waits (for room, or on an open pull request) looks again for a reconnect or a stop; `drain_timeout` bounds
        how long `stop_partition` waits for running reconciles before cancelling them;
        `stuck_after` is the health watchdog's limit for a loop making no progress;
        `max_deliveries` is how many deliveries of one message may end without any outcome
        (no success, failure or requeue recorded) before it is dead-lettered as poison;
        `on_lost(partitions)` is called when those partitions' consumers (and so their pending
        work items) were found gone and declared anew.
        `claim` fences each reconcile's writes (module docstring); without it nothing is fenced.
        """
        if workers < 1 or max_deliveries < 1 or ack_wait <= 0:
            raise ValueError("workers and max_deliveries must be >= 1 and ack_wait > 0")
        self._js = js
        self._nc = nc
        self._controller = controller
        self._reconcile = reconcile
        self._workers = workers
        self._max_deliveries = max_deliveries
        self._ack_wait = ack_wait
        self._limiter = rate_limiter or ratelimit.default_controller_rate_limiter()
        self._max_ack_pending = max_ack_pending
        self._prefetch = prefetch or 4 * workers
        self._fetch_wait = fetch_wait
        self._drain_timeout = drain_timeout
        self._stream = subjects.work_stream(controller)
        self._stream_replicas = stream_replicas
        self._on_lost = on_lost
        self._consumer_prefix = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in controller)
        # The `name` label of the workqueue_* metrics: upstream's queue name (`Spec.queue_name`).
        self._metrics_name = metrics_name or controller
        self._queue: queue.WorkQueue[str] = queue.WorkQueue(self._metrics_name)
        self._held: dict[str, _Item] = {}  # received, not started (or arrived while its key runs)
        self._running: dict[str, _Item] = {}
        self._stored: dict[str, _Stored] = {}
        # Failures in a row of keys of owned partitions: (partition, count), for a change's
        # message, which carries no count of its own.
        self._failures: dict[str, tuple[int, int]] = {}
        self._partitions: dict[int, _Partition] = {}
        self._room = asyncio.Event()
        self._room.set()
        self._busy = False
        self.health = health.Watchdog(stuck_after)
        self._stuck_after = stuck_after
        self._claim = claim

    async def setup(self) -> None:
        """Declare the work stream and the dead-letter stream (idempotent)."""
        await natsconn.ensure_work_stream(self._js, self._controller, self._stream_replicas)
        await natsconn.ensure_dlq_stream(self._js, self._stream_replicas, owner=False)

    async def add(self, key: str, partitions: int) -> None:
        """Enqueue `key` durably; returns once JetStream stored it (or a message for it that
        no reconcile has started on yet).

        Every caller must pass the same `partitions`. While NATS is unreachable this retries
        with backoff rather than drop the change; cancel the caller to give up. A key that
        makes no work subject (an empty name: `ns/`, ``) is logged and dropped.
        """
        partition = subjects.partition_of(key, partitions)
        try:
            subject = subjects.work_subject(self._controller, partition, key)
        except ValueError as exc:
            # Keys are built from user data (owner uids): one that names no object (an empty
            # name, a uid ending in "/") must not fail every event that mentions it.
            log.error("unusable key dropped", extra={"key": key[:200], "error": str(exc)})
            return
        while (pending := self._pending_message(key, partition)) is not None:
            await pending.done.wait()
            if pending.stored:
                return
            # That add gave up before its message was stored: publish one here.
        # Marked before publishing: were it marked after the ack, a reconcile that started
        # in between would leave the mark behind, and later changes would be skipped.
        mark = _Stored(partition, time.monotonic())
        self._stored[key] = mark
        try:
            await self._publish(key, subject)
            mark.stored = True
        finally:
            if not mark.stored and self._stored.get(key) is mark:
                del self._stored[key]
            mark.done.set()

    def holds(self, key: str, partitions: int) -> bool:
        """True when `add(key, partitions)` would return at once without publishing: a stored
        message for `key` waits for a reconcile here. Lets the runtime skip the add (a task and
        the trace context's parsing) for a key that events name again and again."""
        mark = self._pending_message(key, subjects.partition_of(key, partitions))
        return mark is not None and mark.stored

    def _pending_message(self, key: str, partition: int) -> _Stored | None:
        """The mark of `key`'s stored, not yet reconciled message, if it can be trusted.

        Only while this replica consumes the partition: otherwise another replica reconciles
        the message, and its start clears nothing here. Nor when older than `ack_wait`: the
        message may be gone (a purged stream); publishing again costs one message at most.
        """
        mark = self._stored.get(key)
        part = self._partitions.get(partition)
        if mark is None or mark.partition != partition or part is None or part.stop.is_set():
            return None
        if time.monotonic() - mark.since > self._ack_wait:
            return None
        return mark

    def _forget_stored(self, partition: int) -> None:
        """Drop the marks and failure counts of a partition whose ownership changes: another
        replica may consume (or have consumed) their messages."""
        for key in [k for k, mark in self._stored.items() if mark.partition == partition]:
            del self._stored[key]
        for key in [k for k, (p, _) in self._failures.items() if p == partition]:
            del self._failures[key]

    async def _publish(self, key: str, subject: str) -> None:
        headers: dict[str, str] = {}
        tracing.inject(headers)  # the reconcile continues the trace of the change that caused it
        await self._store(key, subject, b"", headers, deadline=None)

    async def _store(
        self, key: str, subject: str, data: bytes, headers: dict[str, str], deadline: float | None
    ) -> bool:
        """Publish a work message, retrying transient failures (a lost stream is declared
        again first) until it is stored or the monotonic `deadline` passed (never: None)."""
        if subjects.needs_key(subject):
            headers = {**headers, wire.KEY: key}
        attempt = 0
        while True:
            cancellation.checkpoint()
            try:
                await self._js.publish(subject, data, stream=self._stream, headers=headers or None)
                return True
            except nats.errors.Error as exc:
                if not natsconn.is_transient(exc):
                    raise
                attempt += 1
                log.warning(
                    "work item not stored yet, retrying",
                    extra={
                        "controller": self._controller,
                        "key": key,
                        "error": repr(exc),
                        "attempt": attempt,
                    },
                )
                backoff = min(MAX_BACKOFF, 0.05 * 2**attempt)
                if deadline is not None and time.monotonic() + backoff > deadline:
                    return False
                await asyncio.sleep(backoff)
                if isinstance(exc, NoStreamResponseError):
                    # No stream took it: deleted, or lost with NATS' store. Declare it again.
                    with contextlib.suppress(nats.errors.Error, TimeoutError):
                        await self.setup()

    async def start_partition(self, partition: int) -> None:
        """Begin consuming `partition`; returns once its consumer exists and fetching started.

        The caller owes fencing: no other replica may consume the partition until this one's
        `stop_partition` returned (or this replica is gone).
        """
        current = self._partitions.get(partition)
        if current is not None:
            if not current.stop.is_set():
                return
            await current.released.wait()  # taken back while being released: start afresh after
        self._forget_stored(partition)
        name = self._consumer_name(partition)
        await self._declare_consumer(partition)
        inbox = self._nc.new_inbox()
        part = _Partition(partition, inbox, f"{_JS_API}.CONSUMER.MSG.NEXT.{self._stream}.{name}")
        # A callback rather than `next_msg`, which makes a task, a timer and a uuid per message.
        part.sub = await self._nc.subscribe(inbox, cb=functools.partial(self._on_pull_answer, part))
        self._partitions[partition] = part
        part.fetcher = asyncio.create_task(self._fetch_loop(part), name=f"fetch {name}")

    def _consumer_name(self, partition: int) -> str:
        return f"{self._consumer_prefix}-p{partition}"

    async def _declare_consumer(self, partition: int) -> None:
        name = self._consumer_name(partition)
        config = api.ConsumerConfig(
            name=name,
            durable_name=name,
            filter_subject=subjects.work_filter(self._controller, partition),
            deliver_policy=api.DeliverPolicy.ALL,
            ack_policy=api.AckPolicy.EXPLICIT,
            ack_wait=self._ack_wait,
            max_deliver=-1,  # counted by us, so a poison message can be dead-lettered
            max_ack_pending=self._max_ack_pending,
            mem_storage=True,
        )
        try:
            await self._js.add_consumer(self._stream, config)
        except APIError:
            # A consumer kept on disk by an older kcm: JetStream cannot change a consumer's
            # storage, so it goes and comes back (the work items are the stream's; the ones it
            # had delivered and not seen acked are delivered again).
            held = await self._js.consumer_info(self._stream, name)
            if held.config.mem_storage:
                raise
            await self._js.delete_consumer(self._stream, name)
            await self._js.add_consumer(self._stream, config)
            log.info(
                "work consumer declared anew with its delivery state in memory",
                extra={"controller": self._controller, "partition": partition},
            )

    async def stop_partition(self, partition: int) -> None:
        """Release `partition`: stop fetching, let its running reconciles finish and ack, hand
        back what was not started. Returns when another replica may take the partition over.

        Reconciles still running after `drain_timeout` are cancelled and their messages nak'd,
        so they are redelivered to the next owner.
        """
        self._forget_stored(partition)
        part = self._partitions.get(partition)
        if part is None:
            return
        if part.stop.is_set():
            await part.released.wait()
            return
        part.stop.set()
        part.over.set()  # the fetch loop makes no further request
        if part.fetcher is not None:
            await asyncio.wait([part.fetcher])
        # The open pull request is withdrawn with the inbox's interest: the server hands a request
        # nothing once no one listens on its inbox. Draining (unsubscribe, a round trip, then the
        # messages received meanwhile through the callback) leaves nothing the request brought
        # unhandled: they are held like any other and handed back below. Only a message the
        # server sent in the instant of the unsubscribe can miss the inbox; it is redelivered to
        # the next owner after `ack_wait`, as a crashed replica's would be.
        await self._withdraw(part)
        try:
            await asyncio.wait_for(part.idle.wait(), self._drain_timeout)
        except TimeoutError:
            for item in self._running.values():
                if item.partition == partition and item.task is not None:
                    log.warning(
                        "reconcile outlived the partition hand-over, cancelled",
                        extra={"controller": self._controller, "key": item.key},
                    )
                    item.task.cancel()
            try:
                await asyncio.wait_for(part.idle.wait(), self._drain_timeout)
            except TimeoutError:
                # A reconcile that ignores cancellation: its message stays unacked (redelivered
                # after ack_wait), but the partition is released anyway rather than never.
                log.error(
                    "reconcile ignored cancellation, partition released regardless",
                    extra={"controller": self._controller, "partition": partition},
                )
        for key, item in list(self._held.items()):
            if item.partition == partition:
                del self._held[key]
                await self._settle(item.msg.nak(), "hand back", key)
        # The acks and naks above must reach the server before the next owner starts.
        await self._settle(self._nc.flush(timeout=5), "flush", "")
        del self._partitions[partition]
        part.released.set()
        self._room_changed()
        self._update_busy()

    async def run(self) -> None:
        """The worker pool. Runs until cancelled; then releases every partition (see
        `stop_partition`) before it returns."""
        tasks = [
            asyncio.create_task(self._worker(), name=f"worker {self._controller}")
            for _ in range(self._workers)
        ]
        tasks.append(asyncio.create_task(self._keep_alive(), name=f"keep-alive {self._controller}"))
        try:
            await asyncio.wait(tasks)
        finally:
            await asyncio.gather(*(self.stop_partition(p) for p in list(self._partitions)))
            self._queue.shutdown()
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks)

    def check(self) -> str | None:
        """The health check: the loop makes progress, and no single reconcile outlives the limit
        (one stuck worker would otherwise hide behind the others' progress)."""
        if (err := self.health()) is not None:
            return err
        if self._running:
            key, item = min(self._running.items(), key=lambda kv: kv[1].started)
            running = time.monotonic() - item.started
            if running > self._stuck_after:
                return f"reconcile of {key} stuck for {running:.1f}s (limit {self._stuck_after:.0f}s)"
        return None

    def depth(self) -> int:
        """Keys received and waiting for a worker."""
        return self._queue.len()

    async def _fetch_loop(self, part: _Partition) -> None:
        failures = 0
        while not part.stop.is_set():
            cancellation.checkpoint()
            room = self._prefetch - len(self._held) - len(self._running)
            if room <= 0:
                await _wait(self._room, self._fetch_wait)
                continue
            try:
                await self._pull(part, min(room, FETCH_BATCH))
                failures = 0
            except Exception as exc:  # the loop must outlive any NATS trouble
                failures += 1
                log.warning(
                    "fetching work failed, retrying",
                    extra={"controller": self._controller, "partition": part.index, "error": repr(exc)},
                )
                await _wait(part.stop, min(MAX_BACKOFF, 0.1 * 2**failures))
                if not part.stop.is_set():
                    await self._redeclare(part)

    async def _redeclare(self, part: _Partition) -> None:
        """Declare the stream and the partition's consumer again (both idempotent): after a
        failed pull either may be gone, deleted by hand or lost with NATS' store."""
        try:
            try:
                await self._js.consumer_info(self._stream, self._consumer_name(part.index))
                lost = False
            except NotFoundError:
                lost = True
            await self.setup()
            await self._declare_consumer(part.index)
            if lost:
                log.warning(
                    "work consumer was gone, declared anew; its pending work is enqueued again",
                    extra={"controller": self._controller, "partition": part.index},
                )
                if self._on_lost is not None:
                    self._on_lost({part.index})
        except (nats.errors.Error, TimeoutError) as exc:
            log.warning(
                "cannot declare the work stream and consumer yet",
                extra={"controller": self._controller, "partition": part.index, "error": repr(exc)},
            )

    async def _pull(self, part: _Partition, batch: int) -> None:
        """One pull request; returns when it is over (its messages are handled as they arrive,
        by `_on_pull_answer`) or the partition stops. Raises when the server refused it.

        A request lost on the way (a reconnect: the server forgets the requests of a closed
        connection) is never answered, so a reconnect, or the request outliving its expiry,
        ends the wait too.
        """
        part.expected, part.refused = batch, None
        part.over.clear()
        reconnects = self._nc.stats["reconnects"]
        request = {"batch": batch, "expires": int(PULL_EXPIRES * 1e9)}
        await self._nc.publish(part.next_subject, json.dumps(request).encode(), reply=part.inbox)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + PULL_EXPIRES + 1.0
        while not part.over.is_set():
            remaining = deadline - loop.time()
            if remaining <= 0 or self._nc.stats["reconnects"] != reconnects:
                return
            await _wait(part.over, min(remaining, self._fetch_wait))
        if part.refused is not None:
            raise nats.errors.Error(f"pull request refused: {part.refused}")

    async def _on_pull_answer(self, part: _Partition, msg: Msg) -> None:
        """A message answering one of the partition's pull requests: work, or a status."""
        status = (msg.headers or {}).get(_STATUS)
        if status is None:
            part.expected -= 1
            if part.expected <= 0:
                part.over.set()
            try:
                await self._receive(part, msg)
            except Exception:  # unacked, so redelivered after ack_wait; the next ones still come
                log.exception("work message not received", extra={"controller": self._controller})
        elif status in ("409", "503"):  # e.g. consumer deleted, no stream answering: back off
            part.refused = str(msg.headers)
            part.over.set()
        elif status != "100":  # 404 / 408: nothing (more) for this request
            part.over.set()

    async def _withdraw(self, part: _Partition) -> None:
        """Unsubscribe the partition's inbox, handling what arrived before the server knew."""
        sub = part.sub
        if sub is None:
            return
        try:
            await asyncio.wait_for(sub.drain(), 5.0)  # type: ignore[no-untyped-call]  # nats-py leaves drain() unannotated
        except (nats.errors.Error, TimeoutError) as exc:
            log.warning(
                "could not drain a work partition's inbox",
                extra={"controller": self._controller, "partition": part.index, "error": repr(exc)},
            )
            with contextlib.suppress(nats.errors.Error):
                await sub.unsubscribe()

    async def _receive(self, part: _Partition, msg: Msg) -> None:
        try:
            key = subjects.key_of_work_subject(msg.subject, (msg.headers or {}).get(wire.KEY))
        except ValueError as exc:
            await self._dead_letter(msg, "", f"malformed work subject: {exc}")
            return
        headers = msg.headers or {}
        try:
            not_before = _number(headers, wire.NOT_BEFORE, float)
            failures = int(_number(headers, wire.FAILURES, int) or 0)
        except ValueError as exc:
            await self._dead_letter(msg, key, f"undecodable work message: {exc}")
            return
        if not_before is not None:
            wait = not_before - time.time()
            if wait > 0:
                await self._settle(msg.nak(delay=wait), "defer", key)
                return
        seq = msg.metadata.sequence.stream
        running = self._running.get(key)
        if running is not None and seq <= running.seq:
            await self._take_over(running, msg, seq)
            return
        held = self._held.get(key)
        if held is not None:
            if seq > held.seq:
                # The stream dropped the older message when this one was stored; settle ours too.
                await self._settle(held.msg.ack(), "ack superseded", key)
                held.seq = seq
                held.failures = failures
            await self._take_over(held, msg, seq)
            return
        # Deliveries that ended with no outcome recorded; a deferred message's early delivery,
        # nak'd until its time, is not one of them.
        unfinished = msg.metadata.num_delivered - 1 - (not_before is not None)
        if unfinished >= self._max_deliveries:
            reason = (
                f"poison: delivered {msg.metadata.num_delivered} times, {unfinished} of them without "
                "an outcome (the replica died, the ack deadline passed or the partition moved first)"
            )
            await self._dead_letter(msg, key, reason)
            return
        self._held[key] = _Item(key, msg, seq, part.index, failures)
        self._queue.add(key)
        self._update_busy()
        self._room_changed()

    async def _take_over(self, item: _Item, msg: Msg, seq: int) -> None:
        """`msg` is a redelivery of `item`'s message (answer through the newest delivery) or an
        older, already replaced one (nothing to do but settle it)."""
        if seq == item.seq:
            item.msg = msg
        else:
            await self._settle(msg.ack(), "ack stale", item.key)

    async def _worker(self) -> None:
        while True:
            cancellation.checkpoint()
            try:
                key = await self._queue.get()
            except queue.ShutDown:
                return
            try:
                await self._work_on(key)
            except Exception:  # a bug in one item must not shrink the pool
                log.exception(
                    "work item failed unexpectedly", extra={"controller": self._controller, "key": key}
                )
            finally:
                self._queue.done(key)
                self._update_busy()

    async def _work_on(self, key: str) -> None:
        item = self._held.get(key)
        if item is None:
            return  # handed back by stop_partition
        part = self._partitions[item.partition]
        if part.stop.is_set():
            return  # stays held; stop_partition hands it back
        del self._held[key]
        # From here on a change needs a message of its own: this reconcile may read too early.
        self._stored.pop(key, None)
        item.started = time.monotonic()
        self._running[key] = item
        part.inflight += 1
        part.idle.clear()
        self.health.tick()
        try:
            await self._reconcile_and_settle(item)
        finally:
            del self._running[key]
            part.inflight -= 1
            if part.inflight == 0:
                part.idle.set()
            self.health.tick()
            self._room_changed()

    async def _reconcile_and_settle(self, item: _Item) -> None:
        key = item.key
        claim = None if self._claim is None else self._claim(key, item.partition)
        if self._claim is not None and claim is None:
            await self._hand_back(item, "partition not owned at start")
            return
        # A task of its own, so stop_partition can cancel one reconcile without the worker.
        item.task = asyncio.create_task(self._traced(item, claim), name=f"reconcile {self._controller} {key}")
        try:
            await asyncio.wait([item.task])
        except asyncio.CancelledError:
            item.task.cancel()
            raise
        if item.task.cancelled():
            await self._settle(item.msg.nak(), "hand back", key)
            return
        exc = item.task.exception()
        if isinstance(exc, NotOwner) or (claim is not None and not claim.valid()):
            # Whatever it did or failed at, the key is the next owner's now.
            await self._hand_back(item, "partition lost during the reconcile")
            return
        remembered = self._failures.pop(key, (item.partition, 0))[1]
        if exc is None:
            result = item.task.result()
            if result is not None and result.requeue_after is not None:
                await self._defer(item, result.requeue_after, failures=0)
            else:
                await self._settle(item.msg.ack(), "ack", key)
            return
        reason = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, TerminalError):
            await self._dead_letter(item.msg, key, reason)
            return
        failures = max(item.failures, remembered) + 1
        self._failures[key] = (item.partition, failures)
        delay = self._limiter.when(key, failures)
        metrics.RETRIES.labels(self._metrics_name).inc()
        log.info(
            "reconcile failed, retrying",
            extra={
                "controller": self._controller,
                "key": key,
                "error": reason,
                "delay": delay,
                "failures": failures,
            },
        )
        await self._defer(item, delay, failures)

    async def _traced(self, item: _Item, claim: fencing.Claim | None) -> Result | None:
        context = tracing.extract(item.msg.headers)
        with (
            fencing.holding(claim),
            tracing.span("reconcile", context=context, controller=self._controller, key=item.key),
        ):
            return await self._reconcile(item.key)

    async def _hand_back(self, item: _Item, why: str) -> None:
        log.info(
            "work item handed back: partition no longer owned",
            extra={"controller": self._controller, "key": item.key, "partition": item.partition, "why": why},
        )
        # Re-published in its own place rather than nak'd: a nak would count as a delivery
        # without an outcome, and enough hand-overs would make a sound item look like poison.
        await self._defer(item, 0.0, item.failures)

    async def _defer(self, item: _Item, delay: float, failures: int) -> None:
        """Re-publish `item`'s key to run after `delay` seconds, `failures` failed in a row."""
        held = self._held.get(item.key)
        if self._pending_message(item.key, item.partition) is not None or (held and held.seq > item.seq):
            # A change stored since this reconcile began runs soon and decides again.
            await self._settle(item.msg.ack(), "ack", item.key)
            return
        headers = {k: v for k, v in (item.msg.headers or {}).items() if k in _TRACE_HEADERS}
        headers[wire.NOT_BEFORE] = f"{time.time() + delay:.3f}"
        if failures:
            headers[wire.FAILURES] = str(failures)
        # Bounded: past ack_wait the old message would be redelivered anyway.
        deadline = time.monotonic() + self._ack_wait / 2
        # Only in place of this very message: once another is stored for the key (a change, or
        # the next owner's fill), that one runs and decides; replacing it would postpone it.
        headers[wire.EXPECTED_LAST_SUBJECT_SEQUENCE] = str(item.seq)
        try:
            stored = await self._store(item.key, item.msg.subject, item.msg.data, headers, deadline)
        except nats.errors.Error as exc:
            if natsconn.wrong_last_sequence(exc):
                await self._settle(item.msg.ack(), "ack", item.key)  # the newer message decides
                return
            log.warning("re-publish failed", extra={"controller": self._controller, "error": repr(exc)})
            stored = False
        if not stored:
            # Still durable, at the cost of one delivery counted as unfinished (and, for a
            # failure, of one step of backoff).
            log.warning(
                "could not re-publish a deferred item, naking it instead",
                extra={"controller": self._controller, "key": item.key},
            )
            await self._settle(item.msg.nak(delay=delay), "nak", item.key)
            return
        await self._settle(item.msg.ack(), "ack", item.key)

    async def _dead_letter(self, msg: Msg, key: str, reason: str) -> None:
        deliveries = msg.metadata.num_delivered
        headers = {
            wire.KEY: key,
            wire.REASON: " ".join(reason.split())[:2000],  # a header value is one line
            wire.DELIVERIES: str(deliveries),
            wire.ORIGINAL_SUBJECT: msg.subject,
        }
        failures = (msg.headers or {}).get(wire.FAILURES)
        if failures is not None:
            headers[wire.FAILURES] = " ".join(failures.split())[:100]
        try:
            await self._js.publish(
                subjects.dlq_subject(self._controller), msg.data, stream=wire.DLQ_STREAM, headers=headers
            )
        except nats.errors.Error as exc:
            # Not recorded anywhere yet: keep the item and try again later rather than drop it.
            log.warning(
                "could not dead-letter, will retry",
                extra={"controller": self._controller, "key": key, "error": repr(exc)},
            )
            await self._settle(msg.nak(delay=MAX_BACKOFF), "nak", key)
            return
        metrics.DEAD_LETTERS.labels(self._controller).inc()
        log.error(
            "work item dead-lettered",
            extra={"controller": self._controller, "key": key, "reason": reason, "deliveries": deliveries},
        )
        await self._settle(msg.term(), "terminate", key)

    async def _keep_alive(self) -> None:
        """In-progress acks for everything held, so JetStream redelivers none of it elsewhere."""
        while True:
            cancellation.checkpoint()
            await asyncio.sleep(self._ack_wait / 3)
            for item in [*self._running.values(), *self._held.values()]:
                await self._settle(item.msg.in_progress(), "in-progress", item.key)

    async def _settle(self, op: Awaitable[Any], what: str, key: str) -> None:
        """Await an ack-like call; failing one only costs a redelivery, so it is logged, not raised."""
        try:
            await op
        except nats.errors.Error as exc:
            log.warning(
                "could not %s a work item",
                what,
                extra={"controller": self._controller, "key": key, "error": repr(exc)},
            )

    def _room_changed(self) -> None:
        if len(self._held) + len(self._running) < self._prefetch:
            self._room.set()
        else:
            self._room.clear()

    def _update_busy(self) -> None:
        # Only transitions reach the watchdog: refreshing it on every add would hide a stall.
        busy = self._queue.len() > 0 or bool(self._running)
        if busy != self._busy:
            self._busy = busy
            self.health.busy(busy)


async def _wait(event: asyncio.Event, seconds: float) -> None:
    """Until `event` is set, or `seconds` passed."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)


def _number(headers: dict[str, str], name: str, kind: type[float] | type[int]) -> float | None:
    """Header `name` as a finite, non-negative number; None when absent. Raises ValueError."""
    text = headers.get(name)
    if text is None:
        return None
    try:
        value = kind(text)
    except ValueError:
        value = -1
    if not 0 <= value < float("inf"):
        raise ValueError(f"header {name} is not a number: {text[:100]!r}")
    return value
