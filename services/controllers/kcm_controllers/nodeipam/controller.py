"""The node IPAM controller: gives every node pod CIDRs from the cluster's ranges.

Upstream pkg/controller/nodeipam/node_ipam_controller.go and cmd/kube-controller-manager/app
(startNodeIpamController), v1.32, with the range allocator (`range_allocator.py`, the only
allocator without a cloud provider) on our runtime. Off unless `--allocate-node-cidrs` is set,
as upstream; the flags are checked at start (`config.py`). Run by the launcher from REGISTRY.
"""

from __future__ import annotations

from kcm_shared import runtime
from kcm_shared.apimachinery import gvr

from kcm_controllers.nodeipam import config
from kcm_controllers.nodeipam.range_allocator import PASS_KEY, NodeView, RangeAllocator

NODES = gvr.Resource("", "v1", "nodes")


def build(ctx: runtime.Context) -> runtime.Reconcile:
    allocator = RangeAllocator(ctx.client, ctx.caches[NODES], ctx.recorder, config.parse(ctx.args))
    allocator.register(ctx.enqueue)
    ctx.keys = lambda: [PASS_KEY]
    return allocator.reconcile


SPEC = runtime.Spec(
    name="node-ipam-controller",
    alias="nodeipam",
    queue_name="cidrallocator_node",
    primary=None,
    views={NODES: NodeView},
    build=build,
    workers=1,  # one key: every allocation runs in one pass at a time
    flags=config.flags,
    disabled_by=config.disabled_by,
    event_component="cidrAllocator",  # upstream's range allocator records as this
    package=__package__,
)
