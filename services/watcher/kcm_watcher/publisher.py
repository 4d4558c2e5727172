"""Publishing to JetStream with a bounded window of unacknowledged messages, never dropping one.

`resourcewatch` hands every message to a `Lane` (one per resource). A message is sent at
once and its ack awaited in the background, up to `window` unacknowledged messages over all
lanes; when the window is full, `Lane.publish` blocks, which stops the watch loop from
reading (back-pressure instead of loss). A failed publish is retried with backoff, forever,
with the same `Nats-Msg-Id`, so a message that did land before the failure is absorbed by
JetStream's duplicate window.

Messages go out as core NATS publishes whose reply subjects are tokens under one inbox this
module subscribes to; JetStream's PubAck arrives there and is matched to its message. That
costs no request, future or task per message, which nats-py's `js.publish` would. A
message whose ack has not arrived within `ack_timeout` counts as failed and is retried.

Order: the stream keeps the last message per subject, so what must not be reordered is two
messages of one subject. A lane therefore never has two messages of one subject in flight
(the second waits for the first's ack). `Lane.flush` waits for every message handed over so
far, which a progress marker needs: it may only land after the changes it vouches for.

Fencing: every message carries `wire.EXPECTED_LAST_SUBJECT_SEQUENCE`, the stream sequence
this lane last saw on its subject (`Lane.seqs`, filled from the stream by its owner and
from each PubAck). A deposed watcher that still publishes, or a stream that lost its
content, answers "wrong last sequence"; the lane then asks its owner's `resolver`, which
re-reads the subject and says whether the message is still worth publishing (and at which
sequence) or is to be dropped. That check comes before JetStream's duplicate detection, so
a retry of a message that did land is resolved the same way (the stream holds it already).

What is never retried: a message too large for the server (`max_payload`, read from the
connection) goes out as the same headers plus `wire.TOO_LARGE` (its size) and an empty body, so
subscribers fetch the object from the API server; a request JetStream refuses as bad (400)
is dropped and logged. Everything else (timeouts, a missing stream, a dead connection) is
retried with backoff. Health is per lane: `check` names each lane whose oldest message has
kept failing for longer than the limit.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import msgspec
import nats.errors
from kcm_shared.bus import natsconn, wire
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import api

from kcm_watcher import metrics

log = logging.getLogger("kcm.watcher.publish")

_BACKOFF_BASE = 0.1
_BACKOFF_CAP = 5.0


class _AckError(msgspec.Struct, frozen=True, gc=False):
    code: int = 0
    err_code: int = 0
    description: str = ""


class _Ack(msgspec.Struct, frozen=True, gc=False):
    """JetStream's answer to a publish: an error, or the stream sequence the message got."""

    error: _AckError | None = None
    seq: int = 0


# JetStream's error code (beside natsconn.WRONG_LAST_SEQUENCE) answered here rather than retried.
_MESSAGE_TOO_LARGE = 10054
_HEADER_OVERHEAD = len("NATS/1.0\r\n\r\n")

# Re-reads a subject after "wrong last sequence": the sequence to retry at, or None to drop.
Resolver = Callable[[str, dict[str, str]], Awaitable[int | None]]


_decode_ack = msgspec.json.Decoder(_Ack).decode


class PublishError(Exception):
    """A publish JetStream refused or did not answer (it will be retried)."""


class _Message:
    __slots__ = (
        "attempt",
        "body",
        "done",
        "error",
        "failing_since",
        "handed_at",
        "headers",
        "lane",
        "sent_at",
        "subject",
        "waiter",
    )

    def __init__(self, lane: Lane, subject: str, body: bytes, headers: dict[str, str]) -> None:
        self.lane = lane
        self.handed_at = lane._publisher._clock()  # first attempt; sent_at moves with retries
        self.subject = subject
        self.body = body
        self.headers = headers
        self.attempt = 0
        self.sent_at = 0.0
        self.done = False
        self.failing_since: float | None = None  # first failure since it was handed over
        self.error = ""
        self.waiter: asyncio.Future[None] | None = None  # made only when someone waits

    def size(self) -> int:
        """Bytes the server counts against its max_payload: headers and body."""
        head = sum(len(k) + len(v) + 4 for k, v in self.headers.items())
        return _HEADER_OVERHEAD + head + len(self.body)

    def shrink(self) -> None:
        """Leave the body out (docs/bus.md, "Objects too large for a message")."""
        self.headers[wire.TOO_LARGE] = str(len(self.body))
        self.body = b""

    async def wait(self) -> None:
        if self.done:
            return
        if self.waiter is None:
            self.waiter = asyncio.get_running_loop().create_future()
        await asyncio.shield(self.waiter)


class Publisher:
    """The shared window, the ack inbox and the publish-health of one NATS connection."""

    def __init__(
        self,
        nc: Client,
        *,
        window: int = 512,
        ack_timeout: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._nc = nc
        self._slots = asyncio.Semaphore(window)
        self._ack_timeout = ack_timeout
        self._clock = clock
        self._lanes: set[Lane] = set()
        # Set when a publish found no stream to take it; the supervisor re-declares the stream.
        self.stream_missing = asyncio.Event()
        self._inbox = ""  # "<inbox>." once subscribed; a message's reply is this + its token
        self._subscribing = asyncio.Lock()
        self._tokens = 0
        # reply token -> message sent and not yet answered; in send order, as the sweep needs
        self._awaiting: dict[str, _Message] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._retrying: set[asyncio.Task[None]] = set()

    def lane(self, name: str) -> Lane:
        lane = Lane(self, name)
        self._lanes.add(lane)
        return lane

    def failing_for(self) -> float:
        """Seconds the longest-failing message of any lane has kept failing (0 when healthy)."""
        return max((lane.failing_for() for lane in self._lanes), default=0.0)

    def check(self, limit: float) -> str | None:
        """Names every lane that has not been able to publish for longer than `limit` seconds."""
        problems = []
        for lane in sorted(self._lanes, key=lambda lane: lane.name):
            failing = lane.failing_for()
            if failing > limit:
                problems.append(
                    f"{lane.name}: publishing has failed for {failing:.0f}s ({lane.last_error()})"
                )
        return "; ".join(problems) or None

    async def flush_all(self) -> None:
        await asyncio.gather(*(lane.flush() for lane in list(self._lanes)))

    def abandon_all(self) -> None:
        """Stop retrying whatever is still unacknowledged (shutdown after a bounded flush)."""
        for lane in list(self._lanes):
            lane.abandon()

    async def _subscribe(self) -> None:
        async with self._subscribing:
            if self._inbox:
                return
            inbox = self._nc.new_inbox() + "."
            await self._nc.subscribe(inbox + "*", cb=self._on_reply)
            self._inbox = inbox

    async def _send(self, msg: _Message) -> None:
        """Put one attempt on the wire; its answer (or its absence) is handled elsewhere."""
        msg.headers[wire.EXPECTED_LAST_SUBJECT_SEQUENCE] = str(msg.lane.seqs.get(msg.subject, 0))
        if msg.body and msg.size() > self._nc.max_payload:
            self._too_large(msg, f"{msg.size()} bytes, the server takes {self._nc.max_payload}")
        self._tokens += 1
        token = str(self._tokens)
        msg.sent_at = self._clock()
        self._awaiting[token] = msg
        if self._sweeper is None:
            self._sweeper = asyncio.ensure_future(self._sweep())
        try:
            await self._nc.publish(msg.subject, msg.body, reply=self._inbox + token, headers=msg.headers)
        except nats.errors.MaxPayloadError:
            # Only when even the headers do not fit: nothing to leave out, and no retry helps.
            if self._awaiting.pop(token, None) is msg:
                self._drop(msg, f"larger than the server's max_payload {self._nc.max_payload}")
        except (nats.errors.Error, OSError) as exc:
            if self._awaiting.pop(token, None) is msg:
                self._failed(msg, exc)

    def _too_large(self, msg: _Message, why: str) -> None:
        metrics.TOO_LARGE.inc()
        log.warning(
            "object too large for a message, published without its body",
            extra={"subject": msg.subject, "bytes": len(msg.body), "reason": why},
        )
        msg.shrink()

    def _drop(self, msg: _Message, why: str) -> None:
        """Give up on a message no retry can deliver (its owner's next relist repairs the stream)."""
        metrics.DROPPED.inc()
        log.error("publish refused for good, message dropped", extra={"subject": msg.subject, "error": why})
        msg.lane._finish(msg)

    async def _on_reply(self, reply: Msg) -> None:
        msg = self._awaiting.pop(reply.subject[len(self._inbox) :], None)
        if msg is None or msg.done:
            return  # the answer to an attempt already given up on (timed out, abandoned)
        if not reply.data:
            # A status message instead of a PubAck: no stream takes the subject (any more).
            status = (reply.headers or {}).get(api.Header.STATUS, "")
            self.stream_missing.set()
            self._failed(msg, PublishError(f"no stream answered (status {status or 'none'})"))
            return
        try:
            ack = _decode_ack(reply.data)
        except msgspec.DecodeError as exc:
            self._failed(msg, exc)
            return
        error = ack.error
        if error is None:
            metrics.PUBLISHED.inc()
            msg.lane.seqs[msg.subject] = ack.seq
            msg.lane.acked_at = self._clock()
            msg.lane._finish(msg)
        elif error.err_code in natsconn.WRONG_LAST_SEQUENCE:
            metrics.CONFLICTS.inc()
            self._spawn(self._resolve(msg))
        elif error.err_code == _MESSAGE_TOO_LARGE and msg.body:
            self._too_large(msg, error.description)
            self._spawn(self._send(msg))
        elif error.code == 400:
            self._drop(msg, f"{error.err_code} {error.description}")
        else:
            self._failed(msg, PublishError(f"{error.code} {error.description}"))

    async def _resolve(self, msg: _Message) -> None:
        """After "wrong last sequence": re-read the subject (the lane's resolver) and retry or drop."""
        resolver = msg.lane.resolver
        if resolver is None:
            self._drop(msg, "wrong last sequence, and nothing to re-read the subject with")
            return
        try:
            seq = await resolver(msg.subject, msg.headers)
        except (nats.errors.Error, OSError, TimeoutError) as exc:
            self._failed(msg, exc)  # the retry meets the same answer and resolves again
            return
        if msg.done:
            return  # abandoned meanwhile
        if seq is None:
            metrics.SUPERSEDED.inc()
            msg.lane._finish(msg)
            return
        msg.lane.seqs[msg.subject] = seq
        await self._send(msg)

    async def _sweep(self) -> None:
        """Fail the attempts whose ack is overdue; runs while any attempt awaits its ack."""
        try:
            while self._awaiting:
                await asyncio.sleep(self._ack_timeout / 4)
                overdue = self._clock() - self._ack_timeout
                while self._awaiting:
                    token, msg = next(iter(self._awaiting.items()))
                    if msg.sent_at > overdue:
                        break
                    del self._awaiting[token]
                    if not msg.done:
                        self._failed(msg, TimeoutError(f"no ack within {self._ack_timeout}s"))
        finally:
            self._sweeper = None

    def _failed(self, msg: _Message, exc: BaseException) -> None:
        metrics.PUBLISH_ERRORS.inc()
        if msg.failing_since is None:
            msg.failing_since = self._clock()
        msg.error = repr(exc)
        if msg.attempt % 20 == 0:  # keep an outage from flooding the log
            log.warning(
                "publish failed, retrying",
                extra={"subject": msg.subject, "error": repr(exc), "attempt": msg.attempt},
            )
        delay = min(_BACKOFF_CAP, _BACKOFF_BASE * 2 ** min(msg.attempt, 10))
        msg.attempt += 1
        asyncio.get_running_loop().call_later(delay, self._retry, msg)

    def _retry(self, msg: _Message) -> None:
        if msg.done:
            return  # abandoned meanwhile
        self._spawn(self._send(msg))

    def _spawn(self, coro: Awaitable[None]) -> None:
        # Retries are rare, so a task each is affordable; the loop only keeps weak references.
        task = asyncio.ensure_future(coro)
        self._retrying.add(task)
        task.add_done_callback(self._retrying.discard)


class Lane:
    """One resource's ordered path to the stream; see the module docstring for the guarantees."""

    def __init__(self, publisher: Publisher, name: str) -> None:
        self.name = name
        self._publisher = publisher
        self._inflight: dict[str, _Message] = {}  # in hand-over order: the first is the oldest
        self.acked_at: float | None = None  # monotonic time of the last acknowledgement
        # subject -> the stream sequence of its last message, as far as this lane knows; the
        # owner fills it from the stream before publishing (0: the subject has no message).
        self.seqs: dict[str, int] = {}
        self.resolver: Resolver | None = None

    def failing_for(self) -> float:
        """Seconds this lane's longest-failing message has kept failing (0 when none fails)."""
        since = [m.failing_since for m in self._inflight.values() if m.failing_since is not None]
        return self._publisher._clock() - min(since) if since else 0.0

    def last_error(self) -> str:
        failing = [m for m in self._inflight.values() if m.failing_since is not None]
        return min(failing, key=lambda m: m.failing_since or 0.0).error if failing else ""

    async def publish(
        self, subject: str, body: bytes, headers: dict[str, str], ttl: float | None = None
    ) -> None:
        """Hand a message over (`headers` become the message's); returns once it is in flight.

        Cancelling this call before it took a window slot hands nothing over; once it has, the
        message is delivered even if the call is cancelled while sending it.
        """
        pub = self._publisher
        if not pub._inbox:
            await pub._subscribe()
        earlier = self._inflight.get(subject)
        while earlier is not None:
            await earlier.wait()
            earlier = self._inflight.get(subject)
        await pub._slots.acquire()
        if ttl is not None:
            headers[wire.MSG_TTL] = str(int(ttl))
        msg = _Message(self, subject, body, headers)
        self._inflight[subject] = msg
        metrics.INFLIGHT.inc()
        await pub._send(msg)

    def _finish(self, msg: _Message) -> None:
        if msg.done:
            return
        msg.done = True
        if self._inflight.get(msg.subject) is msg:
            del self._inflight[msg.subject]
        self._publisher._slots.release()
        metrics.INFLIGHT.dec()
        if msg.waiter is not None and not msg.waiter.done():
            msg.waiter.set_result(None)

    def unacked(self) -> tuple[int, float | None]:
        """Messages handed over and not acknowledged, and when the oldest of them was handed over."""
        oldest = next(iter(self._inflight.values()), None)
        return len(self._inflight), None if oldest is None else oldest.handed_at

    async def flush(self) -> None:
        """Wait until everything handed over so far is acknowledged."""
        for msg in list(self._inflight.values()):
            await msg.wait()

    def abandon(self) -> None:
        for msg in list(self._inflight.values()):
            self._finish(msg)

    def close(self) -> None:
        self._publisher._lanes.discard(self)
