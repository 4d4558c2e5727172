"""One round of the namespace deleter against a recording fake API (upstream's
namespaced_resources_deleter_test.go scenarios): deletecollection or list+delete by verbs,
a 405 falling back, content left with and without finalizers, the pod estimate, conditions
written, and the finalize that ends it."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from typing import Any

import pytest
from kcm_controllers.namespace import conditions, deleter
from kcm_shared.apimachinery import gvr
from kcm_shared.client import discovery, kubeclient

NOW = dt.datetime(2026, 1, 1, 0, 0, 10, tzinfo=dt.UTC)
DELETED = "2026-01-01T00:00:00Z"  # 10 s before NOW
ALL = frozenset({"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"})


def api(
    group: str, resource: str, verbs: frozenset[str] = ALL, namespaced: bool = True
) -> discovery.ApiResource:
    version = "v1"
    return discovery.ApiResource(
        gvr.Resource(group, version, resource), resource.title(), namespaced, verbs, True
    )


class FakeApi:
    """Answers from `lists` (collection path -> items), records every call, fails on demand."""

    def __init__(
        self, lists: dict[str, list[dict[str, Any]]], failing: dict[tuple[str, str], int] | None = None
    ):
        self.lists = lists
        self.failing = failing or {}
        self.calls: list[tuple[str, str]] = []
        self.namespace: dict[str, Any] = {
            "metadata": {"name": "ns", "uid": "u1", "resourceVersion": "1", "deletionTimestamp": DELETED},
            "spec": {"finalizers": ["kubernetes", "example.com/other"]},
            "status": {"phase": "Active"},
        }

    def _check(self, method: str, path: str) -> None:
        self.calls.append((method, path))
        code = self.failing.get((method, path))
        if code:
            raise kubeclient.ApiError(code, "Failure", f"{method} {path} failed")

    async def get(self, path: str) -> dict[str, Any]:
        self._check("GET", path)
        return json.loads(json.dumps(self.namespace))

    async def update(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        self._check("PUT", path)
        self.namespace = json.loads(json.dumps(obj))
        self.namespace["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
        return self.namespace

    async def request_bytes(self, method: str, path: str, **_: Any) -> bytes:
        self._check(method, path)
        if method == "DELETE":
            self.lists[path] = [i for i in self.lists.get(path, []) if i["metadata"].get("finalizers")]
            return b"{}"
        return json.dumps({"items": self.lists.get(path, [])}).encode()

    async def delete(self, path: str, options: Any = None) -> dict[str, Any]:
        self._check("DELETE", path)
        collection, _, name = path.rpartition("/")
        self.lists[collection] = [i for i in self.lists.get(collection, []) if i["metadata"]["name"] != name]
        return {}


def item(name: str, *finalizers: str, **more: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "finalizers": list(finalizers)}, **more}


def run(fake: FakeApi, apis: list[discovery.ApiResource], failures: dict[str, str] | None = None) -> None:
    async def discover(_client: Any) -> discovery.Mapper:
        return discovery.Mapper(tuple(apis), frozenset(), failures or {})

    d = deleter.Deleter(fake, discover=discover, now=lambda: NOW)  # type: ignore[arg-type]
    asyncio.run(d.delete("ns"))


CMS = "/api/v1/namespaces/ns/configmaps"
WIDGETS = "/apis/example.com/v1/namespaces/ns/widgets"
PODS = "/api/v1/namespaces/ns/pods"
FINALIZE = "/api/v1/namespaces/ns/finalize"


def condition(fake: FakeApi, condition_type: str) -> dict[str, Any]:
    found: dict[str, Any] = next(
        c for c in fake.namespace["status"]["conditions"] if c["type"] == condition_type
    )
    return found


def test_empty_content_is_deleted_and_the_namespace_finalized() -> None:
    fake = FakeApi({CMS: [item("a"), item("b")], WIDGETS: [item("w")]})
    no_collection = ALL - {"deletecollection"}
    run(
        fake,
        [api("", "configmaps"), api("example.com", "widgets", no_collection), api("", "nodes", ALL, False)],
    )
    assert ("DELETE", CMS) in fake.calls  # deletecollection
    assert ("DELETE", f"{WIDGETS}/w") in fake.calls  # no deletecollection verb: list and delete each
    assert not any("nodes" in path for _, path in fake.calls)  # cluster-scoped: not the namespace's
    assert fake.namespace["status"]["phase"] == "Terminating"
    assert fake.namespace["spec"]["finalizers"] == ["example.com/other"]  # only its own token goes
    assert fake.calls[-1] == ("PUT", FINALIZE)
    assert condition(fake, conditions.CONTENT_REMAINING)["reason"] == "ContentRemoved"


def test_method_not_allowed_falls_back_to_deleting_each_item() -> None:
    fake = FakeApi({CMS: [item("a")]}, failing={("DELETE", CMS): 405})
    run(fake, [api("", "configmaps")])
    assert ("DELETE", f"{CMS}/a") in fake.calls and fake.calls[-1] == ("PUT", FINALIZE)


def test_content_held_by_finalizers_waits_15_seconds_with_conditions() -> None:
    fake = FakeApi({CMS: [item("held", "example.com/hold"), item("gone")]})
    with pytest.raises(deleter.ResourcesRemaining) as caught:
        run(fake, [api("", "configmaps")])
    assert caught.value.estimate == conditions.FINALIZER_ESTIMATE_SECONDS
    assert ("PUT", FINALIZE) not in fake.calls
    assert condition(fake, conditions.FINALIZERS_REMAINING)["message"] == (
        "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
    )
    assert condition(fake, conditions.CONTENT_REMAINING)["message"] == (
        "Some resources are remaining: configmaps. has 1 resource instances"
    )


def test_pods_in_their_grace_period_give_the_estimate() -> None:
    running = item("p", spec={"terminationGracePeriodSeconds": 30}, status={"phase": "Running"})
    fake = FakeApi({PODS: [running]})
    fake.request_bytes = _keeping_pods(fake)  # type: ignore[method-assign]
    with pytest.raises(deleter.ResourcesRemaining) as caught:
        run(fake, [api("", "pods")])
    assert caught.value.estimate == 30  # terminating for 10 s of 30
    assert conditions.requeue_seconds(caught.value.estimate) == 16


def _keeping_pods(fake: FakeApi) -> Any:
    """Pods deleted gracefully stay listed until their kubelet is done."""

    async def request_bytes(method: str, path: str, **_: Any) -> bytes:
        fake._check(method, path)
        return b"{}" if method == "DELETE" else json.dumps({"items": fake.lists.get(path, [])}).encode()

    return request_bytes


def test_items_left_without_finalizer_or_estimate_are_an_error() -> None:
    fake = FakeApi({CMS: [item("stuck")]})
    fake.request_bytes = _keeping_pods(fake)  # type: ignore[method-assign]
    with pytest.raises(
        deleter.DeletionError,
        match="unexpected items still remain in namespace: ns for gvr: /v1, Resource=configmaps",
    ):
        run(fake, [api("", "configmaps")])
    failure = condition(fake, conditions.CONTENT_FAILURE)
    assert (failure["status"], failure["reason"]) == ("True", "ContentDeletionFailed")
    assert failure["message"].startswith("Failed to delete all resource types, 1 remaining: unexpected items")


def test_partial_discovery_is_reported_and_what_was_found_is_still_deleted() -> None:
    fake = FakeApi({CMS: [item("a")]})
    with pytest.raises(deleter.DeletionError, match="unable to retrieve the complete list of server APIs"):
        run(fake, [api("", "configmaps")], {"metrics.k8s.io/v1beta1": "the server is currently unable"})
    assert ("DELETE", CMS) in fake.calls and ("PUT", FINALIZE) not in fake.calls
    found = condition(fake, conditions.DISCOVERY_FAILURE)
    assert found["message"] == (
        "Discovery failed for some groups, 1 failing: unable to retrieve the complete list of server APIs: "
        "metrics.k8s.io/v1beta1: the server is currently unable"
    )


def test_a_namespace_not_being_deleted_is_left_alone() -> None:
    fake = FakeApi({CMS: [item("a")]})
    del fake.namespace["metadata"]["deletionTimestamp"]
    run(fake, [api("", "configmaps")])
    assert fake.calls == [("GET", "/api/v1/namespaces/ns")]
