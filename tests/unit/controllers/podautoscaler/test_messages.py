"""The autoscaler's error texts, as upstream's Events and conditions read (each one seen to differ
in a differential run against upstream kube-controller-manager, tools/differential)."""

from __future__ import annotations

from kcm_controllers.disruption import controller as disruption
from kcm_controllers.podautoscaler import controller
from kcm_shared.client import kubeclient


def test_an_unserved_metrics_api_reads_as_client_go_says() -> None:
    # kube-apiserver answers a group nobody serves with a plain-text 404, no Status.
    plain = kubeclient.ApiError(404, "Not Found", "404 page not found\n")
    assert controller._fetch_error(plain, "pods.metrics.k8s.io") == (
        "the server could not find the requested resource (get pods.metrics.k8s.io)"
    )
    # A Status body says what it says.
    status = {"kind": "Status", "message": 'pods "x" not found'}
    with_status = kubeclient.ApiError(404, "Not Found", 'pods "x" not found', status)
    assert controller._fetch_error(with_status, "pods.metrics.k8s.io") == 'pods "x" not found'


def test_the_prefix_goes_only_into_the_aggregated_error() -> None:
    exc = controller.MetricError(
        "FailedGetResourceMetric",
        "failed to get cpu utilization: boom",
        "failed to get cpu resource metric value",
    )
    assert exc.detail == "failed to get cpu utilization: boom"  # the Event's and the condition's
    assert str(exc) == "failed to get cpu resource metric value: failed to get cpu utilization: boom"
    plain = controller.MetricError("FailedGetPodsMetric", "no adapter")
    assert (plain.detail, str(plain)) == ("no adapter", "no adapter")


def test_events_come_from_upstream_s_source_components() -> None:
    assert controller.SPEC.event_component == "horizontal-pod-autoscaler"
    assert disruption.SPEC.event_component == "controllermanager"
