"""The reconciler's decisions for one node (`desired.wanted`, `plan.decide`), after upstream's
reconciler.go and util.CreateVolumeSpec / csi_plugin.go skipAttach."""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec
import pytest
from kcm_controllers.attachdetach import desired, names, plan
from kcm_controllers.attachdetach.views import (
    AttachmentView,
    ClaimView,
    DriverView,
    PodView,
    VolumeView,
)

DRIVER = "csi.sim.kcm.dev"
NODE = "n1"
UNIQUE = names.unique_volume_name(DRIVER, "h1")
VA = names.attachment_name("h1", DRIVER, NODE)
SETTINGS = plan.Settings(max_wait=360.0, disable_force=False)


def _pod(name: str = "p", *, node: str = NODE, claim: str = "c", **status: Any) -> PodView:
    return msgspec.convert(
        {
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
            "spec": {
                "nodeName": node,
                "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}],
            },
            "status": status,
        },
        PodView,
    )


def _lookups(
    *, phase: str = "Bound", claim_uid: str = "cu", csi: bool = True, attach_required: bool | None = True
) -> desired.Lookups:
    claim = msgspec.convert(
        {
            "metadata": {"name": "c", "namespace": "ns", "uid": "cu"},
            "spec": {"volumeName": "pv1"},
            "status": {"phase": phase},
        },
        ClaimView,
    )
    spec: dict[str, Any] = {
        "claimRef": {"namespace": "ns", "name": "c", "uid": claim_uid},
        "accessModes": ["ReadWriteOnce"],
    }
    if csi:
        spec["csi"] = {"driver": DRIVER, "volumeHandle": "h1"}
    pv = msgspec.convert({"metadata": {"name": "pv1"}, "spec": spec}, VolumeView)
    drivers = (
        {}
        if attach_required is None
        else {DRIVER: msgspec.convert({"spec": {"attachRequired": attach_required}}, DriverView)}
    )
    return desired.Lookups(
        claim=lambda ns, name: claim if (ns, name) == ("ns", "c") else None,
        volume={"pv1": pv}.get,
        driver=drivers.get,
    )


def test_a_pod_with_a_bound_csi_claim_wants_its_volume_under_upstreams_names() -> None:
    wanted = desired.wanted(NODE, [_pod()], _lookups())
    assert list(wanted) == [VA]
    want = wanted[VA]
    assert (want.unique_name, want.pv, want.driver, want.multi_attach) == (UNIQUE, "pv1", DRIVER, False)
    assert [p.metadata.name for p in want.pods] == ["p"]


def test_an_absent_csidriver_means_attach_as_upstream() -> None:
    assert list(desired.wanted(NODE, [_pod()], _lookups(attach_required=None))) == [VA]


@pytest.mark.parametrize(
    ("why", "lookups", "pod"),
    [
        ("attachRequired false", _lookups(attach_required=False), _pod()),
        ("claim not Bound", _lookups(phase="Pending"), _pod()),
        ("PV bound to another claim", _lookups(claim_uid="other"), _pod()),
        ("not a CSI volume", _lookups(csi=False), _pod()),
        ("pod on another node", _lookups(), _pod(node="n2")),
        ("pod finished", _lookups(), _pod(phase="Succeeded")),
    ],
)
def test_nothing_is_wanted(why: str, lookups: desired.Lookups, pod: PodView) -> None:
    assert desired.wanted(NODE, [pod], lookups) == {}, why


def test_a_deleted_pod_keeps_its_volume_until_its_containers_stopped() -> None:
    running = _pod(containerStatuses=[{"state": {"running": {}}}])
    deleted = msgspec.structs.replace(
        running,
        metadata=msgspec.structs.replace(running.metadata, deletion_timestamp=dt.datetime.now(dt.UTC)),
    )
    assert list(desired.wanted(NODE, [deleted], _lookups())) == [VA]
    stopped = msgspec.structs.replace(
        deleted,
        status=msgspec.convert({"containerStatuses": [{"state": {"terminated": {}}}]}, type(deleted.status)),
    )
    assert desired.wanted(NODE, [stopped], _lookups()) == {}


def _va(*, attached: bool = False, error: str = "", deleting: bool = False) -> AttachmentView:
    status: dict[str, Any] = {"attached": attached}
    if error:
        status["attachError"] = {"message": error}
    meta: dict[str, Any] = {"name": VA}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return msgspec.convert({"metadata": meta, "spec": {"nodeName": NODE}, "status": status}, AttachmentView)


def _node(
    *, healthy: bool = True, oos: bool = False, reported: tuple[str, ...] = (), in_use: tuple[str, ...] = ()
) -> plan.NodeState:
    return plan.NodeState(healthy, oos, frozenset(reported), frozenset(in_use))


def _wanted() -> dict[str, desired.Want]:
    return desired.wanted(NODE, [_pod()], _lookups())


def test_a_wanted_volume_without_an_attachment_gets_one() -> None:
    p = plan.decide(_wanted(), {}, _node(), set(), {}, 0.0, SETTINGS)
    assert [w.attachment for w in p.create] == [VA]
    assert (p.report, p.succeeded, p.detach) == ([], [], [])


def test_an_exclusively_attached_volume_elsewhere_is_a_multi_attach_error() -> None:
    p = plan.decide(_wanted(), {}, _node(), {VA}, {}, 0.0, SETTINGS)
    assert (p.create, [w.attachment for w in p.multi_attach]) == ([], [VA])


def test_once_attached_it_is_reported_and_its_pods_told_once() -> None:
    actual = {VA: plan.Attached(UNIQUE, _va(attached=True))}
    first = plan.decide(_wanted(), actual, _node(), set(), {}, 0.0, SETTINGS)
    assert first.report == [UNIQUE] and [w.pv for w in first.succeeded] == ["pv1"]
    again = plan.decide(_wanted(), actual, _node(reported=(UNIQUE,)), set(), {}, 0.0, SETTINGS)
    assert again.report == [UNIQUE] and again.succeeded == []


def test_an_attach_error_is_a_failed_attach() -> None:
    actual = {VA: plan.Attached(UNIQUE, _va(error="boom"))}
    p = plan.decide(_wanted(), actual, _node(), set(), {}, 0.0, SETTINGS)
    assert [(w.pv, e) for w, e in p.failed] == [("pv1", "boom")]
    assert plan.attach_failed("pv1", "boom") == 'AttachVolume.Attach failed for volume "pv1" : boom'


def test_unwanted_and_unmounted_is_detached_after_leaving_the_status() -> None:
    actual = {VA: plan.Attached(UNIQUE, _va(attached=True))}
    p = plan.decide({}, actual, _node(reported=(UNIQUE,)), set(), {}, 0.0, SETTINGS)
    assert (p.detach, p.report, p.forced) == ([VA], [], {})


def test_unwanted_but_mounted_waits_and_stays_reported() -> None:
    actual = {VA: plan.Attached(UNIQUE, _va(attached=True))}
    requested: dict[str, float] = {}
    p = plan.decide({}, actual, _node(reported=(UNIQUE,), in_use=(UNIQUE,)), set(), requested, 10.0, SETTINGS)
    assert (p.detach, p.report, p.wake_after) == ([], [UNIQUE], 360.0)
    assert requested == {VA: 10.0}


@pytest.mark.parametrize(
    ("healthy", "disable_force", "detached", "forced"),
    [
        (False, False, True, "timeout"),  # unhealthy node after the wait: force detach
        (True, False, False, None),  # a healthy node keeps it however long
        (False, True, False, None),  # --disable-force-detach-on-timeout
    ],
)
def test_the_max_wait_for_unmount(
    healthy: bool, disable_force: bool, detached: bool, forced: str | None
) -> None:
    actual = {VA: plan.Attached(UNIQUE, _va(attached=True))}
    requested = {VA: 0.0}
    settings = plan.Settings(max_wait=360.0, disable_force=disable_force)
    p = plan.decide({}, actual, _node(healthy=healthy, in_use=(UNIQUE,)), set(), requested, 361.0, settings)
    assert p.detach == ([VA] if detached else [])
    assert p.forced.get(VA) == forced


def test_the_out_of_service_taint_detaches_at_once() -> None:
    actual = {VA: plan.Attached(UNIQUE, _va(attached=True))}
    p = plan.decide({}, actual, _node(oos=True, in_use=(UNIQUE,)), set(), {}, 0.0, SETTINGS)
    assert (p.detach, p.forced) == ([VA], {VA: "out-of-service"})


def test_a_wanted_volume_again_resets_the_detach_timer() -> None:
    actual = {VA: plan.Attached(UNIQUE, _va(attached=True))}
    requested = {VA: 0.0}
    plan.decide(_wanted(), actual, _node(), set(), requested, 5.0, SETTINGS)
    assert requested == {}


def test_an_attachment_being_deleted_is_neither_reported_nor_recreated() -> None:
    actual = {VA: plan.Attached(UNIQUE, _va(attached=True, deleting=True))}
    p = plan.decide(_wanted(), actual, _node(reported=(UNIQUE,)), set(), {}, 0.0, SETTINGS)
    assert (p.create, p.report, p.detach) == ([], [], [])


def test_a_volume_only_in_the_status_is_dropped_from_it() -> None:
    actual = {VA: plan.Attached(UNIQUE, None)}
    p = plan.decide({}, actual, _node(reported=(UNIQUE,)), set(), {}, 0.0, SETTINGS)
    assert (p.report, p.detach) == ([], [])


def test_the_event_texts_are_upstreams() -> None:
    assert plan.attach_succeeded("pv1") == 'AttachVolume.Attach succeeded for volume "pv1" '
    other_ns = _pod("q", node="n2")
    other_ns = msgspec.structs.replace(
        other_ns, metadata=msgspec.structs.replace(other_ns.metadata, namespace="ns2")
    )
    assert plan.multi_attach_error("pv1", _pod(), []) == (
        'Multi-Attach error for volume "pv1" Volume is already exclusively attached to one node and'
        " can't be attached to another"
    )
    assert plan.multi_attach_error("pv1", _pod(), [_pod("a", node="n2"), other_ns]) == (
        'Multi-Attach error for volume "pv1" Volume is already used by pod(s) a and 1 pod(s) in different namespaces'
    )
    assert plan.multi_attach_error("pv1", _pod(), [other_ns]) == (
        'Multi-Attach error for volume "pv1" Volume is already used by 1 pod(s) in different namespaces'
    )
