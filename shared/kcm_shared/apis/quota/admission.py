"""Quota admission: whether a write fits every ResourceQuota of its namespace, and the usage
it charges them.

upstream staging/src/k8s.io/apiserver/pkg/admission/plugin/resourcequota/controller.go
(CheckRequest, hasUsageStats, the error texts). A quota takes part once the quota controller
has written its `status.hard`: a quota without status limits nothing yet, one whose
`status.used` lacks a tracked name refuses with `status unknown for quota: NAME, resources: ...`.
A request that fits returns the new `status.used` of each quota it charges; the caller writes
them in the same request, so back-to-back creates past a limit are refused without waiting
for the controller. Called by the embedded API server (kcm_apiserver.quota); pure, so its
tests need no server.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kcm_shared.apis.quota import evaluators, resources, views
from kcm_shared.apis.quota.evaluators import Evaluator
from kcm_shared.apis.quota.resources import ResourceList


class Denied(Exception):
    """The request does not fit; the message is upstream's (the API answers 403 with it)."""


@dataclass(frozen=True)
class Charge:
    quota: views.QuotaView
    used: ResourceList  # the quota's new status.used


def has_usage_stats(quota: views.QuotaView, interesting: Sequence[str]) -> bool:
    """Every tracked name of `status.hard` among `interesting` has a `status.used` value."""
    used = quota.status.used or {}
    wanted = set(interesting)
    return all(name in used for name in (quota.status.hard or {}) if name in wanted)


def check_request(
    quotas: Sequence[views.QuotaView],
    evaluator: Evaluator,
    operation: str,
    obj: Any,
    old: Any | None = None,
    *,
    subresource: str = "",
    now: dt.datetime | None = None,
) -> list[Charge]:
    """The charges a request makes; raises Denied when it does not fit (upstream CheckRequest).

    `old` is the stored object on an update (None on create). Quotas are checked in order and
    nothing is charged unless the request fits all of them.
    """
    if not evaluator.handles(operation, subresource):
        return []
    when = now or dt.datetime.now(dt.UTC)
    interesting: list[views.QuotaView] = []
    for quota in quotas:
        if not evaluator.matches(quota, obj):
            continue
        restricted = evaluator.matching_resources((quota.status.hard or {}).keys())
        problem = evaluator.constraints(restricted, obj)
        if problem is not None:
            raise Denied(f"failed quota: {quota.metadata.name}: {problem}")
        if not has_usage_stats(quota, restricted):
            raise Denied(
                f"status unknown for quota: {quota.metadata.name}, resources: {resources.pretty_names(restricted)}"
            )
        interesting.append(quota)
    if not interesting:
        return []
    usage = evaluator.usage(obj, when)
    negative = resources.is_negative(usage)
    if negative:
        raise Denied(f"quota usage is negative for resource(s): {resources.pretty_names(negative)}")
    deltas = {id(q): usage for q in interesting}
    if operation == evaluators.UPDATE and old is not None and old.metadata.resource_version:
        # Charge what changed, to the quotas the old object fell under already.
        delta = resources.subtract_non_negative(usage, evaluator.usage(old, when))
        for quota in interesting:
            if evaluator.matches(quota, old):
                deltas[id(quota)] = delta
    charges: list[Charge] = []
    for quota in interesting:
        delta = resources.remove_zeros(deltas[id(quota)])
        if not delta:
            continue
        hard = resources.parse_list(quota.status.hard)
        used = resources.parse_list(quota.status.used)
        requested = resources.mask(delta, hard)
        new_used = resources.add(used, requested)
        fits, exceeded = resources.less_than_or_equal(resources.mask(new_used, requested), hard)
        if not fits:
            raise Denied(
                f"exceeded quota: {quota.metadata.name}, "
                f"requested: {resources.pretty(resources.mask(requested, exceeded))}, "
                f"used: {resources.pretty(resources.mask(used, exceeded))}, "
                f"limited: {resources.pretty(resources.mask(hard, exceeded))}"
            )
        if not resources.equals(new_used, used):
            charges.append(Charge(quota, new_used))
    return charges
