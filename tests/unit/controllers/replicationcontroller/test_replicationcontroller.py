"""The ReplicationController's adapter over the shared ReplicaSet sync: its label-map selector
read as upstream's conversion reads it, its owner references and Events' component, its
status in the ReplicaSet's shape, and a selector that changes (an RC's may; an apps/v1 one
may not) taking effect."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any, cast

import msgspec
import pytest
from kcm_controllers.replicationcontroller import controller as rcc
from kcm_shared.controllerutil import podranking
from kcm_shared.controllerutil.replicaset import replicastatus
from kcm_shared.runtime import cache
from kcm_shared.testing import recorders

KEY = "default/rc"


def rc(replicas: int, selector: dict[str, str] | None) -> replicastatus.ReplicaSetView:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": "rc", "namespace": "default", "uid": "u", "generation": 2},
        "spec": {
            "replicas": replicas,
            "selector": selector,
            "template": {
                "metadata": {"labels": {"app": "a", "tier": "web"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
        "status": {"replicas": 0},
    }
    return msgspec.json.decode(msgspec.json.encode(doc), type=replicastatus.ReplicaSetView)


def pod(name: str, labels: dict[str, str]) -> podranking.PodView:
    return msgspec.convert(
        {
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"nodeName": "n1"},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        },
        podranking.PodView,
    )


def manager(fake: recorders.RecordingPodControl) -> rcc.ReplicationManager:
    unfed = cast(Any, None)  # caches never fed: these steps do not read them
    return rcc.ReplicationManager(
        unfed,
        cache.Cache(unfed, unfed, rcc.RCS, replicastatus.ReplicaSetView),
        cache.Cache(unfed, unfed, rcc.PODS, podranking.PodView),
        lambda key: None,
        lambda key, delay: None,
        fake,
    )


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        ({"app": "a"}, {"app": "a", "tier": "web"}, True),
        ({"app": "a", "tier": "web"}, {"app": "a"}, False),
        ({"app": "a"}, {"app": "b"}, False),
        ({}, {"any": "thing"}, True),  # an empty LabelSelector selects everything
        (None, {"app": "a"}, False),  # a nil one selects nothing
    ],
)
def test_label_map_selector_reads_as_upstream_conversion(
    selector: dict[str, str] | None, labels: dict[str, str], matches: bool
) -> None:
    assert rcc.parse_selector(selector).matches(labels) is matches


def test_creates_pods_owned_by_the_rc() -> None:
    fake = recorders.RecordingPodControl()
    asyncio.run(manager(fake).manage_replicas(KEY, rc(2, {"app": "a"}), []))
    assert len(fake.templates) == 2
    assert {(r.api_version, r.kind, r.name, r.uid, r.controller) for r in fake.refs} == {
        ("v1", "ReplicationController", "rc", "u", True)
    }


def test_status_counts_in_the_replicaset_shape() -> None:
    owner = rc(3, {"app": "a"})
    pods = [pod("full", {"app": "a", "tier": "web"}), pod("partial", {"app": "a"})]
    new = replicastatus.calculate_status(owner, pods, "quota", dt.datetime.now(dt.UTC))
    assert (new.replicas, new.fully_labeled_replicas, new.ready_replicas) == (2, 1, 2)
    [cond] = new.conditions
    assert (cond.type, cond.reason) == ("ReplicaFailure", "FailedCreate")
    body = replicastatus.status_patch(new, owner.metadata.generation, "7")
    assert body["status"]["observedGeneration"] == 2


def test_a_changed_selector_takes_effect() -> None:
    m = manager(recorders.RecordingPodControl())
    assert m.selector(rc(1, {"app": "a"})).matches({"app": "a"})
    changed = m.selector(rc(1, {"app": "b"}))  # same uid: the memo must not hide the edit
    assert changed.matches({"app": "b"}) and not changed.matches({"app": "a"})


def test_spec_uses_upstream_names() -> None:
    spec = rcc.SPEC
    assert (spec.name, spec.alias, spec.flag, spec.workers) == (
        "replicationcontroller-controller",
        "replicationcontroller",
        "concurrent-rc-syncs",
        5,
    )
    assert spec.enabled_by_default and spec.event_component == "replication-controller"
