"""One resource's list+watch loop: the reflector of upstream client-go, publishing to the stream.

`supervisor` runs one `ResourceWatch` per watched resource while this replica leads;
`syncserver` asks it for progress. The loop:

1. reads what the stream holds for the resource (the last message per subject, headers only);
2. LISTs (paginated) and publishes `SYNC` for objects the stream lacks or holds at another
   resourceVersion (every object, in the first relist of a resource in `redact.REPUBLISHED`),
   and `DELETED` tombstones (the stream's last state as body) for live objects the list no
   longer has; then a progress marker at the list's resourceVersion;
3. WATCHes from there with bookmarks, publishing every event, and a marker per bookmark
   and after events that reach the target of a pending sync request;
4. goes back to 2 when the watch's resourceVersion has expired (410 Gone) or a sync request
   could not be answered from the watch in time. Other watch failures resume the watch from
   the last resourceVersion seen, with backoff, as the reflector does;
5. goes back to 1 when the stream lost what was published (`reset`): a subject whose sequence
   went back, found by the lane's "wrong last sequence" answer, or the supervisor's check of
   the stream. That relist diffs against what the stream really holds, and also tombstones
   what this replica remembers publishing and the list no longer has.

After a read the stream's contents are tracked in memory (`held`, and the lane's per-subject
sequences): this replica is the only publisher while it holds the lease, and a new term
starts from step 1 again. A deposed leader that has not noticed yet is fenced by those
sequences (see `publisher`); `_resolve` decides what its refused messages are worth.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aiohttp
import msgspec
import nats.errors
import nats.js.errors
import prometheus_client
from kcm_shared.apimachinery import gvr, protobuf, resourceversion
from kcm_shared.base import cancellation, tracing
from kcm_shared.bus import consumers, natsconn, subjects, wire
from kcm_shared.client import kubeclient
from nats.aio.client import Client
from nats.js import JetStreamContext

from kcm_watcher import metrics, objects, publisher, redact

log = logging.getLogger("kcm.watcher.resource")

PAGE_SIZE = 2000  # fewer round trips; the page is published before the next is asked for
_TTL_MARGIN = 60.0  # seconds past Nats-TTL before a tombstone's sequence is forgotten

# What a broken list or watch may raise; anything else is a bug and ends the loop loudly.
_TRANSIENT = (
    kubeclient.ApiError,
    aiohttp.ClientError,
    OSError,
    TimeoutError,
    msgspec.DecodeError,
    protobuf.ProtobufError,
    nats.errors.Error,
)
T = TypeVar("T")


class ResourceWatch:
    def __init__(
        self,
        res: gvr.Resource,
        client: kubeclient.KubeClient,
        nc: Client,
        lane: publisher.Lane,
        *,
        watch_timeout: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.res = res
        self._client = client
        self._nc = nc
        self._lane = lane
        lane.resolver = self._resolve
        self._watch_timeout = watch_timeout
        self._clock = clock
        self._path = kubeclient.resource_path(res.group, res.version, res.resource)
        self._progress_subject = subjects.progress_subject(res)
        self._label = str(res)
        self._events: dict[str, prometheus_client.Counter] = {}  # per event type, bound at first use
        self.held: dict[str, str] = {}  # subject -> resourceVersion of live objects in the stream
        # subject -> when its last tombstone was seen (kept after a re-create, until it is older
        # than Nats-TTL): the stream drops tombstones then, so a subject found empty is no loss,
        # and the lane forgets its sequence (an emptied subject expects 0).
        self._tombstones: dict[str, float] = {}
        self.marker = ""  # resourceVersion of the last progress marker acknowledged
        self.seen = ""  # newest resourceVersion the list or watch returned (health: the lag)
        self._progress = asyncio.Condition()
        # Targets of sync requests being waited for (`wait_progress`): a watch event at or
        # past one is marked at once, instead of after the grace period or the next bookmark.
        self._wanted: list[str] = []
        self._relist_wanted = asyncio.Event()
        self._reset_wanted = asyncio.Event()
        self._failing_since: float | None = None
        self.last_error = ""
        # Until one relist has completed: publish every object again, even at an unchanged
        # resourceVersion, over what a stream from before `redact`'s allow-list may hold.
        self._republish = res in redact.REPUBLISHED

    # -- health and progress ------------------------------------------------------------------

    def failing_for(self) -> float:
        """Seconds the list or watch has kept failing (0 while it works)."""
        return 0.0 if self._failing_since is None else self._clock() - self._failing_since

    async def wait_progress(self, target: str, grace: float) -> str:
        """The resourceVersion of a marker at or beyond `target`, once one is published.

        Waits `grace` seconds for the watch to get there on its own, then has the loop relist
        (a list is always current). The caller bounds the whole wait; `target` is numeric (the
        sync server refuses others).
        """
        self._wanted.append(target)
        try:
            try:
                async with asyncio.timeout(grace):
                    return await self._until(lambda: objects.reached(self.marker, target))
            except TimeoutError:
                pass
            self._relist_wanted.set()
            return await self._until(lambda: objects.reached(self.marker, target))
        finally:
            self._wanted.remove(target)

    async def _until(self, predicate: Callable[[], bool]) -> str:
        async with self._progress:
            await self._progress.wait_for(predicate)
            return self.marker

    def reset(self, why: str) -> None:
        """The stream lost what this loop published: re-read it and relist (step 5)."""
        if not self._reset_wanted.is_set():
            metrics.STREAM_RESETS.labels(resource=self._label).inc()
            log.warning(
                "the stream lost what was published: re-reading it and relisting",
                extra={"resource": self._label, "reason": why},
            )
        self._reset_wanted.set()
        self.marker = ""  # the stream no longer vouches for any progress

    @property
    def marked(self) -> bool:
        """Whether the stream should now hold this loop's progress marker (none is being redone)."""
        return bool(self.marker) and not self._reset_wanted.is_set()

    # -- the loop -----------------------------------------------------------------------------

    async def run(self) -> None:
        """List, watch and publish until cancelled."""
        reason = "start"
        while True:
            cancellation.checkpoint()
            remembered: dict[str, str] = {}  # after a reset: what was published before it
            if reason in ("start", "reset"):
                # What is still in flight lands (or is dropped) before the stream is read.
                await self._lane.flush()
                self._reset_wanted.clear()
                if reason == "reset":
                    remembered = self.held
                await self._retrying(self._read_stream, "read stream")
            # Cleared before the list, so a request arriving during it gets a list of its own.
            self._relist_wanted.clear()
            rv = await self._retrying(functools.partial(self._relist, reason, remembered), "list")
            watching = asyncio.ensure_future(self._watch_from(rv))
            waits = [asyncio.ensure_future(e.wait()) for e in (self._relist_wanted, self._reset_wanted)]
            try:
                await asyncio.wait({watching, *waits}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (watching, *waits):
                    task.cancel()
                await asyncio.wait({watching, *waits})
            if watching.done() and not watching.cancelled():
                watching.result()  # a bug in the watch loop surfaces here
            if self._reset_wanted.is_set():
                reason = "reset"
            elif watching.cancelled():
                reason = "sync"
            else:
                reason = "expired"

    async def _retrying(self, step: Callable[[], Awaitable[T]], what: str) -> T:
        attempt = 0
        while True:
            cancellation.checkpoint()
            try:
                result = await step()
            except _TRANSIENT as exc:
                self._failed(what, exc, attempt)
                await kubeclient.sleep_backoff(attempt)
                attempt += 1
                continue
            self._failing_since = None
            return result

    def _failed(self, what: str, exc: BaseException, attempt: int) -> None:
        if self._failing_since is None:
            self._failing_since = self._clock()
        self.last_error = f"{what}: {exc}"
        log.warning(
            f"{what} failed, retrying",
            extra={"resource": self._label, "error": str(exc), "attempt": attempt},
        )

    def _record(self, subject: str, rv: str | None) -> None:
        """What the stream now holds on an object's subject: the object at `rv`, or a tombstone."""
        if rv is None:
            self.held.pop(subject, None)
            self._tombstones[subject] = self._clock()
        else:
            self.held[subject] = rv

    def _forget_expired_tombstones(self) -> None:
        horizon = self._clock() - natsconn.TOMBSTONE_TTL - _TTL_MARGIN
        for subject in [s for s, seen in self._tombstones.items() if seen < horizon]:
            del self._tombstones[subject]
            if subject not in self.held:
                self._lane.seqs.pop(subject, None)

    @functools.cached_property
    def _js(self) -> JetStreamContext:
        return self._nc.jetstream()

    async def _read_stream(self) -> None:
        """Fill `held` (subject -> resourceVersion of each object the stream holds as live), the
        tombstones, and the lane's sequence of every subject of the resource (marker included)."""
        filters = [subjects.object_filter(self.res), self._progress_subject]
        messages = await consumers.read_last(self._nc, wire.OBJECTS_STREAM, filters, headers_only=True)
        self.held, self._tombstones = {}, {}
        seqs: dict[str, int] = {}
        for msg in messages:
            seqs[msg.subject] = msg.metadata.sequence.stream
            if msg.subject != self._progress_subject:
                self._record(msg.subject, objects.held_entry(msg.headers))
        self._lane.seqs = seqs

    async def _resolve(self, subject: str, headers: dict[str, str]) -> int | None:
        """The lane's resolver: after "wrong last sequence", what the stream holds decides.

        The subject's sequence went back (the stream lost it): reset, drop the message. It
        went forward (another publisher, e.g. the new leader after this one was deposed, or a
        retry of this very message that had landed): keep what the stream holds unless ours
        is strictly newer. Opaque resourceVersions cannot be compared: a relist decides.
        """
        known = self._lane.seqs.get(subject, 0)
        try:
            last = await self._js.get_last_msg(wire.OBJECTS_STREAM, subject, direct=True)
            seq, theirs = last.seq or 0, dict(last.headers or {})
        except nats.js.errors.NotFoundError:
            seq, theirs = 0, {}
        is_marker = subject == self._progress_subject
        if seq < known:
            if seq == 0 and subject in self._tombstones:
                return 0  # its tombstone expired (Nats-TTL): the subject is free again
            self.reset(f"{subject} went back from sequence {known} to {seq}")
            return None
        self._lane.seqs[subject] = seq
        rv = theirs.get(wire.RESOURCE_VERSION, "")
        if not is_marker:
            self._record(subject, objects.held_entry(theirs))
        ours = headers.get(wire.RESOURCE_VERSION, "")
        newer = resourceversion.newer(ours, rv)
        if newer:
            return seq
        if newer is None and ours != rv:
            self._relist_wanted.set()
        log.info(
            "the stream holds a newer state than this message; dropped",
            extra={"resource": self._label, "subject": subject, "rv": ours, "stream_rv": rv},
        )
        return None

    # -- relist -------------------------------------------------------------------------------

    async def _relist(self, reason: str, remembered: dict[str, str]) -> str:
        """List, publish the differences and a marker; returns the list's resourceVersion.

        `remembered`: after a reset, the live objects this loop had published before.
        """
        metrics.RELISTS.labels(resource=self._label, reason=reason).inc()
        diff = objects.Relist(self.held, remembered, republish=self._republish)
        params = {"limit": str(PAGE_SIZE)}
        list_rv = ""
        while True:
            page = objects.decode_page(await self._client.request_bytes("GET", self._path, params=params))
            list_rv = list_rv or page.metadata.resource_version
            self.seen = list_rv
            type_meta = objects.TypeMeta(page.kind, page.api_version)
            # One span per page: a span per listed object would cost more than publishing it.
            with tracing.span(
                "watcher.publish", resource=self._label, event=wire.SYNC, objects=len(page.items)
            ):
                trace = self._trace_headers()
                for item in page.items:
                    head = objects.decode_head(item)
                    meta = head.metadata
                    subject = subjects.object_subject(self.res, meta.namespace, meta.name)
                    if diff.needs_sync(subject, meta.resource_version):
                        body = type_meta.complete(item, head)
                        await self._publish(subject, body, wire.SYNC, head, trace)
            if not page.metadata.continue_:
                break
            params = {"limit": str(PAGE_SIZE), "continue": page.metadata.continue_}
        # A remembered subject the stream holds but not as live has its tombstone already.
        gone = [s for s in diff.gone() if s in self.held or not self._lane.seqs.get(s)]
        for subject in gone:
            await self._tombstone(subject, self.held.get(subject) or remembered.get(subject, ""))
        await self._mark(list_rv)
        self._republish = False
        log.info(
            "relisted",
            extra={
                "resource": self._label,
                "reason": reason,
                "resourceVersion": list_rv,
                "deleted": len(gone),
            },
        )
        return list_rv

    async def _tombstone(self, subject: str, rv: str) -> None:
        """Publish the delete a relist found missing, with the last state the stream has.

        The stream may have none (it lost the object, or held it without a body because it was
        too large): the tombstone then has an empty body, for subscribers that still hold it.
        """
        try:
            last = await self._js.get_last_msg(wire.OBJECTS_STREAM, subject, direct=True)
            body, rv = last.data or b"", (last.headers or {}).get(wire.RESOURCE_VERSION, rv)
        except nats.js.errors.NotFoundError:
            body = b""
        if body:
            head = objects.decode_head(body)
            with tracing.span("watcher.publish", resource=self._label, event=wire.DELETED, key=_key(head)):
                await self._publish(subject, body, wire.DELETED, head, self._trace_headers())
            return
        with tracing.span("watcher.publish", resource=self._label, event=wire.DELETED, subject=subject):
            hdrs = objects.bodiless_tombstone(subject, rv)
            hdrs.update(self._trace_headers())
            await self._lane.publish(subject, b"", hdrs, objects.ttl_of(wire.DELETED))
        self._record(subject, None)

    async def _mark(self, rv: str) -> None:
        """Publish a progress marker once everything before it is acknowledged.

        Not while a reset is wanted: a marker over a stream that lost objects would tell
        caches that their absence is the truth.
        """
        await self._lane.flush()
        if self._reset_wanted.is_set():
            return
        self._forget_expired_tombstones()
        await self._lane.publish(self._progress_subject, b"", {wire.RESOURCE_VERSION: rv})
        await self._lane.flush()
        if self._reset_wanted.is_set():
            return
        async with self._progress:
            self.marker = rv
            self._progress.notify_all()

    # -- watch --------------------------------------------------------------------------------

    async def _watch_from(self, rv: str) -> None:
        """Watch and publish until the resourceVersion expires (returns) or cancelled."""
        attempt = 0
        while True:
            cancellation.checkpoint()
            params = {
                "allowWatchBookmarks": "true",
                "resourceVersion": rv,
                # Spread reconnects of many watches, as the reflector does.
                "timeoutSeconds": str(int(self._watch_timeout * (1 + random.random()))),
            }
            try:
                async for batch in self._client.watch_batches(self._path, params):
                    rv = await self._on_events(self._decoded(batch, rv), rv)
                    attempt = 0
                    self._failing_since = None
            except kubeclient.ApiError as exc:
                if exc.gone:
                    log.info("watch expired", extra={"resource": self._label, "resourceVersion": rv})
                    return
                self._failed("watch", exc, attempt)
            except _TRANSIENT as exc:
                self._failed("watch", exc, attempt)
            else:
                continue  # the server ended the watch (timeoutSeconds): resume at once
            await kubeclient.sleep_backoff(attempt)
            attempt += 1

    def _decoded(self, batch: list[bytes], rv: str) -> list[objects.WatchLine]:
        """The batch's events, less any that does not decode (a kube-apiserver serves objects
        nested 10,000 deep, beyond what Python decodes): logged and skipped, never ending the
        watch of the others."""
        events = []
        for line in batch:
            try:
                events.append(objects.decode_line(line))
            except msgspec.DecodeError as exc:
                self._skipped(exc, rv)
        return events

    def _skipped(self, exc: msgspec.DecodeError, rv: str) -> None:
        log.error(
            "undecodable watch event skipped",
            extra={"resource": self._label, "after": rv, "error": str(exc)},
        )

    async def _on_events(self, events: list[objects.WatchLine], rv: str) -> str:
        """Publish the watch events that arrived together; returns the resourceVersion to resume from.

        They share one span (a lone event, the usual case when idle, gets its own with its key).
        """
        attributes: dict[str, Any] = {"resource": self._label, "events": len(events)}
        if len(events) == 1 and events[0].type not in (objects.BOOKMARK, objects.ERROR):
            attributes["event"] = events[0].type
            with contextlib.suppress(msgspec.DecodeError):  # skipped and logged below
                attributes["key"] = _key(objects.decode_head(events[0].object))
        with tracing.span("watcher.publish", **attributes):
            trace = self._trace_headers()
            for event in events:
                try:
                    rv = await self._on_event(event, rv, trace)
                except msgspec.DecodeError as exc:  # raised before anything of it is published
                    self._skipped(exc, rv)
        # Events arrive in resourceVersion order: once these are published, the stream holds
        # this resource as of `rv`, which is what a marker says.
        if rv != self.marker and any(objects.reached(rv, target) for target in self._wanted):
            await self._mark(rv)
        return rv

    async def _on_event(self, event: objects.WatchLine, rv: str, trace: dict[str, str]) -> str:
        """Publish one watch event; returns the resourceVersion to resume from."""
        raw = bytes(event.object)
        if event.type == objects.ERROR:
            raise kubeclient.status_error(objects.decode_status(raw))
        head = objects.decode_head(raw)
        new_rv = head.metadata.resource_version or rv
        self.seen = new_rv
        if event.type == objects.BOOKMARK:
            if new_rv != self.marker:  # an idle resource's bookmarks repeat themselves
                await self._mark(new_rv)
            return new_rv
        counter = self._events.get(event.type)
        if counter is None:  # `labels()` takes a lock and builds a tuple: once per type, not per event
            counter = self._events[event.type] = metrics.EVENTS.labels(resource=self._label, type=event.type)
        counter.inc()
        meta = head.metadata
        subject = subjects.object_subject(self.res, meta.namespace, meta.name)
        if objects.is_stale(meta.resource_version, self.held.get(subject)):
            return new_rv
        await self._publish(subject, raw, event.type, head, trace)
        return new_rv

    @staticmethod
    def _trace_headers() -> dict[str, str]:
        """The current span's trace context as headers, shared by the messages published in it."""
        trace: dict[str, str] = {}
        tracing.inject(trace)
        return trace

    async def _publish(
        self, subject: str, body: bytes, event: str, head: objects.Head, trace: dict[str, str]
    ) -> None:
        """Hand one object message to the lane and remember what the stream now holds."""
        hdrs = objects.headers(event, head)
        hdrs.update(trace)
        if subjects.needs_key(subject):
            hdrs[wire.KEY] = _key(head)
        await self._lane.publish(subject, redact.body(self.res, body), hdrs, objects.ttl_of(event))
        self._record(subject, None if event == wire.DELETED else head.metadata.resource_version)


def _key(head: objects.Head) -> str:
    meta = head.metadata
    return f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name
