"""Adopting and releasing objects by ControllerRef (upstream controller_ref_manager.go).

A workload controller reconciles only what it controls. `claim` walks the candidates (the
cached objects of the owner's namespace) the way upstream's ClaimObject does:

- controlled by someone else: not ours, untouched;
- controlled by the owner and matching the selector: ours;
- controlled by the owner but no longer matching: released with a strategic-merge PATCH
  deleting the ownerReference (404 and 422 ignored: the object is gone or changed), unless
  the owner itself is being deleted;
- an orphan that matches: adopted with a PATCH adding the controlling ownerReference -
  unless the owner or the orphan is being deleted, and only after `can_adopt` (called once,
  lazily) confirmed with a fresh GET that the owner still exists and is not being deleted
  (upstream RecheckDeletionTimestamp), since the cached owner may be stale.

Both patches carry the object's `metadata.uid`, a precondition: a replacement object of the
same name fails with 422 instead of being adopted. Errors on some objects do not stop the
others; they are raised together (`ClaimError`) after the walk, as upstream aggregates them.
Used by the ReplicaSet controller (pods) and the deployment controller (ReplicaSets).

`candidates` finds what a claim can return or change without walking the namespace: the
objects naming the owner in an ownerReference (the cache's owner-uid index) and the orphans
of its namespace (`ORPHANS_INDEX`, which the caller adds to its cache with `index_orphans`).
Objects another owner controls are skipped by the claim anyway, so the outcome is the
namespace walk's (upstream v1.32 hands the claim every pod of the namespace), at a cost that
follows the owner's objects rather than the namespace's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TypeVar

import msgspec

from kcm_shared.apimachinery import codec, gvr, selectors
from kcm_shared.client import kubeclient
from kcm_shared.runtime import cache

T = TypeVar("T", bound=codec.Meta)

ORPHANS_INDEX = "controllerref-orphans"  # the namespace of each object without a controller


class ClaimError(Exception):
    """Adopting or releasing some candidates failed; `errors` holds each failure."""

    def __init__(self, errors: list[Exception]) -> None:
        super().__init__("; ".join(str(e) for e in errors))
        self.errors = errors


def recheck(client: kubeclient.KubeClient, path: str, uid: str) -> Callable[[], Awaitable[None]]:
    """The usual `can_adopt`: GET the owner at `path`; raise if it is gone, replaced or being deleted."""

    async def can_adopt() -> None:
        fresh = await client.get(path)
        meta = fresh.get("metadata") or {}
        if meta.get("uid") != uid:
            raise RuntimeError(f"original {path} is gone: got uid {meta.get('uid')}, wanted {uid}")
        if meta.get("deletionTimestamp"):
            raise RuntimeError(
                f"{meta.get('namespace')}/{meta.get('name')} has just been deleted at {meta['deletionTimestamp']}"
            )

    return can_adopt


def _orphan_namespace(obj: codec.Meta) -> list[str]:
    return [obj.metadata.namespace] if codec.controller_ref(obj.metadata) is None else []


def index_orphans(objects: cache.Cache[T]) -> None:
    """Add `ORPHANS_INDEX` to `objects` (once per cache however many controllers ask)."""
    objects.add_index(ORPHANS_INDEX, _orphan_namespace)


def candidates(objects: cache.Cache[T], owner: codec.Meta) -> tuple[list[T], list[T]]:
    """The cached objects a claim by `owner` must see, as (referring to the owner, orphans
    not referring to it): the two are disjoint, and together hold every object of the
    owner's namespace that the claim could keep, adopt or release. `objects` has
    `ORPHANS_INDEX` (`index_orphans`)."""
    uid, namespace = owner.metadata.uid, owner.metadata.namespace
    owned = [o for o in objects.by_index(cache.OWNER_UID_INDEX, uid) if o.metadata.namespace == namespace]
    orphans = [
        o
        for o in objects.by_index(ORPHANS_INDEX, namespace)
        if all(r.uid != uid for r in o.metadata.owner_references)
    ]
    return owned, orphans


def _once(fn: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
    """Call `fn` at most once; later calls repeat its outcome (upstream's sync.Once)."""
    outcome: list[Exception | None] = []

    async def wrapper() -> None:
        if not outcome:
            try:
                await fn()
                outcome.append(None)
            except Exception as exc:
                outcome.append(exc)
        if outcome[0] is not None:
            raise outcome[0]

    return wrapper


def resolve(
    get: Callable[[str, str], T | None], namespace: str, ref: codec.OwnerReference | None, kind: str
) -> T | None:
    """The cached owner (`get(namespace, name)`) a controllerRef names, if it is still that
    object: same kind, same uid (upstream resolveControllerRef)."""
    if ref is None or ref.kind != kind:
        return None
    owner = get(namespace, ref.name)
    if owner is None or owner.metadata.uid != ref.uid:
        return None
    return owner


def selecting(
    owners: Iterable[T], labels: dict[str, str], selector_of: Callable[[T], selectors.LabelSelector]
) -> list[T]:
    """Owners whose selector matches an orphan's `labels`: candidates to adopt it. An empty
    selector selects nothing here, and one that does not parse matches nothing."""
    if not labels:
        return []
    found = []
    for owner in owners:
        try:
            sel = selector_of(owner)
        except selectors.SelectorError:
            continue
        if not sel.empty and sel.matches(labels):
            found.append(owner)
    return found


M = TypeVar("M", bound=codec.Meta)


def route_add(
    obj: M,
    resolve: Callable[[str, codec.OwnerReference], T | None],
    selecting: Callable[[M], Iterable[T]],
    enqueue: Callable[[T], None],
    observed: Callable[[T], None] | None = None,
) -> None:
    """Enqueues the owners a new owned object concerns, as upstream's addPod handlers do after
    their deletion check: with a controllerRef, only the owner it resolves to (`observed` is
    told first, e.g. to count the creation against its expectations); without one, every owner
    whose selector matches, so one may adopt it."""
    ref = codec.controller_ref(obj)
    if ref is not None:
        owner = resolve(obj.metadata.namespace, ref)
        if owner is not None:
            if observed is not None:
                observed(owner)
            enqueue(owner)
        return
    for owner in selecting(obj):
        enqueue(owner)


def route_update(
    old: M,
    cur: M,
    resolve: Callable[[str, codec.OwnerReference], T | None],
    selecting: Callable[[M], Iterable[T]],
    enqueue: Callable[[T], None],
) -> T | None:
    """Enqueues the owners an owned object's update concerns, as upstream's updatePod /
    updateHistory handlers do after their resourceVersion and deletion checks: the former
    owner when the controllerRef changed; with a controllerRef, only the owner it resolves
    to; without one, on a label or ref change, every owner whose selector matches (so one
    may adopt it). Returns the owner the current ref resolves to, for the caller's extras."""
    cur_ref, old_ref = codec.controller_ref(cur), codec.controller_ref(old)
    ref_changed = cur_ref != old_ref
    if ref_changed and old_ref is not None:
        former = resolve(old.metadata.namespace, old_ref)
        if former is not None:
            enqueue(former)
    if cur_ref is not None:
        owner = resolve(cur.metadata.namespace, cur_ref)
        if owner is not None:
            enqueue(owner)
        return owner
    if ref_changed or old.metadata.labels != cur.metadata.labels:
        for owner in selecting(cur):
            enqueue(owner)
    return None


def _path(resource: gvr.Resource, m: codec.ObjectMeta) -> str:
    # Built only for the objects a patch is sent for: claim walks every candidate on every sync.
    return kubeclient.resource_path(resource.group, resource.version, resource.resource, m.namespace, m.name)


def new_controller_ref(owner: codec.Meta, api_version: str, kind: str) -> codec.OwnerReference:
    """The controlling ownerReference a workload puts on what it creates or adopts (metav1.NewControllerRef)."""
    return codec.OwnerReference(
        api_version=api_version,
        kind=kind,
        name=owner.metadata.name,
        uid=owner.metadata.uid,
        controller=True,
        block_owner_deletion=True,
    )


def adopt_patch(ref: codec.OwnerReference, uid: str, finalizers: Sequence[str] = ()) -> dict[str, object]:
    """Strategic-merge patch adding the controlling ownerReference (and `finalizers`, merged
    into the object's), with a uid precondition."""
    meta: dict[str, object] = {"ownerReferences": [msgspec.to_builtins(ref)], "uid": uid}
    if finalizers:
        meta["finalizers"] = list(finalizers)
    return {"metadata": meta}


def release_patch(owner_uid: str, uid: str, finalizers: Sequence[str] = ()) -> dict[str, object]:
    """Strategic-merge patch deleting the owner's reference (and `finalizers`, leaving the
    object's others), with a uid precondition."""
    meta: dict[str, object] = {"ownerReferences": [{"$patch": "delete", "uid": owner_uid}], "uid": uid}
    if finalizers:
        meta["$deleteFromPrimitiveList/finalizers"] = list(finalizers)
    return {"metadata": meta}


async def claim(
    client: kubeclient.KubeClient,
    owner: codec.Meta,
    owner_api_version: str,
    owner_kind: str,
    selector: selectors.LabelSelector,
    candidates: Iterable[T],
    resource: gvr.Resource,
    can_adopt: Callable[[], Awaitable[None]],
    finalizers: Sequence[str] = (),
) -> list[T]:
    """The candidates `owner` controls, after adopting matching orphans and releasing the rest.

    The patches are strategic-merge patches, which built-in kinds (pods, ReplicaSets) take.
    An adopted object also gets `finalizers` and a released one loses them in the same patch
    (the Job controller's tracking finalizer, as upstream's PodControllerRefManager with
    finalizers does: a released pod is no longer counted, so nothing else would remove it).
    """
    om = owner.metadata
    adopt_once = _once(can_adopt)
    ref = new_controller_ref(owner, owner_api_version, owner_kind)
    claimed: list[T] = []
    errors: list[Exception] = []
    for obj in candidates:
        m = obj.metadata
        current = codec.controller_ref(m)
        if current is not None and current.uid != om.uid:
            continue  # someone else's: the common case in a busy namespace, decided cheaply
        matches = selector.matches(m.labels)
        if current is not None:
            if matches:
                claimed.append(obj)
                continue
            if om.deletion_timestamp is not None:
                continue
            try:
                await client.patch(_path(resource, m), release_patch(om.uid, m.uid, finalizers), "strategic")
            except kubeclient.ApiError as exc:
                # Gone (404), or no longer ours / replaced under the same name (422).
                if exc.code not in (404, 422):
                    errors.append(exc)
            continue
        if om.deletion_timestamp is not None or not matches or m.deletion_timestamp is not None:
            continue
        if om.namespace and om.namespace != m.namespace:
            continue
        try:
            await adopt_once()
        except Exception as exc:
            errors.append(
                RuntimeError(f"can't adopt {resource.resource} {m.namespace}/{m.name} ({m.uid}): {exc}")
            )
            continue
        try:
            await client.patch(_path(resource, m), adopt_patch(ref, m.uid, finalizers), "strategic")
        except kubeclient.ApiError as exc:
            if not exc.not_found:
                errors.append(exc)
            continue
        claimed.append(obj)
    if errors:
        raise ClaimError(errors)
    return claimed
