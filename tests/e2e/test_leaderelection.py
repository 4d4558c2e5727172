"""Leader election against the real embedded API server: one leader, hand-over on release,
take-over after a kill -9 once the lease expired, and a leader that cannot renew stops."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable

import uvloop
from kcm_shared.bus import leaderelection
from kcm_shared.client import kubeclient

from tests.conftest import ApiServer

FAST = {"lease_duration": 2.0, "renew_deadline": 1.5, "retry_period": 0.3}


async def until(predicate: Callable[[], object], limit: float, what: str) -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {limit}s waiting for {what}")
        await asyncio.sleep(0.02)


def elector(server: ApiServer, lease: str, identity: str) -> leaderelection.LeaderElector:
    client = kubeclient.KubeClient(kubeclient.load_connection(str(server.kubeconfig)), qps=0)
    return leaderelection.LeaderElector(
        client,
        namespace="kube-system",
        name=lease,
        identity=identity,
        lease_duration=FAST["lease_duration"],
        renew_deadline=FAST["renew_deadline"],
        retry_period=FAST["retry_period"],
    )


class Candidate:
    """An elector running in this process, recording when its lead() runs."""

    def __init__(self, server: ApiServer, lease: str, identity: str) -> None:
        self.elector = elector(server, lease, identity)
        self.leading = False
        self.terms = 0
        self.task = asyncio.ensure_future(self.elector.run(self.lead))

    async def lead(self) -> None:
        self.leading = True
        self.terms += 1
        try:
            await asyncio.Event().wait()
        finally:
            self.leading = False

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.elector.client.close()


def lease_spec(server: ApiServer, name: str) -> dict[str, object]:
    lease = server.kubectl_json("get", "lease", "-n", "kube-system", name)
    spec: dict[str, object] = lease["spec"]
    return spec


def test_one_leader_then_hand_over_on_release(apiserver: ApiServer) -> None:
    async def body() -> None:
        a = Candidate(apiserver, "le-release", "a")
        b = Candidate(apiserver, "le-release", "b")
        try:
            await until(lambda: a.leading or b.leading, 10, "a leader")
            leader, standby = (a, b) if a.leading else (b, a)
            # The standby keeps seeing a live lease: it never leads alongside.
            for _ in range(20):
                assert leader.leading and not standby.leading
                assert leader.elector.is_leader and not standby.elector.is_leader
                await asyncio.sleep(0.1)
            gauge = leaderelection.MASTER_STATUS.labels(name="le-release")
            await leader.stop()
            assert not leader.leading and not leader.elector.is_leader
            # A released lease is taken at the standby's next attempt, well before it would expire.
            await until(lambda: standby.leading, 10, "the standby to take over")
            assert gauge._value.get() == 1
            spec = await asyncio.to_thread(lease_spec, apiserver, "le-release")
            assert spec["holderIdentity"] == standby.elector.identity
            assert spec["leaseTransitions"] == 1
        finally:
            await a.stop()
            await b.stop()

    uvloop.run(body())


CHILD = """
import asyncio, sys
from kcm_shared import kubeclient, leaderelection

async def main():
    client = kubeclient.KubeClient(kubeclient.load_connection(sys.argv[1]), qps=0)
    el = leaderelection.LeaderElector(client, namespace="kube-system", name=sys.argv[2], identity="child",
                                      lease_duration=2.0, renew_deadline=1.5, retry_period=0.3)
    async def lead():
        print("leading", flush=True)
        await asyncio.Event().wait()
    await el.run(lead)

asyncio.run(main())
"""


def test_take_over_after_kill_waits_for_the_lease(apiserver: ApiServer) -> None:
    async def body() -> None:
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", CHILD, str(apiserver.kubeconfig), "le-kill", stdout=asyncio.subprocess.PIPE
        )
        standby: Candidate | None = None
        try:
            assert child.stdout is not None
            line = await asyncio.wait_for(child.stdout.readline(), 20)
            assert line.strip() == b"leading"
            standby = Candidate(apiserver, "le-kill", "standby")
            # The child renews every 0.3 s, so its lease never looks stale while it lives.
            for _ in range(40):
                assert not standby.leading
                await asyncio.sleep(0.1)
            child.kill()
            await asyncio.wait_for(child.wait(), 10)
            await until(lambda: standby is not None and standby.leading, 10, "take-over")
            spec = await asyncio.to_thread(lease_spec, apiserver, "le-kill")
            assert spec["holderIdentity"] == "standby"
        finally:
            if child.returncode is None:
                child.kill()
                await child.wait()
            if standby is not None:
                await standby.stop()

    uvloop.run(body())


def test_leader_that_cannot_renew_stops_leading(fresh_apiserver: ApiServer) -> None:
    async def body() -> None:
        a = Candidate(fresh_apiserver, "le-deadline", "a")
        try:
            await until(lambda: a.leading, 10, "leading")
            fresh_apiserver.stop()
            # Within renew_deadline (+ one retry) lead() is cancelled, and run() competes again.
            await until(lambda: not a.leading and not a.elector.is_leader, 10, "stepping down")
            assert not a.task.done()
            assert a.terms == 1
        finally:
            await a.stop()

    uvloop.run(body())
