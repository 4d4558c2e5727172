"""`kcm coordinator`: the process that runs `state.Coordinator` under leader election.

Started by the launcher through `cli.register`. Serves the ops endpoint (health, metrics,
`/status`) on every replica; only the replica holding the `kcm-coordinator` Lease subscribes
to `kcm.coord.heartbeat` and so answers replicas, and it registers one `/healthz/<controller>`
check per controller it has heard of, and `/healthz/watcher` (aggregated: in `/healthz`,
never in its own `/livez` and `/readyz`). Every replica hears the watcher's and the other
coordinators' health beats (`fleethealth`) and beats its own; the leader publishes its
verdicts every second, and a standby serves those as its own aggregated checks (beside a
healthy `standby` check), so `/healthz/<controller>` gives the leader's answer on any
replica. A standby's `/status` says `"leader": false`.
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
from aiohttp import web
from kcm_shared import (
    cancellation,
    flags,
    health,
    healthbeat,
    leaderelection,
    membership,
    natsconn,
    opsserver,
    tracing,
)
from nats.aio.client import Client
from nats.aio.msg import Msg

from kcm_coordinator import fleethealth, state

log = logging.getLogger("kcm.coordinator")

_decode_heartbeat = msgspec.json.Decoder(membership.Heartbeat).decode
_encode = msgspec.json.Encoder().encode
_REFRESH = 0.5  # seconds between expiry sweeps / metric updates while leading
STANDBY = "standby"


class Service:
    def __init__(
        self,
        nc: Client,
        coordinator: state.Coordinator,
        elector: leaderelection.LeaderElector | None,
        identity: str,
        instance: str = "",
    ) -> None:
        self.nc = nc
        self.instance = instance or identity
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
            beat = _decode_heartbeat(msg.data)
        except msgspec.DecodeError as exc:
            log.warning("bad heartbeat", extra={"error": str(exc)})
            return
        reply = self.coordinator.heartbeat(beat)
        self._sync_checks()
        if msg.reply:
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
        try:
            self.beats.observe(healthbeat.decode(msg.data))
        except msgspec.DecodeError as exc:
            log.warning("bad health beat", extra={"subject": msg.subject, "error": str(exc)})

    async def _on_leader_status(self, msg: Msg) -> None:
        if self.is_leader:
            return  # our own, or a deposed leader's
        try:
            self.leader_view.observe(fleethealth.decode_verdicts(msg.data))
        except msgspec.DecodeError as exc:
            log.warning("bad leader status", extra={"error": str(exc)})

    async def follow(self) -> None:
        """On every replica, until cancelled: hear health beats and the leader's verdicts,
        beat our own health, and publish the verdicts while leading (docs/bus.md)."""
        subs = [
            await self.nc.subscribe(healthbeat.FILTER, cb=self._on_beat),
            await self.nc.subscribe(fleethealth.STATUS_SUBJECT, cb=self._on_leader_status),
        ]
        beating = asyncio.ensure_future(healthbeat.publish_forever(self.nc, self._beat))
        try:
            while True:
                cancellation.checkpoint()
                if self.is_leader:
                    with contextlib.suppress(nats.errors.Error, OSError):
                        await self.nc.publish(
                            fleethealth.STATUS_SUBJECT,
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
        self.leading = True
        self.checks.checks.clear()  # STANDBY and the leader's verdicts a standby followed
        self.checks.aggregated.clear()
        sub = await self.nc.subscribe(membership.HEARTBEAT_SUBJECT, cb=self._on_heartbeat)
        log.info("leading: answering heartbeats", extra={"identity": self.identity})
        try:
            while True:
                cancellation.checkpoint()
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
    nc = await natsconn.connect(natsconn.from_args(args), f"kcm-coordinator-{args.instance}")
    elector = leaderelection.from_args(args, client, identity)
    service = Service(nc, coordinator, elector, identity, args.instance)
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


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
