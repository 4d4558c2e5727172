"""Managed fields and server-side apply, as scenarios on a Deployment-like schema."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from kcm_apiserver.apply import (
    ApplyConflict,
    FieldSet,
    _raw_minus,
    _raw_plus,
    fields_of,
    path_string,
    track_update,
)
from kcm_apiserver.patch import PatchError

from tests.support.apply import CONTAINER, DEPLOYMENT, T0, T1, T2, apply, deployment, managers, owned


def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = obj["spec"]["template"]["spec"]["containers"]
    return result


# --- FieldSet and the FieldsV1 form ------------------------------------------------------------

# As `kubectl get -o yaml` shows them for an applied Deployment and a controller's status writes.
UPSTREAM_FIELDS_V1: list[dict[str, Any]] = [
    {
        "f:metadata": {"f:labels": {"f:app": {}}},
        "f:spec": {
            "f:replicas": {},
            "f:template": {
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {
                    "f:containers": {
                        'k:{"name":"nginx"}': {
                            ".": {},
                            "f:image": {},
                            "f:name": {},
                            "f:ports": {
                                'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}
                            },
                        }
                    }
                },
            },
        },
    },
    {
        "f:metadata": {"f:annotations": {".": {}, "f:deployment.kubernetes.io/revision": {}}},
        "f:status": {
            "f:conditions": {
                ".": {},
                'k:{"type":"Available"}': {".": {}, "f:status": {}, "f:type": {}},
            },
            "f:replicas": {},
        },
    },
    {"f:metadata": {"f:finalizers": {".": {}, 'v:"example.com/cleanup"': {}}}},
]


@pytest.mark.parametrize("fields_v1", UPSTREAM_FIELDS_V1)
def test_fields_v1_round_trips(fields_v1: dict[str, Any]) -> None:
    assert FieldSet.from_fields_v1(fields_v1).to_fields_v1() == fields_v1


def test_fields_of_an_applied_deployment_matches_upstream_fields_v1() -> None:
    applied = deployment(replicas=3)
    del applied["spec"]["selector"]
    applied["metadata"] = {"labels": {"app": "web"}}
    assert fields_of(applied, DEPLOYMENT).difference(_top_level()).to_fields_v1() == UPSTREAM_FIELDS_V1[0]


def _top_level() -> FieldSet:
    return FieldSet.from_fields_v1({"f:apiVersion": {}, "f:kind": {}})


@pytest.mark.parametrize(
    ("value", "info", "expected"),
    [
        pytest.param(
            {"a": 1, "b": {"c": None}}, None, {"f:a": {}, "f:b": {".": {}, "f:c": {}}}, id="untyped map"
        ),
        pytest.param({"args": ["a", "b"]}, CONTAINER, {"f:args": {}}, id="atomic list is one leaf"),
        pytest.param({"resources": {}}, CONTAINER, {"f:resources": {}}, id="empty struct is a leaf"),
        pytest.param(
            {"metadata": {"finalizers": ["x"]}},
            DEPLOYMENT,
            {"f:metadata": {"f:finalizers": {'v:"x"': {}}}},
            id="set items by value",
        ),
        pytest.param(
            {"spec": {"unknown": {"a": 1}}},
            DEPLOYMENT,
            {"f:spec": {"f:unknown": {".": {}, "f:a": {}}}},
            id="undeclared field",
        ),
    ],
)
def test_fields_of_counts_leaves_items_and_map_entries(
    value: Any, info: Any, expected: dict[str, Any]
) -> None:
    assert fields_of(value, info).to_fields_v1() == expected


A: dict[str, Any] = {"f:spec": {"f:replicas": {}, "f:paused": {}}}
B: dict[str, Any] = {"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {}}}, "f:status": {}}


@pytest.mark.parametrize(
    ("op", "expected"),
    [
        (
            "union",
            {"f:spec": {"f:paused": {}, "f:replicas": {}, "f:template": {"f:spec": {}}}, "f:status": {}},
        ),
        ("difference", {"f:spec": {"f:paused": {}}}),
        ("intersection", {"f:spec": {"f:replicas": {}}}),
    ],
)
def test_field_set_operations(op: str, expected: dict[str, Any]) -> None:
    a, b = FieldSet.from_fields_v1(A), FieldSet.from_fields_v1(B)
    assert getattr(a, op)(b).to_fields_v1() == expected


def _random_fields(rng: random.Random, depth: int = 0) -> FieldSet:
    out = FieldSet()
    for pe in rng.sample(
        ["f:a", "f:b", "f:spec", 'k:{"name":"c"}', 'v:"x"', "i:0", "i:1"], rng.randint(0, 4)
    ):
        if rng.random() < 0.6:
            out.members.add(pe)
        if depth < 3 and rng.random() < 0.5:
            below = _random_fields(rng, depth + 1)
            if not below.empty():
                out.children[pe] = below
    return out


@pytest.mark.parametrize("seed", range(300))
def test_fields_v1_edited_in_place_match_the_set_operations(seed: int) -> None:
    """The raw FieldsV1 edits the update path uses give what parsing, the set operation and
    encoding give: the same members, in upstream's order, the input left unchanged."""
    rng = random.Random(seed)
    mine, theirs = _random_fields(rng), _random_fields(rng)
    raw = mine.to_fields_v1()
    before = copy.deepcopy(raw)
    minus, plus = _raw_minus(raw, theirs), _raw_plus(raw, theirs)
    assert raw == before
    expected_minus = mine.difference(theirs).to_fields_v1()
    expected_plus = mine.union(theirs).to_fields_v1()
    assert minus == expected_minus
    assert plus == expected_plus
    assert repr(list(_walk_keys(plus))) == repr(list(_walk_keys(expected_plus)))


def _walk_keys(raw: dict[str, Any]) -> Any:
    for pe, below in raw.items():
        yield pe
        yield from _walk_keys(below)


def test_field_set_membership_and_paths() -> None:
    fields = FieldSet.from_fields_v1(UPSTREAM_FIELDS_V1[0])
    nginx = ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"nginx"}')
    assert fields.has(nginx)
    assert fields.has((*nginx, "f:image"))
    assert not fields.has(("f:spec", "f:template"))
    assert [path_string(p) for p in fields.paths()][:3] == [
        ".metadata.labels.app",
        ".spec.replicas",
        ".spec.template.metadata.labels.app",
    ]
    assert path_string((*nginx, "f:ports", 'k:{"containerPort":80,"protocol":"TCP"}')) == (
        '.spec.template.spec.containers[name="nginx"].ports[containerPort=80,protocol="TCP"]'
    )


def test_malformed_fields_v1_is_rejected() -> None:
    with pytest.raises(ValueError, match="path element"):
        FieldSet.from_fields_v1({"spec": {}})


# --- Server-side apply -------------------------------------------------------------------------


def test_apply_creates_the_object_and_records_the_applier() -> None:
    created = apply(None, deployment(replicas=3), "kubectl")
    assert created["spec"]["replicas"] == 3
    assert containers(created) == [{"name": "nginx", "image": "nginx:1", "ports": [{"containerPort": 80}]}]
    [entry] = created["metadata"]["managedFields"]
    assert {k: v for k, v in entry.items() if k != "fieldsV1"} == {
        "manager": "kubectl",
        "operation": "Apply",
        "apiVersion": "apps/v1",
        "time": T0,
        "fieldsType": "FieldsV1",
    }
    assert entry["fieldsV1"]["f:spec"]["f:template"] == UPSTREAM_FIELDS_V1[0]["f:spec"]["f:template"]
    assert "f:name" not in entry["fieldsV1"]["f:metadata"]


def test_apply_does_not_mutate_its_inputs() -> None:
    live = apply(None, deployment(replicas=3), "kubectl")
    applied = deployment(replicas=4)
    live_before, applied_before = copy.deepcopy(live), copy.deepcopy(applied)
    result = apply(live, applied, "kubectl")
    containers(result)[0]["image"] = "mutated"
    assert live == live_before
    assert applied == applied_before


def test_reapply_without_a_field_removes_it() -> None:
    live = apply(None, deployment(replicas=3, paused=True), "kubectl")
    live = apply(live, deployment(replicas=3), "kubectl", now=T1)
    assert "paused" not in live["spec"]
    assert live["spec"]["replicas"] == 3
    assert not owned(live, "kubectl/Apply").has(("f:spec", "f:paused"))


def test_reapply_without_a_container_removes_it() -> None:
    two = deployment()
    containers(two).append({"name": "sidecar", "image": "proxy:1"})
    live = apply(None, two, "kubectl")
    live = apply(live, deployment(), "kubectl", now=T1)
    assert [c["name"] for c in containers(live)] == ["nginx"]


def test_reapply_keeps_a_dropped_field_another_manager_also_owns() -> None:
    live = apply(None, deployment(replicas=3), "alice")
    live = apply(live, deployment(replicas=3), "bob")
    live = apply(live, {**deployment(), "spec": {"paused": True}}, "alice", now=T1)
    assert live["spec"]["replicas"] == 3
    assert owned(live, "bob/Apply").has(("f:spec", "f:replicas"))


def test_reapply_keeps_fields_nobody_applied() -> None:
    live = apply(None, deployment(replicas=3), "kubectl")
    live["spec"]["strategy"] = {"type": "RollingUpdate"}  # defaulted by the server, owned by nobody
    live = apply(live, deployment(replicas=2), "kubectl", now=T1)
    assert live["spec"]["strategy"] == {"type": "RollingUpdate"}


def test_two_appliers_conflict_on_the_same_field() -> None:
    live = apply(None, deployment(replicas=3), "alice")
    with pytest.raises(ApplyConflict) as caught:
        apply(live, deployment(replicas=5), "bob")
    assert caught.value.conflicts == [('"alice"', ".spec.replicas")]
    assert caught.value.message == 'Apply failed with 1 conflict: conflict with "alice": .spec.replicas'


def test_appliers_setting_the_same_value_share_ownership() -> None:
    live = apply(None, deployment(replicas=3), "alice")
    live = apply(live, deployment(replicas=3), "bob", now=T1)
    assert owned(live, "alice/Apply").has(("f:spec", "f:replicas"))
    assert owned(live, "bob/Apply").has(("f:spec", "f:replicas"))


def test_force_takes_ownership_from_the_other_applier() -> None:
    live = apply(None, deployment(replicas=3), "alice")
    live = apply(live, deployment(replicas=5), "bob", force=True, now=T1)
    assert live["spec"]["replicas"] == 5
    assert not owned(live, "alice/Apply").has(("f:spec", "f:replicas"))
    assert owned(live, "bob/Apply").has(("f:spec", "f:replicas"))


def test_update_by_another_manager_then_apply_conflicts() -> None:
    created = deployment(replicas=1)
    track_update(None, created, "kubectl-client-side-apply", DEPLOYMENT, "apps/v1", T0)
    with pytest.raises(ApplyConflict) as caught:
        apply(
            created,
            {**deployment(replicas=2), "metadata": {"name": "web", "labels": {"app": "web", "tier": "fe"}}},
            "kubectl",
        )
    conflict = caught.value
    assert conflict.conflicts == [('"kubectl-client-side-apply" using apps/v1', ".spec.replicas")]
    assert conflict.message == (
        'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using apps/v1: .spec.replicas'
    )
    error = conflict.api_error()
    assert (error.code, error.reason) == (409, "Conflict")
    assert error.details == {
        "causes": [
            {
                "reason": "FieldManagerConflict",
                "message": 'conflict with "kubectl-client-side-apply" using apps/v1',
                "field": ".spec.replicas",
            }
        ]
    }


def test_conflicts_with_several_managers_are_grouped_by_manager() -> None:
    live = apply(None, deployment(replicas=3, paused=False), "alice")
    live = apply(
        live, {**deployment(), "metadata": {"name": "web", "labels": {"app": "web", "tier": "fe"}}}, "bob"
    )
    changed = deployment(replicas=4, paused=True)
    changed["metadata"]["labels"]["tier"] = "be"
    with pytest.raises(ApplyConflict) as caught:
        apply(live, changed, "carol")
    assert caught.value.message == (
        'Apply failed with 3 conflicts: conflicts with "alice":\n- .spec.paused\n- .spec.replicas\n'
        'conflicts with "bob":\n- .metadata.labels.tier'
    )


def test_apply_merges_containers_by_name_and_keeps_other_managers_items() -> None:
    live = apply(None, deployment(), "kubectl")
    with_sidecar = copy.deepcopy(live)
    containers(with_sidecar).append({"name": "sidecar", "image": "proxy:1"})
    track_update(live, with_sidecar, "injector", DEPLOYMENT, "apps/v1", T1)
    updated = deployment()
    containers(updated)[0]["image"] = "nginx:2"
    containers(updated)[0]["ports"] = [{"containerPort": 80, "protocol": "TCP", "name": "http"}]
    result = apply(with_sidecar, updated, "kubectl", now=T2)
    assert containers(result) == [
        {
            "name": "nginx",
            "image": "nginx:2",
            "ports": [{"containerPort": 80, "protocol": "TCP", "name": "http"}],
        },
        {"name": "sidecar", "image": "proxy:1"},
    ]
    assert owned(result, "injector/Update").has(
        ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"sidecar"}')
    )


def test_apply_puts_new_items_after_the_shared_ones_in_configured_order() -> None:
    live = deployment()
    containers(live)[:] = [{"name": "a"}, {"name": "x"}, {"name": "b"}]
    applied = deployment()
    containers(applied)[:] = [{"name": "b"}, {"name": "a"}, {"name": "c"}]
    result = apply(live, applied, "kubectl")
    assert [c["name"] for c in containers(result)] == ["x", "b", "a", "c"]


def test_apply_replaces_atomic_lists() -> None:
    live = deployment()
    live["spec"]["template"]["spec"]["tolerations"] = [{"key": "a"}, {"key": "b"}]
    applied = deployment()
    applied["spec"]["template"]["spec"]["tolerations"] = [{"key": "c"}]
    assert apply(live, applied, "kubectl")["spec"]["template"]["spec"]["tolerations"] == [{"key": "c"}]


def test_apply_unions_set_lists() -> None:
    live = deployment()
    live["metadata"]["finalizers"] = ["a", "b"]
    applied = deployment()
    applied["metadata"]["finalizers"] = ["c", "a"]
    assert apply(live, applied, "kubectl")["metadata"]["finalizers"] == ["c", "a", "b"]


def test_noop_apply_keeps_the_timestamp() -> None:
    live = apply(None, deployment(replicas=3), "kubectl")
    again = apply(live, deployment(replicas=3), "kubectl", now=T1)
    assert managers(again)["kubectl/Apply"]["time"] == T0
    assert again == live


@pytest.mark.parametrize(
    ("applied", "message"),
    [
        pytest.param(
            {**deployment(), "metadata": {"name": "web", "managedFields": []}},
            "managedFields must be nil",
            id="managedFields",
        ),
        pytest.param(
            {"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}},
            'omits key field "name"',
            id="item without its key",
        ),
        pytest.param(
            {"spec": {"template": {"spec": {"containers": [{"name": "a"}, {"name": "a"}]}}}},
            "duplicate entries",
            id="duplicate items",
        ),
    ],
)
def test_apply_rejects_invalid_configurations(applied: dict[str, Any], message: str) -> None:
    with pytest.raises(PatchError, match=message):
        apply(deployment(), applied, "kubectl")


# --- Tracking updates --------------------------------------------------------------------------


def test_create_gives_the_creator_every_field_but_server_metadata() -> None:
    obj = deployment(replicas=1)
    obj["metadata"].update(uid="u1", resourceVersion="1", creationTimestamp=T0, generation=1)
    track_update(None, obj, "kubectl-create", DEPLOYMENT, "apps/v1", T0)
    [entry] = obj["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"], entry["time"]) == ("kubectl-create", "Update", T0)
    assert entry["fieldsV1"]["f:metadata"] == {"f:labels": {".": {}, "f:app": {}}}
    assert entry["fieldsV1"]["f:spec"]["f:replicas"] == {}


def test_update_moves_changed_fields_to_the_updater() -> None:
    old = deployment(replicas=1, paused=False)
    track_update(None, old, "creator", DEPLOYMENT, "apps/v1", T0)
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 2
    track_update(old, new, "scaler", DEPLOYMENT, "apps/v1", T1)
    assert managers(new)["scaler/Update"]["fieldsV1"] == {"f:spec": {"f:replicas": {}}}
    assert managers(new)["scaler/Update"]["time"] == T1
    assert not owned(new, "creator/Update").has(("f:spec", "f:replicas"))
    assert owned(new, "creator/Update").has(("f:spec", "f:paused"))


def test_update_drops_managers_left_with_nothing() -> None:
    old = deployment(replicas=1)
    track_update(None, old, "creator", DEPLOYMENT, "apps/v1", T0)
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 2
    track_update(old, new, "scaler", DEPLOYMENT, "apps/v1", T1)
    newer = copy.deepcopy(new)
    newer["spec"]["replicas"] = 3
    track_update(new, newer, "creator", DEPLOYMENT, "apps/v1", T2)
    assert set(managers(newer)) == {"creator/Update"}


def test_removed_fields_leave_every_manager() -> None:
    old = deployment(replicas=1, paused=True)
    track_update(None, old, "creator", DEPLOYMENT, "apps/v1", T0)
    new = copy.deepcopy(old)
    del new["spec"]["paused"]
    track_update(old, new, "editor", DEPLOYMENT, "apps/v1", T1)
    assert not owned(new, "creator/Update").has(("f:spec", "f:paused"))
    assert "editor/Update" not in managers(new)


def test_unchanged_update_keeps_entries_and_times() -> None:
    old = deployment(replicas=1)
    track_update(None, old, "creator", DEPLOYMENT, "apps/v1", T0)
    new = copy.deepcopy(old)
    new["metadata"]["resourceVersion"] = "2"
    track_update(old, new, "other", DEPLOYMENT, "apps/v1", T1)
    assert new["metadata"]["managedFields"] == old["metadata"]["managedFields"]


def test_status_writes_own_new_list_items_and_the_list() -> None:
    old = deployment()
    track_update(None, old, "creator", DEPLOYMENT, "apps/v1", T0)
    new = copy.deepcopy(old)
    new["status"] = {"replicas": 1, "conditions": [{"type": "Available", "status": "True"}]}
    track_update(old, new, "kube-controller-manager", DEPLOYMENT, "apps/v1", T1, subresource="status")
    entry = managers(new)["kube-controller-manager/Update"]
    assert entry["subresource"] == "status"
    assert entry["fieldsV1"] == {
        "f:status": {
            "f:conditions": {".": {}, 'k:{"type":"Available"}': {".": {}, "f:status": {}, "f:type": {}}},
            "f:replicas": {},
        }
    }


def test_resetting_managed_fields_stops_tracking() -> None:
    old = deployment(replicas=1)
    track_update(None, old, "creator", DEPLOYMENT, "apps/v1", T0)
    new = copy.deepcopy(old)
    new["metadata"]["managedFields"] = []
    new["spec"]["replicas"] = 2
    track_update(old, new, "editor", DEPLOYMENT, "apps/v1", T1)
    assert "managedFields" not in new["metadata"]


def test_client_supplied_managed_fields_replace_the_live_ones() -> None:
    old = deployment(replicas=1)
    track_update(None, old, "creator", DEPLOYMENT, "apps/v1", T0)
    new = copy.deepcopy(old)
    mine = {"manager": "me", "operation": "Apply", "apiVersion": "apps/v1", "fieldsType": "FieldsV1"}
    new["metadata"]["managedFields"] = [{**mine, "fieldsV1": {"f:spec": {"f:replicas": {}}}}]
    track_update(old, new, "editor", DEPLOYMENT, "apps/v1", T1)
    assert new["metadata"]["managedFields"] == [{**mine, "fieldsV1": {"f:spec": {"f:replicas": {}}}}]


def test_apply_after_update_conflicts_only_on_changed_values() -> None:
    created = deployment(replicas=1)
    track_update(None, created, "kubectl-create", DEPLOYMENT, "apps/v1", T0)
    result = apply(created, deployment(replicas=1), "kubectl", now=T1)
    assert owned(result, "kubectl-create/Update").has(("f:spec", "f:replicas"))
    assert owned(result, "kubectl/Apply").has(("f:spec", "f:replicas"))


def test_undecodable_client_managed_fields_fall_back_to_the_live_ones() -> None:
    old = deployment(replicas=1)
    track_update(None, old, "creator", DEPLOYMENT, "apps/v1", T0)
    new = copy.deepcopy(old)
    new["metadata"]["managedFields"] = [{"manager": "me", "operation": "Destroy"}]
    track_update(old, new, "editor", DEPLOYMENT, "apps/v1", T1)
    assert new["metadata"]["managedFields"] == old["metadata"]["managedFields"]
    assert new["metadata"]["managedFields"] is not old["metadata"]["managedFields"]


def test_undecodable_live_managed_fields_are_dropped_on_update() -> None:
    old = deployment(replicas=1)
    old["metadata"]["managedFields"] = [
        {
            "manager": "x",
            "operation": "Patch",
            "apiVersion": "apps/v1",
            "fieldsV1": {"f:spec": {"f:replicas": {}}},
        }
    ]
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 2
    track_update(old, new, "editor", DEPLOYMENT, "apps/v1", T1)
    assert "managedFields" not in new["metadata"]


def test_malformed_live_fields_v1_is_dropped_on_update() -> None:
    old = deployment(replicas=1)
    old["metadata"]["managedFields"] = [
        {
            "manager": "x",
            "operation": "Update",
            "apiVersion": "apps/v1",
            "fieldsV1": {"f:spec": {"f:replicas": "x"}},
        }
    ]
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 2
    track_update(old, new, "editor", DEPLOYMENT, "apps/v1", T1)
    assert "managedFields" not in new["metadata"]


def test_apply_leaves_untouched_managers_entries_as_they_were() -> None:
    created = deployment(replicas=1)
    track_update(None, created, "kubectl-create", DEPLOYMENT, "apps/v1", T0)
    annotated = copy.deepcopy(created)
    annotated["metadata"]["annotations"] = {"note": "x"}
    track_update(created, annotated, "annotator", DEPLOYMENT, "apps/v1", T1)
    result = apply(annotated, {**deployment(replicas=1), "spec": {"paused": True}}, "kubectl", now=T2)
    assert managers(result)["annotator/Update"] == managers(annotated)["annotator/Update"]
    assert managers(result)["kubectl-create/Update"] == managers(annotated)["kubectl-create/Update"]
    assert result["spec"]["paused"] is True
