"""The resourcequota controller's handlers, resync key and sync, on caches fed by hand and the
testing kit's fake API server (no NATS, no API server)."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any, cast

import pytest
from kcm_controllers.resourcequota import controller as rq
from kcm_shared import runtime
from kcm_shared.runtime import cache
from kcm_shared.testing import caches, fakeclient

NS = "ns"


def feed(store: cache.Cache[Any], objects: list[dict[str, Any]], rv: str = "50") -> None:
    """The stream's state at start-up: the objects, then the watcher's progress marker."""
    messages = [caches.message(store.resource, caches.ADDED, obj) for obj in objects]
    store.feed([*messages, caches.marker(store.resource, rv)], snapshot=True)


def quota(
    hard: dict[str, str], used: dict[str, str] | None = None, rv: str = "10", **spec: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "q", "namespace": NS, "resourceVersion": rv},
        "spec": {"hard": hard, **spec},
    }
    if used is not None:
        body["status"] = {"hard": hard, "used": used}
    return body


def pod(name: str, rv: str, cpu: str = "", phase: str = "Pending", ns: str = NS) -> dict[str, Any]:
    resources = {"requests": {"cpu": cpu}} if cpu else {}
    return {
        "metadata": {"name": name, "namespace": ns, "resourceVersion": rv},
        "spec": {"containers": [{"name": "c", "resources": resources}]},
        "status": {"phase": phase},
    }


def setup(
    quotas: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    claims: list[dict[str, Any]] | None = None,
    args: argparse.Namespace | None = None,
) -> tuple[rq.ResourceQuotaController, list[str], list[str], fakeclient.FakeClient]:
    stores: dict[Any, cache.Cache[Any]] = {res: caches.new(res, view) for res, view in rq.SPEC.views.items()}
    enqueued: list[str] = []
    handed: list[str] = []
    client = fakeclient.FakeClient({f"/api/v1/namespaces/{NS}/resourcequotas/q": q for q in quotas})

    async def hand_off(key: str) -> None:
        handed.append(key)

    ctx = runtime.Context("resourcequota-controller", client, stores, enqueued.append, cast(Any, None))
    ctx.hand_off = hand_off  # type: ignore[method-assign]
    if args is not None:
        ctx.args = args
    rqc = rq.ResourceQuotaController(ctx, 300.0)
    feed(stores[rq.QUOTAS], quotas)
    feed(stores[rq.PODS], pods)
    feed(stores[rq.CLAIMS], claims or [])
    for res in rq.COUNTED[1:]:
        if res != rq.CLAIMS:
            feed(stores[res], [])
    enqueued.clear()
    return rqc, enqueued, handed, client


def test_the_resync_key_hands_every_quota_to_its_owner_and_requeues_itself() -> None:
    rqc, _, handed, _ = setup([quota({"pods": "5"})], [])
    assert list(rqc.keys()) == [rq.RESYNC_KEY, "ns/q"]
    result = asyncio.run(rqc.reconcile(rq.RESYNC_KEY))
    assert result == runtime.Result(requeue_after=300.0)
    assert handed == ["ns/q"]


def test_deletes_and_usage_changes_enqueue_the_quotas_tracking_them() -> None:
    tracked = quota({"pods": "5"}, {"pods": "2"})
    rqc, enqueued, _, _ = setup([tracked], [pod("a", "20", "1"), pod("b", "21"), pod("x", "22", ns="other")])
    pods = rqc.caches[rq.PODS]
    caches.deliver(
        pods,
        caches.MODIFIED,
        {**pod("b", "23"), "metadata": {**pod("b", "23")["metadata"], "labels": {"x": "y"}}},
    )
    assert enqueued == []  # a change that costs nothing more or less
    caches.deliver(pods, caches.MODIFIED, pod("a", "24", "1", phase="Succeeded"))
    assert enqueued == ["ns/q"]
    caches.deliver(pods, caches.DELETED, pod("b", "25"))
    caches.deliver(pods, caches.DELETED, pod("x", "26", ns="other"))
    assert enqueued == ["ns/q", "ns/q"]
    configmaps = rqc.caches[rq.CONFIGMAPS]
    caches.deliver(
        configmaps, caches.DELETED, {"metadata": {"name": "c", "namespace": NS, "resourceVersion": "27"}}
    )
    assert enqueued == ["ns/q", "ns/q"]  # the quota does not track configmaps


def test_sync_writes_hard_and_used_with_a_resource_version_precondition() -> None:
    stale = quota({"pods": "5", "requests.cpu": "2"}, {"pods": "9", "requests.cpu": "9", "secrets": "1"})
    rqc, _, _, client = setup(
        [stale], [pod("a", "20", "500m"), pod("b", "21", "250m"), pod("c", "22", phase="Failed")]
    )
    assert asyncio.run(rqc.reconcile("ns/q")) is None
    ((_, path, body),) = client.calls("patch")
    assert path == "/api/v1/namespaces/ns/resourcequotas/q/status"
    assert body["metadata"] == {"resourceVersion": "10"}
    assert body["status"]["used"] == {"pods": "2", "requests.cpu": "750m", "secrets": None}
    assert body["status"]["hard"] == {"pods": "5", "requests.cpu": "2"}
    # Nothing changed since: the next sync starts from that write and writes nothing.
    assert asyncio.run(rqc.reconcile("ns/q")) is None
    assert len(client.calls("patch")) == 1


@pytest.mark.parametrize(("gate", "used"), [(True, "3Gi"), (False, "1Gi")])
def test_allocated_storage_counts_only_with_recover_volume_expansion_failure_on(
    gate: bool, used: str
) -> None:
    # A claim whose request was lowered back to 1Gi after an expansion to 3Gi failed.
    claim = {
        "metadata": {"name": "c", "namespace": NS, "resourceVersion": "20"},
        "spec": {"resources": {"requests": {"storage": "1Gi"}}},
        "status": {"allocatedResources": {"storage": "3Gi"}},
    }
    args = argparse.Namespace(feature_gates={"RecoverVolumeExpansionFailure": gate})
    rqc, _, _, client = setup([quota({"requests.storage": "10Gi"})], [], [claim], args)
    assert asyncio.run(rqc.reconcile("ns/q")) is None
    ((_, _, body),) = client.calls("patch")
    assert body["status"]["used"] == {"requests.storage": used}


def test_a_resource_nobody_serves_stays_out_of_used_and_is_looked_for_again() -> None:
    rqc, _, _, client = setup([quota({"pods": "5", "count/widgets.example.com": "1"})], [])

    async def no_widgets(evaluator: Any, namespace: str) -> None:
        return None

    rqc._list = no_widgets  # type: ignore[method-assign]
    rqc._published_now = lambda: asyncio.sleep(0, result=set())  # type: ignore[method-assign]

    async def nothing_known(group: str, resource: str) -> None:
        return None

    rqc._resource = nothing_known  # type: ignore[method-assign]
    result = asyncio.run(rqc.reconcile("ns/q"))
    assert result == runtime.Result(requeue_after=rq.UNKNOWN_RETRY)
    assert client.calls("patch")[0][2]["status"]["used"] == {"pods": "0"}


def test_a_deleted_quota_is_synced_and_what_was_kept_for_it_freed() -> None:
    rqc, enqueued, _, client = setup([quota({"pods": "5"})], [pod("a", "20")])
    assert asyncio.run(rqc.reconcile("ns/q")) is None
    assert "ns/q" in rqc._counted and len(rqc.own_writes) == 1
    enqueued.clear()
    gone = client.objects["/api/v1/namespaces/ns/resourcequotas/q"]
    caches.deliver(
        rqc.quotas, caches.DELETED, {**gone, "metadata": {**gone["metadata"], "resourceVersion": "12"}}
    )
    assert enqueued == ["ns/q"]
    assert asyncio.run(rqc.reconcile("ns/q")) is None
    assert "ns/q" not in rqc._counted and len(rqc.own_writes) == 0


def test_listing_an_uncached_resource_is_not_bounded_by_the_cache_wait(monkeypatch: Any) -> None:
    # The limit is for caches that may never catch up; a slow paginated list still ends.
    rqc, _, _, client = setup([quota({"pods": "5", "count/widgets.example.com": "1"})], [])
    monkeypatch.setattr(rq, "CATCH_UP_LIMIT", 0.05)

    async def slow_widgets(evaluator: Any, namespace: str) -> list[Any]:
        await asyncio.sleep(0.2)  # a list slower than the cache limit
        return [{"metadata": {"name": "w", "namespace": NS}}]

    async def unknown(group: str, resource: str) -> None:
        return None  # not in discovery's last answer: counted by listing

    rqc._list = slow_widgets  # type: ignore[method-assign]
    rqc._resource = unknown  # type: ignore[method-assign]
    assert asyncio.run(rqc.reconcile("ns/q")) is None
    assert client.calls("patch")[0][2]["status"]["used"] == {"pods": "0", "count/widgets.example.com": "1"}
