"""The ReplicaSet's manage step against a recording PodControl (upstream's FakePodControl
scenarios in replica_set_test.go): burst limits, slow start on errors, expectations, ranking."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any, cast

import msgspec
import pytest
from kcm_controllers.replicaset import controller as replicaset
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import podcontrol, podranking
from kcm_shared.controllerutil.replicaset import replicastatus as status
from kcm_shared.runtime import cache
from kcm_shared.testing import recorders

KEY = "default/rs"


def replica_set(replicas: int) -> status.ReplicaSetView:
    doc = {
        "metadata": {"name": "rs", "namespace": "default", "uid": "u", "generation": 1},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "a"}},
            "template": {
                "metadata": {"labels": {"app": "a"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
    }
    return msgspec.json.decode(msgspec.json.encode(doc), type=status.ReplicaSetView)


def pod(
    name: str, phase: str = "Running", ready: bool = True, node: str = "n1", cost: str | None = None
) -> podranking.PodView:
    annotations = {} if cost is None else {podranking.POD_DELETION_COST: cost}
    return msgspec.convert(
        {
            "metadata": {
                "name": name,
                "namespace": "default",
                "labels": {"app": "a"},
                "annotations": annotations,
            },
            "spec": {"nodeName": node},
            "status": {
                "phase": phase,
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            },
        },
        podranking.PodView,
    )


def controller(
    fake: recorders.RecordingPodControl, burst: int = podcontrol.BURST_REPLICAS, deletion_cost: bool = True
) -> replicaset.ReplicaSetController:
    # Caches that are never fed: the manage step reads them only for related pods (none here).
    unfed = cast(Any, None)
    return replicaset.ReplicaSetController(
        unfed,
        cache.Cache(unfed, unfed, replicaset.REPLICASETS, status.ReplicaSetView),
        cache.Cache(unfed, unfed, replicaset.PODS, podranking.PodView),
        lambda key: None,
        lambda key, delay: None,
        fake,
        burst_replicas=burst,
        deletion_cost=deletion_cost,
    )


def test_creates_the_missing_pods_and_waits_for_them() -> None:
    fake = recorders.RecordingPodControl()
    rsc = controller(fake)
    asyncio.run(rsc.manage_replicas(KEY, replica_set(3), [pod("p0")]))
    assert len(fake.templates) == 2
    assert all(ref.uid == "u" and ref.controller and ref.kind == "ReplicaSet" for ref in fake.refs)
    assert not rsc.expectations.satisfied_expectations(KEY)
    rsc.expectations.creation_observed(KEY)
    rsc.expectations.creation_observed(KEY)
    assert rsc.expectations.satisfied_expectations(KEY)


def test_burst_caps_one_sync() -> None:
    fake = recorders.RecordingPodControl()
    rsc = controller(fake, burst=10)
    asyncio.run(rsc.manage_replicas(KEY, replica_set(25), []))
    assert len(fake.templates) == 10
    exp = rsc.expectations.get_expectations(KEY)
    assert exp is not None and exp.add == 10


def test_a_failing_create_stops_the_slow_start_and_lowers_expectations() -> None:
    fake = recorders.RecordingPodControl(err=kubeclient.ApiError(403, "Forbidden", "exceeded quota"))
    rsc = controller(fake)
    with pytest.raises(kubeclient.ApiError):
        asyncio.run(rsc.manage_replicas(KEY, replica_set(5), []))
    assert len(fake.templates) == 1  # the first batch of one failed: no more requests
    assert rsc.expectations.satisfied_expectations(KEY)  # none of the five will ever show up
    new = status.calculate_status(replica_set(5), [], "exceeded quota", dt.datetime.now(dt.UTC))
    [cond] = new.conditions
    assert (cond.type, cond.status, cond.reason, cond.message) == (
        "ReplicaFailure",
        "True",
        "FailedCreate",
        "exceeded quota",
    )


def test_a_terminating_namespace_is_not_an_error() -> None:
    causes = {"details": {"causes": [{"reason": podcontrol.NAMESPACE_TERMINATING_CAUSE}]}}
    fake = recorders.RecordingPodControl(err=kubeclient.ApiError(403, "Forbidden", "terminating", causes))
    asyncio.run(controller(fake).manage_replicas(KEY, replica_set(2), []))
    assert len(fake.templates) == 2


def test_deletes_the_lowest_ranked_pods_and_expects_exactly_them() -> None:
    fake = recorders.RecordingPodControl()
    rsc = controller(fake)
    pods = [pod("ready"), pod("not-ready", ready=False), pod("pending", phase="Pending", node="")]
    asyncio.run(rsc.manage_replicas(KEY, replica_set(1), pods))
    assert fake.deleted == ["pending", "not-ready"]
    assert rsc.expectations.get_uids(KEY) == {"default/pending", "default/not-ready"}
    rsc.expectations.deletion_observed_of(KEY, "default/pending")
    rsc.expectations.deletion_observed_of(KEY, "default/pending")  # seen twice, counted once
    assert not rsc.expectations.satisfied_expectations(KEY)
    rsc.expectations.deletion_observed_of(KEY, "default/not-ready")
    assert rsc.expectations.satisfied_expectations(KEY)


@pytest.mark.parametrize(("gate", "deleted"), [(True, ["cheap"]), (False, ["plain"])])
def test_the_deletion_cost_ranks_only_with_pod_deletion_cost_on(gate: bool, deleted: list[str]) -> None:
    # Equal in every other respect, so with the gate off the cache order decides.
    fake = recorders.RecordingPodControl()
    rsc = controller(fake, deletion_cost=gate)
    asyncio.run(rsc.manage_replicas(KEY, replica_set(1), [pod("plain"), pod("cheap", cost="-10")]))
    assert fake.deleted == deleted


@pytest.mark.parametrize(("code", "raises"), [(404, False), (500, True)])
def test_failed_deletes_lower_expectations_and_404_is_no_error(code: int, raises: bool) -> None:
    fake = recorders.RecordingPodControl(err=kubeclient.ApiError(code, "x", "delete failed"))
    rsc = controller(fake)
    run = rsc.manage_replicas(KEY, replica_set(0), [pod("a"), pod("b")])
    if raises:
        with pytest.raises(kubeclient.ApiError):
            asyncio.run(run)
    else:
        asyncio.run(run)
    assert sorted(fake.deleted) == ["a", "b"]
    assert rsc.expectations.satisfied_expectations(KEY)
