"""The collector's decisions (upstream attemptToDeleteItem / attemptToOrphan) against the
testing kit's fake API server.

Each case is upstream's classification: owners read live are solid, dangling (404 or another
uid) or waiting (foreground deletion in progress); the table says which write follows.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from kcm_controllers.garbagecollector import controller as garbagecollector
from kcm_controllers.garbagecollector import graph
from kcm_shared import runtime
from kcm_shared.apimachinery import codec
from kcm_shared.client import discovery
from kcm_shared.runtime import events
from kcm_shared.testing import fakeclient

CONFIGMAPS = "/api/v1/namespaces/ns/configmaps"
MAPPER = discovery.Mapper(
    tuple(
        discovery.parse_resource_list(
            "",
            "v1",
            {
                "resources": [
                    {
                        "name": "configmaps",
                        "kind": "ConfigMap",
                        "namespaced": True,
                        "verbs": ["delete", "list", "watch"],
                    },
                    {
                        "name": "nodes",
                        "kind": "Node",
                        "namespaced": False,
                        "verbs": ["delete", "list", "watch"],
                    },
                ]
            },
            preferred=True,
        )
    )
)


def path_of(obj: dict[str, Any]) -> str:
    m = obj["metadata"]
    if m.get("namespace"):
        return f"/api/v1/namespaces/{m['namespace']}/configmaps/{m['name']}"
    return f"/api/v1/nodes/{m['name']}"


def api_of(objects: list[dict[str, Any]]) -> fakeclient.FakeClient:
    """The API server holding `objects` (ConfigMaps, and Nodes for cluster-scoped ones)."""
    return fakeclient.FakeClient({path_of(o): o for o in objects})


def deletes(api: fakeclient.FakeClient) -> list[tuple[str, Any]]:
    return [(path, options) for _, path, options in api.calls("delete")]


def patches(api: fakeclient.FakeClient) -> list[tuple[str, Any]]:
    return [(path, body) for _, path, body in api.calls("patch")]


class RecordingContext(runtime.Context):
    async def hand_off(self, key: str) -> None:
        self.handed_off.append(key)

    handed_off: list[str]


def cm(name: str, uid: str, *owners: dict[str, Any], namespace: str = "ns", **meta: Any) -> dict[str, Any]:
    metadata = {"name": name, "namespace": namespace, "uid": uid, "resourceVersion": "7", **meta}
    if owners:
        metadata["ownerReferences"] = list(owners)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}


def ref(name: str, uid: str, kind: str = "ConfigMap", **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": kind, "name": name, "uid": uid, **extra}


def collector(api: fakeclient.FakeClient) -> tuple[garbagecollector.GarbageCollector, RecordingContext]:
    ctx = RecordingContext("gc", api, {}, lambda key: None, events.EventRecorder(api, "gc"))
    ctx.handed_off = []
    gc = garbagecollector.GarbageCollector(ctx)
    gc.mapper = MAPPER
    for obj in api.objects.values():
        view = msgspec.convert(obj, codec.Meta)
        m = view.metadata
        kind = obj["kind"]
        gc.graph.observe(graph.Identity("v1", kind, m.name, m.uid, m.namespace), m)
    return gc, ctx


def run(gc: garbagecollector.GarbageCollector, key: str) -> runtime.Result | None:
    return asyncio.run(gc.reconcile(key))


FOREGROUND_OWNER: dict[str, Any] = {
    "deletionTimestamp": "2026-01-01T00:00:00Z",
    "finalizers": ["foregroundDeletion"],
}


@pytest.mark.parametrize(
    ("objects", "deleted", "policy", "patched_refs"),
    [
        pytest.param([cm("dep", "d", ref("gone", "g"))], "dep", "Background", None, id="all-owners-dangling"),
        pytest.param(
            [cm("dep", "d", ref("own", "stale-uid")), cm("own", "o")],
            "dep",
            "Background",
            None,
            id="owner-uid-mismatch",
        ),
        pytest.param([cm("dep", "d", ref("own", "o")), cm("own", "o")], None, None, None, id="solid-owner"),
        pytest.param(
            [cm("dep", "d", ref("own", "o"), ref("gone", "g")), cm("own", "o")],
            None,
            None,
            ["o"],
            id="solid-plus-dangling-patches-reference-away",
        ),
        pytest.param(
            [
                cm("dep", "d", ref("own", "o"), ref("fg", "f")),
                cm("own", "o"),
                cm("fg", "f", **FOREGROUND_OWNER),
            ],
            None,
            None,
            ["o"],
            id="solid-plus-waiting-patches-reference-away",
        ),
        pytest.param(
            [
                cm("dep", "d", ref("fg", "f")),
                cm("fg", "f", **FOREGROUND_OWNER),
                cm("sub", "s", ref("dep", "d")),
            ],
            "dep",
            "Foreground",
            None,
            id="waiting-with-own-dependents-goes-foreground",
        ),
        pytest.param(
            [cm("dep", "d", ref("fg", "f")), cm("fg", "f", **FOREGROUND_OWNER)],
            "dep",
            "Background",
            None,
            id="waiting-without-dependents-goes-background",
        ),
        pytest.param(
            [cm("dep", "d", ref("gone", "g"), finalizers=["orphan"])],
            "dep",
            "Orphan",
            None,
            id="own-orphan-finalizer",
        ),
        pytest.param(
            [cm("dep", "d", ref("gone", "g", kind="ConfigMap"), namespace="")],
            None,
            None,
            None,
            id="cluster-scoped-dependent-of-namespaced-owner-left-alone",
        ),
    ],
)
def test_attempt_to_delete(
    objects: list[dict[str, Any]], deleted: str | None, policy: str | None, patched_refs: list[str] | None
) -> None:
    api = api_of(objects)
    gc, _ = collector(api)
    assert run(gc, "delete/d") is None
    if deleted is None:
        assert deletes(api) == []
    else:
        ((path, options),) = deletes(api)
        assert path == f"{CONFIGMAPS}/{deleted}"
        assert options["propagationPolicy"] == policy
        assert options["preconditions"] == {"uid": "d", "resourceVersion": "7"}
    if patched_refs is None:
        assert patches(api) == []
    else:
        ((_, body),) = patches(api)
        assert [r["uid"] for r in body["metadata"]["ownerReferences"]] == patched_refs
        assert body["metadata"]["resourceVersion"] == "7"


def test_absent_object_is_a_virtual_delete_handing_off_its_dependents() -> None:
    api = api_of([cm("dep", "d", ref("gone", "g"))])
    gc, ctx = collector(api)
    assert gc.graph.get("g") is not None  # virtual owner
    assert run(gc, "delete/g") is None
    assert gc.graph.get("g") is None
    assert ctx.handed_off == ["delete/d"]
    assert deletes(api) == []  # the dependent itself is decided by its own key


def test_unknown_owner_kind_is_retried_after_discovery() -> None:
    api = api_of([cm("dep", "d", ref("w", "w", kind="Widget"))])
    gc, _ = collector(api)
    result = run(gc, "delete/d")
    assert result is not None and result.requeue_after == garbagecollector.DISCOVERY_PERIOD
    assert deletes(api) == []


def test_foreground_owner_waits_for_blocking_dependents_then_drops_its_finalizer() -> None:
    owner = cm("own", "o", **FOREGROUND_OWNER)
    api = api_of([owner, cm("dep", "d", ref("own", "o", blockOwnerDeletion=True))])
    gc, ctx = collector(api)
    assert run(gc, "delete/o") is None
    assert ctx.handed_off == ["delete/d"] and patches(api) == []
    del api.objects[f"{CONFIGMAPS}/dep"]
    gc.graph.observe_delete(graph.Identity("v1", "ConfigMap", "dep", "d", "ns"))
    assert run(gc, "delete/o") is None
    ((path, body),) = patches(api)
    assert path == f"{CONFIGMAPS}/own" and body["metadata"]["finalizers"] == []


def test_orphan_removes_the_owner_from_dependents_then_the_finalizer() -> None:
    owner = cm("own", "o", deletionTimestamp="2026-01-01T00:00:00Z", finalizers=["orphan"])
    api = api_of([owner, cm("dep", "d", ref("own", "o"), ref("other", "x"))])
    gc, _ = collector(api)
    assert run(gc, "orphan/o") is None
    # The dependent: a strategic merge patch deleting the reference by uid, guarded by its uid.
    patch_types = [a.patch_type for a in api.actions if a.verb == "patch"]
    assert patches(api)[0] == (
        f"{CONFIGMAPS}/dep",
        {"metadata": {"uid": "d", "ownerReferences": [{"$patch": "delete", "uid": "o"}]}},
    )
    assert patch_types[0] == "strategic"
    assert [(p, b["metadata"].get("finalizers")) for p, b in patches(api)[1:]] == [(f"{CONFIGMAPS}/own", [])]
    assert patch_types[1:] == ["merge"]
