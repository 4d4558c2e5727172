"""The disruption controller's pure helpers with upstream's cases (disruption_test.go:
TestReplicaSet, TestReplicationController, TestStatefulSetController, TestTwoControllers,
TestIntegerMaxUnavailable(WithScaling), TestPercentageMaxUnavailableWithScaling,
TestUpdateDisruptedPods, TestStalePodDisruption, intstr's GetScaledValueFromIntOrPercent)."""

from __future__ import annotations

import datetime as dt

import pytest
from kcm_controllers.disruption import budget
from kcm_shared.apimachinery import codec, intstr

NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC)


def stamp(t: dt.datetime) -> str:
    return budget.timestamp(t)


def pod(name: str, *, ready: bool = True, deleting: bool = False) -> budget.PodView:
    conds = [budget.PodCondition(type="Ready", status="True" if ready else "False")]
    return budget.PodView(
        metadata=codec.ObjectMeta(name=name, namespace="ns", deletion_timestamp=NOW if deleting else None),
        status=budget.PodStatus(phase="Running", conditions=conds),
    )


@pytest.mark.parametrize(
    ("value", "total", "want"),
    [
        (5, 10, 5),
        ("20%", 10, 2),
        ("34%", 3, 2),
        ("28%", 22, 7),
        ("30%", 7, 3),
        ("30%", 3, 1),
        ("50%", 3, 2),
        ("0%", 9, 0),
    ],
)
def test_scaled_value_rounds_percentages_up(value: int | str, total: int, want: int) -> None:
    assert intstr.scaled_value(value, total, round_up=True) == want


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("20", "invalid value for IntOrString: invalid type: string is not a percentage"),
        (
            "x%",
            'invalid value for IntOrString: invalid value "x%": strconv.Atoi: parsing "x": invalid syntax',
        ),
        (None, "nil value for IntOrString"),
    ],
)
def test_scaled_value_errors_say_what_upstream_says(value: str | None, message: str) -> None:
    with pytest.raises(ValueError) as err:
        intstr.scaled_value(value, 10, round_up=True)
    assert str(err.value) == message


@pytest.mark.parametrize(
    ("spec", "pods", "scale", "want"),
    [
        # TestReplicaSet: 20% of an RS of 10 with one pod
        (budget.PDBSpec(min_available="20%"), 1, 10, (10, 2)),
        # TestReplicationController / TestStatefulSetController: 34% of 3
        (budget.PDBSpec(min_available="34%"), 3, 3, (3, 2)),
        # TestTwoControllers: a Deployment of 11 and an RC of 11 at 28%
        (budget.PDBSpec(min_available="28%"), 22, 22, (22, 7)),
        # an integer minAvailable counts the matching pods, no controller lookup
        (budget.PDBSpec(min_available=3), 2, 99, (2, 3)),
        # TestIntegerMaxUnavailableWithScaling: 2 of 7, then of 5
        (budget.PDBSpec(max_unavailable=2), 1, 7, (7, 5)),
        (budget.PDBSpec(max_unavailable=2), 1, 5, (5, 3)),
        # TestPercentageMaxUnavailableWithScaling: 30% of 7, then of 3
        (budget.PDBSpec(max_unavailable="30%"), 1, 7, (7, 4)),
        (budget.PDBSpec(max_unavailable="30%"), 1, 3, (3, 2)),
        # more unavailable than expected: desired never goes below 0
        (budget.PDBSpec(max_unavailable=5), 1, 2, (2, 0)),
    ],
)
def test_expected_and_desired(spec: budget.PDBSpec, pods: int, scale: int, want: tuple[int, int]) -> None:
    expected, desired, unmanaged = budget.expected_and_desired(spec, pods, lambda: (scale, []))
    assert (expected, desired, unmanaged) == (*want, [])


def test_integer_min_available_needs_no_controllers() -> None:
    def fail() -> tuple[int, list[str]]:
        raise ValueError('found no controllers for pod "p"')

    assert not budget.needs_scale(budget.PDBSpec(min_available=1))
    assert budget.expected_and_desired(budget.PDBSpec(min_available=1), 1, fail) == (1, 1, [])
    with pytest.raises(ValueError, match="found no controllers"):
        budget.expected_and_desired(budget.PDBSpec(max_unavailable=1), 1, fail)


@pytest.mark.parametrize(
    ("current", "desired", "expected", "want"), [(3, 2, 3, 1), (1, 2, 10, 0), (4, 0, 0, 0), (5, 3, 5, 2)]
)
def test_disruptions_allowed(current: int, desired: int, expected: int, want: int) -> None:
    assert budget.disruptions_allowed(current, desired, expected) == want


def test_update_disrupted_pods() -> None:
    """TestUpdateDisruptedPods: a terminating pod, a missing one and an expired one leave."""
    recent = NOW - dt.timedelta(seconds=30)
    disrupted = {
        "p1": stamp(recent),  # terminating now
        "p2": stamp(recent),  # still pending
        "p3": stamp(NOW - dt.timedelta(minutes=3)),  # expired: was never deleted
        "p4": stamp(recent),  # gone
    }
    pods = [pod("p1", deleting=True), pod("p2"), pod("p3")]
    kept, recheck, not_deleted = budget.build_disrupted_pods(pods, disrupted, NOW)
    assert kept == {"p2": stamp(recent)}
    assert recheck == recent + budget.DELETION_TIMEOUT
    assert [p.metadata.name for p in not_deleted] == ["p3"]
    # p2 is about to go, p1 is terminating: only p3 counts healthy.
    assert budget.count_healthy(pods, kept, NOW) == 1


def test_status_and_condition() -> None:
    pdb = budget.PDBView(metadata=codec.ObjectMeta(name="p", namespace="ns", generation=2))
    status = budget.new_status(pdb, 3, 2, 3, {}, NOW)
    assert (status.disruptions_allowed, status.observed_generation) == (1, 2)
    assert status.conditions == [
        budget.Condition("DisruptionAllowed", "True", 2, stamp(NOW), "SufficientPods", "")
    ]
    written = budget.PDBView(metadata=pdb.metadata, status=status)
    assert budget.status_unchanged(written, 3, 2, 3, {})
    later = NOW + dt.timedelta(minutes=1)
    # the same status keeps its transition time; a change of status moves it
    assert budget.new_status(written, 3, 2, 3, {}, later).conditions[0].last_transition_time == stamp(NOW)
    down = budget.new_status(written, 2, 2, 3, {}, later)
    assert (down.conditions[0].status, down.conditions[0].reason) == ("False", "InsufficientPods")
    assert down.conditions[0].last_transition_time == stamp(later)
    failed = budget.fail_safe_status(written, 'found no controllers for pod "x"', later)
    assert failed.disruptions_allowed == 0 and failed.current_healthy == 3
    cond = failed.conditions[0]
    assert (cond.status, cond.reason, cond.message) == (
        "False",
        "SyncFailed",
        'found no controllers for pod "x"',
    )


def test_status_patch_nulls_dropped_disrupted_pods() -> None:
    old = budget.PDBStatus(disrupted_pods={"a": stamp(NOW), "b": stamp(NOW)})
    new = budget.PDBStatus(disrupted_pods={"b": stamp(NOW)})
    body = budget.status_patch(new, old, "42")
    assert body["metadata"] == {"resourceVersion": "42"}
    assert body["status"]["disruptedPods"] == {"a": None, "b": stamp(NOW)}


def _target(status: str, reason: str, age: float | None, *, phase: str = "Running") -> budget.PodView:
    when = None if age is None else NOW - dt.timedelta(seconds=age)
    cond = budget.PodCondition(
        type="DisruptionTarget", status=status, reason=reason, last_transition_time=when
    )
    return budget.PodView(
        metadata=codec.ObjectMeta(name="p"), status=budget.PodStatus(phase=phase, conditions=[cond])
    )


@pytest.mark.parametrize(
    ("target", "want"),
    [
        (_target("True", "EvictionByEvictionAPI", 30), 90.0),  # waits out the rest of the timeout
        (_target("True", "EvictionByEvictionAPI", 300), 0.0),  # stale now
        (_target("True", "EvictionByEvictionAPI", None), 0.0),  # a zero time is long past
        (_target("True", "TerminationByKubelet", 300), None),  # the kubelet's never goes stale
        (_target("False", "EvictionByEvictionAPI", 300), None),  # already reset
        (_target("True", "EvictionByEvictionAPI", 300, phase="Failed"), None),  # terminal pod
    ],
)
def test_stale_disruption_wait(target: budget.PodView, want: float | None) -> None:
    assert budget.stale_disruption_wait(target, budget.STALE_POD_DISRUPTION_TIMEOUT, NOW) == want
