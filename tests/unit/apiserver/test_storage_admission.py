"""The embedded API server's storage admission, through `Api` as a request reaches it:
StorageObjectInUseProtection's finalizers, DefaultStorageClass's choice (newest default, then
name; none without one; an explicit "" kept), PersistentVolumeClaimResize's refusals, and a
PersistentVolume's lastPhaseTransitionTime."""

from __future__ import annotations

from typing import Any

import pytest
from kcm_apiserver import errors, storageadmission
from kcm_apiserver.operations import Api, Ctx
from kcm_apiserver.registry import Registry
from kcm_apiserver.store import Store

Obj = dict[str, Any]


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


def storage_class(api: Api, name: str, *, default: str = "", expand: bool | None = None) -> None:
    meta: Obj = {"name": name}
    if default:
        meta["annotations"] = {default: "true"}
    body: Obj = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": meta,
        "provisioner": "x",
    }
    if expand is not None:
        body["allowVolumeExpansion"] = expand
    api.create(ctx(api, "storageclasses", group="storage.k8s.io"), body)


def claim(api: Api, name: str, **spec: Any) -> Obj:
    body = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, **spec},
    }
    return api.create(ctx(api, "persistentvolumeclaims", "ns"), body)


def test_new_claims_and_volumes_get_their_protection_finalizers(api: Api) -> None:
    assert claim(api, "c")["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "pv", "finalizers": ["example.com/x"]},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": "/x"},
        },
    }
    made = api.create(ctx(api, "persistentvolumes"), pv)
    assert made["metadata"]["finalizers"] == ["example.com/x", "kubernetes.io/pv-protection"]
    assert made["status"] == {
        "phase": "Pending",
        "lastPhaseTransitionTime": made["metadata"]["creationTimestamp"],
    }


def test_no_default_class_leaves_a_claim_without_one(api: Api) -> None:
    storage_class(api, "plain")
    assert "storageClassName" not in claim(api, "c")["spec"]


def _class(name: str, created: str, default: bool = True) -> Obj:
    annotations = {"storageclass.kubernetes.io/is-default-class": "true"} if default else {}
    return {"metadata": {"name": name, "creationTimestamp": created, "annotations": annotations}}


def test_the_newest_default_wins_then_the_first_name() -> None:
    older, newer = "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"
    assert storageadmission.default_class([_class("a", older), _class("z", newer)]) == "z"
    assert storageadmission.default_class([_class("b", newer), _class("a", newer)]) == "a"
    assert storageadmission.default_class([_class("n", newer, default=False), _class("a", older)]) == "a"
    assert storageadmission.default_class([_class("n", newer, default=False)]) is None


def test_a_claim_without_a_class_gets_the_default_and_an_explicit_empty_one_stays(api: Api) -> None:
    storage_class(api, "beta", default="storageclass.beta.kubernetes.io/is-default-class")
    assert claim(api, "c")["spec"]["storageClassName"] == "beta"
    assert claim(api, "none", storageClassName="")["spec"]["storageClassName"] == ""


def _bound(api: Api, name: str, cls: str) -> None:
    claim(api, name, storageClassName=cls, volumeName=f"pv-{name}")
    status = {"status": {"phase": "Bound", "capacity": {"storage": "1Gi"}}}
    api.patch(ctx(api, "persistentvolumeclaims", "ns"), name, "merge", status, subresource="status")


def _grow(api: Api, name: str) -> Obj:
    grow = {"spec": {"resources": {"requests": {"storage": "2Gi"}}}}
    return api.patch(ctx(api, "persistentvolumeclaims", "ns"), name, "merge", grow)[0]


def test_growing_a_claim_needs_a_class_that_allows_expansion(api: Api) -> None:
    storage_class(api, "fixed")
    storage_class(api, "grows", expand=True)
    _bound(api, "fixed", "fixed")
    _bound(api, "grows", "grows")
    with pytest.raises(errors.ApiError) as refused:
        _grow(api, "fixed")
    assert refused.value.code == 403
    assert refused.value.message == (
        'persistentvolumeclaims "fixed" is forbidden: only dynamically provisioned pvc can be resized and '
        "the storageclass that provisions the pvc must support resize"
    )
    assert _grow(api, "grows")["spec"]["resources"]["requests"]["storage"] == "2Gi"


def _invalid(api: Api, call: Any) -> list[dict[str, str]]:
    with pytest.raises(errors.ApiError) as refused:
        call()
    assert refused.value.code == 422
    return [
        {"field": c["field"], "message": c["message"]}
        for c in (refused.value.details or {}).get("causes", [])
    ]


def test_a_claim_needs_access_modes_and_a_size(api: Api) -> None:
    body = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "bad"}, "spec": {}}
    causes = _invalid(api, lambda: api.create(ctx(api, "persistentvolumeclaims", "ns"), body))
    assert causes == [
        {"field": "spec.accessModes", "message": "Required value: at least 1 access mode is required"},
        {"field": "spec.resources[storage]", "message": "Required value"},
    ]


def test_a_claims_spec_is_fixed_but_a_bound_claims_size_may_grow(api: Api) -> None:
    storage_class(api, "grows", expand=True)
    _bound(api, "c", "grows")
    change = {"spec": {"accessModes": ["ReadWriteMany"]}}
    causes = _invalid(api, lambda: api.patch(ctx(api, "persistentvolumeclaims", "ns"), "c", "merge", change))
    assert causes == [
        {
            "field": "spec",
            "message": "Forbidden: spec is immutable after creation except resources.requests and "
            "volumeAttributesClassName for bound claims",
        }
    ]
    claims = ctx(api, "persistentvolumeclaims", "ns")
    api.patch(claims, "c", "merge", {"spec": {"resources": {"requests": {"storage": "3Gi"}}}})
    # RecoverVolumeExpansionFailure (on in 1.32): back down from a failed expansion, to above the
    # claim's capacity (1Gi) only.
    api.patch(claims, "c", "merge", {"spec": {"resources": {"requests": {"storage": "2Gi"}}}})
    shrink = {"spec": {"resources": {"requests": {"storage": "1Gi"}}}}
    causes = _invalid(api, lambda: api.patch(claims, "c", "merge", shrink))
    assert causes == [
        {
            "field": "spec.resources.requests.storage",
            "message": "Forbidden: field can not be less than status.capacity",
        }
    ]


def test_a_volume_needs_a_source_and_keeps_it(api: Api) -> None:
    pvs = ctx(api, "persistentvolumes")
    body: Obj = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"}, "spec": {}}
    assert _invalid(api, lambda: api.create(pvs, body)) == [
        {"field": "spec.accessModes", "message": "Required value"},
        {"field": "spec.capacity", "message": "Required value"},
        {"field": "spec", "message": "Required value: must specify a volume type"},
    ]
    body["spec"] = {
        "capacity": {"storage": "1Gi"},
        "accessModes": ["ReadWriteOnce"],
        "hostPath": {"path": "/a"},
    }
    api.create(pvs, body)
    moved = {"spec": {"hostPath": {"path": "/b"}}}
    assert _invalid(api, lambda: api.patch(pvs, "pv", "merge", moved)) == [
        {
            "field": "spec.persistentvolumesource",
            "message": "Forbidden: spec.persistentvolumesource is immutable after creation",
        }
    ]


def test_a_storage_class_keeps_its_provisioner_and_parameters(api: Api) -> None:
    storage_class(api, "sc")
    classes = ctx(api, "storageclasses", group="storage.k8s.io")
    change = {"provisioner": "y", "parameters": {"a": "b"}, "reclaimPolicy": "Retain"}
    assert _invalid(api, lambda: api.patch(classes, "sc", "merge", change)) == [
        {"field": "parameters", "message": "Forbidden: updates to parameters are forbidden."},
        {"field": "provisioner", "message": "Forbidden: updates to provisioner are forbidden."},
        {"field": "reclaimPolicy", "message": "Forbidden: updates to reclaimPolicy are forbidden."},
    ]
