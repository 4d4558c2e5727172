"""The pure rules of the taint-eviction-controller, with upstream's cases as data:
taint_eviction_test.go TestGetMinTolerationTime, helpers_test.go TestGetMatchingTolerations,
and the deadline counted from each taint's timeAdded."""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec
import pytest
from kcm_controllers.tainteviction import condition, tolerations
from kcm_controllers.tainteviction.tolerations import Taint, Toleration

NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)


def tol(
    key: str = "", op: str = "", value: str = "", effect: str = "", seconds: int | None = None
) -> Toleration:
    return Toleration(key=key, operator=op, value=value, effect=effect, toleration_seconds=seconds)


def taint(key: str, value: str = "", effect: str = "NoExecute", ago: float | None = None) -> Taint:
    added = None if ago is None else NOW - dt.timedelta(seconds=ago)
    return Taint(key=key, value=value, effect=effect, time_added=added)


@pytest.mark.parametrize(
    ("used", "want"),
    [
        ([], 0),
        ([tol(seconds=1)], 1),
        ([tol(seconds=1), tol()], 1),  # one for ever, one for 1 s: 1 s
        ([tol(seconds=2), tol(seconds=1)], 1),
        ([tol(seconds=-1), tol(seconds=5)], 0),  # non-positive means at once
        ([tol(seconds=0)], 0),
        ([tol(), tol()], None),  # for ever
    ],
)
def test_min_toleration_seconds(used: list[Toleration], want: int | None) -> None:
    assert tolerations.min_toleration_seconds(used) == want


@pytest.mark.parametrize(
    ("taints", "tols", "want"),
    [
        ([], [], []),
        ([taint("a")], [], None),
        ([taint("a", "1")], [tol("a", "Equal", "1")], [0]),
        ([taint("a", "1")], [tol("a", "Equal", "2")], None),
        ([taint("a", "1")], [tol("a", "Exists")], [0]),
        ([taint("a")], [tol("", "Exists")], [0]),  # empty key with Exists tolerates every taint
        ([taint("a")], [tol("a", "Exists", effect="NoSchedule")], None),
        # Each taint takes the first toleration that tolerates it.
        (
            [taint("a"), taint("b")],
            [tol("a", "Exists", seconds=5), tol("", "Exists"), tol("b", "Exists")],
            [0, 1],
        ),
        ([taint("a"), taint("b")], [tol("a", "Exists")], None),
    ],
)
def test_matching_tolerations(taints: list[Taint], tols: list[Toleration], want: list[int] | None) -> None:
    got = tolerations.matching_tolerations(taints, tols)
    assert (None if got is None else [tols.index(t) for t in got]) == want


def test_no_execute_taints_keeps_order_and_drops_other_effects() -> None:
    taints = [taint("a"), taint("b", effect="NoSchedule"), taint("c"), taint("d", effect="PreferNoSchedule")]
    assert [t.key for t in tolerations.no_execute_taints(taints)] == ["a", "c"]


def test_an_untolerated_taint_means_at_once() -> None:
    v = tolerations.verdict([taint("a", ago=0)], [tol("b", "Exists")], NOW, NOW)
    assert v.untolerated and v.deadline == NOW


def test_tolerated_for_ever() -> None:
    v = tolerations.verdict([taint("a", ago=10)], [tol("a", "Exists")], NOW, NOW)
    assert v.forever and v.deadline is None


def test_the_deadline_counts_from_time_added() -> None:
    v = tolerations.verdict([taint("a", ago=20)], [tol("a", "Exists", seconds=30)], NOW, NOW)
    assert v.deadline == NOW + dt.timedelta(seconds=10)


def test_the_earliest_deadline_over_the_taints_wins() -> None:
    taints = [taint("a", ago=0), taint("b", ago=100)]
    tols = [tol("a", "Exists", seconds=60), tol("b", "Exists", seconds=120)]
    # a: now + 60; b: now - 100 + 120 = now + 20.
    assert tolerations.verdict(taints, tols, NOW, NOW).deadline == NOW + dt.timedelta(seconds=20)


def test_a_taint_tolerated_for_ever_leaves_the_others_to_decide() -> None:
    taints = [taint("a", ago=0), taint("b", ago=0)]
    v = tolerations.verdict(taints, [tol("a", "Exists"), tol("b", "Exists", seconds=7)], NOW, NOW)
    assert v.deadline == NOW + dt.timedelta(seconds=7)


def test_a_taint_without_time_added_counts_from_first_seen() -> None:
    seen = NOW - dt.timedelta(seconds=4)
    v = tolerations.verdict([taint("a")], [tol("a", "Exists", seconds=10)], NOW, seen)
    assert v.deadline == seen + dt.timedelta(seconds=10)


def test_a_time_added_in_the_future_counts_from_now() -> None:
    v = tolerations.verdict([taint("a", ago=-3600)], [tol("a", "Exists", seconds=10)], NOW, NOW)
    assert v.deadline == NOW + dt.timedelta(seconds=10)


def test_a_negative_toleration_is_at_once() -> None:
    v = tolerations.verdict([taint("a", ago=0)], [tol("a", "Exists", seconds=-5)], NOW, NOW)
    assert v.deadline == NOW and not v.untolerated


def _pod(conditions: list[dict[str, Any]]) -> dict[str, Any]:
    return {"metadata": {"name": "p", "uid": "u1"}, "status": {"conditions": conditions}}


def test_the_condition_patch_adds_disruption_target_after_the_others() -> None:
    patch = condition.status_patch(_pod([{"type": "Ready", "status": "True"}]), NOW)
    assert patch == {
        "metadata": {"uid": "u1"},
        "status": {
            "$setElementOrder/conditions": [{"type": "Ready"}, {"type": "DisruptionTarget"}],
            "conditions": [
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "DeletionByTaintManager",
                    "message": "Taint manager: deleting due to NoExecute taint",
                    "lastTransitionTime": "2026-11-29T12:00:00Z",
                }
            ],
        },
    }


def test_the_condition_patch_is_skipped_when_it_changes_nothing() -> None:
    have = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "DeletionByTaintManager",
        "message": "Taint manager: deleting due to NoExecute taint",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    assert condition.status_patch(_pod([have]), NOW) is None


def test_the_condition_keeps_its_transition_time_while_its_status_stays() -> None:
    have = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "Other",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    patch = condition.status_patch(_pod([have]), NOW)
    assert patch is not None
    [written] = patch["status"]["conditions"]
    assert (
        written["lastTransitionTime"] == "2026-01-01T00:00:00Z"
        and written["reason"] == "DeletionByTaintManager"
    )


def test_views_decode_time_added_and_toleration_seconds() -> None:
    raw = {
        "metadata": {"name": "n"},
        "spec": {"taints": [{"key": "a", "effect": "NoExecute", "timeAdded": "2026-11-29T11:59:00Z"}]},
    }
    node = msgspec.json.decode(msgspec.json.encode(raw), type=tolerations.NodeView)
    assert node.spec.taints[0].time_added == NOW - dt.timedelta(seconds=60)
