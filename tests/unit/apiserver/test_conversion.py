"""Conversion between served versions sharing storage: HPA v1 <-> v2, core <-> events.k8s.io Events."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from kcm_apiserver.conversion import (
    HPA_BEHAVIOR_ANNOTATION,
    HPA_CONDITIONS_ANNOTATION,
    HPA_CURRENT_METRICS_ANNOTATION,
    HPA_METRICS_ANNOTATION,
    convert,
    core_event_to_events_v1,
    events_v1_to_core_event,
    hpa_v1_to_v2,
    hpa_v2_to_v1,
)

Obj = dict[str, Any]

# --- Events ---------------------------------------------------------------------------------------

CORE_EVENT: Obj = {
    "apiVersion": "v1",
    "kind": "Event",
    "metadata": {"name": "p.1", "namespace": "default"},
    "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default", "uid": "u1"},
    "reason": "Pulled",
    "message": "Pulled image",
    "source": {"component": "kubelet", "host": "n1"},
    "firstTimestamp": "2024-01-01T00:00:00Z",
    "lastTimestamp": "2024-01-01T00:01:00Z",
    "count": 3,
    "type": "Normal",
    "eventTime": "2024-01-01T00:00:00.000000Z",
    "series": {"count": 3, "lastObservedTime": "2024-01-01T00:01:00.000000Z"},
    "action": "Pulling",
    "related": {"kind": "Node", "name": "n1"},
    "reportingComponent": "kubelet",
    "reportingInstance": "n1",
}

EVENTS_V1_EVENT: Obj = {
    "apiVersion": "events.k8s.io/v1",
    "kind": "Event",
    "metadata": {"name": "p.1", "namespace": "default"},
    "eventTime": "2024-01-01T00:00:00.000000Z",
    "series": {"count": 3, "lastObservedTime": "2024-01-01T00:01:00.000000Z"},
    "reportingInstance": "n1",
    "action": "Pulling",
    "reason": "Pulled",
    "related": {"kind": "Node", "name": "n1"},
    "type": "Normal",
    "regarding": {"kind": "Pod", "name": "p", "namespace": "default", "uid": "u1"},
    "note": "Pulled image",
    "deprecatedSource": {"component": "kubelet", "host": "n1"},
    "deprecatedFirstTimestamp": "2024-01-01T00:00:00Z",
    "deprecatedLastTimestamp": "2024-01-01T00:01:00Z",
    "deprecatedCount": 3,
    "reportingController": "kubelet",
}


def test_core_event_maps_to_events_v1_fields() -> None:
    assert core_event_to_events_v1(CORE_EVENT) == EVENTS_V1_EVENT


def test_events_v1_maps_to_core_event_fields() -> None:
    assert events_v1_to_core_event(EVENTS_V1_EVENT) == CORE_EVENT


@pytest.mark.parametrize(
    "event",
    [
        CORE_EVENT,
        {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "x"}, "message": "only a message"},
    ],
)
def test_core_event_round_trips_through_events_v1(event: Obj) -> None:
    assert events_v1_to_core_event(core_event_to_events_v1(event)) == event


def test_event_conversion_does_not_share_nested_objects() -> None:
    converted = core_event_to_events_v1(CORE_EVENT)
    converted["regarding"]["name"] = "changed"
    assert CORE_EVENT["involvedObject"]["name"] == "p"


# --- HorizontalPodAutoscaler -----------------------------------------------------------------------


def hpa_v2(metrics: list[Obj] | None = None, **spec_extra: Any) -> Obj:
    spec: Obj = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "minReplicas": 1,
        "maxReplicas": 10,
        **spec_extra,
    }
    if metrics is not None:
        spec["metrics"] = metrics
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": spec,
    }


def cpu(utilization: int) -> Obj:
    return {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": utilization}},
    }


MEMORY = {
    "type": "Resource",
    "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "1Gi"}},
}
PODS = {
    "type": "Pods",
    "pods": {
        "metric": {"name": "qps", "selector": {"matchLabels": {"a": "b"}}},
        "target": {"type": "AverageValue", "averageValue": "10"},
    },
}
OBJECT = {
    "type": "Object",
    "object": {
        "describedObject": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "name": "main"},
        "metric": {"name": "requests"},
        "target": {"type": "Value", "value": "2k"},
    },
}
EXTERNAL = {
    "type": "External",
    "external": {"metric": {"name": "queue"}, "target": {"type": "AverageValue", "averageValue": "30"}},
}
CONTAINER = {
    "type": "ContainerResource",
    "containerResource": {
        "name": "cpu",
        "container": "app",
        "target": {"type": "Utilization", "averageUtilization": 60},
    },
}
BEHAVIOR = {
    "scaleDown": {
        "stabilizationWindowSeconds": 300,
        "selectPolicy": "Max",
        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
    }
}
STATUS_V2 = {
    "observedGeneration": 2,
    "lastScaleTime": "2024-01-01T00:00:00Z",
    "currentReplicas": 3,
    "desiredReplicas": 4,
    "currentMetrics": [
        {
            "type": "Resource",
            "resource": {"name": "cpu", "current": {"averageUtilization": 70, "averageValue": "700m"}},
        },
        {
            "type": "Pods",
            "pods": {"metric": {"name": "qps"}, "current": {"averageValue": "12"}},
        },
    ],
    "conditions": [
        {
            "type": "AbleToScale",
            "status": "True",
            "lastTransitionTime": "2024-01-01T00:00:00Z",
            "reason": "Ok",
        }
    ],
}


def test_hpa_v2_cpu_target_becomes_v1_percentage() -> None:
    v1 = hpa_v2_to_v1(hpa_v2([cpu(50)]))
    assert v1 == {
        "apiVersion": "autoscaling/v1",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1,
            "maxReplicas": 10,
            "targetCPUUtilizationPercentage": 50,
        },
    }


def test_hpa_v2_other_metrics_are_saved_in_v1_shape() -> None:
    v1 = hpa_v2_to_v1(hpa_v2([MEMORY, PODS, OBJECT, EXTERNAL, CONTAINER]))
    assert "targetCPUUtilizationPercentage" not in v1["spec"]
    assert json.loads(v1["metadata"]["annotations"][HPA_METRICS_ANNOTATION]) == [
        {"type": "Resource", "resource": {"name": "memory", "targetAverageValue": "1Gi"}},
        {
            "type": "Pods",
            "pods": {
                "metricName": "qps",
                "selector": {"matchLabels": {"a": "b"}},
                "targetAverageValue": "10",
            },
        },
        {
            "type": "Object",
            "object": {
                "target": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "name": "main"},
                "metricName": "requests",
                "targetValue": "2k",
            },
        },
        {"type": "External", "external": {"metricName": "queue", "targetAverageValue": "30"}},
        {
            "type": "ContainerResource",
            "containerResource": {"name": "cpu", "container": "app", "targetAverageUtilization": 60},
        },
    ]


def test_hpa_v2_status_becomes_v1_status_and_annotations() -> None:
    v1 = hpa_v2_to_v1({**hpa_v2([cpu(50)]), "status": STATUS_V2})
    assert v1["status"] == {
        "observedGeneration": 2,
        "lastScaleTime": "2024-01-01T00:00:00Z",
        "currentReplicas": 3,
        "desiredReplicas": 4,
        "currentCPUUtilizationPercentage": 70,
    }
    annotations = v1["metadata"]["annotations"]
    assert json.loads(annotations[HPA_CURRENT_METRICS_ANNOTATION]) == [
        {
            "type": "Resource",
            "resource": {"name": "cpu", "currentAverageUtilization": 70, "currentAverageValue": "700m"},
        },
        {"type": "Pods", "pods": {"metricName": "qps", "currentAverageValue": "12"}},
    ]
    assert json.loads(annotations[HPA_CONDITIONS_ANNOTATION]) == STATUS_V2["conditions"]


def test_hpa_v1_without_target_gets_the_default_cpu_target() -> None:
    v1 = hpa_v2_to_v1(hpa_v2())
    assert hpa_v1_to_v2(v1)["spec"]["metrics"] == [cpu(80)]


@pytest.mark.parametrize(
    "v2",
    [
        pytest.param(hpa_v2([cpu(50)]), id="cpu-only"),
        pytest.param(hpa_v2([MEMORY, PODS, OBJECT, EXTERNAL, CONTAINER, cpu(50)]), id="all-metric-types"),
        pytest.param(hpa_v2([MEMORY], behavior=BEHAVIOR), id="behavior"),
        pytest.param({**hpa_v2([PODS, cpu(50)]), "status": STATUS_V2}, id="status"),
        pytest.param(
            {
                **hpa_v2([cpu(50)]),
                "metadata": {"name": "web", "namespace": "default", "annotations": {"team": "a"}},
            },
            id="user-annotations-kept",
        ),
    ],
)
def test_hpa_v2_round_trips_through_v1(v2: Obj) -> None:
    original = copy.deepcopy(v2)
    assert hpa_v1_to_v2(hpa_v2_to_v1(v2)) == original
    assert v2 == original


def test_hpa_cpu_target_moves_last_after_round_trip_like_upstream() -> None:
    round_tripped = hpa_v1_to_v2(hpa_v2_to_v1(hpa_v2([cpu(50), MEMORY])))
    assert round_tripped["spec"]["metrics"] == [MEMORY, cpu(50)]


def test_hpa_v1_round_trips_through_v2() -> None:
    v1 = {
        "apiVersion": "autoscaling/v1",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "maxReplicas": 4,
            "targetCPUUtilizationPercentage": 40,
        },
        "status": {"currentReplicas": 1, "desiredReplicas": 1, "currentCPUUtilizationPercentage": 33},
    }
    v2 = hpa_v1_to_v2(v1)
    assert v2["status"]["currentMetrics"] == [
        {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 33}}}
    ]
    assert hpa_v2_to_v1(v2) == {
        **v1,
        "metadata": {
            "name": "web",
            "annotations": {
                HPA_CURRENT_METRICS_ANNOTATION: '[{"type":"Resource",'
                '"resource":{"name":"cpu","currentAverageUtilization":33}}]'
            },
        },
    }


@pytest.mark.parametrize(
    "annotations",
    [
        {HPA_METRICS_ANNOTATION: "not json", HPA_BEHAVIOR_ANNOTATION: "{"},
        {HPA_METRICS_ANNOTATION: '{"not": "a list"}', HPA_BEHAVIOR_ANNOTATION: "{}"},
    ],
)
def test_hpa_unreadable_annotations_are_ignored_and_dropped(annotations: Obj) -> None:
    v1 = {
        "apiVersion": "autoscaling/v1",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "annotations": annotations},
        "spec": {"maxReplicas": 2, "targetCPUUtilizationPercentage": 50},
    }
    v2 = hpa_v1_to_v2(v1)
    assert v2["spec"] == {"maxReplicas": 2, "metrics": [cpu(50)]}
    assert v2["metadata"] == {"name": "web"}


# --- dispatch --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "args", "kwargs", "want"),
    [
        pytest.param(
            hpa_v2([cpu(50)]),
            ("autoscaling", "HorizontalPodAutoscaler", "v2", "v1"),
            {},
            hpa_v2_to_v1(hpa_v2([cpu(50)])),
            id="hpa-v2-to-v1",
        ),
        pytest.param(
            hpa_v2_to_v1(hpa_v2([cpu(50)])),
            ("autoscaling", "HorizontalPodAutoscaler", "v1", "v2"),
            {},
            hpa_v2([cpu(50)]),
            id="hpa-v1-to-v2",
        ),
        pytest.param(
            CORE_EVENT,
            ("", "Event", "v1", "v1"),
            {"to_group": "events.k8s.io"},
            EVENTS_V1_EVENT,
            id="event-core-to-events",
        ),
        pytest.param(
            EVENTS_V1_EVENT,
            ("events.k8s.io", "Event", "v1", "v1"),
            {"to_group": ""},
            CORE_EVENT,
            id="event-events-to-core",
        ),
        pytest.param(
            CORE_EVENT,
            ("events.k8s.io", "Event", "v1", "v1"),
            {},
            EVENTS_V1_EVENT,
            id="stored-core-event-served-as-events-group",
        ),
        pytest.param(
            {"kind": "Widget", "spec": {"a": 1}},
            ("example.com", "Widget", "v1beta1", "v1"),
            {},
            {"kind": "Widget", "spec": {"a": 1}, "apiVersion": "example.com/v1"},
            id="no-converter-sets-apiVersion",
        ),
    ],
)
def test_convert_dispatches_on_kind_and_versions(
    obj: Obj, args: tuple[str, str, str, str], kwargs: Any, want: Obj
) -> None:
    assert convert(obj, *args, **kwargs) == want


def test_convert_same_version_is_identity() -> None:
    obj = hpa_v2([cpu(50)])
    assert convert(obj, "autoscaling", "HorizontalPodAutoscaler", "v2", "v2") is obj


def test_convert_without_converter_leaves_input_untouched() -> None:
    obj: Obj = {"apiVersion": "example.com/v1beta1", "kind": "Widget", "spec": {"a": 1}}
    convert(obj, "example.com", "Widget", "v1beta1", "v1")["spec"]["a"] = 2
    assert obj == {"apiVersion": "example.com/v1beta1", "kind": "Widget", "spec": {"a": 1}}
