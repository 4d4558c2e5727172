"""Scale-subresource access for any workload kind, as upstream's scale client does it.

The disruption controller (getScaleController: the desired count of pods whose owner is not a
built-in workload) and the horizontal pod autoscaler (its scaleTargetRef) both turn an
`apiVersion`/`kind` into a resource and read or write `<resource>/scale`. `ScaleTargets` does
that with one discovery mapper per controller, read again once on a miss so a CRD added since
the last discovery is found (upstream's deferred RESTMapper reset); the workloads every cluster
serves are mapped without discovery. Upstream: k8s.io/client-go/scale and
k8s.io/client-go/restmapper (DeferredDiscoveryRESTMapper).
"""

from __future__ import annotations

from typing import Any

from kcm_shared.apimachinery import gvr
from kcm_shared.client import discovery, kubeclient

# The kinds serving /scale in every cluster, at the versions a scaleTargetRef names them.
_WORKLOADS = {
    ("apps", "Deployment"): "deployments",
    ("apps", "ReplicaSet"): "replicasets",
    ("apps", "StatefulSet"): "statefulsets",
    ("", "ReplicationController"): "replicationcontrollers",
}


class ScaleTargets:
    def __init__(self, client: kubeclient.KubeClient) -> None:
        self.client = client
        self.mapper: discovery.Mapper | None = None

    async def resource(self, api_version: str, kind: str) -> gvr.Resource:
        """The resource serving `kind` at `apiVersion`; raises `discovery.MappingError` when
        even a fresh discovery does not know it."""
        group, _, version = api_version.rpartition("/")
        known = _WORKLOADS.get((group, kind))
        if known is not None:
            return gvr.Resource(group, version, known)
        for fresh in (False, True):
            if self.mapper is None or fresh:
                self.mapper = await discovery.discover(self.client)
            try:
                return self.mapper.for_kind(api_version, kind).resource
            except discovery.MappingError:
                if fresh:
                    raise
        raise AssertionError("unreachable")

    @staticmethod
    def path(res: gvr.Resource, namespace: str, name: str) -> str:
        return kubeclient.resource_path(res.group, res.version, res.resource, namespace, name, "scale")

    async def get(self, res: gvr.Resource, namespace: str, name: str) -> dict[str, Any]:
        return await self.client.get(self.path(res, namespace, name))

    async def implements_scale(self, res: gvr.Resource) -> bool:
        """Whether the group version lists `<resource>/scale` as an autoscaling Scale."""
        doc = await self.client.get(kubeclient.group_version_path(res.group, res.version))
        name = f"{res.resource}/scale"
        return any(
            r.get("name") == name
            and r.get("kind") == "Scale"
            and r.get("group", "autoscaling") == "autoscaling"
            for r in doc.get("resources") or []
        )
