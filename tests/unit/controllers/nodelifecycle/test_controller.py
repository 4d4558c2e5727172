"""The node lifecycle controller's passes against the testing kit's fake client, on a fake clock:
upstream node_lifecycle_controller_test.go's scenarios (TestMonitorNodeHealthUpdateStatus,
TestMonitorNodeHealthMarkPodsNotReady, TestApplyNoExecuteTaints, TestSwapUnreachableNotReadyTaints,
the all-zones-down case of TestMonitorNodeHealthEvictPodsWithDisruption) by their outcomes."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import msgspec
from kcm_controllers.nodelifecycle import controller as nlc
from kcm_controllers.nodelifecycle import health
from kcm_controllers.nodelifecycle.views import LeaseView, NodeView, PodView
from kcm_shared.testing import caches, clock, fakeclient, recorders

START = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
UNREACHABLE = "node.kubernetes.io/unreachable"
NOT_READY = "node.kubernetes.io/not-ready"


def node_doc(name: str, zone: str, ready: str = "True", beat: dt.datetime = START, taints: Any = None) -> Any:
    return {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "creationTimestamp": health.rfc3339(START - dt.timedelta(hours=1)),
            "labels": {"topology.kubernetes.io/region": "r", "topology.kubernetes.io/zone": zone},
        },
        "spec": {"taints": taints or []},
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": ready,
                    "lastHeartbeatTime": health.rfc3339(beat),
                    "lastTransitionTime": health.rfc3339(beat),
                }
            ]
        },
    }


def pod_doc(name: str, node: str) -> Any:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "1"},
        "spec": {"nodeName": node},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


class Harness:
    def __init__(self, nodes: list[Any], pods: list[Any] | None = None) -> None:
        self.clock = clock.FakeClock(START, 0.0)
        self.client = fakeclient.FakeClient()
        self.nodes = caches.new(nlc.NODES, NodeView)
        self.pods = caches.new(nlc.PODS, PodView)
        self.leases = caches.new(nlc.LEASES, LeaseView)
        self.recorder = recorders.RecordingEventRecorder("node-controller")
        for doc in nodes:
            self.client.add(f"/api/v1/nodes/{doc['metadata']['name']}", doc)
        for doc in pods or []:
            self.client.add(f"/api/v1/namespaces/default/pods/{doc['metadata']['name']}", doc)
            self.pods.seed(msgspec.convert(doc, PodView))
        self.sync_nodes()
        config = nlc.Config(monitor_period=5, monitor_grace=40, startup_grace=60)
        self.c = nlc.NodeLifecycle(
            self.client,
            self.nodes,
            self.leases,
            self.pods,
            self.recorder,
            config,
            now=self.clock.now,
            monotonic=self.clock.monotonic,
        )

    def sync_nodes(self) -> None:
        """The node cache catches up with what the fake API server holds."""
        for path, obj in self.client.objects.items():
            if path.startswith("/api/v1/nodes/"):
                self.nodes.seed(msgspec.convert(obj, NodeView))

    def pass_(self, advance: float = 0.0) -> None:
        self.clock.advance(advance)
        self.sync_nodes()
        asyncio.run(self.c.monitor_node_health())
        asyncio.run(self.c.no_execute_tainting_pass())

    def node(self, name: str) -> Any:
        return self.client.objects[f"/api/v1/nodes/{name}"]

    def taints(self, name: str) -> set[tuple[str, str]]:
        return {(t["key"], t["effect"]) for t in self.node(name)["spec"].get("taints") or []}

    def ready(self, name: str) -> dict[str, Any]:
        return next(c for c in self.node(name)["status"]["conditions"] if c["type"] == "Ready")


def test_a_silent_node_goes_unknown_marks_its_pods_and_is_tainted_unreachable() -> None:
    h = Harness([node_doc("a", "z1"), node_doc("b", "z2")], [pod_doc("p", "a")])
    h.pass_()
    assert h.recorder.reasons() == ["RegisteredNode", "RegisteredNode"]
    # b keeps beating; a does not.
    h.client.objects["/api/v1/nodes/b"] = node_doc("b", "z2", beat=START + dt.timedelta(seconds=41))
    h.pass_(41)
    ready = h.ready("a")
    assert (ready["status"], ready["reason"]) == ("Unknown", "NodeStatusUnknown")
    assert h.ready("b")["status"] == "True"
    assert ("Normal", "NodeNotReady", "Node a status is now: NodeNotReady") in h.recorder.seen()
    assert ("Warning", "NodeNotReady", "Node is not ready") in h.recorder.seen()
    pod = h.client.objects["/api/v1/namespaces/default/pods/p"]
    assert pod["status"]["conditions"][0]["status"] == "False"
    # The NoExecute taint follows on the next pass, once the cache shows Unknown.
    h.client.objects["/api/v1/nodes/b"] = node_doc("b", "z2", beat=START + dt.timedelta(seconds=46))
    h.pass_(5)
    assert h.taints("a") == {(UNREACHABLE, "NoExecute")}
    assert h.node("a")["spec"]["taints"][0]["timeAdded"] == health.rfc3339(h.clock.now())


def test_an_unreachable_node_reporting_not_ready_has_its_taint_swapped_at_once() -> None:
    h = Harness([node_doc("a", "z1"), node_doc("b", "z2")])
    h.pass_()
    swapped = node_doc("a", "z1", ready="False", taints=[{"key": UNREACHABLE, "effect": "NoExecute"}])
    swapped["metadata"]["resourceVersion"] = "50"
    h.client.objects["/api/v1/nodes/a"] = swapped
    h.pass_(1)
    assert h.taints("a") == {(NOT_READY, "NoExecute")}
    assert not h.c.tainters[health.zone_key(h.nodes.get("", "a"))]  # not through the queue


def test_with_every_zone_fully_disrupted_nothing_is_tainted_and_taints_come_off() -> None:
    h = Harness([node_doc("a", "z1"), node_doc("b", "z2")])
    h.pass_()
    h.pass_(41)  # both silent: Unknown
    assert h.ready("a")["status"] == h.ready("b")["status"] == "Unknown"
    h.pass_(5)
    h.pass_(5)
    assert h.taints("a") == h.taints("b") == set()
    assert set(h.c.zone_states.values()) == {health.FULL_DISRUPTION}


def test_a_pod_is_enqueued_when_bound_to_a_node_that_is_not_ready_only() -> None:
    h = Harness([node_doc("up", "z1"), node_doc("down", "z1", ready="False")])
    queued: list[str] = []
    h.c.register(queued.append)
    caches.deliver(h.pods, "ADDED", pod_doc("on-up", "up"))
    caches.deliver(h.pods, "ADDED", pod_doc("on-down", "down"))
    caches.deliver(h.pods, "ADDED", pod_doc("on-unknown", "nowhere"))
    moved_on = pod_doc("on-down", "down")
    moved_on["metadata"]["resourceVersion"] = "2"
    caches.deliver(h.pods, "MODIFIED", moved_on)  # still bound where it was: nothing new
    assert queued == ["default/on-down"]
    asyncio.run(h.c.reconcile("default/on-down"))
    (patch,) = h.client.calls("patch")
    assert patch[1] == "/api/v1/namespaces/default/pods/on-down/status"
