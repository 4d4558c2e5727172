"""Expectations, with upstream's scenarios (controller_utils_test.go) and a fake clock."""

from __future__ import annotations

import pytest
from kcm_shared.controllerutil import expectations
from kcm_shared.testing import clock as kitclock


def test_controller_expectations_upstream_scenario() -> None:
    clock = kitclock.FakeClock(monotonic=1000.0)
    e = expectations.ControllerExpectations(clock.monotonic, timeout=30)
    adds, dels = 10, 30
    e.set_expectations("default/foobar", adds, dels)
    for _ in range(adds + 1):
        e.creation_observed("default/foobar")
    assert not e.satisfied_expectations("default/foobar")  # deletions still pending
    for _ in range(dels + 1):
        e.deletion_observed("default/foobar")
    exp = e.get_expectations("default/foobar")
    assert exp is not None and (exp.add, exp.delete) == (-1, -1)  # surpassed
    assert e.satisfied_expectations("default/foobar")

    e.set_expectations("default/foobar", 1, 2)  # next sync: old counts are replaced
    exp = e.get_expectations("default/foobar")
    assert exp is not None and (exp.add, exp.delete) == (1, 2)
    assert not e.satisfied_expectations("default/foobar")
    clock.advance(30)  # exactly the timeout: not yet expired
    assert not e.satisfied_expectations("default/foobar")
    clock.advance(1)
    assert e.satisfied_expectations("default/foobar")


@pytest.mark.parametrize(
    ("name", "steps", "satisfied", "counts"),
    [
        ("no record syncs", [], True, None),
        ("creations pending", [("expect_creations", 2), ("creation_observed",)], False, (1, 0)),
        (
            "creations met",
            [("expect_creations", 2), ("creation_observed",), ("creation_observed",)],
            True,
            (0, 0),
        ),
        ("deletions pending", [("expect_deletions", 1)], False, (0, 1)),
        ("deletions met", [("expect_deletions", 1), ("deletion_observed",)], True, (0, 0)),
        ("raise adds to a record", [("expect_creations", 1), ("raise", 2, 1)], False, (3, 1)),
        ("raise without a record does nothing", [("raise", 2, 1)], True, None),
        ("lower below zero still satisfied", [("expect_creations", 1), ("lower", 3, 0)], True, (-2, 0)),
        ("deleted record syncs", [("expect_creations", 5), ("delete",)], True, None),
    ],
)
def test_expectation_steps(
    name: str, steps: list[tuple[object, ...]], satisfied: bool, counts: tuple[int, int] | None
) -> None:
    e = expectations.ControllerExpectations(kitclock.FakeClock(monotonic=1000.0).monotonic)
    key = "ns/rs"
    for op, *args in steps:
        if op == "expect_creations":
            e.expect_creations(key, int(str(args[0])))
        elif op == "expect_deletions":
            e.expect_deletions(key, int(str(args[0])))
        elif op == "creation_observed":
            e.creation_observed(key)
        elif op == "deletion_observed":
            e.deletion_observed(key)
        elif op == "raise":
            e.raise_expectations(key, int(str(args[0])), int(str(args[1])))
        elif op == "lower":
            e.lower_expectations(key, int(str(args[0])), int(str(args[1])))
        elif op == "delete":
            e.delete_expectations(key)
    assert e.satisfied_expectations(key) is satisfied, name
    exp = e.get_expectations(key)
    assert (None if exp is None else (exp.add, exp.delete)) == counts, name


def test_raise_keeps_the_original_timestamp() -> None:
    clock = kitclock.FakeClock(monotonic=1000.0)
    e = expectations.ControllerExpectations(clock.monotonic, timeout=10)
    e.expect_creations("k", 1)
    clock.advance(8)
    e.raise_expectations("k", 1, 0)
    clock.advance(3)
    assert e.satisfied_expectations("k")  # expired: 11 s since the record was set


def test_uid_expectations_upstream_scenario() -> None:
    e = expectations.UIDTrackingControllerExpectations(kitclock.FakeClock(monotonic=1000.0).monotonic)
    rc_to_pods = {f"default/rc-{i}": [f"default/pod{j}-rc-{i}" for j in range(5)] for i in range(4)}
    for rc, pods in rc_to_pods.items():
        e.expect_deletions_of(rc, pods)
    for rc, pods in reversed(rc_to_pods.items()):
        assert not e.satisfied_expectations(rc)
        for p in pods:
            e.deletion_observed_of(rc, p)
        assert e.satisfied_expectations(rc)
        e.delete_expectations(rc)
        assert e.get_uids(rc) is None
        assert e.get_expectations(rc) is None


def test_uid_expectations_count_each_key_once() -> None:
    e = expectations.UIDTrackingControllerExpectations(kitclock.FakeClock(monotonic=1000.0).monotonic)
    e.expect_deletions_of("ns/rs", ["ns/a", "ns/b"])
    e.deletion_observed_of("ns/rs", "ns/a")
    e.deletion_observed_of("ns/rs", "ns/a")  # the same pod seen deleted twice
    e.deletion_observed_of("ns/rs", "ns/unexpected")
    assert not e.satisfied_expectations("ns/rs")
    assert e.get_uids("ns/rs") == {"ns/b"}
    e.deletion_observed_of("ns/rs", "ns/b")
    assert e.satisfied_expectations("ns/rs")


def test_retain_forgets_the_controllers_whose_partition_moved_away() -> None:
    exp = expectations.UIDTrackingControllerExpectations()
    exp.expect_creations("ns/kept", 1)
    exp.expect_deletions_of("ns/moved", ["ns/p1"])
    exp.retain(lambda key: key == "ns/kept")
    assert exp.get_expectations("ns/kept") is not None
    assert exp.get_expectations("ns/moved") is None and exp.get_uids("ns/moved") is None
