"""Default values for built-in objects, as kube-apiserver fills them in before validation.

`operations` calls `apply_defaults` on every create and update of the main resource, with
the object already converted to its stored version; `strategies` calls
`generate_job_selector` when a Job is created. Values follow upstream's
pkg/apis/<group>/<version>/defaults.go together with the generated
zz_generated.defaults.go, which walks into nested pod templates, containers, probes and
volumes. Only fields are filled that upstream would fill: a field the client set, even to
a zero value upstream treats as "set", is left alone.

Deliberately not here: Service clusterIP allocation and Pod status (phase, qosClass) are
stateful or create-only and live in `strategies`.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Callable, Iterable
from typing import Any

Obj = dict[str, Any]

DEFAULT_SCHEDULER = "default-scheduler"
TERMINATION_MESSAGE_PATH = "/dev/termination-log"
VOLUME_DEFAULT_MODE = 0o644  # 420: configMap, secret, downwardAPI and projected volumes
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
CONTROLLER_UID_LABELS = (CONTROLLER_UID_LABEL, "controller-uid")
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def _default(obj: Obj, key: str, value: Any) -> None:
    """Set `key` unless the client gave it; None and "" count as not given (Go nil / zero string)."""
    if obj.get(key) in (None, ""):
        obj[key] = value


def _default_nonzero(obj: Obj, key: str, value: int) -> None:
    """For Go non-pointer integers, where 0 is indistinguishable from "not given"."""
    if not obj.get(key):
        obj[key] = value


def _child(obj: Obj, key: str) -> Obj:
    """The nested object at `key`, created empty when missing (Go non-pointer struct fields)."""
    value = obj.get(key)
    if not isinstance(value, dict):
        value = obj[key] = {}
    return value


def _dicts(value: Any) -> Iterable[Obj]:
    """The objects of a JSON list, skipping anything malformed (validation reports that)."""
    return (item for item in value if isinstance(item, dict)) if isinstance(value, list) else ()


# --- images ------------------------------------------------------------------------------


def image_tag(image: str) -> str:
    """The tag of an image reference as upstream's parsers.ParseImageName reports it.

    No tag and no digest means "latest"; a digest without a tag means no tag at all, and
    so does an empty reference (upstream fails to parse it and reads no tag).
    """
    if not image:
        return ""
    if "@" in image:
        image = image.split("@", 1)[0]
        last = image.rsplit("/", 1)[-1]
        return last.split(":", 1)[1] if ":" in last else ""
    last = image.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else "latest"


def _pull_policy(image: str) -> str:
    return "Always" if image_tag(image) == "latest" else "IfNotPresent"


# --- pod spec pieces -----------------------------------------------------------------------


def _probe(probe: Obj) -> None:
    _default_nonzero(probe, "timeoutSeconds", 1)
    _default_nonzero(probe, "periodSeconds", 10)
    _default_nonzero(probe, "successThreshold", 1)
    _default_nonzero(probe, "failureThreshold", 3)
    _handler(probe)


def _handler(handler: Obj) -> None:
    """Probe and lifecycle handlers share HTTPGetAction defaults."""
    http = handler.get("httpGet")
    if isinstance(http, dict):
        _default(http, "path", "/")
        _default(http, "scheme", "HTTP")


def _field_ref(holder: Obj) -> None:
    ref = holder.get("fieldRef")
    if isinstance(ref, dict):
        _default(ref, "apiVersion", "v1")


def _container(container: Obj) -> None:
    _default(container, "imagePullPolicy", _pull_policy(str(container.get("image") or "")))
    _default(container, "terminationMessagePath", TERMINATION_MESSAGE_PATH)
    _default(container, "terminationMessagePolicy", "File")
    for port in _dicts(container.get("ports")):
        _default(port, "protocol", "TCP")
    for env in _dicts(container.get("env")):
        if isinstance(env.get("valueFrom"), dict):
            _field_ref(env["valueFrom"])
    for name in ("livenessProbe", "readinessProbe", "startupProbe"):
        if isinstance(container.get(name), dict):
            _probe(container[name])
    lifecycle = container.get("lifecycle")
    if isinstance(lifecycle, dict):
        for name in ("postStart", "preStop"):
            if isinstance(lifecycle.get(name), dict):
                _handler(lifecycle[name])


# Volume keys that are not a volume source; a volume with nothing else becomes an emptyDir.
_VOLUME_META_KEYS = {"name"}
_MODE_SOURCES = ("configMap", "secret", "downwardAPI", "projected")


def _volume(volume: Obj) -> None:
    if not set(volume) - _VOLUME_META_KEYS:
        volume["emptyDir"] = {}
    for source in _MODE_SOURCES:
        if isinstance(volume.get(source), dict):
            _default(volume[source], "defaultMode", VOLUME_DEFAULT_MODE)
    if isinstance(volume.get("hostPath"), dict):
        _default(volume["hostPath"], "type", "")
    for item in _dicts((volume.get("downwardAPI") or {}).get("items")):
        _field_ref(item)
    for projection in _dicts((volume.get("projected") or {}).get("sources")):
        token = projection.get("serviceAccountToken")
        if isinstance(token, dict):
            _default(token, "expirationSeconds", 3600)
        for item in _dicts((projection.get("downwardAPI") or {}).get("items")):
            _field_ref(item)
    # Generic ephemeral volumes carry a claim template whose spec is defaulted like a claim's.
    ephemeral = volume.get("ephemeral")
    if isinstance(ephemeral, dict) and isinstance(ephemeral.get("volumeClaimTemplate"), dict):
        _pvc_spec(_child(ephemeral["volumeClaimTemplate"], "spec"))


def _all_containers(spec: Obj) -> Iterable[Obj]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from _dicts(spec.get(key))


def _pod_spec(spec: Obj) -> None:
    """Defaults of every PodSpec, in Pods and in templates alike (upstream SetDefaults_PodSpec)."""
    _default(spec, "dnsPolicy", "ClusterFirst")
    _default(spec, "restartPolicy", "Always")
    _default(spec, "securityContext", {})
    _default(spec, "terminationGracePeriodSeconds", 30)
    _default(spec, "schedulerName", DEFAULT_SCHEDULER)
    for container in _all_containers(spec):
        _container(container)
    for volume in _dicts(spec.get("volumes")):
        _volume(volume)


def _pod_template(template: Obj) -> None:
    _pod_spec(_child(template, "spec"))


def _pod(pod: Obj) -> None:
    """Pod-only defaults on top of the PodSpec ones (upstream SetDefaults_Pod)."""
    spec = _child(pod, "spec")
    _pod_spec(spec)
    for container in (*_dicts(spec.get("containers")), *_dicts(spec.get("initContainers"))):
        resources = container.get("resources")
        if isinstance(resources, dict) and isinstance(resources.get("limits"), dict):
            requests = _child(resources, "requests")
            for name, quantity in resources["limits"].items():
                requests.setdefault(name, quantity)
    _default(spec, "enableServiceLinks", True)
    if spec.get("hostNetwork"):
        for container in (*_dicts(spec.get("containers")), *_dicts(spec.get("initContainers"))):
            for port in _dicts(container.get("ports")):
                _default_nonzero(port, "hostPort", port.get("containerPort", 0))


# --- workloads -------------------------------------------------------------------------------


def _replication_controller(rc: Obj) -> None:
    spec = _child(rc, "spec")
    template = spec.get("template")
    if isinstance(template, dict):
        labels = (template.get("metadata") or {}).get("labels")
        if labels is not None:
            if not spec.get("selector"):
                spec["selector"] = dict(labels)
            meta = _child(rc, "metadata")
            if not meta.get("labels"):
                meta["labels"] = dict(labels)
        _pod_template(template)
    _default(spec, "replicas", 1)


def _pod_template_object(obj: Obj) -> None:
    """PodTemplate objects keep their template at the top level, not under spec."""
    _pod_template(_child(obj, "template"))


def _deployment(deploy: Obj) -> None:
    spec = _child(deploy, "spec")
    _default(spec, "replicas", 1)
    strategy = _child(spec, "strategy")
    _default(strategy, "type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = _child(strategy, "rollingUpdate")
        _default(rolling, "maxUnavailable", "25%")
        _default(rolling, "maxSurge", "25%")
    _default(spec, "revisionHistoryLimit", 10)
    _default(spec, "progressDeadlineSeconds", 600)
    _pod_template(_child(spec, "template"))


def _replica_set(rs: Obj) -> None:
    spec = _child(rs, "spec")
    _default(spec, "replicas", 1)
    _pod_template(_child(spec, "template"))


def _stateful_set(sts: Obj) -> None:
    spec = _child(sts, "spec")
    _default(spec, "podManagementPolicy", "OrderedReady")
    strategy = _child(spec, "updateStrategy")
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
        _child(strategy, "rollingUpdate")
    rolling = strategy.get("rollingUpdate")
    if strategy["type"] == "RollingUpdate" and isinstance(rolling, dict):
        _default(rolling, "partition", 0)
    retention = _child(spec, "persistentVolumeClaimRetentionPolicy")
    _default(retention, "whenDeleted", "Retain")
    _default(retention, "whenScaled", "Retain")
    _default(spec, "replicas", 1)
    _default(spec, "revisionHistoryLimit", 10)
    _pod_template(_child(spec, "template"))
    for claim in _dicts(spec.get("volumeClaimTemplates")):
        _pvc_spec(_child(claim, "spec"))


def _daemon_set(ds: Obj) -> None:
    spec = _child(ds, "spec")
    strategy = _child(spec, "updateStrategy")
    _default(strategy, "type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = _child(strategy, "rollingUpdate")
        _default(rolling, "maxUnavailable", 1)
        _default(rolling, "maxSurge", 0)
    _default(spec, "revisionHistoryLimit", 10)
    _pod_template(_child(spec, "template"))


def _job(job: Obj) -> None:
    spec = _child(job, "spec")
    # A job with neither set is a single-pod job; one that sets only completions runs one at a time.
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    _default(spec, "parallelism", 1)
    # With per-index limits the global limit must not cut indexes short, so it becomes "unlimited".
    _default(spec, "backoffLimit", 2**31 - 1 if spec.get("backoffLimitPerIndex") is not None else 6)
    template = _child(spec, "template")
    _job_labels(job)
    _default(spec, "completionMode", "NonIndexed")
    _default(spec, "suspend", False)
    failure_policy = spec.get("podFailurePolicy")
    if isinstance(failure_policy, dict):
        for rule in _dicts(failure_policy.get("rules")):
            for pattern in _dicts(rule.get("onPodConditions")):
                _default(pattern, "status", "True")
    _default(spec, "podReplacementPolicy", "Failed" if failure_policy else "TerminatingOrFailed")
    _default(spec, "manualSelector", False)
    _pod_template(template)


def _job_labels(job: Obj) -> None:
    """A Job without labels of its own takes its pod template's."""
    template: Obj = (job.get("spec") or {}).get("template") or {}
    labels = (template.get("metadata") or {}).get("labels")
    meta = _child(job, "metadata")
    if labels is not None and not meta.get("labels"):
        meta["labels"] = dict(labels)


def _cron_job(cj: Obj) -> None:
    spec = _child(cj, "spec")
    _default(spec, "concurrencyPolicy", "Allow")
    _default(spec, "suspend", False)
    _default(spec, "successfulJobsHistoryLimit", 3)
    _default(spec, "failedJobsHistoryLimit", 1)
    # Only the pod template inside the job template is defaulted; Job-level defaults come
    # when the CronJob controller creates the Job.
    _pod_template(_child(_child(_child(spec, "jobTemplate"), "spec"), "template"))


def generate_job_selector(job: Obj) -> None:
    """Give a Job the selector and pod labels that tie its pods to it alone (create only).

    Runs unless `spec.manualSelector` is true and needs `metadata.uid`. Labels the user
    already set are kept: a conflicting value is left for validation to reject.
    """
    spec = _child(job, "spec")
    if spec.get("manualSelector") is True:
        return
    meta = job.get("metadata") or {}
    name, uid = str(meta.get("name", "")), str(meta.get("uid", ""))
    labels = _child(_child(_child(spec, "template"), "metadata"), "labels")
    for key in JOB_NAME_LABELS:
        labels.setdefault(key, name)
    for key in CONTROLLER_UID_LABELS:
        labels.setdefault(key, uid)
    match_labels = _child(_child(spec, "selector"), "matchLabels")
    match_labels.setdefault(CONTROLLER_UID_LABEL, uid)
    # kube-apiserver defaults on every decode, so the labels generated here reach the Job's
    # own when it has none (`kubectl get jobs -l job-name=pi` finds it).
    _job_labels(job)


# --- services and networking -------------------------------------------------------------------


def _service(svc: Obj) -> None:
    spec = _child(svc, "spec")
    _default(spec, "sessionAffinity", "None")
    if spec["sessionAffinity"] == "None":
        spec.pop("sessionAffinityConfig", None)
    elif spec["sessionAffinity"] == "ClientIP":
        client_ip = _child(_child(spec, "sessionAffinityConfig"), "clientIP")
        _default(client_ip, "timeoutSeconds", 10800)
    _default(spec, "type", "ClusterIP")
    svc_type = spec["type"]
    for port in _dicts(spec.get("ports")):
        _default(port, "protocol", "TCP")
        if port.get("targetPort") in (None, 0, ""):
            port["targetPort"] = port.get("port")
    externally_accessible = svc_type in ("NodePort", "LoadBalancer") or (
        svc_type == "ClusterIP" and bool(spec.get("externalIPs"))
    )
    if externally_accessible:
        _default(spec, "externalTrafficPolicy", "Cluster")
    if svc_type in ("ClusterIP", "NodePort", "LoadBalancer"):
        _default(spec, "internalTrafficPolicy", "Cluster")
        # Upstream's service registry picks these from the cluster's families; this server
        # is single-stack IPv4.
        _default(spec, "ipFamilyPolicy", "SingleStack")
        if not spec.get("ipFamilies"):
            spec["ipFamilies"] = ["IPv4"]
    if svc_type == "LoadBalancer":
        _default(spec, "allocateLoadBalancerNodePorts", True)
        for ingress in _dicts(((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress")):
            if ingress.get("ip"):
                _default(ingress, "ipMode", "VIP")


def _endpoints(ep: Obj) -> None:
    for subset in _dicts(ep.get("subsets")):
        for port in _dicts(subset.get("ports")):
            _default(port, "protocol", "TCP")


def _endpoint_slice(slice_: Obj) -> None:
    for port in _dicts(slice_.get("ports")):
        if port.get("name") is None:
            port["name"] = ""
        _default(port, "protocol", "TCP")


# --- cluster and storage objects -----------------------------------------------------------------


def _namespace(ns: Obj) -> None:
    meta = _child(ns, "metadata")
    if meta.get("name"):
        _child(meta, "labels")[NAMESPACE_NAME_LABEL] = meta["name"]
    _default(_child(ns, "status"), "phase", "Active")


def _node(node: Obj) -> None:
    # Upstream's v1 conversion: spec.podCIDRs is what is stored (podCIDR alone fills it), and
    # podCIDR always reads as its first item.
    spec = node.get("spec")
    if isinstance(spec, dict):
        cidrs = spec.get("podCIDRs")
        if not cidrs and spec.get("podCIDR"):
            spec["podCIDRs"] = [spec["podCIDR"]]
        elif isinstance(cidrs, list) and cidrs:
            spec["podCIDR"] = cidrs[0]
    status = node.get("status")
    if isinstance(status, dict) and status.get("allocatable") is None and status.get("capacity") is not None:
        status["allocatable"] = dict(status["capacity"])


def _secret(secret: Obj) -> None:
    _default(secret, "type", "Opaque")
    # Write-only, as upstream's v1 conversion: merged into `data` (base64, winning over a key
    # `data` has too) and never stored.
    string_data = secret.pop("stringData", None)
    if isinstance(string_data, dict) and string_data:
        data = secret.get("data") or {}
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        secret["data"] = data


def _pvc_spec(spec: Obj) -> None:
    _default(spec, "volumeMode", "Filesystem")


def _persistent_volume_claim(pvc: Obj) -> None:
    _pvc_spec(_child(pvc, "spec"))
    _default(_child(pvc, "status"), "phase", "Pending")


def _persistent_volume(pv: Obj) -> None:
    spec = _child(pv, "spec")
    _default(spec, "persistentVolumeReclaimPolicy", "Retain")
    _default(spec, "volumeMode", "Filesystem")
    if isinstance(spec.get("hostPath"), dict):
        _default(spec["hostPath"], "type", "")
    _default(_child(pv, "status"), "phase", "Pending")


def _limit_range(lr: Obj) -> None:
    """A Container item's default limit is its max, and its default request the default limit,
    else its min, resource by resource (upstream's SetDefaults_LimitRangeItem)."""
    for item in _dicts(_child(lr, "spec").get("limits")):
        if item.get("type") != "Container":
            continue
        default = dict(item.get("default") or {})
        for key, value in (item.get("max") or {}).items():
            default.setdefault(key, value)
        request = dict(item.get("defaultRequest") or {})
        for source in (default, item.get("min") or {}):
            for key, value in source.items():
                request.setdefault(key, value)
        for key, value in (("default", default), ("defaultRequest", request)):
            if value:
                item[key] = value


def _storage_class(sc: Obj) -> None:
    _default(sc, "reclaimPolicy", "Delete")
    _default(sc, "volumeBindingMode", "Immediate")


def _csi_node(node: Obj) -> None:
    # CSINodeDriver.topologyKeys has no omitempty: kube-apiserver prints an absent one as null.
    for driver in _dicts(_child(node, "spec").get("drivers")):
        driver.setdefault("topologyKeys", None)


def _horizontal_pod_autoscaler(hpa: Obj) -> None:
    spec = _child(hpa, "spec")
    _default(spec, "minReplicas", 1)
    if not spec.get("metrics"):
        target = {"type": "Utilization", "averageUtilization": 80}
        spec["metrics"] = [{"type": "Resource", "resource": {"name": "cpu", "target": target}}]
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        # Upstream fills every unset rule field once a behavior is given at all; scale-down keeps
        # no stabilization window, so the controller's --horizontal-pod-autoscaler-downscale-
        # stabilization flag still decides it.
        behavior["scaleUp"] = _scaling_rules(behavior.get("scaleUp"), _HPA_SCALE_UP)
        behavior["scaleDown"] = _scaling_rules(behavior.get("scaleDown"), _HPA_SCALE_DOWN)


# autoscaling/v2's default HPAScalingRules: the scaling speeds the HPA had before behavior existed.
_HPA_SCALE_UP: Obj = {
    "stabilizationWindowSeconds": 0,
    "selectPolicy": "Max",
    "policies": [
        {"type": "Pods", "value": 4, "periodSeconds": 15},
        {"type": "Percent", "value": 100, "periodSeconds": 15},
    ],
}
_HPA_SCALE_DOWN: Obj = {
    "selectPolicy": "Max",
    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
}


def _scaling_rules(given: Any, default: Obj) -> Obj:
    rules = copy.deepcopy(default)
    if isinstance(given, dict):
        rules.update({k: v for k, v in given.items() if v is not None})
    return rules


RBAC_GROUP = "rbac.authorization.k8s.io"


def _role_binding(binding: Obj) -> None:
    _default(_child(binding, "roleRef"), "apiGroup", RBAC_GROUP)
    for subject in _dicts(binding.get("subjects")):
        if subject.get("kind") in ("User", "Group"):
            _default(subject, "apiGroup", RBAC_GROUP)
        elif subject.get("kind") == "ServiceAccount" and subject.get("apiGroup") is None:
            subject["apiGroup"] = ""


_DEFAULTERS: dict[tuple[str, str], Callable[[Obj], None]] = {
    ("", "Pod"): _pod,
    ("", "PodTemplate"): _pod_template_object,
    ("", "ReplicationController"): _replication_controller,
    ("", "Service"): _service,
    ("", "Endpoints"): _endpoints,
    ("", "Namespace"): _namespace,
    ("", "Node"): _node,
    ("", "Secret"): _secret,
    ("", "PersistentVolume"): _persistent_volume,
    ("", "PersistentVolumeClaim"): _persistent_volume_claim,
    ("", "LimitRange"): _limit_range,
    ("apps", "Deployment"): _deployment,
    ("apps", "ReplicaSet"): _replica_set,
    ("apps", "StatefulSet"): _stateful_set,
    ("apps", "DaemonSet"): _daemon_set,
    ("batch", "Job"): _job,
    ("batch", "CronJob"): _cron_job,
    ("discovery.k8s.io", "EndpointSlice"): _endpoint_slice,
    ("autoscaling", "HorizontalPodAutoscaler"): _horizontal_pod_autoscaler,
    ("storage.k8s.io", "StorageClass"): _storage_class,
    ("storage.k8s.io", "CSINode"): _csi_node,
    (RBAC_GROUP, "RoleBinding"): _role_binding,
    (RBAC_GROUP, "ClusterRoleBinding"): _role_binding,
}


def apply_defaults(group: str, kind: str, obj: Obj) -> None:
    """Fill in upstream's defaults for a built-in kind, in place; other kinds are left as sent."""
    defaulter = _DEFAULTERS.get((group, kind))
    if defaulter is not None:
        defaulter(obj)
