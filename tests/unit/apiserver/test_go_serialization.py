"""What kube-apiserver writes that a client did not: Go's zero values of required fields, the
generation only on kinds whose strategy keeps one, a Secret's `stringData` folded into `data`, a
Job's generated labels and `manualSelector`, a pod's priority and default tolerations, a
LimitRange's defaults, and Status bodies in Go's field order. tests/e2e/test_apiserver_parity.py
compares the same against kube-apiserver itself."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kcm_apiserver import errors
from kcm_apiserver.operations import Api, Ctx
from kcm_apiserver.registry import Registry
from kcm_apiserver.schemas import zerovalues
from kcm_apiserver.store import Store

POD_SPEC = {"containers": [{"name": "c", "image": "nginx:1"}]}
TEMPLATE = {"metadata": {"labels": {"app": "a"}}, "spec": POD_SPEC}


def ctx(api: Api, group: str, resource: str, version: str = "v1") -> Ctx:
    rt = api.registry.lookup(group, version, resource)
    assert rt is not None
    return Ctx(rt, namespace="ns" if rt.namespaced else "")


@pytest.fixture
def api() -> Api:
    made = Api(Store(), Registry())
    made.create(
        ctx(made, "", "namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}
    )
    return made


def workload(kind: str, **spec: Any) -> dict[str, Any]:
    body = {"selector": {"matchLabels": {"app": "a"}}, "template": TEMPLATE, **spec}
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": "w"}, "spec": body}


@pytest.mark.parametrize(
    ("resource", "kind", "status"),
    [
        (
            "daemonsets",
            "DaemonSet",
            {
                "currentNumberScheduled": 0,
                "numberMisscheduled": 0,
                "desiredNumberScheduled": 0,
                "numberReady": 0,
            },
        ),
        ("replicasets", "ReplicaSet", {"replicas": 0}),
        ("statefulsets", "StatefulSet", {"replicas": 0, "availableReplicas": 0}),
        ("deployments", "Deployment", {}),
    ],
)
def test_a_new_workload_has_the_status_ints_go_always_writes(
    api: Api, resource: str, kind: str, status: dict[str, int]
) -> None:
    assert api.create(ctx(api, "apps", resource), workload(kind))["status"] == status


def test_a_status_write_leaving_out_zeros_is_a_no_op(api: Api) -> None:
    created = api.create(ctx(api, "apps", "daemonsets"), workload("DaemonSet"))
    written = api.update(ctx(api, "apps", "daemonsets"), "w", {**created, "status": {}}, "status")
    assert written["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert written["status"]["numberReady"] == 0


def test_zeros_are_filled_at_every_depth_but_times_and_structs_are_not() -> None:
    pod: dict[str, Any] = {"status": {"containerStatuses": [{"name": "c", "state": {"running": {}}}]}}
    zerovalues.fill("V1Pod", pod)
    assert pod["status"]["containerStatuses"][0] == {
        "name": "c",
        "state": {"running": {}},  # startedAt: a zero time is null in Go, so it stays absent
        "image": "",
        "imageID": "",
        "ready": False,
        "restartCount": 0,
    }


@pytest.mark.parametrize(
    ("group", "resource", "body", "generation"),
    [
        ("", "pods", {"kind": "Pod", "spec": POD_SPEC}, None),
        ("", "services", {"kind": "Service", "spec": {"ports": [{"port": 80}]}}, None),
        ("apps", "replicasets", workload("ReplicaSet"), 1),
        ("policy", "poddisruptionbudgets", {"kind": "PodDisruptionBudget", "spec": {"minAvailable": 1}}, 1),
    ],
)
def test_only_kinds_whose_strategy_keeps_a_generation_have_one(
    api: Api, group: str, resource: str, body: dict[str, Any], generation: int | None
) -> None:
    body = {"metadata": {"name": "w"}, **body}
    assert api.create(ctx(api, group, resource), body)["metadata"].get("generation") == generation


def test_secret_string_data_is_folded_into_data_and_never_stored(api: Api) -> None:
    body = {
        "kind": "Secret",
        "metadata": {"name": "s"},
        "data": {"a": "eA==", "b": "eA=="},
        "stringData": {"b": "v"},
    }
    secret = api.create(ctx(api, "", "secrets"), body)
    assert (secret["data"], "stringData" in secret) == ({"a": "eA==", "b": "dg=="}, False)


def test_a_job_without_labels_takes_its_generated_pod_labels(api: Api) -> None:
    body = {
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"template": {"spec": {**POD_SPEC, "restartPolicy": "Never"}}},
    }
    job = api.create(ctx(api, "batch", "jobs"), body)
    uid = job["metadata"]["uid"]
    assert job["metadata"]["labels"] == job["spec"]["template"]["metadata"]["labels"]
    assert job["metadata"]["labels"]["controller-uid"] == uid
    assert job["spec"]["manualSelector"] is False


@pytest.mark.parametrize(("class_name", "priority"), [(None, 0), ("system-node-critical", 2000001000)])
def test_a_new_pod_gets_its_priority_and_preemption_policy(
    api: Api, class_name: str | None, priority: int
) -> None:
    spec = {**POD_SPEC, **({"priorityClassName": class_name} if class_name else {})}
    pod = api.create(ctx(api, "", "pods"), {"kind": "Pod", "metadata": {"name": "p"}, "spec": spec})
    assert (pod["spec"]["priority"], pod["spec"]["preemptionPolicy"]) == (priority, "PreemptLowerPriority")


def test_status_fields_are_in_go_order_with_details_only_where_upstream_has_them() -> None:
    keys = ["kind", "apiVersion", "metadata", "status", "message", "reason", "details", "code"]
    assert list(errors.not_found("", "pods", "x").status()) == keys
    assert errors.no_such_resource().status()["details"] == {}
    assert errors.method_not_allowed("m").status()["details"] == {}
    assert "details" not in errors.bad_request("m").status()
    encoded = json.dumps(errors.not_found("apps", "deployments", "x").status(), separators=(",", ":"))
    assert encoded.endswith('"details":{"name":"x","group":"apps","kind":"deployments"},"code":404}')


NOT_READY = {
    "key": "node.kubernetes.io/not-ready",
    "operator": "Exists",
    "effect": "NoExecute",
    "tolerationSeconds": 300,
}
UNREACHABLE = {**NOT_READY, "key": "node.kubernetes.io/unreachable"}


@pytest.mark.parametrize(
    ("tolerations", "after"),
    [
        (None, [NOT_READY, UNREACHABLE]),
        ([{"operator": "Exists"}], [{"operator": "Exists"}]),  # tolerates everything already
        (
            [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}],
            [
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
                NOT_READY,
            ],
        ),
    ],
)
def test_a_new_pod_tolerates_an_unready_node_for_five_minutes(
    api: Api, tolerations: list[dict[str, Any]] | None, after: list[dict[str, Any]]
) -> None:
    spec = {**POD_SPEC, **({"tolerations": tolerations} if tolerations else {})}
    pod = api.create(ctx(api, "", "pods"), {"kind": "Pod", "metadata": {"name": "p"}, "spec": spec})
    assert pod["spec"]["tolerations"] == after


def test_a_container_limit_range_item_defaults_from_max_and_min(api: Api) -> None:
    item = {
        "type": "Container",
        "max": {"cpu": "2"},
        "min": {"memory": "1Mi"},
        "defaultRequest": {"cpu": "1"},
    }
    body = {"kind": "LimitRange", "metadata": {"name": "lr"}, "spec": {"limits": [item, {"type": "Pod"}]}}
    limits = api.create(ctx(api, "", "limitranges"), body)["spec"]["limits"]
    assert limits[0]["default"] == {"cpu": "2"}
    assert limits[0]["defaultRequest"] == {"cpu": "1", "memory": "1Mi"}
    assert limits[1] == {"type": "Pod"}
