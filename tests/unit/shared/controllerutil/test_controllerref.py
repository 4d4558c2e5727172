"""controllerref.route_update / route_add: which owners an owned object's update or creation enqueues (upstream's
updatePod / addPod cases shared by the ReplicaSet, DaemonSet and StatefulSet controllers)."""

from __future__ import annotations

import pytest
from kcm_shared.apimachinery import codec, gvr
from kcm_shared.controllerutil import controllerref
from kcm_shared.testing import caches

OWNERS = {"a": codec.Meta(metadata=codec.ObjectMeta(name="a", namespace="ns", uid="ua"))}
MATCHING = [codec.Meta(metadata=codec.ObjectMeta(name="m", namespace="ns", uid="um"))]


def ref(name: str) -> codec.OwnerReference:
    return codec.OwnerReference(kind="Owner", name=name, uid="u" + name, controller=True)


def obj(owner: str | None, labels: dict[str, str] | None = None) -> codec.Meta:
    refs = [ref(owner)] if owner else []
    return codec.Meta(metadata=codec.ObjectMeta(namespace="ns", labels=labels or {}, owner_references=refs))


def resolve(namespace: str, r: codec.OwnerReference) -> codec.Meta | None:
    owner = OWNERS.get(r.name)
    return owner if owner is not None and owner.metadata.uid == r.uid else None


@pytest.mark.parametrize(
    ("old", "cur", "enqueued", "returned"),
    [
        # Owned and unchanged ref: only its owner, never the selector matches.
        (obj("a"), obj("a", {"x": "1"}), ["a"], "a"),
        # Released: the former owner, then (ref changed) every matching owner.
        (obj("a"), obj(None), ["a", "m"], None),
        # Ref moved: the former owner (b, gone from the cache) and the new one; a ref to a
        # missing owner resolves to none.
        (obj("b"), obj("a"), ["a"], "a"),
        (obj("a"), obj("gone"), ["a"], None),
        # Orphan whose labels changed: every matching owner.
        (obj(None), obj(None, {"x": "1"}), ["m"], None),
        # Orphan unchanged: nothing.
        (obj(None, {"x": "1"}), obj(None, {"x": "1"}), [], None),
    ],
)
def test_route_update(old: codec.Meta, cur: codec.Meta, enqueued: list[str], returned: str | None) -> None:
    seen: list[str] = []
    got = controllerref.route_update(
        old, cur, resolve, lambda _: MATCHING, lambda o: seen.append(o.metadata.name)
    )
    assert seen == enqueued
    assert (got.metadata.name if got is not None else None) == returned


@pytest.mark.parametrize(
    ("added", "enqueued", "observed"),
    [
        # Owned: its owner only, told of the creation first.
        (obj("a"), ["a"], ["a"]),
        # A ref to an owner not in the cache: nothing, not even the selector matches.
        (obj("gone"), [], []),
        # Orphan: every matching owner, none of them observing a creation.
        (obj(None), ["m"], []),
    ],
)
def test_route_add(added: codec.Meta, enqueued: list[str], observed: list[str]) -> None:
    seen: list[str] = []
    told: list[str] = []
    controllerref.route_add(
        added,
        resolve,
        lambda _: MATCHING,
        lambda o: seen.append(o.metadata.name),
        lambda o: told.append(o.metadata.name),
    )
    assert (seen, told) == (enqueued, observed)


def _pod(name: str, namespace: str, *refs: tuple[str, bool]) -> dict[str, object]:
    owners = [{"apiVersion": "v1", "kind": "Owner", "name": u, "uid": u, "controller": c} for u, c in refs]
    return {"metadata": {"name": name, "namespace": namespace, "uid": name, "ownerReferences": owners}}


def test_candidates_are_the_owners_objects_and_the_namespaces_orphans() -> None:
    """What a claim by `ua` must see: its own (controlled, or referring without a controller),
    the orphans of its namespace once; never another owner's or another namespace's."""
    pods = caches.new(
        gvr.Resource("", "v1", "pods"),
        codec.Meta,
        [
            _pod("mine", "ns", ("ua", True)),
            _pod("mine-uncontrolled", "ns", ("ua", False)),  # also an orphan: listed once
            _pod("theirs", "ns", ("ub", True)),
            _pod("theirs-naming-me", "ns", ("ub", True), ("ua", False)),  # the claim skips it
            _pod("orphan", "ns"),
            _pod("orphan-elsewhere", "other"),
            _pod("orphan-of-another", "ns", ("ub", False)),
            _pod("mine-elsewhere", "other", ("ua", True)),
        ],
    )
    controllerref.index_orphans(pods)
    controllerref.index_orphans(pods)  # a second controller sharing the cache: one index
    owned, orphans = controllerref.candidates(pods, OWNERS["a"])
    assert sorted(p.metadata.name for p in owned) == ["mine", "mine-uncontrolled", "theirs-naming-me"]
    assert sorted(p.metadata.name for p in orphans) == ["orphan", "orphan-of-another"]
    # The index follows the store: an orphan adopted by another owner leaves it.
    caches.deliver(pods, "MODIFIED", _pod("orphan", "ns", ("ub", True)))
    assert [p.metadata.name for p in controllerref.candidates(pods, OWNERS["a"])[1]] == ["orphan-of-another"]
