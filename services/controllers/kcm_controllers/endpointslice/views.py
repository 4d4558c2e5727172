"""discovery.k8s.io/v1 EndpointSlice as the endpointslice controller reads and writes it.

The same structs decode the cache's slices and encode the slices the reconciler creates and
updates (msgspec, camelCase, unset fields omitted), so a slice read, changed and written back
keeps every field the controller owns. Upstream: k8s.io/api/discovery/v1 types.go.
"""

from __future__ import annotations

import msgspec
from kcm_shared.apimachinery import codec, gvr
from kcm_shared.controllerutil.endpoints import endpointutil

ENDPOINTSLICES = gvr.Resource("discovery.k8s.io", "v1", "endpointslices")

IPV4 = "IPv4"
IPV6 = "IPv6"
FQDN = "FQDN"

# Labels and annotations upstream's reconciler reads and writes.
LABEL_SERVICE_NAME = "kubernetes.io/service-name"
LABEL_MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
LABEL_HEADLESS = "service.kubernetes.io/headless"
CONTROLLER_NAME = "endpointslice-controller.k8s.io"
LAST_CHANGE_TRIGGER_TIME = "endpoints.kubernetes.io/last-change-trigger-time"
LABEL_ZONE = "topology.kubernetes.io/zone"


class EndpointConditions(codec.View):
    ready: bool | None = None
    serving: bool | None = None
    terminating: bool | None = None


class TargetRef(codec.View):
    kind: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""


class ForZone(codec.View):
    name: str = ""


class EndpointHints(codec.View):
    for_zones: list[ForZone] = msgspec.field(default_factory=list)


class Endpoint(codec.View):
    addresses: list[str] = msgspec.field(default_factory=list)
    conditions: EndpointConditions = msgspec.field(default_factory=EndpointConditions)
    hostname: str | None = None
    target_ref: TargetRef | None = None
    node_name: str | None = None
    zone: str | None = None
    hints: EndpointHints | None = None


class EndpointPort(codec.View):
    name: str | None = None
    protocol: str | None = None
    port: int | None = None
    app_protocol: str | None = None


class EndpointSlice(codec.Meta):
    address_type: str = ""
    # Never omitted: an empty list is what a placeholder slice is made of.
    endpoints: list[Endpoint] | None = None
    ports: list[EndpointPort] | None = None


class ServiceSpec(endpointutil.ServiceSpec):
    traffic_distribution: str | None = None


class ServiceView(endpointutil.ServiceView):
    """The shared Service view plus spec.trafficDistribution, which only slices carry (hints)."""

    spec: ServiceSpec = msgspec.field(default_factory=ServiceSpec)


class NodeCondition(codec.View):
    type: str = ""
    status: str = ""


class NodeStatus(codec.View):
    allocatable: dict[str, str] = msgspec.field(default_factory=dict)
    conditions: list[NodeCondition] = msgspec.field(default_factory=list)


class NodeView(codec.Meta):
    """What the controller reads of a Node: its zone label, and for topology hints whether it
    is Ready and its allocatable CPU."""

    status: NodeStatus = msgspec.field(default_factory=NodeStatus)

    def ready(self) -> bool:
        return any(c.type == "Ready" and c.status == "True" for c in self.status.conditions)
