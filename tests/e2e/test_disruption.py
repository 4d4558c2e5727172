"""The disruption controller end to end: `kcm dev --controllers disruption,replicaset,deployment`.

Each test works in its own namespace on one shared stack: budgets made with `kubectl create
pdb` get upstream's status (ALLOWED DISRUPTIONS in `kubectl get pdb`), evictions through the
official client are allowed and then refused (429) by the same write, a budget over a pod whose
controller cannot be found fails safe with upstream's condition and Events, unmanaged pods
get their Event, a stale DisruptionTarget condition is set back to False (test-only
timeout of 2 s instead of upstream's 2 minutes) while an evicted pod keeps the one the
eviction gave it for as long as it terminates, and the controller (a process of its own)
killed -9 while recomputing a budget converges after its restart.
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import kubernetes

from tests.conftest import wait_for
from tests.e2e import devstack, workloads
from tests.e2e.workloads import get

# The disruption controller in a process of its own, so that it can be killed alone.
stack = devstack.stack_fixture(
    "--controllers",
    "disruption,replicaset,deployment",
    "--replicas",
    "disruption=1",
    "--disruption-test-stale-timeout=2s",
)
ns = workloads.namespace_fixture("pdb")


def deployment(stack: devstack.DevStack, ns: str, name: str, replicas: int) -> None:
    workloads.apply_deployment(
        stack, ns, name, replicas, {"sim.kcm.dev/terminate-seconds": "0", "sim.kcm.dev/ready": "true"}
    )


def pod(
    stack: devstack.DevStack, ns: str, name: str, labels: dict[str, str], owner: dict[str, Any] | None
) -> None:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": labels}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }
    stack.kubectl("create", "-f", "-", input=json.dumps(body))


def wait_pdb(stack: devstack.DevStack, ns: str, name: str, **want: Any) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        status: dict[str, Any] = get(stack, ns, "pdb", name).get("status", {})
        return status if all(status.get(k, 0) == v for k, v in want.items()) else None

    found: dict[str, Any] = wait_for(check, 30, interval=0.2, what=f"pdb {name} status {want}")
    return found


def condition(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status.get("conditions", []) if c["type"] == "DisruptionAllowed")


def event_reasons(stack: devstack.DevStack, ns: str) -> set[str]:
    return {e["reason"] for e in get(stack, ns, "events")["items"]}


def evict(stack: devstack.DevStack, ns: str, name: str) -> int:
    """The HTTP status of an eviction through the official client (201 on success)."""
    core = kubernetes.client.CoreV1Api(stack.api())
    body = kubernetes.client.V1Eviction(metadata=kubernetes.client.V1ObjectMeta(name=name, namespace=ns))
    try:
        core.create_namespaced_pod_eviction(name, ns, body)
    except kubernetes.client.ApiException as exc:
        return int(exc.status)
    return 201


def is_ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))


def ready_pods(stack: devstack.DevStack, ns: str, app: str) -> list[str]:
    return [
        p["metadata"]["name"]
        for p in get(stack, ns, "pods", "-l", f"app={app}")["items"]
        if not p["metadata"].get("deletionTimestamp")
    ]


def test_min_available_allows_one_eviction_then_refuses(stack: devstack.DevStack, ns: str) -> None:
    deployment(stack, ns, "web", 3)
    stack.kubectl("create", "pdb", "web", "-n", ns, "--selector=app=web", "--min-available=2")
    status = wait_pdb(
        stack,
        ns,
        "web",
        currentHealthy=3,
        desiredHealthy=2,
        expectedPods=3,
        disruptionsAllowed=1,
        observedGeneration=1,
    )
    cond = condition(status)
    assert (cond["status"], cond["reason"]) == ("True", "SufficientPods")
    table = stack.kubectl("get", "pdb", "web", "-n", ns).stdout.split("\n")
    assert table[0].split() == [
        "NAME",
        "MIN",
        "AVAILABLE",
        "MAX",
        "UNAVAILABLE",
        "ALLOWED",
        "DISRUPTIONS",
        "AGE",
    ]
    assert table[1].split()[1:4] == ["2", "N/A", "1"]

    first = ready_pods(stack, ns, "web")[0]
    assert evict(stack, ns, first) == 201
    # The Deployment replaces the pod; once the new one is ready a disruption is allowed again
    # and the evicted pod is not among the disruptedPods (it is gone).
    status = wait_pdb(stack, ns, "web", currentHealthy=3, disruptionsAllowed=1)
    assert first not in (status.get("disruptedPods") or {})


def test_eviction_refused_when_no_disruption_is_allowed(stack: devstack.DevStack, ns: str) -> None:
    deployment(stack, ns, "db", 2)
    stack.kubectl("create", "pdb", "db", "-n", ns, "--selector=app=db", "--min-available=2")
    status = wait_pdb(
        stack, ns, "db", currentHealthy=2, desiredHealthy=2, expectedPods=2, observedGeneration=1
    )
    assert status["disruptionsAllowed"] == 0
    cond = condition(status)
    assert (cond["status"], cond["reason"]) == ("False", "InsufficientPods")
    victim = ready_pods(stack, ns, "db")[0]
    assert evict(stack, ns, victim) == 429
    # kubectl drain retries a refused eviction until its timeout, then says why.
    res = stack.kubectl(
        "drain",
        "--pod-selector=app=db",
        "--timeout=3s",
        "--force",
        "--ignore-daemonsets",
        get(stack, ns, "pod", victim)["spec"]["nodeName"],
        check=False,
    )
    assert "Cannot evict pod as it would violate the pod's disruption budget." in res.stdout + res.stderr
    stack.kubectl("uncordon", get(stack, ns, "pod", victim)["spec"]["nodeName"])
    assert victim in ready_pods(stack, ns, "db")


def test_max_unavailable_percent_counts_the_deployment_scale(stack: devstack.DevStack, ns: str) -> None:
    deployment(stack, ns, "api", 3)
    stack.kubectl("create", "pdb", "api", "-n", ns, "--selector=app=api", "--max-unavailable=50%")
    # 50% of 3 rounds up to 2 unavailable: 1 desired healthy, 2 disruptions.
    wait_pdb(stack, ns, "api", expectedPods=3, desiredHealthy=1, currentHealthy=3, disruptionsAllowed=2)
    table = stack.kubectl("get", "pdb", "api", "-n", ns, "--no-headers").stdout.split()
    assert table[1:4] == ["N/A", "50%", "2"]
    stack.kubectl("scale", "deployment", "api", "-n", ns, "--replicas=4")
    wait_pdb(stack, ns, "api", expectedPods=4, desiredHealthy=2, currentHealthy=4, disruptionsAllowed=2)


def test_pod_without_a_found_controller_fails_safe(stack: devstack.DevStack, ns: str) -> None:
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "ghost",
        "uid": "00000000-0000-0000-0000-000000000001",
        "controller": True,
    }
    pod(stack, ns, "orphaned", {"app": "ghost"}, owner)
    stack.kubectl("create", "pdb", "ghost", "-n", ns, "--selector=app=ghost", "--max-unavailable=1")

    def failed() -> dict[str, Any] | None:
        status: dict[str, Any] = get(stack, ns, "pdb", "ghost").get("status", {})
        cond = next((c for c in status.get("conditions", []) if c["type"] == "DisruptionAllowed"), None)
        return cond if cond is not None and cond["reason"] == "SyncFailed" else None

    cond = wait_for(failed, 30, interval=0.2, what="SyncFailed condition")
    assert cond["status"] == "False"
    assert cond["message"] == 'found no controllers for pod "orphaned"'
    wait_for(
        lambda: {"NoControllers", "CalculateExpectedPodCountFailed"} <= event_reasons(stack, ns),
        30,
        interval=0.2,
        what="NoControllers and CalculateExpectedPodCountFailed Events",
    )


def test_unmanaged_pods_get_an_event(stack: devstack.DevStack, ns: str) -> None:
    pod(stack, ns, "loner", {"app": "loner"}, None)
    stack.kubectl("create", "pdb", "loner", "-n", ns, "--selector=app=loner", "--max-unavailable=1")
    wait_for(
        lambda: "UnmanagedPods" in event_reasons(stack, ns), 30, interval=0.2, what="UnmanagedPods Event"
    )
    status = wait_pdb(stack, ns, "loner", expectedPods=0, disruptionsAllowed=0, observedGeneration=1)
    assert condition(status)["reason"] == "InsufficientPods"


def test_stale_disruption_target_is_reset(stack: devstack.DevStack, ns: str) -> None:
    pod(stack, ns, "target", {"app": "t"}, None)
    # Once the simulator has started it: its status writes keep only the conditions it owns.
    stack.kubectl("-n", ns, "wait", "--for=condition=Ready", "pod/target", "--timeout=30s")
    patch = {
        "status": {
            "conditions": [
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "EvictionByEvictionAPI",
                    "message": "Eviction API: evicting",
                }
            ]
        }
    }
    stack.kubectl("patch", "pod", "target", "-n", ns, "--subresource=status", "-p", json.dumps(patch))

    def target_status() -> str:
        conds = get(stack, ns, "pod", "target")["status"].get("conditions", [])
        return next((c["status"] for c in conds if c["type"] == "DisruptionTarget"), "")

    wait_for(lambda: target_status() == "False", 30, interval=0.2, what="DisruptionTarget reset to False")


def test_evicted_pod_is_marked_disruption_target_while_it_terminates(
    stack: devstack.DevStack, ns: str
) -> None:
    # Containers that ignore SIGTERM keep each pod terminating for its whole grace period,
    # longer than the module's 2 s stale-condition timeout.
    annotations = {"sim.kcm.dev/ready": "true", "sim.kcm.dev/ignore-sigterm": "true"}
    workloads.apply_deployment(stack, ns, "slow", 2, annotations, grace_seconds=4)
    stack.kubectl("create", "pdb", "slow", "-n", ns, "--selector=app=slow", "--max-unavailable=1")
    wait_pdb(stack, ns, "slow", currentHealthy=2, disruptionsAllowed=1, observedGeneration=1)
    victim = ready_pods(stack, ns, "slow")[0]
    assert evict(stack, ns, victim) == 201

    seen: list[dict[str, Any]] = []

    def gone() -> bool:
        res = stack.kubectl("get", "pod", victim, "-n", ns, "-o", "json", check=False)
        if res.returncode != 0:
            return "NotFound" in res.stderr
        pod = json.loads(res.stdout)
        seen.append(next(c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget"))
        return False

    wait_for(gone, 30, interval=0.2, what=f"evicted pod {victim} gone")
    assert seen, "the pod was never seen terminating"
    # The same condition all along: the disruption controller's stale-condition reset leaves a
    # terminating pod alone, and the kubelet's terminal status keeps it.
    assert {(c["status"], c["reason"], c["message"]) for c in seen} == {
        ("True", "EvictionByEvictionAPI", "Eviction API: evicting")
    }


def test_killed_while_recomputing_converges_after_restart(stack: devstack.DevStack, ns: str) -> None:
    deployment(stack, ns, "grow", 2)
    stack.kubectl("create", "pdb", "grow", "-n", ns, "--selector=app=grow", "--max-unavailable=1")
    wait_pdb(stack, ns, "grow", currentHealthy=2, expectedPods=2, disruptionsAllowed=1)
    stack.kubectl("scale", "deployment", "grow", "-n", ns, "--replicas=6")

    def recomputing() -> dict[str, Any] | None:
        status: dict[str, Any] = get(stack, ns, "pdb", "grow").get("status", {})
        return status if status.get("expectedPods") == 6 else None

    # Frozen once it has taken in the new scale, killed after every new pod became ready: the
    # pod events it missed come only from the restarted process listing its caches again.
    at_stop = wait_for(recomputing, 30, interval=0.05, what="the PDB recomputed for the new scale")
    victims = stack.controller_pids("disruption")
    assert len(victims) == 1
    os.kill(victims[0], signal.SIGSTOP)
    try:
        wait_for(
            lambda: len([p for p in get(stack, ns, "pods", "-l", "app=grow")["items"] if is_ready(p)]) == 6,
            60,
            interval=0.2,
            what="6 ready pods",
        )
    finally:
        os.kill(victims[0], signal.SIGKILL)
    assert at_stop["currentHealthy"] < 6, "every pod was counted before the kill: nothing was tested"
    wait_pdb(stack, ns, "grow", currentHealthy=6, desiredHealthy=5, expectedPods=6, disruptionsAllowed=1)
    assert victims[0] not in stack.controller_pids("disruption")
    stack.wait_healthy(60)
