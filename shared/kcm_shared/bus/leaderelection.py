"""Lease-based leader election, with client-go's leaderelection semantics.

Services that must run one active replica at a time (the watcher, the coordinator) wrap
their work in `LeaderElector.run(lead)`: it acquires a coordination.k8s.io/v1 Lease, runs
`lead()` while renewing it, cancels `lead()` as soon as a renewal cannot be made within
`renew_deadline`, and goes back to acquiring. Flags and metric follow kube-controller-manager
(`--leader-elect*`, `leader_election_master_status{name}`).

Safety rests on the same timing argument as upstream: a candidate takes over only when the
record it observed has not changed for the record's lease duration, measured on its own
monotonic clock (so no clock sync between hosts is needed), while the holder stops leading
once `renew_deadline` (< lease duration) passed since its last successful renewal was sent.
Writes use the Lease's resourceVersion, so two candidates racing for one record cannot both win.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

import aiohttp
import prometheus_client

from kcm_shared.apimachinery import goduration, pflagvalue
from kcm_shared.client import kubeclient

log = logging.getLogger("kcm.leaderelection")

MASTER_STATUS = prometheus_client.Gauge(
    "leader_election_master_status",
    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master.",
    ["name"],
)

# Upstream waits retry_period * (1 + rand * 1.2) between acquire attempts, so candidates
# started together do not hammer the API server in lock step.
_JITTER = 1.2
_RELEASE_TIMEOUT = 5.0


def micro_time(now: dt.datetime | None = None) -> str:
    """A metav1.MicroTime: RFC 3339 in UTC with microseconds."""
    moment = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class Record:
    """The leader election fields of a Lease spec."""

    holder: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    transitions: int = 0

    @classmethod
    def from_lease(cls, lease: kubeclient.Obj) -> Record:
        spec = lease.get("spec") or {}
        return cls(
            holder=spec.get("holderIdentity") or "",
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            transitions=int(spec.get("leaseTransitions") or 0),
        )

    def to_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "leaseTransitions": self.transitions,
        }
        if self.acquire_time is not None:
            spec["acquireTime"] = self.acquire_time
        if self.renew_time is not None:
            spec["renewTime"] = self.renew_time
        return spec


class Observer:
    """The pure decision logic: what this candidate last saw of the Lease, and what it may write.

    A record counts as expired when it has stayed unchanged for its lease duration since this
    candidate first saw it; the holder's clock never enters the decision.
    """

    def __init__(self, identity: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.identity = identity
        self._clock = clock
        self.record: Record | None = None
        self.observed_at = clock()

    def observe(self, record: Record | None) -> None:
        if record != self.record:
            self.record = record
            self.observed_at = self._clock()

    @property
    def is_holder(self) -> bool:
        return self.record is not None and self.record.holder == self.identity

    def held_by_other(self) -> bool:
        """Someone else holds the lease and it has not expired by our clock."""
        record = self.record
        if record is None or not record.holder or record.holder == self.identity:
            return False
        return self._clock() < self.observed_at + record.lease_duration_seconds

    def next_record(self, now: str, lease_duration_seconds: int) -> Record | None:
        """The record to write to acquire or renew, or None when the lease is someone else's."""
        current = self.record
        if current is None:
            return Record(self.identity, lease_duration_seconds, now, now, 0)
        if self.held_by_other():
            return None
        if current.holder == self.identity:
            return replace(current, lease_duration_seconds=lease_duration_seconds, renew_time=now)
        return Record(self.identity, lease_duration_seconds, now, now, current.transitions + 1)

    def release_record(self, now: str) -> Record | None:
        """An empty holder so a standby takes over at once (upstream ReleaseOnCancel); None if not ours."""
        if self.record is None or not self.is_holder:
            return None
        return Record("", 1, now, now, self.record.transitions)


class LeaderElector:
    """Runs a callable only while holding a Lease; see the module docstring for the guarantees."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not lease_duration > renew_deadline:
            raise ValueError("lease duration must be greater than the renew deadline")
        if not renew_deadline > _JITTER * retry_period:
            raise ValueError(f"renew deadline must be greater than retry period * {_JITTER}")
        if retry_period <= 0 or not identity:
            raise ValueError("retry period must be positive and identity non-empty")
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._clock = clock
        self._observer = Observer(identity, clock)
        self._leading = False
        self._renewed_at = -math.inf  # when the last successful write was sent, monotonic
        self._lease: kubeclient.Obj | None = None  # last Lease read or written, for its resourceVersion
        self._path = kubeclient.resource_path("coordination.k8s.io", "v1", "leases", namespace, name)
        self._collection = kubeclient.resource_path("coordination.k8s.io", "v1", "leases", namespace)
        MASTER_STATUS.labels(name=name).set(0)

    @property
    def is_leader(self) -> bool:
        """True while leading and within renew_deadline of the last successful renewal."""
        return self._leading and self._clock() - self._renewed_at < self.renew_deadline

    @property
    def leader(self) -> str:
        """The holder this replica last observed ("" when none or unknown)."""
        return self._observer.record.holder if self._observer.record else ""

    async def run(self, lead: Callable[[], Awaitable[None]]) -> None:
        """Forever: acquire the Lease, run lead() while renewing; on lost renewal cancel lead() and
        go back to acquiring. Releases the lease (ReleaseOnCancel) when cancelled.

        lead() should run until cancelled. If it returns, run() releases the lease and returns;
        if it raises, run() releases the lease and re-raises.
        """
        try:
            while True:
                await self._acquire()
                if await self._lead_while_renewing(lead):
                    return
        finally:
            self._set_leading(False)
            await self._release()

    async def _acquire(self) -> None:
        log.info("waiting to acquire lease", extra={"lease": f"{self.namespace}/{self.name}"})
        while True:
            if await self._try_acquire_or_renew():
                break
            await asyncio.sleep(self.retry_period * (1 + random.random() * _JITTER))
        log.info(
            "acquired lease", extra={"lease": f"{self.namespace}/{self.name}", "identity": self.identity}
        )
        self._set_leading(True)

    async def _lead_while_renewing(self, lead: Callable[[], Awaitable[None]]) -> bool:
        """Run lead() until it ends (True) or the lease is lost (False)."""

        async def call_lead() -> None:
            await lead()

        leader_task = asyncio.ensure_future(call_lead())
        renew_task = asyncio.ensure_future(self._renew_until_lost())
        try:
            await asyncio.wait({leader_task, renew_task}, return_when=asyncio.FIRST_COMPLETED)
            lost = renew_task.done()
            if lost:
                # Stop claiming leadership before lead() winds down, not after.
                self._set_leading(False)
        finally:
            for task in (renew_task, leader_task):
                if not task.done():
                    task.cancel()
            # lead() must have stopped before we compete again: no overlap with our next term.
            await asyncio.wait({leader_task, renew_task})
        if lost:
            renew_task.result()  # an unexpected error in renewing surfaces here
            log.warning(
                "lost lease", extra={"lease": f"{self.namespace}/{self.name}", "identity": self.identity}
            )
            return False
        leader_task.result()  # lead() ended on its own: re-raise its error, if any
        return True

    async def _renew_until_lost(self) -> None:
        """Returns when a renewal could not be made in time: leadership is over."""
        while True:
            await asyncio.sleep(self.retry_period)
            while not await self._try_acquire_or_renew():
                if self._clock() - self._renewed_at >= self.renew_deadline:
                    return
                await asyncio.sleep(self.retry_period)

    def _set_leading(self, leading: bool) -> None:
        self._leading = leading
        MASTER_STATUS.labels(name=self.name).set(1 if leading else 0)

    async def _try_acquire_or_renew(self) -> bool:
        sent = self._clock()
        # Bound each attempt so a hung API call cannot keep a stale leader past its deadline.
        budget = self.renew_deadline
        if self._leading:
            budget = max(0.0, self._renewed_at + self.renew_deadline - sent)
        try:
            async with asyncio.timeout(budget):
                return await self._attempt(sent)
        except (kubeclient.ApiError, aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.info(
                "lease attempt failed", extra={"lease": f"{self.namespace}/{self.name}", "error": str(exc)}
            )
            return False

    async def _attempt(self, sent: float) -> bool:
        try:
            lease: kubeclient.Obj | None = await self.client.get(self._path)
        except kubeclient.ApiError as exc:
            if not exc.not_found:
                raise
            lease = None
        self._observer.observe(Record.from_lease(lease) if lease is not None else None)
        record = self._observer.next_record(micro_time(), max(1, math.ceil(self.lease_duration)))
        if record is None:
            return False
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": record.to_spec(),
            }
            written = await self.client.create(self._collection, body)
        else:
            written = await self.client.update(self._path, {**lease, "spec": record.to_spec()})
        self._observer.observe(Record.from_lease(written))
        self._renewed_at = sent
        return True

    async def _release(self) -> None:
        record = self._observer.release_record(micro_time())
        if record is None:
            return
        try:
            async with asyncio.timeout(_RELEASE_TIMEOUT):
                lease = await self.client.get(self._path)
                if Record.from_lease(lease).holder != self.identity:
                    return
                written = await self.client.update(self._path, {**lease, "spec": record.to_spec()})
            self._observer.observe(Record.from_lease(written))
            log.info("released lease", extra={"lease": f"{self.namespace}/{self.name}"})
        except (kubeclient.ApiError, aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.warning(
                "could not release lease", extra={"lease": f"{self.namespace}/{self.name}", "error": str(exc)}
            )


def add_arguments(p: argparse.ArgumentParser, default_name: str) -> None:
    """kube-controller-manager's leader election flags."""
    g = p.add_argument_group("leader election")
    g.add_argument(
        "--leader-elect",
        type=pflagvalue.boolean,
        nargs="?",
        const=True,
        default=True,
        help="run only while holding the lease (--leader-elect=false: always active)",
    )
    g.add_argument("--leader-elect-lease-duration", type=goduration.seconds, default=15.0, metavar="DURATION")
    g.add_argument("--leader-elect-renew-deadline", type=goduration.seconds, default=10.0, metavar="DURATION")
    g.add_argument("--leader-elect-retry-period", type=goduration.seconds, default=2.0, metavar="DURATION")
    g.add_argument("--leader-elect-resource-lock", default="leases", choices=["leases"])
    g.add_argument("--leader-elect-resource-namespace", default="kube-system")
    g.add_argument("--leader-elect-resource-name", default=default_name)


def from_args(args: argparse.Namespace, client: kubeclient.KubeClient, identity: str) -> LeaderElector | None:
    """The elector the flags describe, None when --leader-elect=false."""
    if not args.leader_elect:
        return None
    return LeaderElector(
        client,
        namespace=args.leader_elect_resource_namespace,
        name=args.leader_elect_resource_name,
        identity=identity,
        lease_duration=args.leader_elect_lease_duration,
        renew_deadline=args.leader_elect_renew_deadline,
        retry_period=args.leader_elect_retry_period,
    )
