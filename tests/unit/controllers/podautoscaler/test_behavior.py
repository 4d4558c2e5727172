"""HPA behavior normalisation: the scale-up/scale-down limit tables, stabilization windows and
the ScalingLimited reasons, as upstream's horizontal.go computes them."""

from __future__ import annotations

import datetime as dt

import pytest
from kcm_controllers.podautoscaler import behavior as rate

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def rules(select: str = "Max", *policies: tuple[str, int, int], window: int = 0) -> rate.Rules:
    return rate.Rules(window, select, tuple(policies))


def ago(seconds: int) -> dt.datetime:
    return NOW - dt.timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("name", "current", "ups", "downs", "rule", "want"),
    [
        ("no previous events", 5, [], [], rules("Max", ("Pods", 4, 60)), 9),
        ("previous scale up", 5, [(ago(30), 2)], [], rules("Max", ("Pods", 4, 60)), 7),
        ("scale up outside the period", 5, [(ago(90), 2)], [], rules("Max", ("Pods", 4, 60)), 9),
        ("disabled", 5, [], [], rules("Disabled", ("Pods", 4, 60)), 5),
        ("min change", 5, [], [], rules("Min", ("Pods", 4, 60), ("Pods", 2, 60)), 7),
        ("percent", 10, [], [], rules("Max", ("Percent", 50, 60)), 15),
        ("percent rounds up", 1, [], [], rules("Max", ("Percent", 10, 60)), 2),
    ],
)
def test_scale_up_limit(name: str, current: int, ups: list, downs: list, rule: rate.Rules, want: int) -> None:
    history = rate.History(scale_ups=ups, scale_downs=downs)
    assert rate.scale_up_limit(current, history, rule, NOW) == want, name


@pytest.mark.parametrize(
    ("name", "current", "ups", "downs", "rule", "want"),
    [
        ("no previous events", 10, [], [], rules("Max", ("Percent", 20, 60)), 8),
        ("previous scale down", 10, [], [(ago(30), 1)], rules("Max", ("Percent", 20, 60)), 8),
        ("multiple policies", 100, [], [], rules("Max", ("Percent", 10, 60), ("Pods", 5, 60)), 90),
        ("disabled", 10, [], [], rules("Disabled", ("Percent", 20, 60)), 10),
        ("min change", 100, [], [], rules("Min", ("Percent", 10, 60), ("Pods", 15, 60)), 90),
        ("percent rounds down", 3, [], [], rules("Max", ("Percent", 50, 60)), 1),
    ],
)
def test_scale_down_limit(
    name: str, current: int, ups: list, downs: list, rule: rate.Rules, want: int
) -> None:
    history = rate.History(scale_ups=ups, scale_downs=downs)
    assert rate.scale_down_limit(current, history, rule, NOW) == want, name


UP, DOWN = rate.rules_of(None, 300)


def test_defaults_when_behavior_is_unset() -> None:
    assert rate.Rules(0, "Max", (("Pods", 4, 15), ("Percent", 100, 15))) == UP
    assert rate.Rules(300, "Max", (("Percent", 100, 15),)) == DOWN
    # A given scale-down window wins over the flag.
    _, down = rate.rules_of({"scaleDown": {"stabilizationWindowSeconds": 60}}, 300)
    assert down.stabilization_seconds == 60


@pytest.mark.parametrize(
    ("name", "current", "desired", "want"),
    [
        ("within range", 3, 4, (4, "DesiredWithinRange", "the desired count is within the acceptable range")),
        (
            "scale up rate",
            2,
            20,
            (6, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"),
        ),
        (
            "above max",
            5,
            20,
            (10, "TooManyReplicas", "the desired replica count is more than the maximum replica count"),
        ),
        (
            "below min",
            5,
            1,
            (2, "TooFewReplicas", "the desired replica count is less than the minimum replica count"),
        ),
    ],
)
def test_limit_rate(name: str, current: int, desired: int, want: tuple[int, str, str]) -> None:
    assert rate.limit_rate(rate.History(), current, desired, 2, 10, UP, DOWN, NOW) == want, name


def test_scale_down_limited_by_policy() -> None:
    down = rules("Max", ("Pods", 1, 60))
    got = rate.limit_rate(rate.History(), 5, 2, 1, 10, UP, down, NOW)
    assert got == (
        4,
        "ScaleDownLimit",
        "the desired replica count is decreasing faster than the maximum scale rate",
    )


def test_stabilization_keeps_the_highest_recent_recommendation() -> None:
    history = rate.History(recommendations=[(ago(100), 8), (ago(400), 10)])
    got = rate.stabilize(history, 9, 3, UP, DOWN, NOW)
    assert got == (
        8,
        "ScaleDownStabilized",
        "recent recommendations were higher than current one, applying the highest recent recommendation",
    )
    # The sample older than both windows was replaced by the new recommendation.
    assert sorted(r for _, r in history.recommendations) == [3, 8]


def test_stabilization_scale_up_window() -> None:
    up = rules("Max", ("Pods", 4, 15), window=60)
    history = rate.History(recommendations=[(ago(30), 4)])
    recommendation, reason, _ = rate.stabilize(history, 3, 7, up, DOWN, NOW)
    assert (recommendation, reason) == (4, "ScaleUpStabilized")


def test_store_scale_event_drops_outdated() -> None:
    history = rate.History(scale_ups=[(ago(100), 3), (ago(5), 1)])
    rate.store_scale_event(history, UP, DOWN, 2, 4, NOW)
    assert history.scale_ups == [(ago(5), 1), (NOW, 2)]
    rate.store_scale_event(history, UP, DOWN, 4, 1, NOW)
    assert history.scale_downs == [(NOW, 3)]


@pytest.mark.parametrize(
    ("current", "desired", "want"),
    [
        # upstream's scale-up limit without behavior: max(2 x current, 4)
        (
            1,
            10,
            (4, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"),
        ),
        (
            3,
            10,
            (6, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"),
        ),
        (6, 9, (8, "TooManyReplicas", "the desired replica count is more than the maximum replica count")),
        (3, 1, (2, "TooFewReplicas", "the desired replica count is less than the minimum replica count")),
        (3, 5, (5, "DesiredWithinRange", "the desired count is within the acceptable range")),
    ],
)
def test_limit_by_rules_without_behavior(current: int, desired: int, want: tuple[int, str, str]) -> None:
    assert rate.limit_by_rules(current, desired, 2, 8) == want


def test_stabilize_down_without_behavior() -> None:
    history = rate.History(recommendations=[(ago(400), 9), (ago(100), 5)])
    assert rate.stabilize_down(history, 2, 300, NOW) == 5
    assert sorted(r for _, r in history.recommendations) == [2, 5]
    # Scaling up is never held back.
    assert rate.stabilize_down(history, 7, 300, NOW) == 7
