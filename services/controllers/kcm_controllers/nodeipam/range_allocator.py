"""The range allocator: one CIDR per cluster CIDR for every node without spec.podCIDRs.

Upstream pkg/controller/nodeipam/ipam/range_allocator.go (v1.32), its cidrset metrics
(ipam/cidrset/metrics.go) and pkg/util/node PatchNodeCIDRs. Driven by `node_ipam_controller`.

Upstream keeps its bitmaps in the memory of its one leader. Here the work keys are spread over
replicas, so all allocation runs under one well-known key (`PASS_KEY`), reconciled by one
replica at a time; each pass derives the bitmaps afresh from the node cache, which the runtime
catches up with the API server before a replica gains the key (invariant 6). A replica that
takes over, or a restarted one, therefore sees every CIDR a patch has written, and never hands
one out twice. What the cache cannot show yet is kept in memory by the replica that wrote it:
`pending` (CIDRs patched or being patched onto a node the cache still shows without them, as
upstream's nodesInProcessing), dropped once the cache shows the node with CIDRs or without the
node; and `leaked`, CIDRs whose patch ended without an answer, kept taken for the life of the
process as upstream keeps them until a restart. A pass:
1. rebuilds one `CIDRSet` per cluster CIDR: the service ranges (filterOutServiceRange), every
   cached node's podCIDRs (occupyCIDRs), `pending` and `leaked`;
2. allocates for each node without podCIDRs (oldest first) one block per set, records
   `CIDRNotAvailable` (Normal, `Node <name> status is now: CIDRNotAvailable`) when a set is full,
   once per version of the node, as upstream does on each of its updates;
3. patches the allocated CIDRs onto the nodes (strategic merge of podCIDR and podCIDRs,
   3 tries); a refused patch records `CIDRAssignmentFailed` and frees the CIDRs, unless the
   server timed out (504), when they stay taken as upstream's.
The metrics `node_ipam_controller_cidrset_*` count the bits that changed between passes, so a
rebuild counts only real allocations and releases.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterable

import msgspec
import prometheus_client
from kcm_shared import runtime
from kcm_shared.apimachinery import codec
from kcm_shared.base import fanout
from kcm_shared.client import kubeclient
from kcm_shared.runtime import cache, events

from kcm_controllers.nodeipam import config
from kcm_controllers.nodeipam.cidrset import CIDRSet, CIDRSetError, Network

log = logging.getLogger("kcm.nodeipam")

PASS_KEY = "@allocate"  # not a name: the one key every allocation runs under
CIDR_UPDATE_RETRIES = 3  # upstream cidrUpdateRetries
PATCH_CONCURRENCY = 30  # upstream's cidrUpdateWorkers
CIDR_NOT_AVAILABLE = "CIDRNotAvailable"
CIDR_ASSIGNMENT_FAILED = "CIDRAssignmentFailed"
_EPOCH = dt.datetime.min.replace(tzinfo=dt.UTC)

ALLOCATIONS = prometheus_client.Counter(
    "node_ipam_controller_cidrset_cidrs_allocations_total",
    "Counter measuring total number of CIDR allocations.",
    ["clusterCIDR"],
)
RELEASES = prometheus_client.Counter(
    "node_ipam_controller_cidrset_cidrs_releases_total",
    "Counter measuring total number of CIDR releases.",
    ["clusterCIDR"],
)
MAX_CIDRS = prometheus_client.Gauge(
    "node_ipam_controller_cirdset_max_cidrs",  # sic: upstream's name
    "Maximum number of CIDRs that can be allocated.",
    ["clusterCIDR"],
)
USAGE = prometheus_client.Gauge(
    "node_ipam_controller_cidrset_usage_cidrs",
    "Gauge measuring percentage of allocated CIDRs.",
    ["clusterCIDR"],
)
TRIES = prometheus_client.Histogram(
    "node_ipam_controller_cidrset_allocation_tries_per_request",
    "Number of endpoints added on each Service sync",  # sic: upstream's help text
    ["clusterCIDR"],
    buckets=(1, 5, 25, 125, 625),
)


class NodeSpecView(codec.View):
    pod_cidr: str = msgspec.field(default="", name="podCIDR")
    pod_cidrs: list[str] = msgspec.field(default_factory=list, name="podCIDRs")


class NodeView(codec.Meta):
    spec: NodeSpecView = msgspec.field(default_factory=NodeSpecView)


def node_cidrs(node: NodeView) -> list[str]:
    return node.spec.pod_cidrs or ([node.spec.pod_cidr] if node.spec.pod_cidr else [])


def node_reference(node: NodeView) -> dict[str, str]:
    """The involvedObject upstream's RecordNodeStatusChange writes."""
    return {"apiVersion": "v1", "kind": "Node", "name": node.metadata.name, "uid": node.metadata.uid}


class RangeAllocator:
    def __init__(
        self,
        client: kubeclient.KubeClient,
        nodes: cache.Cache[NodeView],
        recorder: events.EventRecorder,
        cfg: config.Config,
    ) -> None:
        self.client = client
        self.nodes = nodes
        self.recorder = recorder
        self.cfg = cfg
        self.pending: dict[str, list[Network]] = {}
        self.leaked: list[list[Network]] = []
        self._used = [0] * len(cfg.cluster_cidrs)  # each set's bitmap after the last pass
        self._cursor = [0] * len(cfg.cluster_cidrs)  # round-robin cursors carried between passes
        self._not_available: dict[str, str] = {}  # node -> resourceVersion the Event was recorded for
        for s in cfg.cidr_sets():
            MAX_CIDRS.labels(s.label).set(s.max_cidrs)

    def register(self, enqueue: Callable[[str], None]) -> None:
        def on_update(old: NodeView, new: NodeView) -> None:
            # As upstream: a node with CIDRs needs nothing, unless they changed under us.
            if not node_cidrs(new) or node_cidrs(old) != node_cidrs(new):
                enqueue(PASS_KEY)

        self.nodes.add_handler(lambda _: enqueue(PASS_KEY), on_update, lambda _: enqueue(PASS_KEY))

    async def reconcile(self, key: str) -> runtime.Result | None:
        if key != PASS_KEY:
            raise runtime.TerminalError(f"not a key of this controller: {key!r}")
        await self.allocate_pass()
        return None

    async def allocate_pass(self) -> None:
        nodes = self.nodes.list()
        sets = self.rebuild(nodes)
        assignments: list[tuple[NodeView, list[Network]]] = []
        waiting = (n for n in nodes if not node_cidrs(n) and n.metadata.name not in self.pending)
        for node in sorted(waiting, key=lambda n: (n.metadata.creation_timestamp or _EPOCH, n.metadata.name)):
            cidrs = self._allocate(node, sets)
            if cidrs is not None:
                self.pending[node.metadata.name] = cidrs
                assignments.append((node, cidrs))
        self._count(sets)
        await fanout.each(assignments, PATCH_CONCURRENCY, lambda job: self._update_cidrs(*job))

    def rebuild(self, nodes: Iterable[NodeView]) -> list[CIDRSet]:
        """Fresh bitmaps from the service ranges, the cache, and this replica's own writes."""
        sets = self.cfg.cidr_sets()
        for s, cursor in zip(sets, self._cursor, strict=True):
            s.next_candidate = cursor
        for service in self.cfg.service_cidrs:
            for s in sets:
                if _overlaps(s.cluster_cidr, service):
                    s.occupy(service)
        seen = {}
        for node in nodes:
            seen[node.metadata.name] = node
            cidrs = node_cidrs(node)
            if cidrs:
                self._occupy_node(node.metadata.name, cidrs, sets)
        for name in [n for n in self.pending if n not in seen or node_cidrs(seen[n])]:
            del self.pending[name]
        for name in [n for n in self._not_available if n not in seen or node_cidrs(seen[n])]:
            del self._not_available[name]
        for mine in [*self.pending.values(), *self.leaked]:
            for s, cidr in zip(sets, mine, strict=False):
                s.occupy(cidr)
        return sets

    def _occupy_node(self, name: str, cidrs: list[str], sets: list[CIDRSet]) -> None:
        for idx, text in enumerate(cidrs):
            try:
                cidr = config.parse_cidrs(text)[0]
            except ValueError:
                log.error("failed to parse node CIDR", extra={"node": name, "CIDR": text})
                return
            if idx >= len(sets):
                log.error(
                    f"node:{name} has an allocated cidr: {text} at index:{idx} that does not exist "
                    "in cluster cidrs configuration"
                )
                return
            try:
                sets[idx].occupy(cidr)
            except CIDRSetError as exc:
                log.error(f"failed to mark cidr[{cidr}] at idx [{idx}] as occupied for node: {name}: {exc}")

    def _allocate(self, node: NodeView, sets: list[CIDRSet]) -> list[Network] | None:
        out = []
        for idx, s in enumerate(sets):
            try:
                out.append(s.allocate_next())
            except CIDRSetError as exc:
                meta = node.metadata
                if self._not_available.get(meta.name) != meta.resource_version:
                    self._not_available[meta.name] = meta.resource_version
                    self._status_event(node, CIDR_NOT_AVAILABLE)
                log.error(
                    "failed to allocate a CIDR",
                    extra={
                        "node": meta.name,
                        "error": f"failed to allocate cidr from cluster cidr at idx:{idx}: {exc}",
                    },
                )
                return None
            TRIES.labels(s.label).observe(s.last_tries)
            self._cursor[idx] = s.next_candidate
        return out

    def _count(self, sets: list[CIDRSet]) -> None:
        for idx, s in enumerate(sets):
            before = self._used[idx]
            taken, freed = (s.used & ~before).bit_count(), (before & ~s.used).bit_count()
            if taken:
                ALLOCATIONS.labels(s.label).inc(taken)
            if freed:
                RELEASES.labels(s.label).inc(freed)
            USAGE.labels(s.label).set(s.allocated / s.max_cidrs)
            self._used[idx] = s.used

    async def _update_cidrs(self, node: NodeView, cidrs: list[Network]) -> None:
        """Patch the node's podCIDR(s) (upstream updateCIDRsAllocation and PatchNodeCIDRs)."""
        name = node.metadata.name
        texts = [str(c) for c in cidrs]
        path = kubeclient.resource_path("", "v1", "nodes", None, name)
        patch = {"spec": {"podCIDR": texts[0], "podCIDRs": texts}}
        error: kubeclient.ApiError | None = None
        try:
            for _ in range(CIDR_UPDATE_RETRIES):
                try:
                    await self.client.patch(path, patch, "strategic")
                except kubeclient.ApiError as exc:
                    error = exc
                    continue
                log.info("Set Node PodCIDR", extra={"node": name, "CIDR": texts})
                return
        except runtime.NotOwner:
            self.pending.pop(name, None)  # never sent: the next owner starts from the cache
            raise
        except BaseException:
            # Sent or not, nobody knows: keep the CIDRs taken, let the node be tried again.
            self.leaked.append(self.pending.pop(name, cidrs))
            raise
        assert error is not None
        log.error(
            "Failed to update Node PodCIDR after multiple attempts",
            extra={"node": name, "CIDR": texts, "error": str(error)},
        )
        self._status_event(node, CIDR_ASSIGNMENT_FAILED)
        taken = self.pending.pop(name, cidrs)
        if error.code == 504:  # a server timeout: the patch may still land
            self.leaked.append(taken)

    def _status_event(self, node: NodeView, status: str) -> None:
        name = node.metadata.name
        self.recorder.event(
            node_reference(node), events.NORMAL, status, f"Node {name} status is now: {status}"
        )


def _overlaps(a: Network, b: Network) -> bool:
    return a.version == b.version and (a.subnet_of(b) or b.subnet_of(a))  # type: ignore[arg-type]
