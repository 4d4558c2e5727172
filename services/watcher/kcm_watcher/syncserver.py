"""`kcm.watcher.sync`: "tell me when the stream has caught up with resourceVersion R".

The supervisor starts it while this replica leads and stops it when leadership ends, so only
the active watcher answers. Each request is answered by the resource's `ResourceWatch`
once a progress marker at or beyond R is acknowledged (docs/bus.md). A controller calls it
before it starts reconciling, so it never acts on a cache older than the API server was when
it asked (architecture invariant 6).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import msgspec
from kcm_shared.apimachinery import gvr
from kcm_shared.bus import wire
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from kcm_watcher import resourcewatch

log = logging.getLogger("kcm.watcher.sync")

QUEUE_GROUP = "kcm-watcher"
_MAX_PENDING = 256  # requests being answered at once; beyond that, answered "busy"


class SyncRequest(msgspec.Struct, frozen=True, rename="camel"):
    version: str
    resource: str
    group: str = ""
    resource_version: str = ""


class SyncReply(msgspec.Struct, frozen=True, omit_defaults=True, rename="camel"):
    ok: bool
    resource_version: str = ""
    error: str = ""


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
        # The subscription delivers one message at a time: answer each in its own task.
        if len(self._tasks) >= _MAX_PENDING:
            await msg.respond(_encode(SyncReply(False, error="busy, retry")))
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
