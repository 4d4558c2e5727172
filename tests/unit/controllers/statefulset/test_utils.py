"""kcm_controllers.statefulset.utils: upstream's stateful_set_utils_test.go cases (ordinals,
identity, claims, retention ownership, revisions, status completion)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import msgspec
import pytest
from kcm_controllers.statefulset import utils
from kcm_shared.apimachinery import codec
from kcm_shared.controllerutil import podranking

NOW = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def sset(
    replicas: int = 3,
    *,
    start: int | None = None,
    when_deleted: str = "Retain",
    when_scaled: str = "Retain",
    claims: tuple[str, ...] = ("datadir",),
) -> utils.StatefulSetView:
    return utils.StatefulSetView(
        metadata=codec.ObjectMeta(name="foo", namespace="default", uid="set-uid"),
        spec=utils.StatefulSetSpec(
            replicas=replicas,
            selector={"matchLabels": {"app": "foo"}},
            service_name="governing",
            volume_claim_templates=[
                {
                    "metadata": {"name": c, "labels": {"tier": "db"}},
                    "spec": {"accessModes": ["ReadWriteOnce"]},
                }
                for c in claims
            ],
            persistent_volume_claim_retention_policy=utils.RetentionPolicy(when_deleted, when_scaled),
            ordinals=utils.Ordinals(start) if start is not None else None,
        ),
    )


def pod(
    name: str, phase: str = "Running", ready: bool = True, labels: dict[str, str] | None = None
) -> podranking.PodView:
    conds = [
        podranking.PodCondition(type="Ready", status="True" if ready else "False", last_transition_time=NOW)
    ]
    return podranking.PodView(
        metadata=codec.ObjectMeta(name=name, namespace="default", uid=f"{name}-uid", labels=labels or {}),
        status=podranking.PodStatusView(phase=phase, conditions=conds),
    )


@pytest.mark.parametrize(
    ("name", "parent", "ordinal"),
    [
        ("foo-0", "foo", 0),
        ("foo-12", "foo", 12),
        ("foo-bar-3", "foo-bar", 3),
        ("foo", "", -1),
        ("foo-", "", -1),
        ("foo-x", "", -1),
        ("foo-99999999999", "foo", -1),  # does not fit an int32
    ],
)
def test_parent_and_ordinal(name: str, parent: str, ordinal: int) -> None:
    got_parent, got_ordinal = utils.parent_and_ordinal(name)
    assert got_ordinal == ordinal
    if ordinal >= 0:
        assert got_parent == parent


def test_ordinal_range_with_start() -> None:
    s = sset(3, start=2)
    assert [o for o in range(8) if utils.in_ordinal_range(s, o)] == [2, 3, 4]
    assert [o for o in range(4) if utils.in_ordinal_range(sset(3), o)] == [0, 1, 2]
    assert not any(utils.in_ordinal_range(sset(0), o) for o in range(3))


def test_new_pod_identity_and_storage() -> None:
    s = sset()
    template: dict[str, Any] = {
        "metadata": {"labels": {"app": "foo"}, "annotations": {"a": "b"}},
        "spec": {
            "containers": [{"name": "c"}],
            "volumes": [{"name": "datadir", "emptyDir": {}}, {"name": "cache", "emptyDir": {}}],
        },
    }
    p = utils.new_pod(s, template, 1, "foo-rev")
    meta = p["metadata"]
    assert meta["name"] == "foo-1" and meta["namespace"] == "default"
    assert meta["labels"] == {
        "app": "foo",
        utils.POD_NAME_LABEL: "foo-1",
        utils.POD_INDEX_LABEL: "1",
        utils.REVISION_LABEL: "foo-rev",
    }
    assert meta["annotations"] == {"a": "b"}
    ref = meta["ownerReferences"][0]
    assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == (
        "StatefulSet",
        "foo",
        "set-uid",
        True,
    )
    assert p["spec"]["hostname"] == "foo-1" and p["spec"]["subdomain"] == "governing"
    # The claim replaces the template's volume of the same name; other volumes stay.
    assert p["spec"]["volumes"] == [
        {"name": "datadir", "persistentVolumeClaim": {"claimName": "datadir-foo-1"}},
        {"name": "cache", "emptyDir": {}},
    ]
    assert template["spec"]["volumes"][0] == {"name": "datadir", "emptyDir": {}}  # not mutated


def test_identity_matches() -> None:
    s = sset()
    good = pod("foo-1", labels={utils.POD_NAME_LABEL: "foo-1"})
    assert utils.identity_matches(s, good)
    assert not utils.identity_matches(s, pod("foo-1"))  # label missing
    assert not utils.identity_matches(s, pod("bar-1", labels={utils.POD_NAME_LABEL: "bar-1"}))
    other_ns = pod("foo-1", labels={utils.POD_NAME_LABEL: "foo-1"})
    other_ns.metadata.namespace = "elsewhere"
    assert not utils.identity_matches(s, other_ns)


def test_new_claims() -> None:
    claims = utils.new_claims(sset(claims=("datadir", "logs")), 4)
    assert [c["metadata"]["name"] for c in claims] == ["datadir-foo-4", "logs-foo-4"]
    # The template's labels plus the selector's matchLabels.
    assert claims[0]["metadata"]["labels"] == {"tier": "db", "app": "foo"}
    assert claims[0]["metadata"]["namespace"] == "default"
    assert claims[0]["spec"] == {"accessModes": ["ReadWriteOnce"]}


def ref(owner: utils.Owner, controller: bool = True) -> codec.OwnerReference:
    return codec.OwnerReference(
        api_version=owner.api_version, kind=owner.kind, name=owner.name, uid=owner.uid, controller=controller
    )


SET = utils.Owner("apps/v1", "StatefulSet", "foo", "set-uid")
POD = utils.Owner("v1", "Pod", "foo-1", "pod-uid")


@pytest.mark.parametrize(
    ("when_deleted", "when_scaled", "replicas", "want"),
    [
        # retain/retain: no refs of ours, whatever the ordinal.
        ("Retain", "Retain", 3, []),
        ("Retain", "Retain", 1, []),
        # delete on set deletion: the set owns every claim.
        ("Delete", "Retain", 3, [SET]),
        ("Delete", "Retain", 1, [SET]),
        # delete on scale down: the pod owns the claim of a condemned ordinal only.
        ("Retain", "Delete", 3, []),
        ("Retain", "Delete", 1, [POD]),
        # both: the set while in range, the pod once condemned.
        ("Delete", "Delete", 3, [SET]),
        ("Delete", "Delete", 1, [POD]),
    ],
)
def test_claim_owner_refs_follow_the_policy(
    when_deleted: str, when_scaled: str, replicas: int, want: list[utils.Owner]
) -> None:
    s = sset(replicas, when_deleted=when_deleted, when_scaled=when_scaled)
    for start in ([], [ref(SET)], [ref(POD)], [ref(SET), ref(POD)], [ref(SET, controller=False)]):
        refs = utils.claim_owner_refs(start, s, POD, 1)
        assert [(r.uid, r.controller) for r in refs] == [(o.uid, True) for o in want], (start, refs)
        assert utils.claim_owner_up_to_date(refs, s, POD, 1)
        if [r.uid for r in start] != [o.uid for o in want] or not all(r.controller for r in start):
            assert not utils.claim_owner_up_to_date(start, s, POD, 1), start


def test_claims_with_a_foreign_controller_or_stale_refs_are_left_alone() -> None:
    s = sset(3, when_deleted="Delete")
    foreign = codec.OwnerReference(api_version="v1", kind="Other", name="x", uid="x", controller=True)
    assert utils.claim_owner_up_to_date([foreign], s, POD, 1)
    assert utils.claim_owner_refs([foreign], s, POD, 1) == [foreign]
    stale = codec.OwnerReference(
        api_version="apps/v1", kind="StatefulSet", name="foo", uid="old", controller=True
    )
    assert utils.claim_owner_up_to_date([stale], s, POD, 1)
    old_pod = codec.OwnerReference(api_version="v1", kind="Pod", name="foo-1", uid="old-pod")
    assert utils.claim_is_stale([old_pod], POD)
    assert not utils.claim_is_stale([ref(POD)], POD)


def test_revision_data_round_trips_the_template() -> None:
    template: dict[str, Any] = {"spec": {"containers": [{"name": "c", "image": "nginx:1"}]}, "metadata": {}}
    data = utils.revision_data(template)
    assert json.loads(data) == {"spec": {"template": {**template, "$patch": "replace"}}}
    # Canonical: the same template in another key order gives the same bytes (and hash).
    assert data == utils.revision_data(dict(reversed(list(template.items()))))
    assert utils.template_of_revision(data) == template
    with pytest.raises(ValueError, match=r"no spec\.template"):
        utils.template_of_revision(b'{"spec":{}}')


@pytest.mark.parametrize(
    ("partition", "strategy", "current_replicas", "ordinal", "current"),
    [
        (2, "RollingUpdate", 0, 1, True),
        (2, "RollingUpdate", 0, 2, False),
        (0, "RollingUpdate", 0, 0, False),
        (None, "OnDelete", 3, 1, False),
        (None, "RollingUpdate", 3, 1, True),
        (None, "RollingUpdate", 3, 3, False),
    ],
)
def test_use_current_revision(
    partition: int | None, strategy: str, current_replicas: int, ordinal: int, current: bool
) -> None:
    s = sset()
    rolling = utils.RollingUpdate(partition) if partition is not None else None
    s.spec.update_strategy = utils.UpdateStrategy(type=strategy, rolling_update=rolling)
    s.status.current_replicas = current_replicas
    assert utils.use_current_revision(s, ordinal) is current


def test_replica_status_counts() -> None:
    pods = [
        pod("foo-0", labels={utils.REVISION_LABEL: "a"}),
        pod("foo-1", ready=False, labels={utils.REVISION_LABEL: "b"}),
        pod("foo-2", phase="", labels={utils.REVISION_LABEL: "b"}),  # not created
    ]
    terminating = pod("foo-3", labels={utils.REVISION_LABEL: "b"})
    terminating.metadata.deletion_timestamp = NOW
    counts = utils.replica_status([*pods, terminating], 0, "a", "b", NOW)
    assert (counts.replicas, counts.ready, counts.available, counts.current, counts.updated) == (
        3,
        2,
        2,
        1,
        1,
    )
    # minReadySeconds: ready since NOW is not available yet at NOW.
    assert utils.replica_status(pods, 10, "a", "b", NOW).available == 0
    assert utils.replica_status(pods, 10, "a", "b", NOW + dt.timedelta(seconds=11)).available == 1


def test_complete_rolling_update() -> None:
    s = sset(3)
    done = utils.StatefulSetStatus(
        replicas=3,
        ready_replicas=3,
        updated_replicas=3,
        current_replicas=1,
        current_revision="a",
        update_revision="b",
    )
    utils.complete_rolling_update(s, done)
    assert (done.current_revision, done.current_replicas) == ("b", 3)
    busy = utils.StatefulSetStatus(
        replicas=3, ready_replicas=2, updated_replicas=3, current_revision="a", update_revision="b"
    )
    utils.complete_rolling_update(s, busy)
    assert busy.current_revision == "a"
    s.spec.update_strategy = utils.UpdateStrategy(type="OnDelete")
    utils.complete_rolling_update(
        s,
        done := utils.StatefulSetStatus(
            replicas=3, ready_replicas=3, updated_replicas=3, current_revision="a", update_revision="b"
        ),
    )
    assert done.current_revision == "a"


def test_inconsistent_status() -> None:
    s = sset()
    s.status = utils.StatefulSetStatus(
        observed_generation=2, replicas=3, current_revision="a", update_revision="a"
    )
    same = utils.StatefulSetStatus(
        observed_generation=2, replicas=3, current_revision="a", update_revision="a"
    )
    assert not utils.inconsistent_status(s, same)
    changes = (
        msgspec.structs.replace(same, observed_generation=3),
        msgspec.structs.replace(same, available_replicas=1),
        msgspec.structs.replace(same, update_revision="b"),
        msgspec.structs.replace(same, collision_count=1),
    )
    for other in changes:
        assert utils.inconsistent_status(s, other), other
