"""Matching an Indexed Job's succeeded indexes against its `spec.successPolicy`.

Upstream pkg/controller/job/success_policy.go (matchSuccessPolicy): the rules are tried in
order; a rule with `succeededIndexes` is met when every index it names has succeeded, or (with
`succeededCount`) when at least that many of them have; a rule with only `succeededCount` is
met when that many indexes have succeeded. The first rule met gives the SuccessCriteriaMet
condition's message ("Matched rules at index N"). A rule whose `succeededIndexes` names no
index in range (unparsable, or all at or past `completions`) is skipped. Called by the job
controller on every sync of an Indexed Job with a success policy.
"""

from __future__ import annotations

import msgspec
from kcm_shared.apimachinery import codec

from kcm_controllers.job import intervals


class SuccessPolicyRule(codec.View):
    succeeded_indexes: str | None = None
    succeeded_count: int | None = None


class SuccessPolicy(codec.View):
    """`spec.successPolicy` of a Job, for the job controller's Job view."""

    rules: list[SuccessPolicyRule] = msgspec.field(default_factory=list)


def match(policy: SuccessPolicy | None, completions: int, succeeded: intervals.Intervals) -> str | None:
    """The SuccessCriteriaMet message of the first rule `succeeded` meets, or None."""
    if policy is None or not succeeded:
        return None
    for index, rule in enumerate(policy.rules):
        if rule.succeeded_indexes is not None:
            required = intervals.Intervals.parse(rule.succeeded_indexes, completions)
            if not required:
                continue
            if _meets_indexes(required, succeeded, rule.succeeded_count):
                return f"Matched rules at index {index}"
        elif rule.succeeded_count is not None and succeeded.total() >= rule.succeeded_count:
            return f"Matched rules at index {index}"
    return None


def _meets_indexes(required: intervals.Intervals, succeeded: intervals.Intervals, count: int | None) -> bool:
    """All of `required` succeeded, or at least `count` of them."""
    # Both are sorted and disjoint: walk them together, summing the overlaps.
    rs, ss = required.spans, succeeded.spans
    contained = r = s = 0
    while r < len(rs) and s < len(ss):
        overlap = min(rs[r][1], ss[s][1]) - max(rs[r][0], ss[s][0]) + 1
        if overlap > 0:
            contained += overlap
        if ss[s][1] < rs[r][1]:
            s += 1
        elif ss[s][1] > rs[r][1]:
            r += 1
        else:
            r += 1
            s += 1
    return contained == required.total() or (count is not None and contained >= count)
