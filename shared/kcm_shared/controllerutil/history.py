"""ControllerRevision history: the recorded templates of a StatefulSet or DaemonSet.

Upstream pkg/controller/history/controller_history.go. A workload that rolls out templates
keeps each one it ran as an apps/v1 ControllerRevision owned by it: `data` holds the part of
the workload the revision pins (a patch the controller builds), `revision` its number, the
name is `<parent>-<hash>` and the label `controller.kubernetes.io/hash` carries the hash.
`kubectl rollout history` lists them and `kubectl rollout undo` patches the workload back to
one's data, both client-side, so the names, labels and numbers follow upstream's.

Pure helpers (`revision_name`, `hash_revision`, `new_revision`, `equal_revision`,
`find_equal_revisions`, `sort_revisions`, `next_revision`) and the API calls
(`create_revision` with upstream's collision handling, `update_revision`,
`delete_revision`, `adopt_revision`, `release_revision`), and `owned_revisions` over a cache
(ListControllerRevisions). Used by the StatefulSet and DaemonSet controllers; neither
imports the other.

The hash is upstream's shape: FNV-1 32-bit (Go's `fnv.New32`) over the data bytes, the
collision count's decimal digits mixed in when set, the decimal number spelled with
`rand.SafeEncodeString`'s alphabet. The data bytes are this implementation's JSON, not Go's,
so a hash equals Go's only when the bytes do; the format is the same.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

import msgspec

from kcm_shared.apimachinery import codec, gvr, selectors
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import controllerref
from kcm_shared.runtime import cache

CONTROLLER_REVISIONS = gvr.Resource("apps", "v1", "controllerrevisions")
HASH_LABEL = "controller.kubernetes.io/hash"  # upstream ControllerRevisionHashLabel
MAX_PREFIX = 223  # 253 (a name's limit) minus a dash and the longest hash, with room to spare

# k8s.io/apimachinery/pkg/util/rand: no vowels, no 0/1/3, so no words and no look-alikes.
_SAFE_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"
_FNV32_OFFSET = 0x811C9DC5
_FNV32_PRIME = 0x01000193


def _null() -> msgspec.Raw:
    return msgspec.Raw(b"null")


class ControllerRevisionView(codec.Meta):
    """A cached ControllerRevision; `data` stays the server's JSON, undecoded."""

    data: msgspec.Raw = msgspec.field(default_factory=_null)
    revision: int = 0


R = TypeVar("R", bound=ControllerRevisionView)


def revision_name(prefix: str, hash_: str) -> str:
    """`<prefix>-<hash>`, the prefix cut to 223 characters so the name fits 253 (ControllerRevisionName)."""
    return f"{prefix[:MAX_PREFIX]}-{hash_}"


def safe_encode(text: str) -> str:
    """rand.SafeEncodeString: each byte mapped onto an alphabet without vowels."""
    return "".join(_SAFE_ALPHANUMS[b % len(_SAFE_ALPHANUMS)] for b in text.encode())


def fnv1_32(data: bytes, h: int = _FNV32_OFFSET) -> int:
    """Go's hash/fnv New32 (FNV-1: multiply, then xor), continued from `h`."""
    for b in data:
        h = ((h * _FNV32_PRIME) & 0xFFFFFFFF) ^ b
    return h


def hash_revision(data: bytes, collision_count: int | None) -> str:
    """HashControllerRevision: FNV-1 over `data`, then over the collision count's digits when
    one is given, as a safe-encoded decimal string."""
    h = fnv1_32(data)
    if collision_count is not None:
        h = fnv1_32(str(collision_count).encode(), h)
    return safe_encode(str(h))


def new_revision(
    parent: codec.Meta,
    api_version: str,
    kind: str,
    template_labels: dict[str, str],
    data: bytes,
    revision: int,
    collision_count: int | None,
) -> dict[str, Any]:
    """The ControllerRevision manifest recording `data` as `parent`'s revision number
    `revision` (NewControllerRevision): the template's labels plus the hash label, the parent
    as controlling owner, named `<parent>-<hash>`."""
    hash_ = hash_revision(data, collision_count)
    labels = dict(template_labels)
    labels[HASH_LABEL] = hash_
    ref = controllerref.new_controller_ref(parent, api_version, kind)
    return {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": revision_name(parent.metadata.name, hash_),
            "namespace": parent.metadata.namespace,
            "labels": labels,
            "ownerReferences": [msgspec.to_builtins(ref)],
        },
        "data": msgspec.Raw(data),
        "revision": revision,
    }


def _label_hash(labels: dict[str, str]) -> int | None:
    # Upstream parses the label as a base-10 int32 and compares only when both parse.
    text = labels.get(HASH_LABEL)
    if text is None:
        return None
    try:
        value = int(text, 10)
    except ValueError:
        return None
    return value if -(2**31) <= value < 2**31 else None


def same_data(lhs: bytes, rhs: bytes) -> bool:
    """Equal bytes, or equal JSON values: the API server may store the data re-serialised
    (upstream compares the raw bytes and then the decoded objects semantically)."""
    if lhs == rhs:
        return True
    try:
        return bool(json.loads(lhs) == json.loads(rhs))
    except ValueError:
        return False


def equal_revision(lhs: ControllerRevisionView | None, rhs: ControllerRevisionView | None) -> bool:
    """EqualRevision: both None, or the same data (hash labels, when both parse, must agree)."""
    if lhs is None or rhs is None:
        return lhs is rhs
    lh, rh = _label_hash(lhs.metadata.labels), _label_hash(rhs.metadata.labels)
    if lh is not None and rh is not None and lh != rh:
        return False
    return same_data(bytes(lhs.data), bytes(rhs.data))


def find_equal_revisions(revisions: Iterable[R], needle: ControllerRevisionView) -> list[R]:
    """The revisions equal to `needle`, in their order (FindEqualRevisions)."""
    return [r for r in revisions if equal_revision(r, needle)]


def sort_revisions(revisions: Iterable[R]) -> list[R]:
    """By revision number, then creation time, then name (SortControllerRevisions); a stable sort."""

    def key(r: R) -> tuple[int, float, str]:
        created = r.metadata.creation_timestamp
        return (r.revision, created.timestamp() if created is not None else float("-inf"), r.metadata.name)

    return sorted(revisions, key=key)


def next_revision(revisions: Sequence[ControllerRevisionView]) -> int:
    """One more than the highest revision number, 1 for none (upstream's nextRevision, which
    expects `revisions` sorted; the maximum is taken here, so order does not matter)."""
    return max((r.revision for r in revisions), default=0) + 1


def owned_revisions(
    revisions: cache.Cache[R], parent: codec.Meta, selector: selectors.LabelSelector
) -> list[R]:
    """The cached revisions of the parent's namespace that match `selector` and are controlled
    by the parent or by nobody (ListControllerRevisions)."""
    owned = []
    for r in revisions.list(parent.metadata.namespace, selector):
        ref = codec.controller_ref(r)
        if ref is None or ref.uid == parent.metadata.uid:
            owned.append(r)
    return owned


def _path(namespace: str, name: str | None = None) -> str:
    res = CONTROLLER_REVISIONS
    return kubeclient.resource_path(res.group, res.version, res.resource, namespace, name)


async def create_revision(
    client: kubeclient.KubeClient, parent: codec.Meta, revision: dict[str, Any], collision_count: int
) -> tuple[dict[str, Any], int]:
    """Create `revision` (a `new_revision` manifest) for `parent`; returns the stored object
    and the collision count to keep (CreateControllerRevision).

    The name is derived from the data and the collision count. When that name is taken by a
    revision with the same data, that one is returned; with other data the count goes up by
    one and the next name is tried, so the caller must store the returned count in its
    status (`collisionCount`).
    """
    data = bytes(revision["data"])
    namespace = parent.metadata.namespace
    while True:
        name = revision_name(parent.metadata.name, hash_revision(data, collision_count))
        body = {**revision, "metadata": {**revision["metadata"], "name": name, "namespace": namespace}}
        try:
            return await client.create(_path(namespace), body), collision_count
        except kubeclient.ApiError as exc:
            if exc.code != 409 or exc.reason != "AlreadyExists":
                raise
        exists = await client.get(_path(namespace, name))
        if same_data(msgspec.json.encode(exists.get("data")), data):
            return exists, collision_count
        collision_count += 1


async def update_revision(
    client: kubeclient.KubeClient, revision: ControllerRevisionView, new_revision: int
) -> dict[str, Any] | None:
    """Set the revision's number to `new_revision` (UpdateControllerRevision); None when it
    already has it. A merge patch of that one field, so no conflict can refuse it."""
    if revision.revision == new_revision:
        return None
    m = revision.metadata
    return await client.patch(_path(m.namespace, m.name), {"revision": new_revision}, "merge")


async def delete_revision(client: kubeclient.KubeClient, revision: ControllerRevisionView) -> None:
    """Delete the revision; one already gone counts as deleted."""
    m = revision.metadata
    try:
        await client.delete(_path(m.namespace, m.name))
    except kubeclient.ApiError as exc:
        if not exc.not_found:
            raise


async def adopt_revision(
    client: kubeclient.KubeClient,
    parent: codec.Meta,
    api_version: str,
    kind: str,
    revision: ControllerRevisionView,
) -> dict[str, Any]:
    """Make `parent` the revision's controller (AdoptControllerRevision); raises ValueError
    when something else controls it. The patch carries the revision's uid as a precondition."""
    owner = codec.controller_ref(revision)
    if owner is not None:
        raise ValueError(
            f"attempt to adopt revision {revision.metadata.name} owned by {owner.kind} {owner.name}"
        )
    ref = controllerref.new_controller_ref(parent, api_version, kind)
    m = revision.metadata
    return await client.patch(_path(m.namespace, m.name), controllerref.adopt_patch(ref, m.uid), "strategic")


async def release_revision(
    client: kubeclient.KubeClient, parent: codec.Meta, revision: ControllerRevisionView
) -> dict[str, Any] | None:
    """Drop `parent`'s reference from the revision (ReleaseControllerRevision); None when the
    revision is gone or no longer the parent's (404 and 422, which upstream ignores too)."""
    m = revision.metadata
    try:
        return await client.patch(
            _path(m.namespace, m.name),
            controllerref.release_patch(parent.metadata.uid, m.uid),
            "strategic",
        )
    except kubeclient.ApiError as exc:
        if exc.code in (404, 422):
            return None
        raise
