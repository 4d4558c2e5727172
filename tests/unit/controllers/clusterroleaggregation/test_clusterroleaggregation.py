"""The aggregation rule's union: upstream's TestSyncClusterRole cases
(clusterroleaggregation_controller_test.go) against `rules.aggregate` and the apply body."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from kcm_controllers.clusterroleaggregation import rules
from kcm_shared.apimachinery import selectors

HAMMER = [{"verbs": ["hammer"], "resources": ["nails"]}, {"verbs": ["hammer"], "resources": ["wedges"]}]
CHISEL = [{"verbs": ["chisel"], "resources": ["mortises"]}]
SAW = [{"verbs": ["saw"], "resources": ["boards"]}]


def role(name: str, labels: dict[str, str], rule_list: list[dict[str, Any]]) -> rules.ClusterRoleView:
    doc = {"metadata": {"name": name, "labels": labels}, "rules": rule_list}
    return msgspec.convert(doc, rules.ClusterRoleView)


def combined(selected: list[dict[str, str]], *rule_lists: list[dict[str, Any]]) -> rules.ClusterRoleView:
    doc = {
        "metadata": {"name": "combined"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": s} for s in selected]},
        "rules": [rule for rule_list in rule_lists for rule in rule_list],
    }
    return msgspec.convert(doc, rules.ClusterRoleView)


def as_rules(*rule_lists: list[dict[str, Any]]) -> list[rules.PolicyRule]:
    return msgspec.convert([rule for rule_list in rule_lists for rule in rule_list], list[rules.PolicyRule])


FOO_BAR = {"foo": "bar"}
NOT_BAR = {"foo": "not-bar"}

CASES = [
    ("remove dead rules", [role("hammer", FOO_BAR, HAMMER)], combined([FOO_BAR], SAW), as_rules(HAMMER)),
    ("strip rules", [role("hammer", NOT_BAR, HAMMER)], combined([FOO_BAR], HAMMER), []),
    (
        "select properly and put in order",
        [role("hammer", FOO_BAR, HAMMER), role("chisel", FOO_BAR, CHISEL), role("saw", NOT_BAR, SAW)],
        combined([FOO_BAR]),
        as_rules(CHISEL, HAMMER),
    ),
    (
        "select properly with multiple selectors",
        [role("hammer", FOO_BAR, HAMMER), role("chisel", FOO_BAR, CHISEL), role("saw", NOT_BAR, SAW)],
        combined([FOO_BAR, NOT_BAR]),
        as_rules(CHISEL, HAMMER, SAW),
    ),
    (
        "select properly remove duplicates",
        [
            role("hammer", FOO_BAR, HAMMER),
            role("chisel", FOO_BAR, CHISEL),
            role("saw", FOO_BAR, SAW),
            role("other-saw", NOT_BAR, SAW),
        ],
        combined([FOO_BAR, NOT_BAR]),
        as_rules(CHISEL, HAMMER, SAW),
    ),
    ("no diff skip", [role("hammer", FOO_BAR, HAMMER)], combined([FOO_BAR], HAMMER), as_rules(HAMMER)),
]


@pytest.mark.parametrize(("name", "others", "target", "want"), CASES, ids=[case[0] for case in CASES])
def test_union_of_the_selected_roles_rules(
    name: str,
    others: list[rules.ClusterRoleView],
    target: rules.ClusterRoleView,
    want: list[rules.PolicyRule],
) -> None:
    assert rules.aggregate(target, [*others, target]) == want


def test_no_diff_means_no_write() -> None:
    target = combined([FOO_BAR], HAMMER)
    assert rules.aggregate(target, [role("hammer", FOO_BAR, HAMMER), target]) == target.rules


def test_the_role_itself_is_left_out_even_when_it_matches() -> None:
    target = combined([{}], HAMMER)  # an empty selector selects every role, this one too
    assert rules.aggregate(target, [target, role("saw", {}, SAW)]) == as_rules(SAW)


def test_missing_and_empty_lists_are_the_same_rule() -> None:
    explicit = [{"verbs": ["get"], "resources": ["pods"], "apiGroups": [""], "resourceNames": []}]
    implicit = [{"verbs": ["get"], "resources": ["pods"], "apiGroups": [""]}]
    target = combined([FOO_BAR])
    union = rules.aggregate(target, [role("a", FOO_BAR, explicit), role("b", FOO_BAR, implicit), target])
    assert union == as_rules(implicit)


def test_a_bad_selector_is_an_error() -> None:
    target = msgspec.convert(
        {
            "metadata": {"name": "combined"},
            "aggregationRule": {
                "clusterRoleSelectors": [{"matchExpressions": [{"key": "a", "operator": "Bad"}]}]
            },
        },
        rules.ClusterRoleView,
    )
    with pytest.raises(selectors.SelectorError):
        rules.aggregate(target, [target])


def test_apply_body_names_the_role_and_omits_empty_rules() -> None:
    assert rules.apply_body("combined", []) == {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "combined"},
    }
    body = rules.apply_body("combined", as_rules([{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]))
    assert body["rules"] == [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]
