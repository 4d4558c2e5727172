"""Publishing to JetStream with a bounded window of unacknowledged messages, never dropping one.

`resourcewatch` hands every message to a `Lane` (one per resource). A message is sent at
once and its ack awaited in the background, up to `window` unacknowledged messages over all
lanes; when the window is full, `Lane.publish` blocks, which stops the watch loop from
reading (back-pressure instead of loss). A failed publish is retried with backoff, forever,
with the same `Nats-Msg-Id`, so a message that did land before the failure is absorbed by
JetStream's duplicate window.

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

import nats.errors
from nats.js import JetStreamContext

from kcm_watcher import metrics

log = logging.getLogger("kcm.watcher.publish")

_BACKOFF_BASE = 0.1
_BACKOFF_CAP = 5.0


class Publisher:
    """The shared window and the publish-health of one NATS connection."""

    def __init__(
        self,
        js: JetStreamContext,
        *,
        window: int = 512,
        ack_timeout: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._js = js
        self._slots = asyncio.Semaphore(window)
        self._ack_timeout = ack_timeout
        self._clock = clock
        self._failing_since: float | None = None
        self._lanes: set[Lane] = set()

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

    async def _deliver(self, subject: str, body: bytes, headers: dict[str, str], ttl: float | None) -> None:
        attempt = 0
        while True:
            try:
                await self._js.publish(
                    subject, body, timeout=self._ack_timeout, headers=dict(headers), msg_ttl=ttl
                )
            except (nats.errors.Error, TimeoutError, OSError) as exc:
                metrics.PUBLISH_ERRORS.inc()
                if self._failing_since is None:
                    self._failing_since = self._clock()
                if attempt % 20 == 0:  # keep an outage from flooding the log
                    log.warning(
                        "publish failed, retrying",
                        extra={"subject": subject, "error": repr(exc), "attempt": attempt},
                    )
                await asyncio.sleep(min(_BACKOFF_CAP, _BACKOFF_BASE * 2 ** min(attempt, 10)))
                attempt += 1
                continue
            metrics.PUBLISHED.inc()
            self._failing_since = None
            return


class Lane:
    """One resource's ordered path to the stream; see the module docstring for the guarantees."""

    def __init__(self, publisher: Publisher, name: str) -> None:
        self.name = name
        self._publisher = publisher
        self._inflight: dict[str, asyncio.Task[None]] = {}

    async def publish(
        self, subject: str, body: bytes, headers: dict[str, str], ttl: float | None = None
    ) -> None:
        """Hand a message over; returns once it is in flight (its delivery is then certain).

        Cancelling this call before it returns hands nothing over.
        """
        earlier = self._inflight.get(subject)
        while earlier is not None:
            await asyncio.wait({earlier})
            earlier = self._inflight.get(subject)
        await self._publisher._slots.acquire()
        # From here to the return there is no await: a cancelled caller either handed the
        # message over completely or not at all.
        metrics.INFLIGHT.inc()
        task = asyncio.ensure_future(self._publisher._deliver(subject, body, headers, ttl))
        self._inflight[subject] = task
        task.add_done_callback(lambda t: self._done(subject, t))

    def _done(self, subject: str, task: asyncio.Task[None]) -> None:
        if self._inflight.get(subject) is task:
            del self._inflight[subject]
        self._publisher._slots.release()
        metrics.INFLIGHT.dec()

    async def flush(self) -> None:
        """Wait until everything handed over so far is acknowledged."""
        pending = set(self._inflight.values())
        if pending:
            await asyncio.wait(pending)

    def abandon(self) -> None:
        for task in list(self._inflight.values()):
            task.cancel()

    def close(self) -> None:
        self._publisher._lanes.discard(self)
