"""What each object costs a ResourceQuota, and which quotas it falls under.

upstream pkg/quota/v1/evaluator/core (pods.go, services.go, persistent_volume_claims.go,
registry.go) and staging/src/k8s.io/apiserver/pkg/quota/v1/generic (evaluator.go: object
counts, Matches, CalculateUsageStats), plus quota.CalculateUsage from resources.go. One
evaluator per resource:

- pods: `pods`, `count/pods`, `cpu`/`memory`/`ephemeral-storage` (= requests), `requests.*`
  and `limits.*` of those, hugepages and extended resources (`requests.<domain>/<name>`).
  `count/pods` counts every pod in storage; the rest stop counting once a pod is terminal
  or its grace period after deletion has passed. Scopes: Terminating, NotTerminating,
  BestEffort, NotBestEffort, PriorityClass (In/NotIn/Exists/DoesNotExist) and
  CrossNamespacePodAffinity. Constraints: a quota on cpu or memory demands that each
  container states it (`must specify limits.cpu for: c1; requests.memory for: c1,c2`).
- services: `services`, `count/services`, `services.loadbalancers`, `services.nodeports`.
- persistentvolumeclaims: `persistentvolumeclaims`, `count/persistentvolumeclaims`,
  `requests.storage`, and per storage class `<class>.storageclass.storage.k8s.io/requests.storage`
  and `.../persistentvolumeclaims`; with RecoverVolumeExpansionFailure (the Registry's
  `allocated_claims`, on by default as in v1.32) a claim's `status.allocatedResources` storage
  counts while it is more than the request.
- every other resource: `count/<resource>.<group>` (and the legacy names `configmaps`,
  `secrets`, `resourcequotas`, `replicationcontrollers`), counted on create only.

Objects are the msgspec views of `kcm_shared.apis.quota.views` (generic counts need only
metadata). Called by the resourcequota controller (usage from its caches) and by the
embedded API server's quota admission, so the two never disagree.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kcm_shared.apimachinery import codec, quantity
from kcm_shared.apimachinery.quantity import Quantity
from kcm_shared.apis.quota import resources, views
from kcm_shared.apis.quota.resources import ResourceList

CREATE = "CREATE"
UPDATE = "UPDATE"

# Resource names (upstream core/v1 types.go).
PODS = "pods"
CPU, MEMORY, EPHEMERAL = "cpu", "memory", "ephemeral-storage"
REQUESTS_CPU, REQUESTS_MEMORY, REQUESTS_EPHEMERAL = (
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
)
LIMITS_CPU, LIMITS_MEMORY, LIMITS_EPHEMERAL = "limits.cpu", "limits.memory", "limits.ephemeral-storage"
SERVICES, LOAD_BALANCERS, NODE_PORTS = "services", "services.loadbalancers", "services.nodeports"
CLAIMS, REQUESTS_STORAGE = "persistentvolumeclaims", "requests.storage"
STORAGE_CLASS_SUFFIX = ".storageclass.storage.k8s.io/"
BETA_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
HUGEPAGES_PREFIX, REQUESTS_PREFIX = "hugepages-", "requests."

# Scopes (upstream ResourceQuotaScope) and selector operators.
TERMINATING, NOT_TERMINATING = "Terminating", "NotTerminating"
BEST_EFFORT, NOT_BEST_EFFORT = "BestEffort", "NotBestEffort"
PRIORITY_CLASS, CROSS_NAMESPACE_POD_AFFINITY = "PriorityClass", "CrossNamespacePodAffinity"
STANDARD_SCOPES = (
    TERMINATING,
    NOT_TERMINATING,
    BEST_EFFORT,
    NOT_BEST_EFFORT,
    PRIORITY_CLASS,
    CROSS_NAMESPACE_POD_AFFINITY,
)
IN, NOT_IN, EXISTS, DOES_NOT_EXIST = "In", "NotIn", "Exists", "DoesNotExist"

# Legacy object-count names (upstream core/registry.go legacyObjectCountAliases).
LEGACY_COUNT_ALIASES = {
    "configmaps": "configmaps",
    "resourcequotas": "resourcequotas",
    "replicationcontrollers": "replicationcontrollers",
    "secrets": "secrets",
}

# A quota on any of these makes every container state it (upstream's validationSet).
_VALIDATION_SET = frozenset({CPU, MEMORY, REQUESTS_CPU, REQUESTS_MEMORY, LIMITS_CPU, LIMITS_MEMORY})
_QOS_RESOURCES = (CPU, MEMORY)
_ONE = quantity.of(1)


def count_name(group: str, resource: str) -> str:
    """`count/<resource>.<group>` (`count/<resource>` for the core group)."""
    return f"count/{resource}.{group}" if group else f"count/{resource}"


def parse_count_name(name: str) -> tuple[str, str] | None:
    """(group, resource) of a `count/...` name; None for any other name."""
    if not name.startswith("count/") or len(name) == len("count/"):
        return None
    resource, _, group = name[len("count/") :].partition(".")
    return (group, resource) if resource else None


@dataclass(frozen=True, slots=True)
class Requirement:
    """One scope selector term (upstream ScopedResourceSelectorRequirement)."""

    scope: str
    operator: str = EXISTS
    values: tuple[str, ...] = ()


def quota_scopes(spec: views.QuotaSpec) -> list[Requirement]:
    """`spec.scopes` as Exists terms plus `spec.scopeSelector`'s expressions."""
    out = [Requirement(scope) for scope in spec.scopes]
    if spec.scope_selector is not None:
        out.extend(
            Requirement(req.scope_name, req.operator, tuple(req.values))
            for req in spec.scope_selector.match_expressions
        )
    return out


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True)
class Evaluator:
    """How one resource is charged: the names it affects, scopes, usage and constraints."""

    group: str
    resource: str
    names: tuple[str, ...]
    usage: Callable[[Any, dt.datetime], ResourceList]
    matches_scope: Callable[[Requirement, Any], bool] = lambda _req, _obj: False
    handles_update: bool = False
    update_subresource: str = ""
    view: type[codec.Meta] = codec.Meta
    extra_names: Callable[[str], bool] = lambda _name: False
    constraints: Callable[[Iterable[str], Any], str | None] = lambda _names, _obj: None

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        """The names among `names` this evaluator charges (upstream MatchingResources)."""
        own = set(self.names)
        return list(dict.fromkeys(n for n in names if n in own or self.extra_names(n)))

    def handles(self, operation: str, subresource: str = "") -> bool:
        """Whether a write can change usage: creates, and updates where the resource says so
        (pods only through `pods/resize`, as upstream's in-place resize)."""
        if subresource:
            return operation == UPDATE and subresource == self.update_subresource
        return operation == CREATE or (operation == UPDATE and self.handles_update)

    def matches(self, quota: views.QuotaView, obj: Any) -> bool:
        """Whether `obj` falls under `quota`: one of its `status.hard` names is charged by this
        evaluator and every scope matches (upstream generic.Matches)."""
        hard = (quota.status.hard or {}).keys()
        if not self.matching_resources(hard):
            return False
        return all(self.matches_scope(req, obj) for req in quota_scopes(quota.spec))

    def usage_stats(
        self,
        objects: Iterable[Any],
        scopes: Sequence[Requirement],
        names: Iterable[str],
        now: dt.datetime,
    ) -> ResourceList:
        """The summed usage of the objects matching every scope, zero for each name asked
        (upstream generic.CalculateUsageStats)."""
        total: ResourceList = {name: quantity.ZERO for name in names}
        for obj in objects:
            if all(self.matches_scope(req, obj) for req in scopes):
                total = resources.add(total, self.usage(obj, now))
        return total


# --- pods -----------------------------------------------------------------------------------


def _is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _is_extended(name: str) -> bool:
    return not _is_native(name) and not name.startswith(REQUESTS_PREFIX)


def _is_extended_for_quota(name: str) -> bool:
    return not _is_native(name) and name.startswith(REQUESTS_PREFIX)


_POD_NAMES = (
    count_name("", "pods"),
    CPU,
    MEMORY,
    EPHEMERAL,
    REQUESTS_CPU,
    REQUESTS_MEMORY,
    REQUESTS_EPHEMERAL,
    LIMITS_CPU,
    LIMITS_MEMORY,
    LIMITS_EPHEMERAL,
    PODS,
)


def _pod_extra(name: str) -> bool:
    return name.startswith((HUGEPAGES_PREFIX, REQUESTS_PREFIX + HUGEPAGES_PREFIX)) or _is_extended_for_quota(
        name
    )


def compute_usage(requests: Mapping[str, Quantity], limits: Mapping[str, Quantity]) -> ResourceList:
    """What requests and limits cost (upstream podComputeUsageHelper)."""
    out: ResourceList = {PODS: _ONE}
    for bare, req_name, lim_name in (
        (CPU, REQUESTS_CPU, LIMITS_CPU),
        (MEMORY, REQUESTS_MEMORY, LIMITS_MEMORY),
        (EPHEMERAL, REQUESTS_EPHEMERAL, LIMITS_EPHEMERAL),
    ):
        if bare in requests:
            out[bare] = out[req_name] = requests[bare]
        if bare in limits:
            out[lim_name] = limits[bare]
    for name, value in requests.items():
        if name.startswith(HUGEPAGES_PREFIX):
            out[name] = value
            out[REQUESTS_PREFIX + name] = value
        if _is_extended(name):
            out[REQUESTS_PREFIX + name] = value
    return out


def _max_into(into: ResourceList, other: Mapping[str, Quantity]) -> None:
    for name, value in other.items():
        if name not in into or value > into[name]:
            into[name] = value


def pod_requests(pod: views.PodView, which: str = "requests") -> ResourceList:
    """The pod's effective requests (or limits): containers summed, init containers as their
    maximum, restartable (sidecar) init containers added to both, overhead on top
    (upstream pkg/api/v1/resource PodRequests / PodLimits)."""
    spec = pod.spec
    total: ResourceList = {}
    for c in spec.containers:
        total = resources.add(total, resources.parse_list(getattr(c.resources, which)))
    sidecars: ResourceList = {}
    init_max: ResourceList = {}
    for c in spec.init_containers:
        own = resources.parse_list(getattr(c.resources, which))
        if c.restart_policy == "Always":
            total = resources.add(total, own)
            sidecars = resources.add(sidecars, own)
            candidate = sidecars
        else:
            candidate = resources.add(own, sidecars)
        _max_into(init_max, candidate)
    _max_into(total, init_max)
    if spec.overhead:
        overhead = resources.parse_list(spec.overhead)
        if which == "requests":
            total = resources.add(total, overhead)
        else:
            total = {
                name: value + overhead[name] if name in overhead else value for name, value in total.items()
            }
    return total


def pod_counts_compute(pod: views.PodView, now: dt.datetime) -> bool:
    """Whether the pod is charged for compute: not terminal, and not past its grace period
    after deletion (upstream QuotaV1Pod; `count/pods` counts it regardless)."""
    if pod.status.phase in ("Succeeded", "Failed"):
        return False
    meta = pod.metadata
    if meta.deletion_timestamp is not None and meta.deletion_grace_period_seconds is not None:
        limit = meta.deletion_timestamp + dt.timedelta(seconds=meta.deletion_grace_period_seconds)
        if now > limit:
            return False
    return True


def pod_usage(pod: views.PodView, now: dt.datetime) -> ResourceList:
    out: ResourceList = {count_name("", "pods"): _ONE}
    if not pod_counts_compute(pod, now):
        return out
    return resources.add(out, compute_usage(pod_requests(pod, "requests"), pod_requests(pod, "limits")))


def is_best_effort(pod: views.PodView) -> bool:
    """No container asks for or caps cpu or memory (upstream qos.GetPodQOS == BestEffort)."""
    for c in (*pod.spec.init_containers, *pod.spec.containers):
        for raw in (c.resources.requests, c.resources.limits):
            for name in _QOS_RESOURCES:
                if name in raw and quantity.parse(raw[name]).sign() > 0:
                    return False
    return True


def is_terminating(pod: views.PodView) -> bool:
    return pod.spec.active_deadline_seconds is not None and pod.spec.active_deadline_seconds >= 0


def uses_cross_namespace_pod_affinity(pod: views.PodView) -> bool:
    affinity = pod.spec.affinity
    if affinity is None:
        return False
    for terms in (affinity.pod_affinity, affinity.pod_anti_affinity):
        if terms is None:
            continue
        candidates = [
            *terms.required_during_scheduling_ignored_during_execution,
            *(w.pod_affinity_term for w in terms.preferred_during_scheduling_ignored_during_execution),
        ]
        if any(t.namespaces or t.namespace_selector is not None for t in candidates):
            return True
    return False


def _priority_class_matches(req: Requirement, pod: views.PodView) -> bool:
    """The selector over the one-label set {PriorityClass: name} (empty without a class)."""
    name = pod.spec.priority_class_name
    if req.operator == EXISTS:
        return bool(name)
    if req.operator == DOES_NOT_EXIST:
        return not name
    if req.operator == IN:
        return bool(name) and name in req.values
    if req.operator == NOT_IN:
        return not name or name not in req.values
    return False


def pod_matches_scope(req: Requirement, pod: views.PodView) -> bool:
    scope = req.scope
    if scope == TERMINATING:
        return is_terminating(pod)
    if scope == NOT_TERMINATING:
        return not is_terminating(pod)
    if scope == BEST_EFFORT:
        return is_best_effort(pod)
    if scope == NOT_BEST_EFFORT:
        return not is_best_effort(pod)
    if scope == PRIORITY_CLASS:
        return _priority_class_matches(req, pod)
    if scope == CROSS_NAMESPACE_POD_AFFINITY:
        return uses_cross_namespace_pod_affinity(pod)
    return False


def pod_constraints(required: Iterable[str], pod: views.PodView) -> str | None:
    """`must specify limits.cpu for: c1; requests.memory for: c1,c2`, or None when every
    container states what the quota tracks among cpu and memory (upstream Constraints)."""
    wanted = set(required) & _VALIDATION_SET
    missing: dict[str, set[str]] = {}
    for c in (*pod.spec.containers, *pod.spec.init_containers):
        have = compute_usage(
            resources.parse_list(c.resources.requests), resources.parse_list(c.resources.limits)
        ).keys()
        for name in wanted - have:
            missing.setdefault(name, set()).add(c.name)
    if not missing:
        return None
    parts = [f"{name} for: {','.join(sorted(missing[name]))}" for name in sorted(missing)]
    return "must specify " + "; ".join(parts)


PODS_EVALUATOR = Evaluator(
    group="",
    resource="pods",
    names=_POD_NAMES,
    usage=pod_usage,
    matches_scope=pod_matches_scope,
    update_subresource="resize",
    view=views.PodView,
    extra_names=_pod_extra,
    constraints=pod_constraints,
)


# --- services -------------------------------------------------------------------------------


def service_usage(svc: views.ServiceView, _now: dt.datetime) -> ResourceList:
    ports = len(svc.spec.ports)
    out: ResourceList = {
        count_name("", "services"): _ONE,
        SERVICES: _ONE,
        LOAD_BALANCERS: quantity.ZERO,
        NODE_PORTS: quantity.ZERO,
    }
    if svc.spec.type == "NodePort":
        out[NODE_PORTS] = quantity.of(ports)
    elif svc.spec.type == "LoadBalancer":
        if svc.spec.allocate_load_balancer_node_ports is False:
            ports = sum(1 for p in svc.spec.ports if p.node_port)
        out[NODE_PORTS] = quantity.of(ports)
        out[LOAD_BALANCERS] = _ONE
    return out


SERVICES_EVALUATOR = Evaluator(
    group="",
    resource="services",
    names=(count_name("", "services"), SERVICES, NODE_PORTS, LOAD_BALANCERS),
    usage=service_usage,
    handles_update=True,
    view=views.ServiceView,
)


# --- persistent volume claims -----------------------------------------------------------------


def claim_class(claim: views.ClaimView) -> str:
    """The claim's storage class: the beta annotation wins, as upstream's GetPersistentVolumeClaimClass."""
    beta = claim.metadata.annotations.get(BETA_STORAGE_CLASS_ANNOTATION)
    if beta is not None:
        return beta
    return claim.spec.storage_class_name or ""


def claim_usage(claim: views.ClaimView, _now: dt.datetime, *, allocated: bool = True) -> ResourceList:
    out: ResourceList = {CLAIMS: _ONE, count_name("", "persistentvolumeclaims"): _ONE}
    cls = claim_class(claim)
    if cls:
        out[cls + STORAGE_CLASS_SUFFIX + CLAIMS] = _ONE
    raw = claim.spec.resources.requests.get("storage")
    if raw is not None:
        # Whole bytes, so that the quota's own validation accepts the sum (upstream issue 94313).
        storage = quantity.parse(raw).round_up_to_units()
        # RecoverVolumeExpansionFailure (`allocated`): a claim whose request was lowered after
        # a failed expansion is charged what was allocated while that is more.
        held = claim.status.allocated_resources.get("storage") if allocated else None
        if held is not None:
            storage = max(storage, quantity.parse(held).round_up_to_units())
        out[REQUESTS_STORAGE] = storage
        if cls:
            out[cls + STORAGE_CLASS_SUFFIX + REQUESTS_STORAGE] = storage
    return out


def _claim_extra(name: str) -> bool:
    return name.endswith((STORAGE_CLASS_SUFFIX + CLAIMS, STORAGE_CLASS_SUFFIX + REQUESTS_STORAGE))


def claims_evaluator(allocated: bool) -> Evaluator:
    """Claims' evaluator; `allocated`: the RecoverVolumeExpansionFailure gate."""

    def usage(claim: views.ClaimView, now: dt.datetime) -> ResourceList:
        return claim_usage(claim, now, allocated=allocated)

    return Evaluator(
        group="",
        resource="persistentvolumeclaims",
        names=(count_name("", "persistentvolumeclaims"), CLAIMS, REQUESTS_STORAGE),
        usage=usage,
        handles_update=True,
        view=views.ClaimView,
        extra_names=_claim_extra,
    )


CLAIMS_EVALUATOR = claims_evaluator(allocated=True)


# --- object counts --------------------------------------------------------------------------


def object_count(group: str, resource: str) -> Evaluator:
    """`count/<resource>.<group>` (plus the legacy alias, if any) for every object in storage,
    charged on create only (upstream generic.NewObjectCountEvaluator)."""
    names = [count_name(group, resource)]
    alias = LEGACY_COUNT_ALIASES.get(resource) if not group else None
    if alias is not None:
        names.append(alias)
    charge = {name: _ONE for name in names}
    return Evaluator(
        group=group, resource=resource, names=tuple(names), usage=lambda _obj, _now: dict(charge)
    )


@dataclass
class Registry:
    """Evaluators by (group, resource): the special ones, and object counts made on demand.
    `allocated_claims`: the RecoverVolumeExpansionFailure gate of the process counting."""

    allocated_claims: bool = True
    special: dict[tuple[str, str], Evaluator] = field(init=False)
    _generic: dict[tuple[str, str], Evaluator] = field(default_factory=dict)

    def __post_init__(self) -> None:
        claims = CLAIMS_EVALUATOR if self.allocated_claims else claims_evaluator(allocated=False)
        self.special = {
            ("", "pods"): PODS_EVALUATOR,
            ("", "services"): SERVICES_EVALUATOR,
            ("", "persistentvolumeclaims"): claims,
        }

    def get(self, group: str, resource: str) -> Evaluator:
        key = (group, resource)
        found = self.special.get(key) or self._generic.get(key)
        if found is None:
            found = self._generic[key] = object_count(group, resource)
        return found

    def for_names(self, names: Iterable[str]) -> list[Evaluator]:
        """The evaluators that charge any of `names`: the special ones, the legacy aliases'
        and one per `count/<resource>.<group>`."""
        wanted = list(names)
        keys: list[tuple[str, str]] = list(self.special)
        for name in wanted:
            parsed = parse_count_name(name)
            if parsed is not None:
                keys.append(parsed)
            elif name in LEGACY_COUNT_ALIASES:
                keys.append(("", LEGACY_COUNT_ALIASES[name]))
        out = [self.get(*key) for key in dict.fromkeys(keys)]
        return [e for e in out if e.matching_resources(wanted)]


REGISTRY = Registry()


def calculate_usage(
    hard: Mapping[str, Quantity],
    scopes: Sequence[Requirement],
    objects: Callable[[Evaluator], Iterable[Any] | None],
    now: dt.datetime | None = None,
    registry: Registry = REGISTRY,
) -> ResourceList:
    """The usage of every name in `hard` the evaluators can measure (upstream
    quota.CalculateUsage). `objects(evaluator)` lists the namespace's objects of its
    resource, or None when they cannot be listed: those names stay out of the result, so
    admission answers "status unknown" for them rather than trust a guess."""
    when = now or _now()
    names = list(hard)
    used: ResourceList = {}
    measured: list[str] = []
    for evaluator in registry.for_names(names):
        tracked = evaluator.matching_resources(names)
        items = objects(evaluator)
        if items is None:
            continue
        used = resources.add(used, evaluator.usage_stats(items, scopes, tracked, when))
        measured.extend(tracked)
    return resources.mask(used, measured)
