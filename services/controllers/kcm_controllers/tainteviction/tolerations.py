"""When the NoExecute taints of a pod's node evict it: upstream's pure rules.

Upstream pkg/controller/tainteviction/taint_eviction.go (`getNoExecuteTaints`,
`getMinTolerationTime`, the decision in `processPodOnNode`) and
pkg/apis/core/v1/helper (`GetMatchingTolerations`: each taint matched by the first toleration
that tolerates it, core/v1 Toleration.ToleratesTaint as `kcm_shared.apis.nodeaffinity` has it).
Called by `controller.py`; pure, no I/O.

One deliberate difference: upstream counts every toleration from the moment its own process
saw the taint, so a restart starts the wait over. Here each taint counts from its
`timeAdded` (never later than now, so a clock ahead of ours cannot lengthen the wait; a taint
without one counts from `first_seen`, the caller's memory), and the pod must go at the
earliest of the taints' deadlines. With one taint, or taints added together, that is
upstream's minimum over the used tolerations.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import msgspec
from kcm_shared.apimachinery import codec
from kcm_shared.apis import nodeaffinity

NO_EXECUTE = "NoExecute"


class Taint(codec.View):
    key: str = ""
    value: str = ""
    effect: str = ""
    time_added: dt.datetime | None = None


class Toleration(codec.View):
    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None


class NodeSpecView(codec.View):
    taints: list[Taint] = msgspec.field(default_factory=list)


class NodeView(codec.Meta):
    spec: NodeSpecView = msgspec.field(default_factory=NodeSpecView)


class PodSpecView(codec.View):
    node_name: str = ""
    tolerations: list[Toleration] = msgspec.field(default_factory=list)


class PodView(codec.Meta):
    spec: PodSpecView = msgspec.field(default_factory=PodSpecView)


def no_execute_taints(taints: Iterable[Taint]) -> list[Taint]:
    """The NoExecute taints, in the node's order (getNoExecuteTaints)."""
    return [t for t in taints if t.effect == NO_EXECUTE]


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """core/v1 Toleration.ToleratesTaint."""
    return nodeaffinity.tolerates(
        {
            "key": toleration.key,
            "operator": toleration.operator,
            "value": toleration.value,
            "effect": toleration.effect,
        },
        {"key": taint.key, "value": taint.value, "effect": taint.effect},
    )


def matching_tolerations(
    taints: Sequence[Taint], tolerations: Sequence[Toleration]
) -> list[Toleration] | None:
    """For each taint the first toleration that tolerates it, in the taints' order; None when
    some taint has none (GetMatchingTolerations' false)."""
    used = []
    for taint in taints:
        match = next((t for t in tolerations if tolerates(t, taint)), None)
        if match is None:
            return None
        used.append(match)
    return used


def min_toleration_seconds(used: Sequence[Toleration]) -> int | None:
    """getMinTolerationTime in seconds: 0 when there is no toleration or one with
    tolerationSeconds <= 0, None (for ever) when none sets tolerationSeconds, else the least."""
    if not used:
        return 0
    finite = [t.toleration_seconds for t in used if t.toleration_seconds is not None]
    if not finite:
        return None
    return max(min(finite), 0)


@dataclass(frozen=True)
class Verdict:
    """What a pod on a tainted node is owed: `forever` (kept), or deleted at `deadline`
    (`now` or earlier: at once; `untolerated` when some taint is not tolerated at all)."""

    forever: bool = False
    deadline: dt.datetime | None = None
    untolerated: bool = False


def verdict(
    taints: Sequence[Taint], tolerations: Sequence[Toleration], now: dt.datetime, first_seen: dt.datetime
) -> Verdict:
    """The fate of a pod with `tolerations` on a node with the NoExecute `taints` (not empty)."""
    used = matching_tolerations(taints, tolerations)
    if used is None:
        return Verdict(deadline=now, untolerated=True)
    if min_toleration_seconds(used) is None:
        return Verdict(forever=True)
    deadlines = []
    for taint, toleration in zip(taints, used, strict=True):
        if toleration.toleration_seconds is None:
            continue  # this taint is tolerated for ever; another one bounds the stay
        start = min(taint.time_added, now) if taint.time_added is not None else first_seen
        deadlines.append(start + dt.timedelta(seconds=max(toleration.toleration_seconds, 0)))
    return Verdict(deadline=min(deadlines))
