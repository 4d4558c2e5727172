"""The validatingadmissionpolicy-status-controller end to end: `kcm dev --controllers
validatingadmissionpolicy-status-controller`, policies created and edited with kubectl.

A policy gets `status.observedGeneration` and `status.typeChecking` from the controller: none
for an expression that checks, upstream's text for a misspelt field of a Deployment; a spec
change bumps the generation and the status follows it; policies made or edited around a kill -9
of the controller's process all get their status once `kcm dev` has restarted it. Policies are
cluster-scoped: each test names its own.
"""

from __future__ import annotations

import json
import os
import signal
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


# The text upstream kube-controller-manager writes for this expression on kube-apiserver v1.32.
TYPO = "object.spec.replicaz > 1"
TYPO_WARNINGS = [
    {
        "fieldRef": "spec.validations[0].expression",
        "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicaz'\n"
        " | object.spec.replicaz > 1\n"
        " | ...........^\n",
    }
]


def test_a_misspelt_field_gets_upstreams_warning(stack: devstack.DevStack) -> None:
    stack.kubectl("create", "-f", "-", input=json.dumps(policy("typo", TYPO)))
    status = wait_for(lambda: observed(stack, "typo", 1), 60, 0.2, "observedGeneration 1")
    assert status["typeChecking"]["expressionWarnings"] == TYPO_WARNINGS


def create_mixed(stack: devstack.DevStack, prefix: str) -> dict[str, str]:
    """Four policies in one kubectl call, every other one misspelt; their expressions by name."""
    made = {f"{prefix}-{i}": "object.spec.replicas <= 5" if i % 2 else TYPO for i in range(4)}
    stack.kubectl("create", "-f", "-", input="\n".join(json.dumps(policy(n, e)) for n, e in made.items()))
    return made


def test_policies_waiting_while_the_controller_is_killed_all_get_their_status(
    stack: devstack.DevStack,
) -> None:
    """kill -9 of the controller's process right after a batch of policies was made (some
    queued, none or a few done), then more made and one edited while none runs: the restarted
    process gives every one its status for its latest generation, with the right warnings."""
    stack.kubectl("create", "-f", "-", input=json.dumps(policy("killed-edited", "object.spec.replicas <= 5")))
    wait_for(lambda: observed(stack, "killed-edited", 1), 60, 0.2, "observedGeneration 1")
    expected = create_mixed(stack, "killed-before")
    pids = stack.controller_pids("validatingadmissionpolicy-status-controller")
    assert pids
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    expected |= create_mixed(stack, "killed-after")
    patch = {"spec": {"validations": [{"expression": TYPO}]}}
    stack.kubectl(
        "patch", "validatingadmissionpolicy", "killed-edited", "--type=merge", "-p", json.dumps(patch)
    )
    for name, expression in expected.items():
        status = wait_for(lambda n=name: observed(stack, n, 1), 90, 0.2, f"{name}: observedGeneration 1")
        warnings = TYPO_WARNINGS if expression == TYPO else []
        assert status["typeChecking"].get("expressionWarnings", []) == warnings, name
    status = wait_for(
        lambda: observed(stack, "killed-edited", 2), 90, 0.2, "killed-edited: observedGeneration 2"
    )
    assert status["typeChecking"]["expressionWarnings"] == TYPO_WARNINGS
    assert not set(stack.controller_pids("validatingadmissionpolicy-status-controller")) & set(pids)
    stack.wait_healthy()
