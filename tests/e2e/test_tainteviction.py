"""The taint-eviction-controller and the ttl-controller end to end: `kcm dev` with both, pods bound by hand.

Each test taints a simulated node NoExecute with kubectl (`kubectl taint nodes ... :NoExecute`,
no node lifecycle controller needed) and binds its pods there itself (`spec.nodeName`). Pods
carry the test's finalizer where the test must read them after their deletion (their
DisruptionTarget condition). Covers: a pod that does not tolerate the taint marked
DisruptionTarget and deleted, with upstream's Events; a pod tolerating it for ever kept; one
with tolerationSeconds deleted once its time has run out, counted from the taint's timeAdded;
a pod bound to a node tainted already deleted at once; the taint's removal cancelling a pending
deletion (Event); a pending deletion kept across a kill -9 of the controller, without the
restarted one starting the wait over. The ttl-controller: every node annotated with the TTL
of a cluster this small (0), a changed annotation put back. `kcm dev`'s
--default-not-ready-toleration-seconds reaching the API server's DefaultTolerationSeconds
admission. One stack, a namespace and a node per test.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import wait_for
from tests.e2e import devstack

# Nodes sim-node-0 .. sim-node-3; the API server's DefaultTolerationSeconds for not-ready set
# through `kcm dev` (test_default_toleration_seconds_reach_the_api_server).
stack = devstack.stack_fixture(
    "--controllers",
    "taint-eviction-controller,ttl",
    "--nodes",
    "4",
    "--default-not-ready-toleration-seconds=60",
)

CONTROLLER = "taint-eviction-controller"
HOLD = "example.com/hold"
TAINT_KEY = "example.com/evict"


def namespace(s: devstack.DevStack, name: str) -> str:
    s.kubectl("create", "namespace", name)
    return name


def create_pod(
    s: devstack.DevStack, ns: str, name: str, node: str, *, tolerations: list[dict[str, Any]] | None = None
) -> None:
    spec: dict[str, Any] = {
        "nodeName": node,
        "containers": [{"name": "main", "image": "busybox:1"}],
        "tolerations": tolerations or [],
    }
    meta = {"name": name, "namespace": ns, "finalizers": [HOLD]}
    s.kubectl(
        "create",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}),
    )


def tolerate(seconds: int | None = None) -> list[dict[str, Any]]:
    toleration: dict[str, Any] = {"key": TAINT_KEY, "operator": "Exists", "effect": "NoExecute"}
    if seconds is not None:
        toleration["tolerationSeconds"] = seconds
    return [toleration]


def get_pod(s: devstack.DevStack, ns: str, name: str) -> dict[str, Any] | None:
    res = s.kubectl("-n", ns, "get", "pod", name, "-o", "json", "--ignore-not-found")
    return json.loads(res.stdout) if res.stdout.strip() else None


def deleting(s: devstack.DevStack, ns: str, name: str) -> dict[str, Any] | None:
    pod = get_pod(s, ns, name)
    return pod if pod is not None and pod["metadata"].get("deletionTimestamp") else None


def disruption(pod: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in pod["status"].get("conditions") or [] if c["type"] == "DisruptionTarget"), None)


def release(s: devstack.DevStack, ns: str) -> None:
    """Take the test's finalizer off every pod of `ns` and delete them."""
    for name in s.kubectl("-n", ns, "get", "pods", "-o", "name").stdout.split():
        s.kubectl(
            "-n", ns, "patch", name, "--type=json", "-p", '[{"op":"remove","path":"/metadata/finalizers"}]'
        )
    s.kubectl("-n", ns, "delete", "pods", "--all", "--wait=false")


def taint(s: devstack.DevStack, node: str) -> dt.datetime:
    """Taint `node` NoExecute; the time (to the second) before it was, which the controller's
    count starts from at the earliest (`kubectl taint` sets no timeAdded)."""
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    s.kubectl("taint", "nodes", node, f"{TAINT_KEY}=x:NoExecute")
    return before


def untaint(s: devstack.DevStack, node: str) -> None:
    s.kubectl("taint", "nodes", node, f"{TAINT_KEY}:NoExecute-")


def parse(stamp: str) -> dt.datetime:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def pod_events(s: devstack.DevStack, ns: str, name: str) -> list[dict[str, Any]]:
    items = json.loads(s.kubectl("-n", ns, "get", "events", "-o", "json").stdout)["items"]
    return [e for e in items if e["involvedObject"].get("name") == name]


def has_event(s: devstack.DevStack, ns: str, name: str, message: str) -> dict[str, Any] | None:
    for event in pod_events(s, ns, name):
        if event["reason"] == "TaintManagerEviction" and event["message"] == message:
            return event
    return None


@pytest.fixture
def tainted(stack: devstack.DevStack, request: pytest.FixtureRequest) -> Iterator[str]:
    """A node of the test's own, its NoExecute taint removed afterwards."""
    node = request.param
    yield node
    stack.kubectl("taint", "nodes", node, f"{TAINT_KEY}:NoExecute-", check=False)


@pytest.mark.parametrize("tainted", ["sim-node-1"], indirect=True)
def test_pods_that_do_not_tolerate_the_taint_are_deleted_and_tolerating_ones_stay(
    stack: devstack.DevStack, tainted: str
) -> None:
    ns = namespace(stack, "te-evict")
    create_pod(stack, ns, "plain", tainted)
    create_pod(stack, ns, "forever", tainted, tolerations=tolerate())
    create_pod(stack, ns, "brief", tainted, tolerations=tolerate(3))
    try:
        added = taint(stack, tainted)
        plain = wait_for(lambda: deleting(stack, ns, "plain"), 30, 0.3, "the untolerating pod deleted")
        condition = disruption(plain)
        assert condition is not None, plain["status"]
        assert (condition["status"], condition["reason"], condition["message"]) == (
            "True",
            "DeletionByTaintManager",
            "Taint manager: deleting due to NoExecute taint",
        )
        event = wait_for(
            lambda: has_event(stack, ns, "plain", f"Marking for deletion Pod {ns}/plain"),
            30,
            0.3,
            "the Event",
        )
        assert event["type"] == "Normal" and event["source"]["component"] == CONTROLLER, event
        brief = wait_for(lambda: deleting(stack, ns, "brief"), 30, 0.3, "the pod tolerating 3 s deleted")
        brief_condition = disruption(brief)
        assert brief_condition is not None
        # Not before its time: the condition is written at the deletion, 3 s after the taint.
        assert parse(brief_condition["lastTransitionTime"]) >= added + dt.timedelta(seconds=3), (added, brief)
        # The one tolerating for ever was reconciled with the others and is kept.
        forever = get_pod(stack, ns, "forever")
        assert forever is not None and not forever["metadata"].get("deletionTimestamp"), forever
        assert disruption(forever) is None
        assert stack.metric(CONTROLLER, "taint_eviction_controller_pod_deletions_total") >= 2
    finally:
        release(stack, ns)


@pytest.mark.parametrize("tainted", ["sim-node-2"], indirect=True)
def test_a_pod_bound_to_a_tainted_node_is_deleted_at_once(stack: devstack.DevStack, tainted: str) -> None:
    ns = namespace(stack, "te-late")
    taint(stack, tainted)
    create_pod(stack, ns, "late", tainted)
    try:
        wait_for(lambda: deleting(stack, ns, "late"), 30, 0.3, "the pod bound to the tainted node deleted")
        wait_for(
            lambda: has_event(stack, ns, "late", f"Marking for deletion Pod {ns}/late"), 30, 0.3, "the Event"
        )
    finally:
        release(stack, ns)


@pytest.mark.parametrize("tainted", ["sim-node-3"], indirect=True)
def test_removing_the_taint_cancels_a_pending_deletion(stack: devstack.DevStack, tainted: str) -> None:
    ns = namespace(stack, "te-cancel")
    create_pod(stack, ns, "patient", tainted, tolerations=tolerate(600))
    create_pod(stack, ns, "marker", tainted)
    try:
        taint(stack, tainted)
        # The node's taint reaches both pods at once: once the marker is deleted, the patient
        # pod's deletion is pending.
        wait_for(lambda: deleting(stack, ns, "marker"), 30, 0.3, "the untolerating marker deleted")
        untaint(stack, tainted)
        wait_for(
            lambda: has_event(stack, ns, "patient", f"Cancelling deletion of Pod {ns}/patient"),
            30,
            0.3,
            "the cancel Event",
        )
        patient = get_pod(stack, ns, "patient")
        assert patient is not None and not patient["metadata"].get("deletionTimestamp"), patient
    finally:
        release(stack, ns)


@pytest.mark.parametrize("tainted", ["sim-node-0"], indirect=True)
def test_a_pending_deletion_survives_a_kill_of_the_controller(stack: devstack.DevStack, tainted: str) -> None:
    """The taint says it was added 15 s ago (as a node lifecycle controller's taint does when
    this controller was down); the pod tolerates it for 30 s. Killed while the deletion is
    pending, the restarted controller deletes the pod at timeAdded + 30 s: the DisruptionTarget
    condition it writes at the deletion is older than a full wait counted from the kill,
    which is the earliest a timer started over by the restarted process could fire."""
    ns = namespace(stack, "te-kill")
    create_pod(stack, ns, "waiting", tainted, tolerations=tolerate(30))
    create_pod(stack, ns, "marker", tainted)
    try:
        added = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(seconds=15)
        stamp = added.strftime("%Y-%m-%dT%H:%M:%SZ")
        taints = [{"key": TAINT_KEY, "value": "x", "effect": "NoExecute", "timeAdded": stamp}]
        stack.kubectl("patch", "node", tainted, "-p", json.dumps({"spec": {"taints": taints}}))
        wait_for(lambda: deleting(stack, ns, "marker"), 30, 0.3, "the untolerating marker deleted")
        killed_at = dt.datetime.now(dt.UTC).replace(microsecond=0)
        waiting = get_pod(stack, ns, "waiting")
        assert waiting is not None and not waiting["metadata"].get("deletionTimestamp"), waiting
        for pid in stack.controller_pids(CONTROLLER):
            os.kill(pid, signal.SIGKILL)
        waiting = wait_for(
            lambda: deleting(stack, ns, "waiting"), 90, 0.5, "the pending pod deleted after the restart"
        )
        condition = disruption(waiting)
        assert condition is not None, waiting["status"]
        deleted_at = parse(condition["lastTransitionTime"])
        assert deleted_at >= added + dt.timedelta(seconds=30), (added, deleted_at)
        assert deleted_at < killed_at + dt.timedelta(seconds=30), (killed_at, deleted_at)
    finally:
        release(stack, ns)
    stack.wait_healthy()


TTL = "node.alpha.kubernetes.io/ttl"


def ttls(s: devstack.DevStack) -> dict[str, str | None]:
    nodes = json.loads(s.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    return {n["metadata"]["name"]: (n["metadata"].get("annotations") or {}).get(TTL) for n in nodes}


def test_every_node_gets_the_ttl_of_a_small_cluster(stack: devstack.DevStack) -> None:
    wait_for(lambda: set(ttls(stack).values()) == {"0"}, 30, 0.3, "every node annotated with ttl 0")
    assert len(ttls(stack)) == 4
    stack.kubectl("annotate", "--overwrite", "node", "sim-node-2", f"{TTL}=15")
    wait_for(lambda: ttls(stack)["sim-node-2"] == "0", 30, 0.3, "the changed annotation put back")


def test_default_toleration_seconds_reach_the_api_server(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "default-tolerations")
    create_pod(stack, ns, "plain", "sim-node-0")
    spec = json.loads(stack.kubectl("get", "pod", "plain", "-n", ns, "-o", "json").stdout)["spec"]
    assert spec["tolerations"] == [
        {
            "key": f"node.kubernetes.io/{key}",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": sec,
        }
        for key, sec in (("not-ready", 60), ("unreachable", 300))
    ]
    stack.kubectl(
        "patch",
        "pod",
        "plain",
        "-n",
        ns,
        "--type=json",
        "-p",
        json.dumps([{"op": "remove", "path": "/metadata/finalizers"}]),
    )
