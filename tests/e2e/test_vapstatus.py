"""The validatingadmissionpolicy-status-controller end to end: `kcm dev --controllers
validatingadmissionpolicy-status-controller`, policies created and edited with kubectl.

A policy gets `status.observedGeneration` and `status.typeChecking` from the controller: none
for an expression that checks, upstream's text for a misspelt field of a Deployment; a spec
change bumps the generation and the status follows it. Policies are cluster-scoped: each
test names its own.
"""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import wait_for
from tests.e2e import devstack

stack = devstack.stack_fixture("--controllers", "validatingadmissionpolicy-status-controller", "--nodes", "0")


def policy(name: str, expression: str) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["apps"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["deployments"],
                    }
                ]
            },
            "validations": [{"expression": expression}],
        },
    }


def read(stack: devstack.DevStack, name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(
        stack.kubectl("get", "validatingadmissionpolicy", name, "-o", "json").stdout
    )
    return found


def observed(stack: devstack.DevStack, name: str, generation: int) -> dict[str, Any] | None:
    status: dict[str, Any] = read(stack, name).get("status") or {}
    return status if status.get("observedGeneration") == generation else None


def test_a_good_policy_gets_its_generation_and_no_warning(stack: devstack.DevStack) -> None:
    stack.kubectl("create", "-f", "-", input=json.dumps(policy("good", "object.spec.replicas <= 5")))
    status = wait_for(lambda: observed(stack, "good", 1), 60, 0.2, "observedGeneration 1")
    assert status["typeChecking"].get("expressionWarnings", []) == []


def test_a_spec_change_bumps_observed_generation(stack: devstack.DevStack) -> None:
    stack.kubectl("create", "-f", "-", input=json.dumps(policy("edited", "object.spec.replicas <= 5")))
    wait_for(lambda: observed(stack, "edited", 1), 60, 0.2, "observedGeneration 1")
    patch = {"spec": {"validations": [{"expression": "object.spec.replicas <= 3"}]}}
    stack.kubectl("patch", "validatingadmissionpolicy", "edited", "--type=merge", "-p", json.dumps(patch))
    assert read(stack, "edited")["metadata"]["generation"] == 2
    status = wait_for(lambda: observed(stack, "edited", 2), 60, 0.2, "observedGeneration 2")
    assert status["typeChecking"].get("expressionWarnings", []) == []


def test_a_misspelt_field_gets_upstreams_warning(stack: devstack.DevStack) -> None:
    # The text upstream kube-controller-manager writes for this policy on kube-apiserver v1.32.
    stack.kubectl("create", "-f", "-", input=json.dumps(policy("typo", "object.spec.replicaz > 1")))
    status = wait_for(lambda: observed(stack, "typo", 1), 60, 0.2, "observedGeneration 1")
    assert status["typeChecking"]["expressionWarnings"] == [
        {
            "fieldRef": "spec.validations[0].expression",
            "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicaz'\n"
            " | object.spec.replicaz > 1\n"
            " | ...........^\n",
        }
    ]
