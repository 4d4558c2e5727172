"""CertificateSigningRequest writes as kube-apiserver's registry strategies make them.

Upstream pkg/registry/certificates/certificates/strategy.go:
- `prepare_create(obj, requester)`: the status starts empty and the requester fields
  (`spec.username`, `uid`, `groups`, `extra`) are the authenticated user's, whatever the client
  sent (a client cannot create a pre-approved request, nor speak for someone else).
- `prepare_update(old, new, subresource)`: through the main resource neither spec nor status
  changes; through `status` the spec and the Approved/Denied conditions already there are kept
  (adding or removing one then fails validation); through `approval` only the conditions
  change. Both subresources stamp each condition's `lastUpdateTime` when it has none and its
  `lastTransitionTime` from the same type and status before, else now (populateConditionTimestamps).
Called by `strategies` (create and update) and `operations` (the requester); the rules on what
a write may contain are in validation/certificates.py.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

Obj = dict[str, Any]

GROUP, KIND = "certificates.k8s.io", "CertificateSigningRequest"
APPROVED, DENIED = "Approved", "Denied"


def prepare_create(obj: Obj, requester: Obj | None) -> None:
    obj["status"] = {}
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return  # validation refuses it
    for key in ("username", "uid", "groups", "extra"):
        spec.pop(key, None)
    who = requester or {}
    for key in ("username", "uid"):
        if who.get(key):
            spec[key] = who[key]
    if who.get("groups"):
        spec["groups"] = list(who["groups"])
    if who.get("extra"):
        spec["extra"] = {k: list(v) for k, v in who["extra"].items()}


def _conditions(obj: Obj) -> list[Obj]:
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    return [c for c in conditions if isinstance(c, dict)] if isinstance(conditions, list) else []


def _preserve_instances(old: Obj, new: Obj, kind: str) -> None:
    """The old conditions of `kind` in place of the new ones, when there are as many of each."""
    olds = [c for c in _conditions(old) if c.get("type") == kind]
    news = [i for i, c in enumerate(_conditions(new)) if c.get("type") == kind]
    if len(olds) != len(news):
        return
    conditions = _conditions(new)
    for at, kept in zip(news, olds, strict=True):
        conditions[at] = copy.deepcopy(kept)
    new["status"]["conditions"] = conditions


def _stamp(old: Obj, new: Obj, now: str) -> None:
    for condition in _conditions(new):
        if not condition.get("lastUpdateTime"):
            condition["lastUpdateTime"] = now
        if not condition.get("lastTransitionTime"):
            condition["lastTransitionTime"] = next(
                (
                    c["lastTransitionTime"]
                    for c in _conditions(old)
                    if c.get("type") == condition.get("type")
                    and c.get("status") == condition.get("status")
                    and c.get("lastTransitionTime")
                ),
                now,
            )


def prepare_update(old: Obj, new: Obj, subresource: str, clock: Callable[[], str]) -> None:
    """`new` as the strategy of `subresource` ("" for the main resource) stores it."""
    new["spec"] = copy.deepcopy(old.get("spec", {}))
    if subresource == "status":
        if isinstance(new.get("status"), dict):
            _preserve_instances(old, new, APPROVED)
            _preserve_instances(old, new, DENIED)
        _stamp(old, new, clock())
    elif subresource == "approval":
        status = copy.deepcopy(old.get("status") or {})
        conditions = _conditions(new)
        if conditions:
            status["conditions"] = conditions
        else:
            status.pop("conditions", None)
        new["status"] = status
        _stamp(old, new, clock())
    else:
        new["status"] = copy.deepcopy(old.get("status", {}))
