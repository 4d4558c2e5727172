"""The pure parts of leader election: the take-over decision on a fake clock, and the flags."""

from __future__ import annotations

import argparse

import pytest
from kcm_shared.bus import leaderelection
from kcm_shared.bus.leaderelection import Observer, Record
from kcm_shared.testing import clock as kitclock

NOW = "2024-01-01T00:00:00.000000Z"


def held(holder: str, renew: str = "t0", transitions: int = 3) -> Record:
    return Record(holder, 15, "t0", renew, transitions)


def test_no_lease_creates_first_record() -> None:
    obs = Observer("me", kitclock.FakeClock(monotonic=100.0).monotonic)
    obs.observe(None)
    assert obs.next_record(NOW, 15) == Record("me", 15, NOW, NOW, 0)


def test_other_holder_is_respected_until_unchanged_for_lease_duration() -> None:
    clock = kitclock.FakeClock(monotonic=100.0)
    obs = Observer("me", clock.monotonic)
    obs.observe(held("other"))
    clock.advance(14.9)
    assert obs.held_by_other()
    assert obs.next_record(NOW, 15) is None
    clock.advance(0.2)
    assert not obs.held_by_other()
    assert obs.next_record(NOW, 15) == Record("me", 15, NOW, NOW, 4)


def test_a_renewal_seen_restarts_the_expiry_clock() -> None:
    clock = kitclock.FakeClock(monotonic=100.0)
    obs = Observer("me", clock.monotonic)
    obs.observe(held("other", renew="t0"))
    clock.advance(10)
    obs.observe(held("other", renew="t1"))
    clock.advance(10)  # 20 s after first sight, but only 10 s after the record last changed
    assert obs.next_record(NOW, 15) is None


def test_the_same_record_seen_again_does_not_restart_the_clock() -> None:
    clock = kitclock.FakeClock(monotonic=100.0)
    obs = Observer("me", clock.monotonic)
    obs.observe(held("other"))
    clock.advance(10)
    obs.observe(held("other"))
    clock.advance(6)
    assert obs.next_record(NOW, 15) is not None


def test_expiry_uses_the_records_lease_duration() -> None:
    clock = kitclock.FakeClock(monotonic=100.0)
    obs = Observer("me", clock.monotonic)
    obs.observe(Record("other", 1, "t0", "t0", 0))
    clock.advance(1.5)
    assert obs.next_record(NOW, 15) is not None


def test_released_lease_is_taken_at_once() -> None:
    obs = Observer("me", kitclock.FakeClock(monotonic=100.0).monotonic)
    obs.observe(Record("", 1, "t0", "t0", 5))
    assert obs.next_record(NOW, 15) == Record("me", 15, NOW, NOW, 6)


def test_holder_renews_keeping_acquire_time_and_transitions() -> None:
    obs = Observer("me", kitclock.FakeClock(monotonic=100.0).monotonic)
    obs.observe(held("me"))
    assert obs.next_record(NOW, 15) == Record("me", 15, "t0", NOW, 3)


def test_release_only_by_the_holder() -> None:
    obs = Observer("me", kitclock.FakeClock(monotonic=100.0).monotonic)
    assert obs.release_record(NOW) is None
    obs.observe(held("other"))
    assert obs.release_record(NOW) is None
    obs.observe(held("me"))
    assert obs.release_record(NOW) == Record("", 1, NOW, NOW, 3)


def test_record_round_trips_through_a_lease_spec() -> None:
    record = Record("me", 15, "a", "b", 2)
    lease = {"spec": record.to_spec()}
    assert Record.from_lease(lease) == record
    assert Record.from_lease({}) == Record()


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    leaderelection.add_arguments(p, "kcm-thing")
    return p.parse_args(argv)


def test_flags_default_like_upstream() -> None:
    args = parse()
    assert args.leader_elect is True
    assert (args.leader_elect_lease_duration, args.leader_elect_renew_deadline) == (15.0, 10.0)
    assert args.leader_elect_retry_period == 2.0
    assert (args.leader_elect_resource_namespace, args.leader_elect_resource_name) == (
        "kube-system",
        "kcm-thing",
    )


def test_flags_build_an_elector_or_none() -> None:
    from kcm_shared.client import kubeclient

    client = kubeclient.KubeClient(kubeclient.Connection("http://127.0.0.1:1"))
    assert leaderelection.from_args(parse("--leader-elect=false"), client, "me") is None
    elector = leaderelection.from_args(
        parse(
            "--leader-elect",
            "--leader-elect-lease-duration=3s",
            "--leader-elect-renew-deadline=2s",
            "--leader-elect-retry-period=500ms",
        ),
        client,
        "me",
    )
    assert elector is not None
    assert (elector.lease_duration, elector.renew_deadline, elector.retry_period) == (3.0, 2.0, 0.5)
    assert not elector.is_leader


def test_inconsistent_durations_are_refused() -> None:
    from kcm_shared.client import kubeclient

    client = kubeclient.KubeClient(kubeclient.Connection("http://127.0.0.1:1"))
    with pytest.raises(ValueError):
        leaderelection.LeaderElector(
            client, namespace="a", name="b", identity="c", lease_duration=5, renew_deadline=6
        )
