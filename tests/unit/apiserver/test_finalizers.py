"""Finalizers in the embedded API server as upstream stores them: an emptied list is not kept
(`metadata.finalizers` reads as absent, never []), and a pod holding the job-tracking finalizer
that a client deletes stays, terminating, until the finalizer goes; the Job /status rules run
on status writes only."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kcm_apiserver import errors
from kcm_apiserver.operations import Api, Ctx
from kcm_apiserver.registry import Registry
from kcm_apiserver.store import Store

Obj = dict[str, Any]
TRACKING = "batch.kubernetes.io/job-tracking"


@pytest.fixture
def api() -> Api:
    made = Api(Store(), Registry())
    made.create(
        ctx(made, "namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}
    )
    return made


def ctx(api: Api, resource: str, namespace: str = "", group: str = "", version: str = "v1") -> Ctx:
    rt = api.registry.lookup(group, version, resource)
    assert rt is not None
    return Ctx(rt, namespace=namespace)


def config_map(api: Api, finalizers: list[str]) -> Obj:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "finalizers": finalizers}}
    return api.create(ctx(api, "configmaps", "ns"), body)


@pytest.mark.parametrize(
    ("patch_type", "patch"),
    [
        ("json", [{"op": "remove", "path": "/metadata/finalizers/0"}]),
        ("merge", {"metadata": {"finalizers": []}}),
        ("strategic", {"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/x"]}}),
    ],
)
def test_removing_the_last_finalizer_leaves_the_field_absent(api: Api, patch_type: str, patch: Any) -> None:
    config_map(api, ["example.com/x"])
    patched, _ = api.patch(ctx(api, "configmaps", "ns"), "cm", patch_type, patch)
    assert "finalizers" not in patched["metadata"]
    assert "finalizers" not in api.get(ctx(api, "configmaps", "ns"), "cm")["metadata"]


def test_update_and_create_with_empty_finalizers_store_none(api: Api) -> None:
    created = config_map(api, [])
    assert "finalizers" not in created["metadata"]
    edited = copy.deepcopy(created)
    edited["metadata"]["finalizers"] = []
    edited["metadata"]["ownerReferences"] = []
    updated = api.update(ctx(api, "configmaps", "ns"), "cm", edited)
    assert "finalizers" not in updated["metadata"] and "ownerReferences" not in updated["metadata"]


def test_tracked_pod_deleted_by_a_client_waits_for_its_finalizer(api: Api) -> None:
    pods = ctx(api, "pods", "ns")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "finalizers": [TRACKING]},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], "nodeName": "node-1"},
    }
    api.create(pods, pod)
    deleted, gone = api.delete(pods, "p", {})
    assert not gone and deleted["metadata"]["deletionTimestamp"]
    # The kubelet's final delete (grace 0) does not remove it while the finalizer is there.
    _, gone = api.delete(pods, "p", {"gracePeriodSeconds": 0})
    assert not gone
    kept = api.get(pods, "p")
    assert kept["metadata"]["finalizers"] == [TRACKING] and kept["metadata"]["deletionTimestamp"]
    api.patch(pods, "p", "json", [{"op": "remove", "path": "/metadata/finalizers/0"}])
    with pytest.raises(errors.ApiError) as caught:
        api.get(pods, "p")
    assert caught.value.code == 404


def test_job_status_writes_are_checked_by_the_status_rules(api: Api) -> None:
    jobs = ctx(api, "jobs", "ns", "batch")
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
            }
        },
    }
    api.create(jobs, job)
    running = {"status": {"startTime": "2026-11-24T10:00:00Z", "active": 1}}
    api.patch(jobs, "j", "merge", running, subresource="status")
    done = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    with pytest.raises(errors.ApiError) as caught:
        api.patch(jobs, "j", "merge", done, subresource="status")
    assert caught.value.code == 422
    causes = [(c["field"], c["message"]) for c in caught.value.details["causes"]]
    assert ("status.completionTime", "Required value: completionTime is required for Complete jobs") in causes
    # The same write through the main resource is not a status write: status is kept as stored.
    updated, _ = api.patch(jobs, "j", "merge", done)
    assert updated["status"] == running["status"]
