"""Scenarios for the store: resourceVersions, history, resumable watches and slow watchers."""

from __future__ import annotations

import asyncio
from typing import Any

from kcm_apiserver.store import ADDED, BOOKMARK, DELETED, MODIFIED, Event, Store


def obj(name: str, ns: str = "default", **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "labels": labels}}


def drain(queue: asyncio.Queue[Event]) -> list[tuple[str, str, int]]:
    out = []
    while not queue.empty():
        e = queue.get_nowait()
        out.append((e.type, e.name, e.rv))
    return out


def test_every_write_takes_the_next_resource_version() -> None:
    store = Store()
    a = store.put("/configmaps", obj("a"))
    b = store.put("/pods", obj("b"))
    final = store.remove("/configmaps", "default", "a")
    assert (a["metadata"]["resourceVersion"], b["metadata"]["resourceVersion"]) == ("1", "2")
    assert final is not None and final["metadata"]["resourceVersion"] == "3"


def test_list_is_sorted_by_namespace_then_name() -> None:
    store = Store()
    for ns, name in [("b", "x"), ("a", "z"), ("a", "y")]:
        store.put("/configmaps", obj(name, ns))
    assert [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in store.list("/configmaps", None)] == [
        ("a", "y"),
        ("a", "z"),
        ("b", "x"),
    ]
    assert [o["metadata"]["name"] for o in store.list("/configmaps", "a")] == ["y", "z"]


def test_watch_replays_history_after_the_given_version() -> None:
    store = Store()
    store.put("/configmaps", obj("a"))
    store.put("/configmaps", obj("b"))
    store.put("/configmaps", obj("a"))
    watcher = store.watch("/configmaps", None, None, since=1)
    assert drain(watcher.queue) == [(ADDED, "b", 2), (MODIFIED, "a", 3)]


def test_history_eviction_makes_old_versions_unresumable() -> None:
    store = Store(history=3)
    for i in range(5):
        store.put("/configmaps", obj(f"c{i}"))
    assert not store.resumable("/configmaps", 1)
    assert store.resumable("/configmaps", 2)
    assert store.resumable("/configmaps", 5)
    # Another resource's history is independent of this one's churn.
    assert store.resumable("/pods", 0)


def test_selector_watch_sees_leaving_objects_as_deleted_and_joining_as_added() -> None:
    store = Store()
    store.put("/configmaps", obj("a", app="web"))
    store.put("/configmaps", obj("b", app="db"))
    watcher = store.watch("/configmaps", None, lambda o: o["metadata"]["labels"].get("app") == "web", since=2)
    store.put("/configmaps", obj("a", app="db"))
    store.put("/configmaps", obj("b", app="web"))
    store.put("/configmaps", obj("c", app="db"))
    assert drain(watcher.queue) == [(DELETED, "a", 3), (ADDED, "b", 4)]


def test_namespace_watch_ignores_other_namespaces() -> None:
    store = Store()
    watcher = store.watch("/configmaps", "one", None, since=0)
    store.put("/configmaps", obj("a", "two"))
    store.put("/configmaps", obj("b", "one"))
    assert drain(watcher.queue) == [(ADDED, "b", 2)]


def test_a_slow_watcher_is_marked_overflowed_without_blocking_the_writer() -> None:
    store = Store(watch_queue=2)
    watcher = store.watch("/configmaps", None, None, since=0)
    for i in range(5):
        store.put("/configmaps", obj(f"c{i}"))
    assert watcher.overflowed.is_set()
    assert watcher.queue.qsize() == 2
    assert store.rv == 5


def test_bookmarks_are_queued_in_order_with_events() -> None:
    store = Store()
    watcher = store.watch("/configmaps", None, None, since=0)
    store.put("/configmaps", obj("a"))
    store.bookmark_all()
    assert drain(watcher.queue) == [(ADDED, "a", 1), (BOOKMARK, "", 1)]


def test_stopped_watchers_receive_nothing() -> None:
    store = Store()
    watcher = store.watch("/configmaps", None, None, since=0)
    store.stop_watch(watcher)
    store.put("/configmaps", obj("a"))
    assert watcher.queue.empty()
    assert store.watcher_count() == 0
