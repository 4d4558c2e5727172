"""ValidatingAdmissionPolicy and its binding on the embedded API server: stored and served (not
enforced), with kube-apiserver's generation rule (1 on create, +1 on a spec change) and a
status subresource that alone writes status (what the validatingadmissionpolicy-status
controller writes)."""

from __future__ import annotations

from typing import Any

import pytest
from kcm_apiserver import errors
from kcm_apiserver.operations import Api, Ctx
from kcm_apiserver.registry import Registry
from kcm_apiserver.store import Store

GROUP = "admissionregistration.k8s.io"


def ctx(api: Api, resource: str) -> Ctx:
    rt = api.registry.lookup(GROUP, "v1", resource)
    assert rt is not None
    return Ctx(rt)


def policy() -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "demo"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["apps"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["deployments"],
                    }
                ]
            },
            "validations": [{"expression": "object.spec.replicas <= 5"}],
        },
    }


def test_policy_generation_and_status_subresource() -> None:
    api = Api(Store(), Registry())
    c = ctx(api, "validatingadmissionpolicies")
    assert api.create(c, policy())["metadata"]["generation"] == 1
    status = {"observedGeneration": 1, "typeChecking": {"expressionWarnings": []}}
    written, _ = api.patch(c, "demo", "merge", {"status": status}, subresource="status")
    assert written["status"]["observedGeneration"] == 1
    assert written["metadata"]["generation"] == 1
    changed, _ = api.patch(
        c, "demo", "merge", {"spec": {"failurePolicy": "Ignore"}, "status": {"observedGeneration": 7}}
    )
    assert changed["metadata"]["generation"] == 2
    assert changed["status"]["observedGeneration"] == 1  # the main resource writes no status


def test_an_apply_to_the_status_subresource_writes_status_only() -> None:
    # The status controller's write: a forced server-side apply of status (upstream's ApplyStatus).
    api = Api(Store(), Registry())
    c = ctx(api, "validatingadmissionpolicies")
    api.create(c, policy())
    applied = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "demo"},
        "spec": {"failurePolicy": "Ignore"},
        "status": {"observedGeneration": 1, "typeChecking": {}},
    }
    c.field_manager = "validatingadmissionpolicy-status"
    written, created = api.patch(c, "demo", "apply", applied, subresource="status", force=True)
    assert not created
    assert written["status"] == {"observedGeneration": 1, "typeChecking": {}}
    assert written["spec"]["failurePolicy"] == "Fail"  # the status subresource writes no spec
    assert written["metadata"]["generation"] == 1
    (entry,) = [m for m in written["metadata"]["managedFields"] if m["operation"] == "Apply"]
    assert entry["subresource"] == "status"


def test_an_apply_to_the_status_of_a_missing_policy_is_not_found() -> None:
    api = Api(Store(), Registry())
    c = ctx(api, "validatingadmissionpolicies")
    body = {"apiVersion": f"{GROUP}/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "x"}}
    with pytest.raises(errors.ApiError) as err:
        api.patch(c, "x", "apply", body, subresource="status", force=True)
    assert err.value.code == 404
    with pytest.raises(errors.ApiError):
        api.get(c, "x")


def test_binding_is_served_with_a_generation() -> None:
    api = Api(Store(), Registry())
    binding = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "demo-binding"},
        "spec": {"policyName": "demo", "validationActions": ["Deny"]},
    }
    c = ctx(api, "validatingadmissionpolicybindings")
    assert api.create(c, binding)["metadata"]["generation"] == 1
    updated, _ = api.patch(c, "demo-binding", "merge", {"spec": {"validationActions": ["Warn"]}})
    assert updated["metadata"]["generation"] == 2
