"""Durable-queue replicas against a real nats-server, for the work-queue tests
(tests/e2e/test_workqueue.py, test_workqueue_fencing.py): each `Replica` is a DurableQueue with
a NATS connection of its own, all in one process, so a `Recorder` sees every reconcile of every
replica (and any two running one key at once).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import uvloop
from kcm_shared import runtime
from kcm_shared.bus import natsconn, subjects, wire
from kcm_shared.workqueue import durable
from nats.aio.client import Client
from nats.js import JetStreamContext
from prometheus_client import REGISTRY

from tests.conftest import NatsProc

_names = itertools.count()


def run(body: Coroutine[Any, Any, None]) -> None:
    uvloop.run(body)


def controller_name(what: str) -> str:
    return f"wq-{what}-{next(_names)}-{random.randrange(1 << 30)}"


async def until(predicate: Callable[[], Awaitable[Any] | Any], within: float = 20.0, what: str = "") -> None:
    """Poll `predicate` (sync or async) until truthy; fail after `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        result = predicate()
        if isinstance(result, Awaitable):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what or predicate}")
        await asyncio.sleep(0.02)


async def connect(server: NatsProc, name: str) -> tuple[Client, JetStreamContext]:
    nc = await natsconn.connect(natsconn.NatsOptions(url=server.url), name)
    return nc, nc.jetstream()


@dataclass
class Call:
    replica: str
    key: str
    start: float
    end: float = 0.0


@dataclass
class Recorder:
    """Reconciles of all replicas, and any moment two of them ran one key at once."""

    calls: list[Call] = field(default_factory=list)
    active: dict[str, str] = field(default_factory=dict)
    overlaps: list[tuple[str, str, str, float]] = field(default_factory=list)

    def enter(self, replica: str, key: str) -> Call:
        now = time.monotonic()
        if key in self.active:
            self.overlaps.append((key, self.active[key], replica, now))
        self.active[key] = replica
        call = Call(replica, key, now)
        self.calls.append(call)
        return call

    def leave(self, call: Call) -> None:
        call.end = time.monotonic()
        if self.active.get(call.key) == call.replica:
            del self.active[call.key]

    def of(self, key: str) -> list[Call]:
        return [c for c in self.calls if c.key == key]

    def reconciler(
        self, replica: str, body: Callable[[str, int], Awaitable[runtime.Result | None]] | None = None
    ) -> runtime.Reconcile:
        async def reconcile(key: str) -> runtime.Result | None:
            call = self.enter(replica, key)
            try:
                return await body(key, len(self.of(key))) if body else None
            finally:
                self.leave(call)

        return reconcile


async def stream_messages(js: JetStreamContext, controller: str) -> int:
    info = await js.stream_info(subjects.work_stream(controller))
    return info.state.messages


async def drained(js: JetStreamContext, controller: str, partitions: int) -> bool:
    """Nothing stored, nothing out with a replica or waiting for a retry."""
    if await stream_messages(js, controller):
        return False
    for p in range(partitions):
        info = await js.consumer_info(subjects.work_stream(controller), f"{controller}-p{p}")
        if info.num_ack_pending or info.num_pending:
            return False
    return True


async def dead_letter(js: JetStreamContext, controller: str) -> Any:
    return await js.get_last_msg(wire.DLQ_STREAM, subjects.dlq_subject(controller))


def dead_letters(controller: str) -> float:
    return REGISTRY.get_sample_value("kcm_workqueue_dead_letters_total", {"name": controller}) or 0.0


def first_waits_for(release: asyncio.Event) -> Callable[[str, int], Awaitable[None]]:
    """A reconcile body whose first call of each key waits until `release` is set."""

    async def body(key: str, n: int) -> None:
        if n == 1:
            await release.wait()

    return body


class Replica:
    """A DurableQueue with its own connection and running worker pool."""

    def __init__(self, nc: Client, js: JetStreamContext, dq: durable.DurableQueue) -> None:
        self.nc, self.js, self.dq = nc, js, dq
        self.task = asyncio.create_task(dq.run())

    @classmethod
    async def start(
        cls, server: NatsProc, controller: str, reconcile: runtime.Reconcile, **kw: Any
    ) -> Replica:
        nc, js = await connect(server, f"replica-{controller}")
        dq = durable.DurableQueue(js, nc, controller, reconcile, **kw)
        await dq.setup()
        return cls(nc, js, dq)

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.wait([self.task])
        if not self.nc.is_closed:
            await self.nc.close()
