"""Write fencing: claims follow the grant on the replica's own clock, and the client's guard refuses."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvloop
from kcm_shared import reconcile
from kcm_shared.bus import fencing, membership
from kcm_shared.client import kubeclient
from kcm_shared.testing import fakeclient


def run(body: Coroutine[Any, Any, None]) -> None:
    uvloop.run(body)


@dataclass
class Clock:
    now: float = 100.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Reply:
    data: bytes


@dataclass
class FakeNats:
    """Answers heartbeats with `assigned` (lease 5 s), or not at all while `down`."""

    assigned: list[int] = field(default_factory=list)
    down: bool = False

    async def request(self, subject: str, data: bytes, timeout: float) -> Reply:  # noqa: ASYNC109 - nats-py's signature
        if self.down:
            raise TimeoutError
        reply = membership.Assignment({"rs": self.assigned}, {"rs": 4}, 5.0)
        return Reply(membership._encode(reply))


def member(nc: FakeNats, clock: Clock) -> membership.Membership:
    return membership.Membership(
        nc,  # type: ignore[arg-type]
        service="controllers",
        instance="a",
        controllers=["rs"],
        ops_url="",
        report=lambda: membership.Report({}, {}),
        clock=clock,
    )


def test_claim_holds_until_the_grant_lapses_on_the_replicas_clock() -> None:
    async def body() -> None:
        clock, nc = Clock(), FakeNats([0, 1])
        m = member(nc, clock)
        await m.beat()
        claim = m.claim("rs", "ns/web", 1)
        assert claim is not None
        clock.now += 4.9
        claim.check("POST")
        assert m.owns("rs", 1) and not m.owns("rs", 2) and not m.owns("other", 1)
        nc.down = True  # no reply from here on: a frozen process or a stalled connection
        await m.beat()
        clock.now += 0.1  # the send time of the heartbeat that got the grant + 5 s
        with pytest.raises(reconcile.NotOwner, match="ns/web"):
            claim.check("POST /api/v1/namespaces/ns/pods")
        assert m.claim("rs", "ns/web", 1) is None
        assert not m.owns("rs", 1) and m.owned("rs") == set()

    run(body())


def test_a_lost_partition_voids_the_claim_even_when_granted_again() -> None:
    async def body() -> None:
        clock, nc = Clock(), FakeNats([0])
        m = member(nc, clock)
        await m.beat()
        claim = m.claim("rs", "ns/web", 0)
        assert claim is not None and claim.valid()
        nc.assigned = []
        await m.beat()
        assert not claim.valid()
        nc.assigned = [0]
        await m.beat()
        assert not claim.valid(), "a reconcile begun under one grant must not write under the next"
        again = m.claim("rs", "ns/web", 0)
        assert again is not None and again.valid()

    run(body())


def test_a_lapse_voids_claims_even_if_the_next_reply_grants_the_same_partitions() -> None:
    async def body() -> None:
        clock, nc = Clock(), FakeNats([0])
        m = member(nc, clock)
        await m.beat()
        claim = m.claim("rs", "ns/web", 0)
        assert claim is not None
        clock.now += 9.0  # frozen past the lease; the coordinator may have moved it and back
        await m.beat()
        assert m.owned("rs") == {0}
        assert not claim.valid()

    run(body())


def test_only_writes_inside_a_void_claim_are_refused() -> None:
    valid = True
    claim = fencing.Claim("rs", "ns/web", 0, lambda: valid)
    fencing.check_write("POST", "/x")  # no claim: leader election, the watcher
    with fencing.holding(claim):
        fencing.check_write("POST", "/x")
        valid = False
        with pytest.raises(reconcile.NotOwner):
            fencing.check_write("DELETE", "/x")
    fencing.check_write("DELETE", "/x")


def test_client_asks_the_guard_before_every_write_and_never_for_reads() -> None:
    async def body() -> None:
        asked: list[tuple[str, str]] = []

        def guard(method: str, path: str) -> None:
            asked.append((method, path))
            raise reconcile.NotOwner("gone")

        # Nothing listens there: a write that got past the guard would fail to connect.
        client = kubeclient.KubeClient(kubeclient.Connection("http://127.0.0.1:9"), write_guard=guard)
        try:
            for write in (
                client.create("/api/v1/namespaces/ns/pods", {}),
                client.update("/api/v1/namespaces/ns/pods/p", {}),
                client.patch("/api/v1/namespaces/ns/pods/p", {}),
                client.delete("/api/v1/namespaces/ns/pods/p"),
            ):
                with pytest.raises(reconcile.NotOwner):
                    await write
            with pytest.raises(OSError):
                await client.get("/api/v1/namespaces/ns/pods/p")
        finally:
            await client.close()
        assert [m for m, _ in asked] == ["POST", "PUT", "PATCH", "DELETE"]

    run(body())


def test_events_queued_in_a_reconcile_are_dropped_once_its_claim_is_void() -> None:
    async def body() -> None:
        from kcm_shared.runtime import events

        client = fakeclient.FakeClient(write_guard=fencing.check_write)
        valid = True
        recorder = events.EventRecorder(client, "rs")
        owner = {"kind": "ReplicaSet", "metadata": {"namespace": "ns", "name": "web", "uid": "u"}}
        task = asyncio.create_task(recorder.run())
        try:
            with fencing.holding(fencing.Claim("rs", "ns/web", 0, lambda: valid)):
                recorder.event(owner, events.NORMAL, "SuccessfulCreate", "Created pod: web-1")
                await asyncio.wait_for(recorder.flush(), 5)
                valid = False
                recorder.event(owner, events.NORMAL, "SuccessfulDelete", "Deleted pod: web-1")
            # Written after the reconcile's context is gone: the claim went with the event.
            await asyncio.wait_for(recorder.flush(), 5)
        finally:
            task.cancel()
        assert [event["reason"] for _, _, event in client.calls("create")] == ["SuccessfulCreate"]

    run(body())
