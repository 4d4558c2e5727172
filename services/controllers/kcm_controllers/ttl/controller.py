"""The ttl-controller: the `node.alpha.kubernetes.io/ttl` annotation on every Node, by cluster size.

Upstream pkg/controller/ttl/ttl_controller.go on our runtime; the table and its hysteresis
are `boundaries.py`. The kubelet reads the annotation as how long it may cache the Secrets and
ConfigMaps its pods use.

Every replica follows all Nodes in its cache and so knows the cluster's size; its handlers
move the boundary step as nodes come and go (up past a step's sizeMax, down below its
sizeMin) and enqueue a node whose annotation differs from the step's TTL; the work queue
hands each node's key to the replica owning its partition. A reconcile reads the node from
the cache and, only when its annotation is missing, not an integer or another number,
patches it (a strategic merge patch of that one annotation, as upstream's two-way patch).
Unlike upstream, which waits for each node's next update, a step change enqueues every node.
The step is each replica's memory, rebuilt from its cache after a restart as upstream's is
from its informer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kcm_shared import runtime
from kcm_shared.apimachinery import codec, gvr
from kcm_shared.client import kubeclient
from kcm_shared.runtime import cache

from kcm_controllers.ttl import boundaries

log = logging.getLogger("kcm.ttl")

NODES = gvr.Resource("", "v1", "nodes")
TTL_ANNOTATION = "node.alpha.kubernetes.io/ttl"  # upstream v1.ObjectTTLAnnotationKey


class TTLController:
    """Handlers and sync of one process; the API client is injected."""

    def __init__(
        self, client: kubeclient.KubeClient, nodes: cache.Cache[codec.Meta], enqueue: Callable[[str], None]
    ) -> None:
        self.client = client
        self.nodes = nodes
        self.enqueue = enqueue
        self.step = 0

    @property
    def desired(self) -> int:
        return boundaries.BOUNDARIES[self.step].ttl_seconds

    def register(self) -> None:
        self.nodes.add_handler(
            on_add=self._added, on_update=lambda _old, new: self._changed(new), on_delete=self._deleted
        )

    def _added(self, node: codec.Meta) -> None:
        self._move(boundaries.step_up(self.step, len(self.nodes)))
        self._changed(node)

    def _deleted(self, _node: codec.Meta) -> None:
        self._move(boundaries.step_down(self.step, len(self.nodes)))

    def _move(self, step: int) -> None:
        if step == self.step:
            return
        self.step = step
        log.info(
            "Cluster size changed the nodes' TTL",
            extra={"nodes": len(self.nodes), "ttlSeconds": self.desired},
        )
        for node in self.nodes.list():
            self._changed(node)

    def _changed(self, node: codec.Meta) -> None:
        if boundaries.parse_ttl(node.metadata.annotations.get(TTL_ANNOTATION)) != self.desired:
            self.enqueue(codec.key_of(node))

    async def reconcile(self, key: str) -> runtime.Result | None:
        node = self.nodes.get_key(key)
        if node is None:
            return None
        desired = self.desired
        current = node.metadata.annotations.get(TTL_ANNOTATION)
        if boundaries.parse_ttl(current) == desired:
            return None
        if current is not None and boundaries.parse_ttl(current) is None:
            log.info(
                "Could not convert the value with annotation key for the node",
                extra={"annotationValue": current, "annotationKey": TTL_ANNOTATION, "node": key},
            )
        path = kubeclient.resource_path("", "v1", "nodes", None, node.metadata.name)
        patch = {"metadata": {"annotations": {TTL_ANNOTATION: str(desired)}}}
        try:
            await self.client.patch(path, patch, "strategic")
        except kubeclient.ApiError as exc:
            if exc.not_found:
                return None
            raise
        log.debug("Changed ttl annotation", extra={"node": key, "TTL": f"{desired}s"})
        return None


def build(ctx: runtime.Context) -> runtime.Reconcile:
    tc = TTLController(ctx.client, ctx.caches[NODES], ctx.enqueue)
    tc.register()
    return tc.reconcile


SPEC = runtime.Spec(
    name="ttl-controller",
    alias="ttl",
    primary=NODES,
    views={NODES: codec.Meta},
    build=build,
    workers=5,  # upstream starts five workers
    queue_name="ttlcontroller",
    package=__package__,
)
