"""Membership of a controller replica, and the work partitions it may consume (fenced).

The controller runtime creates one `Membership` per process: it heartbeats to the active
coordinator over core NATS request/reply (`kcm.coord.heartbeat.<scope>.<instance>`, docs/bus.md
"Coordinator protocol"), carrying the controllers it runs, the partitions it holds, their health and queue
depth; the reply says which partitions it may work on. The coordinator imports the wire
types from here, so both ends share one definition.

Guarantees to the runtime:
- `owned(controller)` is fenced: a grant is valid until the send time of the heartbeat that
  got it plus the reply's `lease_seconds`, on this process's monotonic clock. With no fresh
  reply the replica owns nothing once that passes, even if the heartbeat loop is late (or
  the whole process was frozen).
- `claim(controller, key, partition)` is what API writes are checked against
  (`kcm_shared.bus.fencing`): valid while the partition is owned under the same grant as when
  the claim was made. Losing the partition, or any lapse of the grant, voids it for good,
  even if the partition is granted again later.
- `on_change` callbacks run in order per controller (never two at once for one controller),
  outside the heartbeat loop, so a slow hand-over never stops heartbeats.
- A lost partition is reported as no longer held only after every callback for that change
  returned: the coordinator gives it to another replica only then (or after the lease).
- With no coordinator answering (a failover takes up to the coordinators' Lease duration),
  the replica renews its grant in the `kcm-grants` KV bucket instead: an update of its own
  entry that JetStream accepts only if nobody (no coordinator) changed the entry since the
  revision the replica last knew. The grant then lasts `lease_seconds` from the renewal's send
  time. docs/bus.md "Coordinator failover" has the argument.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

import msgspec
import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext, api
from nats.js.kv import KeyValue

from kcm_shared.base import cancellation
from kcm_shared.bus import fencing, natsconn, subjects, wire

log = logging.getLogger("kcm.membership")

# How long a cancelled replica waits for its callbacks to release partitions before it
# leaves silently (the coordinator then waits for the lease instead).
_LEAVE_TIMEOUT = 10.0


class Heartbeat(msgspec.Struct, omit_defaults=True):
    """Replica -> coordinator, every `interval`."""

    service: str
    instance: str
    controllers: list[str]
    held: dict[str, list[int]]
    health: dict[str, str | None]
    depth: dict[str, int]
    ops_url: str = ""


class Assignment(msgspec.Struct):
    """Coordinator -> replica: the partitions it may work on, valid lease_seconds after sending.

    `revision` is the KV revision of the replica's grant entry holding `assigned` (0: none).
    """

    assigned: dict[str, list[int]]
    partitions: dict[str, int]
    lease_seconds: float
    revision: int = 0


class GrantRecord(msgspec.Struct, omit_defaults=True):
    """A replica's entry in the `kcm-grants` bucket (written by the coordinator, renewed by the
    replica while no coordinator answers)."""

    instance: str
    assigned: dict[str, list[int]]


def grant_key(controllers: Iterable[str], instance: str) -> str:
    """The KV key of the grants of `instance`, a replica running `controllers`: its scope, then
    its instance (`subjects.scope_token`, `subjects.instance_token`). A controller identity may
    write the keys of its own scope only."""
    return f"{subjects.scope_token(controllers)}.{subjects.instance_token(instance)}"


def parse_grant_key(key: str) -> tuple[str, str]:
    """(scope token, instance name) of a grant key; ValueError for any other key."""
    scope, _, token = key.partition(".")
    if not scope or "." in token:
        raise ValueError(f"not a grant key: {key!r}")
    return scope, subjects.parse_instance_token(token)


async def grants_bucket(js: JetStreamContext, replicas: int = 1) -> KeyValue:
    """The `kcm-grants` bucket, declared if missing (the coordinator and every replica may);
    NATS trouble meanwhile (no JetStream answering yet, a reconnect) is waited out."""

    async def declare() -> KeyValue:
        try:
            return await js.key_value(wire.GRANTS_BUCKET)
        except nats.js.errors.BucketNotFoundError:
            return await js.create_key_value(
                bucket=wire.GRANTS_BUCKET, history=1, storage=api.StorageType.FILE, replicas=replicas
            )

    return await natsconn.until_declared("grants bucket", declare)


_encode = msgspec.json.Encoder().encode
_decode_assignment = msgspec.json.Decoder(Assignment).decode
decode_grant = msgspec.json.Decoder(GrantRecord).decode

ChangeCallback = Callable[[str, set[int], set[int]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Report:
    """What the runtime tells the coordinator besides held partitions."""

    health: dict[str, str | None]
    depth: dict[str, int]


class Membership:
    def __init__(
        self,
        nc: Client,
        *,
        service: str,
        instance: str,
        controllers: list[str],
        ops_url: str,
        report: Callable[[], Report],
        interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        grants: KeyValue | None = None,
    ) -> None:
        self.nc = nc
        self.service = service
        self.instance = instance
        self.controllers = list(controllers)
        self.ops_url = ops_url
        # Names what this replica runs: the coordinator checks it against the body, and NATS lets
        # an identity publish only under its own controllers (docs/bus.md "Who may publish what").
        self._subject = subjects.heartbeat_subject(controllers, instance)
        self.interval = interval
        self._report = report
        self._clock = clock
        self._callbacks: list[ChangeCallback] = []
        self._partitions: dict[str, int] = {}
        self._granted: dict[str, set[int]] = {c: set() for c in controllers}
        self._valid_until = -float("inf")
        # Which grant each owned partition is held under: a new number whenever it is gained.
        self._grant_ids: dict[str, dict[int, int]] = {c: {} for c in controllers}
        self._next_grant_id = 0
        self._grants = grants
        self._revision = 0  # of our entry in the grants bucket as last known; 0: none known
        self._lease_seconds = 0.0
        # Partitions given up whose callbacks have not returned yet (counted per loss, as one
        # partition may be lost, regained and lost again before the first callback returns).
        self._releasing: dict[str, Counter[int]] = {c: Counter() for c in controllers}
        # Bounded: at most one pending change per heartbeat; a stuck callback shows up as a
        # full queue, and then the heartbeat loop waits rather than grow memory.
        self._changes: dict[str, asyncio.Queue[tuple[set[int], set[int]]]] = {
            c: asyncio.Queue(maxsize=64) for c in controllers
        }

    def on_change(self, callback: ChangeCallback) -> None:
        """Call `callback(controller, gained, lost)` on every change; the callback owes the
        runtime's promise: when it returns, no worker of this process touches a lost partition."""
        self._callbacks.append(callback)

    def partitions(self, controller: str) -> int | None:
        """P as last told by the coordinator (None before the first reply)."""
        return self._partitions.get(controller)

    def owned(self, controller: str) -> set[int]:
        """The partitions this replica may work on now: granted and not expired."""
        if self._clock() >= self._valid_until:
            return set()
        return set(self._granted.get(controller, ()))

    def owns(self, controller: str, partition: int) -> bool:
        """`partition in owned(controller)` without copying the set (asked once per cached event)."""
        return self._clock() < self._valid_until and partition in self._granted.get(controller, ())

    def claim(self, controller: str, key: str, partition: int) -> fencing.Claim | None:
        """A claim on `partition` for writes about `key`, or None when it is not owned now."""
        ids = self._grant_ids.get(controller)
        if ids is None or not self.owns(controller, partition):
            return None
        grant_id = ids[partition]

        def valid() -> bool:
            return self._clock() < self._valid_until and ids.get(partition) == grant_id

        return fencing.Claim(controller, key, partition, valid)

    def held(self, controller: str) -> set[int]:
        """What the next heartbeat reports: owned, plus partitions still being released."""
        releasing = self._releasing.get(controller, Counter())
        return self.owned(controller) | {p for p, n in releasing.items() if n > 0}

    async def run(self) -> None:
        """Heartbeat until cancelled; on cancellation release everything and say goodbye."""
        workers = [asyncio.create_task(self._dispatch(c)) for c in self.controllers]
        try:
            while True:
                cancellation.checkpoint()
                sent = await self.beat()
                # Wake early when the grant would lapse, to run the callbacks for it promptly.
                wake = min(sent + self.interval, self._valid_until)
                await asyncio.sleep(max(0.0, wake - self._clock()))
        finally:
            await self._leave(workers)

    async def beat(self) -> float:
        """One round: heartbeat, apply the reply, drop a lapsed grant; returns the send time.

        `run` calls it every `interval`; the callbacks it triggers run in `run`'s dispatchers.
        """
        sent = self._clock()
        assignment = await self._heartbeat(sent)
        if assignment is not None:
            await self._apply(assignment, sent)
        else:
            await self._renew()
        await self._fence()
        return sent

    async def _renew(self) -> None:
        """No coordinator answered: extend the grant through the bus, if nobody changed it."""
        if self._grants is None or self._revision <= 0 or self._clock() >= self._valid_until:
            return
        record = GrantRecord(self.instance, {c: sorted(self._granted[c]) for c in self.controllers})
        sent = self._clock()
        try:
            async with asyncio.timeout(max(0.05, self._valid_until - sent)):
                revision = await self._grants.update(
                    grant_key(self.controllers, self.instance), _encode(record), last=self._revision
                )
        except (nats.errors.Error, TimeoutError) as exc:
            if natsconn.wrong_last_sequence(exc):
                # A coordinator changed (or revoked) the grant: only its reply says what now.
                log.warning("grant changed by a coordinator; not renewed", extra={"instance": self.instance})
                self._revision = 0
            else:
                log.debug("grant renewal failed", extra={"instance": self.instance, "error": repr(exc)})
            return
        self._revision = revision
        self._valid_until = sent + self._lease_seconds

    async def _heartbeat(self, sent: float) -> Assignment | None:
        report = self._report()
        beat = Heartbeat(
            service=self.service,
            instance=self.instance,
            controllers=self.controllers,
            held={c: sorted(self.held(c)) for c in self.controllers},
            health={c: report.health.get(c) for c in self.controllers},
            depth={c: report.depth.get(c, 0) for c in self.controllers},
            ops_url=self.ops_url,
        )
        # Never wait past the current grant: a lapse must be noticed (and acted on) in time.
        timeout = self.interval
        if self._valid_until > sent:
            timeout = max(0.05, min(timeout, self._valid_until - sent))
        try:
            msg = await self.nc.request(self._subject, _encode(beat), timeout=timeout)
            return _decode_assignment(msg.data)
        except (nats.errors.Error, TimeoutError, msgspec.DecodeError) as exc:
            # No coordinator (or none leading yet): keep what we have until its lease lapses.
            log.debug("heartbeat unanswered", extra={"instance": self.instance, "error": repr(exc)})
            return None

    async def _apply(self, assignment: Assignment, sent: float) -> None:
        if self._clock() >= self._valid_until:
            # The grant lapsed since the last reply (the coordinator may have given our
            # partitions away and back meanwhile): what was held under it stays void.
            await self._drop_all()
        self._partitions.update({c: n for c, n in assignment.partitions.items() if c in self._granted})
        self._valid_until = sent + assignment.lease_seconds
        self._lease_seconds = assignment.lease_seconds
        self._revision = assignment.revision
        for controller in self.controllers:
            before = self._granted[controller]
            now = set(assignment.assigned.get(controller, ()))
            self._granted[controller] = now
            await self._changed(controller, now - before, before - now)

    async def _fence(self) -> None:
        """Drop every grant once it has lapsed without a fresh reply (self-fencing)."""
        if self._clock() < self._valid_until:
            return
        if any(self._granted.values()):
            log.warning("grant lapsed; dropping partitions", extra={"instance": self.instance})
        await self._drop_all()

    async def _drop_all(self) -> None:
        self._revision = 0
        for controller in self.controllers:
            lost = self._granted[controller]
            self._granted[controller] = set()
            await self._changed(controller, set(), lost)

    async def _changed(self, controller: str, gained: set[int], lost: set[int]) -> None:
        ids = self._grant_ids[controller]
        for partition in lost:
            ids.pop(partition, None)
        for partition in gained:
            self._next_grant_id += 1
            ids[partition] = self._next_grant_id
        if not gained and not lost:
            return
        self._releasing[controller].update(lost)
        log.info(
            "partitions changed",
            extra={
                "instance": self.instance,
                "controller": controller,
                "gained": sorted(gained),
                "lost": sorted(lost),
            },
        )
        await self._changes[controller].put((gained, lost))

    async def _dispatch(self, controller: str) -> None:
        changes = self._changes[controller]
        while True:
            cancellation.checkpoint()
            gained, lost = await changes.get()
            for callback in self._callbacks:
                try:
                    await callback(controller, set(gained), set(lost))
                except Exception:
                    log.exception("partition change callback failed", extra={"controller": controller})
            self._releasing[controller].subtract(lost)
            changes.task_done()

    async def _leave(self, workers: list[asyncio.Task[None]]) -> None:
        """Give every partition back and tell the coordinator, so successors need not wait."""
        try:
            async with asyncio.timeout(_LEAVE_TIMEOUT):
                self._valid_until = -float("inf")
                await self._drop_all()
                await asyncio.gather(*(self._changes[c].join() for c in self.controllers))
                goodbye = Heartbeat(
                    service=self.service,
                    instance=self.instance,
                    controllers=[],
                    held={},
                    health={},
                    depth={},
                    ops_url=self.ops_url,
                )
                await self.nc.publish(self._subject, _encode(goodbye))
                await self.nc.flush(timeout=1)
        except (nats.errors.Error, TimeoutError, asyncio.CancelledError) as exc:
            log.warning("left without releasing cleanly", extra={"error": repr(exc)})
        finally:
            for worker in workers:
                worker.cancel()
            for worker in workers:
                with contextlib.suppress(asyncio.CancelledError):
                    await worker
