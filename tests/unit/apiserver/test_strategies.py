"""The embedded API server's per-kind write rules that follow upstream's registry strategies and
admission: which metadata a status write keeps, what bumps metadata.generation, the DaemonSet
template generation annotation, and the not-ready taint of a new Node."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kcm_apiserver import errors, strategies
from kcm_apiserver.operations import Api, Ctx
from kcm_apiserver.registry import Registry
from kcm_apiserver.store import Store

Obj = dict[str, Any]
TEMPLATE_GENERATION = "deprecated.daemonset.template.generation"
TEMPLATE = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"containers": [{"name": "c", "image": "nginx:1"}]},
}


def ctx(api: Api, group: str, resource: str, namespace: str = "ns") -> Ctx:
    rt = api.registry.lookup(group, "v1", resource)
    assert rt is not None
    return Ctx(rt, namespace=namespace if rt.namespaced else "")


@pytest.fixture
def api() -> Api:
    made = Api(Store(), Registry())
    made.create(
        ctx(made, "", "namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}
    )
    return made


def _workload(kind: str, name: str = "w", **meta: Any) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, **meta},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": copy.deepcopy(TEMPLATE)},
    }


def _deployment(api: Api) -> Obj:
    return copy.deepcopy(api.create(ctx(api, "apps", "deployments"), _workload("Deployment")))


def test_deployment_status_write_keeps_annotations_not_labels_nor_generation(api: Api) -> None:
    d = _deployment(api)
    d["metadata"]["annotations"] = {"deployment.kubernetes.io/revision": "1"}
    d["metadata"]["labels"] = {"sneaky": "label"}
    d["status"] = {"observedGeneration": 1}
    out = api.update(ctx(api, "apps", "deployments"), "w", d, subresource="status")
    assert out["metadata"]["annotations"] == {"deployment.kubernetes.io/revision": "1"}
    assert "labels" not in out["metadata"]
    assert out["metadata"]["generation"] == 1
    assert out["status"] == {"observedGeneration": 1}


def test_deployment_annotation_change_bumps_generation(api: Api) -> None:
    d = _deployment(api)
    d["metadata"]["annotations"] = {"note": "x"}
    assert api.update(ctx(api, "apps", "deployments"), "w", d)["metadata"]["generation"] == 2
    d = copy.deepcopy(api.get(ctx(api, "apps", "deployments"), "w"))
    d["metadata"]["labels"] = {"team": "a"}  # labels are not copied to ReplicaSets: no bump
    assert api.update(ctx(api, "apps", "deployments"), "w", d)["metadata"]["generation"] == 2


def test_replicaset_status_write_keeps_labels_and_annotations(api: Api) -> None:
    rs = copy.deepcopy(api.create(ctx(api, "apps", "replicasets"), _workload("ReplicaSet")))
    rs["metadata"]["labels"] = {"a": "b"}
    rs["metadata"]["annotations"] = {"c": "d"}
    out = api.update(ctx(api, "apps", "replicasets"), "w", rs, subresource="status")
    assert (out["metadata"]["labels"], out["metadata"]["annotations"]) == ({"a": "b"}, {"c": "d"})
    assert out["metadata"]["generation"] == 1


def test_pod_status_write_keeps_labels_but_not_owner_references(api: Api) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": copy.deepcopy(TEMPLATE["spec"]),
    }
    pod = copy.deepcopy(api.create(ctx(api, "", "pods"), pod))
    pod["metadata"]["labels"] = {"a": "b"}
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "u"}]
    out = api.update(ctx(api, "", "pods"), "p", pod, subresource="status")
    assert out["metadata"]["labels"] == {"a": "b"}
    assert "ownerReferences" not in out["metadata"]


def test_daemonset_template_generation(api: Api) -> None:
    c = ctx(api, "apps", "daemonsets")
    ds = copy.deepcopy(api.create(c, _workload("DaemonSet")))
    assert ds["metadata"]["annotations"][TEMPLATE_GENERATION] == "1"
    # The client cannot set it on update; a change elsewhere than the template leaves it.
    ds["metadata"]["annotations"][TEMPLATE_GENERATION] = "9"
    ds["spec"]["minReadySeconds"] = 5
    ds["spec"]["template"]["spec"]["volumes"] = []  # semantically the same template
    ds = copy.deepcopy(api.update(c, "w", ds))
    assert (ds["metadata"]["annotations"][TEMPLATE_GENERATION], ds["metadata"]["generation"]) == ("1", 2)
    ds["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"
    ds = copy.deepcopy(api.update(c, "w", ds))
    assert (ds["metadata"]["annotations"][TEMPLATE_GENERATION], ds["metadata"]["generation"]) == ("2", 3)
    # Nor through the status.
    ds["metadata"]["annotations"].pop(TEMPLATE_GENERATION)
    out = api.update(c, "w", ds, subresource="status")
    assert out["metadata"]["annotations"][TEMPLATE_GENERATION] == "2"


def test_daemonset_template_generation_on_create(api: Api) -> None:
    c = ctx(api, "apps", "daemonsets")
    made = api.create(c, _workload("DaemonSet", "a", annotations={TEMPLATE_GENERATION: "4"}))
    assert made["metadata"]["annotations"][TEMPLATE_GENERATION] == "4"
    made = api.create(c, _workload("DaemonSet", "b", annotations={TEMPLATE_GENERATION: "0"}))
    assert made["metadata"]["annotations"][TEMPLATE_GENERATION] == "1"
    with pytest.raises(errors.ApiError) as caught:
        api.create(c, _workload("DaemonSet", "c", annotations={TEMPLATE_GENERATION: "x"}))
    assert caught.value.code == 400
    assert caught.value.message == 'strconv.ParseInt: parsing "x": invalid syntax'


def _pod(name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": copy.deepcopy(TEMPLATE["spec"]),
    }


def test_default_toleration_seconds_follow_the_flags() -> None:
    """DefaultTolerationSeconds with --default-not-ready-toleration-seconds=60 and
    --default-unreachable-toleration-seconds=0: not-ready, then unreachable, each only when no
    toleration covers it (tests/e2e/test_apiserver_parity.py compares the rule with kube-apiserver's)."""
    made = Api(Store(), Registry(), toleration_seconds=strategies.TolerationSeconds(60, 0))
    made.create(
        ctx(made, "", "namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}
    )
    c = ctx(made, "", "pods")
    pod = made.create(c, _pod("plain"))
    assert pod["spec"]["tolerations"] == [
        {
            "key": "node.kubernetes.io/not-ready",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 60,
        },
        {
            "key": "node.kubernetes.io/unreachable",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 0,
        },
    ]
    mine = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 5}
    body = _pod("own")
    body["spec"]["tolerations"] = [mine]
    pod = made.create(c, body)
    assert [t["key"] for t in pod["spec"]["tolerations"]] == [
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/not-ready",
    ]
    assert pod["spec"]["tolerations"][0]["tolerationSeconds"] == 5


def test_new_node_is_tainted_not_ready_once(api: Api) -> None:
    c = ctx(api, "", "nodes")
    node = api.create(c, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}})
    assert node["spec"]["taints"] == [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
    own = {"key": "node.kubernetes.io/not-ready", "value": "x", "effect": "NoSchedule"}
    other = {"key": "dedicated", "value": "db", "effect": "NoExecute"}
    node = api.create(
        c, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "m"}, "spec": {"taints": [own, other]}}
    )
    assert node["spec"]["taints"] == [own, other]
    # Only creation is admitted this way: an update may remove it.
    edited = copy.deepcopy(api.get(c, "n"))
    edited["spec"]["taints"] = []
    assert not api.update(c, "n", edited)["spec"].get("taints")


def _cron_job(name: str, schedule: str = "0 * * * *") -> Obj:
    template = {
        "metadata": {"labels": {"app": "web"}},
        "spec": {**TEMPLATE["spec"], "restartPolicy": "Never"},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": template}}},
    }


def test_job_kinds_warn_of_names_that_are_not_dns_labels_and_of_tz_in_a_kept_schedule(api: Api) -> None:
    # Upstream's cronjob strategy WarningsOnCreate and WarningsOnUpdate.
    c = ctx(api, "batch", "cronjobs")
    api.create(c, _cron_job("nightly.backup"))
    assert c.warnings == [
        "metadata.name: this is used in Pod names and hostnames, which can result in surprising "
        "behavior; a DNS label is recommended: [must not contain dots]"
    ]
    api.create(ctx(api, "batch", "cronjobs"), _cron_job("tz"))
    # A CronJob made before the rule may keep its TZ prefix; each update says it should not.
    api.store.get("batch/cronjobs", "ns", "tz")["spec"]["schedule"] = "TZ=UTC 0 * * * *"
    stored = copy.deepcopy(api.get(ctx(api, "batch", "cronjobs"), "tz"))
    stored["spec"]["suspend"] = True
    c = ctx(api, "batch", "cronjobs")
    api.update(c, "tz", stored)
    assert c.warnings == [
        "cannot use TZ or CRON_TZ in spec.spec.schedule, use timeZone instead, see "
        "https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details"
    ]
