"""The ttl-controller: upstream's boundary table with its hysteresis as a walk over cluster
sizes, the annotation's parsing, and the reconcile against the testing kit's fake client
(upstream ttl_controller_test.go TestPatchNode / TestUpdateNodeIfNeeded cases)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kcm_controllers.ttl import boundaries
from kcm_controllers.ttl import controller as ttl
from kcm_shared.apimachinery import codec
from kcm_shared.testing import caches, fakeclient


def walk(sizes: list[int]) -> list[int]:
    """The TTL after the cluster grows or shrinks one node at a time through `sizes`."""
    step, count, out = 0, 0, []
    for size in sizes:
        while count < size:
            count += 1
            step = boundaries.step_up(step, count)
        while count > size:
            count -= 1
            step = boundaries.step_down(step, count)
        out.append(boundaries.BOUNDARIES[step].ttl_seconds)
    return out


def test_the_ttl_grows_past_each_size_max() -> None:
    assert walk([100, 101, 500, 501, 1000, 1001, 2000, 2001]) == [0, 15, 15, 30, 30, 60, 60, 300]


def test_the_ttl_shrinks_only_below_each_size_min() -> None:
    assert walk([2001, 1800, 1799, 900, 899, 450, 449, 90, 89, 0]) == [300, 300, 60, 60, 30, 30, 15, 15, 0, 0]


def test_hovering_around_a_boundary_does_not_flap() -> None:
    assert walk([101, 95, 100, 90, 101, 89, 100]) == [15, 15, 15, 15, 15, 0, 0]


def test_a_jump_takes_every_step_at_once() -> None:
    assert boundaries.step_up(0, 5000) == 4
    assert boundaries.step_down(4, 0) == 0


@pytest.mark.parametrize(
    ("value", "want"),
    [
        (None, None),
        ("0", 0),
        ("15", 15),
        ("+15", 15),
        ("-1", -1),
        ("", None),
        ("x", None),
        ("1.5", None),
        ("\u0661\u0665", None),  # Arabic-Indic digits: not Go decimal digits
    ],
)
def test_parse_ttl(value: str | None, want: int | None) -> None:
    assert boundaries.parse_ttl(value) == want


def node(name: str, annotation: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if annotation is not None:
        meta["annotations"] = {ttl.TTL_ANNOTATION: annotation}
    return {"metadata": meta}


class Harness:
    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        self.client = fakeclient.FakeClient()
        for doc in nodes:
            self.client.add(f"/api/v1/nodes/{doc['metadata']['name']}", doc)
        self.nodes = caches.new(ttl.NODES, codec.Meta)
        self.queued: list[str] = []
        self.tc = ttl.TTLController(self.client, self.nodes, self.queued.append)
        self.tc.register()
        for doc in nodes:
            caches.deliver(self.nodes, "ADDED", doc)

    def sync(self, key: str) -> None:
        asyncio.run(self.tc.reconcile(key))


@pytest.mark.parametrize(("annotation", "patched"), [(None, True), ("0", False), ("15", True), ("bad", True)])
def test_the_annotation_is_patched_only_when_it_differs(annotation: str | None, patched: bool) -> None:
    h = Harness([node("n1", annotation)])
    assert h.queued == (["n1"] if patched else [])
    h.sync("n1")
    calls = h.client.calls("patch")
    if patched:
        assert calls == [
            ("patch", "/api/v1/nodes/n1", {"metadata": {"annotations": {ttl.TTL_ANNOTATION: "0"}}})
        ]
    else:
        assert calls == []


def test_crossing_a_boundary_enqueues_every_node() -> None:
    h = Harness([node(f"n{i}", "0") for i in range(100)])
    assert h.queued == [] and h.tc.desired == 0
    caches.deliver(h.nodes, "ADDED", node("n100", "0"))
    assert h.tc.desired == 15
    assert set(h.queued) == {f"n{i}" for i in range(101)}
    for i in range(101):  # what the patches bring back
        caches.deliver(h.nodes, "MODIFIED", node(f"n{i}", "15"))
    h.queued.clear()
    for i in range(11):
        caches.deliver(h.nodes, "DELETED", node(f"n{i}", "15"))
    assert h.tc.desired == 15 and h.queued == []  # 90 nodes: still 15 s
    caches.deliver(h.nodes, "DELETED", node("n11", "15"))
    assert h.tc.desired == 0 and set(h.queued) == {f"n{i}" for i in range(12, 101)}
