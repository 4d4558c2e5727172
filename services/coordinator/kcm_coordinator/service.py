"""`kcm coordinator`: the process that runs `state.Coordinator` under leader election.

Started by the launcher through `cli.register`. Serves the ops endpoint (health, metrics,
`/status`) on every replica; only the replica holding the `kcm-coordinator` Lease subscribes
to `kcm.coord.heartbeat` and so answers replicas, and it registers one `/healthz/<controller>`
check per controller it has heard of (aggregated: in `/healthz`, never in its own `/livez`
and `/readyz`). Standbys answer `/healthz` with a healthy `standby`
check and `/status` with `"leader": false`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import uuid
from pathlib import Path

import msgspec
import nats.errors
from aiohttp import web
from kcm_shared import cancellation, flags, health, leaderelection, membership, natsconn, opsserver
from nats.aio.client import Client
from nats.aio.msg import Msg

from kcm_coordinator import state

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
    ) -> None:
        self.nc = nc
        self.coordinator = coordinator
        self.elector = elector
        self.identity = identity
        self.checks = health.Checks()
        self.leading = False
        self.checks.add(STANDBY, lambda: None)

    @property
    def is_leader(self) -> bool:
        return self.leading and (self.elector is None or self.elector.is_leader)

    def app(self) -> web.Application:
        application = opsserver.app(self.checks)

        async def status(request: web.Request) -> web.Response:
            body = self.coordinator.status(leader=self.is_leader, identity=self.identity)
            body["leader_identity"] = self.identity if self.elector is None else self.elector.leader
            return web.json_response(body)

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

    def _sync_checks(self) -> None:
        for controller in self.coordinator.controllers - set(self.checks.checks):
            self.checks.add(controller, self._check(controller), aggregated=True)

    def _check(self, controller: str) -> health.Check:
        return lambda: self.coordinator.controller_error(controller)

    async def lead(self) -> None:
        """Answer heartbeats until cancelled (leadership lost or shutdown)."""
        self.coordinator.start_term()
        self.leading = True
        self.checks.checks.pop(STANDBY, None)
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
            self.checks.add(STANDBY, lambda: None)
            self.coordinator.start_term()
            log.info("standing by", extra={"identity": self.identity})


async def run(args: argparse.Namespace) -> None:
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
    service = Service(nc, coordinator, elector, identity)
    runner, port = await opsserver.start(service.app(), args.ops_bind, args.ops_port)
    try:
        if args.ops_url_file:
            host = args.ops_bind if args.ops_bind not in ("0.0.0.0", "::") else "127.0.0.1"
            _write_atomically(Path(args.ops_url_file), f"http://{host}:{port}\n")
        if elector is None:
            await service.lead()
        else:
            await elector.run(service.lead)
    finally:
        await runner.cleanup()
        await client.close()
        with contextlib.suppress(Exception):
            await nc.drain()


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
