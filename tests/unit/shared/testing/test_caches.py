"""kcm_shared.testing.caches and the Cache's hand-filling methods (seed, evict, feed): a cache
built without NATS reads like one the stream filled."""

from __future__ import annotations

from typing import Any

import msgspec
from kcm_shared.apimachinery import codec, gvr
from kcm_shared.runtime import cache
from kcm_shared.testing import caches

PODS = gvr.Resource("", "v1", "pods")


def pod(name: str, rv: str, owner: str = "", namespace: str = "ns") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "resourceVersion": rv}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "X", "name": owner, "uid": owner}]
    return {"metadata": meta}


def test_new_holds_the_objects_indexed_synced_and_caught_up() -> None:
    store = caches.new(
        PODS,
        codec.Meta,
        [pod("a", "3", owner="o1"), pod("b", "4", namespace="other")],
        resource_version="9",
        keep_raw=True,
    )
    assert store.has_synced() and store.last_resource_version == "9"
    assert sorted(store.keys()) == ["ns/a", "other/b"]
    assert [o.metadata.name for o in store.list("other")] == ["b"]
    assert [o.metadata.name for o in store.by_index(cache.OWNER_UID_INDEX, "o1")] == ["a"]
    assert msgspec.json.decode(store.raw("ns/a") or b"") == pod("a", "3", owner="o1")


def test_deliver_goes_through_ordering_and_the_handlers() -> None:
    store = caches.new(PODS, codec.Meta, [pod("a", "3")])
    seen: list[tuple[str, str]] = []
    store.add_handler(
        lambda o: seen.append(("add", o.metadata.resource_version)),
        lambda _, o: seen.append(("update", o.metadata.resource_version)),
        lambda o: seen.append(("delete", o.metadata.resource_version)),
    )
    caches.deliver(store, caches.MODIFIED, pod("a", "2"))  # older than held: ignored
    caches.deliver(store, caches.MODIFIED, pod("a", "5"))
    caches.deliver(store, caches.ADDED, pod("b", "6"))
    caches.deliver(store, caches.DELETED, pod("a", "7"))
    assert seen == [("update", "5"), ("add", "6"), ("delete", "7")]
    assert store.keys() == ["ns/b"]


def test_a_snapshot_fed_again_deletes_what_it_no_longer_names() -> None:
    store = caches.new(PODS, codec.Meta, [pod("a", "3"), pod("b", "4")], resource_version="4")
    deleted: list[str] = []
    store.add_handler(on_delete=lambda o: deleted.append(o.metadata.name))
    store.feed([caches.message(PODS, caches.ADDED, pod("b", "4")), caches.marker(PODS, "8")], snapshot=True)
    assert deleted == ["a"] and store.last_resource_version == "8"


def test_seed_and_evict_skip_the_handlers() -> None:
    store = caches.new(PODS, codec.Meta)
    called: list[str] = []
    store.add_handler(
        lambda o: called.append("add"),
        lambda _, o: called.append("update"),
        lambda o: called.append("delete"),
    )
    view = msgspec.convert(pod("a", "1", owner="o1"), codec.Meta)
    store.seed(view, b"{}")
    assert store.get("ns", "a") is view and store.by_index(cache.OWNER_UID_INDEX, "o1") == [view]
    assert store.evict("ns/a") is view and store.evict("ns/a") is None
    assert len(store) == 0 and store.by_index(cache.OWNER_UID_INDEX, "o1") == []
    assert called == []
