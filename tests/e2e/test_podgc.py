"""The pod garbage collector end to end: `kcm dev` with only it (two replicas) and one simulated node.

Short test-only periods (a pass every second, a 3 s quarantine) and a threshold of 3
terminated pods. Nodes whose kubelet is gone are Node objects with no kubelet behind them (the
simulator runs only its own nodes' pods): created with the official client, cordoned so the
simulator's scheduler leaves them alone, and without a Ready condition. Covers: terminated pods
over the threshold deleted oldest first; a pod bound to a node that was deleted marked Failed
with DisruptionTarget and force-deleted after the quarantine, while a pod whose node exists is
kept; a terminating pod on a not-ready node with the out-of-service taint force-deleted (and one
on a not-ready node without the taint kept); a terminating pod bound to no node force-deleted,
also when it was deleted while the collector was killed (-9); and only one of the two replicas
runs the passes.
Pods the tests want to look at after the collector acted carry a finalizer, removed at the end.
A namespace per test; the terminated-pod test runs first, as the threshold counts the cluster.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from tests.conftest import wait_for
from tests.e2e import devstack

stack = devstack.stack_fixture(
    "--controllers",
    "podgc",
    "--replicas",
    "podgc=2",
    "--nodes",
    "1",
    "--terminated-pod-gc-threshold=3",
    "--podgc-test-check-period=1s",
    "--podgc-test-quarantine-time=3s",
)

CONTROLLER = "pod-garbage-collector-controller"
QUEUE = "orphaned_pods_nodes"  # upstream's queue name, the workqueue_* metrics' `name`
HOLD = "example.com/hold"
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"


@pytest.fixture(scope="module")
def core(stack: devstack.DevStack) -> Iterator[kubernetes.client.CoreV1Api]:
    with stack.api() as api:
        yield kubernetes.client.CoreV1Api(api)


def namespace(s: devstack.DevStack, name: str) -> str:
    s.kubectl("create", "namespace", name)
    return name


def create_pod(
    s: devstack.DevStack,
    ns: str,
    name: str,
    *,
    node: str = "",
    hold: bool = False,
    annotations: dict[str, str] | None = None,
    scheduler: str = "",
) -> None:
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1"}]}
    if node:
        spec["nodeName"] = node
    if scheduler:
        spec["schedulerName"] = scheduler
    meta: dict[str, Any] = {"name": name, "namespace": ns, "annotations": annotations or {}}
    if hold:
        meta["finalizers"] = [HOLD]
    s.kubectl(
        "create",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}),
    )


def create_dead_node(
    core: kubernetes.client.CoreV1Api, name: str, taints: list[dict[str, str]] | None = None
) -> None:
    """A Node no kubelet reports for: no Ready condition, and cordoned for the simulator's scheduler."""
    body = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "spec": {"unschedulable": True, "taints": taints or []},
    }
    core.create_node(body)


def get_pod(s: devstack.DevStack, ns: str, name: str) -> dict[str, Any] | None:
    res = s.kubectl("-n", ns, "get", "pod", name, "-o", "json", "--ignore-not-found")
    return json.loads(res.stdout) if res.stdout.strip() else None


def release(s: devstack.DevStack, ns: str, *names: str) -> None:
    """Take the test's finalizer off (the pods then go: they are being deleted)."""
    for name in names:
        if get_pod(s, ns, name) is not None:
            s.kubectl(
                "-n",
                ns,
                "patch",
                "pod",
                name,
                "--type=json",
                "-p",
                '[{"op":"remove","path":"/metadata/finalizers"}]',
            )


def force_deleted(s: devstack.DevStack, ns: str, name: str) -> dict[str, Any] | None:
    """The held pod once the collector has marked it Failed and deleted it with no grace period."""
    pod = get_pod(s, ns, name)
    if pod is None or pod["status"].get("phase") != "Failed" or not pod["metadata"].get("deletionTimestamp"):
        return None
    return pod if pod["metadata"].get("deletionGracePeriodSeconds") == 0 else None


def deletions(s: devstack.DevStack, reason: str) -> float:
    return s.metric(CONTROLLER, "pod_gc_collector_force_delete_pods_total", reason=reason)


def test_terminated_pods_over_the_threshold_are_deleted_oldest_first(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "podgc-terminated")
    done = {"sim.kcm.dev/exit-code": "0"}
    # Named against their age, so an order by name would pick the wrong ones.
    for name in ("old-z1", "old-z2"):
        create_pod(stack, ns, name, annotations=done)
    created = dt.datetime.fromisoformat(get_pod(stack, ns, "old-z2")["metadata"]["creationTimestamp"])  # type: ignore[index]
    # Creation times are whole seconds: the new pods must be at least one second younger.
    wait_for(lambda: dt.datetime.now(dt.UTC) >= created + dt.timedelta(seconds=1), 5, 0.05, "the next second")
    for name in ("new-a", "new-b", "new-c"):
        create_pod(stack, ns, name, annotations=done)

    wait_for(
        lambda: get_pod(stack, ns, "old-z1") is None and get_pod(stack, ns, "old-z2") is None,
        45,
        0.2,
        "the two oldest terminated pods deleted",
    )
    for name in ("new-a", "new-b", "new-c"):
        pod = get_pod(stack, ns, name)
        assert pod is not None and pod["status"]["phase"] == "Succeeded", name
    assert deletions(stack, "terminated") >= 2


def test_pods_on_a_deleted_node_are_marked_failed_and_deleted_after_the_quarantine(
    stack: devstack.DevStack, core: kubernetes.client.CoreV1Api
) -> None:
    ns = namespace(stack, "podgc-orphans")
    create_dead_node(core, "podgc-gone")
    create_dead_node(core, "podgc-here")
    create_pod(stack, ns, "orphan", node="podgc-gone", hold=True)
    create_pod(stack, ns, "kept", node="podgc-here")
    core.delete_node("podgc-gone")
    try:
        pod = wait_for(
            lambda: force_deleted(stack, ns, "orphan"), 45, 0.2, "the orphan marked Failed and deleted"
        )
        (condition,) = [c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget"]
        assert (condition["status"], condition["reason"], condition["message"]) == (
            "True",
            "DeletionByPodGC",
            "PodGC: node no longer exists",
        )
        kept = get_pod(stack, ns, "kept")
        assert kept is not None and not kept["metadata"].get("deletionTimestamp")
        assert kept["status"].get("phase") != "Failed"
        assert deletions(stack, "orphaned") >= 1
    finally:
        release(stack, ns, "orphan")
    wait_for(lambda: get_pod(stack, ns, "orphan") is None, 30, 0.2, "the orphan gone")
    core.delete_node("podgc-here")


def test_terminating_pods_on_an_out_of_service_node_are_force_deleted(
    stack: devstack.DevStack, core: kubernetes.client.CoreV1Api
) -> None:
    ns = namespace(stack, "podgc-out-of-service")
    create_dead_node(
        core, "podgc-oos", taints=[{"key": OUT_OF_SERVICE, "value": "nodeshutdown", "effect": "NoExecute"}]
    )
    create_dead_node(core, "podgc-down")
    create_pod(stack, ns, "on-oos", node="podgc-oos", hold=True)
    create_pod(stack, ns, "on-down", node="podgc-down")
    create_pod(stack, ns, "running-on-oos", node="podgc-oos")
    # Graceful deletions no kubelet will ever finish.
    stack.kubectl("-n", ns, "delete", "pod", "on-oos", "on-down", "--wait=false")
    try:
        wait_for(
            lambda: force_deleted(stack, ns, "on-oos"),
            30,
            0.2,
            "the pod on the out-of-service node force-deleted",
        )
        down = get_pod(stack, ns, "on-down")
        assert down is not None and down["status"].get("phase") != "Failed", (
            "a node without the taint is waited for"
        )
        assert down["metadata"].get("deletionGracePeriodSeconds") == 30
        running = get_pod(stack, ns, "running-on-oos")
        assert running is not None and not running["metadata"].get("deletionTimestamp"), (
            "not terminating: kept"
        )
        assert deletions(stack, "out-of-service") >= 1
    finally:
        release(stack, ns, "on-oos")
        stack.kubectl("-n", ns, "delete", "pod", "on-down", "running-on-oos", "--grace-period=0", "--force")
    for name in ("podgc-oos", "podgc-down"):
        core.delete_node(name)


def test_terminating_pods_bound_to_no_node_are_force_deleted(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "podgc-unscheduled")
    # A scheduler that does not exist: the simulator binds only default-scheduler's pods.
    create_pod(stack, ns, "leaving", hold=True, scheduler="podgc-nobody")
    create_pod(stack, ns, "waiting", scheduler="podgc-nobody")
    stack.kubectl("-n", ns, "delete", "pod", "leaving", "--wait=false")
    try:
        wait_for(
            lambda: force_deleted(stack, ns, "leaving"),
            30,
            0.2,
            "the unscheduled terminating pod force-deleted",
        )
        waiting = get_pod(stack, ns, "waiting")
        assert waiting is not None and waiting["status"].get("phase") == "Pending"
        assert deletions(stack, "unscheduled") >= 1
    finally:
        release(stack, ns, "leaving")
    wait_for(lambda: get_pod(stack, ns, "leaving") is None, 30, 0.2, "the pod gone")


def test_one_replica_runs_the_pass(stack: devstack.DevStack) -> None:
    """Two replicas run the collector; the pass's key, and so every pass, is one replica's."""
    passes = wait_for(
        lambda: (
            (p := stack.metric_by_replica(CONTROLLER, "workqueue_work_duration_seconds_count", name=QUEUE))
            and len(p) == 2
            and p
        ),
        10,
        0.2,
        "both replicas' metrics",
    )
    assert sorted(v > 0 for v in passes.values()) == [False, True], passes


def test_the_pass_goes_on_after_a_kill_of_the_collector(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "podgc-kill")
    create_pod(stack, ns, "leaving", hold=True, scheduler="podgc-nobody")
    for pid in stack.controller_pids(CONTROLLER):
        os.kill(pid, signal.SIGKILL)
    # Deleted while no collector runs: the restarted one's pass must still find it.
    stack.kubectl("-n", ns, "delete", "pod", "leaving", "--wait=false")
    try:
        wait_for(
            lambda: force_deleted(stack, ns, "leaving"), 60, 0.3, "the pod force-deleted after the restart"
        )
    finally:
        release(stack, ns, "leaving")
    stack.wait_healthy()
