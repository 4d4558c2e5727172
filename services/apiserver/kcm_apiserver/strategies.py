"""Per-kind rules applied around writes, after upstream's registry strategies.

Upstream `pkg/registry/<group>/<kind>/strategy.go` decides, per kind, what a create resets
(status), what an update may change (spec through the main resource, status through
`/status`), and how long a graceful delete waits. `operations` calls these hooks.
"""

from __future__ import annotations

import copy
import datetime as dt
import ipaddress
from dataclasses import dataclass
from typing import Any

from kcm_shared.apimachinery import apitypes, selectors

from kcm_apiserver import defaults, errors, nodeports
from kcm_apiserver.registry import ResourceType

Obj = dict[str, Any]

# Kinds whose create keeps what the client sent as status (a kubelet registers its Node
# with status; everything else starts from an empty status).
_KEEPS_STATUS_ON_CREATE = {("", "Node"), ("coordination.k8s.io", "Lease")}
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
# Upstream's built-in PriorityClasses (scheduling.SystemPriorityClasses), and no class at all.
_SYSTEM_PRIORITIES = {"": 0, "system-cluster-critical": 2000000000, "system-node-critical": 2000001000}
_INITIAL_STATUS: dict[tuple[str, str], Obj] = {
    ("", "Namespace"): {"phase": "Active"},
    ("", "PersistentVolume"): {"phase": "Pending"},
    ("", "PersistentVolumeClaim"): {"phase": "Pending"},
}


class ClusterIPAllocator:
    """Hands out Service cluster IPs from the service CIDR, like upstream's bitmap allocator."""

    def __init__(self, cidr: str = "10.96.0.0/12") -> None:
        self._net = ipaddress.ip_network(cidr)
        self._used: set[str] = set()
        # .1 is the `kubernetes` service's address upstream, so allocation starts after it.
        self._next = 2

    def mark_used(self, ip: str) -> None:
        self._used.add(ip)

    def release(self, ip: str) -> None:
        self._used.discard(ip)

    def allocate(self) -> str:
        size = self._net.num_addresses - 2
        for _ in range(size):
            candidate = str(self._net.network_address + self._next)
            self._next = self._next % size + 1
            if candidate not in self._used:
                self._used.add(candidate)
                return candidate
        raise RuntimeError(f"range {self._net} is full")


def qos_class(pod: Obj) -> str:
    """Upstream's pod QoS: Guaranteed, Burstable or BestEffort from requests and limits."""
    containers = [*pod.get("spec", {}).get("containers", []), *pod.get("spec", {}).get("initContainers", [])]
    any_set = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        requests, limits = res.get("requests") or {}, res.get("limits") or {}
        if requests or limits:
            any_set = True
        for name in ("cpu", "memory"):
            if name not in limits or requests.get(name, limits[name]) != limits[name]:
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


@dataclass(frozen=True)
class TolerationSeconds:
    """kube-apiserver's --default-not-ready-toleration-seconds and
    --default-unreachable-toleration-seconds (DefaultTolerationSeconds admission)."""

    not_ready: int = 300
    unreachable: int = 300


DEFAULT_TOLERATION_SECONDS = TolerationSeconds()


def prepare_for_create(
    rt: ResourceType,
    obj: Obj,
    ips: ClusterIPAllocator,
    toleration_seconds: TolerationSeconds = DEFAULT_TOLERATION_SECONDS,
) -> None:
    ident = (rt.group, rt.kind)
    if rt.has_status and ident not in _KEEPS_STATUS_ON_CREATE:
        obj["status"] = copy.deepcopy(_INITIAL_STATUS.get(ident, {}))
    if ident == ("", "Pod"):
        obj["status"] = {"phase": "Pending", "qosClass": qos_class(obj)}
        _admit_priority(obj.setdefault("spec", {}))
        _admit_default_toleration_seconds(obj["spec"], toleration_seconds)
    elif ident == ("", "Namespace"):
        spec = obj.setdefault("spec", {})
        if "kubernetes" not in spec.setdefault("finalizers", []):
            spec["finalizers"].append("kubernetes")
    elif ident == ("batch", "Job"):
        defaults.generate_job_selector(obj)
    elif ident == ("", "Service"):
        _allocate_cluster_ip(obj, ips)
    elif ident == ("", "Node"):
        _taint_not_ready(obj)
    elif ident == ("apps", "DaemonSet"):
        template_generation_on_create(obj)
    elif ident == ("", "PersistentVolume"):
        # The phase's first transition is the volume's creation (GA PersistentVolumeLastPhaseTransitionTime).
        obj["status"]["lastPhaseTransitionTime"] = obj["metadata"]["creationTimestamp"]
    if rt.model is None or ident in _WITH_GENERATION:
        obj["metadata"]["generation"] = 1


def _admit_priority(spec: Obj) -> None:
    """Upstream's Priority admission for a new pod: the priority of its class (0 without one:
    there is no global default PriorityClass here) and the default preemption policy. Other
    classes are not served, so a pod naming one keeps what it says (upstream refuses it unless
    the class exists)."""
    value = _SYSTEM_PRIORITIES.get(spec.get("priorityClassName") or "")
    if value is not None:
        spec.setdefault("priority", value)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")


def _admit_default_toleration_seconds(spec: Obj, seconds: TolerationSeconds) -> None:
    """Upstream's DefaultTolerationSeconds admission for a new pod: unless a toleration already
    covers it (its key, or none; effect NoExecute, or none), the pod tolerates the not-ready,
    then the unreachable NoExecute taint for the flag's seconds (300 by default), so the
    eviction of its node's pods waits five minutes for it."""
    tolerations = spec.get("tolerations")
    if tolerations is not None and not isinstance(tolerations, list):
        return  # validation refuses it
    held = [t for t in tolerations or [] if isinstance(t, dict)]
    for key, limit in ((NOT_READY_TAINT, seconds.not_ready), (UNREACHABLE_TAINT, seconds.unreachable)):
        if not any(
            t.get("key") in (key, "", None) and t.get("effect") in ("NoExecute", "", None) for t in held
        ):
            added = {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": limit}
            spec.setdefault("tolerations", []).append(added)


def _allocate_cluster_ip(svc: Obj, ips: ClusterIPAllocator) -> None:
    spec = svc.setdefault("spec", {})
    if spec.get("type") == "ExternalName":
        return
    ip = spec.get("clusterIP")
    if ip == "None":
        spec["clusterIPs"] = ["None"]
        return
    if ip:
        ips.mark_used(ip)
    else:
        ip = spec["clusterIP"] = ips.allocate()
    spec["clusterIPs"] = [ip]


def release(rt: ResourceType, obj: Obj, ips: ClusterIPAllocator) -> None:
    """Give back what a deleted object held."""
    if (rt.group, rt.kind) == ("", "Service"):
        ip = obj.get("spec", {}).get("clusterIP")
        if ip and ip != "None":
            ips.release(ip)


def prepare_for_update(rt: ResourceType, old: Obj, new: Obj, subresource: str) -> Obj:
    """The object to store: the main resource keeps the old status, `/status` the old spec;
    a Namespace's spec.finalizers change only through `/finalize`; a CSR's `/approval` write is
    whole already (`certificates.prepare_update`)."""
    if subresource == "approval":
        return new
    if subresource == "status":
        merged = copy.copy(old)
        merged["status"] = new.get("status", {})
        merged["metadata"] = _status_update_metadata(rt, old["metadata"], new.get("metadata", {}))
        if (rt.group, rt.kind) == ("", "PersistentVolume"):
            _stamp_phase_transition(old, merged)
        return merged
    if rt.has_status and "status" in old:
        new["status"] = old["status"]
    elif rt.has_status:
        new.pop("status", None)
    if (rt.group, rt.kind) == ("", "Namespace") and subresource != "finalize":
        # spec.finalizers change only through namespaces/finalize (upstream's namespace strategy).
        finalizers = (old.get("spec") or {}).get("finalizers")
        spec = new.setdefault("spec", {})
        if finalizers is None:
            spec.pop("finalizers", None)
        else:
            spec["finalizers"] = finalizers
    if (rt.group, rt.kind) == ("", "Service"):
        old_spec, new_spec = old.get("spec", {}), new.setdefault("spec", {})
        for field in ("clusterIP", "clusterIPs"):
            if field in old_spec and not new_spec.get(field):
                new_spec[field] = old_spec[field]
        _drop_node_ports(old, new)
    return new


def _stamp_phase_transition(old: Obj, new: Obj) -> None:
    """A PV whose phase changes gets `status.lastPhaseTransitionTime` now, unless the writer
    set a new time itself (upstream's persistentvolume status strategy)."""
    before, after = old.get("status") or {}, new.get("status")
    if not isinstance(after, dict) or before.get("phase") == after.get("phase"):
        return
    sent = after.get("lastPhaseTransitionTime")
    if sent is None or sent == before.get("lastPhaseTransitionTime"):
        after["lastPhaseTransitionTime"] = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _drop_node_ports(old: Obj, new: Obj) -> None:
    """Upstream's dropTypeDependentFields: a Service moving to a type without nodePorts loses
    the ones it kept unchanged from before (the allocator then releases them)."""
    if not nodeports.needs_node_ports(old) or nodeports.needs_node_ports(new):
        return
    before = nodeports.node_ports(old)
    ports = [p for p in new.get("spec", {}).get("ports") or [] if isinstance(p, dict)]
    if {p.get("nodePort") for p in ports if p.get("nodePort")} <= before:
        for port in ports:
            port.pop("nodePort", None)


def _status_update_metadata(rt: ResourceType, old: Obj, sent: Obj) -> Obj:
    """The metadata a status write stores: upstream's generic update takes the request's labels,
    annotations, finalizers and ownerReferences unless the kind's status strategy puts the old
    ones back (the deployment controller writes its revision annotation this way)."""
    if rt.model is None:
        # A custom resource's status strategy keeps the whole old object but its status.
        meta = dict(old)
        if "resourceVersion" in sent:
            meta["resourceVersion"] = sent["resourceVersion"]
        return meta
    meta = dict(sent)
    ident = (rt.group, rt.kind)
    kept = _RESET_FOR_STATUS if ident in _STATUS_RESETS_METADATA else _STATUS_KEEPS_OLD.get(ident, ())
    for key in (*kept, *_NEVER_FROM_STATUS):
        if key in old:
            meta[key] = old[key]
        else:
            meta.pop(key, None)
    return meta


# What each status strategy takes from the stored object rather than the request
# (pkg/registry/<group>/<kind>/strategy.go, the `*StatusStrategy` PrepareForUpdate methods).
_STATUS_KEEPS_OLD: dict[tuple[str, str], tuple[str, ...]] = {
    ("apps", "Deployment"): ("labels",),
    # Old kubelets corrupted owner references, which broke garbage collection.
    ("", "Pod"): ("ownerReferences",),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): ("labels", "annotations", "ownerReferences"),
}
# The built-in kinds whose upstream strategy starts metadata.generation at 1 (custom resources
# have one too); the others have none, a Pod, Service, Node, Namespace, claim or HPA included,
# and so nothing to bump. EndpointSlice has no status but a generation all the same: the
# endpointslice controllers compare it with the one they wrote (EndpointSliceTracker).
_WITH_GENERATION = {
    ("", "ReplicationController"),
    ("", "PodTemplate"),
    ("apps", "Deployment"),
    ("apps", "ReplicaSet"),
    ("apps", "StatefulSet"),
    ("apps", "DaemonSet"),
    ("batch", "Job"),
    ("batch", "CronJob"),
    ("policy", "PodDisruptionBudget"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("discovery.k8s.io", "EndpointSlice"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
}
# metav1.ResetObjectMetaForStatus, for the kinds whose status strategy calls it.
_RESET_FOR_STATUS = ("labels", "annotations", "finalizers", "ownerReferences")
_STATUS_RESETS_METADATA = {("storage.k8s.io", "VolumeAttachment")}
# Server-owned fields no status write sets (generation follows the old one in operations).
_NEVER_FROM_STATUS = ("generateName", "managedFields")


def spec_changed(old: Obj, new: Obj) -> bool:
    """Whether a write changed anything besides metadata and status (bumps generation)."""
    keys = (set(old) | set(new)) - {"metadata", "status", "apiVersion", "kind"}
    return any(old.get(k) != new.get(k) for k in keys)


def after_defaults_on_update(rt: ResourceType, old: Obj, new: Obj, subresource: str) -> None:
    """Generation and template generation of an updated object, once it is defaulted."""
    if (rt.group, rt.kind) == ("apps", "DaemonSet"):
        template_generation_on_update(old, new, subresource)
    if "generation" in old["metadata"]:
        bump = _generation_changed(rt, old, new, subresource)
        new["metadata"]["generation"] = old["metadata"]["generation"] + (1 if bump else 0)


def _generation_changed(rt: ResourceType, old: Obj, new: Obj, subresource: str) -> bool:
    """A spec change bumps metadata.generation, and for a Deployment an annotation change through
    the main resource too, since its annotations are copied to its ReplicaSets; an EndpointSlice's
    labels count as its spec (they name its Service and manager)."""
    if spec_changed(old, new):
        return True
    if (rt.group, rt.kind) == ("discovery.k8s.io", "EndpointSlice"):
        return bool((old["metadata"].get("labels") or {}) != (new["metadata"].get("labels") or {}))
    if (rt.group, rt.kind) == ("apps", "Deployment") and not subresource:
        return bool((old["metadata"].get("annotations") or {}) != (new["metadata"].get("annotations") or {}))
    return False


# Upstream pkg/api/job's soft limits: past both, completedIndexes may not keep up with failures.
_INDEXED_COMPLETIONS_SOFT_LIMIT = 100_000
_INDEXED_PARALLELISM_SOFT_LIMIT = 10_000
_JOB_KINDS = {"Job": "spec", "CronJob": "spec.jobTemplate.spec"}


def warnings_on_create(rt: ResourceType, obj: Obj) -> list[str]:
    """The Warning headers of a create (upstream WarningsOnCreate), for Jobs and CronJobs: a
    name that is not a DNS label (it names pods and hostnames), a huge Indexed job spec."""
    path = _JOB_KINDS.get(rt.kind) if rt.group == "batch" else None
    if path is None:
        return []
    warnings = []
    if msgs := selectors.is_dns1123_label(str(obj["metadata"].get("name") or "")):
        warnings.append(
            "metadata.name: this is used in Pod names and hostnames, which can result in surprising "
            f"behavior; a DNS label is recommended: [{' '.join(msgs)}]"
        )
    return warnings + _job_spec_warnings(path, obj)


def warnings_on_update(rt: ResourceType, old: Obj, new: Obj) -> list[str]:
    """The Warning headers of an update through the main resource (upstream WarningsOnUpdate):
    the job spec's when the generation moved; a CronJob keeping a TZ prefix in its schedule."""
    path = _JOB_KINDS.get(rt.kind) if rt.group == "batch" else None
    if path is None:
        return []
    warnings = []
    if new["metadata"].get("generation") != old["metadata"].get("generation"):
        warnings = _job_spec_warnings(path, new)
    if rt.kind == "CronJob" and "TZ" in str((new.get("spec") or {}).get("schedule") or ""):
        # Upstream's path reads spec.spec.schedule: its text, kept as it is.
        warnings.append(
            "cannot use TZ or CRON_TZ in spec.spec.schedule, use timeZone instead, see "
            "https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details"
        )
    return warnings


def _job_spec_warnings(path: str, obj: Obj) -> list[str]:
    """Upstream WarningsForJobSpec, less the pod template's warnings (not produced here)."""
    spec: Obj = obj.get("spec") or {}
    if path != "spec":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    if spec.get("completionMode") != "Indexed":
        return []
    completions, parallelism = spec.get("completions") or 0, spec.get("parallelism") or 0
    if completions > _INDEXED_COMPLETIONS_SOFT_LIMIT and parallelism > _INDEXED_PARALLELISM_SOFT_LIMIT:
        return [
            f"{path}: In Indexed Jobs with a number of completions higher than 10^5 and a parallelism "
            "higher than 10^4, Kubernetes might not be able to track completedIndexes when a big "
            "number of indexes fail"
        ]
    return []


DAEMONSET_TEMPLATE_GENERATION = "deprecated.daemonset.template.generation"


def template_generation_on_create(ds: Obj) -> None:
    """A new DaemonSet's template generation: the one the client sent if at least 1, else 1.

    Upstream keeps it in the internal spec and shows it in apps/v1 as this annotation; a value
    that is not an integer fails the conversion, so the request is refused.
    """
    annotations = ds["metadata"].setdefault("annotations", {})
    sent = annotations.get(DAEMONSET_TEMPLATE_GENERATION)
    value = 0
    if sent is not None:
        try:
            value = int(str(sent), 10)
        except ValueError:
            raise errors.bad_request(f'strconv.ParseInt: parsing "{sent}": invalid syntax') from None
    annotations[DAEMONSET_TEMPLATE_GENERATION] = str(max(value, 1))


def template_generation_on_update(old: Obj, new: Obj, subresource: str) -> None:
    """Keep the stored template generation whatever the request says; one more when the pod
    template changed through the main resource (upstream's daemonset strategy)."""
    current = (old["metadata"].get("annotations") or {}).get(DAEMONSET_TEMPLATE_GENERATION)
    try:
        value = int(str(current), 10)
    except ValueError:
        value = 1  # stored before the API server set it
    changed = not apitypes.semantic_equal(
        apitypes.POD_TEMPLATE_SPEC,
        (old.get("spec") or {}).get("template"),
        (new.get("spec") or {}).get("template"),
    )
    if not subresource and changed:
        value += 1
    new["metadata"].setdefault("annotations", {})[DAEMONSET_TEMPLATE_GENERATION] = str(value)


def _taint_not_ready(node: Obj) -> None:
    """TaintNodesByCondition admission: a new Node is NoSchedule until it is found Ready, so no
    pod lands on it in between; the node lifecycle controller removes the taint."""
    spec = node.setdefault("spec", {})
    taints = spec.get("taints") or []
    if not any(t.get("key") == NOT_READY_TAINT and t.get("effect") == "NoSchedule" for t in taints):
        spec["taints"] = [*taints, {"key": NOT_READY_TAINT, "effect": "NoSchedule"}]


def graceful_seconds(rt: ResourceType, obj: Obj, requested: int | None) -> int:
    """How long a delete waits before the object goes; 0 removes it at once.

    Only pods delete gracefully: a pod on a node waits for its kubelet to stop it, while
    an unscheduled or finished pod has nothing to wait for.
    """
    if (rt.group, rt.kind) != ("", "Pod"):
        return 0
    spec, status = obj.get("spec", {}), obj.get("status", {})
    if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
        return 0
    if requested is not None:
        return max(requested, 0)
    return int(spec.get("terminationGracePeriodSeconds", 30))


# Upstream defaults Jobs in batch/v1 to orphan their pods when a client names no policy.
_DEFAULT_ORPHAN = {("batch", "Job")}


def default_propagation(rt: ResourceType) -> str:
    return "Orphan" if (rt.group, rt.kind) in _DEFAULT_ORPHAN else "Background"
