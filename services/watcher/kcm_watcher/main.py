"""`kcm watcher`: wires the API client, NATS, the ops endpoint and leader election together.

The launcher (kcm_cli.main) calls `run(args)` and cancels it on SIGINT/SIGTERM; every
replica, leading or not, heartbeats its health to the coordinator (`healthreport`). Cancelling
stops the loops, flushes unacknowledged messages (bounded), releases the Lease and closes
the connections.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging

import nats.errors
from kcm_shared.base import cancellation, tracing
from kcm_shared.bus import flags, health, healthbeat, leaderelection, natsconn, opsserver
from kcm_shared.client import kubeclient
from nats.js import JetStreamContext

from kcm_watcher import discovery, healthreport, publisher, supervisor

log = logging.getLogger("kcm.watcher")


async def _declare_stream(js: JetStreamContext, replicas: int) -> None:
    # A freshly started nats-server may take a moment before JetStream answers.
    attempt = 0
    while True:
        cancellation.checkpoint()
        try:
            await natsconn.ensure_object_stream(js, replicas)
            return
        except (nats.errors.Error, TimeoutError) as exc:
            log.warning(
                "cannot declare the object stream yet", extra={"error": repr(exc), "attempt": attempt}
            )
            await kubeclient.sleep_backoff(attempt)
            attempt += 1


async def run(args: argparse.Namespace) -> None:
    tracing.setup("watcher")
    client = flags.kube_client(args, user_agent="kcm-watcher")
    nats_opts = natsconn.from_args(args)
    nc = await natsconn.connect(nats_opts, name=f"kcm-watcher:{args.instance}")
    try:
        js = nc.jetstream()
        await _declare_stream(js, nats_opts.stream_replicas)
        pub = publisher.Publisher(nc, window=args.publish_window)
        sup = supervisor.Supervisor(
            client,
            nc,
            pub,
            supervisor.Options(
                selection=discovery.Selection.parse(args.resources),
                discovery_interval=args.discovery_interval,
                watch_timeout=args.watch_timeout,
                sync_grace=args.sync_grace,
                sync_timeout=args.sync_timeout,
                stream_replicas=nats_opts.stream_replicas,
            ),
        )
        elector = leaderelection.from_args(args, client, args.instance)
        checks = health.Checks()
        reporter = healthreport.Reporter(
            instance=args.instance,
            checks=checks,
            sup=sup,
            leading=lambda: elector is None or elector.is_leader,
            failure_limit=args.publish_failure_limit,
        )
        checks.add("watcher", sup.check)
        checks.add("nats", lambda: pub.check(args.publish_failure_limit))
        checks.add("publishing", reporter.lanes_check)
        runner, port = await opsserver.start(opsserver.app(checks), args.ops_bind, args.ops_port)
        reporter.ops_url = opsserver.url(args.ops_bind, port)
        beats = asyncio.ensure_future(healthbeat.publish_forever(nc, reporter.beat))
        try:
            if elector is None:
                await sup.lead()
            else:
                await elector.run(sup.lead)
        finally:
            beats.cancel()
            await asyncio.wait({beats})
            await runner.cleanup()
    finally:
        # With NATS down at shutdown, nats-py fails flushing into the dead socket: nothing to save.
        with contextlib.suppress(nats.errors.Error, OSError, RuntimeError):
            await nc.close()
        await client.close()
