"""What the object stream holds, read straight from nats-server: the last message of every
subject under a filter, for the watcher and bus-fault tests (tests/e2e/test_watcher.py,
test_bus_faults.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import nats
import uvloop
from kcm_shared.bus import wire
from nats.js import api

from tests.conftest import (
    NatsProc,
)


@dataclass
class Entry:
    seq: int
    headers: dict[str, str]
    data: bytes

    @property
    def event(self) -> str:
        return self.headers.get("Kcm-Event", "")

    @property
    def rv(self) -> str:
        return self.headers.get("Kcm-Resource-Version", "")


async def _last_per_subject(url: str, filter_subject: str) -> dict[str, Entry]:
    nc = await nats.connect(url, connect_timeout=2, max_reconnect_attempts=0)
    try:
        js = nc.jetstream()
        try:
            await js.stream_info(wire.OBJECTS_STREAM)
        except nats.js.errors.NotFoundError:
            return {}
        config = api.ConsumerConfig(
            deliver_policy=api.DeliverPolicy.LAST_PER_SUBJECT,
            ack_policy=api.AckPolicy.NONE,
            inactive_threshold=10.0,
        )
        sub = await js.pull_subscribe(filter_subject, stream=wire.OBJECTS_STREAM, config=config)
        out: dict[str, Entry] = {}
        remaining = (await sub.consumer_info()).num_pending or 0
        while remaining > 0:
            for msg in await sub.fetch(min(remaining, 500), timeout=5):
                out[msg.subject] = Entry(msg.metadata.sequence.stream, dict(msg.headers or {}), msg.data)
                remaining = msg.metadata.num_pending
        await sub.unsubscribe()
        return out
    finally:
        await nc.close()


def stream_state(server: NatsProc, filter_subject: str = "kcm.>") -> dict[str, Entry]:
    """A snapshot of many subjects: exact only while nothing writes to them."""
    return uvloop.run(_last_per_subject(server.url, filter_subject))
