"""The coordinator's bookkeeping: members, fenced partition grants, aggregated health.

`service` feeds every heartbeat to `Coordinator.heartbeat` while this replica leads and
serves `status()` and the per-controller checks; everything here is synchronous and takes
its time from an injected monotonic clock, so the tests drive it with a fake one.

Fencing (architecture invariant 2): a partition is granted to its target owner only while
no other member may still hold it - i.e. no member whose last heartbeat is younger than
lease + margin reports it held or was granted it in our last reply to that member. A
replica's own grant lapses `lease` after it *sent* the heartbeat (on its clock), and its API
writes are checked against that deadline, so by the time we hear nothing for lease + margin
(counted from when we *received* the heartbeat) it writes nothing more, however slow its
release; the margin covers clock-rate drift and a write's way from its check to the API
server (docs/bus.md, "Fencing"). A coordinator that just took over does not know what its
predecessor granted, so for lease + margin it only confirms what replicas report, unless it
`restore`d its predecessor's grants from the `kcm-grants` bucket.

With the bucket (`service` persists each member's grant there before replying), a member
silent for lease + margin is not forgotten at once: its entry is deleted first, with a
revision check, so a replica that renewed its grant in the bucket meanwhile (as replicas do
while no coordinator answers) is seen as alive instead (`revoke`, `renewed`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import prometheus_client
from kcm_shared.bus import membership, subjects

from kcm_coordinator import assignment

log = logging.getLogger("kcm.coordinator")

MEMBERS = prometheus_client.Gauge(
    "kcm_coordinator_members", "Live replicas heartbeating to this coordinator."
)
UNOWNED = prometheus_client.Gauge(
    "kcm_coordinator_partitions_unowned", "Work partitions no live replica holds.", ["controller"]
)


@dataclass
class Member:
    service: str
    instance: str
    ops_url: str
    controllers: list[str]
    held: dict[str, set[int]]
    health: dict[str, str | None]
    depth: dict[str, int]
    seen: float
    granted: dict[str, set[int]] = field(default_factory=dict)
    revision: int = 0  # of its entry in the grants bucket; 0: none written
    persisted: dict[str, set[int]] | None = None  # what that entry holds


class Coordinator:
    def __init__(
        self,
        *,
        partitions: int = 8,
        partitions_for: dict[str, int] | None = None,
        lease: float = 5.0,
        margin: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.default_partitions = partitions
        self.partitions_for = dict(partitions_for or {})
        self.lease = lease
        self.margin = margin
        self._clock = clock
        self.members: dict[str, Member] = {}
        self.targets: dict[str, dict[int, str]] = {}
        self.controllers: set[str] = set()
        self._unowned_since: dict[str, float] = {}
        self._term_start = clock()

    def start_term(self) -> None:
        """Forget everything: called when this replica gains or loses the leadership."""
        self.members.clear()
        self.targets.clear()
        self.controllers.clear()
        self._unowned_since.clear()
        self._term_start = self._clock()
        MEMBERS.set(0)
        UNOWNED.clear()

    def restore(self, records: list[tuple[membership.GrantRecord, int]]) -> None:
        """Take over the grants a predecessor persisted (record, revision): each holder counts
        as alive from now, so its partitions stay its own for at least lease + margin."""
        now = self._clock()
        for record, revision in records:
            assigned = {c: set(ps) for c, ps in record.assigned.items()}
            self.members[record.instance] = Member(
                service="controllers",
                instance=record.instance,
                ops_url="",
                controllers=sorted(assigned),
                held={c: set(ps) for c, ps in assigned.items()},
                health={},
                depth={},
                seen=now,
                granted=assigned,
                revision=revision,
                persisted={c: set(ps) for c, ps in assigned.items()},
            )
            self.controllers.update(assigned)
        self._term_start = -float("inf")  # every grant there is is known: nothing to confirm
        log.info("grants restored", extra={"members": len(records)})

    def unpersisted(self, instance: str) -> membership.GrantRecord | None:
        """The grant to write to the bucket before replying to `instance`, if it changed."""
        member = self.members.get(instance)
        if member is None or member.persisted == member.granted:
            return None
        return membership.GrantRecord(instance, {c: sorted(ps) for c, ps in member.granted.items()})

    def persisted(self, instance: str, record: membership.GrantRecord, revision: int) -> None:
        member = self.members.get(instance)
        if member is not None:
            member.persisted = {c: set(ps) for c, ps in record.assigned.items()}
            member.revision = revision

    def revision(self, instance: str) -> int:
        member = self.members.get(instance)
        return 0 if member is None else member.revision

    def revoke(self) -> list[tuple[str, int]]:
        """Silent members whose bucket entry must be deleted (at this revision) before their
        partitions may go to others: call `forget` once deleted, `renewed` if it had moved on."""
        limit = self._clock() - self.lease - self.margin
        return [(i, m.revision) for i, m in self.members.items() if m.seen < limit and m.revision]

    def forget(self, instance: str, revision: int) -> None:
        member = self.members.get(instance)
        if (
            member is not None
            and member.revision == revision
            and member.seen < self._clock() - self.lease - self.margin
        ):
            log.warning("member expired", extra={"instance": instance})
            del self.members[instance]

    def renewed(self, instance: str, revision: int) -> None:
        """`instance` renewed its grant in the bucket (now at `revision`): it is alive."""
        member = self.members.get(instance)
        if member is not None:
            member.seen = self._clock()
            member.revision = revision

    def partitions(self, controller: str) -> int:
        return self.partitions_for.get(controller, self.default_partitions)

    @property
    def confirming(self) -> bool:
        """The first lease + margin of a term: only confirm what replicas hold, move nothing
        (a predecessor's grant, unknown here, lasts at most that long)."""
        return self._clock() < self._term_start + self.lease + self.margin

    def forged(self, scope: str, instance: str, beat: membership.Heartbeat) -> str | None:
        """Why `beat`, heard on the subject of `scope` and `instance` (which only an identity of
        that scope may publish to), speaks for another replica; None when it is the replica's own."""
        if beat.instance != instance:
            return "its instance is not its subject's"
        if beat.controllers and subjects.scope_token(beat.controllers) != scope:
            return "its controllers are not its subject's"
        member = self.members.get(instance)
        if member is not None and subjects.scope_token(member.controllers) != scope:
            return "the instance is a replica of other controllers"
        return None

    def heartbeat(self, beat: membership.Heartbeat) -> membership.Assignment:
        now = self._clock()
        self._expire()
        if not beat.controllers:
            # A replica leaving after releasing everything: its partitions are free right away.
            self.members.pop(beat.instance, None)
            return membership.Assignment({}, {}, self.lease)
        member = Member(
            service=beat.service,
            instance=beat.instance,
            ops_url=beat.ops_url,
            controllers=list(beat.controllers),
            held={c: set(ps) for c, ps in beat.held.items()},
            health=dict(beat.health),
            depth=dict(beat.depth),
            seen=now,
        )
        previous = self.members.get(beat.instance)
        if previous is not None:
            member.granted = previous.granted
            member.revision = previous.revision
            member.persisted = previous.persisted
        self.members[beat.instance] = member
        self.controllers.update(beat.controllers)
        assigned: dict[str, list[int]] = {}
        for controller in member.controllers:
            grants = self._grants(controller, member)
            member.granted[controller] = grants
            assigned[controller] = sorted(grants)
        for controller in set(member.granted) - set(member.controllers):
            del member.granted[controller]
        self.refresh()
        return membership.Assignment(
            assigned=assigned,
            partitions={c: self.partitions(c) for c in member.controllers},
            lease_seconds=self.lease,
        )

    def refresh(self) -> None:
        """Forget members silent for longer than lease + margin (they have fenced themselves),
        note since when partitions are unowned, and update the metrics. Called on every
        heartbeat and periodically, so a silent fleet is noticed too."""
        now = self._clock()
        self._expire()
        MEMBERS.set(sum(1 for m in self.members.values() if self._live(m)))
        for controller in self.controllers:
            unowned = len(self.unowned(controller))
            UNOWNED.labels(controller=controller).set(unowned)
            if unowned:
                self._unowned_since.setdefault(controller, now)
            else:
                self._unowned_since.pop(controller, None)

    def _expire(self) -> None:
        limit = self._clock() - self.lease - self.margin
        # A member with a bucket entry goes only through `revoke` and `forget`.
        for instance in [i for i, m in self.members.items() if m.seen < limit and not m.revision]:
            log.warning("member expired", extra={"instance": instance})
            del self.members[instance]

    def _live(self, member: Member) -> bool:
        return self._clock() - member.seen <= self.lease

    def replicas(self, controller: str) -> list[str]:
        """Live replicas of a controller, the ones partitions are balanced over."""
        return sorted(i for i, m in self.members.items() if controller in m.controllers and self._live(m))

    def holders(self, controller: str, partition: int) -> list[str]:
        """Live members that report holding the partition."""
        return sorted(
            i for i, m in self.members.items() if self._live(m) and partition in m.held.get(controller, ())
        )

    def _claimed_by_other(self, controller: str, partition: int, instance: str) -> bool:
        # Every remembered member counts, live or not: its grant may not have lapsed yet.
        return any(
            partition in m.held.get(controller, ()) or partition in m.granted.get(controller, ())
            for i, m in self.members.items()
            if i != instance
        )

    def _grants(self, controller: str, member: Member) -> set[int]:
        count = self.partitions(controller)
        if self.confirming:
            wanted = {p for p in member.held.get(controller, ()) if 0 <= p < count}
        else:
            target = self._rebalance(controller)
            wanted = {p for p, owner in target.items() if owner == member.instance}
        return {p for p in wanted if not self._claimed_by_other(controller, p, member.instance)}

    def _rebalance(self, controller: str) -> dict[int, str]:
        count = self.partitions(controller)
        replicas = self.replicas(controller)
        before = self.targets.get(controller, {})
        current: dict[int, str] = {}
        for p in range(count):
            owner = before.get(p)
            holders = self.holders(controller, p)
            # A move decided earlier stands once it is under way (granted to its target) or
            # nobody holds the partition any more. Until then the live holder is the owner:
            # a target drawn while a holder was briefly not live (late heartbeats) would
            # otherwise move partitions it never stopped holding. The same inputs give the
            # same target, so a move whose holder is still releasing is not undone.
            started = owner in self.members and p in self.members[owner].granted.get(controller, ())
            if owner in replicas and (started or not holders):
                current[p] = owner
            elif len(holders) == 1 and holders[0] in replicas:
                current[p] = holders[0]
            elif owner in replicas:
                current[p] = owner
        target = assignment.assign(count, replicas, current)
        moved = assignment.moves(before, target)
        if moved:
            log.info("rebalanced", extra={"controller": controller, "moved": moved, "replicas": replicas})
        self.targets[controller] = target
        return target

    def unowned(self, controller: str) -> list[int]:
        return [p for p in range(self.partitions(controller)) if not self.holders(controller, p)]

    def controller_error(self, controller: str) -> str | None:
        """The per-controller health check: None when healthy, else why not."""
        now = self._clock()
        replicas = self.replicas(controller)
        if not replicas:
            return "no live replica"
        problems = [
            f"{i}: {err}" for i in replicas if (err := self.members[i].health.get(controller)) is not None
        ]
        shared = {
            p: h for p in range(self.partitions(controller)) if len(h := self.holders(controller, p)) > 1
        }
        problems.extend(f"partition {p} held by {', '.join(h)}" for p, h in shared.items())
        since = self._unowned_since.get(controller)
        # A hand-over leaves a partition unowned for a heartbeat or two; that is not a fault.
        if since is not None and now - since > self.lease:
            problems.append(f"partitions {self.unowned(controller)} unowned for {now - since:.0f}s")
        return "; ".join(problems) or None

    def status(self, *, leader: bool, identity: str) -> dict[str, Any]:
        now = self._clock()
        controllers: dict[str, Any] = {}
        for name in sorted(self.controllers):
            error = self.controller_error(name)
            replicas = self.replicas(name)
            controllers[name] = {
                "replicas": replicas,
                "partitions": {
                    str(p): ",".join(self.holders(name, p)) or None for p in range(self.partitions(name))
                },
                "depth": sum(self.members[i].depth.get(name, 0) for i in replicas),
                "healthy": error is None,
                "error": error,
            }
        members = [
            {
                "service": m.service,
                "instance": m.instance,
                "ops_url": m.ops_url,
                "age_seconds": round(now - m.seen, 3),
                "controllers": m.controllers,
                "held": {c: sorted(ps) for c, ps in m.held.items()},
            }
            for m in sorted(self.members.values(), key=lambda m: m.instance)
            if self._live(m)
        ]
        return {"leader": leader, "identity": identity, "controllers": controllers, "members": members}
