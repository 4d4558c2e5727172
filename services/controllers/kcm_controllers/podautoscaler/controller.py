"""The horizontal-pod-autoscaler-controller: sizes scale targets from their pods' resource usage.

Upstream pkg/controller/podautoscaler/horizontal.go (v1.32, autoscaling/v2) on our runtime;
the replica arithmetic is `replica_calculator.py`, behavior (stabilization windows, policies)
is `behavior.py`. Each HPA key is synced one --horizontal-pod-autoscaler-sync-period after the
HPA is added or its spec changes, and then every period through the durable work queue
(`runtime.Result(requeue_after=...)`), failures included, as upstream's fixed-interval queue.

One sync (`HorizontalController.sync`, upstream reconcileAutoscaler): read the HPA, resolve
spec.scaleTargetRef to a resource (the workload kinds directly, anything else through
discovery) and read its `/scale`; compute a proposal per metric (Resource metrics from
metrics.k8s.io PodMetrics over the pods the scale's selector matches; Pods/Object/External
ask custom.metrics.k8s.io / external.metrics.k8s.io, which nothing serves here, so they
fail as upstream's do on such a cluster), take the largest, stabilize and rate-limit it
with behavior, write the new size through `/scale`, then write status (currentReplicas,
desiredReplicas, currentMetrics with an empty entry in place of each metric that failed,
lastScaleTime and the AbleToScale, ScalingActive, ScalingLimited conditions; no
observedGeneration, as upstream) when it changed. Events and condition reasons
and messages are upstream's.
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
import prometheus_client
from kcm_shared import runtime
from kcm_shared.apimachinery import codec, goduration, gvr, selectors
from kcm_shared.apimachinery import quantity as quantities
from kcm_shared.client import discovery, kubeclient
from kcm_shared.client.scale import ScaleTargets
from kcm_shared.controllerutil import podcontrol
from kcm_shared.runtime import cache, events

from kcm_controllers.podautoscaler import behavior as rate
from kcm_controllers.podautoscaler import replica_calculator as calc

log = logging.getLogger("kcm.podautoscaler")

HPAS = gvr.Resource("autoscaling", "v2", "horizontalpodautoscalers")
PODS = gvr.Resource("", "v1", "pods")
Obj = dict[str, Any]

_OTHER_METRICS = {
    # type -> (condition reason, API group it would be read from, error prefix)
    "Pods": ("FailedGetPodsMetric", "custom.metrics.k8s.io", "failed to get pods metric value"),
    "Object": ("FailedGetObjectMetric", "custom.metrics.k8s.io", "failed to get object metric value"),
    "External": (
        "FailedGetExternalMetric",
        "external.metrics.k8s.io",
        "failed to get {name} external metric value",
    ),
}


class ContainerView(codec.View):
    name: str = ""
    resources: dict[str, dict[str, str]] = msgspec.field(default_factory=dict)
    restart_policy: str = ""  # an init container with "Always" is a sidecar


class PodSpecView(codec.View):
    containers: list[ContainerView] = msgspec.field(default_factory=list)
    init_containers: list[ContainerView] = msgspec.field(default_factory=list)


class ConditionView(codec.View):
    type: str = ""
    status: str = ""
    last_transition_time: dt.datetime | None = None


class PodStatusView(codec.View):
    phase: str = ""
    start_time: dt.datetime | None = None
    conditions: list[ConditionView] = msgspec.field(default_factory=list)


class PodView(codec.Meta):
    spec: PodSpecView = msgspec.field(default_factory=PodSpecView)
    status: PodStatusView = msgspec.field(default_factory=PodStatusView)


class TargetRefView(codec.View):
    api_version: str = ""
    kind: str = ""
    name: str = ""


class HPASpecView(codec.View):
    scale_target_ref: TargetRefView = msgspec.field(default_factory=TargetRefView)


class HPAView(codec.Meta):
    """What the cache keeps of an HPA: its target, for the AmbiguousSelector check of others."""

    spec: HPASpecView = msgspec.field(default_factory=HPASpecView)


def _fetch_error(exc: BaseException, what: str) -> str:
    """client-go's text for a failed read of `what` (resource.group): a 404 whose body is no
    Status (an API group nobody serves) reads as its NewGenericServerResponse says it."""
    if isinstance(exc, kubeclient.ApiError) and exc.not_found and not exc.status:
        return f"the server could not find the requested resource (get {what})"
    return podcontrol.error_message(exc)


class MetricError(Exception):
    """A metric gave no proposal: `reason` is the ScalingActive condition's (and the Event's);
    `detail` is what the Event and the condition say, `prefix` what upstream puts before it in
    the error that reaches "first error is: ..." (`str` of this); `spec` marks an error of the
    HPA's spec rather than of the metrics pipeline (the `error` label of the
    metric_computation metrics)."""

    def __init__(self, reason: str, detail: str, prefix: str = "", *, spec: bool = False) -> None:
        super().__init__(f"{prefix}: {detail}" if prefix else detail)
        self.reason = reason
        self.detail = detail
        self.spec = spec


# upstream pkg/controller/podautoscaler/monitor: the `action` label is scale_up, scale_down or
# none, `error` spec, internal or none.
_BUCKETS = [0.001 * 2**i for i in range(15)]  # upstream ExponentialBuckets(0.001, 2, 15)
RECONCILIATIONS = prometheus_client.Counter(
    "horizontal_pod_autoscaler_controller_reconciliations_total",
    "Number of reconciliations of HPA controller. The label 'action' should be either 'scale_down', "
    "'scale_up', or 'none'. Also, the label 'error' should be either 'spec', 'internal', or 'none'.",
    ["action", "error"],
)
RECONCILIATION_DURATION = prometheus_client.Histogram(
    "horizontal_pod_autoscaler_controller_reconciliation_duration_seconds",
    "The time(seconds) that the HPA controller takes to reconcile once.",
    ["action", "error"],
    buckets=_BUCKETS,
)
METRIC_COMPUTATIONS = prometheus_client.Counter(
    "horizontal_pod_autoscaler_controller_metric_computation_total",
    "Number of metric computations. The label 'metric_type' corresponds to HPA.spec.metrics[*].type",
    ["action", "error", "metric_type"],
)
METRIC_COMPUTATION_DURATION = prometheus_client.Histogram(
    "horizontal_pod_autoscaler_controller_metric_computation_duration_seconds",
    "The time(seconds) that the HPA controller takes to calculate one metric.",
    ["action", "error", "metric_type"],
    buckets=_BUCKETS,
)


@dataclass
class Outcome:
    """The labels of one reconciliation: the scale it wrote, and whether anything failed."""

    action: str = "none"
    error: str = "none"


def _action(proposal: int, current: int) -> str:
    return "scale_up" if proposal > current else "scale_down" if proposal < current else "none"


def observe_metric(metric_type: str, action: str, error: str, started: float) -> None:
    METRIC_COMPUTATIONS.labels(action, error, metric_type).inc()
    METRIC_COMPUTATION_DURATION.labels(action, error, metric_type).observe(time.monotonic() - started)


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _timestamp(when: dt.datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _milli(value: object) -> int:
    """Upstream Quantity.MilliValue: rounded up to whole milli-units."""
    return math.ceil(quantities.exact(value) * 1000)


def _format_milli(milli: int) -> str:
    """resource.NewMilliQuantity(v, DecimalSI).String(): whole units when they divide."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def pod_info(pod: PodView) -> calc.PodInfo:
    """The calculator's view of a pod; sidecars' requests count with the containers' (upstream
    calculatePodRequests since sidecar containers, as in 1.32)."""
    ready = next((c for c in pod.status.conditions if c.type == "Ready"), None)
    requests: dict[str, dict[str, int]] = {}
    sidecars = [c for c in pod.spec.init_containers if c.restart_policy == "Always"]
    for c in [*pod.spec.containers, *sidecars]:
        wanted = c.resources.get("requests") or {}
        parsed = {}
        for name, value in wanted.items():
            try:
                parsed[name] = _milli(value)
            except ValueError:
                continue  # validated by the API server; an odd value counts as missing
        requests[c.name] = parsed
    return calc.PodInfo(
        name=pod.metadata.name,
        phase=pod.status.phase,
        deleted=pod.metadata.deletion_timestamp is not None,
        start_time=pod.status.start_time,
        ready=(ready.status, ready.last_transition_time or dt.datetime.min.replace(tzinfo=dt.UTC))
        if ready is not None
        else None,
        requests=requests,
    )


def _parse_window(text: str) -> dt.timedelta:
    try:
        return dt.timedelta(seconds=goduration.seconds(text))
    except (ValueError, TypeError):
        return dt.timedelta(seconds=30)


def samples_of(items: list[Obj], resource: str, container: str = "") -> dict[str, calc.Sample]:
    """Per-pod usage from a PodMetricsList; upstream's resource metrics client skips a pod
    one of whose (selected) containers lacks the resource."""
    out: dict[str, calc.Sample] = {}
    for item in items:
        total, complete = 0, True
        for c in item.get("containers") or []:
            if container and c.get("name") != container:
                continue
            usage = (c.get("usage") or {}).get(resource)
            if usage is None:
                complete = False
                break
            total += _milli(usage)
        if not complete:
            continue
        stamp = dt.datetime.fromisoformat(str(item.get("timestamp", "")).replace("Z", "+00:00"))
        name = (item.get("metadata") or {}).get("name", "")
        out[name] = calc.Sample(total, stamp, _parse_window(str(item.get("window", "30s"))))
    return out


def set_condition(status: Obj, type_: str, value: str, reason: str, message: str, now: dt.datetime) -> None:
    """Upstream setCondition: lastTransitionTime moves only when the status flips."""
    conditions: list[Obj] = status.setdefault("conditions", [])
    for c in conditions:
        if c.get("type") == type_:
            if c.get("status") != value:
                c["lastTransitionTime"] = _timestamp(now)
            c.update(status=value, reason=reason, message=message)
            return
    conditions.append(
        {
            "type": type_,
            "status": value,
            "lastTransitionTime": _timestamp(now),
            "reason": reason,
            "message": message,
        }
    )


class HorizontalController:
    def __init__(
        self,
        client: kubeclient.KubeClient,
        hpas: cache.Cache[HPAView],
        pods: cache.Cache[PodView],
        recorder: events.EventRecorder,
        *,
        sync_period: float,
        downscale_stabilization: float,
        settings: calc.Settings,
        now: Callable[[], dt.datetime] = _utcnow,
    ) -> None:
        self.client = client
        self.hpas = hpas
        self.pods = pods
        self.recorder = recorder
        self.sync_period = sync_period
        self.downscale_stabilization = int(downscale_stabilization)
        self.settings = settings
        self.now = now
        self.histories: dict[str, rate.History] = {}
        self.targets = ScaleTargets(client)
        # (namespace, apiVersion, kind, name) of a scale target -> (monotonic expiry, selector)
        self.target_selectors: dict[
            tuple[str, str, str, str], tuple[float, selectors.LabelSelector | None]
        ] = {}

    def forget_unowned(self, owned: Callable[[str], bool]) -> None:
        """Drop the recommendation history of HPAs whose partition moved to another replica
        (their new owner starts its own, as upstream's new leader does)."""
        self.histories = {key: history for key, history in self.histories.items() if owned(key)}

    # --- scale targets ------------------------------------------------------------------

    async def scale_path(self, namespace: str, ref: Obj) -> str:
        api_version, kind, name = (
            str(ref.get("apiVersion", "")),
            str(ref.get("kind", "")),
            str(ref.get("name", "")),
        )
        try:
            res = await self.targets.resource(api_version, kind)
        except discovery.MappingError as exc:
            raise LookupError(f"unable to determine resource for scale target reference: {exc}") from exc
        return self.targets.path(res, namespace, name)

    # --- AmbiguousSelector ----------------------------------------------------------------

    def remember(self, key: tuple[str, str, str, str], selector: selectors.LabelSelector | None) -> None:
        self.target_selectors[key] = (time.monotonic() + self.sync_period, selector)
        if len(self.target_selectors) > 2 * len(self.hpas.list()) + 16:
            # Targets of deleted HPAs: dropped once their entry has expired.
            now = time.monotonic()
            for stale in [k for k, (expiry, _) in self.target_selectors.items() if expiry <= now]:
                del self.target_selectors[stale]

    async def target_selector(self, namespace: str, ref: TargetRefView) -> selectors.LabelSelector | None:
        """The selector of another HPA's target's scale, read at most once a sync period.
        Upstream keeps the selector each HPA's last sync parsed, all in its one process; here
        that sync may run in another replica. None (selects nothing, as upstream's
        labels.Nothing for an HPA not synced yet) when the target or its selector is missing."""
        key = (namespace, ref.api_version, ref.kind, ref.name)
        known = self.target_selectors.get(key)
        if known is not None and known[0] > time.monotonic():
            return known[1]
        found = None
        try:
            target = {"apiVersion": ref.api_version, "kind": ref.kind, "name": ref.name}
            text = (
                (await self.client.get(await self.scale_path(namespace, target))).get("status") or {}
            ).get("selector") or ""
            found = selectors.parse_label_selector(text) if text else None
        except (kubeclient.ApiError, LookupError, selectors.SelectorError) as exc:
            log.info("no selector for another HPA's target", extra={"target": key, "error": str(exc)})
        self.remember(key, found)
        return found

    async def selecting_hpas(self, hpa: Obj, selector: selectors.LabelSelector) -> list[str]:
        """upstream hpasControllingPodsUnderSelector: `<namespace>/<name>` of every HPA of the
        namespace, this one included, whose target selects one of the pods this one's does."""
        meta, ref = hpa["metadata"], hpa["spec"].get("scaleTargetRef") or {}
        namespace, name = meta.get("namespace", ""), meta.get("name", "")
        own = (namespace, str(ref.get("apiVersion", "")), str(ref.get("kind", "")), str(ref.get("name", "")))
        self.remember(own, selector)
        pods = [p.metadata.labels for p in self.pods.list(namespace) if selector.matches(p.metadata.labels)]
        if not pods:
            return []
        found = []
        for other in self.hpas.list(namespace):
            if other.metadata.name == name:
                theirs: selectors.LabelSelector | None = selector
            else:
                theirs = await self.target_selector(namespace, other.spec.scale_target_ref)
            if theirs is not None and any(theirs.matches(labels) for labels in pods):
                found.append(f"{namespace}/{other.metadata.name}")
        return sorted(found)

    # --- metrics ------------------------------------------------------------------------

    async def resource_proposal(
        self, hpa: Obj, spec: Obj, current: int, selector: selectors.LabelSelector, container: str
    ) -> tuple[int, str, Obj]:
        """(replicas, metric name, MetricStatus) of a Resource or ContainerResource metric."""
        source_key = "containerResource" if container else "resource"
        source = spec.get(source_key) or {}
        resource = str(source.get("name", ""))
        target = source.get("target") or {}
        namespace = hpa["metadata"].get("namespace", "")
        now = self.now()
        try:
            pods = [pod_info(p) for p in self.pods.list(namespace) if selector.matches(p.metadata.labels)]
            try:
                listed = await self.client.get(
                    kubeclient.resource_path("metrics.k8s.io", "v1beta1", "pods", namespace),
                    {"labelSelector": str(selector)},
                )
            except Exception as exc:
                raise calc.CalculationError(
                    f"unable to get metrics for resource {resource}: unable to fetch metrics from resource "
                    f"metrics API: {_fetch_error(exc, 'pods.metrics.k8s.io')}"
                ) from exc
            items = listed.get("items") or []
            if not items:
                raise calc.CalculationError(
                    f"unable to get metrics for resource {resource}: no metrics returned from resource metrics API"
                )
            samples = samples_of(items, resource, container)
            kind = "container resource" if container else "resource"
            if target.get("averageValue") is not None:
                replicas, usage = calc.raw_resource_replicas(
                    current, _milli(target["averageValue"]), resource, pods, samples, self.settings, now
                )
                name = f"{resource} {kind}"
                current_value: Obj = {"averageValue": _format_milli(usage)}
            elif target.get("averageUtilization") is not None:
                replicas, utilization, raw = calc.resource_replicas(
                    current,
                    int(target["averageUtilization"]),
                    resource,
                    pods,
                    samples,
                    self.settings,
                    now,
                    container,
                )
                name = f"{resource} {kind} utilization (percentage of request)"
                current_value = {"averageUtilization": utilization, "averageValue": _format_milli(raw)}
            else:
                raise calc.CalculationError(
                    "invalid resource metric source: neither an average utilization target nor an average "
                    "value (usage) target was set"
                )
        except (calc.CalculationError, ValueError) as exc:
            verb = "usage" if target.get("averageValue") is not None else "utilization"
            reason = "FailedGetContainerResourceMetric" if container else "FailedGetResourceMetric"
            prefix = (
                f"failed to get {container} container metric value"
                if container
                else f"failed to get {resource} resource metric value"
            )
            raise MetricError(reason, f"failed to get {resource} {verb}: {exc}", prefix) from exc
        body: Obj = {"name": resource, "current": current_value}
        if container:
            body["container"] = container
        return replicas, name, {"type": spec["type"], source_key: body}

    async def other_proposal(self, hpa: Obj, spec: Obj) -> tuple[int, str, Obj]:
        """Pods, Object and External metrics: read from an API nothing serves here, so they
        fail as on a cluster without a custom or external metrics adapter."""
        kind = str(spec.get("type", ""))
        reason, group, prefix = _OTHER_METRICS[kind]
        source = spec.get(kind[0].lower() + kind[1:]) or {}
        metric = str((source.get("metric") or {}).get("name", ""))
        namespace = hpa["metadata"].get("namespace", "")
        try:
            await self.client.get(
                kubeclient.resource_path(
                    group, "v1beta1", "pods" if kind != "External" else metric, namespace
                )
            )
            detail = f"the server could not find the requested resource ({group})"
        except Exception as exc:
            detail = podcontrol.error_message(exc)
        api = "external" if kind == "External" else "custom"
        raise MetricError(
            reason,
            f"unable to get metric {metric}: unable to fetch metrics from {api} metrics API: {detail}",
            prefix.format(name=metric),
        )

    async def compute_replicas(
        self, hpa: Obj, status: Obj, scale: Obj, current: int, now: dt.datetime
    ) -> tuple[int, str, list[Obj], Exception | None]:
        """Upstream computeReplicasForMetrics: the largest proposal; (-1, ...) when none or
        (with some failing) one that would scale down."""
        specs: list[Obj] = hpa["spec"].get("metrics") or []
        selector_text = (scale.get("status") or {}).get("selector") or ""
        if not selector_text:
            self.recorder.event(hpa, events.WARNING, "SelectorRequired", "selector is required")
            set_condition(
                status,
                "ScalingActive",
                "False",
                "InvalidSelector",
                "the HPA target's scale is missing a selector",
                now,
            )
            return -1, "", [], RuntimeError("selector is required")
        try:
            selector = selectors.parse_label_selector(selector_text)
        except selectors.SelectorError as exc:
            message = f"couldn't convert selector into a corresponding internal selector object: {exc}"
            self.recorder.event(hpa, events.WARNING, "InvalidSelector", message)
            set_condition(status, "ScalingActive", "False", "InvalidSelector", message, now)
            return -1, "", [], RuntimeError(message)
        selecting = await self.selecting_hpas(hpa, selector)
        if len(selecting) > 1:
            message = (
                f"pods by selector {selector_text} are controlled by multiple HPAs: [{' '.join(selecting)}]"
            )
            self.recorder.event(hpa, events.WARNING, "AmbiguousSelector", message)
            set_condition(status, "ScalingActive", "False", "AmbiguousSelector", message, now)
            return -1, "", [], RuntimeError(message)
        # The metric_computation metrics compare each proposal with the last status (upstream).
        last_current = int(status.get("currentReplicas") or 0)
        replicas, metric = 0, ""
        statuses: list[Obj] = []
        first: MetricError | None = None
        invalid = 0
        for spec in specs:
            kind = str(spec.get("type", ""))
            started = time.monotonic()
            try:
                if kind == "Resource":
                    proposal, name, metric_status = await self.resource_proposal(
                        hpa, spec, current, selector, ""
                    )
                elif kind == "ContainerResource":
                    container = str((spec.get("containerResource") or {}).get("container", ""))
                    proposal, name, metric_status = await self.resource_proposal(
                        hpa, spec, current, selector, container
                    )
                elif kind in _OTHER_METRICS:
                    proposal, name, metric_status = await self.other_proposal(hpa, spec)
                else:
                    raise MetricError(
                        "InvalidMetricSourceType", f'unknown metric source type "{kind}"', spec=True
                    )
            except MetricError as exc:
                observe_metric(kind, "none", "spec" if exc.spec else "internal", started)
                self.recorder.event(hpa, events.WARNING, exc.reason, exc.detail)
                # Kept in place, as upstream's: each entry of currentMetrics stays paired with
                # the spec.metrics entry it measures (kubectl lists them side by side).
                statuses.append({"type": ""})
                if first is None:
                    first = exc
                invalid += 1
                continue
            observe_metric(kind, _action(proposal, last_current), "none", started)
            statuses.append(metric_status)
            if replicas == 0 or proposal > replicas:
                replicas, metric = proposal, name
        error: Exception | None = None
        if first is not None:
            error = RuntimeError(
                f"invalid metrics ({invalid} invalid out of {len(specs)}), first error is: {first}"
            )
        if first is not None and (invalid >= len(specs) or replicas < current):
            set_condition(
                status,
                "ScalingActive",
                "False",
                first.reason,
                f"the HPA was unable to compute the replica count: {first.detail}",
                now,
            )
            return -1, "", statuses, error
        set_condition(
            status,
            "ScalingActive",
            "True",
            "ValidMetricFound",
            f"the HPA was able to successfully calculate a replica count from {metric}",
            now,
        )
        return replicas, metric, statuses, error

    # --- sync ---------------------------------------------------------------------------

    async def sync(self, key: str) -> runtime.Result | None:
        namespace, _, name = key.partition("/")
        try:
            hpa = await self.client.get(
                kubeclient.resource_path(HPAS.group, HPAS.version, HPAS.resource, namespace, name)
            )
        except kubeclient.ApiError as exc:
            if exc.not_found:
                self.histories.pop(key, None)
                return None
            raise
        started = time.monotonic()
        outcome = Outcome()
        try:
            await self.reconcile(key, hpa, outcome)
        except BaseException:
            outcome.error = "internal"  # e.g. the status write failed, maybe after a rescale
            raise
        finally:
            RECONCILIATIONS.labels(outcome.action, outcome.error).inc()
            RECONCILIATION_DURATION.labels(outcome.action, outcome.error).observe(time.monotonic() - started)
        return runtime.Result(requeue_after=self.sync_period)

    async def reconcile(self, key: str, hpa: Obj, outcome: Outcome) -> None:
        """One reconcileAutoscaler; `outcome` gets its reconciliations_total labels."""
        now = self.now()
        spec = hpa.get("spec") or {}
        old_status = copy.deepcopy(hpa.get("status") or {})
        status = copy.deepcopy(old_status)
        ref = spec.get("scaleTargetRef") or {}
        reference = f"{ref.get('kind', '')}/{ref.get('name', '')}"
        try:
            path = await self.scale_path(hpa["metadata"].get("namespace", ""), ref)
            scale = await self.client.get(path)
        except Exception as exc:
            message = podcontrol.error_message(exc)
            self.recorder.event(hpa, events.WARNING, "FailedGetScale", message)
            set_condition(
                status,
                "AbleToScale",
                "False",
                "FailedGetScale",
                f"the HPA controller was unable to get the target's current scale: {message}",
                now,
            )
            await self.write_status(hpa, old_status, status)
            outcome.error = "internal"
            return
        set_condition(
            status,
            "AbleToScale",
            "True",
            "SucceededGetScale",
            "the HPA controller was able to get the target's current scale",
            now,
        )
        current = int((scale.get("spec") or {}).get("replicas") or 0)
        history = self.histories.setdefault(key, rate.History(recommendations=[(now, current)]))
        # 0 is a valid minimum (an API server with HPAScaleToZero stores it): only absent means 1.
        min_replicas = int(spec["minReplicas"]) if spec.get("minReplicas") is not None else 1
        max_replicas = int(spec.get("maxReplicas") or 0)
        rules = (
            rate.rules_of(spec["behavior"], self.downscale_stabilization) if spec.get("behavior") else None
        )
        # Only a computation fills it: scaled to 0 or outside min/max, no metric was read.
        metric_statuses: list[Obj] = []
        reason = ""
        desired = 0
        if current == 0 and min_replicas != 0:
            set_condition(
                status,
                "ScalingActive",
                "False",
                "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero",
                now,
            )
        elif current > max_replicas:
            reason, desired = "Current number of replicas above Spec.MaxReplicas", max_replicas
        elif current < min_replicas:
            reason, desired = "Current number of replicas below Spec.MinReplicas", min_replicas
        else:
            proposal, metric, metric_statuses, error = await self.compute_replicas(
                hpa, status, scale, current, now
            )
            if proposal == -1:
                # The Event is the error itself; upstream puts "failed to compute desired number of
                # replicas ... for <reference>" only on the error it returns (its log line).
                self.recorder.event(hpa, events.WARNING, "FailedComputeMetricsReplicas", str(error))
                log.info(
                    "failed to compute desired number of replicas based on listed metrics",
                    extra={"hpa": key, "target": reference, "error": str(error)},
                )
                self.set_status(
                    status, hpa, current, int(status.get("desiredReplicas") or 0), metric_statuses, False, now
                )
                await self.write_status(hpa, old_status, status)
                outcome.error = "internal"
                return
            if error is not None:
                # Scaled on the metrics that worked; still an error of this reconciliation.
                log.info("some metrics failed", extra={"hpa": key, "error": str(error)})
                outcome.error = "internal"
            desired = proposal
            if desired > current:
                reason = f"{metric} above target"
            elif desired < current:
                reason = "All metrics below target"
            desired = self.normalize(
                status, history, current, desired, (min_replicas, max_replicas), rules, now
            )
        rescale = desired != current
        if rescale:
            try:
                scale.setdefault("spec", {})["replicas"] = desired
                await self.client.update(path, scale)
            except Exception as exc:
                message = podcontrol.error_message(exc)
                self.recorder.event(
                    hpa,
                    events.WARNING,
                    "FailedRescale",
                    f"New size: {desired}; reason: {reason}; error: {message}",
                )
                set_condition(
                    status,
                    "AbleToScale",
                    "False",
                    "FailedUpdateScale",
                    f"the HPA controller was unable to update the target scale: {message}",
                    now,
                )
                self.set_status(
                    status, hpa, current, int(status.get("desiredReplicas") or 0), metric_statuses, False, now
                )
                await self.write_status(hpa, old_status, status)
                outcome.error = "internal"
                return
            set_condition(
                status,
                "AbleToScale",
                "True",
                "SucceededRescale",
                f"the HPA controller was able to update the target scale to {desired}",
                now,
            )
            self.recorder.event(
                hpa, events.NORMAL, "SuccessfulRescale", f"New size: {desired}; reason: {reason}"
            )
            outcome.action = _action(desired, current)
            if rules is not None:
                rate.store_scale_event(history, *rules, current, desired, now)
            log.info(
                "successful rescale", extra={"hpa": key, "from": current, "to": desired, "reason": reason}
            )
        else:
            desired = current
        self.set_status(status, hpa, current, desired, metric_statuses, rescale, now)
        await self.write_status(hpa, old_status, status)

    def normalize(
        self,
        status: Obj,
        history: rate.History,
        current: int,
        desired: int,
        limits: tuple[int, int],
        rules: tuple[rate.Rules, rate.Rules] | None,
        now: dt.datetime,
    ) -> int:
        """Upstream normalizeDesiredReplicasWithBehaviors, or normalizeDesiredReplicas for an
        HPA without behavior (`rules` None), with their conditions."""
        min_replicas, max_replicas = limits
        if rules is None:
            stabilized = rate.stabilize_down(history, desired, self.downscale_stabilization, now)
            reason = "ScaleDownStabilized"
            message = "recent recommendations were higher than current one, applying the highest recent recommendation"
        else:
            stabilized, reason, message = rate.stabilize(history, current, desired, *rules, now)
        if stabilized != desired:
            set_condition(status, "AbleToScale", "True", reason, message, now)
        else:
            set_condition(
                status,
                "AbleToScale",
                "True",
                "ReadyForNewScale",
                "recommended size matches current size",
                now,
            )
        if rules is None:
            limited, reason, message = rate.limit_by_rules(current, stabilized, min_replicas, max_replicas)
        else:
            limited, reason, message = rate.limit_rate(
                history, current, stabilized, min_replicas, max_replicas, *rules, now
            )
        set_condition(
            status, "ScalingLimited", "True" if limited != stabilized else "False", reason, message, now
        )
        return limited

    @staticmethod
    def set_status(
        status: Obj, hpa: Obj, current: int, desired: int, metrics: list[Obj], rescale: bool, now: dt.datetime
    ) -> None:
        status["currentReplicas"] = current
        status["desiredReplicas"] = desired
        if metrics:
            status["currentMetrics"] = metrics
        else:
            status.pop("currentMetrics", None)
        # Upstream's setStatus builds the status anew from the fields above, the conditions and
        # lastScaleTime: it never writes observedGeneration, and drops one found there.
        status.pop("observedGeneration", None)
        if rescale:
            status["lastScaleTime"] = _timestamp(now)

    async def write_status(self, hpa: Obj, old: Obj, new: Obj) -> None:
        """PUT the status when it changed (upstream updateStatusIfNeeded); a conflict raises
        so the key is retried at once on the fresh object."""
        if new == old:
            return
        body = dict(hpa)
        body["status"] = new
        meta = hpa["metadata"]
        path = kubeclient.resource_path(
            HPAS.group, HPAS.version, HPAS.resource, meta.get("namespace", ""), meta.get("name", ""), "status"
        )
        try:
            await self.client.update(path, body)
        except Exception as exc:
            self.recorder.event(
                hpa,
                events.WARNING,
                "FailedUpdateStatus",
                podcontrol.error_message(exc),
            )
            raise


def flags(p: runtime.FlagSet) -> None:
    duration = goduration.positive_seconds
    p.add_argument(
        "--horizontal-pod-autoscaler-sync-period",
        type=duration,
        default=15.0,
        metavar="DURATION",
        help="the period for syncing the number of pods in horizontal pod autoscaler",
    )
    p.add_argument(
        "--horizontal-pod-autoscaler-tolerance",
        type=float,
        default=0.1,
        help="the minimum change (from 1.0) in the desired-to-actual metrics ratio for the horizontal "
        "pod autoscaler to consider scaling",
    )
    p.add_argument(
        "--horizontal-pod-autoscaler-downscale-stabilization",
        type=goduration.seconds,
        default=300.0,
        metavar="DURATION",
        help="the period for which autoscaler will look backwards and not scale down below any "
        "recommendation it made during that period",
    )
    p.add_argument(
        "--horizontal-pod-autoscaler-cpu-initialization-period",
        type=goduration.seconds,
        default=300.0,
        metavar="DURATION",
        help="the period after pod start when CPU samples might be skipped",
    )
    p.add_argument(
        "--horizontal-pod-autoscaler-initial-readiness-delay",
        type=goduration.seconds,
        default=30.0,
        metavar="DURATION",
        help="the period after pod start during which readiness changes will be treated as initial readiness",
    )


def build(ctx: runtime.Context) -> runtime.Reconcile:
    args: argparse.Namespace = ctx.args
    hpas = ctx.caches[HPAS]
    hc = HorizontalController(
        ctx.client,
        hpas,
        ctx.caches[PODS],
        ctx.recorder,
        sync_period=args.horizontal_pod_autoscaler_sync_period,
        downscale_stabilization=args.horizontal_pod_autoscaler_downscale_stabilization,
        settings=calc.Settings(
            tolerance=args.horizontal_pod_autoscaler_tolerance,
            cpu_initialization_period=dt.timedelta(
                seconds=args.horizontal_pod_autoscaler_cpu_initialization_period
            ),
            initial_readiness_delay=dt.timedelta(
                seconds=args.horizontal_pod_autoscaler_initial_readiness_delay
            ),
        ),
    )

    def after_period(hpa: HPAView) -> None:
        # Upstream's queue adds every key one sync period late (AddRateLimited on a fixed
        # interval limiter): a new HPA, or a changed spec, is synced a period later, not at once.
        ctx.enqueue_after(codec.key_of(hpa), hc.sync_period)

    def on_update(old: HPAView, new: HPAView) -> None:
        # Our own status writes come back as updates; the key is already requeued for them.
        if old.metadata.generation != new.metadata.generation:
            after_period(new)

    ctx.on_partitions_lost(hc.forget_unowned)
    hpas.add_handler(
        on_add=after_period,
        on_update=on_update,
        # A deleted HPA's sync finds it gone and frees its recommendation history.
        on_delete=lambda hpa: ctx.enqueue(codec.key_of(hpa)),
    )
    return hc.sync


SPEC = runtime.Spec(
    name="horizontal-pod-autoscaler-controller",
    alias="horizontalpodautoscaling",
    queue_name="horizontalpodautoscaler",
    event_component="horizontal-pod-autoscaler",  # upstream's HPA controller records as this (seen in a differential run)
    primary=HPAS,
    views={HPAS: HPAView, PODS: PodView},
    build=build,
    workers=5,
    workers_flag="concurrent-horizontal-pod-autoscaler-syncs",
    flags=flags,
    package=__package__,
)
