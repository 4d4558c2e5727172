"""`kcm coordinator`: the process that runs `state.Coordinator` under leader election.

Started by the launcher through `cli.register`. Serves the ops endpoint (health, metrics,
`/status`) on every replica; only the replica holding the `kcm-coordinator` Lease subscribes
to `kcm.coord.heartbeat.*.*` and so answers replicas (a heartbeat whose subject does not name
its body's instance and controllers is dropped with a log line: it speaks for another
replica), and it registers one `/healthz/<controller>` check per controller it has heard of,
and `/healthz/watcher` (aggregated: in `/healthz`, never in its own `/livez` and `/readyz`).
Every replica hears the watcher's and the other coordinators' health beats (`fleethealth`)
and beats its own; the leader publishes its verdicts every second, and a standby serves
those as its own aggregated checks (beside a healthy `standby` check), so
`/healthz/<controller>` gives the leader's answer on any replica. A standby's `/status` says
`"leader": false`.

Grants are kept in the `kcm-grants` KV bucket: a leader writes a member's grant there before
it replies with it, deletes a silent member's entry (revision-checked) before its partitions
go to others, and a new leader starts from what is there instead of from nothing, so a
failover moves no partition and stops no work (docs/bus.md, "Coordinator failover").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import logging
import uuid
from pathlib import Path
from typing import Any

import msgspec
import nats.errors
import nats.js.errors
from aiohttp import web
from kcm_shared.base import cancellation, tracing
from kcm_shared.bus import (
    consumers,
    flags,
    health,
    healthbeat,
    leaderelection,
    membership,
    natsconn,
    opsserver,
    subjects,
    wire,
)
from kcm_shared.client import kubeclient
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import kv
from nats.js.kv import KeyValue

from kcm_coordinator import fleethealth, state

log = logging.getLogger("kcm.coordinator")

_decode_heartbeat = msgspec.json.Decoder(membership.Heartbeat).decode
_encode = msgspec.json.Encoder().encode
_REFRESH = 0.5  # seconds between expiry sweeps / metric updates while leading
_GONE = (nats.js.errors.KeyNotFoundError, nats.js.errors.KeyDeletedError)
GRANTS_STREAM = f"KV_{wire.GRANTS_BUCKET}"  # the stream behind the bucket
STANDBY = "standby"


def _grant(key: str, value: bytes) -> membership.GrantRecord | None:
    """The grant an entry holds, for the instance its key names (never the one its body names);
    None, with a log line, for an entry neither a coordinator nor the replica could have written."""
    try:
        scope, instance = membership.parse_grant_key(key)
        record = membership.decode_grant(value)
    except (ValueError, msgspec.DecodeError) as exc:
        log.warning("grant entry skipped: unreadable", extra={"key": key, "error": str(exc)})
        return None
    if subjects.scope_token(record.assigned) != scope:
        log.warning("grant entry skipped: its key names other controllers", extra={"key": key})
        return None
    return membership.GrantRecord(instance, record.assigned)


class Service:
    def __init__(
        self,
        nc: Client,
        coordinator: state.Coordinator,
        elector: leaderelection.LeaderElector | None,
        identity: str,
        instance: str = "",
        grants: KeyValue | None = None,
        stream_replicas: int = 1,
    ) -> None:
        self.nc = nc
        self.instance = instance or identity
        self.grants = grants
        self.stream_replicas = stream_replicas
        self.coordinator = coordinator
        self.elector = elector
        self.identity = identity
        self.checks = health.Checks()
        self.leading = False
        self.checks.add(STANDBY, lambda: None)
        self.ops_url = ""  # known once the ops endpoint serves
        self.beats = fleethealth.Beats()
        self.leader_view = fleethealth.LeaderView()

    @property
    def is_leader(self) -> bool:
        return self.leading and (self.elector is None or self.elector.is_leader)

    def app(self) -> web.Application:
        application = opsserver.app(self.checks)

        async def status(request: web.Request) -> web.Response:
            return web.json_response(self.status())

        application.router.add_get("/status", status)
        return application

    async def _on_heartbeat(self, msg: Msg) -> None:
        # Between a missed renewal and lead() being cancelled we must already be silent.
        if not self.is_leader:
            return
        try:
            scope, instance = subjects.parse_heartbeat_subject(msg.subject)
            beat = _decode_heartbeat(msg.data)
        except (ValueError, msgspec.DecodeError) as exc:
            log.warning("bad heartbeat", extra={"subject": msg.subject, "error": str(exc)})
            return
        forged = self.coordinator.forged(scope, instance, beat)
        if forged is not None:
            log.warning(
                "heartbeat dropped: it speaks for another replica",
                extra={"subject": msg.subject, "instance": beat.instance, "reason": forged},
            )
            return
        key = self._key(beat.instance)  # a goodbye makes the coordinator forget the member
        reply = self.coordinator.heartbeat(beat)
        self._sync_checks()
        if self.grants is not None:
            if not beat.controllers:
                if key is not None:
                    await self._forget_entry(key)
            elif not await self._persist(beat.instance):
                return  # no reply: the replica keeps (until it lapses) what it was granted before
            reply = msgspec.structs.replace(reply, revision=self.coordinator.revision(beat.instance))
        # The write above may have outlasted our leadership: a deposed leader grants nothing.
        if msg.reply and self.is_leader:
            with contextlib.suppress(nats.errors.Error):
                await msg.respond(_encode(reply))

    def status(self) -> dict[str, Any]:
        """The `/status` document (docs/bus.md, "The coordinator's ops endpoint")."""
        body = self.coordinator.status(leader=self.is_leader, identity=self.identity)
        leader_identity = self.identity if self.elector is None else self.elector.leader
        body["leader_identity"] = leader_identity
        body["coordinator"] = self.beats.coordinator_status(
            identity=self.identity, leader_identity=leader_identity, ops_url=self.ops_url
        )
        if not self.is_leader:
            heard = self.leader_view.verdicts
            body["coordinator"]["leader_ops_url"] = heard.ops_url if heard is not None else None
        body[fleethealth.WATCHER] = self.beats.watcher_status()
        return body

    def _key(self, instance: str) -> str | None:
        """The bucket key of a member's grant; None for an instance that is no member."""
        member = self.coordinator.members.get(instance)
        return None if member is None else membership.grant_key(member.controllers, instance)

    async def _persist(self, instance: str) -> bool:
        """Write `instance`'s grant to the bucket if it changed; False when that failed."""
        assert self.grants is not None
        record = self.coordinator.unpersisted(instance)
        key = self._key(instance)
        if record is None or key is None:
            return True
        value = _encode(record)
        try:
            try:
                last = self.coordinator.revision(instance)
                revision = await (
                    self.grants.update(key, value, last=last) if last else self.grants.create(key, value)
                )
            except nats.errors.Error as exc:
                if not natsconn.wrong_last_sequence(exc):
                    raise
                # The replica renewed it, or a predecessor wrote it: the grant is ours to decide.
                try:
                    revision = await self.grants.update(
                        key, value, last=(await self.grants.get(key)).revision
                    )
                except _GONE:
                    revision = await self.grants.create(key, value)
        except nats.errors.Error as exc:
            log.warning("could not persist a grant", extra={"instance": instance, "error": repr(exc)})
            await self._redeclare()
            return False
        self.coordinator.persisted(instance, record, revision)
        return True

    async def _redeclare(self) -> None:
        """Declare the bucket again: its stream may be gone (a wiped NATS store)."""
        with contextlib.suppress(nats.errors.Error):
            self.grants = await membership.grants_bucket(self.nc.jetstream(), self.stream_replicas)

    async def _forget_entry(self, key: str) -> None:
        assert self.grants is not None
        with contextlib.suppress(nats.errors.Error):
            await self.grants.delete(key)

    async def _revoke(self) -> None:
        """Delete silent members' entries so they cannot renew, then let their partitions go."""
        assert self.grants is not None
        for instance, revision in self.coordinator.revoke():
            key = self._key(instance)
            if key is None:
                continue
            try:
                try:
                    await self.grants.delete(key, last=revision)
                except nats.errors.Error as exc:
                    if not natsconn.wrong_last_sequence(exc):
                        raise
                    self.coordinator.renewed(instance, (await self.grants.get(key)).revision or 0)
                    continue
            except _GONE:
                pass  # deleted already: nobody can renew it either
            except nats.errors.Error as exc:
                log.warning("could not revoke a grant", extra={"instance": instance, "error": repr(exc)})
                continue
            self.coordinator.forget(instance, revision)

    async def _restore(self) -> None:
        """Load every grant a predecessor persisted; retried until the bucket could be read. An
        entry that cannot be read is skipped (`_grant`), never retried."""
        assert self.grants is not None
        attempt = 0
        while True:
            cancellation.checkpoint()
            try:
                records = []
                # Through a consumer of this identity's own names: nats-py's `keys()` makes an
                # ordered consumer it names itself (docs/bus.md "Who may publish what").
                prefix = f"$KV.{wire.GRANTS_BUCKET}."
                for msg in await consumers.read_last(self.nc, GRANTS_STREAM, [prefix + ">"]):
                    if msg.data and not (msg.headers or {}).get(kv.KV_OP):  # a put, not a delete
                        record = _grant(msg.subject.removeprefix(prefix), msg.data)
                        if record is not None:
                            records.append((record, msg.metadata.sequence.stream))
                self.coordinator.restore(records)
                return
            except nats.errors.Error as exc:
                log.warning("could not read the grants bucket; retrying", extra={"error": repr(exc)})
            await kubeclient.sleep_backoff(attempt, base=0.1, cap=2.0)
            attempt += 1

    def _sync_checks(self) -> None:
        for controller in self.coordinator.controllers - set(self.checks.checks):
            self.checks.add(controller, self._check(controller), aggregated=True)
        if fleethealth.WATCHER not in self.checks.checks:
            self.checks.add(fleethealth.WATCHER, self.beats.watcher_error, aggregated=True)

    def _sync_followed_checks(self) -> None:
        """A standby's aggregated checks: the leader's verdicts, as last heard."""
        for name in self.leader_view.names() - set(self.checks.checks):
            self.checks.add(name, functools.partial(self.leader_view.error, name), aggregated=True)

    def _beat(self) -> healthbeat.Beat:
        return healthbeat.Beat(
            service=fleethealth.COORDINATOR,
            instance=self.instance,
            identity=self.identity,
            leader=self.is_leader,
            interval=healthbeat.INTERVAL,
            checks=self.checks.run(own_only=True),
            ops_url=self.ops_url,
        )

    async def _on_beat(self, msg: Msg) -> None:
        if _replayed(msg, subjects.health_filter()):
            return
        try:
            self.beats.observe(healthbeat.decode(msg.data))
        except msgspec.DecodeError as exc:
            log.warning("bad health beat", extra={"subject": msg.subject, "error": str(exc)})

    async def _on_leader_status(self, msg: Msg) -> None:
        if self.is_leader:
            return  # our own, or a deposed leader's
        if _replayed(msg, wire.COORD_STATUS):
            return
        try:
            self.leader_view.observe(fleethealth.decode_verdicts(msg.data))
        except msgspec.DecodeError as exc:
            log.warning("bad leader status", extra={"error": str(exc)})

    async def follow(self) -> None:
        """On every replica, until cancelled: hear health beats and the leader's verdicts,
        beat our own health, and publish the verdicts while leading (docs/bus.md)."""
        subs = [
            await self.nc.subscribe(subjects.health_filter(), cb=self._on_beat),
            await self.nc.subscribe(wire.COORD_STATUS, cb=self._on_leader_status),
        ]
        beating = asyncio.ensure_future(healthbeat.publish_forever(self.nc, self._beat))
        try:
            while True:
                cancellation.checkpoint()
                if self.is_leader:
                    with contextlib.suppress(nats.errors.Error, OSError):
                        await self.nc.publish(
                            wire.COORD_STATUS,
                            fleethealth.encode_verdicts(fleethealth.verdicts(self.status())),
                        )
                elif not self.leading:
                    self._sync_followed_checks()
                await asyncio.sleep(healthbeat.INTERVAL)
        finally:
            beating.cancel()
            await asyncio.wait({beating})
            for sub in subs:
                with contextlib.suppress(nats.errors.Error):
                    await sub.unsubscribe()

    def _check(self, controller: str) -> health.Check:
        return lambda: self.coordinator.controller_error(controller)

    async def lead(self) -> None:
        """Answer heartbeats until cancelled (leadership lost or shutdown)."""
        self.coordinator.start_term()
        if self.grants is not None:
            await self._restore()
        self.leading = True
        self.checks.checks.clear()  # STANDBY and the leader's verdicts a standby followed
        self.checks.aggregated.clear()
        sub = await self.nc.subscribe(subjects.HEARTBEAT_FILTER, cb=self._on_heartbeat)
        log.info("leading: answering heartbeats", extra={"identity": self.identity})
        try:
            while True:
                cancellation.checkpoint()
                if self.grants is not None:
                    await self._revoke()
                self.coordinator.refresh()
                self._sync_checks()
                await asyncio.sleep(_REFRESH)
        finally:
            self.leading = False
            with contextlib.suppress(nats.errors.Error):
                await sub.unsubscribe()
            self.checks.checks.clear()
            self.checks.aggregated.clear()
            self.checks.add(STANDBY, lambda: None)
            self.coordinator.start_term()
            log.info("standing by", extra={"identity": self.identity})


async def run(args: argparse.Namespace) -> None:
    tracing.setup("coordinator")
    identity = f"{args.instance}_{uuid.uuid4()}"
    coordinator = state.Coordinator(
        partitions=args.partitions,
        partitions_for=dict(args.partitions_for),
        lease=args.member_lease,
        margin=args.member_fence_margin,
    )
    # Before waiting for NATS, so a bad kubeconfig is reported at once (errors.ConfigError).
    client = flags.kube_client(args, "kcm/coordinator")
    options = natsconn.from_args(args)
    nc = await natsconn.connect(options, f"kcm-coordinator-{args.instance}")
    grants = await membership.grants_bucket(nc.jetstream(), options.stream_replicas)
    # The dead letters' stream is the coordinator's: it alone brings it to this configuration.
    await natsconn.until_declared(
        "dead-letter stream", lambda: natsconn.ensure_dlq_stream(nc.jetstream(), options.stream_replicas)
    )
    elector = leaderelection.from_args(args, client, identity)
    service = Service(nc, coordinator, elector, identity, args.instance, grants, options.stream_replicas)
    runner, port = await opsserver.start(service.app(), args.ops_bind, args.ops_port)
    service.ops_url = opsserver.url(args.ops_bind, port)
    following = asyncio.ensure_future(service.follow())
    try:
        if args.ops_url_file:
            _write_atomically(Path(args.ops_url_file), service.ops_url + "\n")
        if elector is None:
            await service.lead()
        else:
            await elector.run(service.lead)
    finally:
        following.cancel()
        await asyncio.wait({following})
        await runner.cleanup()
        await client.close()
        with contextlib.suppress(Exception):
            await nc.drain()


def _replayed(msg: Msg, subscription: str) -> bool:
    """A beat or verdict a JetStream consumer delivered (docs/bus.md "Known limits"): a stream
    message aimed at our subject by whoever made the consumer, never a service's own."""
    if not subjects.replayed(msg.reply):
        return False
    # A delivery bears its stream subject, not the one it was aimed at: say where it came in.
    extra = {"subscription": subscription, "subject": msg.subject, "reply": msg.reply}
    log.warning("replayed message dropped", extra=extra)
    return True


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
