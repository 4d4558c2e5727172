"""One round of the namespace deleter against the testing kit's fake API server (upstream's
namespaced_resources_deleter_test.go scenarios): deletecollection or list+delete by verbs,
a 405 falling back, content left with and without finalizers, the pod estimate, conditions
written, and the finalize that ends it however often it conflicts; and the controller's retry
delays, upstream's namespace queue's."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest
from kcm_controllers.namespace import conditions, deleter
from kcm_controllers.namespace import controller as namespace_controller
from kcm_shared.apimachinery import gvr
from kcm_shared.client import discovery, kubeclient
from kcm_shared.runtime import manager
from kcm_shared.testing import fakeclient

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


NAMESPACE = "/api/v1/namespaces/ns"


def fake_api(
    lists: dict[str, list[dict[str, Any]]],
    failing: dict[tuple[str, str], int] | None = None,
    client: fakeclient.FakeClient | None = None,
) -> fakeclient.FakeClient:
    """The API server holding the namespace (being deleted) and `lists` (collection path -> items);
    `failing` (verb, path) answer with that code."""
    fake = client or fakeclient.FakeClient()
    fake.add(
        NAMESPACE,
        {
            "metadata": {"name": "ns", "uid": "u1", "resourceVersion": "1", "deletionTimestamp": DELETED},
            "spec": {"finalizers": ["kubernetes", "example.com/other"]},
            "status": {"phase": "Active"},
        },
    )
    for collection, items in lists.items():
        for i in items:
            fake.add(f"{collection}/{i['metadata']['name']}", i)
    for (verb, path), code in (failing or {}).items():
        fake.fail(verb, path, kubeclient.ApiError(code, "Failure", f"{verb} {path} failed"))
    return fake


class KeepingPods(fakeclient.FakeClient):
    """Pods deleted gracefully stay listed until their kubelet is done: a collection delete
    leaves every item in place."""

    async def handle(self, action: fakeclient.Action) -> dict[str, Any] | None:
        if action.verb == "delete-collection":
            return {}
        return await super().handle(action)


def calls(fake: fakeclient.FakeClient) -> list[tuple[str, str]]:
    return [(verb, path) for verb, path, _ in fake.calls()]


def namespace(fake: fakeclient.FakeClient) -> dict[str, Any]:
    return fake.objects[NAMESPACE]


def item(name: str, *finalizers: str, **more: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "finalizers": list(finalizers)}, **more}


def run(
    fake: fakeclient.FakeClient,
    apis: list[discovery.ApiResource],
    failures: dict[str, str] | None = None,
    ordered: bool = False,
) -> None:
    async def discover(_client: Any) -> discovery.Mapper:
        return discovery.Mapper(tuple(apis), frozenset(), failures or {})

    d = deleter.Deleter(fake, discover=discover, now=lambda: NOW, ordered=ordered)
    asyncio.run(d.delete("ns"))


CMS = "/api/v1/namespaces/ns/configmaps"
WIDGETS = "/apis/example.com/v1/namespaces/ns/widgets"
PODS = "/api/v1/namespaces/ns/pods"
FINALIZE = "/api/v1/namespaces/ns/finalize"


def condition(fake: fakeclient.FakeClient, condition_type: str) -> dict[str, Any]:
    found: dict[str, Any] = next(
        c for c in namespace(fake)["status"]["conditions"] if c["type"] == condition_type
    )
    return found


def test_empty_content_is_deleted_and_the_namespace_finalized() -> None:
    fake = fake_api({CMS: [item("a"), item("b")], WIDGETS: [item("w")]})
    no_collection = ALL - {"deletecollection"}
    run(
        fake,
        [api("", "configmaps"), api("example.com", "widgets", no_collection), api("", "nodes", ALL, False)],
    )
    assert ("delete-collection", CMS) in calls(fake)
    assert ("delete", f"{WIDGETS}/w") in calls(fake)  # no deletecollection verb: list and delete each
    assert not any("nodes" in path for _, path in calls(fake))  # cluster-scoped: not the namespace's
    assert namespace(fake)["status"]["phase"] == "Terminating"
    assert namespace(fake)["spec"]["finalizers"] == ["example.com/other"]  # only its own token goes
    assert calls(fake)[-1] == ("update", FINALIZE)
    assert condition(fake, conditions.CONTENT_REMAINING)["reason"] == "ContentRemoved"


def test_method_not_allowed_falls_back_to_deleting_each_item() -> None:
    fake = fake_api({CMS: [item("a")]}, failing={("delete-collection", CMS): 405})
    run(fake, [api("", "configmaps")])
    assert ("delete", f"{CMS}/a") in calls(fake) and calls(fake)[-1] == ("update", FINALIZE)


def test_content_held_by_finalizers_waits_15_seconds_with_conditions() -> None:
    fake = fake_api({CMS: [item("held", "example.com/hold"), item("gone")]})
    with pytest.raises(deleter.ResourcesRemaining) as caught:
        run(fake, [api("", "configmaps")])
    assert caught.value.estimate == conditions.FINALIZER_ESTIMATE_SECONDS
    assert ("update", FINALIZE) not in calls(fake)
    assert condition(fake, conditions.FINALIZERS_REMAINING)["message"] == (
        "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
    )
    assert condition(fake, conditions.CONTENT_REMAINING)["message"] == (
        "Some resources are remaining: configmaps. has 1 resource instances"
    )


def test_pods_in_their_grace_period_give_the_estimate() -> None:
    running = item("p", spec={"terminationGracePeriodSeconds": 30}, status={"phase": "Running"})
    fake = fake_api({PODS: [running]}, client=KeepingPods())
    with pytest.raises(deleter.ResourcesRemaining) as caught:
        run(fake, [api("", "pods")])
    assert caught.value.estimate == 30  # terminating for 10 s of 30
    assert conditions.requeue_seconds(caught.value.estimate) == 16


def test_ordered_namespace_deletion_deletes_nothing_else_while_pods_remain() -> None:
    running = item("p", spec={"terminationGracePeriodSeconds": 30}, status={"phase": "Running"})
    apis = [api("", "configmaps"), api("", "pods")]
    # OrderedNamespaceDeletion off (v1.32's default): every resource is emptied in one round.
    fake = fake_api({PODS: [running], CMS: [item("c", "example.com/hold")]}, client=KeepingPods())
    with pytest.raises(deleter.ResourcesRemaining):
        run(fake, apis)
    assert ("delete-collection", CMS) in calls(fake)
    assert condition(fake, conditions.CONTENT_REMAINING)["status"] == "True"
    # On: the pods go first; the rest waits for them, and no content totals are written.
    fake = fake_api({PODS: [running], CMS: [item("c", "example.com/hold")]}, client=KeepingPods())
    with pytest.raises(deleter.ResourcesRemaining) as caught:
        run(fake, apis, ordered=True)
    assert caught.value.estimate == 30
    assert ("delete-collection", PODS) in calls(fake)
    assert not any(path.startswith(CMS) for _, path in calls(fake))
    assert condition(fake, conditions.CONTENT_REMAINING)["status"] == "False"


def test_ordered_namespace_deletion_goes_on_once_the_pods_are_gone() -> None:
    fake = fake_api({CMS: [item("a")]})
    run(fake, [api("", "pods"), api("", "configmaps")], ordered=True)
    assert ("delete-collection", CMS) in calls(fake) and calls(fake)[-1] == ("update", FINALIZE)


def test_items_left_without_finalizer_or_estimate_are_an_error() -> None:
    fake = fake_api({CMS: [item("stuck")]}, client=KeepingPods())
    with pytest.raises(
        deleter.DeletionError,
        match="unexpected items still remain in namespace: ns for gvr: /v1, Resource=configmaps",
    ):
        run(fake, [api("", "configmaps")])
    failure = condition(fake, conditions.CONTENT_FAILURE)
    assert (failure["status"], failure["reason"]) == ("True", "ContentDeletionFailed")
    assert failure["message"].startswith("Failed to delete all resource types, 1 remaining: unexpected items")


def test_partial_discovery_is_reported_and_what_was_found_is_still_deleted() -> None:
    fake = fake_api({CMS: [item("a")]})
    with pytest.raises(deleter.DeletionError, match="unable to retrieve the complete list of server APIs"):
        run(fake, [api("", "configmaps")], {"metrics.k8s.io/v1beta1": "the server is currently unable"})
    assert ("delete-collection", CMS) in calls(fake) and ("update", FINALIZE) not in calls(fake)
    found = condition(fake, conditions.DISCOVERY_FAILURE)
    assert found["message"] == (
        "Discovery failed for some groups, 1 failing: unable to retrieve the complete list of server APIs: "
        "metrics.k8s.io/v1beta1: the server is currently unable"
    )


def test_a_namespace_not_being_deleted_is_left_alone() -> None:
    fake = fake_api({CMS: [item("a")]})
    del namespace(fake)["metadata"]["deletionTimestamp"]
    run(fake, [api("", "configmaps")])
    assert calls(fake) == [("get", "/api/v1/namespaces/ns")]


def test_finalize_is_retried_for_as_long_as_it_conflicts() -> None:
    # client-go's RetryOnConflict would give up after 5; upstream's deleter never does.
    fake = fake_api({})
    fake.fail(
        "update", FINALIZE, kubeclient.ApiError(409, "Conflict", "the object has been modified"), times=8
    )
    run(fake, [api("", "configmaps")])
    assert [verb for verb, path in calls(fake) if path == FINALIZE] == ["update"] * 9
    assert namespace(fake)["spec"]["finalizers"] == ["example.com/other"]


def test_failed_rounds_retry_within_a_minute() -> None:
    # Upstream's nsControllerRateLimiter: 5 ms doubling to 60 s (not 1000 s), with the bucket.
    limiter = manager.retry_limiter(namespace_controller.SPEC)
    assert [limiter.when("ns", n) for n in (1, 2, 14, 15, 30)] == [0.005, 0.01, 40.96, 60.0, 60.0]
