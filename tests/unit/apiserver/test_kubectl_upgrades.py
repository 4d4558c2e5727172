"""API server behaviours kubectl's workload commands depend on, as pure functions.

- `kubectl rollout undo` sends a JSON patch that replaces `/metadata/annotations` even when
  the deployment has none: upstream's json-patch library (v4) lets replace create a member.
- `kubectl apply --server-side` after `kubectl apply` takes over the fields client-side
  apply set (upstream's lastAppliedManager), but only for the `kubectl` manager and only
  fields whose live value still matches the last-applied configuration.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from kcm_apiserver.apply import LAST_APPLIED_ANNOTATION, ApplyConflict, track_update
from kcm_apiserver.patch import PatchError, json_patch

from tests.support.apply import DEPLOYMENT, T0, T1, apply, deployment, managers, owned

UNDO_PATCH = [
    {"op": "replace", "path": "/spec/template", "value": {"metadata": {"labels": {"app": "web"}}}},
    {"op": "replace", "path": "/metadata/annotations", "value": {"kubernetes.io/change-cause": "v1"}},
]


@pytest.mark.parametrize(
    ("doc", "expected_annotations"),
    [
        pytest.param(
            {"metadata": {}, "spec": {"template": {}}}, {"kubernetes.io/change-cause": "v1"}, id="absent"
        ),
        pytest.param(
            {"metadata": {"annotations": {"a": "b"}}, "spec": {"template": {}}},
            {"kubernetes.io/change-cause": "v1"},
            id="present",
        ),
    ],
)
def test_rollout_undo_patch_applies_with_or_without_annotations(
    doc: dict[str, Any], expected_annotations: dict[str, str]
) -> None:
    patched = json_patch(doc, UNDO_PATCH)
    assert patched["metadata"]["annotations"] == expected_annotations
    assert patched["spec"]["template"] == {"metadata": {"labels": {"app": "web"}}}


@pytest.mark.parametrize(
    ("doc", "ops", "message"),
    [
        pytest.param(
            {"a": 1}, [{"op": "replace", "path": "/b/c", "value": 2}], "missing path", id="missing parent"
        ),
        pytest.param(
            {"a": [1]}, [{"op": "replace", "path": "/a/1", "value": 2}], "out of bounds", id="past the end"
        ),
    ],
)
def test_replace_still_needs_the_parent_and_list_index(doc: Any, ops: Any, message: str) -> None:
    with pytest.raises(PatchError, match=message):
        json_patch(doc, ops)


def client_side_applied(**spec: Any) -> dict[str, Any]:
    """A deployment as `kubectl apply` leaves it: the annotation, fields owned by an Update."""
    obj = deployment(**spec)
    last = deployment(**spec)
    last["metadata"]["annotations"] = {}
    obj["metadata"]["annotations"] = {LAST_APPLIED_ANNOTATION: json.dumps(last)}
    track_update(None, obj, "kubectl-client-side-apply", DEPLOYMENT, "apps/v1", T0)
    return obj


def test_kubectl_server_side_apply_takes_over_client_side_fields() -> None:
    live = client_side_applied(replicas=3)
    result = apply(live, deployment(replicas=5), "kubectl", now=T1)
    assert result["spec"]["replicas"] == 5
    assert owned(result, "kubectl/Apply").has(("f:spec", "f:replicas"))
    assert not owned(result, "kubectl-client-side-apply/Update").has(("f:spec", "f:replicas"))


def test_other_managers_still_conflict_with_client_side_apply() -> None:
    live = client_side_applied(replicas=3)
    with pytest.raises(ApplyConflict) as caught:
        apply(live, deployment(replicas=5), "deployer")
    assert caught.value.conflicts == [('"kubectl-client-side-apply" using apps/v1', ".spec.replicas")]


def test_fields_changed_since_the_client_side_apply_still_conflict() -> None:
    live = client_side_applied(replicas=3)
    scaled = copy.deepcopy(live)
    scaled["spec"]["replicas"] = 7
    track_update(live, scaled, "hpa", DEPLOYMENT, "apps/v1", T1)
    paused = copy.deepcopy(scaled)
    paused["spec"]["paused"] = True  # not in last-applied: kubectl must not inherit it silently
    track_update(scaled, paused, "operator", DEPLOYMENT, "apps/v1", T1)
    with pytest.raises(ApplyConflict) as caught:
        apply(paused, deployment(replicas=5, paused=False), "kubectl")
    assert {path for _, path in caught.value.conflicts} == {".spec.replicas", ".spec.paused"}


def test_a_last_applied_of_another_version_gives_no_upgrade() -> None:
    live = client_side_applied(replicas=3)
    last = json.loads(live["metadata"]["annotations"][LAST_APPLIED_ANNOTATION])
    last["apiVersion"] = "apps/v1beta2"
    live["metadata"]["annotations"][LAST_APPLIED_ANNOTATION] = json.dumps(last)
    with pytest.raises(ApplyConflict):
        apply(live, deployment(replicas=5), "kubectl")
    assert "kubectl-client-side-apply/Update" in managers(live)
