"""The coordinator's verdict on the watcher and the coordinators, from their health beats."""

from __future__ import annotations

import io

import msgspec
import pytest
from kcm_coordinator import fleethealth, status
from kcm_shared.bus import healthbeat


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def watcher(instance: str, *, leader: bool = True, **checks: str | None) -> healthbeat.Beat:
    resources = {
        "v1/pods": healthbeat.Resource(
            seen="120", marker="100", unacked=2, lag_seconds=0.5, idle_seconds=0.1
        ),
        "v1/configmaps": healthbeat.Resource(
            seen="90",
            marker="80",
            unacked=1,
            lag_seconds=40.0,
            error="a change has waited 40s for the stream",
        ),
    }
    return healthbeat.Beat(
        service="watcher",
        instance=instance,
        leader=leader,
        interval=1.0,
        checks={"watcher": None, **checks},
        resources=resources if leader else {},
    )


def test_no_watcher_at_all_is_unhealthy() -> None:
    beats = fleethealth.Beats(Clock())
    assert beats.watcher_error() == "no active watcher"
    assert beats.watcher_status()["healthy"] is False


def test_a_leading_watcher_heard_lately_with_passing_checks_is_healthy() -> None:
    clock = Clock()
    beats = fleethealth.Beats(clock)
    beats.observe(watcher("w1"))
    beats.observe(watcher("w2", leader=False))
    clock.now += healthbeat.silent_after(1.0)  # the last moment it still counts as heard
    assert beats.watcher_error() is None
    doc = beats.watcher_status()
    assert doc["leader"] == "w1" and [r["instance"] for r in doc["replicas"]] == ["w1", "w2"]
    assert doc["resources"]["v1/configmaps"]["failing"] and not doc["resources"]["v1/pods"]["failing"]


def test_a_silent_leader_is_no_active_watcher_and_is_named() -> None:
    clock = Clock()
    beats = fleethealth.Beats(clock)
    beats.observe(watcher("w1"))
    clock.now += 4.5  # 3 missed beats + 1 s margin, and a bit
    beats.observe(watcher("w2", leader=False))
    assert beats.watcher_error() == "no active watcher; w1 silent for 4s"
    rows = {r["instance"]: r for r in beats.watcher_status()["replicas"]}
    assert rows["w1"]["error"] == "silent for 4s" and rows["w2"]["healthy"]
    clock.now += fleethealth.FORGET  # w1 is forgotten, w2 (heard 4.5 s later) not yet
    assert beats.watcher_error() == "no active watcher; w2 silent for 300s"


def test_a_failing_check_of_the_leader_is_the_verdict() -> None:
    beats = fleethealth.Beats(Clock())
    beats.observe(watcher("w1", publishing="v1/configmaps: a change has waited 40s for the stream"))
    assert beats.watcher_error() == "w1: publishing: v1/configmaps: a change has waited 40s for the stream"


def test_two_leaders_are_a_split_brain() -> None:
    beats = fleethealth.Beats(Clock())
    beats.observe(watcher("w1"))
    beats.observe(watcher("w2"))
    assert beats.watcher_error() == "watchers w1, w2 all report leading"


def test_a_standby_answers_from_the_leaders_verdicts_while_they_are_fresh() -> None:
    clock = Clock()
    view = fleethealth.LeaderView(clock)
    assert view.error("replicaset-controller") == "no word from a leading coordinator"
    leader = {
        "identity": "c1",
        "coordinator": {"ops_url": "http://c1:10257"},
        "controllers": {
            "replicaset-controller": {"healthy": True, "error": None, "replicas": ["r1"]},
            "deployment-controller": {"healthy": False, "error": "no live replica"},
        },
        "watcher": {"healthy": False, "error": "no active watcher", "replicas": []},
    }
    wire = fleethealth.encode_verdicts(fleethealth.verdicts(leader))
    view.observe(fleethealth.decode_verdicts(wire))
    assert view.names() == {"replicaset-controller", "deployment-controller", "watcher"}
    assert view.error("replicaset-controller") is None
    assert view.error("deployment-controller") == "no live replica"
    assert view.error("watcher") == "no active watcher"
    assert view.error("job-controller") == "the leading coordinator no longer reports it"
    assert view.verdicts is not None and view.verdicts.ops_url == "http://c1:10257"
    clock.now += 10
    assert view.error("replicaset-controller") == "no word from a leading coordinator for 10s"


def test_kcm_status_prints_service_rows_and_fails_on_the_watcher() -> None:
    clock = Clock()
    beats = fleethealth.Beats(clock)
    beats.observe(watcher("w1", publishing="v1/configmaps: a change has waited 40s for the stream"))
    beats.observe(
        healthbeat.Beat(
            service="coordinator", instance="c1", leader=True, interval=1.0, checks={}, ops_url="u"
        )
    )
    doc = {
        "leader": True,
        "identity": "c1_x",
        "controllers": {
            "replicaset-controller": {"replicas": ["r1"], "partitions": {"0": "r1"}, "healthy": True}
        },
        "members": [],
        "coordinator": beats.coordinator_status(identity="c1_x", leader_identity="c1_x", ops_url="u"),
        "watcher": beats.watcher_status(),
    }
    out = io.StringIO()
    assert status.render(doc, "u", out) == 1
    lines = out.getvalue().splitlines()
    assert any(line.split()[:3] == ["coordinator", "c1", "leader"] and line.endswith(" ok") for line in lines)
    [row] = [line for line in lines if line.startswith("watcher")]
    assert row.split()[:3] == ["watcher", "w1", "leader"]
    assert "unhealthy: w1: publishing" in row and "2 resources, lag 40.0s, failing: v1/configmaps" in row
    assert not status.watcher_ready(doc)

    beats.observe(watcher("w1"))
    doc["watcher"] = beats.watcher_status()
    assert status.render(doc, "u", io.StringIO()) == 0 and status.watcher_ready(doc)
    del doc["watcher"]  # a coordinator from before the watcher reported: controllers decide
    assert status.render(doc, "u", io.StringIO()) == 0


def test_what_is_remembered_is_bounded_and_the_oldest_goes_first() -> None:
    clock = Clock()
    beats = fleethealth.Beats(clock)
    beats.observe(watcher("w-old"))
    for i in range(fleethealth.LIMIT):
        clock.now += 0.001
        beats.observe(watcher(f"w{i}", leader=False))
    names = [row["instance"] for row in beats.watcher_status()["replicas"]]
    assert len(names) == fleethealth.LIMIT and "w-old" not in names


def test_a_malformed_verdict_is_refused_whole() -> None:
    for wire in (b"[]", b'{"controllers": []}', b'{"watcher": {"error": "x"}}', b"{"):
        with pytest.raises(msgspec.DecodeError):
            fleethealth.decode_verdicts(wire)
