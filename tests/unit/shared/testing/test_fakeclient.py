"""kcm_shared.testing.fakeclient: the fake API server behind KubeClient's own methods."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable
from typing import Any, TypeVar

import pytest
from kcm_shared.client import kubeclient
from kcm_shared.testing import fakeclient

T = TypeVar("T")
NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
PODS = "/api/v1/namespaces/ns/pods"
NODE = "/api/v1/nodes/n1"


def run(call: Awaitable[T]) -> T:
    async def wrapped() -> T:
        return await call

    return asyncio.run(wrapped())


def pod(name: str, rv: str = "5", **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}", "resourceVersion": rv, **meta}}


def client(*objects: dict[str, Any]) -> fakeclient.FakeClient:
    return fakeclient.FakeClient({f"{PODS}/{o['metadata']['name']}": o for o in objects}, now=lambda: NOW)


@pytest.mark.parametrize(
    ("path", "want"),
    [
        (f"{PODS}/a", fakeclient.Where(PODS, "pods", "a")),
        (f"{PODS}/a/status", fakeclient.Where(PODS, "pods", "a", "status")),
        (PODS, fakeclient.Where(PODS, "pods")),
        (NODE, fakeclient.Where("/api/v1/nodes", "nodes", "n1")),
        ("/api/v1/namespaces/ns", fakeclient.Where("/api/v1/namespaces", "namespaces", "ns")),
        (
            "/api/v1/namespaces/ns/finalize",
            fakeclient.Where("/api/v1/namespaces", "namespaces", "ns", "finalize"),
        ),
        (
            "/apis/apps/v1/namespaces/ns/deployments/d/scale",
            fakeclient.Where("/apis/apps/v1/namespaces/ns/deployments", "deployments", "d", "scale", "apps"),
        ),
    ],
)
def test_paths_split_as_the_api_server_reads_them(path: str, want: fakeclient.Where) -> None:
    assert fakeclient.where(path) == want


def test_every_call_is_recorded_with_the_verb_body_patch_type_and_priority() -> None:
    c = client(pod("a"))
    run(c.get(f"{PODS}/a"))
    run(c.get(PODS, {"labelSelector": "app=x"}))
    run(
        c.patch(
            f"{PODS}/a", {"metadata": {"labels": {"x": "y"}}}, "strategic", priority=kubeclient.Priority.LOW
        )
    )
    run(c.delete(f"{PODS}/a", {"propagationPolicy": "Background"}))
    run(c.request("DELETE", PODS))
    assert c.calls() == [
        ("get", f"{PODS}/a", None),
        ("list", PODS, None),
        ("patch", f"{PODS}/a", {"metadata": {"labels": {"x": "y"}}}),
        ("delete", f"{PODS}/a", {"propagationPolicy": "Background"}),
        ("delete-collection", PODS, None),
    ]
    assert c.actions[1].params == {"labelSelector": "app=x"}
    assert (c.actions[2].patch_type, c.actions[2].priority) == ("strategic", kubeclient.Priority.LOW)
    assert c.calls(*fakeclient.WRITES) == c.calls()[2:]


def test_a_missing_object_is_upstreams_not_found() -> None:
    with pytest.raises(kubeclient.ApiError) as caught:
        run(client().get(f"{PODS}/gone"))
    assert (caught.value.code, caught.value.reason, caught.value.message) == (
        404,
        "NotFound",
        'pods "gone" not found',
    )
    assert caught.value.status["details"] == {"name": "gone", "kind": "pods"}
    with pytest.raises(kubeclient.ApiError, match=r'jobs\.batch "gone" not found'):
        run(client().get("/apis/batch/v1/namespaces/ns/jobs/gone"))


def test_create_names_and_stamps_the_object_and_refuses_a_taken_name() -> None:
    c = client(pod("a", rv="7"))
    created = run(c.create(PODS, {"metadata": {"generateName": "web-"}, "spec": {"x": 1}}))
    meta = created["metadata"]
    assert (meta["name"], meta["namespace"], meta["uid"], meta["resourceVersion"]) == (
        "web-1",
        "ns",
        "uid-1",
        "8",
    )
    assert (meta["generation"], meta["creationTimestamp"]) == (1, "2026-03-01T12:00:00Z")
    assert c.objects[f"{PODS}/web-1"] == created
    with pytest.raises(kubeclient.ApiError) as caught:
        run(c.create(PODS, {"metadata": {"name": "a"}}))
    assert (caught.value.code, caught.value.reason) == (409, "AlreadyExists")


def test_a_stale_resource_version_or_another_uid_is_a_conflict() -> None:
    c = client(pod("a", rv="5"))
    with pytest.raises(kubeclient.ApiError, match="the object has been modified") as caught:
        run(c.update(f"{PODS}/a", pod("a", rv="4")))
    assert caught.value.conflict
    with pytest.raises(kubeclient.ApiError, match="Precondition failed: UID in precondition: other"):
        run(c.patch(f"{PODS}/a", {"metadata": {"uid": "other", "labels": {"x": "y"}}}, "strategic"))
    with pytest.raises(kubeclient.ApiError, match="Precondition failed: UID in precondition: other"):
        run(c.delete(f"{PODS}/a", {"preconditions": {"uid": "other"}}))
    assert c.objects[f"{PODS}/a"] == pod("a", rv="5")


def test_writes_move_the_resource_version_and_a_spec_change_the_generation() -> None:
    c = fakeclient.FakeClient(resource_version=100)
    run(c.create(PODS, {"metadata": {"name": "a"}, "spec": {"x": 1}}))
    labelled = run(c.patch(f"{PODS}/a", {"metadata": {"labels": {"k": "v"}}}))
    assert (labelled["metadata"]["resourceVersion"], labelled["metadata"]["generation"]) == ("102", 1)
    updated = run(c.update(f"{PODS}/a", {**labelled, "spec": {"x": 2}}))
    assert (updated["metadata"]["resourceVersion"], updated["metadata"]["generation"]) == ("103", 2)
    assert updated["metadata"]["uid"] == "uid-1" and updated["metadata"]["labels"] == {"k": "v"}


def test_a_status_write_changes_only_the_status_and_finalize_only_the_finalizers() -> None:
    c = client({**pod("a"), "spec": {"x": 1}})
    run(c.patch(f"{PODS}/a/status", {"spec": {"x": 9}, "status": {"phase": "Running"}}))
    assert c.objects[f"{PODS}/a"]["spec"] == {"x": 1}
    assert c.objects[f"{PODS}/a"]["status"] == {"phase": "Running"}
    ns = {
        "metadata": {"name": "ns"},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Terminating"},
    }
    c.add("/api/v1/namespaces/ns", ns)
    run(c.update("/api/v1/namespaces/ns/finalize", {**ns, "spec": {"finalizers": []}, "status": {}}))
    assert c.objects["/api/v1/namespaces/ns"]["spec"] == {"finalizers": []}
    assert c.objects["/api/v1/namespaces/ns"]["status"] == {"phase": "Terminating"}


def test_patches_are_applied_by_type() -> None:
    owned = pod("a", finalizers=["keep", "drop"], ownerReferences=[{"uid": "o1"}, {"uid": "o2"}])
    c = client(owned)
    run(c.patch(f"{PODS}/a", {"metadata": {"ownerReferences": [{"uid": "o3"}]}}, "merge"))
    assert c.objects[f"{PODS}/a"]["metadata"]["ownerReferences"] == [{"uid": "o3"}]
    patch = {
        "metadata": {
            "ownerReferences": [{"$patch": "delete", "uid": "o3"}, {"uid": "o4"}],
            "$deleteFromPrimitiveList/finalizers": ["drop"],
        }
    }
    run(c.patch(f"{PODS}/a", patch, "strategic"))
    meta = c.objects[f"{PODS}/a"]["metadata"]
    assert (meta["ownerReferences"], meta["finalizers"]) == ([{"uid": "o4"}], ["keep"])
    with pytest.raises(NotImplementedError):
        run(c.patch(f"{PODS}/a", [{"op": "remove", "path": "/metadata/labels"}], "json"))


def test_delete_removes_or_marks_an_object_held_by_finalizers() -> None:
    c = client(pod("a"), pod("held", finalizers=["example.com/hold"]))
    run(c.delete(f"{PODS}/a"))
    run(c.delete(f"{PODS}/held"))
    assert list(c.objects) == [f"{PODS}/held"]
    assert c.objects[f"{PODS}/held"]["metadata"]["deletionTimestamp"] == "2026-03-01T12:00:00Z"
    c.add(f"{PODS}/b", pod("b"))
    run(c.request("DELETE", PODS))
    assert list(c.objects) == [f"{PODS}/held"]


def test_a_collection_lists_what_is_held_directly_under_it() -> None:
    c = client(pod("a"), pod("b"))
    c.add(NODE, {"metadata": {"name": "n1"}})
    listing = run(c.get(PODS))
    assert [i["metadata"]["name"] for i in listing["items"]] == ["a", "b"]
    assert listing["metadata"]["resourceVersion"] == "5"
    assert run(c.get("/api/v1/namespaces/other/pods"))["items"] == []


def test_injected_errors_fire_on_their_verb_and_path_once_or_always() -> None:
    c = client(pod("a"))
    boom = kubeclient.ApiError(500, "InternalError", "etcd is gone")
    c.fail("get", f"{PODS}/a", boom, times=1)
    c.fail("delete", None, fakeclient.conflict("pods", "a", "because"))
    with pytest.raises(kubeclient.ApiError, match="etcd is gone"):
        run(c.get(f"{PODS}/a"))
    assert run(c.get(f"{PODS}/a"))["metadata"]["name"] == "a"  # once only
    for _ in range(2):
        with pytest.raises(kubeclient.ApiError, match="because"):
            run(c.delete(f"{PODS}/a"))
    assert [verb for verb, _, _ in c.calls()] == ["get", "get", "delete", "delete"]  # failed calls too
    assert f"{PODS}/a" in c.objects


def test_a_write_guard_sees_writes_only_and_what_it_refuses_is_never_sent() -> None:
    guarded: list[tuple[str, str]] = []

    def guard(method: str, path: str) -> None:
        guarded.append((method, path))
        if method == "DELETE":
            raise PermissionError("not ours any more")

    c = fakeclient.FakeClient(write_guard=guard)
    run(c.create(PODS, {"metadata": {"name": "a"}}))
    run(c.get(f"{PODS}/a"))
    with pytest.raises(PermissionError):
        run(c.delete(f"{PODS}/a"))
    assert guarded == [("POST", PODS), ("DELETE", f"{PODS}/a")]
    assert [verb for verb, _, _ in c.calls()] == ["create", "get"] and f"{PODS}/a" in c.objects


def test_a_subclass_answers_what_the_store_cannot() -> None:
    class Evicting(fakeclient.FakeClient):
        async def handle(self, action: fakeclient.Action) -> dict[str, Any] | None:
            if action.path.endswith("/eviction"):
                self.objects.pop(action.path.rsplit("/", 1)[0])
                return {}
            return await super().handle(action)

    c = Evicting({f"{PODS}/a": pod("a")})
    run(c.create(f"{PODS}/a/eviction", {"metadata": {"name": "a"}}))
    assert c.objects == {}
    with pytest.raises(NotImplementedError):
        run(client(pod("a")).create(f"{PODS}/a/eviction", {}))


def test_bodies_are_recorded_as_sent_not_as_later_changed() -> None:
    c = client()
    body: dict[str, Any] = {"metadata": {"name": "a"}}
    run(c.create(PODS, body))
    body["metadata"]["name"] = "changed"
    assert c.calls() == [("create", PODS, {"metadata": {"name": "a"}})]


def test_watches_are_not_served() -> None:
    async def watch() -> None:
        async for _ in client().watch(PODS, {}):
            pass

    with pytest.raises(NotImplementedError):
        asyncio.run(watch())
