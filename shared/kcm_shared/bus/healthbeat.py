"""Health heartbeats of the services that are not controllers, on `kcm.health.<service>.<instance>`.

The watcher and every coordinator replica run `publish_forever` with a function that
describes their health now; the leading coordinator subscribes to `subjects.health_filter()`
and aggregates what it hears (kcm_coordinator.fleethealth) beside the controllers' reports,
which travel on the coordination heartbeat instead (kcm_shared.bus.membership). Plain
core-NATS publishes: nobody replies, and a heartbeat that is lost is replaced by the next one.

A publisher that falls silent for `MISSED` intervals plus `MARGIN` counts as gone (frozen,
dead or cut off), so a stopped watcher turns unhealthy within about four seconds at the
default interval; the interval travels in every beat so the reader needs no configuration.
The wire format is documented in docs/bus.md ("Health heartbeats").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import msgspec
import nats.errors
from nats.aio.client import Client

from kcm_shared.base import cancellation
from kcm_shared.bus import subjects

log = logging.getLogger("kcm.healthbeat")

INTERVAL = 1.0
MISSED = 3
MARGIN = 1.0
MAX_INTERVAL = 10.0


def silent_after(interval: float) -> float:
    """Seconds without a beat after which a publisher beating every `interval` counts as gone.

    A beat's own claim is bounded (0 to MAX_INTERVAL), so no beat can keep itself live for long."""
    return MISSED * min(max(interval, 0.0), MAX_INTERVAL) + MARGIN


class Resource(msgspec.Struct, omit_defaults=True):
    """How far one resource's publishing is behind the API server (the watcher's beats)."""

    seen: str = ""  # newest resourceVersion the list or watch returned
    marker: str = ""  # resourceVersion of the last progress marker the stream acknowledged
    unacked: int = 0  # messages handed to the stream and not acknowledged yet
    lag_seconds: float = 0.0  # how long the oldest of them has waited (0: none waiting)
    idle_seconds: float | None = None  # since the stream last acknowledged one (None: never)
    error: str | None = None  # why this resource is failing; None while it is not


class Beat(msgspec.Struct, omit_defaults=True):
    """Service -> whoever aggregates health, every `interval` seconds."""

    service: str
    instance: str
    leader: bool  # the active replica (holds its Lease, or runs without leader election)
    interval: float
    checks: dict[str, str | None]  # the service's own health checks: None = healthy, else why not
    ops_url: str = ""
    identity: str = ""  # its leader-election identity, when it differs from the instance
    resources: dict[str, Resource] = {}


encode = msgspec.json.Encoder().encode
decode = msgspec.json.Decoder(Beat).decode


async def publish_forever(nc: Client, describe: Callable[[], Beat], interval: float = INTERVAL) -> None:
    """Publish `describe()` every `interval` seconds until cancelled; NATS outages are skipped."""
    while True:
        cancellation.checkpoint()
        beat = describe()
        try:
            await nc.publish(subjects.health_subject(beat.service, beat.instance), encode(beat))
        except (nats.errors.Error, OSError) as exc:
            log.debug("health beat not sent", extra={"error": repr(exc)})
        await asyncio.sleep(interval)
