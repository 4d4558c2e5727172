"""The ResourceQuota admission plugin of the embedded API server.

Upstream's plugin (staging/src/k8s.io/apiserver/pkg/admission/plugin/resourcequota) on the
shared evaluators of `kcm_shared.apis.quota`, the ones the resourcequota controller counts with:
`admit` runs on every create of a namespaced object and every update the resource's
evaluator handles (services, persistentvolumeclaims, pods/resize), after validation and
before the object is stored. It raises upstream's 403 (`exceeded quota: ...`, `failed quota:
...`, `status unknown for quota: ...`) or returns the quotas' new `status.used`, which
`operations` writes through the status subresource in the same request, right after the
object, so back-to-back creates past a limit are refused as upstream refuses them. The
server handles one request at a time, so check and charge need none of upstream's
per-namespace batching and conflict retries. Events are not charged (upstream's ignored
resources); a dry run is checked but charges nothing.
"""

from __future__ import annotations

from typing import Any

import msgspec
from kcm_shared.apimachinery import quantity
from kcm_shared.apis.quota import admission, evaluators, resources, views

from kcm_apiserver import errors
from kcm_apiserver.registry import ResourceType
from kcm_apiserver.store import Obj, Store

QUOTAS_KEY = "/resourcequotas"
_IGNORED = {("", "events"), ("events.k8s.io", "events")}
FIELD_MANAGER = "kube-apiserver"  # whose status write the charge is, in managedFields


def admit(
    store: Store, rt: ResourceType, namespace: str, obj: Obj, old: Obj | None = None, subresource: str = ""
) -> list[tuple[Obj, dict[str, str]]]:
    """The stored quotas this write charges, each with its new `status.used`; raises 403."""
    if not rt.namespaced or not namespace or (rt.group, rt.resource) in _IGNORED:
        return []
    evaluator = evaluators.REGISTRY.get(rt.group, rt.resource)
    operation = evaluators.CREATE if old is None else evaluators.UPDATE
    if not evaluator.handles(operation, subresource):
        return []
    stored = store.list(QUOTAS_KEY, namespace)
    if not stored:
        return []
    by_uid = {q["metadata"].get("uid"): q for q in stored}
    name = obj["metadata"].get("name", "")
    try:
        charges = admission.check_request(
            [_view(q, views.QuotaView) for q in stored],
            evaluator,
            operation,
            _view(obj, evaluator.view),
            None if old is None else _view(old, evaluator.view),
            subresource=subresource,
        )
    except admission.Denied as exc:
        raise errors.forbidden(rt.group, rt.resource, name, str(exc)) from exc
    except (quantity.QuantityError, msgspec.ValidationError) as exc:
        raise errors.forbidden(rt.group, rt.resource, name, f"quota evaluation failed: {exc}") from exc
    return [(by_uid[c.quota.metadata.uid], resources.to_json(c.used)) for c in charges]


def _view(obj: Obj, view: type[Any]) -> Any:
    # Lenient as the cache's decoding: a field of an unexpected type must not fail admission.
    return msgspec.convert(obj, view, strict=False)
