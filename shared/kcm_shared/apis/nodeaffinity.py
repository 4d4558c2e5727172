"""Whether a pod may go to a node: node selector, required node affinity, taints and tolerations.

Upstream k8s.io/component-helpers/scheduling/corev1 (nodeaffinity.GetRequiredNodeAffinity(pod)
.Match(node), helpers.go FindMatchingUntoleratedTaint) and core/v1 Toleration.ToleratesTaint,
over plain decoded JSON (a pod's `spec`, a node object). Shared by the simulator's scheduler
stand-in (its NodeAffinity and TaintToleration filters) and the DaemonSet controller
(NodeShouldRunDaemonPod), which must agree on where a pod can run. Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

Obj = Mapping[str, Any]

OBJECT_NAME_FIELD = "metadata.name"  # the one field matchFields may name (metav1.ObjectNameField)


def _requirement_matches(req: Obj, values: Mapping[str, str]) -> bool:
    key, op, wanted = req.get("key", ""), req.get("operator", ""), req.get("values") or []
    present = key in values
    if op == "In":
        return present and values[key] in wanted
    if op == "NotIn":
        return not present or values[key] not in wanted
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and len(wanted) == 1:
        try:
            have, bound = int(values[key]), int(wanted[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False  # an unknown operator fails its term, as a parse error does upstream


def _field_requirement_matches(req: Obj, name: str) -> bool:
    # Upstream accepts only metadata.name with In or NotIn, one value, in matchFields.
    if req.get("key") != OBJECT_NAME_FIELD or req.get("operator") not in ("In", "NotIn"):
        return False
    if len(req.get("values") or []) != 1:
        return False
    return _requirement_matches(req, {OBJECT_NAME_FIELD: name})


def term_matches(term: Obj, node: Obj) -> bool:
    """One NodeSelectorTerm: its requirements ANDed; an empty term selects nothing."""
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    return all(_requirement_matches(r, labels) for r in expressions) and all(
        _field_requirement_matches(r, meta.get("name", "")) for r in fields
    )


def required_terms(spec: Obj) -> list[Obj] | None:
    """The pod's required node affinity terms, or None when it sets none."""
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required is None:
        return None
    terms: list[Obj] = required.get("nodeSelectorTerms") or []
    return terms


def matches_node(spec: Obj, node: Obj) -> bool:
    """spec.nodeSelector (every pair) and required node affinity (any term) both hold."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    terms = required_terms(spec)
    if terms is None:
        return True
    return any(term_matches(term, node) for term in terms)


def tolerates(toleration: Obj, taint: Obj) -> bool:
    """Toleration.ToleratesTaint: the effect (if set) and key match, and the value for Equal."""
    effect = toleration.get("effect", "")
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key", "")
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return bool(toleration.get("value", "") == taint.get("value", ""))
    return False


def find_untolerated_taint(
    taints: Iterable[Obj], tolerations: Iterable[Obj], inclusion: Callable[[Obj], bool]
) -> Obj | None:
    """The first taint passing `inclusion` that no toleration accepts (FindMatchingUntoleratedTaint)."""
    tolerations = list(tolerations)
    for taint in taints:
        if not inclusion(taint):
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def schedule_blocking(taint: Obj) -> bool:
    """NoSchedule and NoExecute taints keep new pods off (PreferNoSchedule does not)."""
    return taint.get("effect") in ("NoSchedule", "NoExecute")


def execute_blocking(taint: Obj) -> bool:
    """NoExecute taints evict running pods that do not tolerate them."""
    return taint.get("effect") == "NoExecute"
