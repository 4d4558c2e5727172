"""kcm_shared.controllerutil.endpoints.endpointslicetracker: upstream endpointslice_tracker_test.go's cases."""

from __future__ import annotations

import pytest
from kcm_shared.controllerutil.endpoints.endpointslicetracker import EndpointSliceTracker, Ref

SVC = ("ns1", "svc1")


def test_update_then_should_sync_only_newer_generations() -> None:
    tracker = EndpointSliceTracker()
    tracker.update(SVC, Ref("a", 2))
    assert tracker.has(SVC, Ref("a", 2))
    assert not tracker.should_sync(SVC, Ref("a", 1))  # older than our write
    assert not tracker.should_sync(SVC, Ref("a", 2))  # our own write
    assert tracker.should_sync(SVC, Ref("a", 3))  # someone else's change
    assert tracker.should_sync(SVC, Ref("b", 1))  # a slice we never wrote
    assert tracker.should_sync(("ns1", "other"), Ref("a", 1))  # a Service we never wrote for


@pytest.mark.parametrize(
    ("tracked", "provided", "stale"),
    [
        ({}, [Ref("a", 1)], False),  # nothing tracked: nothing to be stale against
        ({"a": 1}, [Ref("a", 1)], False),  # matching generation
        ({"a": 2}, [Ref("a", 1)], True),  # cache older than our write
        ({"a": 1}, [Ref("a", 2)], False),  # cache newer than our write
        ({"a": 1}, [], True),  # created by us, not in the cache yet
        ({"a": -1}, [], False),  # deleted by us, gone from the cache
        ({"a": -1}, [Ref("a", 1)], True),  # deleted by us, still in the cache
        ({"a": 1, "b": -1}, [Ref("a", 1), Ref("c", 1)], False),
    ],
)
def test_stale_slices(tracked: dict[str, int], provided: list[Ref], stale: bool) -> None:
    tracker = EndpointSliceTracker()
    for uid, generation in tracked.items():
        if generation == -1:
            tracker.expect_deletion(SVC, Ref(uid, 1))
        else:
            tracker.update(SVC, Ref(uid, generation))
    assert tracker.stale_slices(SVC, provided) is stale


def test_handle_deletion_tells_expected_from_unexpected() -> None:
    tracker = EndpointSliceTracker()
    tracker.update(SVC, Ref("a", 1))
    tracker.expect_deletion(SVC, Ref("b", 1))
    assert tracker.handle_deletion(SVC, Ref("b", 1))  # our own deletion: no sync
    assert not tracker.handle_deletion(SVC, Ref("a", 1))  # someone deleted our slice: sync
    assert not tracker.has(SVC, Ref("a", 1))
    assert not tracker.handle_deletion(SVC, Ref("z", 1))  # never tracked


def test_delete_service_forgets_everything() -> None:
    tracker = EndpointSliceTracker()
    tracker.update(SVC, Ref("a", 5))
    tracker.delete_service(SVC)
    assert not tracker.stale_slices(SVC, [])
    assert tracker.should_sync(SVC, Ref("a", 1))
