"""The garbage collector's dependency graph (kcm_controllers.garbagecollector.graph), scenario by scenario.

Scenarios follow upstream's graph_builder / garbagecollector tests: virtual owners, owner
reference diffs, deletion transitions, coordinate mismatches and virtual deletes.
"""

from __future__ import annotations

import pytest
from kcm_controllers.garbagecollector import graph
from kcm_shared.apimachinery import codec

from tests.unit.controllers.garbagecollector.objects import ident, meta, ref

OWNER = ident("owner", "u-owner")
DEP = ident("dep", "u-dep")
DEP2 = ident("dep2", "u-dep2")


def test_dependent_before_owner_creates_a_virtual_owner_to_verify() -> None:
    g = graph.Graph()
    fx = g.observe(DEP, meta(DEP, ref(OWNER)))
    owner = g.get(OWNER.uid)
    assert owner is not None and owner.virtual and owner.identity == OWNER
    assert owner.dependents == {DEP.uid}
    assert fx.to_delete == [OWNER.uid]


def test_observing_a_virtual_owner_with_matching_coordinates_has_no_effects() -> None:
    g = graph.Graph()
    g.observe(DEP, meta(DEP, ref(OWNER)))
    fx = g.observe(OWNER, meta(OWNER))
    owner = g.get(OWNER.uid)
    assert owner is not None and not owner.virtual
    assert fx.to_delete == [] and fx.to_orphan == []


def test_owner_observed_first_then_dependent_adds_no_work() -> None:
    g = graph.Graph()
    g.observe(OWNER, meta(OWNER))
    fx = g.observe(DEP, meta(DEP, ref(OWNER)))
    assert fx.to_delete == []
    assert g.dependents(g.get(OWNER.uid)) == [g.get(DEP.uid)]  # type: ignore[arg-type]


def test_deleted_owner_queues_dependents_and_is_remembered_absent() -> None:
    g = graph.Graph()
    g.observe(OWNER, meta(OWNER))
    g.observe(DEP, meta(DEP, ref(OWNER)))
    g.observe(DEP2, meta(DEP2, ref(OWNER)))
    fx = g.observe_delete(OWNER)
    assert sorted(fx.to_delete) == [DEP.uid, DEP2.uid]
    assert g.get(OWNER.uid) is None
    assert g.known_absent(OWNER)


def test_deleted_owner_without_dependents_is_not_remembered() -> None:
    g = graph.Graph()
    g.observe(OWNER, meta(OWNER))
    assert g.observe_delete(OWNER).to_delete == []
    assert not g.known_absent(OWNER)


def test_foreground_deletion_starts_once() -> None:
    g = graph.Graph()
    g.observe(OWNER, meta(OWNER))
    g.observe(DEP, meta(DEP, ref(OWNER, block=True)))
    deleting = meta(OWNER, deleting=True, finalizers=(graph.FOREGROUND,))
    fx = g.observe(OWNER, deleting, meta(OWNER))
    node = g.get(OWNER.uid)
    assert node is not None and node.deleting_dependents and node.being_deleted
    assert fx.to_delete == [DEP.uid, OWNER.uid]
    again = g.observe(OWNER, deleting, deleting)
    assert again.to_delete == []


def test_orphan_deletion_queues_the_owner_for_orphaning() -> None:
    g = graph.Graph()
    g.observe(OWNER, meta(OWNER))
    fx = g.observe(OWNER, meta(OWNER, deleting=True, finalizers=(graph.ORPHAN,)), meta(OWNER))
    assert fx.to_orphan == [OWNER.uid] and fx.to_delete == []
    assert list(g.resync()) == [("orphan", OWNER.uid)]


def test_added_object_already_deleting_with_foreground_counts_as_a_transition() -> None:
    g = graph.Graph()
    fx = g.observe(OWNER, meta(OWNER, deleting=True, finalizers=(graph.FOREGROUND,)))
    assert fx.to_delete == [OWNER.uid]
    assert g.get(OWNER.uid).deleting_dependents  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("before", "after", "owner_queued"),
    [
        ((True,), (), True),  # blocking reference removed
        ((True,), (False,), True),  # blockOwnerDeletion true -> false
        ((True,), (None,), True),  # true -> unset
        ((False,), (), False),  # a non-blocking reference removed
        ((None,), (True,), False),  # newly blocking
    ],
)
def test_unblocked_owner_is_queued(
    before: tuple[bool | None, ...], after: tuple[bool | None, ...], owner_queued: bool
) -> None:
    g = graph.Graph()
    g.observe(OWNER, meta(OWNER))
    old = meta(DEP, *(ref(OWNER, block=b) for b in before))
    g.observe(DEP, old)
    fx = g.observe(DEP, meta(DEP, *(ref(OWNER, block=b) for b in after)), old)
    assert (OWNER.uid in fx.to_delete) is owner_queued


def test_removed_reference_drops_the_dependent_from_the_owner() -> None:
    g = graph.Graph()
    g.observe(OWNER, meta(OWNER))
    g.observe(DEP, meta(DEP, ref(OWNER)))
    g.observe(DEP, meta(DEP), meta(DEP, ref(OWNER)))
    assert g.get(OWNER.uid).dependents == set()  # type: ignore[union-attr]


def test_owner_in_another_namespace_is_reported_and_dependent_verified() -> None:
    g = graph.Graph()
    owner = ident("owner", "u-owner", namespace="other")
    g.observe(owner, meta(owner))
    fx = g.observe(DEP, meta(DEP, ref(owner)))
    node = g.get(DEP.uid)
    assert node is not None and [r.uid for r in node.invalid_namespace_refs] == [owner.uid]
    assert fx.to_delete == [DEP.uid]


def test_dependent_observed_before_owner_in_another_namespace_is_reported() -> None:
    g = graph.Graph()
    g.observe(DEP, meta(DEP, ref(OWNER)))  # virtual owner in the dependent's namespace
    real = ident("owner", "u-owner", namespace="other")
    fx = g.observe(real, meta(real))
    assert fx.to_delete == [DEP.uid]
    assert g.get(DEP.uid).invalid_namespace_refs  # type: ignore[union-attr]
    assert g.get(OWNER.uid).identity == real  # type: ignore[union-attr]


def test_cluster_scoped_owner_of_namespaced_dependent_is_fine() -> None:
    g = graph.Graph()
    node_owner = ident("n1", "u-node", namespace="", kind="Node")
    g.observe(node_owner, meta(node_owner))
    fx = g.observe(DEP, meta(DEP, ref(node_owner)))
    assert fx.to_delete == []
    assert not g.get(DEP.uid).invalid_namespace_refs  # type: ignore[union-attr]


def test_reference_with_other_coordinates_is_verified() -> None:
    g = graph.Graph()
    g.observe(OWNER, meta(OWNER))
    fx = g.observe(DEP, meta(DEP, ref(OWNER, kind="Secret")))
    assert fx.to_delete == [DEP.uid]


def test_virtual_delete_removes_a_virtual_owner_and_queues_dependents() -> None:
    g = graph.Graph()
    g.observe(DEP, meta(DEP, ref(OWNER)))
    fx = g.virtual_delete(OWNER)
    assert g.get(OWNER.uid) is None
    assert fx.to_delete == [DEP.uid]
    assert g.known_absent(OWNER)


def test_virtual_delete_with_disagreeing_dependents_tries_the_other_identity() -> None:
    g = graph.Graph()
    g.observe(DEP, meta(DEP, ref(OWNER)))
    g.observe(DEP2, meta(DEP2, ref(OWNER, kind="Secret")))
    fx = g.virtual_delete(OWNER)
    node = g.get(OWNER.uid)
    assert node is not None and node.virtual and node.identity.kind == "Secret"
    assert fx.to_delete == [DEP.uid, OWNER.uid]
    assert g.known_absent(OWNER)


def test_virtual_delete_never_removes_an_observed_node() -> None:
    g = graph.Graph()
    g.observe(OWNER, meta(OWNER))
    g.observe(DEP, meta(DEP, ref(OWNER, kind="Secret")))
    wrong = ident("owner", "u-owner", kind="Secret")
    fx = g.virtual_delete(wrong)
    assert g.get(OWNER.uid) is not None
    assert fx.to_delete == [DEP.uid]
    assert g.known_absent(wrong)


def test_deleting_a_blocking_dependent_requeues_its_foreground_owner() -> None:
    g = graph.Graph()
    g.observe(OWNER, meta(OWNER, deleting=True, finalizers=(graph.FOREGROUND,)))
    g.observe(DEP, meta(DEP, ref(OWNER, block=True)))
    assert [d.uid for d in g.blocking_dependents(g.get(OWNER.uid))] == [DEP.uid]  # type: ignore[arg-type]
    fx = g.observe_delete(DEP)
    assert fx.to_delete == [OWNER.uid]
    assert g.blocking_dependents(g.get(OWNER.uid)) == []  # type: ignore[arg-type]


def test_resync_lists_what_a_new_partition_owner_must_recheck() -> None:
    g = graph.Graph()
    g.observe(OWNER, meta(OWNER))
    g.observe(DEP, meta(DEP, ref(OWNER)))  # solid owner: nothing to do
    orphaned = ident("lost", "u-lost")
    g.observe(orphaned, meta(orphaned, ref(ident("gone", "u-gone"))))  # virtual owner
    assert sorted(g.resync()) == [("delete", "u-gone"), ("delete", "u-lost")]
    g.observe_delete(OWNER)  # a change nobody acted on: DEP's owner is missing now
    assert ("delete", DEP.uid) in set(g.resync())


@pytest.mark.parametrize(
    ("old", "new", "added", "removed", "changed"),
    [
        ([], [], [], [], 0),
        (["a"], ["a"], [], [], 0),
        ([], ["a"], ["a"], [], 0),
        (["a", "b"], ["b"], [], ["a"], 0),
        (["a"], ["a*"], [], [], 1),  # same uid, blockOwnerDeletion changed
    ],
)
def test_references_diffs(
    old: list[str], new: list[str], added: list[str], removed: list[str], changed: int
) -> None:
    def refs(names: list[str]) -> list[codec.OwnerReference]:
        return [
            codec.OwnerReference(uid=n.rstrip("*"), block_owner_deletion=n.endswith("*") or None)
            for n in names
        ]

    got_added, got_removed, got_changed = graph.references_diffs(refs(old), refs(new))
    assert [r.uid for r in got_added] == added
    assert [r.uid for r in got_removed] == removed
    assert len(got_changed) == changed


def test_absent_owner_cache_is_bounded() -> None:
    g = graph.Graph()
    for i in range(graph.ABSENT_OWNER_CACHE_SIZE + 10):
        g.mark_absent(ident("x", f"u{i}"))
    assert not g.known_absent(ident("x", "u0"))
    assert g.known_absent(ident("x", f"u{graph.ABSENT_OWNER_CACHE_SIZE + 9}"))


def test_a_virtual_owner_goes_with_its_last_dependent() -> None:
    # Replicas that do not own the owner's key never verify it: its dependents leaving must
    # still free the node, or every replica but one would keep it forever.
    g = graph.Graph()
    g.observe(DEP, meta(DEP, ref(OWNER)))
    g.observe(DEP2, meta(DEP2, ref(OWNER)))
    g.observe_delete(DEP)
    assert g.get(OWNER.uid) is not None
    g.observe(DEP2, meta(DEP2), meta(DEP2, ref(OWNER)))  # reference removed
    assert g.get(OWNER.uid) is None
    assert len(g) == 1


def test_an_observed_owner_stays_when_its_dependents_go() -> None:
    g = graph.Graph()
    g.observe(OWNER, meta(OWNER))
    g.observe(DEP, meta(DEP, ref(OWNER)))
    g.observe_delete(DEP)
    owner = g.get(OWNER.uid)
    assert owner is not None and not owner.dependents


def test_effects_queue_each_uid_once() -> None:
    fx = graph.Effects()
    for uid in ("a", "b", "a", "c", "b"):
        fx.delete(uid)
    assert fx.to_delete == ["a", "b", "c"]
