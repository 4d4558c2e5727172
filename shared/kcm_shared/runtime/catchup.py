"""Catch-up reads shared by every cache of one process: per resource, one LIST and one watcher
sync request serve a whole burst of askers, not one each.

- `SingleFlight.read(key, fetch, covers)` answers the value of a `fetch` that `covers` accepts
  and that started after the call began, or (with `share_in_flight`, for answers that stay true
  once given) the one in flight then; askers queued while one fetch runs share the next one. A
  failed fetch fails only its own caller; the next in line fetches anew.
- Catch-up LISTs never share a fetch in flight: it may predate the asker, and a catch-up must
  reach the API server's state as of the asking. Watcher answers do: "a marker at or beyond R is
  published" stays true.
- `WatcherSync.ask(resource, rv)` returns once the watcher has confirmed a progress marker at or
  beyond `rv` (`kcm.watcher.sync`), retrying with backoff while no watcher answers or it refuses
  (waiting out its `retryAfter`); it never gives up by itself: the caller bounds it.
- `ResourceVersions.current(resource, client)` is the API server's resourceVersion as of now (a
  list with limit=1, the cheapest consistent read).

Without this, a controllers process of many controllers sent one request per cache and per
controller at start-up, which the watcher's per-requester rate refused by the hundred on
kube-apiserver (and the LISTs spent the client's QPS). The Manager makes one `WatcherSync` and
one `ResourceVersions` per process; a Cache made without them (tests, tools) makes its own.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import nats.errors
from nats.aio.client import Client

from kcm_shared.apimachinery import gvr, resourceversion
from kcm_shared.bus import wire
from kcm_shared.client import kubeclient

log = logging.getLogger("kcm.cache")

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_REQUEST_TIMEOUT = 35.0  # the watcher may relist before it answers: its own limit is 30 s
_MAX_BACKOFF = 5.0


@dataclass
class _Slot(Generic[V]):
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    started: int = 0  # fetches started so far
    done: int = 0  # the number of the last fetch that succeeded (0: none)
    value: V | None = None


class SingleFlight(Generic[K, V]):
    """One fetch at a time per key, shared by the askers queued behind it (module docstring)."""

    def __init__(self, *, share_in_flight: bool = False) -> None:
        self._slots: dict[K, _Slot[V]] = {}
        self._share_in_flight = share_in_flight

    async def read(
        self, key: K, fetch: Callable[[], Awaitable[V]], covers: Callable[[V], bool] = lambda _: True
    ) -> V:
        slot = self._slots.setdefault(key, _Slot())
        # Fetches numbered above `ticket` are ones this asker may take the answer of.
        ticket = slot.started - 1 if self._share_in_flight and slot.lock.locked() else slot.started
        async with slot.lock:
            if slot.done > ticket and slot.value is not None and covers(slot.value):
                return slot.value
            slot.started += 1
            number = slot.started
            value = await fetch()
            slot.value, slot.done = value, number
            return value


def rv_at_least(have: str, want: str) -> bool:
    """`have >= want` for resourceVersions: numeric when both are (etcd's and ours are)."""
    if not want:
        return True
    if not have:
        return False
    try:
        return int(have) >= int(want)
    except ValueError:
        return have == want


async def current_resource_version(client: kubeclient.KubeClient, res: gvr.Resource) -> str:
    path = kubeclient.resource_path(res.group, res.version, res.resource)
    listing = await client.get(path, {"limit": "1"})
    return str(listing.get("metadata", {}).get("resourceVersion", ""))


class ResourceVersions:
    def __init__(self) -> None:
        self._reads: SingleFlight[gvr.Resource, str] = SingleFlight()

    async def current(self, res: gvr.Resource, client: kubeclient.KubeClient) -> str:
        return await self._reads.read(res, lambda: current_resource_version(client, res))


def sync_refusal(reply: bytes) -> tuple[str, float] | None:
    """The watcher's refusal (`{"ok": false, "error": ..., "retryAfter": seconds}`) as the error
    and the seconds to wait before asking again (over its rate), or None when it answered yes."""
    try:
        answer = json.loads(reply)
    except ValueError:
        return f"unreadable reply {reply[:100]!r}", 0.0
    if isinstance(answer, dict) and answer.get("ok") is False:
        retry_after = answer.get("retryAfter")
        wait = float(retry_after) if isinstance(retry_after, int | float) else 0.0
        return str(answer.get("error") or "refused"), min(max(wait, 0.0), 60.0)
    return None


def _confirmed(reply: bytes, asked: str) -> str:
    """The marker's resourceVersion the watcher answered with, or the one asked for."""
    try:
        answer = json.loads(reply)
    except ValueError:
        return asked
    rv = answer.get("resourceVersion") if isinstance(answer, dict) else None
    if isinstance(rv, str) and resourceversion.number(rv) is not None and rv_at_least(rv, asked):
        return rv
    return asked


class WatcherSync:
    def __init__(self, nc: Client) -> None:
        self._nc = nc
        self._asks: SingleFlight[gvr.Resource, str] = SingleFlight(share_in_flight=True)

    async def ask(self, res: gvr.Resource, resource_version: str) -> None:
        await self._asks.read(
            res,
            lambda: self._request(res, resource_version),
            lambda confirmed: rv_at_least(confirmed, resource_version),
        )

    async def _request(self, res: gvr.Resource, resource_version: str) -> str:
        body = json.dumps(
            {
                "group": res.group,
                "version": res.version,
                "resource": res.resource,
                "resourceVersion": resource_version,
            }
        ).encode()
        attempt = 0
        while True:
            try:
                reply = await self._nc.request(wire.WATCHER_SYNC, body, timeout=_REQUEST_TIMEOUT)
                refusal = sync_refusal(reply.data)
                if refusal is None:
                    return _confirmed(reply.data, resource_version)
                error, retry_after = refusal
                log.warning(
                    "the watcher could not sync",
                    extra={"resource": str(res), "rv": resource_version, "error": error},
                )
            except (nats.errors.NoRespondersError, nats.errors.TimeoutError) as exc:
                retry_after = 0.0
                log.info(
                    "no watcher answered a sync request yet",
                    extra={"resource": str(res), "rv": resource_version, "error": repr(exc)},
                )
            await asyncio.sleep(max(retry_after, min(_MAX_BACKOFF, 0.1 * 2**attempt)))
            attempt += 1
