"""Normalising a metric's proposal with spec.behavior: stabilization windows and scaling policies.

Follows pkg/controller/podautoscaler/horizontal.go (v1.32): stabilizeRecommendationWithBehaviors,
convertDesiredReplicasWithBehaviorRate, calculateScaleUpLimitWithScalingRules,
calculateScaleDownLimitWithBehaviors, getReplicasChangePerPeriod and storeScaleEvent. The
recent recommendations and scale events of each HPA live in `History`, in the memory of the
replica that syncs it, as upstream keeps them in the controller; a new owner starts with the
current size as its only recommendation (upstream recordInitialRecommendation). Called by
`horizontal.py`; the clock is passed in so the table tests are pure.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]

# autoscaling/v2's defaults (what the API server fills once a behavior is given at all).
DEFAULT_SCALE_UP: Obj = {
    "stabilizationWindowSeconds": 0,
    "selectPolicy": "Max",
    "policies": [
        {"type": "Pods", "value": 4, "periodSeconds": 15},
        {"type": "Percent", "value": 100, "periodSeconds": 15},
    ],
}
DEFAULT_SCALE_DOWN: Obj = {
    "selectPolicy": "Max",
    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
}


@dataclass(frozen=True)
class Rules:
    stabilization_seconds: int
    select_policy: str
    policies: tuple[tuple[str, int, int], ...]  # (type, value, periodSeconds)

    @classmethod
    def of(cls, given: Obj | None, default: Obj, stabilization_default: int) -> Rules:
        rules = {**default, **{k: v for k, v in (given or {}).items() if v is not None}}
        window = rules.get("stabilizationWindowSeconds")
        return cls(
            int(window) if window is not None else stabilization_default,
            str(rules.get("selectPolicy") or "Max"),
            tuple(
                (str(p.get("type", "")), int(p.get("value", 0)), int(p.get("periodSeconds", 0)))
                for p in rules.get("policies") or []
            ),
        )

    @property
    def longest_period(self) -> int:
        return max((p[2] for p in self.policies), default=0)


def rules_of(behavior: Obj | None, downscale_stabilization: int) -> tuple[Rules, Rules]:
    """(scaleUp, scaleDown) rules, upstream's defaults for what is unset; a scale-down window
    left unset is the --horizontal-pod-autoscaler-downscale-stabilization flag's
    (upstream maybeInitScaleDownStabilizationWindow)."""
    behavior = behavior or {}
    return (
        Rules.of(behavior.get("scaleUp"), DEFAULT_SCALE_UP, 0),
        Rules.of(behavior.get("scaleDown"), DEFAULT_SCALE_DOWN, downscale_stabilization),
    )


@dataclass
class History:
    """One HPA's recent recommendations and scale events (timestamp, replicas/change)."""

    recommendations: list[tuple[dt.datetime, int]] = field(default_factory=list)
    scale_ups: list[tuple[dt.datetime, int]] = field(default_factory=list)
    scale_downs: list[tuple[dt.datetime, int]] = field(default_factory=list)


def stabilize(
    history: History, current: int, desired: int, up: Rules, down: Rules, now: dt.datetime
) -> tuple[int, str, str]:
    """The recommendation within the windows' bounds, and the AbleToScale reason/message;
    records `desired` (replacing a sample older than both windows)."""
    up_cutoff = now - dt.timedelta(seconds=up.stabilization_seconds)
    down_cutoff = now - dt.timedelta(seconds=down.stabilization_seconds)
    up_rec = down_rec = desired
    old_index: int | None = None
    for i, (stamp, rec) in enumerate(history.recommendations):
        if stamp > up_cutoff:
            up_rec = min(rec, up_rec)
        if stamp > down_cutoff:
            down_rec = max(rec, down_rec)
        if stamp < up_cutoff and stamp < down_cutoff:
            old_index = i
    recommendation = min(max(current, up_rec), down_rec)
    if old_index is not None:
        history.recommendations[old_index] = (now, desired)
    else:
        history.recommendations.append((now, desired))
    if desired >= current:
        return (
            recommendation,
            "ScaleUpStabilized",
            "recent recommendations were lower than current one, applying the lowest recent recommendation",
        )
    return (
        recommendation,
        "ScaleDownStabilized",
        "recent recommendations were higher than current one, applying the highest recent recommendation",
    )


def _change_in_period(period: int, events: list[tuple[dt.datetime, int]], now: dt.datetime) -> int:
    cutoff = now - dt.timedelta(seconds=period)
    return sum(change for stamp, change in events if stamp > cutoff)


def _replicas_period_ago(current: int, period: int, history: History, now: dt.datetime) -> int:
    """The replica count a policy's period began with: today's, less the scaling done since."""
    return (
        current
        - _change_in_period(period, history.scale_ups, now)
        + _change_in_period(period, history.scale_downs, now)
    )


def scale_up_limit(current: int, history: History, rules: Rules, now: dt.datetime) -> int:
    """Upstream calculateScaleUpLimitWithScalingRules."""
    if rules.select_policy == "Disabled":
        return current
    pick = min if rules.select_policy == "Min" else max
    result: int | None = None
    for kind, value, period in rules.policies:
        start = _replicas_period_ago(current, period, history, now)
        proposed = start + value if kind == "Pods" else math.ceil(start * (1 + value / 100))
        result = proposed if result is None else pick(result, proposed)
    return result if result is not None else (2**31 - 1 if pick is min else -(2**31))


def scale_down_limit(current: int, history: History, rules: Rules, now: dt.datetime) -> int:
    """Upstream calculateScaleDownLimitWithBehaviors."""
    if rules.select_policy == "Disabled":
        return current
    pick = max if rules.select_policy == "Min" else min
    result: int | None = None
    for kind, value, period in rules.policies:
        start = _replicas_period_ago(current, period, history, now)
        proposed = start - value if kind == "Pods" else int(start * (1 - value / 100))
        result = proposed if result is None else pick(result, proposed)
    return result if result is not None else (-(2**31) if pick is max else 2**31 - 1)


def limit_rate(
    history: History,
    current: int,
    desired: int,
    min_replicas: int,
    max_replicas: int,
    up: Rules,
    down: Rules,
    now: dt.datetime,
) -> tuple[int, str, str]:
    """`desired` within min/max and the policies' rate, with the ScalingLimited reason/message;
    upstream convertDesiredReplicasWithBehaviorRate."""
    if desired > current:
        limit = max(scale_up_limit(current, history, up, now), current)
        if max_replicas > limit:
            allowed, reason, message = (
                limit,
                "ScaleUpLimit",
                "the desired replica count is increasing faster than the maximum scale rate",
            )
        else:
            allowed, reason, message = (
                max_replicas,
                "TooManyReplicas",
                "the desired replica count is more than the maximum replica count",
            )
        if desired > allowed:
            return allowed, reason, message
    elif desired < current:
        limit = min(scale_down_limit(current, history, down, now), current)
        if min_replicas < limit:
            allowed, reason, message = (
                limit,
                "ScaleDownLimit",
                "the desired replica count is decreasing faster than the maximum scale rate",
            )
        else:
            allowed, reason, message = (
                min_replicas,
                "TooFewReplicas",
                "the desired replica count is less than the minimum replica count",
            )
        if desired < allowed:
            return allowed, reason, message
    return desired, "DesiredWithinRange", "the desired count is within the acceptable range"


def store_scale_event(
    history: History, up: Rules, down: Rules, previous: int, new: int, now: dt.datetime
) -> None:
    """Remember a scale for the policies' periods; events older than the longest period are
    dropped (upstream marks them outdated and reuses their slot: the same counts)."""
    if new > previous:
        cutoff = now - dt.timedelta(seconds=up.longest_period)
        history.scale_ups = [e for e in history.scale_ups if e[0] > cutoff] + [(now, new - previous)]
    elif new < previous:
        cutoff = now - dt.timedelta(seconds=down.longest_period)
        history.scale_downs = [e for e in history.scale_downs if e[0] > cutoff] + [(now, previous - new)]


# --- an HPA without spec.behavior (upstream normalizeDesiredReplicas) ---------------------


def stabilize_down(history: History, desired: int, window: int, now: dt.datetime) -> int:
    """The highest recommendation within the downscale window; records `desired` (upstream
    stabilizeRecommendation)."""
    cutoff = now - dt.timedelta(seconds=window)
    highest = desired
    old_index: int | None = None
    for i, (stamp, rec) in enumerate(history.recommendations):
        if stamp < cutoff:
            old_index = i
        elif rec > highest:
            highest = rec
    if old_index is not None:
        history.recommendations[old_index] = (now, desired)
    else:
        history.recommendations.append((now, desired))
    return highest


def limit_by_rules(current: int, desired: int, min_replicas: int, max_replicas: int) -> tuple[int, str, str]:
    """min/max and a scale-up limit of max(2 x current, 4), with the ScalingLimited
    reason/message (upstream convertDesiredReplicasWithRules)."""
    scale_up_limit = max(2 * current, 4)
    if max_replicas > scale_up_limit:
        allowed, reason, message = (
            scale_up_limit,
            "ScaleUpLimit",
            "the desired replica count is increasing faster than the maximum scale rate",
        )
    else:
        allowed, reason, message = (
            max_replicas,
            "TooManyReplicas",
            "the desired replica count is more than the maximum replica count",
        )
    if desired < min_replicas:
        return (
            min_replicas,
            "TooFewReplicas",
            "the desired replica count is less than the minimum replica count",
        )
    if desired > allowed:
        return allowed, reason, message
    return desired, "DesiredWithinRange", "the desired count is within the acceptable range"
