"""Pure helpers of the DaemonSet controller: upstream pkg/controller/daemon/util/daemonset_util.go
and the node predicates of daemon_controller.go (NodeShouldRunDaemonPod, predicates, NewPod,
podByCreationTimestampAndPhase, getUnscheduledPodsWithoutNode).

- `add_daemon_tolerations`: the tolerations every daemon pod gets (AddOrUpdateDaemonPodTolerations);
- `pod_template`: the template pods are made from, with those tolerations and the
  `controller-revision-hash` / `pod-template-generation` labels (CreatePodTemplate);
- `with_node_affinity`: the required node affinity on `metadata.name` that binds a daemon pod
  to its node through the scheduler (ReplaceDaemonSetPodNodeNameNodeAffinity), and
  `target_node_name` reading it back (GetTargetNodeName);
- `node_should_run`: (shouldRun, shouldContinueRunning) for a node;
- `surge_count`, `unavailable_count`, `allows_surge`, `is_pod_updated`, `template_generation`.

Called by `daemon_controller.py` and `update.py`; no I/O. Templates and pod specs are decoded
JSON (dicts), as the API server sends them.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
from kcm_shared.apimachinery import intstr
from kcm_shared.apis import nodeaffinity

from kcm_controllers.daemonset import views

Obj = dict[str, Any]

TEMPLATE_GENERATION_ANNOTATION = "deprecated.daemonset.template.generation"
TEMPLATE_GENERATION_LABEL = "pod-template-generation"  # extensions DaemonSetTemplateGenerationKey
REVISION_HASH_LABEL = "controller-revision-hash"  # apps DefaultDaemonSetUniqueLabelKey

TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"
TAINT_DISK_PRESSURE = "node.kubernetes.io/disk-pressure"
TAINT_MEMORY_PRESSURE = "node.kubernetes.io/memory-pressure"
TAINT_PID_PRESSURE = "node.kubernetes.io/pid-pressure"
TAINT_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
TAINT_NETWORK_UNAVAILABLE = "node.kubernetes.io/network-unavailable"

ROLLING_UPDATE = "RollingUpdate"
ON_DELETE = "OnDelete"


def template_generation(annotations: Mapping[str, str]) -> int | None:
    """The `deprecated.daemonset.template.generation` annotation; None when absent or not an
    int64 (upstream returns an error there, which every caller treats as absent)."""
    text = annotations.get(TEMPLATE_GENERATION_ANNOTATION)
    if text is None:
        return None
    try:
        value = int(text, 10)
    except ValueError:
        return None
    return value if -(2**63) <= value < 2**63 else None


def _same_toleration(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    # Toleration.MatchToleration: key, operator, value and effect; tolerationSeconds aside.
    return all(a.get(f, "") == b.get(f, "") for f in ("key", "operator", "value", "effect"))


def add_or_update_toleration(spec: Obj, toleration: Obj) -> None:
    """AddOrUpdateTolerationInPodSpec: replace a toleration matching it, or append it."""
    tolerations: list[Obj] = list(spec.get("tolerations") or [])
    for i, existing in enumerate(tolerations):
        if _same_toleration(existing, toleration):
            tolerations[i] = dict(toleration)
            break
    else:
        tolerations.append(dict(toleration))
    spec["tolerations"] = tolerations


def add_daemon_tolerations(spec: Obj) -> None:
    """The tolerations that keep daemon pods on troubled nodes (in place, on a pod spec):
    not-ready and unreachable NoExecute (taint-based eviction must not evict them), the
    pressure and unschedulable NoSchedule taints (TaintNodesByCondition), and
    network-unavailable NoSchedule for hostNetwork pods."""
    for key, effect in (
        (TAINT_NOT_READY, "NoExecute"),
        (TAINT_UNREACHABLE, "NoExecute"),
        (TAINT_DISK_PRESSURE, "NoSchedule"),
        (TAINT_MEMORY_PRESSURE, "NoSchedule"),
        (TAINT_PID_PRESSURE, "NoSchedule"),
        (TAINT_UNSCHEDULABLE, "NoSchedule"),
    ):
        add_or_update_toleration(spec, {"key": key, "operator": "Exists", "effect": effect})
    if spec.get("hostNetwork"):
        add_or_update_toleration(
            spec, {"key": TAINT_NETWORK_UNAVAILABLE, "operator": "Exists", "effect": "NoSchedule"}
        )


def pod_template(template: Obj, generation: int | None, hash_: str) -> Obj:
    """A copy of the DaemonSet's template with the daemon tolerations and the generation and
    hash labels (CreatePodTemplate)."""
    out = copy.deepcopy(template)
    spec = out.setdefault("spec", {})
    add_daemon_tolerations(spec)
    labels = out.setdefault("metadata", {}).get("labels") or {}
    if generation is not None:
        labels[TEMPLATE_GENERATION_LABEL] = str(generation)
    if hash_:
        labels[REVISION_HASH_LABEL] = hash_
    out["metadata"]["labels"] = labels
    return out


def with_node_affinity(affinity: Obj | None, node_name: str) -> Obj:
    """ReplaceDaemonSetPodNodeNameNodeAffinity: `affinity` (copied) whose required node
    affinity is one term, `metadata.name In [node_name]`; preferred terms and pod
    (anti-)affinity stay."""
    term = {"matchFields": [{"key": nodeaffinity.OBJECT_NAME_FIELD, "operator": "In", "values": [node_name]}]}
    out = copy.deepcopy(affinity) if affinity else {}
    node_affinity = out.get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    required["nodeSelectorTerms"] = [term]
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
    out["nodeAffinity"] = node_affinity
    return out


def target_node_name(node_name: str, affinity: Mapping[str, Any] | None) -> str | None:
    """The node a daemon pod is for: spec.nodeName once bound, else the one value of its
    `metadata.name In` matchFields requirement (GetTargetNodeName); None when neither says."""
    if node_name:
        return node_name
    terms = nodeaffinity.required_terms({"affinity": affinity} if affinity else {})
    for term in terms or []:
        for req in term.get("matchFields") or []:
            if req.get("key") == nodeaffinity.OBJECT_NAME_FIELD and req.get("operator") == "In":
                values = req.get("values") or []
                return values[0] if len(values) == 1 else None
    return None


@dataclass(frozen=True)
class Template:
    """A DaemonSet's template decoded once per sync, and the pod spec the predicates test
    (NewPod: the template's spec with the daemon tolerations)."""

    template: Obj
    pod_spec: Obj

    @classmethod
    def of(cls, raw: msgspec.Raw) -> Template:
        decoded = msgspec.json.decode(raw) if raw else {}
        template: Obj = decoded if isinstance(decoded, dict) else {}
        spec = copy.deepcopy(template.get("spec") or {})
        add_daemon_tolerations(spec)
        return cls(template, spec)


def node_object(node: views.NodeView) -> Obj:
    """What the node predicates read of a cached node."""
    return {"metadata": {"name": node.metadata.name, "labels": node.metadata.labels}, "spec": node.spec}


def node_should_run(node: views.NodeView, pod_spec: Mapping[str, Any]) -> tuple[bool, bool]:
    """(shouldRun, shouldContinueRunning) of NodeShouldRunDaemonPod, for the daemon pod spec
    `Template.pod_spec`: the template's nodeName (if set) is the node, the node selector and
    required node affinity match, and no NoSchedule/NoExecute taint is untolerated. A pod
    already there may stay while only NoSchedule taints are untolerated."""
    wanted = pod_spec.get("nodeName") or ""
    if wanted and wanted != node.metadata.name:
        return False, False
    obj = node_object(node)
    if not nodeaffinity.matches_node(pod_spec, obj):
        return False, False
    taints = node.spec.get("taints") or []
    tolerations = pod_spec.get("tolerations") or []
    if nodeaffinity.find_untolerated_taint(taints, tolerations, nodeaffinity.schedule_blocking) is None:
        return True, True
    evicting = nodeaffinity.find_untolerated_taint(taints, tolerations, nodeaffinity.execute_blocking)
    return False, evicting is None


def surge_count(ds: views.DaemonSetView, number_to_schedule: int) -> int:
    """maxSurge as a count of `number_to_schedule` (rounded up); 0 unless RollingUpdate sets it."""
    strategy = ds.spec.update_strategy
    if strategy.type != ROLLING_UPDATE or strategy.rolling_update is None:
        return 0
    if strategy.rolling_update.max_surge is None:
        return 0
    return intstr.scaled_value(strategy.rolling_update.max_surge, number_to_schedule, round_up=True)


def unavailable_count(ds: views.DaemonSetView, number_to_schedule: int) -> int:
    """maxUnavailable as a count of `number_to_schedule` (rounded up); 0 unless RollingUpdate."""
    strategy = ds.spec.update_strategy
    if strategy.type != ROLLING_UPDATE or strategy.rolling_update is None:
        return 0
    return intstr.scaled_value(strategy.rolling_update.max_unavailable, number_to_schedule, round_up=True)


def allows_surge(ds: views.DaemonSetView) -> bool:
    """Whether more than one pod may run on a node during an update (AllowsSurge)."""
    try:
        return surge_count(ds, 1) > 0
    except ValueError:
        return False


def is_pod_updated(labels: Mapping[str, str], hash_: str) -> bool:
    """The pod carries the current revision's hash (IsPodUpdated). Upstream also compares the
    `pod-template-generation` label, but formats the generation's pointer rather than its
    value there, so only the hash ever matches; so here too."""
    return bool(hash_) and labels.get(REVISION_HASH_LABEL) == hash_


def _creation(pod: views.DaemonPodView) -> dt.datetime:
    return pod.metadata.creation_timestamp or dt.datetime.min.replace(tzinfo=dt.UTC)


def by_creation(pods: Sequence[views.DaemonPodView]) -> list[views.DaemonPodView]:
    """podByCreationTimestampAndPhase: bound pods first, then the oldest, then by name."""
    return sorted(pods, key=lambda p: (not p.spec.node_name, _creation(p), p.metadata.name))


def unscheduled_pods_without_node(
    node_names: set[str], node_to_pods: Mapping[str, Sequence[views.DaemonPodView]]
) -> list[str]:
    """Pods never bound whose target node no longer exists (getUnscheduledPodsWithoutNode):
    nothing else would delete them, the pod GC only collects pods bound to a missing node."""
    return [
        pod.metadata.name
        for node, pods in node_to_pods.items()
        if node not in node_names
        for pod in pods
        if not pod.spec.node_name
    ]
