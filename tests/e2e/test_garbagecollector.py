"""The garbage collector end to end: `kcm dev` with only the collector, driven with kubectl.

Owners and dependents are ConfigMaps, Secrets and instances of a CustomResourceDefinition,
which the apiserver serves without any other controller. Covers background, foreground (a
blockOwnerDeletion chain), orphan, a dangling owner that never existed, an owner reference
into another namespace (deleted, with the OwnerRefInvalidNamespace Event), and a custom
resource kind created after the collector started (picked up by its re-discovery), and an
owner deleted while every collector replica was killed. The last two tests run the whole
system for `kubectl delete deployment --cascade=foreground|orphan`.
"""

from __future__ import annotations

import json
import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ApiServer, NatsProc, schemaless_crd, wait_for
from tests.e2e import devstack
from tests.e2e.bus_stack import Stack

# Two replicas: work found while reconciling (fan-out) must reach the owner of its partition.
stack = devstack.stack_fixture(
    "--controllers", "garbagecollector", "--nodes", "0", "--replicas", "garbagecollector=2"
)

CRD = schemaless_crd("gc.example.com", "widgets", "Widget")


def owner_ref(owner: dict[str, Any], *, block: bool = False) -> dict[str, Any]:
    ref = {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
    }
    if block:
        ref["blockOwnerDeletion"] = True
    return ref


def create(s: devstack.DevStack, obj: dict[str, Any]) -> dict[str, Any]:
    out = s.kubectl("create", "-f", "-", "-o", "json", input=json.dumps(obj)).stdout
    created: dict[str, Any] = json.loads(out)
    return created


def configmap(name: str, *owners: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if owners:
        meta["ownerReferences"] = list(owners)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


def get(s: devstack.DevStack, kind: str, name: str, namespace: str = "default") -> dict[str, Any] | None:
    res = s.kubectl("get", kind, name, "-n", namespace, "-o", "json", "--ignore-not-found")
    return json.loads(res.stdout) if res.stdout.strip() else None


def gone(s: devstack.DevStack, kind: str, *names: str, namespace: str = "default") -> bool:
    return all(get(s, kind, name, namespace) is None for name in names)


@pytest.fixture(scope="module")
def gc(stack: devstack.DevStack) -> Iterator[devstack.DevStack]:
    # Created once the collector runs: its kind is unknown at start and must be discovered.
    stack.kubectl("create", "-f", "-", input=json.dumps(CRD))
    stack.kubectl("create", "namespace", "gc-other")
    yield stack


def test_background_deletes_dependents_and_drops_dangling_references(gc: devstack.DevStack) -> None:
    owner = create(gc, configmap("bg-owner"))
    keeper = create(gc, configmap("bg-keeper"))
    create(gc, configmap("bg-dep", owner_ref(owner)))
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "bg-secret", "ownerReferences": [owner_ref(owner)]},
    }
    create(gc, secret)
    create(gc, configmap("bg-shared", owner_ref(owner), owner_ref(keeper)))

    gc.kubectl("delete", "configmap", "bg-owner", "--cascade=background")

    wait_for(
        lambda: gone(gc, "configmap", "bg-dep") and gone(gc, "secret", "bg-secret"),
        30,
        0.3,
        "dependents deleted",
    )
    shared = wait_for(
        lambda: (
            (o := get(gc, "configmap", "bg-shared"))
            and len(o["metadata"].get("ownerReferences", [])) == 1
            and o
        ),
        30,
        0.3,
        "the dangling reference removed from the dependent with a surviving owner",
    )
    assert shared["metadata"]["ownerReferences"][0]["uid"] == keeper["metadata"]["uid"]


def test_foreground_deletes_blocking_chain_before_the_owner(gc: devstack.DevStack) -> None:
    top = create(gc, configmap("fg-top"))
    middle = create(gc, configmap("fg-middle", owner_ref(top, block=True)))
    create(gc, configmap("fg-bottom", owner_ref(middle, block=True)))
    create(gc, configmap("fg-loose", owner_ref(top)))

    gc.kubectl("delete", "configmap", "fg-top", "--cascade=foreground", "--wait=false")

    # Without the collector the owner would wait forever on its foregroundDeletion finalizer.
    wait_for(
        lambda: gone(gc, "configmap", "fg-top", "fg-middle", "fg-bottom", "fg-loose"), 45, 0.3, "chain gone"
    )


def test_orphan_removes_owner_references(gc: devstack.DevStack) -> None:
    owner = create(gc, configmap("or-owner"))
    create(gc, configmap("or-dep1", owner_ref(owner)))
    create(gc, configmap("or-dep2", owner_ref(owner, block=True)))

    gc.kubectl("delete", "configmap", "or-owner", "--cascade=orphan", "--wait=false")

    wait_for(lambda: gone(gc, "configmap", "or-owner"), 30, 0.3, "owner deleted once orphaning finished")
    for name in ("or-dep1", "or-dep2"):
        dep = get(gc, "configmap", name)
        assert dep is not None, f"{name} was deleted instead of orphaned"
        assert not dep["metadata"].get("ownerReferences"), dep["metadata"]


def test_owner_that_never_existed_gets_dependent_deleted(gc: devstack.DevStack) -> None:
    ghost = {"apiVersion": "v1", "kind": "ConfigMap", "name": "never-was", "uid": str(uuid.uuid4())}
    create(gc, configmap("dangling-dep", ghost))
    wait_for(lambda: gone(gc, "configmap", "dangling-dep"), 30, 0.3, "dependent of a missing owner deleted")


def test_owner_in_another_namespace_is_invalid(gc: devstack.DevStack) -> None:
    owner = create(gc, configmap("ns-owner", namespace="gc-other"))
    dep = create(gc, configmap("ns-dep", owner_ref(owner)))
    wait_for(
        lambda: gone(gc, "configmap", "ns-dep"),
        30,
        0.3,
        "dependent with an owner in another namespace deleted",
    )
    assert get(gc, "configmap", "ns-owner", "gc-other") is not None

    def event() -> Any:
        items = json.loads(gc.kubectl("get", "events", "-n", "default", "-o", "json").stdout)["items"]
        return [
            e
            for e in items
            if e.get("reason") == "OwnerRefInvalidNamespace"
            and e["involvedObject"].get("uid") == dep["metadata"]["uid"]
        ]

    found = wait_for(event, 30, 0.3, "OwnerRefInvalidNamespace event")[0]
    assert found["type"] == "Warning"
    assert owner["metadata"]["uid"] in found["message"] and 'namespace "default"' in found["message"]


def test_owner_deleted_while_every_collector_was_down(gc: devstack.DevStack) -> None:
    # Nobody sees the delete event: restarted replicas must find the orphans from the graph
    # they rebuild (a virtual owner confirmed absent, its dependents handed to their partitions).
    owner = create(gc, configmap("down-owner"))
    for i in range(4):
        create(gc, configmap(f"down-dep{i}", owner_ref(owner)))
    pids = gc.controller_pids("garbagecollector")
    assert len(pids) == 2
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    gc.kubectl("delete", "configmap", "down-owner")
    names = [f"down-dep{i}" for i in range(4)]
    wait_for(lambda: gone(gc, "configmap", *names), 90, 0.5, "dependents collected after the restart")
    assert not set(gc.controller_pids("garbagecollector")) & set(pids)


def test_custom_resource_created_after_start_owns_configmaps(gc: devstack.DevStack) -> None:
    # Last in the module: the watcher and the collector pick the new kind up on re-discovery.
    manifest = {
        "apiVersion": "gc.example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w1", "namespace": "default"},
    }

    def created() -> Any:
        res = gc.kubectl("create", "-f", "-", "-o", "json", check=False, input=json.dumps(manifest))
        return json.loads(res.stdout) if res.returncode == 0 else None

    owner = wait_for(created, 30, 0.5, "the Widget kind served")
    create(gc, configmap("cr-dep", owner_ref(owner, block=True)))

    gc.kubectl("delete", "widget", "w1", "-n", "default", "--cascade=foreground", "--wait=false")

    wait_for(
        lambda: gone(gc, "configmap", "cr-dep") and gone(gc, "widget", "w1"),
        90,
        0.5,
        "custom owner and dependent gone",
    )


def test_orphan_drops_only_that_owner_and_patches_custom_resources(gc: devstack.DevStack) -> None:
    # After the custom resource test, so the collector follows widgets. A Widget takes no
    # strategic merge patch (415): its reference goes with a merge patch instead.
    owner = create(gc, configmap("orc-owner"))
    other = create(gc, configmap("orc-other"))
    create(gc, configmap("orc-dep", owner_ref(owner), owner_ref(other)))
    widget = {
        "apiVersion": "gc.example.com/v1",
        "kind": "Widget",
        "metadata": {
            "name": "orc-w",
            "namespace": "default",
            "ownerReferences": [owner_ref(owner, block=True)],
        },
    }
    create(gc, widget)

    gc.kubectl("delete", "configmap", "orc-owner", "--cascade=orphan", "--wait=false")

    wait_for(lambda: gone(gc, "configmap", "orc-owner"), 30, 0.3, "owner deleted once orphaning finished")
    dep = get(gc, "configmap", "orc-dep")
    assert dep is not None, "orc-dep was deleted instead of orphaned"
    assert [r["uid"] for r in dep["metadata"]["ownerReferences"]] == [other["metadata"]["uid"]]
    orphaned = get(gc, "widget", "orc-w")
    assert orphaned is not None, "the Widget was deleted instead of orphaned"
    assert not orphaned["metadata"].get("ownerReferences"), orphaned["metadata"]


# --- with the whole system: deployments, their ReplicaSets and pods --------------------------


def test_owner_keeps_its_finalizer_until_the_dependents_kind_is_published(
    fresh_apiserver: ApiServer, fresh_nats: NatsProc, tmp_path: Path
) -> None:
    # At start-up the watcher publishes kinds one by one. A collector that took work with only
    # the owner's kind on the bus saw a foreground owner without dependents and let it go.
    api = fresh_apiserver
    owner = json.loads(api.kubectl("create", "configmap", "fg-owner", "-o", "json"))
    dep = configmap("fg-dep", owner_ref(owner, block=True))
    dep.update(apiVersion="v1", kind="Secret")
    api.kubectl("create", "-f", "-", input=json.dumps(dep))
    api.kubectl("delete", "configmap", "fg-owner", "--cascade=foreground", "--wait=false")
    stack = Stack(api, fresh_nats, tmp_path, tmp_path / "probe.jsonl")
    try:
        watcher = stack.watcher("watcher-0", "--resources", "*,-v1/secrets")
        stack.coordinator()
        gc = stack.garbage_collector("gc-0")
        # The watcher publishes its kinds one by one: wait until only the secrets are missing.
        waiting = '"unpublished": ["core/v1/secrets"]'
        wait_for(
            lambda: waiting in gc.log.read_text() or "DeleteDependents finalizer" in gc.log.read_text(),
            30,
            what="the collector waiting for the secrets alone",
        )
        left = api.kubectl("get", "configmap", "fg-owner", "--ignore-not-found", "-o", "json")
        assert left and "foregroundDeletion" in json.loads(left)["metadata"]["finalizers"]
        assert waiting in gc.log.read_text()
        watcher.stop()
        stack.watcher("watcher-1", "--resources", "*")
        wait_for(
            lambda: not api.kubectl("get", "configmap", "fg-owner", "--ignore-not-found"),
            60,
            what="the owner deleted",
        )
        # Foreground: the blocking dependent went first.
        assert not api.kubectl("get", "secret", "fg-dep", "--ignore-not-found")
    finally:
        stack.stop()


full_stack = devstack.stack_fixture()


def owned_by_app(s: devstack.DevStack, kind: str, app: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(s.kubectl("get", kind, "-l", f"app={app}", "-o", "json").stdout)[
        "items"
    ]
    return items


def rollout(s: devstack.DevStack, name: str) -> None:
    s.kubectl("create", "deployment", name, "--image=nginx", "--replicas=2")
    wait_for(lambda: len(owned_by_app(s, "pods", name)) == 2, 60, 0.5, f"pods of {name}")
    wait_for(lambda: len(owned_by_app(s, "replicasets", name)) == 1, 60, 0.5, f"replicaset of {name}")


def test_kubectl_delete_deployment_cascade_foreground(full_stack: devstack.DevStack) -> None:
    rollout(full_stack, "gc-fg")
    full_stack.kubectl("delete", "deployment", "gc-fg", "--cascade=foreground", "--wait=false")
    wait_for(
        lambda: (
            gone(full_stack, "deployment", "gc-fg")
            and not owned_by_app(full_stack, "replicasets", "gc-fg")
            and not owned_by_app(full_stack, "pods", "gc-fg")
        ),
        60,
        0.5,
        "deployment, replicaset and pods gone",
    )


def test_kubectl_delete_deployment_cascade_orphan(full_stack: devstack.DevStack) -> None:
    rollout(full_stack, "gc-or")
    full_stack.kubectl("delete", "deployment", "gc-or", "--cascade=orphan", "--wait=false")
    wait_for(
        lambda: gone(full_stack, "deployment", "gc-or"), 60, 0.5, "deployment gone once orphaning finished"
    )
    (rs,) = owned_by_app(full_stack, "replicasets", "gc-or")
    assert not rs["metadata"].get("ownerReferences"), rs["metadata"]
    assert len(owned_by_app(full_stack, "pods", "gc-or")) == 2


def test_kubectl_delete_deployment_cascade_background(full_stack: devstack.DevStack) -> None:
    rollout(full_stack, "gc-bg")
    full_stack.kubectl("delete", "deployment", "gc-bg", "--cascade=background", "--wait=false")
    # The owner goes at once; its ReplicaSet and pods are the collector's to remove after.
    assert gone(full_stack, "deployment", "gc-bg")
    wait_for(
        lambda: (
            not owned_by_app(full_stack, "replicasets", "gc-bg")
            and not owned_by_app(full_stack, "pods", "gc-bg")
        ),
        60,
        0.5,
        "replicaset and pods of a background-deleted deployment collected",
    )
