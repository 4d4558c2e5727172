"""The watcher's pure logic: relist diff, resourceVersion comparison, list item bodies, headers."""

from __future__ import annotations

import json

import msgspec
import pytest
from kcm_shared.bus import wire
from kcm_watcher import objects


def test_relist_syncs_missing_and_changed_and_finds_missed_deletes() -> None:
    held = {"s.a": "5", "s.b": "7", "s.gone": "3"}
    diff = objects.Relist(held)
    assert diff.needs_sync("s.a", "5") is False  # unchanged: not republished
    assert diff.needs_sync("s.b", "9") is True  # another version
    assert diff.needs_sync("s.new", "10") is True  # not in the stream
    assert diff.gone() == ["s.gone"]


def test_a_republishing_relist_syncs_every_listed_object_and_still_finds_missed_deletes() -> None:
    diff = objects.Relist({"s.a": "5", "s.gone": "3"}, republish=True)
    assert diff.needs_sync("s.a", "5") is True  # the stream may hold more than the allow-list
    assert diff.gone() == ["s.gone"]


def test_relist_of_empty_stream_syncs_everything_and_deletes_nothing() -> None:
    diff = objects.Relist({})
    assert diff.needs_sync("s.a", "1")
    assert diff.gone() == []


@pytest.mark.parametrize(
    ("rv", "target", "expected"),
    [
        ("10", "9", True),
        ("10", "10", True),
        ("9", "10", False),
        ("100", "99", True),
        ("abc", "abc", True),
        ("abc", "abd", False),
        ("", "1", False),
    ],
)
def test_reached_compares_numbers_as_numbers(rv: str, target: str, expected: bool) -> None:
    assert objects.reached(rv, target) is expected


@pytest.mark.parametrize(
    ("rv", "published", "expected"),
    [("5", None, False), ("5", "5", True), ("4", "5", True), ("6", "5", False), ("x", "5", False)],
)
def test_is_stale_only_for_events_not_newer_than_published(
    rv: str, published: str | None, expected: bool
) -> None:
    assert objects.is_stale(rv, published) is expected


def test_list_items_get_kind_and_api_version_like_watch_events() -> None:
    raw = b'{"metadata":{"name":"a","resourceVersion":"3"},"data":{"k":"v"}}'
    body = objects.TypeMeta("ConfigMapList", "v1").complete(raw, objects.decode_head(raw))
    assert json.loads(body) == {**json.loads(raw), "kind": "ConfigMap", "apiVersion": "v1"}


def test_list_items_that_carry_their_kind_stay_byte_for_byte() -> None:
    raw = b'{"apiVersion":"x.io/v1","kind":"Foo","metadata":{"name":"a"}}'
    assert objects.TypeMeta("FooList", "x.io/v1").complete(raw, objects.decode_head(raw)) == raw


def test_empty_list_item_gets_type_meta() -> None:
    body = objects.TypeMeta("PodList", "v1").complete(b"{}", objects.decode_head(b"{}"))
    assert json.loads(body) == {"kind": "Pod", "apiVersion": "v1"}


def test_headers_name_event_version_and_dedup_id() -> None:
    head = objects.decode_head(b'{"metadata":{"name":"a","uid":"u1","resourceVersion":"42"}}')
    assert objects.headers(wire.MODIFIED, head) == {
        "Kcm-Event": "MODIFIED",
        "Kcm-Resource-Version": "42",
        "Nats-Msg-Id": "u1:42:MODIFIED",
    }
    assert objects.ttl_of(wire.DELETED) is not None
    assert objects.ttl_of(wire.MODIFIED) is None


def test_held_entry_ignores_tombstones() -> None:
    assert objects.held_entry({"Kcm-Event": "DELETED", "Kcm-Resource-Version": "3"}) is None
    assert objects.held_entry({"Kcm-Event": "SYNC", "Kcm-Resource-Version": "3"}) == "3"
    assert objects.held_entry(None) is None


def test_watch_line_keeps_object_bytes() -> None:
    line = b'{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"p"}}}'
    event = objects.decode_line(line)
    assert event.type == "ADDED"
    assert bytes(event.object) == b'{"kind":"Pod","metadata":{"name":"p"}}'


def test_relist_after_a_reset_also_deletes_what_was_remembered_and_is_not_listed() -> None:
    # The stream lost "s.b" and "s.gone"; the watcher remembers both, the list has "s.b" only.
    diff = objects.Relist({"s.a": "5"}, remembered={"s.a": "5", "s.b": "7", "s.gone": "3"})
    assert diff.needs_sync("s.a", "5") is False
    assert diff.needs_sync("s.b", "7") is True  # missing from the stream: republished
    assert diff.gone() == ["s.gone"]


def test_progress_markers_are_not_held_objects() -> None:
    assert objects.held_entry({"Kcm-Resource-Version": "3"}) is None


def test_an_event_nested_too_deeply_is_a_decode_error_not_a_recursion_error() -> None:
    deep = b'{"type": "ADDED", "object": {"spec": ' + b"[" * 5000 + b"]" * 5000 + b"}}"
    with pytest.raises(msgspec.DecodeError):
        objects.decode_line(deep)
    with pytest.raises(msgspec.DecodeError):
        objects.decode_page(b'{"items": [' + deep + b"]}")
