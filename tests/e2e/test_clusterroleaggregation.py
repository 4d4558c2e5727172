"""The ClusterRole aggregation controller end to end, over the bootstrap roles the embedded
API server seeds: `kcm dev --controllers clusterrole-aggregation`, driven with kubectl.

`view`, `edit` and `admin` read as on a real cluster (view = aggregate-to-view's rules;
edit = aggregate-to-edit's then view's; admin = edit's then aggregate-to-admin's, written by
server-side apply); a custom role labelled aggregate-to-view shows up in all three and
leaves them when the label goes; a custom aggregated role follows its parts' rule edits and
deletions; a role labelled while the controller's process is killed (-9) is aggregated once
`kcm dev` restarted it.
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any

from kcm_controllers.clusterroleaggregation import controller as clusterroleaggregation

from tests.conftest import wait_for
from tests.e2e import devstack

stack = devstack.stack_fixture("--controllers", "clusterrole-aggregation", "--nodes", "0")
TO_VIEW = "rbac.authorization.k8s.io/aggregate-to-view"


def role(stack: devstack.DevStack, name: str) -> dict[str, Any] | None:
    res = stack.kubectl("get", "clusterrole", name, "-o", "json", "--ignore-not-found")
    return json.loads(res.stdout) if res.stdout.strip() else None


def rules_of(stack: devstack.DevStack, name: str) -> list[dict[str, Any]]:
    found = role(stack, name)
    assert found is not None, name
    rules: list[dict[str, Any]] = found.get("rules") or []
    return rules


def union(*lists: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for rule in (rule for rules in lists for rule in rules):
        if rule not in out:
            out.append(rule)
    return out


def create(stack: devstack.DevStack, manifest: dict[str, Any]) -> None:
    stack.kubectl("create", "-f", "-", input=json.dumps(manifest))


def custom_role(name: str, labels: dict[str, str], resource: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": labels},
        "rules": [{"apiGroups": ["example.com"], "resources": [resource], "verbs": ["get", "list"]}],
    }


def test_bootstrap_roles_read_as_on_a_real_cluster(stack: devstack.DevStack) -> None:
    to_view = rules_of(stack, "system:aggregate-to-view")
    to_edit = rules_of(stack, "system:aggregate-to-edit")
    to_admin = rules_of(stack, "system:aggregate-to-admin")
    wait_for(lambda: rules_of(stack, "view") == to_view, 30, 0.2, "view aggregated")
    wait_for(lambda: rules_of(stack, "edit") == union(to_edit, to_view), 30, 0.2, "edit aggregated")
    wait_for(
        lambda: rules_of(stack, "admin") == union(to_edit, to_view, to_admin), 30, 0.2, "admin aggregated"
    )
    view = role(stack, "view")
    assert view is not None
    assert view["metadata"]["labels"] == {
        "kubernetes.io/bootstrapping": "rbac-defaults",
        "rbac.authorization.k8s.io/aggregate-to-edit": "true",
    }
    assert view["metadata"]["annotations"] == {"rbac.authorization.kubernetes.io/autoupdate": "true"}
    shown = json.loads(
        stack.kubectl("get", "clusterrole", "view", "-o", "json", "--show-managed-fields").stdout
    )
    managers = {(m["manager"], m["operation"]) for m in shown["metadata"]["managedFields"]}
    assert (clusterroleaggregation.FIELD_MANAGER, "Apply") in managers


def test_a_labelled_role_joins_view_edit_and_admin_and_leaves_them(stack: devstack.DevStack) -> None:
    create(stack, custom_role("widgets-reader", {}, "widgets"))
    rule = rules_of(stack, "widgets-reader")[0]
    stack.kubectl("label", "clusterrole", "widgets-reader", f"{TO_VIEW}=true")
    for name in ("view", "edit", "admin"):
        wait_for(lambda name=name: rule in rules_of(stack, name), 30, 0.2, f"{name} has the widgets rule")
    stack.kubectl("label", "clusterrole", "widgets-reader", f"{TO_VIEW}-")
    for name in ("view", "edit", "admin"):
        wait_for(
            lambda name=name: rule not in rules_of(stack, name), 30, 0.2, f"{name} lost the widgets rule"
        )


def test_an_aggregated_role_follows_edits_and_deletions(stack: devstack.DevStack) -> None:
    create(
        stack,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "team-a"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"team": "a"}}]},
        },
    )
    create(stack, custom_role("team-a-2", {"team": "a"}, "gadgets"))
    create(stack, custom_role("team-a-1", {"team": "a"}, "widgets"))
    first, second = rules_of(stack, "team-a-1"), rules_of(stack, "team-a-2")
    wait_for(lambda: rules_of(stack, "team-a") == first + second, 30, 0.2, "union in name order")

    edited = [{"apiGroups": ["example.com"], "resources": ["gadgets"], "verbs": ["delete"]}]
    stack.kubectl("patch", "clusterrole", "team-a-2", "--type=merge", "-p", json.dumps({"rules": edited}))
    wait_for(lambda: rules_of(stack, "team-a") == first + edited, 30, 0.2, "an edited part followed")
    stack.kubectl("delete", "clusterrole", "team-a-1")
    wait_for(lambda: rules_of(stack, "team-a") == edited, 30, 0.2, "a deleted part left")
    stack.kubectl("delete", "clusterrole", "team-a-2")
    wait_for(lambda: rules_of(stack, "team-a") == [], 30, 0.2, "no parts, no rules")


def test_a_role_labelled_while_the_controller_is_killed_is_aggregated(stack: devstack.DevStack) -> None:
    pids = stack.controller_pids("clusterrole-aggregation")
    assert pids
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    create(stack, custom_role("sprockets-reader", {TO_VIEW: "true"}, "sprockets"))
    rule = rules_of(stack, "sprockets-reader")[0]
    for name in ("view", "edit", "admin"):
        wait_for(lambda name=name: rule in rules_of(stack, name), 90, 0.3, f"{name} has the sprockets rule")
    assert not set(stack.controller_pids("clusterrole-aggregation")) & set(pids)
