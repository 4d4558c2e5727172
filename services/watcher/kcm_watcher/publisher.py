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
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import msgspec
import nats.errors
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
    """JetStream's answer to a publish; only whether it is an error matters here."""

    error: _AckError | None = None


_decode_ack = msgspec.json.Decoder(_Ack).decode


class PublishError(Exception):
    """A publish JetStream refused or did not answer (it will be retried)."""


class _Message:
    __slots__ = ("attempt", "body", "done", "handed_at", "headers", "lane", "sent_at", "subject", "waiter")

    def __init__(self, lane: Lane, subject: str, body: bytes, headers: dict[str, str]) -> None:
        self.lane = lane
        self.handed_at = lane._publisher._clock()  # first attempt; sent_at moves with retries
        self.subject = subject
        self.body = body
        self.headers = headers
        self.attempt = 0
        self.sent_at = 0.0
        self.done = False
        self.waiter: asyncio.Future[None] | None = None  # made only when someone waits

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
        self._failing_since: float | None = None
        self._lanes: set[Lane] = set()
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
        """Seconds publishing has failed without a success in between (0 when healthy)."""
        return 0.0 if self._failing_since is None else self._clock() - self._failing_since

    def check(self, limit: float) -> str | None:
        failing = self.failing_for()
        if failing > limit:
            return f"publishing to NATS has failed for {failing:.0f}s"
        return None

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
        self._tokens += 1
        token = str(self._tokens)
        msg.sent_at = self._clock()
        self._awaiting[token] = msg
        if self._sweeper is None:
            self._sweeper = asyncio.ensure_future(self._sweep())
        try:
            await self._nc.publish(msg.subject, msg.body, reply=self._inbox + token, headers=msg.headers)
        except (nats.errors.Error, OSError) as exc:
            if self._awaiting.pop(token, None) is msg:
                self._failed(msg, exc)

    async def _on_reply(self, reply: Msg) -> None:
        msg = self._awaiting.pop(reply.subject[len(self._inbox) :], None)
        if msg is None or msg.done:
            return  # the answer to an attempt already given up on (timed out, abandoned)
        if not reply.data:
            # A status message instead of a PubAck: no stream takes the subject (yet).
            status = (reply.headers or {}).get(api.Header.STATUS, "")
            self._failed(msg, PublishError(f"no stream answered (status {status or 'none'})"))
            return
        try:
            ack = _decode_ack(reply.data)
        except msgspec.DecodeError as exc:
            self._failed(msg, exc)
            return
        if ack.error is not None:
            self._failed(msg, PublishError(f"{ack.error.code} {ack.error.description}"))
            return
        metrics.PUBLISHED.inc()
        self._failing_since = None
        msg.lane.acked_at = self._clock()
        msg.lane._finish(msg)

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
        if self._failing_since is None:
            self._failing_since = self._clock()
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
        # Retries are rare, so a task each is affordable; the loop only keeps weak references.
        task = asyncio.ensure_future(self._send(msg))
        self._retrying.add(task)
        task.add_done_callback(self._retrying.discard)


class Lane:
    """One resource's ordered path to the stream; see the module docstring for the guarantees."""

    def __init__(self, publisher: Publisher, name: str) -> None:
        self.name = name
        self._publisher = publisher
        self._inflight: dict[str, _Message] = {}  # in hand-over order: the first is the oldest
        self.acked_at: float | None = None  # monotonic time of the last acknowledgement

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
            headers[api.Header.MSG_TTL] = str(int(ttl))
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
