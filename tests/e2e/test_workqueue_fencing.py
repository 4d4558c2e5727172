"""The durable queue under fencing, on a real nats-server: what a replica that lost a key's
partition still does with its work messages must not lose or postpone a change."""

from __future__ import annotations

import asyncio

from kcm_shared import runtime
from kcm_shared.bus import fencing
from kcm_shared.workqueue import durable

from tests.conftest import NatsProc
from tests.e2e.replicas import Recorder, Replica, connect, controller_name, dead_letters, drained, run, until


def test_a_deferral_never_replaces_a_change_published_by_another_replica(nats_server: NatsProc) -> None:
    """The old owner's reconcile asks for a requeue after the new owner re-published the key
    (its fill on gaining the partition): the new owner's message runs, not a deferral of it."""
    ctl = controller_name("defer-foreign")
    release = asyncio.Event()

    async def body() -> None:
        rec = Recorder()

        async def requeue_first(key: str, n: int) -> runtime.Result | None:
            if n == 1:
                await release.wait()
                return runtime.Result(requeue_after=300)
            return None

        old = await Replica.start(nats_server, ctl, rec.reconciler("old", requeue_first))
        nc, js = await connect(nats_server, "new-owner")
        new = durable.DurableQueue(js, nc, ctl, rec.reconciler("new"))
        try:
            await old.dq.start_partition(0)
            await old.dq.add("ns/a", 1)
            await until(lambda: len(rec.calls) == 1, what="first reconcile")
            await new.add("ns/a", 1)  # not consuming the partition: it publishes
            release.set()
            await until(lambda: len(rec.calls) == 2, what="the other replica's message to run")
            await until(lambda: drained(old.js, ctl, 1), what="nothing deferred left behind")
        finally:
            release.set()
            await old.stop()
            await nc.close()

    run(body())


def test_a_write_refused_by_fencing_hands_the_item_back_uncounted(nats_server: NatsProc) -> None:
    """With max_deliveries=1 any counted failure would be dead-lettered at once: a reconcile
    refused with NotOwner is not; its message goes back and runs again once owned."""
    ctl = controller_name("fenced")
    owned = {"valid": True}
    refused = asyncio.Event()

    def claim(key: str, partition: int) -> fencing.Claim | None:
        if not owned["valid"]:
            return None
        return fencing.Claim(ctl, key, partition, lambda: owned["valid"])

    async def body() -> None:
        rec = Recorder()

        async def write(key: str, n: int) -> runtime.Result | None:
            if n == 1:
                owned["valid"] = False  # the grant lapses mid-reconcile
            try:
                fencing.check_write("POST", "/api/v1/namespaces/ns/pods")
            except runtime.NotOwner:
                refused.set()
                raise
            return None

        r = await Replica.start(nats_server, ctl, rec.reconciler("a", write), max_deliveries=1, claim=claim)
        try:
            await r.dq.start_partition(0)
            await r.dq.add("ns/a", 1)
            await asyncio.wait_for(refused.wait(), 20)
            owned["valid"] = True  # owned again (say, regained): the handed-back item runs
            await until(lambda: len(rec.calls) >= 2, what="the item to run again")
            await until(lambda: drained(r.js, ctl, 1), what="the item acked")
            assert dead_letters(ctl) == 0
        finally:
            await r.stop()

    run(body())
