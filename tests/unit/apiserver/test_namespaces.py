"""The embedded API server's namespace rules, as upstream's namespace registry strategy and
NamespaceLifecycle admission: immortal namespaces, spec.finalizers only through /finalize,
the namespace gone once no finalizer is left, creations refused while it terminates."""

from __future__ import annotations

import copy

import pytest
from kcm_apiserver import errors
from kcm_apiserver.operations import Api, Ctx
from kcm_apiserver.registry import Registry
from kcm_apiserver.store import Store

# In process the Api hands back the stored dicts themselves: tests edit copies, as a client would.


def ctx(api: Api, resource: str, namespace: str = "") -> Ctx:
    rt = api.registry.lookup("", "v1", resource)
    assert rt is not None
    return Ctx(rt, namespace=namespace)


@pytest.fixture
def api() -> Api:
    made = Api(Store(), Registry())
    made.create(
        ctx(made, "namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}
    )
    return made


@pytest.mark.parametrize("name", ["default", "kube-system", "kube-public"])
def test_immortal_namespaces_refuse_deletion(api: Api, name: str) -> None:
    with pytest.raises(errors.ApiError) as caught:
        api.delete(ctx(api, "namespaces"), name, {})
    assert (caught.value.code, caught.value.reason) == (403, "Forbidden")
    assert caught.value.message == f'namespaces "{name}" is forbidden: this namespace may not be deleted'
    assert api.get(ctx(api, "namespaces"), name)["status"]["phase"] == "Active"


def test_kube_node_lease_may_be_deleted(api: Api) -> None:
    ns, gone = api.delete(ctx(api, "namespaces"), "kube-node-lease", {})
    assert not gone and ns["status"]["phase"] == "Terminating"


def test_create_sets_the_kubernetes_finalizer_which_an_update_cannot_drop(api: Api) -> None:
    ns = copy.deepcopy(api.get(ctx(api, "namespaces"), "ns"))
    assert ns["spec"]["finalizers"] == ["kubernetes"]
    edited = copy.deepcopy(ns)
    edited["spec"]["finalizers"] = []
    edited["metadata"]["labels"] = {"a": "b"}
    updated = api.update(ctx(api, "namespaces"), "ns", edited)
    assert updated["spec"]["finalizers"] == ["kubernetes"]
    assert updated["metadata"]["labels"]["a"] == "b"


def test_terminating_namespace_refuses_creates_naming_the_object(api: Api) -> None:
    api.delete(ctx(api, "namespaces"), "ns", {})
    for meta, shown in (({"name": "x"}, "x"), ({"generateName": "gen-"}, "gen-")):
        with pytest.raises(errors.ApiError) as caught:
            api.create(
                ctx(api, "configmaps", "ns"), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}
            )
        assert caught.value.code == 403
        assert caught.value.message == (
            f'configmaps "{shown}" is forbidden: '
            "unable to create new content in namespace ns because it is being terminated"
        )
        assert caught.value.details is not None
        assert caught.value.details["causes"] == [
            {
                "reason": "NamespaceTerminating",
                "message": "namespace ns is being terminated",
                "field": "metadata.namespace",
            }
        ]


def test_finalize_removes_the_namespace_once_no_finalizer_is_left(api: Api) -> None:
    ns, _ = api.delete(ctx(api, "namespaces"), "ns", {})
    body = copy.deepcopy(ns)
    body["spec"]["finalizers"] = ["example.com/other"]
    body["status"] = {"phase": "Active"}
    kept = copy.deepcopy(api.update(ctx(api, "namespaces"), "ns", body, subresource="finalize"))
    assert kept["spec"]["finalizers"] == ["example.com/other"]
    assert kept["status"]["phase"] == "Terminating"  # finalize changes no status
    kept["spec"]["finalizers"] = []
    api.update(ctx(api, "namespaces"), "ns", kept, subresource="finalize")
    with pytest.raises(errors.ApiError) as caught:
        api.get(ctx(api, "namespaces"), "ns")
    assert caught.value.code == 404


def test_metadata_finalizer_holds_a_finalized_namespace(api: Api) -> None:
    ns = copy.deepcopy(api.get(ctx(api, "namespaces"), "ns"))
    ns["metadata"]["finalizers"] = ["example.com/meta"]
    api.update(ctx(api, "namespaces"), "ns", ns)
    ns = copy.deepcopy(api.delete(ctx(api, "namespaces"), "ns", {})[0])
    ns["spec"]["finalizers"] = []
    held = copy.deepcopy(api.update(ctx(api, "namespaces"), "ns", ns, subresource="finalize"))
    assert held["metadata"]["finalizers"] == ["example.com/meta"]
    held["metadata"]["finalizers"] = []
    api.update(ctx(api, "namespaces"), "ns", held)
    with pytest.raises(errors.ApiError):
        api.get(ctx(api, "namespaces"), "ns")
