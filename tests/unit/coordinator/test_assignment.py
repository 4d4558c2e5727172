"""Partition assignment: the pure balancing function (tables), and the coordinator's fenced
grants, confirmation after take-over and health on a fake clock."""

from __future__ import annotations

from collections import Counter

import pytest
from kcm_coordinator import assignment, state
from kcm_shared.bus import membership, subjects


@pytest.mark.parametrize(
    ("partitions", "replicas", "current", "expected"),
    [
        (4, [], {}, {}),
        (4, ["a"], {}, {0: "a", 1: "a", 2: "a", 3: "a"}),
        (4, ["a", "b"], {}, {0: "a", 1: "a", 2: "b", 3: "b"}),
        # b joins: a keeps its first half, b takes the rest.
        (4, ["a", "b"], {0: "a", 1: "a", 2: "a", 3: "a"}, {0: "a", 1: "a", 2: "b", 3: "b"}),
        # b leaves: only b's partitions move.
        (4, ["a", "c"], {0: "a", 1: "b", 2: "c", 3: "b"}, {0: "a", 1: "a", 2: "c", 3: "c"}),
        # uneven: whoever owns more keeps the extra one.
        (5, ["a", "b"], {0: "b", 1: "b", 2: "b"}, {0: "b", 1: "b", 2: "b", 3: "a", 4: "a"}),
        # owners that are gone are ignored.
        (2, ["a"], {0: "zz", 1: "zz"}, {0: "a", 1: "a"}),
        # more replicas than partitions: some get none.
        (2, ["a", "b", "c"], {}, {0: "a", 1: "b"}),
    ],
)
def test_assign_table(
    partitions: int, replicas: list[str], current: dict[int, str], expected: dict[int, str]
) -> None:
    assert assignment.assign(partitions, replicas, current) == expected


@pytest.mark.parametrize("partitions", [1, 7, 8, 13])
@pytest.mark.parametrize("count", [1, 2, 3, 5])
def test_assign_is_balanced_and_sticky_on_join_and_leave(partitions: int, count: int) -> None:
    replicas = [f"r{i}" for i in range(count)]
    before = assignment.assign(partitions, replicas, {})
    loads = Counter(before.values())
    assert sorted(before) == list(range(partitions))
    assert max(loads.values()) - min(loads.get(r, 0) for r in replicas) <= 1
    joined = assignment.assign(partitions, [*replicas, "new"], before)
    # a join moves only what the newcomer takes
    assert assignment.moves(before, joined) == sum(1 for o in joined.values() if o == "new")
    left = assignment.assign(partitions, replicas[1:] or ["other"], before)
    assert assignment.moves(before, left) == sum(1 for o in before.values() if o == "r0")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def beat(instance: str, held: list[int] | None = None, error: str | None = None) -> membership.Heartbeat:
    return membership.Heartbeat(
        service="controllers",
        instance=instance,
        controllers=["rs"],
        held={"rs": held or []},
        health={"rs": error},
        depth={"rs": 2},
        ops_url=f"http://{instance}",
    )


def coordinator(clock: Clock) -> state.Coordinator:
    coord = state.Coordinator(partitions=4, lease=5.0, margin=1.0, clock=clock)
    clock.now += 6.0  # past the confirmation period (lease + margin) of the first term
    return coord


def test_single_replica_gets_everything() -> None:
    clock = Clock()
    coord = coordinator(clock)
    reply = coord.heartbeat(beat("a"))
    assert reply.assigned == {"rs": [0, 1, 2, 3]}
    assert reply.partitions == {"rs": 4}
    assert reply.lease_seconds == 5.0


def test_hand_over_waits_for_release() -> None:
    clock = Clock()
    coord = coordinator(clock)
    coord.heartbeat(beat("a"))
    coord.heartbeat(beat("a", [0, 1, 2, 3]))
    # b joins: its share is still held by a, so b gets nothing yet, and a is told to let go.
    assert coord.heartbeat(beat("b")).assigned == {"rs": []}
    assert coord.heartbeat(beat("a", [0, 1, 2, 3])).assigned == {"rs": [0, 1]}
    assert coord.heartbeat(beat("b")).assigned == {"rs": []}
    # a still reports 2 and 3 (its callbacks are finishing): still nothing for b.
    assert coord.heartbeat(beat("a", [0, 1, 2, 3])).assigned == {"rs": [0, 1]}
    assert coord.heartbeat(beat("b")).assigned == {"rs": []}
    coord.heartbeat(beat("a", [0, 1]))
    assert coord.heartbeat(beat("b")).assigned == {"rs": [2, 3]}


def test_silent_replica_is_fenced_for_lease_plus_margin() -> None:
    clock = Clock()
    coord = coordinator(clock)
    coord.heartbeat(beat("a"))
    coord.heartbeat(beat("a", [0, 1, 2, 3]))
    clock.now += 5.5  # a is no longer live (lease 5) but may not have fenced itself yet
    assert coord.heartbeat(beat("b")).assigned == {"rs": []}
    assert coord.replicas("rs") == ["b"]
    clock.now += 0.6  # past lease + margin since a's last heartbeat
    assert coord.heartbeat(beat("b")).assigned == {"rs": [0, 1, 2, 3]}


def test_goodbye_frees_partitions_at_once() -> None:
    clock = Clock()
    coord = coordinator(clock)
    coord.heartbeat(beat("a"))
    coord.heartbeat(beat("a", [0, 1, 2, 3]))
    leave = membership.Heartbeat("controllers", "a", [], {}, {}, {})
    coord.heartbeat(leave)
    assert coord.heartbeat(beat("b")).assigned == {"rs": [0, 1, 2, 3]}


def test_new_term_confirms_holdings_and_moves_nothing() -> None:
    clock = Clock()
    coord = state.Coordinator(partitions=4, lease=5.0, clock=clock)
    coord.start_term()
    # b holds nothing; in the confirmation period it would otherwise get half.
    assert coord.heartbeat(beat("b")).assigned == {"rs": []}
    assert coord.heartbeat(beat("a", [0, 1, 2, 3])).assigned == {"rs": [0, 1, 2, 3]}
    # Partitions held twice (should not happen) go to neither holder.
    assert coord.heartbeat(beat("c", [3])).assigned == {"rs": []}
    assert coord.heartbeat(beat("a", [0, 1, 2, 3])).assigned == {"rs": [0, 1, 2]}
    clock.now += 5.5
    # Still confirming: a predecessor's grant may last lease + margin (1 s by default).
    assert coord.heartbeat(beat("a", [0, 1, 2])).assigned == {"rs": [0, 1, 2]}
    assert coord.heartbeat(beat("b")).assigned == {"rs": []}
    clock.now += 0.5
    coord.heartbeat(beat("b"))
    coord.heartbeat(beat("c", []))
    # After the period: balanced, a keeping what balance allows (the most loaded keeps 2 of 4).
    assert coord.heartbeat(beat("a", [0, 1, 2])).assigned == {"rs": [0, 1]}
    assert coord.heartbeat(beat("b")).assigned == {"rs": [3]}  # nobody holds 3
    assert coord.heartbeat(beat("c")).assigned == {"rs": []}  # 2 is still a's
    coord.heartbeat(beat("a", [0, 1]))
    assert coord.heartbeat(beat("c")).assigned == {"rs": [2]}
    assert coord.heartbeat(beat("b", [3])).assigned == {"rs": [3]}


def test_health_follows_reports_and_silence() -> None:
    clock = Clock()
    coord = coordinator(clock)
    coord.heartbeat(beat("a"))
    coord.heartbeat(beat("a", [0, 1, 2, 3]))
    assert coord.controller_error("rs") is None
    coord.heartbeat(beat("a", [0, 1, 2, 3], error="loop stuck for 31.0s"))
    assert coord.controller_error("rs") == "a: loop stuck for 31.0s"
    coord.heartbeat(beat("a", [0, 1, 2, 3]))
    assert coord.controller_error("rs") is None
    clock.now += 5.1
    assert coord.controller_error("rs") == "no live replica"
    status = coord.status(leader=True, identity="me")
    assert status["controllers"]["rs"]["healthy"] is False
    assert status["members"] == []


def test_partitions_unowned_too_long_are_unhealthy() -> None:
    clock = Clock()
    coord = coordinator(clock)
    coord.heartbeat(beat("a"))
    coord.heartbeat(beat("a", [0, 1]))
    assert coord.controller_error("rs") is None  # a hand-over may take a heartbeat or two
    clock.now += 4.0
    coord.heartbeat(beat("a", [0, 1]))
    clock.now += 2.0
    coord.heartbeat(beat("a", [0, 1]))
    assert coord.controller_error("rs") == "partitions [2, 3] unowned for 6s"


def test_status_shape() -> None:
    clock = Clock()
    coord = coordinator(clock)
    coord.heartbeat(beat("a"))
    coord.heartbeat(beat("a", [0, 1, 2, 3]))
    status = coord.status(leader=True, identity="me")
    assert status["leader"] is True and status["identity"] == "me"
    assert status["controllers"]["rs"] == {
        "replicas": ["a"],
        "partitions": {"0": "a", "1": "a", "2": "a", "3": "a"},
        "depth": 2,
        "healthy": True,
        "error": None,
    }
    assert status["members"][0]["held"] == {"rs": [0, 1, 2, 3]}


def record(instance: str, partitions: list[int]) -> membership.GrantRecord:
    return membership.GrantRecord(instance, {"rs": partitions})


def test_a_new_leader_honours_restored_grants_at_once() -> None:
    clock = Clock()
    coord = state.Coordinator(partitions=4, lease=5.0, margin=1.0, clock=clock)
    coord.start_term()
    coord.restore([(record("a", [0, 1]), 7), (record("b", [2, 3]), 9)])
    # No confirmation period: every grant is known, and they stay where they are.
    assert coord.heartbeat(beat("a", [0, 1])).assigned == {"rs": [0, 1]}
    assert coord.heartbeat(beat("b", [2, 3])).assigned == {"rs": [2, 3]}
    assert coord.unpersisted("a") is None
    assert coord.revision("b") == 9
    # A newcomer gets nothing that a restored holder may still hold.
    assert coord.heartbeat(beat("c")).assigned == {"rs": []}


def test_a_member_late_for_a_new_leader_keeps_its_partitions() -> None:
    """A restored member whose first heartbeat comes after its lease (a loaded machine) is not
    live when another member beats; the balance drawn then (everything to the other) must not
    move its partitions once it is back, since it never stopped holding them."""
    clock = Clock()
    coord = state.Coordinator(partitions=4, lease=5.0, margin=1.0, clock=clock)
    coord.start_term()
    coord.restore([(record("a", [0, 1]), 7), (record("b", [2, 3]), 9)])
    clock.now += 5.5  # past a's lease since the restore, within lease + margin
    assert coord.heartbeat(beat("b", [2, 3])).assigned == {"rs": [2, 3]}  # a's may not be lapsed
    assert coord.heartbeat(beat("a", [0, 1])).assigned == {"rs": [0, 1]}
    assert coord.heartbeat(beat("b", [2, 3])).assigned == {"rs": [2, 3]}
    assert coord.unpersisted("a") is None and coord.unpersisted("b") is None


def test_a_silent_member_with_an_entry_is_forgotten_only_once_the_entry_is_deleted() -> None:
    clock = Clock()
    coord = coordinator(clock)
    coord.heartbeat(beat("a"))
    coord.persisted("a", record("a", [0, 1, 2, 3]), 3)
    coord.heartbeat(beat("a", [0, 1, 2, 3]))
    clock.now += 6.1  # past lease + margin
    assert coord.revoke() == [("a", 3)]
    assert coord.heartbeat(beat("b")).assigned == {"rs": []}  # still a's until revoked
    coord.forget("a", 2)  # an older revision: it moved on since, nothing is forgotten
    assert coord.heartbeat(beat("b")).assigned == {"rs": []}
    coord.forget("a", 3)
    assert coord.heartbeat(beat("b")).assigned == {"rs": [0, 1, 2, 3]}


def test_a_member_that_renewed_in_the_bucket_stays_alive() -> None:
    clock = Clock()
    coord = coordinator(clock)
    coord.heartbeat(beat("a"))
    coord.persisted("a", record("a", [0, 1, 2, 3]), 3)
    clock.now += 6.1
    coord.renewed("a", 4)  # the revision-checked delete failed: it renewed meanwhile
    assert coord.revoke() == []
    assert coord.replicas("rs") == ["a"]
    clock.now += 6.1
    assert coord.revoke() == [("a", 4)]


def test_grant_changes_are_persisted_before_they_are_replied() -> None:
    clock = Clock()
    coord = coordinator(clock)
    coord.heartbeat(beat("a"))
    assert coord.unpersisted("a") == record("a", [0, 1, 2, 3])
    coord.persisted("a", record("a", [0, 1, 2, 3]), 1)
    coord.heartbeat(beat("a", [0, 1, 2, 3]))
    assert coord.unpersisted("a") is None
    coord.heartbeat(beat("b"))
    coord.heartbeat(beat("a", [0, 1, 2, 3]))  # told to let two go
    assert coord.unpersisted("a") == record("a", [0, 1])


def test_grant_keys_name_the_scope_and_encode_any_instance_name() -> None:
    scope = subjects.scope_token(["rs"])
    assert membership.grant_key(["rs"], "host-1234_a") == f"{scope}.host-1234_a"
    assert membership.grant_key(["rs"], "pod.ns/x y\u00e9") == f"{scope}.pod=2Ens=2Fx=20y=C3=A9"
    assert membership.parse_grant_key(f"{scope}.pod=2Ens=2Fx=20y=C3=A9") == (scope, "pod.ns/x y\u00e9")
    for bad in ("host-1234_a", f"{scope}.a.b", f"{scope}.a=2", f"{scope}.a=ZZ", f"{scope}."):
        with pytest.raises(ValueError):
            membership.parse_grant_key(bad)


def test_a_heartbeat_speaking_for_another_replica_is_told_apart() -> None:
    clock = Clock()
    coord = coordinator(clock)
    coord.heartbeat(beat("a", [0, 1, 2, 3]))
    rs, other = subjects.scope_token(["rs"]), subjects.scope_token(["deployment"])
    leave = membership.Heartbeat("controllers", "a", [], {}, {}, {})
    assert coord.forged(rs, "a", beat("a")) is None
    assert coord.forged(rs, "a", leave) is None
    assert coord.forged(rs, "b", leave) == "its instance is not its subject's"
    assert coord.forged(other, "a", leave) == "the instance is a replica of other controllers"
    assert coord.forged(other, "c", beat("c")) == "its controllers are not its subject's"
