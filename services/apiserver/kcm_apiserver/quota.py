"""Object-count quota for pods at create time (a slice of upstream's ResourceQuota admission).

A namespace's ResourceQuota objects that set `spec.hard.pods` (or `count/pods`) refuse a pod
create that would take the pods counted beyond the limit, with upstream's 403 message
`exceeded quota: NAME, requested: pods=1, used: pods=N, limited: pods=M`. Counted are the
namespace's pods that are not in a terminal phase, as upstream's pod evaluator does (it also
stops counting a terminating pod once its grace period is over; here a terminating pod
counts until it is gone). Other resources (cpu, memory, other kinds) are not enforced and
`status.used` is not written: both are the resource quota controller's and the full admission
plugin's work. This is what lets a test see a workload controller's pod creates refused the
way a cluster refuses them (the ReplicaSet's ReplicaFailure condition and FailedCreate Events).
"""

from __future__ import annotations

from typing import Any

from kcm_apiserver import errors
from kcm_apiserver.store import Obj, Store

_POD_KEYS = ("pods", "count/pods")
_TERMINAL = ("Succeeded", "Failed")


def admit_pod_create(store: Store, namespace: str, pod: Obj) -> None:
    """Raise 403 if creating `pod` in `namespace` exceeds a pod-count quota there."""
    limits = [
        (q["metadata"]["name"], key, hard)
        for q in store.list("/resourcequotas", namespace)
        for key in _POD_KEYS
        if (hard := _limit(q, key)) is not None
    ]
    if not limits:
        return
    used = store.count_where(
        "/pods", namespace, lambda p: (p.get("status") or {}).get("phase") not in _TERMINAL
    )
    exceeded = [(name, key, hard) for name, key, hard in limits if used + 1 > hard]
    if not exceeded:
        return
    name, key, hard = exceeded[0]
    raise errors.forbidden(
        "",
        "pods",
        pod["metadata"].get("name", ""),
        f"exceeded quota: {name}, requested: {key}=1, used: {key}={used}, limited: {key}={hard}",
    )


def _limit(quota: Obj, key: str) -> int | None:
    value: Any = ((quota.get("spec") or {}).get("hard") or {}).get(key)
    try:
        return int(str(value)) if value is not None else None
    except ValueError:
        return None  # a quantity with a suffix: pod counts are plain integers in practice
