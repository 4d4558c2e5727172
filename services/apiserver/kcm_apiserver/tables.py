"""Server-side Table responses (meta.k8s.io/v1 Table), so `kubectl get` prints upstream's columns.

The request handlers call `to_table` when a client asks for `Accept: application/json;as=Table;...`
on a get or list, and `table_for_watch_event` for each object of a watch asked for that way.

Three kinds of convertor, as upstream:

* built-in kinds with a printer (pkg/printers/internalversion): their columns and cells. Like the
  upstream server, rows always carry the wide (priority 1) cells; kubectl hides them unless `-o wide`.
* custom resources (`crd_columns` given, possibly empty): NAME plus the version's
  additionalPrinterColumns evaluated as simple JSONPath, or NAME + AGE when it has none.
* anything else (Role, ClusterRole, LimitRange, CustomResourceDefinition...): NAME + CREATED AT.

kubectl asks without `includeObject` (meaning Metadata: it reads the namespace from it for `-A`) and
with `includeObject=Object` when sorting (`--sort-by`), so all three values are served.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from kcm_apiserver.conversion import events_v1_to_core_event, hpa_v1_to_v2

JSON = dict[str, Any]
Cells = list[Any]
_Printer = Callable[[JSON, datetime], Cells]

TABLE_API_VERSION = "meta.k8s.io/v1"
INCLUDE_OBJECT_VALUES = ("None", "Metadata", "Object")

# --- human durations (apimachinery util/duration) ------------------------------------------------

_NS = 1_000_000_000


def human_duration(seconds: float) -> str:
    """A duration shown with 2-3 significant figures, exactly like upstream's duration.HumanDuration."""
    ns = round(seconds * _NS)
    whole_seconds = -((-ns) // _NS) if ns < 0 else ns // _NS
    # A couple of seconds of clock skew into the future still reads as "now".
    if whole_seconds < -1:
        return "<invalid>"
    if whole_seconds < 0:
        return "0s"
    if whole_seconds < 60 * 2:
        return f"{whole_seconds}s"
    minutes = ns // (60 * _NS)
    if minutes < 10:
        secs = whole_seconds % 60
        return f"{minutes}m" if secs == 0 else f"{minutes}m{secs}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = ns // (3600 * _NS)
    if hours < 8:
        mins = minutes % 60
        return f"{hours}h" if mins == 0 else f"{hours}h{mins}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


# --- small shared formatters ---------------------------------------------------------------------


def _parse_time(value: Any) -> datetime | None:
    """A metav1.Time / MicroTime; None for absent, unreadable or Go's zero time."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return None if parsed.year == 1 and parsed.month == 1 and parsed.day == 1 else parsed


def _since(value: Any, now: datetime) -> str:
    when = _parse_time(value)
    return "<unknown>" if when is None else human_duration((now - when).total_seconds())


def _age(obj: JSON, now: datetime) -> str:
    return _since(_meta(obj).get("creationTimestamp"), now)


def _meta(obj: JSON) -> JSON:
    return obj.get("metadata") or {}


def _spec(obj: JSON) -> JSON:
    return obj.get("spec") or {}


def _status(obj: JSON) -> JSON:
    return obj.get("status") or {}


def _name(obj: JSON) -> str:
    return str(_meta(obj).get("name", ""))


def _format_labels(labels: Any) -> str:
    if not labels:
        return "<none>"
    return ",".join(f"{key}={labels[key]}" for key in sorted(labels))


def _selector_string(selector: JSON | None) -> str:
    """metav1.LabelSelectorAsSelector(...).String(); raises ValueError for an invalid operator."""
    if selector is None:
        return ""
    requirements: list[tuple[str, str]] = [
        (key, f"{key}={value}") for key, value in (selector.get("matchLabels") or {}).items()
    ]
    for expr in selector.get("matchExpressions") or []:
        key, operator = expr.get("key", ""), expr.get("operator")
        values = ",".join(sorted(expr.get("values") or []))
        if operator == "In":
            requirements.append((key, f"{key} in ({values})"))
        elif operator == "NotIn":
            requirements.append((key, f"{key} notin ({values})"))
        elif operator == "Exists":
            requirements.append((key, key))
        elif operator == "DoesNotExist":
            requirements.append((key, f"!{key}"))
        else:
            raise ValueError(f"{operator!r} is not a valid label selector operator")
    return ",".join(text for _, text in sorted(requirements, key=lambda req: req[0]))


def _format_label_selector(selector: JSON | None) -> str:
    """metav1.FormatLabelSelector: "<none>" for an empty selector, "<error>" for an invalid one."""
    try:
        text = _selector_string(selector)
    except ValueError:
        return "<error>"
    return text or "<none>"


def _container_cells(pod_spec: JSON) -> tuple[str, str]:
    containers = pod_spec.get("containers") or []
    return ",".join(c.get("name", "") for c in containers), ",".join(c.get("image", "") for c in containers)


def _template_spec(obj: JSON) -> JSON:
    return (_spec(obj).get("template") or {}).get("spec") or {}


def _list_with_more(items: list[str], count: int, limit: int, empty: str) -> str:
    text = ",".join(items[:limit])
    if count > limit:
        return f"{text} + {count - limit} more..."
    return text or empty


def _quantity(value: Any) -> str:
    # A nil *resource.Quantity prints as "<nil>" upstream.
    return "<nil>" if value is None else str(value)


def _bool_ptr(value: Any) -> str:
    if value is None:
        return "<unset>"
    return "True" if value else "False"


def _condition_true(conditions: list[JSON] | None, kind: str) -> bool:
    """Whether the first condition of `kind` is True (upstream looks no further than the first)."""
    for condition in conditions or []:
        if condition.get("type") == kind:
            return bool(condition.get("status") == "True")
    return False


def _join_host_port(host: str, port: Any) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# --- column definitions ----------------------------------------------------------------------------

_NAME_DOC = (
    "Name must be unique within a namespace. Is required when creating resources, although some resources "
    "may allow a client to request the generation of an appropriate name automatically. Name is primarily "
    "intended for creation idempotence and configuration definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
_CREATED_DOC = (
    "CreationTimestamp is a timestamp representing the server time when this object was created. It is not "
    "guaranteed to be set in happens-before order across separate operations. Clients may not set this "
    "value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for "
    "lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)
_CONTAINERS_DOC = "Names of each container in the template."
_IMAGES_DOC = "Images referenced by each container in the template."


def _col(name: str, kind: str = "string", doc: str = "", *, priority: int = 0, fmt: str = "") -> JSON:
    return {"name": name, "type": kind, "format": fmt, "description": doc or name, "priority": priority}


def _name_col(priority: int = 0) -> JSON:
    return _col("Name", doc=_NAME_DOC, fmt="name", priority=priority)


def _age_col() -> JSON:
    return _col("Age", doc=_CREATED_DOC)


def _wide_template_cols(selector_doc: str | None = "A label query over the pods.") -> list[JSON]:
    cols = [_col("Containers", doc=_CONTAINERS_DOC, priority=1), _col("Images", doc=_IMAGES_DOC, priority=1)]
    if selector_doc is not None:
        cols.append(_col("Selector", doc=selector_doc, priority=1))
    return cols


# --- core/v1 printers ------------------------------------------------------------------------------


def _later(current: datetime | None, candidate: Any) -> datetime | None:
    when = _parse_time(candidate)
    if when is not None and (current is None or current < when):
        return when
    return current


def _last_finished(container_status: JSON) -> Any:
    terminated = (container_status.get("lastState") or {}).get("terminated")
    return terminated.get("finishedAt") if isinstance(terminated, dict) else None


def _restartable(container: JSON | None) -> bool:
    # A sidecar: an init container that keeps running alongside the app containers.
    return container is not None and container.get("restartPolicy") == "Always"


def _terminated_reason(terminated: JSON, prefix: str) -> str:
    if terminated.get("reason"):
        return f"{prefix}{terminated['reason']}"
    if terminated.get("signal"):
        return f"{prefix}Signal:{terminated['signal']}"
    return f"{prefix}ExitCode:{terminated.get('exitCode', 0)}"


def _pod_cells(pod: JSON, now: datetime) -> Cells:
    spec, status = _spec(pod), _status(pod)
    conditions: list[JSON] = status.get("conditions") or []
    init_specs: list[JSON] = spec.get("initContainers") or []
    init_by_name = {c.get("name"): c for c in init_specs}
    total = len(spec.get("containers") or []) + sum(1 for c in init_specs if _restartable(c))
    ready = 0
    restarts = restartable_restarts = 0
    last_restart: datetime | None = None
    last_restartable_restart: datetime | None = None

    phase = status.get("phase", "")
    reason = status.get("reason") or phase
    for condition in conditions:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"

    initializing = False
    for index, cs in enumerate(status.get("initContainerStatuses") or []):
        restarts += cs.get("restartCount", 0)
        last_restart = _later(last_restart, _last_finished(cs))
        sidecar = _restartable(init_by_name.get(cs.get("name")))
        if sidecar:
            restartable_restarts += cs.get("restartCount", 0)
            last_restartable_restart = _later(last_restartable_restart, _last_finished(cs))
        state = cs.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if isinstance(terminated, dict) and terminated.get("exitCode", 0) == 0:
            continue
        if sidecar and cs.get("started") is True:
            ready += 1 if cs.get("ready") else 0
            continue
        if isinstance(terminated, dict):
            reason = _terminated_reason(terminated, "Init:")
        elif isinstance(waiting, dict) and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = f"Init:{waiting['reason']}"
        else:
            reason = f"Init:{index}/{len(init_specs)}"
        initializing = True
        break

    if not initializing or _condition_true(conditions, "Initialized"):
        restarts, last_restart = restartable_restarts, last_restartable_restart
        has_running = False
        for cs in reversed(status.get("containerStatuses") or []):
            restarts += cs.get("restartCount", 0)
            last_restart = _later(last_restart, _last_finished(cs))
            state = cs.get("state") or {}
            terminated, waiting = state.get("terminated"), state.get("waiting")
            if isinstance(waiting, dict) and waiting.get("reason"):
                reason = waiting["reason"]
            elif isinstance(terminated, dict):
                reason = _terminated_reason(terminated, "")
            elif cs.get("ready") and isinstance(state.get("running"), dict):
                has_running = True
                ready += 1
        # A container that completed while another still runs: the pod as a whole is still running.
        if reason == "Completed" and has_running:
            reason = "Running" if _condition_true(conditions, "Ready") else "NotReady"

    if _meta(pod).get("deletionTimestamp"):
        if status.get("reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"

    restarts_text = str(restarts)
    if restarts and last_restart is not None:
        restarts_text = f"{restarts} ({human_duration((now - last_restart).total_seconds())} ago)"

    pod_ips = status.get("podIPs") or []
    pod_ip = (pod_ips[0].get("ip") if pod_ips else status.get("podIP")) or "<none>"
    gates = spec.get("readinessGates") or []
    gates_text = "<none>"
    if gates:
        by_type: dict[str, JSON] = {}
        for condition in conditions:
            by_type.setdefault(condition.get("type", ""), condition)
        passed = sum(1 for g in gates if by_type.get(g.get("conditionType", ""), {}).get("status") == "True")
        gates_text = f"{passed}/{len(gates)}"
    return [
        _name(pod),
        f"{ready}/{total}",
        reason,
        restarts_text,
        _age(pod, now),
        pod_ip,
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        gates_text,
    ]


def _pod_row_conditions(pod: JSON) -> list[JSON] | None:
    phase = _status(pod).get("phase")
    if phase == "Succeeded":
        message = "The pod has completed successfully."
    elif phase == "Failed":
        message = "The pod failed."
    else:
        return None
    return [{"type": "Completed", "status": "True", "reason": phase, "message": message}]


def _pod_template_cells(obj: JSON, now: datetime) -> Cells:
    template = obj.get("template") or {}
    names, images = _container_cells(template.get("spec") or {})
    return [_name(obj), names, images, _format_labels((template.get("metadata") or {}).get("labels"))]


def _namespace_cells(obj: JSON, now: datetime) -> Cells:
    return [_name(obj), _status(obj).get("phase", ""), _age(obj, now)]


_NODE_ROLE_PREFIX = "node-role.kubernetes.io/"


def _node_cells(node: JSON, now: datetime) -> Cells:
    status = _status(node)
    by_type = {c.get("type"): c for c in status.get("conditions") or []}
    states = []
    if "Ready" in by_type:
        states.append("Ready" if by_type["Ready"].get("status") == "True" else "NotReady")
    if not states:
        states.append("Unknown")
    if _spec(node).get("unschedulable"):
        states.append("SchedulingDisabled")
    roles: set[str] = set()
    for key, value in (_meta(node).get("labels") or {}).items():
        if key.startswith(_NODE_ROLE_PREFIX) and key[len(_NODE_ROLE_PREFIX) :]:
            roles.add(key[len(_NODE_ROLE_PREFIX) :])
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    info = status.get("nodeInfo") or {}

    def address(kind: str) -> str:
        found = (a.get("address", "") for a in status.get("addresses") or [] if a.get("type") == kind)
        return next(found, "<none>")

    return [
        _name(node),
        ",".join(states),
        ",".join(sorted(roles)) or "<none>",
        _age(node, now),
        info.get("kubeletVersion", ""),
        address("InternalIP"),
        address("ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def _service_external_ip(spec: JSON, status: JSON) -> str:
    external = spec.get("externalIPs") or []
    kind = spec.get("type") or "ClusterIP"
    if kind in ("ClusterIP", "NodePort"):
        return ",".join(external) or "<none>"
    if kind == "LoadBalancer":
        ingress = (status.get("loadBalancer") or {}).get("ingress") or []
        lb_ips = sorted(
            {i.get("ip") or i.get("hostname") for i in ingress if i.get("ip") or i.get("hostname")}
        )
        if external:
            return ",".join([*lb_ips, *external])
        return ",".join(lb_ips) or "<pending>"
    if kind == "ExternalName":
        return str(spec.get("externalName", ""))
    return "<unknown>"


def _service_cells(svc: JSON, now: datetime) -> Cells:
    spec = _spec(svc)
    cluster_ips = spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else [])
    ports = []
    for port in spec.get("ports") or []:
        protocol = port.get("protocol", "TCP")
        node_port = f":{port['nodePort']}" if port.get("nodePort") else ""
        ports.append(f"{port.get('port', 0)}{node_port}/{protocol}")
    return [
        _name(svc),
        spec.get("type") or "ClusterIP",
        cluster_ips[0] if cluster_ips else "<none>",
        _service_external_ip(spec, _status(svc)),
        ",".join(ports) or "<none>",
        _age(svc, now),
        _format_labels(spec.get("selector")),
    ]


def _endpoints_cells(obj: JSON, now: datetime) -> Cells:
    subsets = obj.get("subsets") or []
    if not subsets:
        return [_name(obj), "<none>", _age(obj, now)]
    shown: list[str] = []
    count = 0
    for subset in subsets:
        addresses = [a.get("ip", "") for a in subset.get("addresses") or []]
        ports = subset.get("ports") or []
        if not ports:
            # A headless service without ports lists bare addresses.
            count += len(addresses)
            shown.extend(addresses)
            continue
        for port in ports:
            count += len(addresses)
            shown.extend(_join_host_port(ip, port.get("port", 0)) for ip in addresses)
    return [_name(obj), _list_with_more(shown, count, 3, ""), _age(obj, now)]


def _config_map_cells(obj: JSON, now: datetime) -> Cells:
    return [_name(obj), len(obj.get("data") or {}) + len(obj.get("binaryData") or {}), _age(obj, now)]


def _secret_cells(obj: JSON, now: datetime) -> Cells:
    return [_name(obj), obj.get("type", ""), len(obj.get("data") or {}), _age(obj, now)]


def _service_account_cells(obj: JSON, now: datetime) -> Cells:
    return [_name(obj), len(obj.get("secrets") or []), _age(obj, now)]


def _event_cells(event: JSON, now: datetime) -> Cells:
    first_seen = _since(event.get("firstTimestamp"), now)
    if _parse_time(event.get("firstTimestamp")) is None:
        first_seen = _since(event.get("eventTime"), now)
    last_seen = _since(event.get("lastTimestamp"), now)
    if _parse_time(event.get("lastTimestamp")) is None:
        last_seen = first_seen
    count = event.get("count") or 0
    series = event.get("series")
    if isinstance(series, dict):
        last_seen = _since(series.get("lastObservedTime"), now)
        count = series.get("count", 0)
    elif count == 0:
        # Events written through events.k8s.io/v1 leave the count unset when they happened once.
        count = 1
    involved = event.get("involvedObject") or {}
    target = str(involved.get("kind", "")).lower()
    if involved.get("name"):
        target = f"{target}/{involved['name']}"
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingComponent") or ""
    instance = source.get("host") or event.get("reportingInstance") or ""
    return [
        last_seen,
        event.get("type", ""),
        event.get("reason", ""),
        target,
        involved.get("fieldPath", ""),
        f"{component}, {instance}" if instance else component,
        str(event.get("message", "")).strip(),
        first_seen,
        count,
        _name(event),
    ]


_ACCESS_MODES = (
    ("ReadWriteOnce", "RWO"),
    ("ReadOnlyMany", "ROX"),
    ("ReadWriteMany", "RWX"),
    ("ReadWriteOncePod", "RWOP"),
)
_BETA_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"


def _access_modes(modes: list[str] | None) -> str:
    present = set(modes or [])
    return ",".join(short for mode, short in _ACCESS_MODES if mode in present)


def _storage_class(obj: JSON) -> str:
    annotations = _meta(obj).get("annotations") or {}
    if _BETA_STORAGE_CLASS_ANNOTATION in annotations:
        return str(annotations[_BETA_STORAGE_CLASS_ANNOTATION])
    return str(_spec(obj).get("storageClassName") or "")


def _persistent_volume_cells(pv: JSON, now: datetime) -> Cells:
    spec, status = _spec(pv), _status(pv)
    claim = spec.get("claimRef")
    claim_text = f"{claim.get('namespace', '')}/{claim.get('name', '')}" if isinstance(claim, dict) else ""
    phase = "Terminating" if _meta(pv).get("deletionTimestamp") else status.get("phase", "")
    return [
        _name(pv),
        str((spec.get("capacity") or {}).get("storage", "0")),
        _access_modes(spec.get("accessModes")),
        spec.get("persistentVolumeReclaimPolicy", ""),
        phase,
        claim_text,
        _storage_class(pv),
        spec.get("volumeAttributesClassName") or "<unset>",
        status.get("reason", ""),
        _age(pv, now),
        spec.get("volumeMode") or "<unset>",
    ]


def _persistent_volume_claim_cells(pvc: JSON, now: datetime) -> Cells:
    spec, status = _spec(pvc), _status(pvc)
    phase = "Terminating" if _meta(pvc).get("deletionTimestamp") else status.get("phase", "")
    capacity = access = ""
    if spec.get("volumeName"):
        access = _access_modes(status.get("accessModes"))
        capacity = str((status.get("capacity") or {}).get("storage", "0"))
    return [
        _name(pvc),
        phase,
        spec.get("volumeName", ""),
        capacity,
        access,
        _storage_class(pvc),
        spec.get("volumeAttributesClassName") or "<unset>",
        _age(pvc, now),
        spec.get("volumeMode") or "<unset>",
    ]


def _resource_quota_cells(quota: JSON, now: datetime) -> Cells:
    status = _status(quota)
    hard, used = status.get("hard") or {}, status.get("used") or {}
    requests: list[str] = []
    limits: list[str] = []
    for resource in sorted(hard):
        text = f"{resource}: {used.get(resource, '0')}/{hard[resource]}"
        pieces = resource.split(".")
        (limits if len(pieces) > 1 and pieces[0] == "limits" else requests).append(text)
    return [_name(quota), ", ".join(requests), ", ".join(limits), _age(quota, now)]


def _replication_controller_cells(rc: JSON, now: datetime) -> Cells:
    spec, status = _spec(rc), _status(rc)
    names, images = _container_cells(_template_spec(rc))
    return [
        _name(rc),
        spec.get("replicas", 1),
        status.get("replicas", 0),
        status.get("readyReplicas", 0),
        _age(rc, now),
        names,
        images,
        _format_labels(spec.get("selector")),
    ]


# --- apps, batch and other group printers --------------------------------------------------------


def _deployment_cells(deploy: JSON, now: datetime) -> Cells:
    spec, status = _spec(deploy), _status(deploy)
    names, images = _container_cells(_template_spec(deploy))
    try:
        selector = _selector_string(spec.get("selector"))
    except ValueError:
        selector = "<invalid>"
    return [
        _name(deploy),
        f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 1)}",
        status.get("updatedReplicas", 0),
        status.get("availableReplicas", 0),
        _age(deploy, now),
        names,
        images,
        selector,
    ]


def _replica_set_cells(rs: JSON, now: datetime) -> Cells:
    spec, status = _spec(rs), _status(rs)
    names, images = _container_cells(_template_spec(rs))
    return [
        _name(rs),
        spec.get("replicas", 1),
        status.get("replicas", 0),
        status.get("readyReplicas", 0),
        _age(rs, now),
        names,
        images,
        _format_label_selector(spec.get("selector")),
    ]


def _stateful_set_cells(sts: JSON, now: datetime) -> Cells:
    names, images = _container_cells(_template_spec(sts))
    ready = f"{_status(sts).get('readyReplicas', 0)}/{_spec(sts).get('replicas', 1)}"
    return [_name(sts), ready, _age(sts, now), names, images]


def _daemon_set_cells(ds: JSON, now: datetime) -> Cells:
    status = _status(ds)
    template = _template_spec(ds)
    names, images = _container_cells(template)
    return [
        _name(ds),
        status.get("desiredNumberScheduled", 0),
        status.get("currentNumberScheduled", 0),
        status.get("numberReady", 0),
        status.get("updatedNumberScheduled", 0),
        status.get("numberAvailable", 0),
        _format_labels(template.get("nodeSelector")),
        _age(ds, now),
        names,
        images,
        _format_label_selector(_spec(ds).get("selector")),
    ]


def _controller_revision_cells(obj: JSON, now: datetime) -> Cells:
    controller = "<none>"
    for ref in _meta(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            api_version = str(ref.get("apiVersion", ""))
            group = api_version.split("/", 1)[0] if "/" in api_version else ""
            kind = str(ref.get("kind", ""))
            group_kind = f"{kind}.{group}" if group else kind
            controller = f"{group_kind.lower()}/{ref.get('name', '')}" if group_kind else ref.get("name", "")
            break
    return [_name(obj), controller, obj.get("revision", 0), _age(obj, now)]


def _job_cells(job: JSON, now: datetime) -> Cells:
    spec, status = _spec(job), _status(job)
    succeeded = status.get("succeeded", 0)
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{spec['completions']}"
    elif (spec.get("parallelism") or 0) > 1:
        completions = f"{succeeded}/1 of {spec['parallelism']}"
    else:
        completions = f"{succeeded}/1"
    started, finished = _parse_time(status.get("startTime")), _parse_time(status.get("completionTime"))
    duration = ""
    if started is not None:
        duration = human_duration(((finished or now) - started).total_seconds())
    conditions = status.get("conditions")
    if _condition_true(conditions, "Complete"):
        state = "Complete"
    elif _condition_true(conditions, "Failed"):
        state = "Failed"
    elif _meta(job).get("deletionTimestamp"):
        state = "Terminating"
    elif _condition_true(conditions, "Suspended"):
        state = "Suspended"
    elif _condition_true(conditions, "FailureTarget"):
        state = "FailureTarget"
    else:
        state = "Running"
    names, images = _container_cells(_template_spec(job))
    return [
        _name(job),
        state,
        completions,
        duration,
        _age(job, now),
        names,
        images,
        _format_label_selector(spec.get("selector")),
    ]


def _cron_job_cells(cron: JSON, now: datetime) -> Cells:
    spec, status = _spec(cron), _status(cron)
    job_spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    last = status.get("lastScheduleTime")
    names, images = _container_cells((job_spec.get("template") or {}).get("spec") or {})
    return [
        _name(cron),
        spec.get("schedule", ""),
        spec.get("timeZone") or "<none>",
        _bool_ptr(spec.get("suspend")),
        len(status.get("active") or []),
        "<none>" if last is None else _since(last, now),
        _age(cron, now),
        names,
        images,
        _format_label_selector(job_spec.get("selector")),
    ]


def _api_service_cells(apiservice: JSON, now: datetime) -> Cells:
    service = _spec(apiservice).get("service")
    where = (
        f"{service.get('namespace', '')}/{service.get('name', '')}" if isinstance(service, dict) else "Local"
    )
    available = "Unknown"
    for condition in _status(apiservice).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == "Available":
            status, reason = str(condition.get("status", "")), condition.get("reason")
            available = f"{status} ({reason})" if status != "True" and reason else status
            break
    return [_name(apiservice), where, available, _age(apiservice, now)]


def _lease_cells(lease: JSON, now: datetime) -> Cells:
    return [_name(lease), _spec(lease).get("holderIdentity") or "", _age(lease, now)]


def _endpoint_slice_cells(slice_: JSON, now: datetime) -> Cells:
    ports = slice_.get("ports") or []
    port_texts = [
        str(p["port"]) if p.get("port") is not None else (p.get("name") if p.get("name") is not None else "*")
        for p in ports
    ]
    addresses = [a for e in slice_.get("endpoints") or [] for a in e.get("addresses") or []]
    return [
        _name(slice_),
        slice_.get("addressType", ""),
        _list_with_more(port_texts, len(port_texts), 3, "<unset>"),
        _list_with_more(addresses, len(addresses), 3, "<unset>"),
        _age(slice_, now),
    ]


def _int_or_string(value: Any) -> str:
    return "N/A" if value is None else str(value)


def _pdb_cells(pdb: JSON, now: datetime) -> Cells:
    spec = _spec(pdb)
    return [
        _name(pdb),
        _int_or_string(spec.get("minAvailable")),
        _int_or_string(spec.get("maxUnavailable")),
        _status(pdb).get("disruptionsAllowed", 0),
        _age(pdb, now),
    ]


def _hpa_metric_text(spec: JSON, status: JSON | None) -> str:
    kind = spec.get("type")
    if kind in ("External", "Object"):
        key = "external" if kind == "External" else "object"
        target = (spec.get(key) or {}).get("target") or {}
        current_src = (status or {}).get(key)
        current = (current_src or {}).get("current") or {}
        if target.get("averageValue") is not None:
            reading = "<unknown>"
            if current_src is not None and current.get("averageValue") is not None:
                reading = str(current["averageValue"])
            return f"{reading}/{target['averageValue']} (avg)"
        reading = "<unknown>" if current_src is None else _quantity(current.get("value"))
        return f"{reading}/{_quantity(target.get('value'))}"
    if kind == "Pods":
        target = (spec.get("pods") or {}).get("target") or {}
        current_src = (status or {}).get("pods")
        reading = (
            "<unknown>"
            if current_src is None
            else _quantity((current_src.get("current") or {}).get("averageValue"))
        )
        return f"{reading}/{_quantity(target.get('averageValue'))}"
    if kind in ("Resource", "ContainerResource"):
        key = "resource" if kind == "Resource" else "containerResource"
        source = spec.get(key) or {}
        target = source.get("target") or {}
        current_src = (status or {}).get(key)
        current = (current_src or {}).get("current") or {}
        name = source.get("name", "")
        if target.get("averageValue") is not None:
            reading = "<unknown>" if current_src is None else _quantity(current.get("averageValue"))
            return f"{name}: {reading}/{target['averageValue']}"
        reading = "<unknown>"
        if current_src is not None and current.get("averageUtilization") is not None:
            reading = f"{current['averageUtilization']}%"
        goal = "<auto>" if target.get("averageUtilization") is None else f"{target['averageUtilization']}%"
        return f"{name}: {reading}/{goal}"
    return "<unknown type>"


def _hpa_cells(hpa: JSON, now: datetime) -> Cells:
    spec, status = _spec(hpa), _status(hpa)
    metrics: list[JSON] = spec.get("metrics") or []
    readings: list[JSON] = status.get("currentMetrics") or []
    texts = [_hpa_metric_text(m, readings[i] if i < len(readings) else None) for i, m in enumerate(metrics)]
    targets = "<none>"
    if texts:
        targets = ", ".join(texts[:2]) + (f" + {len(texts) - 2} more..." if len(texts) > 2 else "")
    ref = spec.get("scaleTargetRef") or {}
    min_pods = spec.get("minReplicas")
    return [
        _name(hpa),
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        targets,
        "<unset>" if min_pods is None else str(min_pods),
        spec.get("maxReplicas", 0),
        status.get("currentReplicas", 0),
        _age(hpa, now),
    ]


def _csr_cells(csr: JSON, now: datetime) -> Cells:
    spec, status = _spec(csr), _status(csr)
    kinds = {c.get("type") for c in status.get("conditions") or []}
    state = "Denied" if "Denied" in kinds else "Approved" if "Approved" in kinds else "Pending"
    if "Failed" in kinds:
        state += ",Failed"
    if status.get("certificate"):
        state += ",Issued"
    expiration = spec.get("expirationSeconds")
    return [
        _name(csr),
        _age(csr, now),
        spec.get("signerName") or "<none>",
        spec.get("username", ""),
        "<none>" if expiration is None else human_duration(float(expiration)),
        state,
    ]


def _binding_cells(binding: JSON, now: datetime) -> Cells:
    ref = binding.get("roleRef") or {}
    users, groups, service_accounts = [], [], []
    for subject in binding.get("subjects") or []:
        kind, name = subject.get("kind"), subject.get("name", "")
        if kind == "User":
            users.append(name)
        elif kind == "Group":
            groups.append(name)
        elif kind == "ServiceAccount":
            service_accounts.append(f"{subject.get('namespace', '')}/{name}")
    return [
        _name(binding),
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        _age(binding, now),
        ", ".join(users),
        ", ".join(groups),
        ", ".join(service_accounts),
    ]


_DEFAULT_CLASS_ANNOTATIONS = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)


def _storage_class_cells(sc: JSON, now: datetime) -> Cells:
    annotations = _meta(sc).get("annotations") or {}
    name = _name(sc)
    if any(annotations.get(key) == "true" for key in _DEFAULT_CLASS_ANNOTATIONS):
        name += " (default)"
    return [
        name,
        sc.get("provisioner", ""),
        sc.get("reclaimPolicy") or "Delete",
        sc.get("volumeBindingMode") or "Immediate",
        bool(sc.get("allowVolumeExpansion", False)),
        _age(sc, now),
    ]


def _csi_driver_cells(driver: JSON, now: datetime) -> Cells:
    spec = _spec(driver)
    requests = spec.get("tokenRequests")
    return [
        _name(driver),
        bool(spec.get("attachRequired", True)),
        bool(spec.get("podInfoOnMount", False)),
        bool(spec.get("storageCapacity", False)),
        "<unset>" if requests is None else ",".join(r.get("audience", "") for r in requests),
        bool(spec.get("requiresRepublish", False)),
        ",".join(spec.get("volumeLifecycleModes") or []) or "<none>",
        _age(driver, now),
    ]


def _csi_node_cells(node: JSON, now: datetime) -> Cells:
    return [_name(node), len(_spec(node).get("drivers") or []), _age(node, now)]


def _volume_attachment_cells(va: JSON, now: datetime) -> Cells:
    spec = _spec(va)
    return [
        _name(va),
        spec.get("attacher", ""),
        (spec.get("source") or {}).get("persistentVolumeName") or "",
        spec.get("nodeName", ""),
        bool(_status(va).get("attached", False)),
        _age(va, now),
    ]


# --- the printer table -----------------------------------------------------------------------------

_WORKLOAD_COUNTS = (
    _col("Desired", "integer", "Number of desired replicas."),
    _col("Current", "integer", "Number of observed replicas."),
    _col("Ready", "integer", "Number of ready replicas."),
)
_EVENT_COLUMNS = [
    _col("Last Seen", doc="The time at which the most recent occurrence of this event was recorded."),
    _col("Type", doc="Type of this event (Normal, Warning)."),
    _col("Reason", doc="A short, machine understandable string that gives the reason for the transition."),
    _col("Object", doc="The object that this event is about."),
    _col("Subobject", doc="The field of the object this event is about.", priority=1),
    _col("Source", doc="The component reporting this event.", priority=1),
    _col("Message", doc="A human-readable description of the status of this operation."),
    _col("First Seen", doc="The time at which the event was first recorded.", priority=1),
    _col("Count", doc="The number of times this event has occurred.", priority=1),
    _name_col(priority=1),
]
_BINDING_COLUMNS = [
    _name_col(),
    _col("Role", doc="The role the subjects are bound to."),
    _age_col(),
    _col("Users", doc="Users in the binding", priority=1),
    _col("Groups", doc="Groups in the binding", priority=1),
    _col("ServiceAccounts", doc="ServiceAccounts in the binding", priority=1),
]
_HPA_COLUMNS = [
    _name_col(),
    _col("Reference", doc="The resource being scaled."),
    _col("Targets", doc="The metrics and their current and target values."),
    _col("MinPods", doc="The lower limit for the number of replicas."),
    _col("MaxPods", doc="The upper limit for the number of replicas."),
    _col("Replicas", doc="Current number of replicas."),
    _age_col(),
]

_PRINTERS: dict[tuple[str, str], tuple[list[JSON], _Printer]] = {
    ("", "Pod"): (
        [
            _name_col(),
            _col("Ready", doc="The aggregate readiness state of this pod for accepting traffic."),
            _col("Status", doc="The aggregate status of the containers in this pod."),
            _col(
                "Restarts",
                doc="The number of times the containers in this pod have been restarted and when the last "
                "container in this pod has restarted.",
            ),
            _age_col(),
            _col("IP", doc="IP address allocated to the pod.", priority=1),
            _col("Node", doc="The node the pod is scheduled onto.", priority=1),
            _col(
                "Nominated Node", doc="The node the pod may be scheduled onto after preemption.", priority=1
            ),
            _col("Readiness Gates", doc="Readiness gates that are passing.", priority=1),
        ],
        _pod_cells,
    ),
    ("", "PodTemplate"): (
        [
            _name_col(),
            _col("Containers", doc=_CONTAINERS_DOC),
            _col("Images", doc=_IMAGES_DOC),
            _col("Pod Labels", doc="The labels for the pod template."),
        ],
        _pod_template_cells,
    ),
    ("", "Namespace"): (
        [_name_col(), _col("Status", doc="The status of the namespace"), _age_col()],
        _namespace_cells,
    ),
    ("", "Node"): (
        [
            _name_col(),
            _col("Status", doc="The status of the node"),
            _col("Roles", doc="The roles of the node"),
            _age_col(),
            _col("Version", doc="Kubelet Version reported by the node."),
            _col("Internal-IP", doc="The node's internal address.", priority=1),
            _col("External-IP", doc="The node's external address.", priority=1),
            _col("OS-Image", doc="OS Image reported by the node.", priority=1),
            _col("Kernel-Version", doc="Kernel Version reported by the node.", priority=1),
            _col("Container-Runtime", doc="Container runtime version reported by the node.", priority=1),
        ],
        _node_cells,
    ),
    ("", "Service"): (
        [
            _name_col(),
            _col("Type", doc="How the service is exposed."),
            _col("Cluster-IP", doc="The IP address of the service."),
            _col("External-IP", doc="The external addresses of the service."),
            _col("Port(s)", doc="The ports exposed by the service."),
            _age_col(),
            _col(
                "Selector",
                doc="Route service traffic to pods with label keys and values matching this.",
                priority=1,
            ),
        ],
        _service_cells,
    ),
    ("", "Endpoints"): (
        [_name_col(), _col("Endpoints", doc="The set of addresses and ports of the endpoints."), _age_col()],
        _endpoints_cells,
    ),
    ("", "ConfigMap"): (
        [_name_col(), _col("Data", doc="Number of data entries."), _age_col()],
        _config_map_cells,
    ),
    ("", "Secret"): (
        [
            _name_col(),
            _col("Type", doc="Used to facilitate programmatic handling of secret data."),
            _col("Data", doc="Number of data entries."),
            _age_col(),
        ],
        _secret_cells,
    ),
    ("", "ServiceAccount"): (
        [_name_col(), _col("Secrets", doc="Number of secrets of the service account."), _age_col()],
        _service_account_cells,
    ),
    ("", "Event"): (_EVENT_COLUMNS, _event_cells),
    ("events.k8s.io", "Event"): (_EVENT_COLUMNS, _event_cells),
    ("", "PersistentVolume"): (
        [
            _name_col(),
            _col("Capacity", doc="The storage capacity of the volume."),
            _col("Access Modes", doc="The ways the volume can be mounted."),
            _col("Reclaim Policy", doc="What happens to the volume when released from its claim."),
            _col("Status", doc="The phase of the volume."),
            _col("Claim", doc="The claim bound to the volume."),
            _col("StorageClass", doc="StorageClass of the pv"),
            _col("VolumeAttributesClass", doc="VolumeAttributesClass of the pv"),
            _col("Reason", doc="Why the volume is in its phase."),
            _age_col(),
            _col("VolumeMode", doc="Whether the volume is a filesystem or a raw block device.", priority=1),
        ],
        _persistent_volume_cells,
    ),
    ("", "PersistentVolumeClaim"): (
        [
            _name_col(),
            _col("Status", doc="The phase of the claim."),
            _col("Volume", doc="The volume bound to the claim."),
            _col("Capacity", doc="The capacity of the bound volume."),
            _col("Access Modes", doc="The access modes of the bound volume."),
            _col("StorageClass", doc="StorageClass of the pvc"),
            _col("VolumeAttributesClass", doc="VolumeAttributesClass of the pvc"),
            _age_col(),
            _col("VolumeMode", doc="Whether the claim is a filesystem or a raw block device.", priority=1),
        ],
        _persistent_volume_claim_cells,
    ),
    ("", "ResourceQuota"): (
        [
            _name_col(),
            _col(
                "Request",
                doc="Request represents a minimum amount of cpu/memory that a container may consume.",
            ),
            _col(
                "Limit",
                doc="Limits control the maximum amount of cpu/memory that a container may use independent of "
                "contention on the node.",
            ),
            _age_col(),
        ],
        _resource_quota_cells,
    ),
    ("", "ReplicationController"): (
        [_name_col(), *_WORKLOAD_COUNTS, _age_col(), *_wide_template_cols()],
        _replication_controller_cells,
    ),
    ("apps", "Deployment"): (
        [
            _name_col(),
            _col("Ready", doc="Number of the pod with ready state"),
            _col(
                "Up-to-date", doc="Total number of pods targeted by the deployment with the desired template."
            ),
            _col("Available", doc="Total number of available pods targeted by the deployment."),
            _age_col(),
            *_wide_template_cols(),
        ],
        _deployment_cells,
    ),
    ("apps", "ReplicaSet"): (
        [_name_col(), *_WORKLOAD_COUNTS, _age_col(), *_wide_template_cols()],
        _replica_set_cells,
    ),
    ("apps", "StatefulSet"): (
        [
            _name_col(),
            _col("Ready", doc="Number of the pod with ready state"),
            _age_col(),
            *_wide_template_cols(None),
        ],
        _stateful_set_cells,
    ),
    ("apps", "DaemonSet"): (
        [
            _name_col(),
            _col("Desired", "integer", "The number of nodes that should be running the daemon pod."),
            _col("Current", "integer", "The number of nodes running at least one daemon pod."),
            _col("Ready", "integer", "The number of nodes with a ready daemon pod."),
            _col("Up-to-date", "integer", "The number of nodes running the updated daemon pod."),
            _col("Available", "integer", "The number of nodes with an available daemon pod."),
            _col("Node Selector", doc="The node selector of the daemon pods."),
            _age_col(),
            *_wide_template_cols(),
        ],
        _daemon_set_cells,
    ),
    ("apps", "ControllerRevision"): (
        [
            _name_col(),
            _col("Controller", doc="Controller of the object"),
            _col("Revision", doc="Revision indicates the revision of the state represented by Data."),
            _age_col(),
        ],
        _controller_revision_cells,
    ),
    ("batch", "Job"): (
        [
            _name_col(),
            _col("Status", doc="Status of the job."),
            _col("Completions", doc="The number of pods which reached phase Succeeded."),
            _col("Duration", doc="Time required to complete the job."),
            _age_col(),
            *_wide_template_cols(),
        ],
        _job_cells,
    ),
    ("batch", "CronJob"): (
        [
            _name_col(),
            _col("Schedule", doc="The schedule in Cron format."),
            _col("Timezone", doc="The time zone name for the given schedule."),
            _col("Suspend", "boolean", "Whether subsequent executions are suspended."),
            _col("Active", "integer", "Number of currently running jobs."),
            _col("Last Schedule", doc="When the job was last successfully scheduled."),
            _age_col(),
            *_wide_template_cols(),
        ],
        _cron_job_cells,
    ),
    ("apiregistration.k8s.io", "APIService"): (
        [
            _name_col(),
            _col("Service", doc="The reference to the service that hosts this API endpoint."),
            _col("Available", doc="Whether this service is available."),
            _age_col(),
        ],
        _api_service_cells,
    ),
    ("coordination.k8s.io", "Lease"): (
        [_name_col(), _col("Holder", doc="The identity of the holder of the lease."), _age_col()],
        _lease_cells,
    ),
    ("discovery.k8s.io", "EndpointSlice"): (
        [
            _name_col(),
            _col("AddressType", doc="The type of address carried by this EndpointSlice."),
            _col("Ports", doc="The network ports exposed by each endpoint."),
            _col("Endpoints", doc="The addresses of the endpoints."),
            _age_col(),
        ],
        _endpoint_slice_cells,
    ),
    ("policy", "PodDisruptionBudget"): (
        [
            _name_col(),
            _col("Min Available", doc="The minimum number of pods that must be available."),
            _col("Max Unavailable", doc="The maximum number of pods that may be unavailable."),
            _col(
                "Allowed Disruptions",
                "integer",
                "Calculated number of pods that may be disrupted at this time.",
            ),
            _age_col(),
        ],
        _pdb_cells,
    ),
    ("autoscaling", "HorizontalPodAutoscaler"): (_HPA_COLUMNS, _hpa_cells),
    ("certificates.k8s.io", "CertificateSigningRequest"): (
        [
            _name_col(),
            _age_col(),
            _col("SignerName", doc="The requested signer."),
            _col("Requestor", doc="The user that created the request."),
            _col("RequestedDuration", doc="The requested duration of validity of the issued certificate."),
            _col("Condition", doc="The state of the request."),
        ],
        _csr_cells,
    ),
    ("rbac.authorization.k8s.io", "RoleBinding"): (_BINDING_COLUMNS, _binding_cells),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): (_BINDING_COLUMNS, _binding_cells),
    ("storage.k8s.io", "StorageClass"): (
        [
            _name_col(),
            _col("Provisioner", doc="The volume plugin used to provision volumes."),
            _col("ReclaimPolicy", doc="What happens to provisioned volumes when released."),
            _col("VolumeBindingMode", doc="When volumes are provisioned and bound."),
            _col("AllowVolumeExpansion", doc="Whether volumes can be expanded."),
            _age_col(),
        ],
        _storage_class_cells,
    ),
    ("storage.k8s.io", "CSIDriver"): (
        [
            _name_col(),
            _col("AttachRequired", "boolean", "Whether the driver needs an attach operation."),
            _col("PodInfoOnMount", "boolean", "Whether the driver needs pod information on mount."),
            _col("StorageCapacity", "boolean", "Whether the driver reports storage capacity."),
            _col("TokenRequests", doc="Audiences of the service account tokens the driver receives."),
            _col("RequiresRepublish", "boolean", "Whether NodePublishVolume is called periodically."),
            _col("Modes", doc="The volume lifecycle modes the driver supports."),
            _age_col(),
        ],
        _csi_driver_cells,
    ),
    ("storage.k8s.io", "CSINode"): (
        [
            _name_col(),
            _col("Drivers", "integer", "Drivers indicates the number of CSI drivers registered on the node"),
            _age_col(),
        ],
        _csi_node_cells,
    ),
    ("storage.k8s.io", "VolumeAttachment"): (
        [
            _name_col(),
            _col("Attacher", doc="The volume driver that handles the attachment.", fmt="name"),
            _col("PV", doc="The persistent volume being attached."),
            _col("Node", doc="The node the volume is attached to."),
            _col("Attached", "boolean", "Whether the attach operation succeeded."),
            _age_col(),
        ],
        _volume_attachment_cells,
    ),
}

_ROW_CONDITIONS: dict[tuple[str, str], Callable[[JSON], list[JSON] | None]] = {
    ("", "Pod"): _pod_row_conditions
}


def _printable(kind: str, obj: JSON) -> JSON:
    """The object in the version its printer reads, whichever served version it arrived in."""
    api_version = obj.get("apiVersion")
    if kind == "Event" and api_version == "events.k8s.io/v1":
        return events_v1_to_core_event(obj)
    if kind == "HorizontalPodAutoscaler" and api_version == "autoscaling/v1":
        return hpa_v1_to_v2(obj)
    return obj


# --- custom resources: additionalPrinterColumns as simple JSONPath -------------------------------

_SEGMENT = re.compile(
    r"""
    \.\*
  | \[\*\]
  | \.(?P<field>(?:\\.|[^.\[\]\\])+)
  | \[(?P<quoted>'[^']*'|"[^"]*")\]
  | \[(?P<index>-?\d+)\]
  | \[\?\(\s*@(?P<filter_path>(?:\.[\w\-/]+)+)\s*(?P<op>==|!=)\s*
      (?P<literal>'[^']*'|"[^"]*"|-?\d+(?:\.\d+)?|true|false)\s*\)\]
    """,
    re.VERBOSE,
)


class _Path:
    """A parsed simple JSONPath: `.a.b`, `['k']`, `[0]`, `[*]`, `[?(@.k=="v")]`.

    A path outside that subset matches nothing, so its column shows empty cells.
    """

    def __init__(self, text: str) -> None:
        text = text.strip()
        if text.startswith("{") and text.endswith("}"):
            text = text[1:-1].strip()
        text = text.removeprefix("$")
        self.segments: list[re.Match[str]] | None = []
        position = 0
        while position < len(text):
            match = _SEGMENT.match(text, position)
            if match is None:
                self.segments = None
                return
            self.segments.append(match)
            position = match.end()

    def find(self, document: Any) -> list[Any]:
        if self.segments is None:
            return []
        nodes = [document]
        for segment in self.segments:
            nodes = [found for node in nodes for found in _step(segment, node)]
        return nodes


def _literal(text: str) -> Any:
    if text[0] in "'\"":
        return text[1:-1]
    if text in ("true", "false"):
        return text == "true"
    return float(text)


def _matches(value: Any, op: str, literal: Any) -> bool:
    if isinstance(literal, float) and isinstance(value, int | float) and not isinstance(value, bool):
        equal = float(value) == literal
    else:
        equal = value == literal
    return equal if op == "==" else not equal


def _step(segment: re.Match[str], node: Any) -> list[Any]:
    groups = segment.groupdict()
    if groups["field"] is not None or groups["quoted"] is not None:
        key = groups["field"].replace("\\.", ".") if groups["field"] is not None else groups["quoted"][1:-1]
        return [node[key]] if isinstance(node, dict) and key in node else []
    if groups["index"] is not None:
        index = int(groups["index"])
        return [node[index]] if isinstance(node, list) and -len(node) <= index < len(node) else []
    if groups["filter_path"] is not None:
        if not isinstance(node, list):
            return []
        inner = _Path(groups["filter_path"])
        literal = _literal(groups["literal"])
        return [item for item in node if any(_matches(v, groups["op"], literal) for v in inner.find(item))]
    if isinstance(node, dict):
        return list(node.values())
    return list(node) if isinstance(node, list) else []


def _go_float_text(value: float) -> str:
    """fmt.Sprint of a float64 (strconv 'g' with the shortest digits)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    point = exponent + len(text) - 1
    prefix = "-" if sign else ""
    # Shortest formatting switches to an exponent from 1e+06 on, as strconv does.
    if point < -4 or point >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{prefix}{mantissa}e{'-' if point < 0 else '+'}{abs(point):02d}"
    if point < 0:
        return f"{prefix}0.{'0' * (-point - 1)}{text}"
    whole = text[: point + 1].ljust(point + 1, "0")
    fraction = text[point + 1 :]
    return f"{prefix}{whole}{'.' + fraction if fraction else ''}"


def _go_json(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    # encoding/json escapes these for safe embedding in HTML.
    for char, escaped in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e")):
        text = text.replace(char, escaped)
    return text


def _jsonpath_text(value: Any) -> str | None:
    """How kubectl's jsonpath printer shows one value."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float_text(value)
    return _go_json(value)


def _typed_cell(kind: str, value: Any, now: datetime) -> Any:
    """A cell of an additionalPrinterColumn of the given OpenAPI type; None when the value does not fit."""
    if value is None:
        return None
    if kind == "string":
        return _jsonpath_text(value)
    if kind == "integer" and isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    if kind == "number" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind == "date" and isinstance(value, str):
        try:
            datetime.fromisoformat(value)
        except ValueError:
            return "<invalid>"
        return _since(value, now)
    return None


def _crd_convertor(crd_columns: list[JSON]) -> tuple[list[JSON], _Printer]:
    if not crd_columns:
        crd_columns = [
            {
                "name": "Age",
                "type": "date",
                "description": _CREATED_DOC,
                "jsonPath": ".metadata.creationTimestamp",
            }
        ]
    columns = [_name_col()]
    paths: list[tuple[str, _Path]] = []
    for column in crd_columns:
        json_path = str(column.get("jsonPath", ""))
        kind = str(column.get("type", "string"))
        doc = (
            column.get("description")
            or f"Custom resource definition column (in JSONPath format): {json_path}"
        )
        columns.append(
            _col(
                str(column.get("name", "")),
                kind,
                doc,
                priority=int(column.get("priority", 0)),
                fmt=column.get("format", ""),
            )
        )
        paths.append((kind, _Path(json_path)))

    def cells(obj: JSON, now: datetime) -> Cells:
        row: Cells = [_name(obj)]
        for kind, path in paths:
            found = path.find(obj)
            row.append(_typed_cell(kind, found[0], now) if found else None)
        return row

    return columns, cells


# --- the default convertor (kinds without a printer) ---------------------------------------------

_DEFAULT_COLUMNS = [_name_col(), _col("Created At", "date", _CREATED_DOC)]


def _created_at(obj: JSON, now: datetime) -> Cells:
    when = _parse_time(_meta(obj).get("creationTimestamp"))
    stamp = "0001-01-01T00:00:00Z" if when is None else when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return [_name(obj), stamp]


# --- assembling the Table --------------------------------------------------------------------------


def _row_object(obj: JSON, include_object: str, api_version: str) -> JSON | None:
    if include_object == "None":
        return None
    if include_object == "Object":
        return obj
    return {"kind": "PartialObjectMetadata", "apiVersion": api_version, "metadata": _meta(obj)}


def _table_metadata(objects: list[JSON], list_meta: JSON | None) -> JSON:
    if list_meta is not None:
        keys = ("resourceVersion", "continue", "remainingItemCount")
        return {key: list_meta[key] for key in keys if list_meta.get(key) not in (None, "")}
    if len(objects) == 1 and _meta(objects[0]).get("resourceVersion"):
        return {"resourceVersion": _meta(objects[0])["resourceVersion"]}
    return {}


def to_table(
    group: str,
    kind: str,
    objects: list[JSON],
    *,
    include_object: str = "Metadata",
    list_meta: JSON | None = None,
    now: datetime | None = None,
    crd_columns: list[JSON] | None = None,
    no_headers: bool = False,
    api_version: str = TABLE_API_VERSION,
) -> JSON:
    """A Table of `objects` (all of one `group`/`kind`) as the upstream server renders it.

    `include_object` is the `includeObject` query parameter ("" means "Metadata"); anything else
    raises ValueError, which the caller answers with 400 BadRequest. `list_meta` is the list's
    metadata (a single object's resourceVersion is used without it). `crd_columns` are the served
    version's additionalPrinterColumns for a custom resource, None for built-in kinds. `no_headers`
    leaves out the column definitions (TableOptions.noHeaders). `api_version` is the Table version the
    client asked for (meta.k8s.io/v1 or meta.k8s.io/v1beta1). Row objects are the objects as given,
    so convert them to the requested version first when `include_object` is "Object".
    """
    include_object = include_object or "Metadata"
    if include_object not in INCLUDE_OBJECT_VALUES:
        raise ValueError(f"unrecognized includeObject value: {include_object!r}")
    moment = now or datetime.now(UTC)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    if crd_columns is not None:
        columns, printer = _crd_convertor(crd_columns)
    else:
        columns, printer = _PRINTERS.get((group, kind), (_DEFAULT_COLUMNS, _created_at))
    row_conditions = _ROW_CONDITIONS.get((group, kind)) if crd_columns is None else None

    rows = []
    for obj in objects:
        printable = _printable(kind, obj)
        row: JSON = {"cells": printer(printable, moment)}
        conditions = row_conditions(printable) if row_conditions is not None else None
        if conditions:
            row["conditions"] = conditions
        row["object"] = _row_object(obj, include_object, api_version)
        rows.append(row)
    table: JSON = {
        "kind": "Table",
        "apiVersion": api_version,
        "metadata": _table_metadata(objects, list_meta),
    }
    table["columnDefinitions"] = [] if no_headers else [dict(c) for c in columns]
    table["rows"] = rows
    return table


def table_for_watch_event(
    group: str,
    kind: str,
    obj: JSON,
    *,
    include_object: str = "Metadata",
    now: datetime | None = None,
    crd_columns: list[JSON] | None = None,
    first: bool = True,
    api_version: str = TABLE_API_VERSION,
) -> JSON:
    """The one-row Table a watch with `as=Table` sends as an event's object.

    Upstream sends the column definitions with the first event only (`first`); kubectl copes with
    them on every event too. Status objects of ERROR events are not tables: send them unchanged.
    """
    return to_table(
        group,
        kind,
        [obj],
        include_object=include_object,
        now=now,
        crd_columns=crd_columns,
        no_headers=not first,
        api_version=api_version,
    )
