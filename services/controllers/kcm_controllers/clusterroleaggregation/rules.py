"""Pure helpers of the ClusterRole aggregation controller: the decoded ClusterRole and the
union of the rules an aggregation rule selects (upstream syncClusterRole's loop and its
`ruleExists`, pkg/controller/clusterroleaggregation/clusterroleaggregation_controller.go).
Called by `clusterroleaggregation.py`; tested by tests/unit/controllers/clusterroleaggregation/test_clusterroleaggregation.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec
from kcm_shared.apimachinery import codec, selectors


class PolicyRule(codec.View):
    """One rule; lists compare by their items in order, a missing list as an empty one (what
    upstream's semantic equality does with nil and empty slices)."""

    verbs: list[str] = msgspec.field(default_factory=list)
    api_groups: list[str] = msgspec.field(default_factory=list)
    resources: list[str] = msgspec.field(default_factory=list)
    resource_names: list[str] = msgspec.field(default_factory=list)
    non_resource_urls: list[str] = msgspec.field(default_factory=list, name="nonResourceURLs")


class AggregationRule(codec.View):
    cluster_role_selectors: list[dict[str, Any]] = msgspec.field(default_factory=list)


class ClusterRoleView(codec.Meta):
    aggregation_rule: AggregationRule | None = None
    rules: list[PolicyRule] | None = None


def aggregate(role: ClusterRoleView, roles: Iterable[ClusterRoleView]) -> list[PolicyRule]:
    """The rules `role`'s aggregation rule gives it, from `roles` (every ClusterRole).

    For each selector in turn, the selected roles by name (the role itself left out), each
    rule appended unless an equal one is already there. Raises SelectorError for a selector
    that does not parse, as upstream returns LabelSelectorAsSelector's error.
    """
    assert role.aggregation_rule is not None
    candidates = sorted(roles, key=lambda r: r.metadata.name)
    union: list[PolicyRule] = []
    for raw in role.aggregation_rule.cluster_role_selectors:
        # A selector in the list is a value, never nil: an empty one selects every role.
        selector = selectors.label_selector_from_dict(raw)
        for other in candidates:
            if other.metadata.name == role.metadata.name or not selector.matches(other.metadata.labels):
                continue
            for rule in other.rules or ():
                if rule not in union:
                    union.append(rule)
    return union


def apply_body(name: str, rules: list[PolicyRule]) -> dict[str, Any]:
    """The apply configuration upstream sends: the name and, when there are any, the rules."""
    body: dict[str, Any] = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
    }
    if rules:
        body["rules"] = msgspec.to_builtins(rules)
    return body
