"""The HPA controller's reconcile against the testing kit's fake API server, where upstream's
status and messages show (horizontal_test.go): a failed metric keeps its place in
currentMetrics, Events and conditions carry upstream's wording, a target at 0 replicas drops
the metrics of an earlier sync, and no observedGeneration is written."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
from typing import Any

from kcm_controllers.podautoscaler import controller as horizontal
from kcm_controllers.podautoscaler import replica_calculator as calc
from kcm_shared import runtime
from kcm_shared.client import kubeclient
from kcm_shared.testing import caches, fakeclient, recorders
from kcm_shared.testing import clock as kitclock

NS = "ns"
HPA = f"/apis/autoscaling/v2/namespaces/{NS}/horizontalpodautoscalers/h"
SCALE = f"/apis/apps/v1/namespaces/{NS}/deployments/web/scale"
METRICS = f"/apis/metrics.k8s.io/v1beta1/namespaces/{NS}/pods"
NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
STARTED = "2026-01-01T11:00:00Z"

PODS_METRIC = {
    "type": "Pods",
    "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "1"}},
}
CPU_METRIC = {
    "type": "Resource",
    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}},
}


def hpa(metrics: list[dict[str, Any]], status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "h", "namespace": NS, "resourceVersion": "5", "generation": 3},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1,
            "maxReplicas": 10,
            "metrics": metrics,
        },
        "status": status or {},
    }


def pod(i: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"web-{i}", "namespace": NS, "labels": {"app": "web"}, "resourceVersion": "1"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {
            "phase": "Running",
            "startTime": STARTED,
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": STARTED}],
        },
    }


def usage(i: int, cpu: str) -> dict[str, Any]:
    return {
        "metadata": {"name": f"web-{i}", "namespace": NS},
        "timestamp": "2026-01-01T11:59:30Z",
        "window": "30s",
        "containers": [{"name": "c", "usage": {"cpu": cpu}}],
    }


class ScaleServer(fakeclient.FakeClient):
    """Also serves the Deployment's /scale, which the kit's fake does not."""

    def __init__(self, objects: dict[str, Any], replicas: int) -> None:
        super().__init__(objects)
        self.scale: dict[str, Any] = {
            "spec": {"replicas": replicas},
            "status": {"replicas": replicas, "selector": "app=web"},
        }

    async def handle(self, action: fakeclient.Action) -> dict[str, Any] | None:
        if action.path == SCALE and action.verb == "get":
            return dict(self.scale)
        if action.path == SCALE and action.verb == "update":
            self.scale = action.body
            return dict(self.scale)
        return await super().handle(action)


def setup(
    body: dict[str, Any], replicas: int = 2
) -> tuple[horizontal.HorizontalController, ScaleServer, recorders.RecordingEventRecorder]:
    client = ScaleServer(
        {HPA: body, **{f"{METRICS}/web-{i}": usage(i, "500m") for i in range(replicas)}}, replicas
    )
    pods = caches.new(horizontal.PODS, horizontal.PodView)
    for i in range(replicas):
        caches.deliver(pods, caches.ADDED, pod(i))
    events = recorders.RecordingEventRecorder()
    hc = horizontal.HorizontalController(
        client,
        caches.new(horizontal.HPAS, horizontal.HPAView),
        pods,
        events,
        sync_period=15.0,
        downscale_stabilization=300.0,
        settings=calc.Settings(0.1, dt.timedelta(minutes=5), dt.timedelta(seconds=30)),
        now=lambda: NOW,
    )
    return hc, client, events


def condition(client: fakeclient.FakeClient, type_: str) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in client.objects[HPA]["status"]["conditions"] if c["type"] == type_)
    return found


def test_a_failed_metric_keeps_its_place_in_current_metrics() -> None:
    # kubectl pairs spec.metrics[i] with status.currentMetrics[i].
    hc, client, _ = setup(hpa([PODS_METRIC, CPU_METRIC]))
    asyncio.run(hc.sync(f"{NS}/h"))
    first, second = client.objects[HPA]["status"]["currentMetrics"]
    assert first == {"type": ""}
    assert second["type"] == "Resource" and second["resource"]["current"]["averageUtilization"] == 50


def test_failed_metrics_read_as_upstreams_events_and_condition() -> None:
    client_fail = fakeclient.not_found("pods.metrics.k8s.io", "")
    hc, client, events = setup(hpa([CPU_METRIC]))
    client.fail("list", METRICS, client_fail)
    client.fail("get", METRICS, client_fail)
    asyncio.run(hc.sync(f"{NS}/h"))
    reasons = dict((reason, message) for _, reason, message in events.seen())
    detail = reasons["FailedGetResourceMetric"]
    assert detail.startswith("failed to get cpu utilization: unable to get metrics for resource cpu: ")
    assert reasons["FailedComputeMetricsReplicas"] == (
        f"invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric value: {detail}"
    )
    assert (
        condition(client, "ScalingActive")["message"]
        == f"the HPA was unable to compute the replica count: {detail}"
    )


def test_a_failed_status_write_says_only_the_api_servers_error() -> None:
    hc, client, events = setup(hpa([CPU_METRIC]))
    client.fail(
        "update",
        f"{HPA}/status",
        fakeclient.conflict("horizontalpodautoscalers.autoscaling", "h", fakeclient.STALE),
    )
    with contextlib.suppress(kubeclient.ApiError):
        asyncio.run(hc.sync(f"{NS}/h"))
    (message,) = [m for _, reason, m in events.seen() if reason == "FailedUpdateStatus"]
    assert (
        message
        == f'Operation cannot be fulfilled on horizontalpodautoscalers.autoscaling "h": {fakeclient.STALE}'
    )


def test_a_target_at_zero_drops_the_metrics_of_an_earlier_sync_and_no_observed_generation() -> None:
    earlier = {
        "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {}}}],
        "observedGeneration": 2,
    }
    hc, client, _ = setup(hpa([CPU_METRIC], earlier), replicas=0)
    asyncio.run(hc.sync(f"{NS}/h"))
    status = client.objects[HPA]["status"]
    assert "currentMetrics" not in status and "observedGeneration" not in status
    assert status["currentReplicas"] == 0


def test_a_minimum_of_zero_keeps_scaling_a_target_at_zero() -> None:
    # HPAScaleToZero is read by the API server's validation only: upstream's controller honours
    # minReplicas 0 whatever its own gates say, and computes the metrics of a target at zero.
    body = hpa([CPU_METRIC])
    body["spec"]["minReplicas"] = 0
    hc, client, events = setup(body, replicas=0)
    asyncio.run(hc.sync(f"{NS}/h"))
    assert condition(client, "ScalingActive")["reason"] != "ScalingDisabled"
    assert "FailedComputeMetricsReplicas" in [reason for _, reason, _ in events.seen()]


def test_a_new_hpa_and_a_spec_change_are_synced_one_period_later() -> None:
    # Upstream's queue adds every HPA key a sync period late, the first one too.
    clock = kitclock.FakeClock()
    enqueued: list[str] = []
    stores: dict[Any, Any] = {res: caches.new(res, view) for res, view in horizontal.SPEC.views.items()}
    args = argparse.Namespace(
        horizontal_pod_autoscaler_sync_period=15.0,
        horizontal_pod_autoscaler_downscale_stabilization=300.0,
        horizontal_pod_autoscaler_tolerance=0.1,
        horizontal_pod_autoscaler_cpu_initialization_period=300.0,
        horizontal_pod_autoscaler_initial_readiness_delay=30.0,
    )
    ctx = runtime.Context(
        "horizontal-pod-autoscaler-controller",
        fakeclient.FakeClient(),
        stores,
        enqueued.append,
        recorders.RecordingEventRecorder(),
        args=args,
        clock=clock,
    )
    horizontal.build(ctx)
    caches.deliver(stores[horizontal.HPAS], caches.ADDED, hpa([CPU_METRIC]))
    clock.advance(14.9)
    assert enqueued == []
    clock.advance(0.1)
    assert enqueued == [f"{NS}/h"]
    changed = hpa([CPU_METRIC])
    changed["metadata"].update(generation=4, resourceVersion="6")
    caches.deliver(stores[horizontal.HPAS], caches.MODIFIED, changed)
    assert enqueued == [f"{NS}/h"]
    clock.advance(15.0)
    assert enqueued == [f"{NS}/h", f"{NS}/h"]
