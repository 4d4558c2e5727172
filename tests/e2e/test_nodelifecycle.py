"""The node lifecycle controller end to end: `kcm dev --controllers nodelifecycle,endpoint` with
short grace periods handed through `kcm dev`, driven with kubectl and the simulator's faults.

One shared stack of three nodes (one per zone), a namespace per test; each test works on its
own node and leaves it as it found it. Covers a node whose heartbeats stop (Ready and the
pressure conditions Unknown with upstream's reason and message, the NodeNotReady Events on the
node and its pod, the pod's Ready condition False and its address moved to the Service's
notReadyAddresses, the unreachable NoSchedule and NoExecute taints with timeAdded) and comes
back (taints gone, Ready, the pod's address ready again); a kubelet reporting NotReady (the
not-ready taints, lifted when Ready); `kubectl cordon` / `uncordon` (the unschedulable taint);
the beta os/arch labels kept equal to the stable ones; RegisteredNode Events and the zone
metrics; the controller killed with -9 while a node is silent (the new process taints it).
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from kcm_cli import dev
from kcm_simulator import control

from tests.conftest import wait_for
from tests.e2e import devstack
from tests.e2e.serviceobjects import ips, pod, service

stack = devstack.stack_fixture(
    "--controllers",
    "nodelifecycle,endpoint",
    "--nodes",
    "3",
    "--heartbeat-interval",
    "1",
    "--node-monitor-period=1s",
    "--node-monitor-grace-period=5s",
    "--node-startup-grace-period=10s",
    "--node-eviction-rate=2",
)
CONTROLLER = "node-lifecycle-controller"
UNREACHABLE = "node.kubernetes.io/unreachable"
_counter = iter(range(1000))


@pytest.fixture
def ns(stack: devstack.DevStack) -> Iterator[str]:
    name = f"nl-{next(_counter)}"
    stack.kubectl("create", "namespace", name)
    yield name


def get(stack: devstack.DevStack, *what: str) -> Any:
    res = stack.kubectl("get", *what, "-o", "json", check=False)
    return json.loads(res.stdout) if res.returncode == 0 else None


def sim(stack: devstack.DevStack, node: str, action: str) -> None:
    control.call(stack.state / dev.SIM_CONTROL_FILE, "POST", f"{control.node_path(node)}/{action}")


def conditions(stack: devstack.DevStack, node: str) -> dict[str, dict[str, Any]]:
    obj = get(stack, "node", node) or {}
    return {c["type"]: c for c in obj.get("status", {}).get("conditions", [])}


def taints(stack: devstack.DevStack, node: str) -> dict[tuple[str, str], dict[str, Any]]:
    obj = get(stack, "node", node) or {}
    return {(t["key"], t["effect"]): t for t in obj.get("spec", {}).get("taints") or []}


def events(stack: devstack.DevStack, ns: str, name: str, reason: str) -> list[dict[str, Any]]:
    selector = f"involvedObject.name={name},reason={reason}"
    found = get(stack, "events", "-n", ns, "--field-selector", selector) or {}
    return list(found.get("items", []))


def pod_ready(stack: devstack.DevStack, ns: str, name: str) -> str:
    obj = get(stack, "pod", "-n", ns, name) or {}
    return next(
        (c["status"] for c in obj.get("status", {}).get("conditions", []) if c["type"] == "Ready"), ""
    )


def pinned_pods_behind_a_service(stack: devstack.DevStack, ns: str, silent: str, healthy: str) -> None:
    """Pod `a` on the node that will go silent, `b` on a healthy one, both behind Service `web`."""
    for name, node in (("a", silent), ("b", healthy)):
        stack.kubectl("create", "-f", "-", input=json.dumps(pod(ns, name, {"app": "web"}, nodeName=node)))
    svc = service(ns, "web", selector={"app": "web"}, ports=[{"port": 80}])
    stack.kubectl("create", "-f", "-", input=json.dumps(svc))
    wait_for(lambda: len(ips(get(stack, "endpoints", "-n", ns, "web"))) == 2, 30, what="both addresses ready")


def test_a_silent_node_goes_unknown_its_pods_not_ready_and_tainted_and_recovers(
    stack: devstack.DevStack, ns: str
) -> None:
    node = "sim-node-1"
    pinned_pods_behind_a_service(stack, ns, node, "sim-node-0")
    sim(stack, node, "stop-heartbeat")
    try:
        ready = wait_for(
            lambda: (
                conditions(stack, node).get("Ready", {}).get("status") == "Unknown"
                and conditions(stack, node)["Ready"]
            ),
            30,
            what="Ready Unknown",
        )
        assert ready["reason"] == "NodeStatusUnknown"
        assert ready["message"] == "Kubelet stopped posting node status."
        for kind in ("MemoryPressure", "DiskPressure", "PIDPressure"):
            assert conditions(stack, node)[kind]["status"] == "Unknown"
            assert conditions(stack, node)[kind]["reason"] == "NodeStatusUnknown"
        [event] = wait_for(lambda: events(stack, "default", node, "NodeNotReady"), 20, what="node Event")
        assert event["message"] == f"Node {node} status is now: NodeNotReady"
        assert event["source"]["component"] == "node-controller"
        wait_for(lambda: pod_ready(stack, ns, "a") == "False", 20, what="pod a not ready")
        assert pod_ready(stack, ns, "b") == "True"
        [on_pod] = wait_for(lambda: events(stack, ns, "a", "NodeNotReady"), 20, what="pod Event")
        assert (on_pod["type"], on_pod["message"]) == ("Warning", "Node is not ready")
        wait_for(
            lambda: (
                len(ips(get(stack, "endpoints", "-n", ns, "web"), "notReadyAddresses")) == 1
                and len(ips(get(stack, "endpoints", "-n", ns, "web"))) == 1
            ),
            20,
            what="pod a's address not ready",
        )
        found = wait_for(
            lambda: len(taints(stack, node)) == 2 and taints(stack, node), 20, what="unreachable taints"
        )
        assert set(found) == {(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")}
        assert all(t.get("timeAdded") for t in found.values())
    finally:
        sim(stack, node, "resume-heartbeat")
    wait_for(lambda: not taints(stack, node), 30, what="taints lifted")
    assert conditions(stack, node)["Ready"]["status"] == "True"
    wait_for(lambda: pod_ready(stack, ns, "a") == "True", 30, what="pod a ready again")
    wait_for(lambda: len(ips(get(stack, "endpoints", "-n", ns, "web"))) == 2, 30, what="both addresses ready")


def test_a_node_reporting_not_ready_gets_the_not_ready_taints_until_ready(stack: devstack.DevStack) -> None:
    node = "sim-node-2"
    sim(stack, node, "not-ready")
    try:
        found = wait_for(lambda: len(taints(stack, node)) == 2 and taints(stack, node), 30, what="taints")
        not_ready = "node.kubernetes.io/not-ready"
        assert set(found) == {(not_ready, "NoSchedule"), (not_ready, "NoExecute")}
        assert found[(not_ready, "NoExecute")].get("timeAdded")
        assert conditions(stack, node)["Ready"]["reason"] == "KubeletNotReady"  # the kubelet's, kept
    finally:
        sim(stack, node, "ready")
    wait_for(lambda: not taints(stack, node), 30, what="taints lifted")


def test_cordon_adds_the_unschedulable_taint_and_uncordon_removes_it(stack: devstack.DevStack) -> None:
    node = "sim-node-0"
    stack.kubectl("cordon", node)
    try:
        found = wait_for(lambda: taints(stack, node), 20, what="unschedulable taint")
        assert list(found) == [("node.kubernetes.io/unschedulable", "NoSchedule")]
        assert found[("node.kubernetes.io/unschedulable", "NoSchedule")].get("timeAdded")
    finally:
        stack.kubectl("uncordon", node)
    wait_for(lambda: not taints(stack, node), 20, what="unschedulable taint removed")


def test_the_beta_os_and_arch_labels_follow_the_stable_ones(stack: devstack.DevStack) -> None:
    node = "sim-node-0"

    def labels() -> dict[str, str]:
        return dict((get(stack, "node", node) or {}).get("metadata", {}).get("labels", {}))

    stack.kubectl(
        "label", "node", node, "beta.kubernetes.io/os-", "beta.kubernetes.io/arch=arm64", "--overwrite"
    )
    wait_for(
        lambda: (
            labels().get("beta.kubernetes.io/os") == "linux"
            and labels().get("beta.kubernetes.io/arch") == "amd64"
        ),
        20,
        what=f"beta labels back: {labels()}",
    )


def test_every_node_is_registered_and_its_zone_counted(stack: devstack.DevStack) -> None:
    for node in ("sim-node-0", "sim-node-1", "sim-node-2"):
        [event] = events(stack, "default", node, "RegisteredNode")
        assert event["message"] == f"Node {node} event: Registered Node {node} in Controller"
        assert event["source"]["component"] == "node-controller"
    zone = "sim-region:\x00:zone-a"
    wait_for(
        lambda: stack.metric(CONTROLLER, "node_collector_zone_size", zone=zone) == 1, 20, what="zone size"
    )
    assert stack.metric(CONTROLLER, "node_collector_update_all_nodes_health_duration_seconds_count") > 0


def test_a_controller_killed_while_a_node_is_silent_taints_it_once_back(stack: devstack.DevStack) -> None:
    node = "sim-node-2"
    sim(stack, node, "stop-heartbeat")
    try:
        wait_for(
            lambda: conditions(stack, node).get("Ready", {}).get("status") == "Unknown", 30, what="Unknown"
        )
        pids = stack.controller_pids("nodelifecycle")
        assert pids
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        # The pass's memory went with the process: the new one judges the node from the cache.
        wait_for(
            lambda: (UNREACHABLE, "NoExecute") in taints(stack, node),
            60,
            what="unreachable taint after restart",
        )
        stack.wait_healthy(60)
    finally:
        sim(stack, node, "resume-heartbeat")
    wait_for(lambda: not taints(stack, node), 30, what="taints lifted")
