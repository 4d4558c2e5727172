"""`kcm.watcher.sync`: "tell me when the stream has caught up with resourceVersion R".

The supervisor starts it while this replica leads and stops it when leadership ends, so only
the active watcher answers. Each request is answered by the resource's `ResourceWatch`
once a progress marker at or beyond R is acknowledged (docs/bus.md). A controller calls it
before it starts reconciling, so it never acts on a cache older than the API server was when
it asked (architecture invariant 6).

- A request needs a numeric resourceVersion: an empty or opaque one could only be answered by
  a relist, so anyone allowed to ask could make the watcher LIST at will.
- Requests are rate-limited per requester (its reply subject without the last token: one
  nats-py connection's inbox) and in total, since a reply subject is the requester's to
  choose; one over the rate is answered `{"ok": false, "retryAfter": seconds}`, which the
  cache waits out before asking again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec
from kcm_shared.apimachinery import gvr, resourceversion
from kcm_shared.bus import subjects, wire
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from kcm_watcher import resourcewatch

log = logging.getLogger("kcm.watcher.sync")

QUEUE_GROUP = "kcm-watcher"
_MAX_PENDING = 256  # requests being answered at once; beyond that, answered "busy"
# A controller process asks once per cache at start (dozens of resources) and then as it
# catches up: a burst of that size, then a few a second. The total allows several processes.
REQUESTER_RATE = (64.0, 8.0)  # (burst, per second)
TOTAL_RATE = (512.0, 64.0)
_MAX_REQUESTERS = 4096  # requesters remembered; the fullest buckets are forgotten first


class SyncRequest(msgspec.Struct, frozen=True, rename="camel"):
    version: str
    resource: str
    group: str = ""
    resource_version: str = ""


class SyncReply(msgspec.Struct, frozen=True, omit_defaults=True, rename="camel"):
    ok: bool
    resource_version: str = ""
    error: str = ""
    retry_after: float = 0.0  # seconds: refused for the rate, ask again after this


@dataclass
class _Bucket:
    """A token bucket: `burst` requests at once, refilled at `rate` a second."""

    burst: float
    rate: float
    tokens: float = field(init=False)
    at: float = field(default=0.0)

    def __post_init__(self) -> None:
        self.tokens = self.burst

    def take(self, now: float) -> float:
        """Take one token: 0 when there was one, else the seconds until there is."""
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


class RateLimit:
    """Per requester and in total; `wait(requester)` is 0 when the request may go ahead."""

    def __init__(
        self,
        per_requester: tuple[float, float] = REQUESTER_RATE,
        total: tuple[float, float] = TOTAL_RATE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._per_requester = per_requester
        self._total = _Bucket(*total, at=clock())
        self._buckets: dict[str, _Bucket] = {}
        self._clock = clock

    def wait(self, requester: str) -> float:
        now = self._clock()
        bucket = self._buckets.get(requester)
        if bucket is None:
            if len(self._buckets) >= _MAX_REQUESTERS:
                self._forget(now)
            bucket = self._buckets[requester] = _Bucket(*self._per_requester, at=now)
        return bucket.take(now) or self._total.take(now)

    def _forget(self, now: float) -> None:
        # A bucket refilled to its burst is the same as a new one.
        for key in [k for k, b in self._buckets.items() if b.tokens + (now - b.at) * b.rate >= b.burst]:
            del self._buckets[key]
        if len(self._buckets) >= _MAX_REQUESTERS:
            self._buckets.clear()


def requester(reply: str) -> str:
    """Who asked: nats-py replies to `<its connection's inbox>.<token>`."""
    return reply.rpartition(".")[0] or reply


_decode = msgspec.json.Decoder(SyncRequest).decode
_encode = msgspec.json.Encoder().encode


class SyncServer:
    def __init__(
        self,
        nc: Client,
        lookup: Callable[[gvr.Resource], resourcewatch.ResourceWatch | None],
        *,
        grace: float = 2.0,
        timeout: float = 30.0,
    ) -> None:
        self._nc = nc
        self._lookup = lookup
        self._grace = grace
        self._timeout = timeout
        self._sub: Subscription | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._limit = RateLimit()

    async def start(self) -> None:
        self._sub = await self._nc.subscribe(wire.WATCHER_SYNC, queue=QUEUE_GROUP, cb=self._on_request)

    async def stop(self) -> None:
        if self._sub is not None:
            sub, self._sub = self._sub, None
            await sub.unsubscribe()
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks)

    async def _on_request(self, msg: Msg) -> None:
        if subjects.replayed(msg.reply):
            # A stream message a push consumer aimed here: answering would ack it for its maker.
            extra = {"subscription": wire.WATCHER_SYNC, "subject": msg.subject, "reply": msg.reply}
            log.warning("replayed message dropped", extra=extra)
            return
        # The subscription delivers one message at a time: answer each in its own task.
        if len(self._tasks) >= _MAX_PENDING:
            await msg.respond(_encode(SyncReply(False, error="busy, retry")))
            return
        wait = self._limit.wait(requester(msg.reply))
        if wait:
            log.info("sync request over the rate", extra={"requester": requester(msg.reply)})
            await msg.respond(_encode(SyncReply(False, error="too many sync requests", retry_after=wait)))
            return
        task = asyncio.ensure_future(self._answer(msg))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, msg: Msg) -> None:
        reply = await self._reply(msg.data)
        try:
            await msg.respond(_encode(reply))
        except Exception as exc:  # a reply that cannot be sent is the requester's timeout
            log.info("could not answer sync request", extra={"error": repr(exc)})

    async def _reply(self, data: bytes) -> SyncReply:
        try:
            req = _decode(data)
        except msgspec.DecodeError as exc:
            return SyncReply(False, error=f"bad request: {exc}")
        if resourceversion.number(req.resource_version) is None:
            return SyncReply(
                False, error=f"bad request: resourceVersion {req.resource_version!r} is not a number"
            )
        res = gvr.Resource(req.group, req.version, req.resource)
        watch = self._lookup(res)
        if watch is None:
            return SyncReply(False, error=f"{res} is not watched")
        try:
            async with asyncio.timeout(self._timeout):
                rv = await watch.wait_progress(req.resource_version, self._grace)
        except TimeoutError:
            return SyncReply(
                False, error=f"{res} did not reach {req.resource_version} in {self._timeout:.0f}s"
            )
        return SyncReply(True, resource_version=rv)
