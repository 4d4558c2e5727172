"""The garbage collector's dependency graph: who owns whom, by uid (upstream graph.go + graph_builder.go).

Every object the collector's caches hold is a `Node` keyed by uid, with its owner references
and the uids of its dependents. An owner referenced before it was observed gets a *virtual*
node (its coordinates taken from the reference, in the dependent's namespace) that the
collector must verify against the API server. The graph never talks to the API: each change
returns `Effects`, the uids to put on upstream's attemptToDelete and attemptToOrphan queues,
and the caller enqueues them (`kcm_controllers.garbagecollector.controller`, from cache events and
from reconciles). Pure and synchronous, so the unit tests drive it with upstream's scenarios.

Follows upstream's processGraphChanges: add/update inserts or updates a node and diffs owner
references (an owner unblocked by a removed or unblocked reference is re-examined);
`deletionTimestamp` with the `orphan` finalizer queues the node for orphaning, with
`foregroundDeletion` marks it deleting-dependents and queues it and its dependents; a delete
removes the node, remembers its identity as absent when it had dependents, and queues its
dependents and its foreground-deleting owners. Virtual deletes (the collector confirmed an
identity absent) follow upstream's coordinate matching between virtual nodes and dependents.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from kcm_shared.apimachinery import codec

FOREGROUND = "foregroundDeletion"  # metav1.FinalizerDeleteDependents
ORPHAN = "orphan"  # metav1.FinalizerOrphanDependents
ABSENT_OWNER_CACHE_SIZE = 500  # upstream's absentOwnerCache size


@dataclass(frozen=True, slots=True)
class Identity:
    """An object's coordinates: upstream's objectReference (owner reference fields + namespace)."""

    api_version: str
    kind: str
    name: str
    uid: str
    namespace: str = ""

    def __str__(self) -> str:
        return f"[{self.api_version}/{self.kind}, namespace: {self.namespace}, name: {self.name}, uid: {self.uid}]"

    def coordinates(self) -> Identity:
        """The owner-reference part alone (namespace dropped), as absent cluster-scoped owners are keyed."""
        return Identity(self.api_version, self.kind, self.name, self.uid)


def of_reference(ref: codec.OwnerReference, namespace: str) -> Identity:
    return Identity(ref.api_version, ref.kind, ref.name, ref.uid, namespace)


def matches_coordinates(ref: codec.OwnerReference, identity: Identity) -> bool:
    return (ref.uid, ref.name, ref.kind, ref.api_version) == (
        identity.uid,
        identity.name,
        identity.kind,
        identity.api_version,
    )


@dataclass(eq=False)
class Node:
    identity: Identity
    owners: list[codec.OwnerReference] = field(default_factory=list)
    dependents: set[str] = field(default_factory=set)  # uids
    being_deleted: bool = False
    deleting_dependents: bool = False  # being deleted with the foregroundDeletion finalizer
    orphaning: bool = False  # being deleted with the orphan finalizer
    virtual: bool = False  # referenced as an owner, not observed yet
    # Owner references found pointing into another namespace, to report as Events once.
    invalid_namespace_refs: list[codec.OwnerReference] = field(default_factory=list)

    @property
    def uid(self) -> str:
        return self.identity.uid

    def owner_ref(self, uid: str) -> codec.OwnerReference | None:
        return next((ref for ref in self.owners if ref.uid == uid), None)


@dataclass
class Effects:
    """What a graph change asks of the collector: uids for attemptToDelete / attemptToOrphan."""

    to_delete: list[str] = field(default_factory=list)
    to_orphan: list[str] = field(default_factory=list)
    # What to_delete holds, for O(1) de-duplication when an owner has thousands of dependents.
    _queued: set[str] = field(default_factory=set, repr=False, compare=False)

    def delete(self, uid: str) -> None:
        if uid not in self._queued:
            self._queued.add(uid)
            self.to_delete.append(uid)


def _blocks(ref: codec.OwnerReference | None) -> bool:
    return ref is not None and bool(ref.block_owner_deletion)


def references_diffs(
    old: list[codec.OwnerReference], new: list[codec.OwnerReference]
) -> tuple[
    list[codec.OwnerReference],
    list[codec.OwnerReference],
    list[tuple[codec.OwnerReference, codec.OwnerReference]],
]:
    """Owner references added, removed, and changed (same uid, other fields), by uid."""
    before = {ref.uid: ref for ref in old}
    added: list[codec.OwnerReference] = []
    changed: list[tuple[codec.OwnerReference, codec.OwnerReference]] = []
    for ref in new:
        previous = before.pop(ref.uid, None)
        if previous is None:
            added.append(ref)
        elif previous != ref:
            changed.append((previous, ref))
    return added, list(before.values()), changed


def _starts(old: codec.ObjectMeta | None, new: codec.ObjectMeta, finalizer: str) -> bool:
    """The object started being deleted with `finalizer` in this change (deletionStartsWithFinalizer)."""
    if new.deletion_timestamp is None or finalizer not in new.finalizers:
        return False
    return old is None or old.deletion_timestamp is None or finalizer not in old.finalizers


class Graph:
    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self._absent: OrderedDict[Identity, None] = OrderedDict()

    def get(self, uid: str) -> Node | None:
        return self.nodes.get(uid)

    def __len__(self) -> int:
        return len(self.nodes)

    def dependents(self, node: Node) -> list[Node]:
        return [dep for uid in sorted(node.dependents) if (dep := self.nodes.get(uid)) is not None]

    def blocking_dependents(self, node: Node) -> list[Node]:
        """Dependents whose reference to `node` has blockOwnerDeletion=true."""
        return [dep for dep in self.dependents(node) if _blocks(dep.owner_ref(node.uid))]

    # --- the absent owner cache (an LRU of identities verified absent) -----------------------

    def mark_absent(self, identity: Identity) -> None:
        self._absent[identity] = None
        self._absent.move_to_end(identity)
        while len(self._absent) > ABSENT_OWNER_CACHE_SIZE:
            self._absent.popitem(last=False)

    def known_absent(self, identity: Identity) -> bool:
        return identity in self._absent

    # --- observed changes ------------------------------------------------------------------

    def observe(
        self, identity: Identity, meta: codec.ObjectMeta, old: codec.ObjectMeta | None = None
    ) -> Effects:
        """An add or update seen in a cache."""
        fx = Effects()
        node = self.nodes.get(identity.uid)
        if node is not None and node.virtual:
            self._observe_virtual(node, identity, fx)
        if node is None:
            node = Node(identity, list(meta.owner_references))
            node.being_deleted = meta.deletion_timestamp is not None
            node.deleting_dependents = node.being_deleted and FOREGROUND in meta.finalizers
            self.nodes[identity.uid] = node
            self._add_dependent_to_owners(node, node.owners, fx)
        else:
            node.identity = identity  # apiVersion/kind may change; dependents hold uids
            added, removed, changed = references_diffs(node.owners, meta.owner_references)
            if added or removed or changed:
                self._unblocked_owners(removed, changed, fx)
                node.owners = list(meta.owner_references)
                self._add_dependent_to_owners(node, added, fx)
                for ref in removed:
                    self._drop_dependent(ref.uid, node.uid)
            if meta.deletion_timestamp is not None:
                node.being_deleted = True
        node.orphaning = meta.deletion_timestamp is not None and ORPHAN in meta.finalizers
        self._transitions(old, meta, node, fx)
        return fx

    def observe_delete(self, identity: Identity) -> Effects:
        """A delete seen in a cache."""
        fx = Effects()
        node = self.nodes.get(identity.uid)
        if node is not None:
            self._remove(node, identity, fx)
        return fx

    def virtual_delete(self, identity: Identity) -> Effects:
        """The collector found no object with `identity` at the API server (404 or another uid)."""
        fx = Effects()
        node = self.nodes.get(identity.uid)
        if node is None:
            return fx
        if node.virtual:
            matching, other = self._partition_dependents(node, identity)
            if other:
                # Dependents disagree on this owner's coordinates: keep the node, collect the
                # dependents the verified identity covers, and try another identity next.
                if matching:
                    self.mark_absent(identity)
                    for dep in matching:
                        fx.delete(dep.uid)
                if node.identity == identity:
                    replacement = self._alternate_identity(other, identity)
                    if replacement is not None:
                        node.identity = replacement
                        fx.delete(node.uid)
                return fx
        elif node.identity != identity:
            # A virtual delete never removes an observed node; it only settles the
            # dependents that referred to the absent coordinates.
            matching, _ = self._partition_dependents(node, identity)
            if matching:
                self.mark_absent(identity)
                for dep in matching:
                    fx.delete(dep.uid)
            return fx
        self._remove(node, identity, fx)
        return fx

    # --- partition gain --------------------------------------------------------------------

    def resync(self) -> Iterator[tuple[str, str]]:
        """(queue, uid) for every node a new owner of its work must look at again.

        Changes seen while no replica owned a key's partition left no work item; what they
        can leave behind is visible in the graph: virtual owners, dependents of owners that
        are gone, and objects waiting for the collector (foreground or orphan finalizers).
        """
        for node in list(self.nodes.values()):
            if node.orphaning:
                yield "orphan", node.uid
            owner_missing = any(self._owner_missing(ref.uid) for ref in node.owners)
            if node.virtual or node.deleting_dependents or node.invalid_namespace_refs or owner_missing:
                yield "delete", node.uid

    def _owner_missing(self, uid: str) -> bool:
        owner = self.nodes.get(uid)
        return owner is None or owner.virtual

    # --- internals -------------------------------------------------------------------------

    def _observe_virtual(self, node: Node, identity: Identity, fx: Effects) -> None:
        """A virtual node's object arrived: recheck dependents that named it otherwise."""
        if identity != node.identity:
            _, other = self._partition_dependents(node, identity)
            for dep in other:
                if identity.namespace and dep.identity.namespace != identity.namespace:
                    self._report_invalid_namespace(dep, identity.uid)
                fx.delete(dep.uid)
            node.identity = identity
        node.virtual = False

    def _add_dependent_to_owners(
        self, node: Node, owners: Iterable[codec.OwnerReference], fx: Effects
    ) -> None:
        suspicious = False
        for ref in owners:
            owner = self.nodes.get(ref.uid)
            if owner is None:
                owner = Node(of_reference(ref, node.identity.namespace), virtual=True)
                self.nodes[ref.uid] = owner
                owner.dependents.add(node.uid)
                fx.delete(owner.uid)  # verify at the API server whether it exists
                continue
            owner.dependents.add(node.uid)
            if suspicious:
                continue
            namespaced = bool(owner.identity.namespace)
            if namespaced and owner.identity.namespace != node.identity.namespace:
                if not owner.virtual:
                    self._report_invalid_namespace(node, ref.uid)
                suspicious = True
            elif not matches_coordinates(ref, owner.identity):
                suspicious = True
            elif not namespaced and owner.identity.namespace != node.identity.namespace and owner.virtual:
                suspicious = True  # possibly a namespaced owner named by a cluster-scoped dependent
        if suspicious:
            fx.delete(node.uid)

    def _report_invalid_namespace(self, dependent: Node, owner_uid: str) -> None:
        ref = dependent.owner_ref(owner_uid)
        if ref is not None and ref not in dependent.invalid_namespace_refs:
            dependent.invalid_namespace_refs.append(ref)

    def _unblocked_owners(
        self,
        removed: list[codec.OwnerReference],
        changed: list[tuple[codec.OwnerReference, codec.OwnerReference]],
        fx: Effects,
    ) -> None:
        unblocked = [ref.uid for ref in removed if _blocks(ref)]
        unblocked += [new.uid for old, new in changed if _blocks(old) and not _blocks(new)]
        for uid in unblocked:
            if uid in self.nodes:
                fx.delete(uid)

    def _transitions(
        self, old: codec.ObjectMeta | None, new: codec.ObjectMeta, node: Node, fx: Effects
    ) -> None:
        if _starts(old, new, ORPHAN):
            fx.to_orphan.append(node.uid)
            return
        if _starts(old, new, FOREGROUND):
            node.deleting_dependents = True
            for uid in sorted(node.dependents):
                fx.delete(uid)
            fx.delete(node.uid)

    def _remove(self, node: Node, identity: Identity, fx: Effects) -> None:
        del self.nodes[node.uid]
        for ref in node.owners:
            self._drop_dependent(ref.uid, node.uid)
        if node.dependents:
            self.mark_absent(identity)
        for uid in sorted(node.dependents):
            fx.delete(uid)
        for ref in node.owners:
            owner = self.nodes.get(ref.uid)
            if owner is not None and owner.deleting_dependents:
                fx.delete(owner.uid)  # maybe its last blocking dependent is gone

    def _drop_dependent(self, owner_uid: str, dependent_uid: str) -> None:
        """Forget one dependent of an owner, and a virtual owner nothing refers to any more.

        Only the replica owning an owner's key verifies a virtual node (and removes it when the
        owner is absent); the others drop it here once its last dependent is gone.
        """
        owner = self.nodes.get(owner_uid)
        if owner is None:
            return
        owner.dependents.discard(dependent_uid)
        if owner.virtual and not owner.dependents:
            del self.nodes[owner_uid]

    def _partition_dependents(self, node: Node, identity: Identity) -> tuple[list[Node], list[Node]]:
        """Dependents whose reference matches `identity`, and the others."""
        matching: list[Node] = []
        other: list[Node] = []
        for dep in self.dependents(node):
            ref = dep.owner_ref(identity.uid)
            if identity.namespace and dep.identity.namespace != identity.namespace:
                other.append(dep)
            elif ref is not None and matches_coordinates(ref, identity):
                matching.append(dep)
            else:
                other.append(dep)
        return matching, other

    @staticmethod
    def _alternate_identity(dependents: list[Node], verified_absent: Identity) -> Identity | None:
        """Another identity the dependents use for the owner, preferring one in the absent namespace."""
        candidates: list[Identity] = []
        for dep in dependents:
            ref = dep.owner_ref(verified_absent.uid)
            if ref is not None:
                candidates.append(of_reference(ref, dep.identity.namespace))
        candidates.sort(key=lambda i: (i.namespace, i.api_version, i.kind, i.name))
        for cand in candidates:
            if cand != verified_absent and cand.namespace == verified_absent.namespace:
                return cand
        return next((cand for cand in candidates if cand != verified_absent), None)
