"""The LimitRanger admission plugin of the embedded API server, as kube-apiserver v1.32 runs it by
default (plugin/pkg/admission/limitranger), from the LimitRanges of the object's namespace:

- `admit_create` (mutating, pod creates): each LimitRange's Container item gives the containers
  and init containers their `default` limits and `defaultRequest` requests for the resources
  they do not set, and the pod the annotation `kubernetes.io/limit-ranger: LimitRanger plugin
  set: cpu, memory request for container web; ...` (the last LimitRange that set anything);
- `validate` (validating, after object validation): a pod being created, and a
  PersistentVolumeClaim being created or updated, is refused with kube-apiserver's 403
  (`pods "web" is forbidden: maximum cpu usage per Container is 1, but limit is 2`; several
  reasons as `[a, b]`) when a container (Container items), the pod's sum (Pod items) or the
  claim's storage request (PersistentVolumeClaim items) breaks a min, max or
  maxLimitRequestRatio. LimitRanges are read in name order, resources in name order (Go's map
  order is random, so kube-apiserver's order of several reasons varies).

Pod updates are not checked (their resources cannot change). Called by `operations`; reads
LimitRanges from the store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from kcm_shared.apimachinery import quantity

from kcm_apiserver import errors
from kcm_apiserver.registry import ResourceType
from kcm_apiserver.store import Obj, Store

LIMIT_RANGES_KEY = "/limitranges"
ANNOTATION = "kubernetes.io/limit-ranger"
Resources = dict[str, quantity.Quantity]


def _ranges(store: Store, namespace: str) -> list[Obj]:
    return store.list(LIMIT_RANGES_KEY, namespace)


def _items(limit_range: Obj, kind: str) -> Iterator[Obj]:
    for item in (limit_range.get("spec") or {}).get("limits") or []:
        if isinstance(item, dict) and item.get("type") == kind:
            yield item


def _containers(spec: Obj) -> Iterator[tuple[str, Obj]]:
    for field, label in (("containers", "container"), ("initContainers", "init container")):
        for container in spec.get(field) or []:
            if isinstance(container, dict):
                yield label, container


def admit_create(store: Store, rt: ResourceType, obj: Obj) -> None:
    if (rt.group, rt.resource) != ("", "pods"):
        return
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    meta = obj.setdefault("metadata", {})
    for limit_range in _ranges(store, str(meta.get("namespace") or "")):
        limits: dict[str, Any] = {}
        requests: dict[str, Any] = {}
        for item in _items(limit_range, "Container"):
            limits.update(item.get("default") or {})
            requests.update(item.get("defaultRequest") or {})
        notes = []
        for label, container in _containers(spec):
            resources = container.setdefault("resources", {})
            for field, defaults, word in (("requests", requests, "request"), ("limits", limits, "limit")):
                own = resources.setdefault(field, {})
                added = sorted(name for name in defaults if name not in own)
                for name in added:
                    own[name] = defaults[name]
                if not own:
                    del resources[field]
                if added:
                    notes.append(f"{', '.join(added)} {word} for {label} {container.get('name', '')}")
        if notes:
            annotations = meta.get("annotations")
            if not isinstance(annotations, dict):
                annotations = meta["annotations"] = {}
            annotations[ANNOTATION] = "LimitRanger plugin set: " + "; ".join(notes)


def validate(store: Store, rt: ResourceType, obj: Obj, old: Obj | None) -> None:
    """Raise kube-apiserver's 403 when `obj` breaks a LimitRange of its namespace."""
    if rt.group != "" or rt.resource not in ("pods", "persistentvolumeclaims"):
        return
    if rt.resource == "pods" and old is not None:
        return
    meta = obj.get("metadata") or {}
    check = _pod_reasons if rt.resource == "pods" else _claim_reasons
    for limit_range in _ranges(store, str(meta.get("namespace") or "")):
        reasons = check(limit_range, obj.get("spec") or {})
        if reasons:
            why = reasons[0] if len(reasons) == 1 else f"[{', '.join(reasons)}]"
            raise errors.forbidden("", rt.resource, str(meta.get("name") or ""), why)


def _resources(values: object) -> Resources:
    out = {}
    for name, text in (values if isinstance(values, dict) else {}).items():
        try:
            out[str(name)] = quantity.parse(text)
        except quantity.QuantityError:
            continue  # validation refused it already
    return out


def _pod_reasons(limit_range: Obj, spec: Obj) -> list[str]:
    reasons: list[str] = []
    own = [
        (
            _resources((c.get("resources") or {}).get("requests")),
            _resources((c.get("resources") or {}).get("limits")),
        )
        for _, c in _containers(spec)
    ]
    for item in _items(limit_range, "Container"):
        for requests, limits in own:
            reasons += _constraints("Container", item, requests, limits)
    for item in _items(limit_range, "Pod"):
        reasons += _constraints("Pod", item, *_pod_totals(spec))
    return reasons


def _pod_totals(spec: Obj) -> tuple[Resources, Resources]:
    """The pod's requests and limits as upstream's resource helper sums them: its containers
    added up, an init container counting where it alone asks for more (sidecars, init
    containers with restartPolicy Always, run beside the rest and add up with them)."""
    totals: list[Resources] = []
    for field in ("requests", "limits"):
        total: Resources = {}
        sidecars: Resources = {}
        for c in spec.get("containers") or []:
            _add(total, _resources(((c or {}).get("resources") or {}).get(field)))
        for c in spec.get("initContainers") or []:
            own = _resources(((c or {}).get("resources") or {}).get(field))
            if (c or {}).get("restartPolicy") == "Always":
                _add(sidecars, own)
                _add(total, own)
                continue
            for name, amount in own.items():
                peak = amount + sidecars.get(name, quantity.ZERO)
                if name not in total or peak > total[name]:
                    total[name] = peak
        totals.append(total)
    return totals[0], totals[1]


def _add(total: Resources, more: Resources) -> None:
    for name, amount in more.items():
        total[name] = total[name] + amount if name in total else amount


def _claim_reasons(limit_range: Obj, spec: Obj) -> list[str]:
    requests = _resources((spec.get("resources") or {}).get("requests"))
    reasons: list[str] = []
    for item in _items(limit_range, "PersistentVolumeClaim"):
        for name, enforced in sorted(_resources(item.get("min")).items()):
            reasons += _min("PersistentVolumeClaim", name, enforced, requests, {})
        for name, enforced in sorted(_resources(item.get("max")).items()):
            # A claim's max bounds what it asks for; it has no limit of its own.
            if name not in requests:
                reasons.append(
                    f"maximum {name} usage per PersistentVolumeClaim is {enforced}.  No request is specified"
                )
            elif requests[name] > enforced:
                reasons.append(
                    f"maximum {name} usage per PersistentVolumeClaim is {enforced}, but request is {requests[name]}"
                )
    return reasons


Check = Callable[[str, str, quantity.Quantity, Resources, Resources], list[str]]


def _constraints(kind: str, item: Obj, requests: Resources, limits: Resources) -> list[str]:
    reasons: list[str] = []
    checks: tuple[tuple[str, Check], ...] = (("min", _min), ("max", _max), ("maxLimitRequestRatio", _ratio))
    for field, check in checks:
        for name, enforced in sorted(_resources(item.get(field)).items()):
            reasons += check(kind, name, enforced, requests, limits)
    return reasons


def _min(
    kind: str, name: str, enforced: quantity.Quantity, requests: Resources, limits: Resources
) -> list[str]:
    if name not in requests:
        return [f"minimum {name} usage per {kind} is {enforced}.  No request is specified"]
    if requests[name] < enforced:
        return [f"minimum {name} usage per {kind} is {enforced}, but request is {requests[name]}"]
    if name in limits and limits[name] < enforced:
        return [f"minimum {name} usage per {kind} is {enforced}, but limit is {limits[name]}"]
    return []


def _max(
    kind: str, name: str, enforced: quantity.Quantity, requests: Resources, limits: Resources
) -> list[str]:
    if name not in limits:
        return [f"maximum {name} usage per {kind} is {enforced}.  No limit is specified"]
    if limits[name] > enforced:
        return [f"maximum {name} usage per {kind} is {enforced}, but limit is {limits[name]}"]
    if name in requests and requests[name] > enforced:
        return [f"maximum {name} usage per {kind} is {enforced}, but request is {requests[name]}"]
    return []


def _ratio(
    kind: str, name: str, enforced: quantity.Quantity, requests: Resources, limits: Resources
) -> list[str]:
    request, limit = requests.get(name), limits.get(name)
    if request is None or request.milli_value() == 0:
        return [
            f"{name} max limit to request ratio per {kind} is {enforced}, but no request is specified or request is 0"
        ]
    if limit is None or limit.milli_value() == 0:
        return [
            f"{name} max limit to request ratio per {kind} is {enforced}, but no limit is specified or limit is 0"
        ]
    observed = limit.milli_value() / request.milli_value()
    if observed * 1000 > enforced.milli_value():
        return [
            f"{name} max limit to request ratio per {kind} is {enforced}, but provided ratio is {observed:f}"
        ]
    return []
