"""The parts of pods, services, claims and quotas that quota counting reads, as msgspec views.

The quota controller's caches decode bus messages into these; the API server's admission
converts its stored dicts into them (`msgspec.convert`), so both feed the same evaluators
(`kcm_shared.apis.quota.evaluators`) the same typed objects.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec

from kcm_shared.apimachinery import codec

RawQuantity = str | int | float


class ResourceRequirements(codec.View):
    requests: dict[str, RawQuantity] = msgspec.field(default_factory=dict)
    limits: dict[str, RawQuantity] = msgspec.field(default_factory=dict)


class Container(codec.View):
    name: str = ""
    resources: ResourceRequirements = msgspec.field(default_factory=ResourceRequirements)
    restart_policy: str | None = None


class PodAffinityTerm(codec.View):
    namespaces: list[str] = msgspec.field(default_factory=list)
    namespace_selector: dict[str, Any] | None = None


class WeightedPodAffinityTerm(codec.View):
    pod_affinity_term: PodAffinityTerm = msgspec.field(default_factory=PodAffinityTerm)


class PodAffinity(codec.View):
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] = msgspec.field(
        default_factory=list
    )
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] = msgspec.field(
        default_factory=list
    )


class Affinity(codec.View):
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


class PodSpec(codec.View):
    containers: list[Container] = msgspec.field(default_factory=list)
    init_containers: list[Container] = msgspec.field(default_factory=list)
    overhead: dict[str, RawQuantity] | None = None
    active_deadline_seconds: int | None = None
    priority_class_name: str = ""
    affinity: Affinity | None = None


class PodStatus(codec.View):
    phase: str = ""


class PodView(codec.Meta):
    spec: PodSpec = msgspec.field(default_factory=PodSpec)
    status: PodStatus = msgspec.field(default_factory=PodStatus)


class ServicePort(codec.View):
    node_port: int | None = None


class ServiceSpec(codec.View):
    type: str = "ClusterIP"
    ports: list[ServicePort] = msgspec.field(default_factory=list)
    allocate_load_balancer_node_ports: bool | None = None


class ServiceView(codec.Meta):
    spec: ServiceSpec = msgspec.field(default_factory=ServiceSpec)


class ClaimSpec(codec.View):
    storage_class_name: str | None = None
    resources: ResourceRequirements = msgspec.field(default_factory=ResourceRequirements)


class ClaimStatus(codec.View):
    allocated_resources: dict[str, RawQuantity] = msgspec.field(default_factory=dict)


class ClaimView(codec.Meta):
    spec: ClaimSpec = msgspec.field(default_factory=ClaimSpec)
    status: ClaimStatus = msgspec.field(default_factory=ClaimStatus)


class ScopedResourceSelectorRequirement(codec.View):
    scope_name: str = ""
    operator: str = ""
    values: list[str] = msgspec.field(default_factory=list)


class ScopeSelector(codec.View):
    match_expressions: list[ScopedResourceSelectorRequirement] = msgspec.field(default_factory=list)


class QuotaSpec(codec.View):
    hard: dict[str, RawQuantity] = msgspec.field(default_factory=dict)
    scopes: list[str] = msgspec.field(default_factory=list)
    scope_selector: ScopeSelector | None = None


class QuotaStatus(codec.View):
    hard: dict[str, RawQuantity] | None = None
    used: dict[str, RawQuantity] | None = None


class QuotaView(codec.Meta):
    spec: QuotaSpec = msgspec.field(default_factory=QuotaSpec)
    status: QuotaStatus = msgspec.field(default_factory=QuotaStatus)


def deletion_deadline(meta: codec.ObjectMeta) -> dt.datetime | None:
    """When a terminating object's grace period ends (None when it is not terminating)."""
    if meta.deletion_timestamp is None or meta.deletion_grace_period_seconds is None:
        return None
    return meta.deletion_timestamp + dt.timedelta(seconds=meta.deletion_grace_period_seconds)
