"""Deployment arithmetic, with upstream's test cases as data (deployment_util_test.go,
rolling_test.go, sync_test.go, progress_test.go)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec
import pytest
from kcm_controllers.deployment import controller as deployment_controller
from kcm_controllers.deployment import util, views

from tests.support.deployment import NEW, OLD, OLDER, T0, deployment, rs

# --- ResolveFenceposts, MaxUnavailable, MaxSurge ---------------------------------------------


@pytest.mark.parametrize(
    ("surge", "unavailable", "desired", "expected"),
    [
        ("0%", "0%", 0, (0, 1)),
        ("39%", "39%", 10, (4, 3)),  # surge rounds up, unavailable down
        (0, 0, 10, (0, 1)),
        (2, 3, 10, (2, 3)),
        ("25%", "25%", 1, (1, 0)),
        ("25%", "25%", 4, (1, 1)),
        (None, None, 5, (0, 1)),
    ],
)
def test_resolve_fenceposts(surge: Any, unavailable: Any, desired: int, expected: tuple[int, int]) -> None:
    assert util.resolve_fenceposts(surge, unavailable, desired) == expected


@pytest.mark.parametrize(("surge", "unavailable"), [("oops", "39%"), ("55%", "urg")])
def test_resolve_fenceposts_rejects_non_percentages(surge: str, unavailable: str) -> None:
    with pytest.raises(ValueError):
        util.resolve_fenceposts(surge, unavailable, 10)


@pytest.mark.parametrize(
    ("d", "expected"),
    [
        (deployment(10, 1, 5), 5),
        (deployment(10, 1, 10), 10),
        (deployment(5, 1, 10), 5),  # never more than the replicas
        (deployment(0, 1, 10), 0),
        (deployment(10, strategy=views.RECREATE), 0),
        (deployment(10, 1, "50%"), 5),
        (deployment(10, 1, "100%"), 10),
        (deployment(5, 1, "100%"), 5),
    ],
)
def test_max_unavailable(d: views.Deployment, expected: int) -> None:
    assert util.max_unavailable(d) == expected


def test_max_surge_is_zero_for_recreate() -> None:
    assert util.max_surge(deployment(10, 3, strategy=views.RECREATE)) == 0
    assert util.max_surge(deployment(10, "25%")) == 3


# --- NewRSNewReplicas / reconcileNewReplicaSet ---------------------------------------------


@pytest.mark.parametrize(
    ("strategy", "dep_replicas", "new_replicas", "surge", "expected"),
    [
        (views.ROLLING_UPDATE, 1, 5, 1, 5),  # can not scale up: stays at newRS replicas
        (views.ROLLING_UPDATE, 6, 2, 10, 6),  # scale up to the deployment's replicas
        (views.RECREATE, 3, 1, 1, 3),
    ],
)
def test_new_rs_new_replicas(
    strategy: str, dep_replicas: int, new_replicas: int, surge: int, expected: int
) -> None:
    d = deployment(dep_replicas, surge, 1, strategy=strategy)
    new = rs("new", new_replicas)
    assert util.new_rs_new_replicas(d, [rs("rs5", 5)], new) == expected


def test_new_rs_new_replicas_counts_pods_an_old_set_has_not_deleted_yet() -> None:
    # The old set was scaled 4 -> 3 but still runs 4 pods: no room for a second new pod yet.
    d = deployment(4, 1, 1)
    old, new = rs("old", 3, actual=4), rs("new", 1, actual=1)
    assert util.new_rs_new_replicas(d, [old, new], new) == 1
    assert util.new_rs_new_replicas(d, [rs("old", 3, actual=3), new], new) == 2


@pytest.mark.parametrize(
    ("dep_replicas", "surge", "old_replicas", "new_replicas", "expected"),
    [
        (10, 0, 10, 0, 0),  # should not scale up
        (10, 2, 10, 0, 2),
        (10, 2, 5, 0, 7),
        (10, 2, 10, 2, 2),
        (10, 2, 2, 11, 10),  # should scale down
    ],
)
def test_new_rs_target(
    dep_replicas: int, surge: int, old_replicas: int, new_replicas: int, expected: int
) -> None:
    d = deployment(dep_replicas, surge, 0)
    new = rs("foo-new", new_replicas)
    assert util.new_rs_target(d, [new, rs("foo-old", old_replicas)], new) == expected


# --- reconcileOldReplicaSets, cleanupUnhealthyReplicas, scaleDownOld ----------------------


@pytest.mark.parametrize(
    ("dep_replicas", "unavailable", "old_replicas", "new_replicas", "old_ready", "new_ready", "expected_old"),
    [
        (10, 0, 10, 0, 10, 0, 9),
        (10, 2, 10, 0, 10, 0, 8),
        (10, 2, 10, 0, 8, 0, 8),  # the unhealthy old pods are cleaned up
        (10, 2, 10, 0, 9, 0, 8),  # one unhealthy cleaned up, one ready one scaled down
        (10, 2, 8, 2, 8, 0, None),  # the new set's unavailable pods stop further scale down
    ],
)
def test_reconcile_old_replica_sets(
    dep_replicas: int,
    unavailable: int,
    old_replicas: int,
    new_replicas: int,
    old_ready: int,
    new_ready: int,
    expected_old: int | None,
) -> None:
    d = deployment(dep_replicas, 0, unavailable)
    new = rs("foo-new", new_replicas, available=new_ready)
    old = rs("foo-old", old_replicas, available=old_ready)
    limit = util.old_scale_down_limit(d, [old, new], new)
    if expected_old is None:
        assert limit <= 0
        return
    size = old.spec.replicas
    cleaned = util.unhealthy_cleanup([old], limit)
    if cleaned:
        ((_, size),) = cleaned
        old = msgspec.structs.replace(old, spec=msgspec.structs.replace(old.spec, replicas=size))
    scaled_down = util.old_scale_down(d, [old, new], [old])
    assert (scaled_down[-1][1] if scaled_down else size) == expected_old


@pytest.mark.parametrize(
    ("replicas", "ready", "limit", "expected"),
    [(10, 8, 1, 1), (10, 8, 3, 2), (10, 8, 0, 0), (10, 10, 3, 0)],
)
def test_unhealthy_cleanup(replicas: int, ready: int, limit: int, expected: int) -> None:
    plan = util.unhealthy_cleanup([rs("foo-v2", replicas, available=ready)], limit)
    assert sum(r.spec.replicas - size for r, size in plan) == expected


@pytest.mark.parametrize(
    ("dep_replicas", "unavailable", "ready", "old_replicas", "expected_old"),
    [
        (10, 0, 10, 10, 9),
        (10, 2, 10, 10, 8),
        (10, 2, 8, 10, None),
        (10, 2, 10, 0, None),
        (10, 2, 1, 10, None),
    ],
)
def test_old_scale_down(
    dep_replicas: int, unavailable: int, ready: int, old_replicas: int, expected_old: int | None
) -> None:
    d = deployment(dep_replicas, 0, unavailable)
    old = rs("foo-v2", old_replicas, available=ready)
    plan = util.old_scale_down(d, [old], [old])
    assert (plan[0][1] if plan else None) == expected_old


def test_old_scale_down_takes_the_oldest_first() -> None:
    d = deployment(4, 0, 2)
    older, old = rs("a", 2, OLDER, available=2), rs("b", 2, OLD, available=2)
    assert [(r.metadata.name, n) for r, n in util.old_scale_down(d, [old, older], [old, older])] == [("a", 0)]


def test_old_scale_down_does_not_count_pods_a_stale_status_still_reports() -> None:
    """Mid-rollout (4 replicas, surge 1, unavailable 1): the old replica set was just scaled
    from 4 to 3 and its status still reports the 4 pods it had; the new one has 1 of 2
    available. 3 + 1 pods are really available, so only one old pod may go."""
    d = deployment(4, 1, 1)
    old = rs("old", 3, OLD, available=4, actual=4)
    new = rs("new", 2, NEW, available=1, actual=2)
    assert util.old_scale_down_limit(d, [old, new], new) == 1
    assert [(r.metadata.name, n) for r, n in util.old_scale_down(d, [old, new], [old])] == [("old", 2)]


# --- scale: proportional scaling (sync_test.go TestScale) ----------------------------------

SCALE_CASES = [
    # name, new deployment (replicas, surge), old deployment (replicas, surge), new rs, old rss, expected sizes
    ("normal scaling event: 10 -> 12", (12, 0), (10, 0), ("foo-v1", 10, NEW), [], {"foo-v1": 12}),
    ("normal scaling event: 10 -> 5", (5, 0), (10, 0), ("foo-v1", 10, NEW), [], {"foo-v1": 5}),
    (
        "proportional scaling: 5 -> 10",
        (10, 0),
        (5, 0),
        ("foo-v2", 2, NEW),
        [("foo-v1", 3, OLD)],
        {"foo-v2": 4, "foo-v1": 6},
    ),
    (
        "proportional scaling: 5 -> 3",
        (3, 0),
        (5, 0),
        ("foo-v2", 2, NEW),
        [("foo-v1", 3, OLD)],
        {"foo-v2": 1, "foo-v1": 2},
    ),
    (
        "proportional scaling: 9 -> 4",
        (4, 0),
        (9, 0),
        ("foo-v2", 8, NEW),
        [("foo-v1", 1, OLD)],
        {"foo-v2": 4, "foo-v1": 0},
    ),
    (
        "proportional scaling: 7 -> 10",
        (10, 0),
        (7, 0),
        ("foo-v3", 2, NEW),
        [("foo-v2", 3, OLD), ("foo-v1", 2, OLDER)],
        {"foo-v3": 3, "foo-v2": 4, "foo-v1": 3},
    ),
    (
        "proportional scaling: 13 -> 8",
        (8, 0),
        (13, 0),
        ("foo-v3", 2, NEW),
        [("foo-v2", 8, OLD), ("foo-v1", 3, OLDER)],
        {"foo-v3": 1, "foo-v2": 5, "foo-v1": 2},
    ),
    (
        "leftover distribution: 3 -> 4 (scales up the new replica set)",
        (4, 0),
        (3, 0),
        ("foo-v3", 1, NEW),
        [("foo-v2", 1, OLD), ("foo-v1", 1, OLDER)],
        {"foo-v3": 2, "foo-v2": 1, "foo-v1": 1},
    ),
    (
        "leftover distribution: 3 -> 2 (scales down the older replica set)",
        (2, 0),
        (3, 0),
        ("foo-v3", 1, NEW),
        [("foo-v2", 1, OLD), ("foo-v1", 1, OLDER)],
        {"foo-v3": 1, "foo-v2": 1, "foo-v1": 0},
    ),
    (
        "proportional scaling (no new rs): 4 -> 5",
        (5, 0),
        (4, 0),
        None,
        [("foo-v2", 2, OLD), ("foo-v1", 2, OLDER)],
        {"foo-v2": 3, "foo-v1": 2},
    ),
    (
        "proportional scaling: 6 -> 0",
        (0, 0),
        (6, 0),
        ("foo-v3", 3, NEW),
        [("foo-v2", 2, OLD), ("foo-v1", 1, OLDER)],
        {"foo-v3": 0, "foo-v2": 0, "foo-v1": 0},
    ),
    (
        "proportional scaling: 0 -> 6",
        (6, 0),
        (6, 0),
        ("foo-v3", 0, NEW),
        [("foo-v2", 0, OLD), ("foo-v1", 0, OLDER)],
        {"foo-v3": 6, "foo-v2": 0, "foo-v1": 0},
    ),
    (
        "deployment with surge pods",
        (20, 2),
        (10, 2),
        ("foo-v2", 6, NEW),
        [("foo-v1", 6, OLD)],
        {"foo-v2": 11, "foo-v1": 11},
    ),
    (
        "change both surge and size",
        (50, 6),
        (10, 3),
        ("foo-v2", 5, NEW),
        [("foo-v1", 8, OLD)],
        {"foo-v2": 22, "foo-v1": 34},
    ),
    (
        "change both size and template",
        (14, 0),
        (10, 0),
        None,
        [("foo-v2", 7, NEW), ("foo-v1", 3, OLD)],
        {"foo-v2": 10, "foo-v1": 4},
    ),
]


@pytest.mark.parametrize(
    ("new_dep", "old_dep", "new_spec", "old_specs", "expected"),
    [case[1:] for case in SCALE_CASES],
    ids=[case[0] for case in SCALE_CASES],
)
def test_scale(
    new_dep: tuple[int, int],
    old_dep: tuple[int, int],
    new_spec: tuple[str, int, dt.datetime] | None,
    old_specs: list[tuple[str, int, dt.datetime]],
    expected: dict[str, int],
) -> None:
    d = deployment(new_dep[0], new_dep[1], 0)
    before = deployment(old_dep[0], old_dep[1], 0)
    # As upstream's test does: every replica set was annotated by the deployment before the change.
    annotations = util.replicas_annotations(before)
    new = rs(*new_spec, annotations=annotations) if new_spec else None
    old = [rs(*spec, annotations=annotations) for spec in old_specs]
    sizes = {r.metadata.name: r.spec.replicas for r in [*old, *([new] if new else [])]}
    targets, _ = util.scale_targets(d, new, old)
    sizes.update({r.metadata.name: size for r, size in targets})
    assert sizes == expected


def test_scale_with_one_set_sized_for_another_desired_count() -> None:
    # Upstream's "failed rs update" case: foo-v2 was annotated for 3 replicas, the others for 5.
    d = deployment(5)
    annotations = util.replicas_annotations(d)
    new = rs("foo-v3", 2, NEW, annotations=annotations)
    v2 = rs("foo-v2", 1, OLD, annotations=util.replicas_annotations(deployment(3)))
    v1 = rs("foo-v1", 1, OLDER, annotations=annotations)
    targets, refresh = util.scale_targets(d, new, [v2, v1])
    assert refresh
    assert {r.metadata.name: n for r, n in targets} == {"foo-v3": 2, "foo-v2": 2, "foo-v1": 1}


def test_saturated_but_broken_new_replica_set_leaves_old_pods_alone() -> None:
    d = deployment(2, 1, 1)
    annotations = util.replicas_annotations(d)
    new = rs("foo-v2", 2, NEW, available=0, annotations=annotations)
    old = rs("foo-v1", 1, OLD, annotations=annotations)
    targets, _ = util.scale_targets(d, new, [old])
    assert {r.metadata.name: n for r, n in targets} == {"foo-v2": 2, "foo-v1": 1}


def test_saturated_new_replica_set_scales_old_ones_to_zero() -> None:
    d = deployment(2, 1, 1)
    annotations = util.replicas_annotations(d)
    new = rs("foo-v2", 2, NEW, available=2, annotations=annotations)
    old = rs("foo-v1", 1, OLD, annotations=annotations)
    assert util.is_saturated(d, new)
    targets, refresh = util.scale_targets(d, new, [old])
    assert not refresh
    assert [(r.metadata.name, n) for r, n in targets] == [("foo-v1", 0)]


@pytest.mark.parametrize(
    ("to_add", "added", "rs_replicas", "max_annotation", "dep_replicas", "expected"),
    [
        (5, 0, 2, "5", 10, 2),  # 2 * 10/5 - 2 = 2
        (5, 4, 2, "5", 10, 1),  # only one left to hand out
        (-2, 0, 3, "5", 3, -1),  # round(3*3/5) - 3 = -1
        (3, 3, 2, "5", 10, 0),  # everything handed out
        (3, 0, 0, "5", 10, 0),  # an empty set gets nothing
        (-6, 0, 3, "6", 0, -3),  # scaling to zero empties every set
    ],
)
def test_get_proportion(
    to_add: int, added: int, rs_replicas: int, max_annotation: str, dep_replicas: int, expected: int
) -> None:
    r = rs("foo", rs_replicas, annotations={util.MAX_REPLICAS: max_annotation})
    assert util.proportion(r, deployment(dep_replicas), to_add, added) == expected


# --- cleanupDeployment ---------------------------------------------------------------------


def _cleanup_rs(name: str, spec: int, actual: int, deleting: bool = False) -> views.ReplicaSet:
    r = rs(name, spec, actual=actual)
    if deleting:
        r = msgspec.structs.replace(r, metadata=msgspec.structs.replace(r.metadata, deletion_timestamp=T0))
    return r


@pytest.mark.parametrize(
    ("old", "limit", "expected"),
    [
        ([("foo-1", 0, 0), ("foo-2", 0, 0), ("foo-3", 0, 0)], 1, 2),
        (
            [("foo-1", 0, 0), ("foo-2", 0, 1), ("foo-3", 1, 0), ("foo-4", 1, 1)],
            0,
            1,
        ),  # only fully scaled down
        ([("foo-1", 0, 0), ("foo-2", 0, 0)], 0, 2),
        ([("foo-1", 1, 1), ("foo-2", 1, 1)], 0, 0),
        ([("foo-1", 0, 0, True)], 0, 0),  # already being deleted
        ([("foo-1", 0, 0), ("foo-2", 0, 0), ("foo-3", 0, 0)], 2**31 - 1, 0),
        ([("foo-1", 0, 0)], None, 0),  # no limit: keep everything
    ],
)
def test_cleanup_candidates(old: list[tuple[Any, ...]], limit: int | None, expected: int) -> None:
    d = deployment(1, history=limit)
    assert len(util.cleanup_candidates(d, [_cleanup_rs(*spec) for spec in old])) == expected


def test_cleanup_takes_the_lowest_revisions_first() -> None:
    d = deployment(1, history=1)
    rss = [rs(f"r{n}", 0, annotations={util.REVISION: str(n)}) for n in (3, 1, 2)]
    assert [r.metadata.name for r in util.cleanup_candidates(d, rss)] == ["r1", "r2"]


# --- revisions, annotations, templates -------------------------------------------------------


def test_new_rs_annotations_bump_the_revision_and_keep_history() -> None:
    d = deployment(3, 1, 0)
    d.metadata.annotations.update(
        {"kubernetes.io/change-cause": "v2", util.REVISION: "1", util.LAST_APPLIED: "{}"}
    )
    fresh = util.new_rs_annotations(d, {}, 1, exists=False)
    assert fresh == {
        "kubernetes.io/change-cause": "v2",
        util.REVISION: "1",
        util.DESIRED_REPLICAS: "3",
        util.MAX_REPLICAS: "4",
    }
    annotations: dict[str, str] = {util.REVISION: "1"}
    for next_revision in range(2, 21):
        annotations = util.new_rs_annotations(d, annotations, next_revision, exists=True)
        assert annotations[util.REVISION] == str(next_revision)
    assert annotations[util.REVISION_HISTORY] == ",".join(str(n) for n in range(1, 20))
    # An equal or lower revision leaves the replica set as it is.
    assert util.new_rs_annotations(d, annotations, 5, exists=True) == annotations


def test_max_revision_skips_garbage() -> None:
    rss = [
        rs("a", 0, annotations={util.REVISION: "3"}),
        rs("b", 0, annotations={util.REVISION: "x"}),
        rs("c", 0),
    ]
    assert util.max_revision(rss) == 3
    assert util.max_revision([]) == 0


CONTAINER = {"name": "c", "image": "nginx"}
TEMPLATE = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [CONTAINER]}}


def test_template_hash_is_stable_safe_and_depends_on_collisions() -> None:
    h = util.template_hash(TEMPLATE, None)
    assert h == util.template_hash(dict(reversed(list(TEMPLATE.items()))), None)
    assert set(h) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert util.template_hash(TEMPLATE, 1) != h
    assert util.template_hash(TEMPLATE, 1) != util.template_hash(TEMPLATE, 2)
    other = {**TEMPLATE, "spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}
    assert util.template_hash(other, None) != h


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        (TEMPLATE, {**TEMPLATE, "metadata": {"labels": {"app": "x", util.POD_TEMPLATE_HASH: "abc"}}}, True),
        (TEMPLATE, {**TEMPLATE, "metadata": {"labels": {"app": "y"}}}, False),
        (
            TEMPLATE,
            {**TEMPLATE, "metadata": {"labels": {"app": "x"}, "annotations": {}}},
            True,
        ),  # empty == absent
        (TEMPLATE, {**TEMPLATE, "metadata": {"labels": {"app": "x"}, "annotations": {"a": "b"}}}, False),
        # A plain field's zero value is the same as its absence (Go decodes them alike) ...
        (TEMPLATE, {**TEMPLATE, "spec": {**TEMPLATE["spec"], "hostNetwork": False}}, True),
        (TEMPLATE, {**TEMPLATE, "spec": {**TEMPLATE["spec"], "nodeName": ""}}, True),
        # ... but a pointer field set to false or 0 is a change to roll out.
        (TEMPLATE, {**TEMPLATE, "spec": {**TEMPLATE["spec"], "automountServiceAccountToken": False}}, False),
        (
            {**TEMPLATE, "spec": {**TEMPLATE["spec"], "securityContext": {"runAsUser": 1000}}},
            {**TEMPLATE, "spec": {**TEMPLATE["spec"], "securityContext": {"runAsUser": 0}}},
            False,
        ),
        (
            TEMPLATE,
            {
                **TEMPLATE,
                "spec": {
                    "containers": [{**CONTAINER, "securityContext": {"allowPrivilegeEscalation": False}}]
                },
            },
            False,
        ),
        # The Go type decides, not the field's name: PodSpec.restartPolicy is a plain string, so
        # "" is its absence, while Container.restartPolicy is a pointer.
        (TEMPLATE, {**TEMPLATE, "spec": {**TEMPLATE["spec"], "restartPolicy": ""}}, True),
        (TEMPLATE, {**TEMPLATE, "spec": {"containers": [{**CONTAINER, "restartPolicy": ""}]}}, False),
        # A pointer to an empty struct is set; a field Go does not declare is dropped by decoding.
        (TEMPLATE, {**TEMPLATE, "spec": {**TEMPLATE["spec"], "dnsConfig": {}}}, False),
        (TEMPLATE, {**TEMPLATE, "spec": {**TEMPLATE["spec"], "notAField": True}}, True),
        # Quantities compare by value.
        (
            {**TEMPLATE, "spec": {"containers": [{**CONTAINER, "resources": {"limits": {"cpu": "1"}}}]}},
            {**TEMPLATE, "spec": {"containers": [{**CONTAINER, "resources": {"limits": {"cpu": "1000m"}}}]}},
            True,
        ),
        (
            {**TEMPLATE, "spec": {"containers": [{**CONTAINER, "resources": {"limits": {"cpu": "1"}}}]}},
            {**TEMPLATE, "spec": {"containers": [{**CONTAINER, "resources": {"limits": {"cpu": "2"}}}]}},
            False,
        ),
    ],
)
def test_equal_ignore_hash(a: dict[str, Any], b: dict[str, Any], equal: bool) -> None:
    assert util.equal_ignore_hash(a, b) is equal


def test_find_new_and_old_replica_sets() -> None:
    d = deployment(1)
    d = msgspec.structs.replace(
        d, spec=msgspec.structs.replace(d.spec, template=msgspec.Raw(msgspec.json.encode(TEMPLATE)))
    )
    hashed = {**TEMPLATE, "metadata": {"labels": {"app": "x", util.POD_TEMPLATE_HASH: "h1"}}}
    new = rs("new", 1, OLD, template=hashed)
    dup = rs(
        "dup",
        1,
        NEW,
        template={**TEMPLATE, "metadata": {"labels": {"app": "x", util.POD_TEMPLATE_HASH: "h2"}}},
    )
    old = rs("old", 1, OLDER, template={**TEMPLATE, "spec": {"containers": [{"name": "c", "image": "old"}]}})
    # Two matching replica sets: only the oldest one is the new one.
    assert util.find_new_replica_set(d, [old, dup, new]) is new
    assert util.find_old_replica_sets([old, dup, new], new) == [old, dup]
    assert util.find_new_replica_set(d, [old]) is None


# --- conditions ------------------------------------------------------------------------------


def cond(type_: str, status: str, reason: str, updated: dt.datetime | None = None) -> views.Condition:
    stamp = util.rfc3339(updated) if updated else None
    return views.Condition(type_, status, stamp, stamp, reason, "")


def test_set_condition() -> None:
    status = views.DeploymentStatus()
    available = cond(util.AVAILABLE, "True", "AwesomeController")
    util.set_condition(status, available)
    assert status.conditions == [available]
    progressing = cond(util.PROGRESSING, "False", "ForSomeReason")
    util.set_condition(status, progressing)
    assert status.conditions == [available, progressing]
    overwrite = cond(util.PROGRESSING, "True", "BecauseItIs")
    util.set_condition(status, overwrite)
    assert status.conditions == [available, overwrite]
    util.remove_condition(status, util.PROGRESSING)
    util.remove_condition(status, util.REPLICA_FAILURE)
    assert status.conditions == [available]


def test_set_condition_keeps_the_transition_time_of_an_unchanged_status() -> None:
    status = views.DeploymentStatus(conditions=[cond(util.PROGRESSING, "True", "A", T0)])
    util.set_condition(status, cond(util.PROGRESSING, "True", "B", T0 + dt.timedelta(minutes=5)))
    (c,) = status.conditions
    assert (c.reason, c.last_transition_time, c.last_update_time) == (
        "B",
        "2016-05-20T00:00:00Z",
        "2016-05-20T00:05:00Z",
    )


def _status(
    replicas: int, updated: int, available: int, ready: int = 0, generation: int = 0
) -> views.DeploymentStatus:
    return views.DeploymentStatus(
        observed_generation=generation,
        replicas=replicas,
        updated_replicas=updated,
        ready_replicas=ready,
        available_replicas=available,
    )


@pytest.mark.parametrize(
    ("desired", "current", "updated", "available", "unavailable", "surge", "complete"),
    [
        (5, 5, 5, 4, 1, 0, False),  # min but not all pods available
        (5, 5, 5, 3, 1, 0, False),
        (5, 5, 5, 5, 0, 0, True),
        (5, 5, 4, 5, 0, 0, False),  # all available, not all updated
        (1, 2, 1, 1, 0, 1, False),  # still running old pods
        (1, 1, 1, 0, 1, 1, False),  # a one-replica deployment that never comes up
    ],
)
def test_deployment_complete(
    desired: int, current: int, updated: int, available: int, unavailable: int, surge: int, complete: bool
) -> None:
    d = deployment(desired, surge, unavailable)
    assert util.deployment_complete(d, _status(current, updated, available)) is complete


@pytest.mark.parametrize(
    ("old", "new", "progressing"),
    [
        ((10, 4, 4, 4), (10, 6, 4, 4), True),  # updated pods
        ((10, 4, 4, 4), (10, 4, 4, 4), False),
        ((10, 4, 6, 6), (8, 4, 6, 6), True),  # old pods removed
        ((10, 7, 3, 3), (10, 6, 3, 3), False),  # fewer new pods
        ((10, 4, 7, 7), (8, 8, 5, 5), True),  # fewer overall but more new pods
        ((10, 10, 9, 8), (10, 10, 10, 8), True),  # more ready pods
        ((10, 10, 10, 9), (10, 10, 10, 10), True),  # more available pods
    ],
)
def test_deployment_progressing(old: tuple[int, ...], new: tuple[int, ...], progressing: bool) -> None:
    current, updated, ready, available = old
    d = deployment(10, status=_status(current, updated, available, ready))
    current, updated, ready, available = new
    assert util.deployment_progressing(d, _status(current, updated, available, ready)) is progressing


@pytest.mark.parametrize(
    ("reason", "deadline", "since", "now", "timed_out"),
    [
        ("", None, (1, 9), (1, 20), False),  # no deadline
        ("", 10, (1, 9), (1, 20), True),  # 11 s
        ("", 10, (1, 11), (1, 20), False),  # 9 s
        (util.NEW_RS_AVAILABLE, 10, (0, 0), (5, 0), False),  # a complete deployment never times out
        (util.TIMED_OUT, 10, (1, 19), (1, 20), True),
    ],
)
def test_deployment_timed_out(
    reason: str, deadline: int | None, since: tuple[int, int], now: tuple[int, int], timed_out: bool
) -> None:
    def at(m: int, s: int) -> dt.datetime:
        return dt.datetime(2016, 1, 1, 0, m, s, tzinfo=dt.UTC)

    status = views.DeploymentStatus(conditions=[cond(util.PROGRESSING, "True", reason, at(*since))])
    d = deployment(1, deadline=deadline, status=status)
    assert util.deployment_timed_out(d, status, at(*now)) is timed_out


NOW = dt.datetime(2016, 1, 1, 0, 10, 0, tzinfo=dt.UTC)


def _rollout(d: views.Deployment, new: views.ReplicaSet, *old: views.ReplicaSet) -> views.DeploymentStatus:
    return util.rollout_status(d, [*old, new], new, NOW)


def test_rollout_status_conditions() -> None:
    # Progress (a new pod became available) refreshes lastUpdateTime, keeps lastTransitionTime.
    earlier = NOW - dt.timedelta(seconds=30)
    before = views.DeploymentStatus(
        replicas=2,
        updated_replicas=1,
        available_replicas=1,
        conditions=[cond(util.PROGRESSING, "True", util.RS_UPDATED, earlier)],
    )
    d = deployment(2, 1, 0, deadline=60, status=before)
    status = _rollout(d, rs("new", 2, actual=2, available=1), rs("old", 1, actual=1, available=1))
    progressing = util.get_condition(status, util.PROGRESSING)
    assert progressing is not None
    assert (progressing.reason, progressing.last_update_time, progressing.last_transition_time) == (
        util.RS_UPDATED,
        util.rfc3339(NOW),
        util.rfc3339(earlier),
    )
    assert progressing.message == 'ReplicaSet "new" is progressing.'
    available = util.get_condition(status, util.AVAILABLE)
    assert available is not None and available.reason == util.MIN_REPLICAS_AVAILABLE
    # Every pod updated and available: complete.
    status = _rollout(d, rs("new", 2, actual=2, available=2))
    progressing = util.get_condition(status, util.PROGRESSING)
    assert progressing is not None and progressing.reason == util.NEW_RS_AVAILABLE
    assert progressing.message == 'ReplicaSet "new" has successfully progressed.'


def test_rollout_status_times_out_without_progress() -> None:
    stuck_since = NOW - dt.timedelta(seconds=6)
    before = views.DeploymentStatus(
        replicas=2,
        updated_replicas=2,
        conditions=[cond(util.PROGRESSING, "True", util.NEW_RS_CREATED, stuck_since)],
    )
    d = deployment(2, 1, 0, deadline=5, status=before)
    status = _rollout(d, rs("new", 2, actual=2, available=0))
    progressing = util.get_condition(status, util.PROGRESSING)
    assert progressing is not None
    assert (progressing.status, progressing.reason) == ("False", util.TIMED_OUT)
    assert progressing.message == 'ReplicaSet "new" has timed out progressing.'
    available = util.get_condition(status, util.AVAILABLE)
    assert available is not None and available.reason == util.MIN_REPLICAS_UNAVAILABLE
    # Before the deadline the status stays, and the sync asks to look again when it passes.
    d = deployment(2, 1, 0, deadline=10, status=before)
    status = _rollout(d, rs("new", 2, actual=2, available=0))
    assert util.get_condition(status, util.PROGRESSING) == before.conditions[0]
    assert util.stuck_requeue_after(d, status, NOW) == pytest.approx(4.0)


def test_rollout_status_without_deadline_has_no_progressing_condition() -> None:
    before = views.DeploymentStatus(conditions=[cond(util.PROGRESSING, "True", util.RS_UPDATED, NOW)])
    d = deployment(1, 1, 0, deadline=2**31 - 1, status=before)
    status = _rollout(d, rs("new", 1, actual=1, available=1))
    assert util.get_condition(status, util.PROGRESSING) is None
    assert util.stuck_requeue_after(d, status, NOW) is None


def test_rollout_status_copies_replica_failure() -> None:
    failure = views.Condition(
        util.REPLICA_FAILURE, "True", None, "2016-01-01T00:00:00Z", "FailedCreate", "quota"
    )
    new = rs("new", 1)
    new = msgspec.structs.replace(new, status=msgspec.structs.replace(new.status, conditions=[failure]))
    status = _rollout(deployment(1, 1, 0), new)
    copied = util.get_condition(status, util.REPLICA_FAILURE)
    assert copied is not None
    assert (copied.reason, copied.message, copied.last_update_time) == (
        "FailedCreate",
        "quota",
        "2016-01-01T00:00:00Z",
    )


@pytest.mark.parametrize(
    ("paused", "current_reason", "expected_reason"),
    [
        (True, None, util.PAUSED),
        (True, util.PAUSED, None),
        (False, util.PAUSED, util.RESUMED),
        (False, util.RS_UPDATED, None),
        (True, util.TIMED_OUT, None),  # a reported lack of progress stays
    ],
)
def test_paused_condition(paused: bool, current_reason: str | None, expected_reason: str | None) -> None:
    conditions = [cond(util.PROGRESSING, "True", current_reason, NOW)] if current_reason else []
    d = deployment(1, deadline=600, paused=paused, status=views.DeploymentStatus(conditions=conditions))
    got = util.paused_condition(d, NOW)
    assert (got.reason if got else None) == expected_reason
    if got is not None:
        assert got.status == "Unknown"


def test_is_scaling_event() -> None:
    d = deployment(5)
    sized_for_3 = rs("a", 3, annotations={util.DESIRED_REPLICAS: "3"})
    sized_for_5 = rs("b", 5, annotations={util.DESIRED_REPLICAS: "5"})
    assert util.is_scaling_event(d, sized_for_3, [])
    assert not util.is_scaling_event(d, sized_for_5, [rs("c", 0, annotations={util.DESIRED_REPLICAS: "3"})])
    assert not util.is_scaling_event(d, rs("d", 2), [])  # no annotation: not a scaling event


def test_find_active_or_latest() -> None:
    new, old = rs("new", 0, NEW), rs("old", 0, OLD)
    assert util.find_active_or_latest(None, []) is None
    assert util.find_active_or_latest(new, [old]) is new
    assert util.find_active_or_latest(None, [old, rs("older", 0, OLDER)]) is old
    assert util.find_active_or_latest(new, [rs("busy", 2, OLD)]).metadata.name == "busy"  # type: ignore[union-attr]
    assert util.find_active_or_latest(rs("n", 1, NEW), [rs("busy", 2, OLD)]) is None


def test_status_patch_sends_zero_fields_as_null() -> None:
    status = views.DeploymentStatus(observed_generation=3, replicas=2, updated_replicas=2)
    assert deployment_controller.status_patch(status) == {
        "observedGeneration": 3,
        "replicas": 2,
        "updatedReplicas": 2,
        "readyReplicas": None,
        "availableReplicas": None,
        "unavailableReplicas": None,
        "collisionCount": None,
        "conditions": None,
    }
