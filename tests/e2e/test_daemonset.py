"""The DaemonSet controller end to end: `kcm dev --controllers daemonset,podgc` with three
simulated nodes, driven with kubectl.

Each test works in its own namespace on one shared stack: a pod on every eligible node, bound
by the scheduler through the node affinity the controller writes, with upstream's tolerations
and labels; nodeSelector and taints choosing nodes; a node added and removed at run time
(`kcm sim --add-nodes/--remove-node`; the pod garbage collector removes the pod of the node
that went); rolling updates bounded by maxUnavailable and by maxSurge, waited for with
`kubectl rollout status ds`; `kubectl rollout history/undo` over the ControllerRevisions and
revisionHistoryLimit; OnDelete; a failed pod replaced (`FailedDaemonPod`); and a kill -9 of
the controller mid-rollout.
Tests that change nodes (labels, taints, the node count) undo it before they end.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import KCM, wait_for
from tests.e2e import devstack

NODES = ["sim-node-0", "sim-node-1", "sim-node-2"]
HASH = "controller-revision-hash"

stack = devstack.stack_fixture(
    "--nodes",
    "3",
    "--controllers",
    "daemonset,podgc",
    "--pod-start-delay",
    "0.1",
    # A removed node's pods go within seconds rather than upstream's 20 s pass + 40 s quarantine.
    "--podgc-test-check-period=0.5s",
    "--podgc-test-quarantine-time=0.5s",
)
_counter = iter(range(1000))


@pytest.fixture
def ns(stack: devstack.DevStack) -> Iterator[str]:
    name = f"ds-{next(_counter)}"
    stack.kubectl("create", "namespace", name)
    yield name


def ds_yaml(
    ns: str, name: str, spec: str = "", pod: str = "", image: str = "agent:1", ready: str = "true"
) -> str:
    """A DaemonSet whose pods stop at once when deleted; `spec` and `pod` add YAML lines."""
    return textwrap.dedent(f"""\
        apiVersion: apps/v1
        kind: DaemonSet
        metadata: {{name: {name}, namespace: {ns}}}
        spec:
          selector: {{matchLabels: {{app: {name}}}}}
        {textwrap.indent(spec, "  ")}
          template:
            metadata:
              labels: {{app: {name}}}
              annotations: {{sim.kcm.dev/terminate-seconds: "0", sim.kcm.dev/ready: "{ready}"}}
            spec:
              containers: [{{name: c, image: "{image}"}}]
        {textwrap.indent(pod, "      ")}
        """)


def get(stack: devstack.DevStack, ns: str, *what: str) -> Any:
    return json.loads(stack.kubectl("get", "-n", ns, *what, "-o", "json").stdout)


def pods(stack: devstack.DevStack, ns: str, live: bool = True) -> list[dict[str, Any]]:
    """The namespace's pods; with `live`, those not being deleted."""
    items: list[dict[str, Any]] = get(stack, ns, "pods")["items"]
    return [p for p in items if not (live and p["metadata"].get("deletionTimestamp"))]


def past_creation_second(items: list[dict[str, Any]]) -> bool:
    """Whether the wall clock has left the second of the newest pod's creationTimestamp."""
    newest = max(dt.datetime.fromisoformat(p["metadata"]["creationTimestamp"]) for p in items)
    return dt.datetime.now(dt.UTC) >= newest + dt.timedelta(seconds=1)


def by_node(stack: devstack.DevStack, ns: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for pod in pods(stack, ns):
        out.setdefault(pod["spec"].get("nodeName", ""), []).append(pod)
    return out


def status(stack: devstack.DevStack, ns: str, name: str) -> dict[str, Any]:
    s: dict[str, Any] = get(stack, ns, "ds", name).get("status", {})
    return s


def wait_status(
    stack: devstack.DevStack, ns: str, name: str, timeout: float = 30, **want: int
) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        s = status(stack, ns, name)
        return s if all(s.get(k, 0) == v for k, v in want.items()) else None

    found: dict[str, Any] = wait_for(check, timeout, interval=0.2, what=f"status {want} of ds {ns}/{name}")
    return found


def rollout_status(stack: devstack.DevStack, ns: str, name: str) -> str:
    return stack.kubectl("rollout", "status", "-n", ns, f"ds/{name}", "--timeout=60s", timeout=90).stdout


def apply(stack: devstack.DevStack, manifest: str) -> None:
    stack.kubectl("apply", "-f", "-", input=manifest)


def test_one_pod_per_node_pinned_by_node_affinity(stack: devstack.DevStack, ns: str) -> None:
    apply(stack, ds_yaml(ns, "agent", pod="hostNetwork: true"))
    assert "successfully rolled out" in rollout_status(stack, ns, "agent")
    placed = by_node(stack, ns)
    assert sorted(placed) == NODES and all(len(p) == 1 for p in placed.values())
    for node, (pod,) in placed.items():
        spec = pod["spec"]
        # Bound by the scheduler: the controller wrote only the affinity for the node.
        terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert terms["nodeSelectorTerms"] == [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        ]
        tolerations = {(t["key"], t["effect"]) for t in spec["tolerations"]}
        assert all(t["operator"] == "Exists" for t in spec["tolerations"])
        assert tolerations == {
            ("node.kubernetes.io/not-ready", "NoExecute"),
            ("node.kubernetes.io/unreachable", "NoExecute"),
            ("node.kubernetes.io/disk-pressure", "NoSchedule"),
            ("node.kubernetes.io/memory-pressure", "NoSchedule"),
            ("node.kubernetes.io/pid-pressure", "NoSchedule"),
            ("node.kubernetes.io/unschedulable", "NoSchedule"),
            ("node.kubernetes.io/network-unavailable", "NoSchedule"),  # for hostNetwork pods
        }
        assert pod["metadata"]["labels"]["pod-template-generation"] == "1"
        assert pod["metadata"]["generateName"] == "agent-"
    (revision,) = get(stack, ns, "controllerrevisions")["items"]
    hashes = {p["metadata"]["labels"][HASH] for (p,) in placed.values()}
    assert hashes == {revision["metadata"]["labels"][HASH]}
    assert revision["metadata"]["name"] == f"agent-{hashes.pop()}" and revision["revision"] == 1
    s = wait_status(stack, ns, "agent", desiredNumberScheduled=3, numberAvailable=3)
    assert s == {
        "currentNumberScheduled": 3,
        "desiredNumberScheduled": 3,
        "numberMisscheduled": 0,
        "numberReady": 3,
        "updatedNumberScheduled": 3,
        "numberAvailable": 3,
        "observedGeneration": 1,
    }
    described = stack.kubectl("describe", "-n", ns, "ds", "agent").stdout
    assert "SuccessfulCreate" in described and "Created pod: agent-" in described


def test_node_selector_and_taints_choose_the_nodes(stack: devstack.DevStack, ns: str) -> None:
    label, taint = f"{ns}-pick", f"{ns}-keep-off"
    try:
        stack.kubectl("label", "node", "sim-node-1", f"{label}=yes")
        apply(stack, ds_yaml(ns, "picky", pod=f"nodeSelector: {{{label}: 'yes'}}"))
        apply(stack, ds_yaml(ns, "wide"))
        wait_status(stack, ns, "wide", numberAvailable=3)
        stack.kubectl("taint", "node", "sim-node-2", f"{taint}=x:NoSchedule")
        wait_for(
            lambda: (
                {
                    p["spec"].get("nodeName")
                    for p in pods(stack, ns)
                    if p["metadata"]["generateName"] == "picky-"
                }
                == {"sim-node-1"}
            ),
            30,
            what="the selected node alone runs the picky daemon",
        )
        wait_status(stack, ns, "picky", desiredNumberScheduled=1, numberAvailable=1)
        # A NoSchedule taint keeps a new pod off but lets the running one stay.
        wait_status(
            stack, ns, "wide", desiredNumberScheduled=2, currentNumberScheduled=2, numberMisscheduled=1
        )
        # The label goes: the pod there goes too.
        stack.kubectl("label", "node", "sim-node-1", f"{label}-")
        wait_for(
            lambda: not [p for p in pods(stack, ns) if p["metadata"]["generateName"] == "picky-"],
            30,
            what="picky pod deleted once its node stopped matching",
        )
        wait_status(stack, ns, "picky", desiredNumberScheduled=0, currentNumberScheduled=0)
        # NoExecute evicts the daemon pod that does not tolerate it.
        stack.kubectl("taint", "node", "sim-node-2", f"{taint}=x:NoExecute")
        wait_for(
            lambda: "sim-node-2" not in by_node(stack, ns), 30, what="pod evicted by the NoExecute taint"
        )
        wait_status(stack, ns, "wide", desiredNumberScheduled=2, numberMisscheduled=0)
    finally:
        stack.kubectl("label", "node", "sim-node-1", f"{label}-", check=False)
        stack.kubectl("taint", "node", "sim-node-2", f"{taint}-", check=False)
    # Untainted again: the node gets its pod back.
    wait_status(stack, ns, "wide", desiredNumberScheduled=3, numberAvailable=3)


def sim_nodes(stack: devstack.DevStack, *args: str) -> str:
    res = subprocess.run(
        [KCM, "sim", "--state-dir", str(stack.state), *args], capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_nodes_added_and_removed_at_run_time(stack: devstack.DevStack, ns: str) -> None:
    apply(stack, ds_yaml(ns, "agent"))
    wait_status(stack, ns, "agent", desiredNumberScheduled=3, numberAvailable=3)
    added = sim_nodes(stack, "--add-nodes", "1").split()
    assert added[0].startswith("node/sim-node-") and added[1] == "added"
    node = added[0].removeprefix("node/")
    try:
        wait_for(lambda: len(by_node(stack, ns).get(node, [])) == 1, 30, what=f"a daemon pod on {node}")
        wait_status(stack, ns, "agent", desiredNumberScheduled=4, numberAvailable=4)
    finally:
        assert sim_nodes(stack, "--remove-node", node).strip() == f"node/{node} removed"
    # The node's pod is the pod GC's to remove; its deletion brings the status back to three.
    wait_for(lambda: node not in by_node(stack, ns), 30, what=f"pod of removed {node} collected")
    wait_status(stack, ns, "agent", desiredNumberScheduled=3, currentNumberScheduled=3, numberAvailable=3)
    assert stack.kubectl("get", "node", node, check=False).returncode != 0
    # A malformed request is refused with the simulator's reason, and changes nothing.
    res = subprocess.run(
        [KCM, "sim", "--state-dir", str(stack.state), "--remove-node", "no-such-node"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 1 and "no simulated node no-such-node" in res.stderr


def test_failed_daemon_pod_is_replaced_with_an_event(stack: devstack.DevStack, ns: str) -> None:
    apply(stack, ds_yaml(ns, "agent"))
    wait_status(stack, ns, "agent", numberAvailable=3)
    victim = by_node(stack, ns)["sim-node-1"][0]["metadata"]["name"]
    # What a kubelet reports for a pod it rejected or whose containers may not restart.
    failed = json.dumps({"status": {"phase": "Failed"}})
    stack.kubectl("patch", "pod", "-n", ns, victim, "--subresource=status", "-p", failed)
    wait_for(
        lambda: (
            [p["metadata"]["name"] for p in by_node(stack, ns).get("sim-node-1", [])] not in ([], [victim])
        ),
        30,
        what="the failed pod replaced",
    )
    described = stack.kubectl("describe", "-n", ns, "ds", "agent").stdout
    assert f"Found failed daemon pod {ns}/{victim} on node sim-node-1, will try to kill it" in described
    assert "FailedDaemonPod" in described
    wait_status(stack, ns, "agent", numberAvailable=3)


def hashes_by_node(stack: devstack.DevStack, ns: str) -> dict[str, list[str]]:
    return {n: sorted(p["metadata"]["labels"][HASH] for p in ps) for n, ps in by_node(stack, ns).items()}


def test_rolling_update_keeps_max_unavailable(stack: devstack.DevStack, ns: str) -> None:
    apply(stack, ds_yaml(ns, "agent"))
    wait_status(stack, ns, "agent", numberAvailable=3)
    old_hash = get(stack, ns, "controllerrevisions")["items"][0]["metadata"]["labels"][HASH]
    # New pods that never turn ready: with maxUnavailable 1 one node is updated, then it stops.
    apply(stack, ds_yaml(ns, "agent", image="agent:2", ready="false"))
    s = wait_status(stack, ns, "agent", observedGeneration=2, updatedNumberScheduled=1, numberUnavailable=1)
    assert s["numberAvailable"] == 2
    current = hashes_by_node(stack, ns)
    assert sorted(h for hs in current.values() for h in hs).count(old_hash) == 2
    assert all(len(hs) == 1 for hs in current.values())
    # Ready pods this time: the rollout finishes.
    apply(stack, ds_yaml(ns, "agent", image="agent:3"))
    assert "successfully rolled out" in rollout_status(stack, ns, "agent")
    final = hashes_by_node(stack, ns)
    assert sorted(final) == NODES and len({h for hs in final.values() for h in hs}) == 1
    assert wait_status(stack, ns, "agent", updatedNumberScheduled=3, numberAvailable=3)


def test_rolling_update_surges_before_deleting(stack: devstack.DevStack, ns: str) -> None:
    strategy = "updateStrategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}"
    apply(stack, ds_yaml(ns, "agent", spec=strategy))
    wait_status(stack, ns, "agent", numberAvailable=3)
    # The status judges a node by its oldest pod, by creationTimestamp (whole seconds) and then
    # by name, as upstream: a surge pod made within the old pods' second could sort first.
    wait_for(lambda: past_creation_second(pods(stack, ns)), 5, what="a second past the old pods' creation")
    apply(stack, ds_yaml(ns, "agent", spec=strategy, image="agent:2", ready="false"))
    # One new pod beside an old one; no old pod goes while the new one is not available.
    s = wait_status(stack, ns, "agent", observedGeneration=2, updatedNumberScheduled=0)
    wait_for(lambda: len(pods(stack, ns)) == 4, 30, what="one surge pod")
    assert sorted(len(h) for h in hashes_by_node(stack, ns).values()) == [1, 1, 2]
    s = status(stack, ns, "agent")
    assert s["numberAvailable"] == 3 and "numberUnavailable" not in s
    apply(stack, ds_yaml(ns, "agent", spec=strategy, image="agent:3"))
    assert "successfully rolled out" in rollout_status(stack, ns, "agent")
    wait_for(lambda: all(len(h) == 1 for h in hashes_by_node(stack, ns).values()), 30, what="old pods gone")
    assert len({h for hs in hashes_by_node(stack, ns).values() for h in hs}) == 1


def test_rollout_history_undo_and_revision_limit(stack: devstack.DevStack, ns: str) -> None:
    apply(stack, ds_yaml(ns, "agent", spec="revisionHistoryLimit: 1"))
    rollout_status(stack, ns, "agent")
    for image in ("agent:2", "agent:3"):
        stack.kubectl("set", "image", "-n", ns, "ds/agent", f"c={image}")
        rollout_status(stack, ns, "agent")
    history = stack.kubectl("rollout", "history", "-n", ns, "ds/agent").stdout
    # Revision 1 was pruned: one old revision is kept beside the current one.
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["2", "3"]
    assert "agent:2" in stack.kubectl("rollout", "history", "-n", ns, "ds/agent", "--revision=2").stdout
    assert "rolled back" in stack.kubectl("rollout", "undo", "-n", ns, "ds/agent").stdout
    rollout_status(stack, ns, "agent")
    images = {p["spec"]["containers"][0]["image"] for p in pods(stack, ns)}
    assert images == {"agent:2"}
    # The revision rolled back to is renumbered past the others, as upstream.
    revisions = {
        r["data"]["spec"]["template"]["spec"]["containers"][0]["image"]: r["revision"]
        for r in get(stack, ns, "controllerrevisions")["items"]
    }
    assert revisions == {"agent:2": 4, "agent:3": 3}
    # kubectl compares the current template with the revision's data byte for byte.
    undo = stack.kubectl("rollout", "undo", "-n", ns, "ds/agent", "--to-revision=4").stdout
    assert "skipped rollback (current template already matches revision 4)" in undo


def test_on_delete_replaces_only_deleted_pods(stack: devstack.DevStack, ns: str) -> None:
    strategy = "updateStrategy: {type: OnDelete}"
    apply(stack, ds_yaml(ns, "agent", spec=strategy))
    wait_status(stack, ns, "agent", numberAvailable=3)
    apply(stack, ds_yaml(ns, "agent", spec=strategy, image="agent:2"))
    wait_status(stack, ns, "agent", observedGeneration=2, updatedNumberScheduled=0, numberAvailable=3)
    victim = by_node(stack, ns)["sim-node-0"][0]["metadata"]["name"]
    stack.kubectl("delete", "pod", "-n", ns, victim)
    wait_status(stack, ns, "agent", updatedNumberScheduled=1, numberAvailable=3)
    images = {n: ps[0]["spec"]["containers"][0]["image"] for n, ps in by_node(stack, ns).items()}
    assert images == {"sim-node-0": "agent:2", "sim-node-1": "agent:1", "sim-node-2": "agent:1"}


def test_kill_9_mid_rollout_loses_nothing(stack: devstack.DevStack, ns: str) -> None:
    # minReadySeconds paces the rollout (a node at a time, each new pod available 2 s after it
    # is ready), so the kill lands while it is under way; it also needs the delayed re-syncs.
    apply(stack, ds_yaml(ns, "agent", spec="minReadySeconds: 2"))
    wait_status(stack, ns, "agent", numberAvailable=3, timeout=60)
    stack.kubectl("set", "image", "-n", ns, "ds/agent", "c=agent:2")
    wait_for(lambda: status(stack, ns, "agent").get("observedGeneration") == 2, 30, what="rollout started")
    pids = stack.controller_pids("daemonset")
    assert pids
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    assert "successfully rolled out" in rollout_status(stack, ns, "agent")
    wait_status(stack, ns, "agent", updatedNumberScheduled=3, numberAvailable=3, currentNumberScheduled=3)
    # Exactly one pod per node, all of the new template: nothing lost, nothing doubled.
    images = {n: [p["spec"]["containers"][0]["image"] for p in ps] for n, ps in by_node(stack, ns).items()}
    assert images == {n: ["agent:2"] for n in NODES}
    stack.wait_healthy(60)
