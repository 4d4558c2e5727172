"""The horizontal-pod-autoscaler-controller end to end, driven with kubectl.

One stack runs the HPA, deployment and replicaset controllers with a 1 s sync period and a
2 s downscale stabilization window (test-only values of upstream's flags). Pods report the
usage their `sim.kcm.dev/cpu-usage` annotation says (metrics.k8s.io, docs/simulator.md):
`kubectl autoscale` scales a busy Deployment up to its max (ScalingLimited TooManyReplicas,
SuccessfulRescale Event, TARGETS column), an idle one down to its min, and an HPA whose
target does not exist reports FailedGetScale, a Pods metric (no custom metrics API is
served) reports FailedGetPodsMetric, two HPAs over the same pods both report
AmbiguousSelector, upstream's horizontal_pod_autoscaler_controller_* metrics count, and the
controller (a process of its own) killed -9 between a usage change and its scale write
scales once after its restart.
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any

from tests.conftest import wait_for
from tests.e2e import devstack, workloads
from tests.e2e.workloads import get

stack = devstack.stack_fixture(
    "--controllers",
    "horizontal-pod-autoscaler-controller,deployment,replicaset",
    # The HPA controller in a process of its own, so that it can be stopped and killed alone.
    "--replicas",
    "horizontal-pod-autoscaler-controller=1",
    "--horizontal-pod-autoscaler-sync-period=1s",
    "--horizontal-pod-autoscaler-downscale-stabilization=2s",
)
ns = workloads.namespace_fixture("hpa")
CONTROLLER = "horizontal-pod-autoscaler-controller"


def create_deployment(stack: devstack.DevStack, ns: str, name: str, replicas: int, cpu: str) -> None:
    annotations = {"sim.kcm.dev/cpu-usage": cpu, "sim.kcm.dev/terminate-seconds": "0"}
    workloads.apply_deployment(stack, ns, name, replicas, annotations, cpu_request="100m")


def condition(hpa: dict[str, Any], type_: str) -> dict[str, Any]:
    for c in hpa.get("status", {}).get("conditions", []):
        if c["type"] == type_:
            return dict(c)
    return {}


def replicas(stack: devstack.DevStack, ns: str, name: str) -> int:
    return int(get(stack, ns, "deployment", name)["spec"].get("replicas", 0))


def apply_hpa(
    stack: devstack.DevStack, ns: str, name: str, target: str, metrics: list[dict[str, Any]]
) -> None:
    """An autoscaling/v2 HPA of the Deployment `target`, up to 3 replicas, with these metrics
    (none: the API server defaults 80% cpu utilization)."""
    spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
        "maxReplicas": 3,
    }
    if metrics:
        spec["metrics"] = metrics
    body = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }
    stack.kubectl("apply", "-f", "-", input=json.dumps(body))


def wait_condition(stack: devstack.DevStack, ns: str, name: str, type_: str, reason: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        c = condition(get(stack, ns, "hpa", name), type_)
        return c if c.get("reason") == reason else None

    found: dict[str, Any] = wait_for(check, 60, interval=0.3, what=f"{type_} {reason} on hpa {name}")
    return found


def wait_events(stack: devstack.DevStack, ns: str, *reasons: str) -> None:
    wait_for(
        lambda: set(reasons) <= {e["reason"] for e in get(stack, ns, "events")["items"]},
        30,
        interval=0.3,
        what=f"{reasons} Events",
    )


def test_busy_deployment_scales_up_to_max(stack: devstack.DevStack, ns: str) -> None:
    # 90% of the request against a 50% target: 2 pods would want 4; max 3 limits it.
    create_deployment(stack, ns, "web", 2, "90m")
    stack.kubectl("-n", ns, "autoscale", "deployment", "web", "--cpu-percent=50", "--min=1", "--max=3")
    wait_for(lambda: replicas(stack, ns, "web") == 3, 60, interval=0.3, what="scaled up to max")

    def limited() -> dict[str, Any] | None:
        hpa = get(stack, ns, "hpa", "web")
        ok = condition(hpa, "ScalingLimited").get("reason") == "TooManyReplicas"
        return hpa if ok and hpa["status"].get("currentReplicas") == 3 else None

    hpa = wait_for(limited, 60, interval=0.3, what="ScalingLimited TooManyReplicas")
    assert condition(hpa, "ScalingLimited")["status"] == "True"
    assert condition(hpa, "AbleToScale")["status"] == "True"
    active = condition(hpa, "ScalingActive")
    assert (active["status"], active["reason"]) == ("True", "ValidMetricFound")
    assert active["message"] == (
        "the HPA was able to successfully calculate a replica count from cpu resource utilization "
        "(percentage of request)"
    )
    assert hpa["status"]["desiredReplicas"] == 3
    assert hpa["status"]["lastScaleTime"]
    metric = hpa["status"]["currentMetrics"][0]["resource"]
    assert (metric["name"], metric["current"]["averageUtilization"]) == ("cpu", 90)
    table = stack.kubectl("-n", ns, "get", "hpa", "web").stdout
    assert "cpu: 90%/50%" in table, table
    messages = [e["message"] for e in get(stack, ns, "events")["items"] if e["reason"] == "SuccessfulRescale"]
    assert "New size: 3; reason: cpu resource utilization (percentage of request) above target" in messages
    # upstream's horizontal_pod_autoscaler_controller_* metrics counted the scale-up.
    prefix = "horizontal_pod_autoscaler_controller_"
    scale_up = {"action": "scale_up", "error": "none"}
    assert stack.metric(CONTROLLER, prefix + "reconciliations_total", **scale_up) >= 1
    assert stack.metric(CONTROLLER, prefix + "reconciliation_duration_seconds_count", **scale_up) >= 1
    computed = {**scale_up, "metric_type": "Resource"}
    assert stack.metric(CONTROLLER, prefix + "metric_computation_total", **computed) >= 1
    assert stack.metric(CONTROLLER, prefix + "metric_computation_duration_seconds_count", **computed) >= 1


def test_idle_deployment_scales_down_to_min(stack: devstack.DevStack, ns: str) -> None:
    # 10% of the request against 50%: 4 pods want 1; min 2 holds it at 2.
    create_deployment(stack, ns, "idle", 4, "10m")
    wait_for(
        lambda: get(stack, ns, "deployment", "idle").get("status", {}).get("readyReplicas") == 4,
        60,
        interval=0.3,
        what="4 ready pods",
    )
    stack.kubectl("-n", ns, "autoscale", "deployment", "idle", "--cpu-percent=50", "--min=2", "--max=5")
    wait_for(lambda: replicas(stack, ns, "idle") == 2, 60, interval=0.3, what="scaled down to min")

    def limited() -> dict[str, Any] | None:
        hpa = get(stack, ns, "hpa", "idle")
        return hpa if condition(hpa, "ScalingLimited").get("reason") == "TooFewReplicas" else None

    hpa = wait_for(limited, 60, interval=0.3, what="ScalingLimited TooFewReplicas")
    assert (
        condition(hpa, "ScalingLimited")["message"]
        == "the desired replica count is less than the minimum replica count"
    )
    messages = [e["message"] for e in get(stack, ns, "events")["items"] if e["reason"] == "SuccessfulRescale"]
    assert "New size: 2; reason: All metrics below target" in messages


def test_missing_target_reports_failed_get_scale(stack: devstack.DevStack, ns: str) -> None:
    apply_hpa(stack, ns, "ghost", "nowhere", [])
    c = wait_condition(stack, ns, "ghost", "AbleToScale", "FailedGetScale")
    assert c["status"] == "False"
    assert c["message"].startswith("the HPA controller was unable to get the target's current scale: ")
    wait_events(stack, ns, "FailedGetScale")
    failed = {"action": "none", "error": "internal"}
    assert (
        stack.metric(CONTROLLER, "horizontal_pod_autoscaler_controller_reconciliations_total", **failed) >= 1
    )


def test_pods_metric_reports_failed_get_pods_metric(stack: devstack.DevStack, ns: str) -> None:
    # No custom metrics API is served: the metric fails as upstream's does without an adapter.
    create_deployment(stack, ns, "qps", 1, "10m")
    pods_metric = {
        "type": "Pods",
        "pods": {
            "metric": {"name": "requests_per_second"},
            "target": {"type": "AverageValue", "averageValue": "10"},
        },
    }
    apply_hpa(stack, ns, "qps", "qps", [pods_metric])
    c = wait_condition(stack, ns, "qps", "ScalingActive", "FailedGetPodsMetric")
    assert c["status"] == "False"
    # Upstream's condition carries the metric's own error; "failed to get pods metric value: "
    # goes only into FailedComputeMetricsReplicas' "first error is: ...".
    assert c["message"].startswith(
        "the HPA was unable to compute the replica count: "
        "unable to get metric requests_per_second: unable to fetch metrics from custom metrics API: "
    ), c["message"]
    wait_events(stack, ns, "FailedGetPodsMetric", "FailedComputeMetricsReplicas")
    failed = {"action": "none", "error": "internal", "metric_type": "Pods"}
    assert (
        stack.metric(CONTROLLER, "horizontal_pod_autoscaler_controller_metric_computation_total", **failed)
        >= 1
    )


def test_two_hpas_selecting_the_same_pods_report_ambiguous_selector(
    stack: devstack.DevStack, ns: str
) -> None:
    create_deployment(stack, ns, "shared", 1, "10m")
    for name in ("first", "second"):
        stack.kubectl(
            "-n", ns, "autoscale", "deployment", "shared", f"--name={name}", "--cpu-percent=50", "--max=3"
        )
    message = f"pods by selector app=shared are controlled by multiple HPAs: [{ns}/first {ns}/second]"
    for name in ("first", "second"):
        c = wait_condition(stack, ns, name, "ScalingActive", "AmbiguousSelector")
        assert (c["status"], c["message"]) == ("False", message)
    wait_events(stack, ns, "AmbiguousSelector", "FailedComputeMetricsReplicas")
    # Once the other one is gone, the pods are this one's alone again.
    stack.kubectl("-n", ns, "delete", "hpa", "second")
    assert wait_condition(stack, ns, "first", "ScalingActive", "ValidMetricFound")["status"] == "True"


def test_killed_between_a_metric_change_and_its_scale_writes_it_once(
    stack: devstack.DevStack, ns: str
) -> None:
    create_deployment(stack, ns, "burst", 2, "10m")
    stack.kubectl("-n", ns, "autoscale", "deployment", "burst", "--cpu-percent=50", "--min=2", "--max=4")
    wait_condition(stack, ns, "burst", "ScalingActive", "ValidMetricFound")  # 10%: stays at 2
    # Frozen before the usage rises, so the kill lands between the change and any scale write.
    [victim] = stack.controller_pids(CONTROLLER)
    os.kill(victim, signal.SIGSTOP)
    try:
        stack.kubectl(
            "-n", ns, "annotate", "pods", "-l", "app=burst", "sim.kcm.dev/cpu-usage=90m", "--overwrite"
        )
    finally:
        os.kill(victim, signal.SIGKILL)
    assert replicas(stack, ns, "burst") == 2
    # 90% against 50% on 2 pods wants 4; the restarted controller writes that once.
    wait_for(lambda: replicas(stack, ns, "burst") == 4, 60, interval=0.3, what="scaled up after the restart")

    def settled() -> dict[str, Any] | None:
        status: dict[str, Any] = get(stack, ns, "hpa", "burst").get("status", {})
        return status if (status.get("currentReplicas"), status.get("desiredReplicas")) == (4, 4) else None

    wait_for(settled, 60, interval=0.3, what="the HPA status at 4 replicas")
    rescales = [
        (e["message"], e.get("count", 1))
        for e in get(stack, ns, "events")["items"]
        if e["reason"] == "SuccessfulRescale" and e["involvedObject"]["name"] == "burst"
    ]
    assert rescales == [
        ("New size: 4; reason: cpu resource utilization (percentage of request) above target", 1)
    ]
    assert victim not in stack.controller_pids(CONTROLLER)
    stack.wait_healthy(60)
