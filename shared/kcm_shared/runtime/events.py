"""Recording core/v1 Events the way client-go's tools/record does, so `kubectl describe` reads the same.

Controllers call `EventRecorder.event(obj, "Normal", "SuccessfulCreate", "Created pod: x")`
from their sync or handlers; it never blocks: the event goes onto a bounded queue (dropped
and counted when full) and `run()`, started by the controller runtime beside the caches,
writes it. Before writing, upstream's EventCorrelator steps are applied:

1. Spam filter: a token bucket per source and involved object (burst 25, one token per
   5 minutes); events beyond it are dropped.
2. Aggregation: when more than `MAX_SIMILAR` events with the same source, object, type and
   reason but different messages arrive within `WINDOW`, they are folded into one Event
   whose message says "(combined from similar events): ...".
3. Dedup: an event equal to one written within `WINDOW` (same object, type, reason, message,
   source) PATCHes that Event's count, message and lastTimestamp instead of creating a new one.

Events are written at `kubeclient.Priority.LOW`: when the client's rate limit makes requests
wait, the controller's own writes go first (docs/runtime.md, "Client rate limit").

An Event queued during a reconcile is written under that reconcile's fencing claim
(`kcm_shared.bus.fencing`): once the key's partition is no longer this replica's, it is dropped
(counted as `fenced`) rather than written by a replica that no longer owns the object.

New Events are named `<object name>.<hex unix nanoseconds>` in the object's namespace
(`default` for cluster-scoped objects), with `source.component`/`reportingComponent` set
to the recorder's component, as upstream does.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import prometheus_client

from kcm_shared import reconcile
from kcm_shared.apimachinery import codec
from kcm_shared.bus import fencing
from kcm_shared.client import kubeclient, tokenbucket

log = logging.getLogger("kcm.events")

NORMAL = "Normal"
WARNING = "Warning"

WINDOW = 600.0  # seconds: aggregation interval and dedup window
MAX_SIMILAR = 10  # distinct messages of one object+reason before they are combined
COMBINED_PREFIX = "(combined from similar events): "
SPAM_BURST = 25
SPAM_QPS = 1.0 / 300.0
CACHE_SIZE = 4096  # entries per correlation cache, as upstream's LRU caches
QUEUE_SIZE = 1000
WRITE_ATTEMPTS = 4

DROPPED = prometheus_client.Counter(
    "kcm_events_dropped_total",
    "Events not written, by reason (queue_full, spam, write_failed, invalid, fenced).",
    ["component", "reason"],
)


@dataclass
class _Observed:
    count: int
    first_timestamp: str
    name: str
    namespace: str
    seen: float


@dataclass
class _Similar:
    messages: set[str]
    seen: float


class _LRU(OrderedDict[str, Any]):
    """A bounded map that forgets its least recently used entry, like upstream's caches."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self._size = size

    def touch(self, key: str, value: Any) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self._size:
            self.popitem(last=False)


def reference(obj: codec.Meta | Mapping[str, Any]) -> dict[str, str]:
    """The involvedObject for a cached view, a raw object dict, or an ObjectReference dict."""
    if isinstance(obj, codec.Meta):
        m = obj.metadata
        ref = {
            "kind": obj.kind,
            "apiVersion": obj.api_version,
            "namespace": m.namespace,
            "name": m.name,
            "uid": m.uid,
            "resourceVersion": m.resource_version,
        }
    elif "metadata" in obj:
        meta = obj["metadata"]
        ref = {
            "kind": obj.get("kind", ""),
            "apiVersion": obj.get("apiVersion", ""),
            "namespace": meta.get("namespace", ""),
            "name": meta.get("name", ""),
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        }
    else:
        ref = {k: str(v) for k, v in obj.items() if v}
    return {k: v for k, v in ref.items() if v}


class EventRecorder:
    def __init__(
        self,
        client: kubeclient.KubeClient,
        component: str,
        host: str = "",
        *,
        clock: Callable[[], float] = time.time,
        queue_size: int = QUEUE_SIZE,
    ) -> None:
        self._client = client
        self.component = component
        self.host = host
        self._clock = clock
        self._queue: asyncio.Queue[tuple[dict[str, Any], fencing.Claim | None]] = asyncio.Queue(queue_size)
        self._spam: _LRU = _LRU(CACHE_SIZE)
        self._similar: _LRU = _LRU(CACHE_SIZE)
        self._observed: _LRU = _LRU(CACHE_SIZE)

    def event(
        self,
        obj: codec.Meta | Mapping[str, Any],
        type_: str,
        reason: str,
        message: str,
        *,
        host: str | None = None,
    ) -> None:
        """Queue an Event about `obj`; never blocks, drops (and counts) when the queue is full.

        `host` stands in for the recorder's own (the simulator records for many nodes' kubelets)."""
        if type_ not in (NORMAL, WARNING):
            log.error("unsupported event type", extra={"type": type_, "reason": reason})
            DROPPED.labels(self.component, "invalid").inc()
            return
        involved = reference(obj)
        now = self._clock()
        stamp = _timestamp(now)
        host = self.host if host is None else host
        source = {"component": self.component, **({"host": host} if host else {})}
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{involved.get('name', '')}.{int(now * 1e9):x}",
                "namespace": involved.get("namespace") or "default",
            },
            "involvedObject": involved,
            "type": type_,
            "reason": reason,
            "message": message,
            "source": source,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "reportingComponent": self.component,
            "reportingInstance": host,
        }
        try:
            self._queue.put_nowait((event, fencing.current()))
        except asyncio.QueueFull:
            DROPPED.labels(self.component, "queue_full").inc()

    async def run(self) -> None:
        """Write queued events until cancelled."""
        while True:
            event, claim = await self._queue.get()
            try:
                with fencing.holding(claim):
                    await self._record(event)
            except reconcile.NotOwner:
                DROPPED.labels(self.component, "fenced").inc()
            except Exception:
                log.exception("recording an event failed", extra={"reason": event["reason"]})
            finally:
                self._queue.task_done()

    async def flush(self) -> None:
        """Wait until every event queued so far is written or dropped (needs `run()` running)."""
        await self._queue.join()

    async def _record(self, event: dict[str, Any]) -> None:
        now = self._clock()
        if not self._allowed_by_spam_filter(event, now):
            DROPPED.labels(self.component, "spam").inc()
            return
        key = self._aggregate(event, now)
        last: _Observed | None = self._observed.get(key)
        if last is not None and now - last.seen <= WINDOW:
            event["count"] = last.count + 1
            event["firstTimestamp"] = last.first_timestamp
            event["metadata"] = {"name": last.name, "namespace": last.namespace}
        written = await self._write(event, patch=last is not None and now - last.seen <= WINDOW)
        if written is None:
            DROPPED.labels(self.component, "write_failed").inc()
            return
        meta = written.get("metadata", {})
        self._observed.touch(
            key,
            _Observed(
                int(written.get("count") or event["count"]),
                str(written.get("firstTimestamp") or event["firstTimestamp"]),
                str(meta.get("name") or event["metadata"]["name"]),
                str(meta.get("namespace") or event["metadata"]["namespace"]),
                now,
            ),
        )

    def _allowed_by_spam_filter(self, event: dict[str, Any], now: float) -> bool:
        key = _join(_source_key(event), _object_key(event))
        bucket: tokenbucket.TokenBucket | None = self._spam.get(key)
        if bucket is None:
            bucket = tokenbucket.TokenBucket(SPAM_QPS, SPAM_BURST, clock=self._clock)
        self._spam.touch(key, bucket)
        return bucket.try_take()

    def _aggregate(self, event: dict[str, Any], now: float) -> str:
        """Fold many similar events into one; returns the dedup key to write `event` under."""
        similar_key = _join(
            _source_key(event),
            _object_key(event),
            event["type"],
            event["reason"],
            event["reportingComponent"],
            event["reportingInstance"],
        )
        record: _Similar | None = self._similar.get(similar_key)
        if record is None or now - record.seen > WINDOW:
            record = _Similar(set(), now)
        record.messages.add(event["message"])
        record.seen = now
        self._similar.touch(similar_key, record)
        if len(record.messages) < MAX_SIMILAR:
            return _join(similar_key, event["message"])
        event["message"] = COMBINED_PREFIX + event["message"]
        return similar_key

    async def _write(self, event: dict[str, Any], *, patch: bool) -> dict[str, Any] | None:
        meta = event["metadata"]
        collection = kubeclient.resource_path("", "v1", "events", meta["namespace"])
        one = kubeclient.resource_path("", "v1", "events", meta["namespace"], meta["name"])
        for attempt in range(WRITE_ATTEMPTS):
            try:
                if patch:
                    body = {k: event[k] for k in ("count", "lastTimestamp", "message")}
                    return await self._client.patch(one, body, "strategic", priority=kubeclient.Priority.LOW)
                return await self._client.create(collection, event, priority=kubeclient.Priority.LOW)
            except kubeclient.ApiError as exc:
                if patch and exc.not_found:
                    # The Event expired or was deleted: write it anew, keeping the count.
                    patch = False
                    continue
                if exc.conflict and not patch:
                    return event  # AlreadyExists: an earlier attempt did get through
                if exc.code < 500 and exc.code != 429:
                    log.warning("event rejected", extra={"reason": event["reason"], "error": str(exc)})
                    return None
                error = str(exc)
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                error = repr(exc)
            log.info("writing an event failed, retrying", extra={"attempt": attempt, "error": error})
            await kubeclient.sleep_backoff(attempt, base=0.5, cap=10.0)
        return None


def _timestamp(now: float) -> str:
    return dt.datetime.fromtimestamp(now, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _source_key(event: dict[str, Any]) -> str:
    return _join(event["source"].get("component", ""), event["source"].get("host", ""))


def _object_key(event: dict[str, Any]) -> str:
    ref = event["involvedObject"]
    return _join(*(ref.get(f, "") for f in ("kind", "namespace", "name", "uid", "apiVersion", "fieldPath")))


def _join(*parts: str) -> str:
    # A separator that cannot occur in names keeps ("a", "bc") and ("ab", "c") apart.
    return "\x00".join(parts)
