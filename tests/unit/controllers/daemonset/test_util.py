"""The DaemonSet controller's pure helpers, with upstream's table cases where it has them
(daemon_controller_test.go TestNodeShouldRunDaemonPod and friends, util/daemonset_util_test.go,
update_test.go), plus kcm_shared.apis.nodeaffinity and kcm_shared.apimachinery.intstr."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any, cast

import msgspec
import pytest
from kcm_controllers.daemonset import controller as daemon_controller
from kcm_controllers.daemonset import update, util, views
from kcm_shared.apimachinery import intstr, selectors
from kcm_shared.apis import nodeaffinity
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import history
from kcm_shared.runtime import cache
from kcm_shared.testing import caches, fakeclient, recorders

Obj = dict[str, Any]
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def node(name: str = "n1", labels: Obj | None = None, taints: list[Obj] | None = None) -> views.NodeView:
    doc = {"metadata": {"name": name, "labels": labels or {}}, "spec": {"taints": taints or []}}
    return msgspec.convert(doc, views.NodeView)


def daemon_spec(**spec: Any) -> Obj:
    """The pod spec the predicates test: the template's spec with the daemon tolerations."""
    return util.Template.of(msgspec.Raw(msgspec.json.encode({"spec": spec}))).pod_spec


def ds(strategy: Obj | None = None, min_ready: int = 0) -> views.DaemonSetView:
    doc = {
        "metadata": {"name": "ds", "namespace": "default", "uid": "u", "generation": 1},
        "spec": {
            "selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c"}]}},
            "updateStrategy": strategy or {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "minReadySeconds": min_ready,
        },
    }
    return msgspec.json.decode(msgspec.json.encode(doc), type=views.DaemonSetView)


def pod(
    name: str, hash_: str, node_name: str = "", ready: bool = True, created: int = 0, deleting: bool = False
) -> views.DaemonPodView:
    doc: Obj = {
        "metadata": {
            "name": name,
            "labels": {util.REVISION_HASH_LABEL: hash_},
            "creationTimestamp": (NOW - dt.timedelta(seconds=100 - created)).isoformat(),
        },
        "spec": {"nodeName": node_name},
        "status": {
            "phase": "Running",
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "lastTransitionTime": (NOW - dt.timedelta(seconds=60)).isoformat(),
                }
            ],
        },
    }
    if deleting:
        doc["metadata"]["deletionTimestamp"] = NOW.isoformat()
    return msgspec.convert(doc, views.DaemonPodView)


def placement(**spec: Any) -> update.Placement:
    pod_spec = daemon_spec(**spec)
    return lambda n: util.node_should_run(n, pod_spec)


def taint(key: str, effect: str, value: str = "") -> Obj:
    return {"key": key, "effect": effect, **({"value": value} if value else {})}


def required(*terms: Obj) -> Obj:
    return {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
    }


# --- NodeShouldRunDaemonPod -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "the_node", "want"),
    [
        pytest.param({}, node(), (True, True), id="ShouldRunDaemonPod"),
        pytest.param({"nodeName": "n1"}, node(), (True, True), id="NodeName matches"),
        pytest.param({"nodeName": "other"}, node(), (False, False), id="NodeName mismatch"),
        pytest.param(
            {"nodeSelector": {"key": "v"}}, node(labels={"key": "v"}), (True, True), id="selector fits"
        ),
        pytest.param({"nodeSelector": {"key": "v"}}, node(), (False, False), id="selector does not fit"),
        pytest.param(
            {
                "affinity": required(
                    {"matchExpressions": [{"key": "type", "operator": "In", "values": ["prod"]}]}
                )
            },
            node(labels={"type": "prod"}),
            (True, True),
            id="required node affinity fits",
        ),
        pytest.param(
            {
                "affinity": required(
                    {"matchExpressions": [{"key": "type", "operator": "In", "values": ["prod"]}]}
                )
            },
            node(labels={"type": "dev"}),
            (False, False),
            id="required node affinity does not fit",
        ),
        pytest.param(
            {}, node(taints=[taint("k", "NoSchedule", "v")]), (False, True), id="untolerated NoSchedule"
        ),
        pytest.param(
            {}, node(taints=[taint("k", "NoExecute", "v")]), (False, False), id="untolerated NoExecute"
        ),
        pytest.param({}, node(taints=[taint("k", "PreferNoSchedule")]), (True, True), id="PreferNoSchedule"),
        pytest.param(
            {"tolerations": [{"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute"}]},
            node(taints=[taint("k", "NoExecute", "v")]),
            (True, True),
            id="tolerated NoExecute",
        ),
        pytest.param(
            {},
            node(taints=[taint(util.TAINT_NOT_READY, "NoExecute")]),
            (True, True),
            id="not-ready tolerated",
        ),
        pytest.param(
            {},
            node(taints=[taint(util.TAINT_UNREACHABLE, "NoExecute")]),
            (True, True),
            id="unreachable tolerated",
        ),
        pytest.param(
            {}, node(taints=[taint(util.TAINT_UNSCHEDULABLE, "NoSchedule")]), (True, True), id="unschedulable"
        ),
        pytest.param(
            {},
            node(taints=[taint(util.TAINT_NOT_READY, "NoSchedule")]),
            (False, True),
            id="not-ready NoSchedule",
        ),
        pytest.param(
            {},
            node(taints=[taint(util.TAINT_NETWORK_UNAVAILABLE, "NoSchedule")]),
            (False, True),
            id="network-unavailable without hostNetwork",
        ),
        pytest.param(
            {"hostNetwork": True},
            node(taints=[taint(util.TAINT_NETWORK_UNAVAILABLE, "NoSchedule")]),
            (True, True),
            id="network-unavailable with hostNetwork",
        ),
    ],
)
def test_node_should_run_daemon_pod(spec: Obj, the_node: views.NodeView, want: tuple[bool, bool]) -> None:
    assert util.node_should_run(the_node, daemon_spec(**spec)) == want


# --- tolerations, template, affinity -----------------------------------------------------------


def test_daemon_tolerations_replace_a_matching_one_and_keep_the_rest() -> None:
    spec: Obj = {
        "tolerations": [
            {
                "key": util.TAINT_NOT_READY,
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {"key": "mine", "operator": "Exists"},
        ]
    }
    util.add_daemon_tolerations(spec)
    assert spec["tolerations"][0] == {
        "key": util.TAINT_NOT_READY,
        "operator": "Exists",
        "effect": "NoExecute",
    }
    assert spec["tolerations"][1] == {"key": "mine", "operator": "Exists"}
    assert [t["key"] for t in spec["tolerations"][2:]] == [
        util.TAINT_UNREACHABLE,
        util.TAINT_DISK_PRESSURE,
        util.TAINT_MEMORY_PRESSURE,
        util.TAINT_PID_PRESSURE,
        util.TAINT_UNSCHEDULABLE,
    ]
    util.add_daemon_tolerations(spec)  # idempotent
    assert len(spec["tolerations"]) == 7


@pytest.mark.parametrize(
    ("generation", "hash_", "labels"),
    [
        (None, "", {"app": "a"}),
        (3, "", {"app": "a", "pod-template-generation": "3"}),
        (3, "abc", {"app": "a", "pod-template-generation": "3", "controller-revision-hash": "abc"}),
    ],
)
def test_create_pod_template(generation: int | None, hash_: str, labels: Obj) -> None:
    template = {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": []}}
    out = util.pod_template(template, generation, hash_)
    assert out["metadata"]["labels"] == labels
    assert len(out["spec"]["tolerations"]) == 6
    assert template == {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": []}}  # copied


PIN = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
PREFERRED = [{"weight": 1, "preference": {"matchExpressions": [{"key": "k", "operator": "Exists"}]}}]


@pytest.mark.parametrize(
    ("affinity", "want"),
    [
        pytest.param(None, required(PIN), id="nil affinity"),
        pytest.param({"podAffinity": {}}, {"podAffinity": {}, **required(PIN)}, id="no node affinity"),
        pytest.param(
            {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": PREFERRED}},
            {
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": PREFERRED,
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [PIN]},
                }
            },
            id="preferred kept",
        ),
        pytest.param(
            required(
                {"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]},
            ),
            required(PIN),
            id="required terms replaced",
        ),
    ],
)
def test_replace_node_name_node_affinity(affinity: Obj | None, want: Obj) -> None:
    assert util.with_node_affinity(affinity, "n1") == want


@pytest.mark.parametrize(
    ("node_name", "affinity", "want"),
    [
        ("n1", None, "n1"),
        ("", required(PIN), "n1"),
        ("", None, None),
        (
            "",
            required({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}),
            None,
        ),
        ("", required({"matchExpressions": [{"key": "k", "operator": "Exists"}]}), None),
    ],
)
def test_get_target_node_name(node_name: str, affinity: Obj | None, want: str | None) -> None:
    assert util.target_node_name(node_name, affinity) == want


def test_is_pod_updated_compares_the_hash_only() -> None:
    assert util.is_pod_updated({util.REVISION_HASH_LABEL: "h"}, "h")
    assert not util.is_pod_updated({util.REVISION_HASH_LABEL: "h"}, "other")
    assert not util.is_pod_updated({}, "")
    assert not util.is_pod_updated({util.TEMPLATE_GENERATION_LABEL: "1"}, "h")


@pytest.mark.parametrize(
    ("rolling", "desired", "surge", "unavailable"),
    [
        ({"maxUnavailable": 1}, 10, 0, 1),
        ({"maxUnavailable": "25%"}, 10, 0, 3),  # rounded up
        ({"maxUnavailable": 0, "maxSurge": "10%"}, 5, 1, 0),
        ({"maxUnavailable": "50%", "maxSurge": 2}, 3, 2, 2),
    ],
)
def test_surge_and_unavailable_counts(rolling: Obj, desired: int, surge: int, unavailable: int) -> None:
    d = ds({"type": "RollingUpdate", "rollingUpdate": rolling})
    assert util.surge_count(d, desired) == surge
    assert util.unavailable_count(d, desired) == unavailable
    assert util.allows_surge(d) is (surge > 0)
    on_delete = ds({"type": "OnDelete"})
    assert util.surge_count(on_delete, desired) == util.unavailable_count(on_delete, desired) == 0


def test_malformed_percentage_is_an_error() -> None:
    with pytest.raises(ValueError, match="string is not a percentage"):
        intstr.scaled_value("ten", 10, round_up=True)
    with pytest.raises(ValueError, match='invalid value "x%"'):
        intstr.scaled_value("x%", 10, round_up=True)
    assert not util.allows_surge(ds({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "x"}}))


def test_template_generation_annotation() -> None:
    assert util.template_generation({util.TEMPLATE_GENERATION_ANNOTATION: "4"}) == 4
    assert util.template_generation({util.TEMPLATE_GENERATION_ANNOTATION: "four"}) is None
    assert util.template_generation({}) is None


def test_by_creation_puts_bound_then_oldest_first() -> None:
    pods = [pod("b", "h", created=1), pod("c", "h", "n1", created=5), pod("a", "h", "n1", created=5)]
    assert [p.metadata.name for p in util.by_creation(pods)] == ["a", "c", "b"]


def test_unscheduled_pods_of_missing_nodes() -> None:
    mapping = {"gone": [pod("p1", "h"), pod("p2", "h", "gone")], "n1": [pod("p3", "h")]}
    assert util.unscheduled_pods_without_node({"n1"}, mapping) == ["p1"]


# --- rolling update -------------------------------------------------------------------------


def plan(
    d: views.DaemonSetView, node_to_pods: dict[str, list[views.DaemonPodView]]
) -> tuple[list[str], list[str]]:
    nodes = [node(n) for n in sorted(node_to_pods)]
    counts = update.desired_counts(d, nodes, placement(), node_to_pods)
    return update.rolling_update_plan(d, node_to_pods, counts, "new", lambda n: True, NOW)


def test_max_unavailable_deletes_that_many_old_pods() -> None:
    mapping = {f"n{i}": [pod(f"p{i}", "old", f"n{i}")] for i in range(4)}
    to_delete, to_create = plan(
        ds({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}}), mapping
    )
    assert len(to_delete) == 2 and to_create == []


def test_unavailable_new_pods_count_against_max_unavailable() -> None:
    mapping = {
        "n0": [pod("new0", "new", "n0", ready=False)],
        "n1": [pod("p1", "old", "n1")],
        "n2": [pod("p2", "old", "n2")],
    }
    assert plan(ds(), mapping) == ([], [])


def test_unavailable_old_pods_are_always_replaced() -> None:
    mapping = {
        "n0": [pod("new0", "new", "n0", ready=False)],
        "n1": [pod("p1", "old", "n1", ready=False)],
        "n2": [pod("p2", "old", "n2")],
    }
    assert plan(ds(), mapping) == (["p1"], [])


def test_a_node_without_a_pod_counts_as_unavailable() -> None:
    mapping: dict[str, list[views.DaemonPodView]] = {"n0": [], "n1": [pod("p1", "old", "n1")]}
    assert plan(ds(), mapping) == ([], [])


SURGE = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}


def test_max_surge_creates_beside_the_old_pod() -> None:
    mapping = {f"n{i}": [pod(f"p{i}", "old", f"n{i}")] for i in range(3)}
    to_delete, to_create = plan(ds(SURGE), mapping)
    assert to_delete == [] and len(to_create) == 1


def test_surge_waits_for_the_new_pod_then_deletes_the_old() -> None:
    waiting = {
        "n0": [pod("p0", "old", "n0"), pod("new0", "new", "n0", ready=False)],
        "n1": [pod("p1", "old", "n1")],
    }
    assert plan(ds(SURGE), waiting) == ([], [])
    done = {"n0": [pod("p0", "old", "n0"), pod("new0", "new", "n0")], "n1": [pod("p1", "old", "n1")]}
    assert plan(ds(SURGE), done) == (["p0"], ["n1"])


def test_surge_replaces_an_unavailable_old_pod_at_once() -> None:
    mapping = {f"n{i}": [pod(f"p{i}", "old", f"n{i}", ready=False)] for i in range(3)}
    assert plan(ds(SURGE), mapping) == ([], ["n0", "n1", "n2"])


def test_pods_being_deleted_are_not_counted_on_their_node() -> None:
    new, old, ok = update.find_updated_pods_on_node([pod("a", "old", deleting=True), pod("b", "new")], "new")
    assert ok and old is None and new is not None and new.metadata.name == "b"
    assert update.find_updated_pods_on_node([pod("a", "old"), pod("b", "old")], "new")[2] is False


# --- revisions ------------------------------------------------------------------------------


def test_revision_data_is_what_kubectl_encodes() -> None:
    template = {
        "metadata": {"labels": {"app": "a"}},
        "spec": {"containers": [{"name": "c", "image": "i<&>"}]},
    }
    assert update.revision_data(template) == (
        b'{"spec":{"template":{"$patch":"replace","metadata":{"creationTimestamp":null,"labels":{"app":"a"}},'
        b'"spec":{"containers":[{"image":"i\\u003c\\u0026\\u003e","name":"c","resources":{}}]}}}}'
    )


def test_template_hash_depends_on_template_and_collision_count() -> None:
    template = {"metadata": {"labels": {"app": "a"}}, "spec": {}}
    h = update.template_hash(template, None)
    assert h == update.template_hash(dict(template), None)
    assert (
        h != update.template_hash(template, 1) != update.template_hash({**template, "spec": {"x": 1}}, None)
    )
    assert set(h) <= set("bcdfghjklmnpqrstvwxz2456789")


# --- status ---------------------------------------------------------------------------------


def test_status_counts_by_the_oldest_pod_of_each_node() -> None:
    nodes = [node("n0"), node("n1"), node("n2", taints=[taint("k", "NoSchedule")]), node("n3")]
    mapping = {
        "n0": [pod("a", "new", "n0", created=1), pod("b", "old", "n0", created=2)],
        "n1": [pod("c", "old", "n1", ready=False)],
        "n2": [pod("d", "new", "n2")],
    }
    s = daemon_controller.count_status(ds(min_ready=0), nodes, mapping, placement(), "new", NOW)
    assert (s.desired_number_scheduled, s.current_number_scheduled, s.number_misscheduled) == (3, 2, 1)
    assert (s.number_ready, s.number_available, s.number_unavailable, s.updated_number_scheduled) == (
        1,
        1,
        2,
        1,
    )
    late = daemon_controller.count_status(ds(min_ready=120), nodes, mapping, placement(), "new", NOW)
    assert (late.number_ready, late.number_available) == (1, 0)


def test_failed_pod_backoff_doubles_up_to_the_cap() -> None:
    b = daemon_controller.Backoff(1.0, 4.0)
    assert not b.in_backoff_since_update("k", 0.0)
    steps = []
    for now in (0.0, 1.5, 4.0, 9.0, 14.0):
        b.next("k", now)
        steps.append(b.get("k"))
    assert steps == [1.0, 2.0, 4.0, 4.0, 4.0]
    assert b.in_backoff_since_update("k", 17.0) and not b.in_backoff_since_update("k", 18.5)
    b.next("k", 30.0)  # more than twice the cap since the last step: starts over
    assert b.get("k") == 1.0


# --- kcm_shared.apis.nodeaffinity --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("term", "fits"),
    [
        ({"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n2"]}]}, True),
        ({"matchFields": [{"key": "metadata.name", "operator": "Exists"}]}, False),  # only In/NotIn
        ({"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["n1"]}]}, False),
        ({"matchExpressions": [{"key": "cpus", "operator": "Gt", "values": ["3"]}]}, True),
        ({"matchExpressions": [{"key": "cpus", "operator": "Lt", "values": ["3"]}]}, False),
        ({"matchExpressions": [{"key": "cpus", "operator": "Bogus", "values": ["3"]}]}, False),
        ({}, False),
    ],
)
def test_node_selector_terms(term: Obj, fits: bool) -> None:
    the_node = {"metadata": {"name": "n1", "labels": {"cpus": "4"}}}
    assert nodeaffinity.term_matches(term, the_node) is fits


# --- the manage step, against a recording PodControl ----------------------------------------


def manager(
    fake: recorders.RecordingPodControl, recorder: recorders.RecordingEventRecorder, clock: list[float]
) -> Any:
    unfed = cast(Any, None)
    return daemon_controller.DaemonSetsController(
        unfed,
        cache.Cache(unfed, unfed, daemon_controller.DAEMONSETS, views.DaemonSetView),
        cache.Cache(unfed, unfed, daemon_controller.PODS, views.DaemonPodView),
        cache.Cache(unfed, unfed, daemon_controller.NODES, views.NodeView),
        cache.Cache(unfed, unfed, daemon_controller.REVISIONS, history.ControllerRevisionView),
        lambda key: None,
        lambda key, delay: None,
        fake,
        recorder,
        now=lambda: NOW,
        monotonic=lambda: clock[0],
    )


def state(d: views.DaemonSetView, nodes: list[views.NodeView]) -> daemon_controller.SyncState:
    template = util.Template.of(d.spec.template)
    return daemon_controller.SyncState(
        "default/ds", d, selectors.selector_from_set({"app": "a"}), nodes, template, "new"
    )


def failed(name: str, node_name: str) -> views.DaemonPodView:
    return msgspec.structs.replace(
        pod(name, "new", node_name),
        status=msgspec.convert({"status": {"phase": "Failed"}}, views.DaemonPodView).status,
    )


def test_failed_pods_are_deleted_with_a_backoff_and_an_event() -> None:
    clock = [100.0]
    recorder = recorders.RecordingEventRecorder()
    dsc = manager(recorders.RecordingPodControl(), recorder, clock)
    s = state(ds(), [node("n1")])
    mapping = {"n1": [failed("f1", "n1")]}
    assert dsc.pods_should_be_on_node(s, node("n1"), mapping) == ([], ["f1"])
    assert recorder.seen() == [
        ("Warning", "FailedDaemonPod", "Found failed daemon pod /f1 on node n1, will try to kill it")
    ]
    # Within the backoff: left alone, and the set asks to be synced once it is over.
    clock[0] += 0.5
    assert dsc.pods_should_be_on_node(s, node("n1"), mapping) == ([], [])
    assert s.delays == [1.0] and len(recorder.events) == 1
    clock[0] += 1.0
    assert dsc.pods_should_be_on_node(s, node("n1"), mapping) == ([], ["f1"])


def test_extra_pods_beyond_the_oldest_are_deleted_without_surge() -> None:
    dsc = manager(recorders.RecordingPodControl(), recorders.RecordingEventRecorder(), [0.0])
    mapping = {"n1": [pod("young", "new", "n1", created=9), pod("old", "old", "n1", created=1)]}
    assert dsc.pods_should_be_on_node(state(ds(), [node("n1")]), node("n1"), mapping) == ([], ["young"])


def test_surge_keeps_old_and_new_until_the_new_one_is_available() -> None:
    dsc = manager(recorders.RecordingPodControl(), recorders.RecordingEventRecorder(), [0.0])
    s = state(ds(SURGE), [node("n1")])
    waiting = {"n1": [pod("old", "old", "n1", created=1), pod("new", "new", "n1", created=9, ready=False)]}
    assert dsc.pods_should_be_on_node(s, node("n1"), waiting) == ([], [])
    ready = {"n1": [pod("old", "old", "n1", created=1), pod("new", "new", "n1", created=9)]}
    assert dsc.pods_should_be_on_node(s, node("n1"), ready) == ([], ["old"])


def test_a_node_that_should_not_run_the_pod_loses_it() -> None:
    dsc = manager(recorders.RecordingPodControl(), recorders.RecordingEventRecorder(), [0.0])
    tainted = node("n1", taints=[taint("k", "NoExecute")])
    mapping = {"n1": [pod("p", "new", "n1"), pod("gone", "new", "n1", deleting=True)]}
    assert dsc.pods_should_be_on_node(state(ds(), [tainted]), tainted, mapping) == ([], ["p"])


def test_sync_nodes_pins_each_pod_to_its_node_and_stops_at_the_first_failed_batch() -> None:
    fake = recorders.RecordingPodControl()
    dsc = manager(fake, recorders.RecordingEventRecorder(), [0.0])
    s = state(ds(), [node(f"n{i}") for i in range(3)])
    asyncio.run(dsc.sync_nodes(s, [], ["n0", "n1", "n2"]))
    pinned = [
        msgspec.json.decode(t.spec)["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]
        for t in fake.templates
    ]
    assert sorted(p["nodeSelectorTerms"][0]["matchFields"][0]["values"][0] for p in pinned) == [
        "n0",
        "n1",
        "n2",
    ]
    assert all(t.metadata.labels == {"app": "a", util.REVISION_HASH_LABEL: "new"} for t in fake.templates)
    assert dsc.expectations.get_expectations("default/ds").add == 3  # none observed yet
    failing = recorders.RecordingPodControl(err=RuntimeError("quota"))
    dsc = manager(failing, recorders.RecordingEventRecorder(), [0.0])
    with pytest.raises(RuntimeError, match="quota"):
        asyncio.run(dsc.sync_nodes(s, [], ["n0", "n1", "n2"]))
    assert len(failing.templates) == 1  # slow start: the first batch of one failed
    assert dsc.expectations.satisfied_expectations("default/ds")


# --- revision history, against a recording client ------------------------------------------

TEMPLATE = {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c"}]}}


def revision(
    name: str, number: int, template: Obj, hash_: str | None = None
) -> history.ControllerRevisionView:
    doc = {
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"app": "a", util.REVISION_HASH_LABEL: hash_ or name},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u", "controller": True}
            ],
        },
        "data": msgspec.json.decode(update.revision_data(template)),
        "revision": number,
    }
    return msgspec.json.decode(msgspec.json.encode(doc), type=history.ControllerRevisionView)


REVISIONS_PATH = "/apis/apps/v1/namespaces/default/controllerrevisions"
DS_PATH = "/apis/apps/v1/namespaces/default/daemonsets/ds"
SELECTOR = selectors.selector_from_set({"app": "a"})


async def no_relabel(hash_: str) -> None:
    raise AssertionError("nothing to merge")


def held(client: fakeclient.FakeClient, *revs: history.ControllerRevisionView) -> None:
    """Revisions the API server holds (the cache shows what it is given separately)."""
    for rev in revs:
        client.add(f"{REVISIONS_PATH}/{rev.metadata.name}", msgspec.json.decode(msgspec.json.encode(rev)))


def construct(client: fakeclient.FakeClient, *revs: history.ControllerRevisionView) -> tuple[str, list[str]]:
    """constructHistory with `revs` in the cache and the API server alike."""
    held(client, *revs)
    revisions = caches.new(daemon_controller.REVISIONS, history.ControllerRevisionView)
    for rev in revs:
        revisions.seed(rev)
    h = update.History(client, revisions)
    hash_, old = asyncio.run(h.construct(ds(), SELECTOR, TEMPLATE, no_relabel))
    return hash_, [r.metadata.name for r in old]


def test_the_first_revision_is_created_from_the_template() -> None:
    client = fakeclient.FakeClient()
    hash_, old = construct(client)
    assert old == [] and hash_ == update.template_hash(TEMPLATE, None)
    ((method, path, body),) = client.calls()
    assert (method, path) == ("create", REVISIONS_PATH)
    assert body["metadata"]["name"] == f"ds-{hash_}" and body["revision"] == 1
    assert body["metadata"]["labels"] == {"app": "a", util.REVISION_HASH_LABEL: hash_}
    assert body["metadata"]["ownerReferences"][0]["uid"] == "u"
    assert msgspec.json.encode(body["data"]) == update.revision_data(TEMPLATE)


def test_a_rolled_back_revision_is_renumbered_past_the_others() -> None:
    client = fakeclient.FakeClient()
    older = {**TEMPLATE, "spec": {"containers": [{"name": "c", "image": "v2"}]}}
    hash_, old = construct(client, revision("ds-cur", 1, TEMPLATE), revision("ds-old", 2, older))
    assert (hash_, old) == ("ds-cur", ["ds-old"])
    assert client.calls() == [("patch", f"{REVISIONS_PATH}/ds-cur", {"revision": 3})]


def test_a_name_taken_by_other_data_bumps_the_collision_count_and_fails() -> None:
    # The revision's name is taken (the fake answers its create with 409 AlreadyExists).
    name = f"ds-{update.template_hash(TEMPLATE, None)}"
    other = {"data": {"spec": {"template": {"$patch": "replace"}}}}
    client = fakeclient.FakeClient(
        {f"{REVISIONS_PATH}/{name}": other, DS_PATH: {"metadata": {"resourceVersion": "7"}, "status": {}}}
    )
    with pytest.raises(kubeclient.ApiError):
        construct(client)
    assert client.calls()[-1] == (
        "patch",
        f"{DS_PATH}/status",
        {"metadata": {"resourceVersion": "7"}, "status": {"collisionCount": 1}},
    )
    # A cached DaemonSet behind the server's count: no bump, a retry once the cache catches up.
    stale = fakeclient.FakeClient(
        {f"{REVISIONS_PATH}/{name}": other, DS_PATH: {"status": {"collisionCount": 1}}}
    )
    with pytest.raises(update.StaleCollisionCount, match="found a stale collision count"):
        construct(stale)
    assert all(method != "patch" for method, _, _ in stale.calls())
    # The same data under that name: ours from an earlier try, taken as it is.
    same = fakeclient.FakeClient(
        {f"{REVISIONS_PATH}/{name}": {"data": msgspec.json.decode(update.revision_data(TEMPLATE))}}
    )
    assert construct(same)[0] == update.template_hash(TEMPLATE, None)


def test_cleanup_keeps_the_limit_and_every_revision_a_pod_runs() -> None:
    client = fakeclient.FakeClient()
    h = update.History(client, caches.new(daemon_controller.REVISIONS, history.ControllerRevisionView))
    old = [revision(f"r{i}", i, {**TEMPLATE, "spec": {"n": i}}) for i in (3, 1, 2, 4)]
    held(client, *old)
    d = msgspec.structs.replace(ds(), spec=msgspec.structs.replace(ds().spec, revision_history_limit=1))
    asyncio.run(h.cleanup(d, old, {"n1": [pod("p", "r1", "n1")]}))
    # Three go to keep one, oldest first; r1 still runs a pod, so it is the one that stays.
    assert [path.rsplit("/", 1)[1] for _, path, _ in client.calls()] == ["r2", "r3", "r4"]
