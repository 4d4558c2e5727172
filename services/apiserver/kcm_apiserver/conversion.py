"""Conversion between API versions that share one stored object.

Two pairs of served versions share storage here:

* HorizontalPodAutoscaler: stored as autoscaling/v2, also served as autoscaling/v1. v1 can only say
  "target CPU utilisation"; every other v2 metric, the metric statuses, the conditions and the scaling
  behaviour travel through the JSON annotations upstream uses (`autoscaling.alpha.kubernetes.io/...`),
  so a v2 -> v1 -> v2 round trip loses nothing but the order of the CPU metric (upstream puts it last).
* Event: stored as core/v1, also served as events.k8s.io/v1 with renamed fields.

The request handlers call `convert` on the way out of storage (stored -> requested version) and on the
way in (request body -> stored version); `tables` uses the per-kind functions to print any version.
"""

from __future__ import annotations

import copy
import json
from typing import Any

JSON = dict[str, Any]

HPA_METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/metrics"
HPA_CURRENT_METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/current-metrics"
HPA_CONDITIONS_ANNOTATION = "autoscaling.alpha.kubernetes.io/conditions"
HPA_BEHAVIOR_ANNOTATION = "autoscaling.alpha.kubernetes.io/behavior"
_HPA_ROUND_TRIP_ANNOTATIONS = (
    HPA_METRICS_ANNOTATION,
    HPA_CURRENT_METRICS_ANNOTATION,
    HPA_CONDITIONS_ANNOTATION,
    HPA_BEHAVIOR_ANNOTATION,
)
_HPA_STATUS_FIELDS = ("observedGeneration", "lastScaleTime", "currentReplicas", "desiredReplicas")
# autoscaling/v1 used to leave the target implicit; converting to v2 makes it explicit.
HPA_DEFAULT_CPU_UTILIZATION = 80

# core/v1 Event field -> events.k8s.io/v1 Event field; the rest share their names.
_EVENT_RENAMES = {
    "involvedObject": "regarding",
    "message": "note",
    "source": "deprecatedSource",
    "firstTimestamp": "deprecatedFirstTimestamp",
    "lastTimestamp": "deprecatedLastTimestamp",
    "count": "deprecatedCount",
    "reportingComponent": "reportingController",
}
_EVENT_SHARED = ("eventTime", "series", "reportingInstance", "action", "reason", "related", "type")


def _json_dump(value: Any) -> str:
    # Compact like Go's json.Marshal, so the annotation text matches what upstream writes.
    return json.dumps(value, separators=(",", ":"))


def _copy_keys(src: JSON, dst: JSON, keys: tuple[str, ...]) -> None:
    for key in keys:
        if key in src:
            dst[key] = copy.deepcopy(src[key])


def _api_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


# --- Events ---------------------------------------------------------------------------------------


def core_event_to_events_v1(obj: JSON) -> JSON:
    """A core/v1 Event seen as an events.k8s.io/v1 Event."""
    out: JSON = {"apiVersion": "events.k8s.io/v1", "kind": "Event"}
    _copy_keys(obj, out, ("metadata", *_EVENT_SHARED))
    for core_name, events_name in _EVENT_RENAMES.items():
        if core_name in obj:
            out[events_name] = copy.deepcopy(obj[core_name])
    return out


def events_v1_to_core_event(obj: JSON) -> JSON:
    """An events.k8s.io/v1 Event seen as a core/v1 Event."""
    out: JSON = {"apiVersion": "v1", "kind": "Event"}
    _copy_keys(obj, out, ("metadata", *_EVENT_SHARED))
    for core_name, events_name in _EVENT_RENAMES.items():
        if events_name in obj:
            out[core_name] = copy.deepcopy(obj[events_name])
    return out


# --- HorizontalPodAutoscaler: metric shapes ------------------------------------------------------
#
# The annotations hold autoscaling/v1 MetricSpec / MetricStatus objects (the older flat shape with
# `targetAverageValue`, `metricName`...), not v2 ones: clients that decode them expect that shape.


def _put(dst: JSON, key: str, value: Any) -> None:
    if value is not None:
        dst[key] = copy.deepcopy(value)


def _metric_v2_to_v1(metric: JSON, side: str) -> JSON:
    """A v2 metric spec (`side` "target") or status ("current") in v1's flattened field names."""
    kind = metric.get("type", "")
    out: JSON = {"type": kind}
    if kind in ("Resource", "ContainerResource"):
        key = "resource" if kind == "Resource" else "containerResource"
        src = metric.get(key) or {}
        values = src.get(side) or {}
        body: JSON = {"name": src.get("name", "")}
        if kind == "ContainerResource":
            body["container"] = src.get("container", "")
        _put(body, f"{side}AverageUtilization", values.get("averageUtilization"))
        _put(body, f"{side}AverageValue", values.get("averageValue"))
        out[key] = body
    elif kind == "Pods":
        src = metric.get("pods") or {}
        ident = src.get("metric") or {}
        body = {"metricName": ident.get("name", "")}
        _put(body, "selector", ident.get("selector"))
        _put(body, f"{side}AverageValue", (src.get(side) or {}).get("averageValue"))
        out["pods"] = body
    elif kind == "Object":
        src = metric.get("object") or {}
        ident = src.get("metric") or {}
        values = src.get(side) or {}
        body = {
            "target": copy.deepcopy(src.get("describedObject") or {}),
            "metricName": ident.get("name", ""),
        }
        _put(body, "selector", ident.get("selector"))
        _put(body, f"{side}Value", values.get("value"))
        _put(body, "averageValue", values.get("averageValue"))
        out["object"] = body
    elif kind == "External":
        src = metric.get("external") or {}
        ident = src.get("metric") or {}
        values = src.get(side) or {}
        body = {"metricName": ident.get("name", "")}
        _put(body, "metricSelector", ident.get("selector"))
        _put(body, f"{side}Value", values.get("value"))
        _put(body, f"{side}AverageValue", values.get("averageValue"))
        out["external"] = body
    return out


def _metric_identifier(name: Any, selector: Any) -> JSON:
    ident: JSON = {"name": name or ""}
    _put(ident, "selector", selector)
    return ident


def _metric_target(kind: str, **values: Any) -> JSON:
    target: JSON = {"type": kind}
    for key, value in values.items():
        _put(target, key, value)
    return target


def _metric_spec_v1_to_v2(metric: JSON) -> JSON:
    kind = metric.get("type", "")
    out: JSON = {"type": kind}
    if kind in ("Resource", "ContainerResource"):
        key = "resource" if kind == "Resource" else "containerResource"
        src = metric.get(key) or {}
        utilization = src.get("targetAverageUtilization")
        body: JSON = {"name": src.get("name", "")}
        if kind == "ContainerResource":
            body["container"] = src.get("container", "")
        body["target"] = _metric_target(
            "AverageValue" if utilization is None else "Utilization",
            averageUtilization=utilization,
            averageValue=src.get("targetAverageValue"),
        )
        out[key] = body
    elif kind == "Pods":
        src = metric.get("pods") or {}
        out["pods"] = {
            "metric": _metric_identifier(src.get("metricName"), src.get("selector")),
            "target": _metric_target("AverageValue", averageValue=src.get("targetAverageValue")),
        }
    elif kind == "Object":
        src = metric.get("object") or {}
        average = src.get("averageValue")
        out["object"] = {
            "describedObject": copy.deepcopy(src.get("target") or {}),
            "metric": _metric_identifier(src.get("metricName"), src.get("selector")),
            "target": _metric_target(
                "Value" if average is None else "AverageValue",
                value=src.get("targetValue"),
                averageValue=average,
            ),
        }
    elif kind == "External":
        src = metric.get("external") or {}
        value = src.get("targetValue")
        out["external"] = {
            "metric": _metric_identifier(src.get("metricName"), src.get("metricSelector")),
            "target": _metric_target(
                "AverageValue" if value is None else "Value",
                value=value,
                averageValue=src.get("targetAverageValue"),
            ),
        }
    return out


def _metric_value_status(**values: Any) -> JSON:
    current: JSON = {}
    for key, value in values.items():
        _put(current, key, value)
    return current


def _metric_status_v1_to_v2(metric: JSON) -> JSON:
    kind = metric.get("type", "")
    out: JSON = {"type": kind}
    if kind in ("Resource", "ContainerResource"):
        key = "resource" if kind == "Resource" else "containerResource"
        src = metric.get(key) or {}
        body: JSON = {"name": src.get("name", "")}
        if kind == "ContainerResource":
            body["container"] = src.get("container", "")
        body["current"] = _metric_value_status(
            averageUtilization=src.get("currentAverageUtilization"),
            averageValue=src.get("currentAverageValue"),
        )
        out[key] = body
    elif kind == "Pods":
        src = metric.get("pods") or {}
        out["pods"] = {
            "metric": _metric_identifier(src.get("metricName"), src.get("selector")),
            "current": _metric_value_status(averageValue=src.get("currentAverageValue")),
        }
    elif kind == "Object":
        src = metric.get("object") or {}
        out["object"] = {
            "describedObject": copy.deepcopy(src.get("target") or {}),
            "metric": _metric_identifier(src.get("metricName"), src.get("selector")),
            "current": _metric_value_status(
                value=src.get("currentValue"), averageValue=src.get("averageValue")
            ),
        }
    elif kind == "External":
        src = metric.get("external") or {}
        out["external"] = {
            "metric": _metric_identifier(src.get("metricName"), src.get("metricSelector")),
            "current": _metric_value_status(
                value=src.get("currentValue"), averageValue=src.get("currentAverageValue")
            ),
        }
    return out


def _is_cpu_utilization(metric: JSON, value_key: str) -> bool:
    resource = metric.get("resource") or {}
    return (
        metric.get("type") == "Resource"
        and resource.get("name") == "cpu"
        and (resource.get(value_key) or {}).get("averageUtilization") is not None
    )


def _cpu_metric(utilization: Any) -> JSON:
    return {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": utilization}},
    }


def _annotation_json(annotations: JSON, key: str) -> Any:
    """The JSON value saved in an annotation; None when absent or unreadable (upstream ignores bad JSON)."""
    raw = annotations.get(key)
    if not isinstance(raw, str):
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _annotation_list(annotations: JSON, key: str) -> list[JSON] | None:
    value = _annotation_json(annotations, key)
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else None


# --- HorizontalPodAutoscaler: objects ------------------------------------------------------------


def hpa_v2_to_v1(obj: JSON) -> JSON:
    """An autoscaling/v2 HorizontalPodAutoscaler as autoscaling/v1.

    The first CPU utilisation target becomes `targetCPUUtilizationPercentage`; everything v1 cannot
    express is kept in annotations so that `hpa_v1_to_v2` restores it.
    """
    spec: JSON = obj.get("spec") or {}
    metadata: JSON = copy.deepcopy(obj.get("metadata") or {})
    annotations: JSON = dict(metadata.get("annotations") or {})

    out_spec: JSON = {}
    _copy_keys(spec, out_spec, ("scaleTargetRef", "minReplicas", "maxReplicas"))
    metrics: list[JSON] = spec.get("metrics") or []
    cpu = next((m for m in metrics if _is_cpu_utilization(m, "target")), None)
    if cpu is not None:
        out_spec["targetCPUUtilizationPercentage"] = cpu["resource"]["target"]["averageUtilization"]
    others = [_metric_v2_to_v1(m, "target") for m in metrics if not _is_cpu_utilization(m, "target")]
    if others:
        annotations[HPA_METRICS_ANNOTATION] = _json_dump(others)
    if spec.get("behavior") is not None:
        annotations[HPA_BEHAVIOR_ANNOTATION] = _json_dump(spec["behavior"])

    out_status: JSON | None = None
    if "status" in obj:
        status: JSON = obj["status"] or {}
        out_status = {}
        _copy_keys(status, out_status, _HPA_STATUS_FIELDS)
        current: list[JSON] = status.get("currentMetrics") or []
        # Upstream keeps the last CPU reading when several are reported.
        for metric in current:
            if _is_cpu_utilization(metric, "current"):
                out_status["currentCPUUtilizationPercentage"] = metric["resource"]["current"][
                    "averageUtilization"
                ]
        if current:
            annotations[HPA_CURRENT_METRICS_ANNOTATION] = _json_dump(
                [_metric_v2_to_v1(m, "current") for m in current]
            )
        if status.get("conditions"):
            annotations[HPA_CONDITIONS_ANNOTATION] = _json_dump(status["conditions"])

    if annotations:
        metadata["annotations"] = annotations
    out: JSON = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": metadata}
    out["spec"] = out_spec
    if out_status is not None:
        out["status"] = out_status
    return out


def hpa_v1_to_v2(obj: JSON) -> JSON:
    """An autoscaling/v1 HorizontalPodAutoscaler as autoscaling/v2, undoing `hpa_v2_to_v1`."""
    spec: JSON = obj.get("spec") or {}
    metadata: JSON = copy.deepcopy(obj.get("metadata") or {})
    annotations: JSON = dict(metadata.get("annotations") or {})
    saved_metrics = _annotation_list(annotations, HPA_METRICS_ANNOTATION) or []
    saved_current = _annotation_list(annotations, HPA_CURRENT_METRICS_ANNOTATION)
    saved_conditions = _annotation_list(annotations, HPA_CONDITIONS_ANNOTATION)
    behavior = _annotation_json(annotations, HPA_BEHAVIOR_ANNOTATION)
    for key in _HPA_ROUND_TRIP_ANNOTATIONS:
        annotations.pop(key, None)
    if annotations:
        metadata["annotations"] = annotations
    else:
        metadata.pop("annotations", None)

    out_spec: JSON = {}
    _copy_keys(spec, out_spec, ("scaleTargetRef", "minReplicas", "maxReplicas"))
    # Upstream order: the saved metrics first, the CPU target last.
    metrics = [_metric_spec_v1_to_v2(m) for m in saved_metrics]
    if spec.get("targetCPUUtilizationPercentage") is not None:
        metrics.append(_cpu_metric(spec["targetCPUUtilizationPercentage"]))
    out_spec["metrics"] = metrics or [_cpu_metric(HPA_DEFAULT_CPU_UTILIZATION)]
    if isinstance(behavior, dict) and behavior:
        out_spec["behavior"] = behavior

    out: JSON = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": metadata}
    out["spec"] = out_spec
    if "status" in obj:
        status: JSON = obj["status"] or {}
        out_status: JSON = {}
        _copy_keys(status, out_status, _HPA_STATUS_FIELDS)
        if saved_current is not None:
            # The annotation holds every reading, including the raw CPU value v1 cannot show.
            out_status["currentMetrics"] = [_metric_status_v1_to_v2(m) for m in saved_current]
        elif status.get("currentCPUUtilizationPercentage") is not None:
            utilization = status["currentCPUUtilizationPercentage"]
            out_status["currentMetrics"] = [
                {
                    "type": "Resource",
                    "resource": {"name": "cpu", "current": {"averageUtilization": utilization}},
                }
            ]
        if saved_conditions is not None:
            out_status["conditions"] = saved_conditions
        out["status"] = out_status
    return out


# --- Dispatch --------------------------------------------------------------------------------------

_CONVERTERS = {
    ("HorizontalPodAutoscaler", "autoscaling/v2", "autoscaling/v1"): hpa_v2_to_v1,
    ("HorizontalPodAutoscaler", "autoscaling/v1", "autoscaling/v2"): hpa_v1_to_v2,
    ("Event", "v1", "events.k8s.io/v1"): core_event_to_events_v1,
    ("Event", "events.k8s.io/v1", "v1"): events_v1_to_core_event,
}


def convert(
    obj: JSON, group: str, kind: str, from_version: str, to_version: str, *, to_group: str | None = None
) -> JSON:
    """`obj` converted to `to_group/to_version` (`to_group` defaults to `group`).

    The source is the object's own `apiVersion` when it has one, else `group/from_version`; that way
    a core/v1 Event read from shared storage converts when served as events.k8s.io/v1 even if the
    caller only knows the served group. Without a converter for the pair the object comes back as a
    copy with `apiVersion` set to the target (the versions differ only in name).
    """
    source = obj.get("apiVersion") or _api_version(group, from_version)
    target = _api_version(group if to_group is None else to_group, to_version)
    if source == target:
        return obj
    converter = _CONVERTERS.get((kind, source, target))
    if converter is not None:
        return converter(obj)
    out = copy.deepcopy(obj)
    out["apiVersion"] = target
    return out
