"""The replica count a resource metric asks for: upstream's replica calculator, pure.

Follows pkg/controller/podautoscaler/replica_calculator.go and metrics/utilization.go (v1.32):
the controller (`horizontal.py`) hands in the pods its selector matches (`PodInfo`), the
per-pod usage metrics.k8s.io reported (milli-units, as upstream's MilliValue) and the target;
`resource_replicas` (target type Utilization, against the pods' requests) and
`raw_resource_replicas` (AverageValue) answer the proposal. Pods are grouped as upstream's
groupPods does: deleted or Failed pods are ignored, Pending ones and (for cpu) those still
in their CPU initialization period or never ready are unready, pods without a sample are
missing; missing and unready pods are then assumed at the value that damps the change, so
a scale is never reversed by pods the calculator knows nothing about.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field


class CalculationError(Exception):
    """Why no proposal could be computed (the message is upstream's)."""


@dataclass(frozen=True)
class PodInfo:
    """What the calculator reads of one pod."""

    name: str
    phase: str = "Running"
    deleted: bool = False
    start_time: dt.datetime | None = None
    # The Ready condition: (status, lastTransitionTime), or None when the pod has none.
    ready: tuple[str, dt.datetime] | None = None
    # Container name -> resource name -> request in milli-units.
    requests: Mapping[str, Mapping[str, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class Sample:
    """One pod's usage of the metric (milli-units) and when/over what window it was taken."""

    value: int
    timestamp: dt.datetime
    window: dt.timedelta = dt.timedelta(seconds=30)


@dataclass(frozen=True)
class Settings:
    tolerance: float = 0.1
    cpu_initialization_period: dt.timedelta = dt.timedelta(minutes=5)
    initial_readiness_delay: dt.timedelta = dt.timedelta(seconds=30)


@dataclass
class _Groups:
    ready_count: int = 0
    unready: set[str] = field(default_factory=set)
    missing: set[str] = field(default_factory=set)
    ignored: set[str] = field(default_factory=set)


def group_pods(
    pods: list[PodInfo],
    metrics: Mapping[str, Sample],
    resource: str,
    settings: Settings,
    now: dt.datetime,
) -> _Groups:
    """Upstream groupPods."""
    out = _Groups()
    for pod in pods:
        if pod.deleted or pod.phase == "Failed":
            out.ignored.add(pod.name)
            continue
        if pod.phase == "Pending":
            out.unready.add(pod.name)
            continue
        sample = metrics.get(pod.name)
        if sample is None:
            out.missing.add(pod.name)
            continue
        if resource == "cpu":
            if pod.ready is None or pod.start_time is None:
                unready = True
            else:
                status, transition = pod.ready
                if pod.start_time + settings.cpu_initialization_period > now:
                    # Still initializing: unready, or no whole metric window since it turned ready.
                    unready = status == "False" or sample.timestamp < transition + sample.window
                else:
                    # Past initialization: ignore only a pod that has never been ready.
                    unready = (
                        status == "False" and pod.start_time + settings.initial_readiness_delay > transition
                    )
            if unready:
                out.unready.add(pod.name)
                continue
        out.ready_count += 1
    return out


def pod_requests(pods: list[PodInfo], resource: str, container: str = "") -> dict[str, int]:
    """Each pod's summed request of `resource` (milli-units); upstream calculatePodRequests."""
    out: dict[str, int] = {}
    for pod in pods:
        total = 0
        for name, requests in pod.requests.items():
            if container and name != container:
                continue
            if resource not in requests:
                raise CalculationError(
                    f"missing request for {resource} in container {name} of Pod {pod.name}"
                )
            total += requests[resource]
        out[pod.name] = total
    return out


def utilization_ratio(
    metrics: Mapping[str, int], requests: Mapping[str, int], target_utilization: int
) -> tuple[float, int, int]:
    """(usage ratio, utilization %, average raw value); upstream GetResourceUtilizationRatio."""
    metrics_total = requests_total = entities = 0
    for name, value in metrics.items():
        if name not in requests:
            continue
        metrics_total += value
        requests_total += requests[name]
        entities += 1
    if requests_total == 0:
        raise CalculationError("no metrics returned matched known pods")
    utilization = metrics_total * 100 // requests_total
    return utilization / target_utilization, utilization, metrics_total // entities


def usage_ratio(metrics: Mapping[str, int], target_usage: int) -> tuple[float, int]:
    """(usage ratio, average value); upstream GetMetricUsageRatio."""
    average = sum(metrics.values()) // len(metrics)
    return average / target_usage, average


def _proposal(
    current_replicas: int,
    groups: _Groups,
    metrics: dict[str, int],
    ratio_of: Callable[[dict[str, int]], float],
    missing_value: Callable[[str], int],
    tolerance: float,
) -> int:
    """The shared tail of GetResourceReplicas and calcPlainMetricReplicas: the ratio over the
    ready pods, then (when pods are missing or unready) re-counted with those pods assumed
    at the damping value, and no change when that flips the direction."""
    ratio = ratio_of(metrics)
    scale_up_with_unready = bool(groups.unready) and ratio > 1.0
    if not scale_up_with_unready and not groups.missing:
        if abs(1.0 - ratio) <= tolerance:
            return current_replicas
        return math.ceil(ratio * groups.ready_count)
    if groups.missing and ratio != 1.0:
        for name in groups.missing:
            # Below target: missing pods count at the target; above: as idle; exactly at the
            # target they are left out, so the ratio stays 1 and nothing changes.
            metrics[name] = missing_value(name) if ratio < 1.0 else 0
    if scale_up_with_unready:
        for name in groups.unready:
            metrics[name] = 0
    new_ratio = ratio_of(metrics)
    if abs(1.0 - new_ratio) <= tolerance or (ratio < 1.0 < new_ratio) or (new_ratio < 1.0 < ratio):
        return current_replicas
    proposal = math.ceil(new_ratio * len(metrics))
    if (new_ratio < 1.0 and proposal > current_replicas) or (new_ratio > 1.0 and proposal < current_replicas):
        return current_replicas
    return proposal


def _usable(
    pods: list[PodInfo], samples: Mapping[str, Sample], resource: str, settings: Settings, now: dt.datetime
) -> tuple[_Groups, dict[str, int]]:
    if not pods:
        raise CalculationError("no pods returned by selector while calculating replica count")
    groups = group_pods(pods, samples, resource, settings, now)
    dropped = groups.ignored | groups.unready
    metrics = {name: s.value for name, s in samples.items() if name not in dropped}
    if not metrics:
        raise CalculationError("did not receive metrics for targeted pods (pods might be unready)")
    return groups, metrics


def resource_replicas(
    current_replicas: int,
    target_utilization: int,
    resource: str,
    pods: list[PodInfo],
    samples: Mapping[str, Sample],
    settings: Settings,
    now: dt.datetime,
    container: str = "",
) -> tuple[int, int, int]:
    """(replicas, utilization %, average raw value) for a Utilization target; upstream
    GetResourceReplicas."""
    groups, metrics = _usable(pods, samples, resource, settings, now)
    requests = pod_requests(pods, resource, container)
    _, utilization, raw = utilization_ratio(metrics, requests, target_utilization)
    fallback = max(target_utilization, 100)
    replicas = _proposal(
        current_replicas,
        groups,
        metrics,
        lambda m: utilization_ratio(m, requests, target_utilization)[0],
        lambda name: requests[name] * fallback // 100,
        settings.tolerance,
    )
    return replicas, utilization, raw


def raw_resource_replicas(
    current_replicas: int,
    target_usage: int,
    resource: str,
    pods: list[PodInfo],
    samples: Mapping[str, Sample],
    settings: Settings,
    now: dt.datetime,
) -> tuple[int, int]:
    """(replicas, average value) for an AverageValue target; upstream GetRawResourceReplicas."""
    groups, metrics = _usable(pods, samples, resource, settings, now)
    _, usage = usage_ratio(metrics, target_usage)
    replicas = _proposal(
        current_replicas,
        groups,
        metrics,
        lambda m: usage_ratio(m, target_usage)[0],
        lambda _name: target_usage,
        settings.tolerance,
    )
    return replicas, usage
