"""The node lifecycle controller: node health from heartbeats, taints from conditions.

Upstream pkg/controller/nodelifecycle/node_lifecycle_controller.go (v1.32, default feature
gates: the taint-eviction-controller runs apart and deletes the pods; this one only writes
Nodes, Pod statuses and Events) with pkg/controller/util/node (MarkPodsNotReady, the Event
helpers, SwapNodeControllerTaint), on our runtime. The pure decisions are `health.py`,
`taints.py` and `ratelimited.py`. Three kinds of work keys:

1. `MONITOR_KEY`, in one replica at a time (a well-known key that requeues itself): every
   `--node-monitor-period` the monitor pass (monitorNodeHealth) - RegisteredNode/RemovingNode
   Events; each node's health from its Ready heartbeat and Lease, a node silent past its grace
   period getting Ready and the pressure conditions Unknown; on Ready leaving True the
   NodeNotReady Event and MarkPodsNotReady (each pod's Ready condition False, and a
   NodeNotReady Event on it); a not ready node queued in its zone's rate-limited queue for the
   NoExecute not-ready/unreachable taint (swapped at once when the other one is on), a Ready
   one untainted; then the zones' states (handleDisruption), which set each zone queue's rate
   and, when every zone is fully disrupted, untaint every node and stop tainting. Between
   passes the same key runs the NoExecute tainting pass (doNoExecuteTaintingPass), as often
   as the queues' rates let it (upstream polls every 100 ms).
2. A node's name: the NoSchedule tainting pass (doNoScheduleTaintingPass: a NoSchedule taint
   for each condition and for spec.unschedulable) and the beta os/arch labels
   (reconcileNodeLabels), enqueued when a node's cached state calls for either.
3. A pod's namespace/name, enqueued when it is bound to a node that is not Ready:
   MarkPodsNotReady for it (upstream's pod update queue, which takes every bound pod and
   then skips those on Ready nodes).

The health memory (when each node was last heard from) and the zone queues live in the
replica that owns MONITOR_KEY; a new owner starts them over, as a new upstream leader does:
every node gets a fresh grace period and its NoExecute taints are removed and queued again.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec
from kcm_shared import runtime
from kcm_shared.apimachinery import codec, gvr, pflagvalue
from kcm_shared.base import fanout
from kcm_shared.client import kubeclient
from kcm_shared.runtime import cache, events

from kcm_controllers.nodelifecycle import health, metrics, taints
from kcm_controllers.nodelifecycle.health import Health
from kcm_controllers.nodelifecycle.ratelimited import RateLimitedTimedQueue, TimedValue
from kcm_controllers.nodelifecycle.taints import TaintRef
from kcm_controllers.nodelifecycle.views import LeaseView, NodeCondition, NodeView, PodView, condition

log = logging.getLogger("kcm.nodelifecycle")

NODES = gvr.Resource("", "v1", "nodes")
PODS = gvr.Resource("", "v1", "pods")
LEASES = gvr.Resource("coordination.k8s.io", "v1", "leases")
NODE_LEASE_NAMESPACE = "kube-node-lease"
MONITOR_KEY = "@monitor"  # not a node name nor a namespace/name: the pass's own key
NODE_INDEX = "spec.nodeName"
NODE_EVICTION_PERIOD = 0.1  # upstream scheduler.NodeEvictionPeriod: the tainting pass's poll
NODE_HEALTH_UPDATE_RETRY = 5  # upstream scheduler.NodeHealthUpdateRetry
NODE_UPDATE_WORKERS = 8  # upstream nodeUpdateWorkerSize: nodes whose health is updated at once
RETRY_LATER = 0.05  # upstream: a queued node without a Ready condition is tried again 50 ms on


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True)
class Config:
    monitor_period: float = 5.0
    monitor_grace: float = 50.0
    startup_grace: float = 60.0
    rates: health.Rates = field(default_factory=health.Rates)


class NodeLifecycle:
    """The controller of one replica; the API client, the Event recorder and both clocks are
    injected."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        nodes: cache.Cache[NodeView],
        leases: cache.Cache[LeaseView],
        pods: cache.Cache[PodView],
        recorder: events.EventRecorder,
        config: Config,
        *,
        now: Callable[[], dt.datetime] = _utcnow,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.nodes = nodes
        self.leases = leases
        self.pods = pods
        self.recorder = recorder
        self.config = config
        self.now = now
        self.monotonic = monotonic
        self.known: dict[str, NodeView] = {}
        self.healths: dict[str, Health] = {}
        self.zone_states: dict[str, str] = {}
        self.tainters: dict[str, RateLimitedTimedQueue] = {}
        self.retry: set[str] = set()  # nodes whose pods still need marking not ready
        self.next_monitor = 0.0
        pods.add_index(NODE_INDEX, lambda p: [p.spec.node_name] if p.spec.node_name else [])

    def register(self, enqueue: Callable[[str], None]) -> None:
        def node_changed(node: NodeView) -> None:
            add, remove = taints.no_schedule_diff(node)
            if add or remove or taints.label_updates(node):
                enqueue(node.metadata.name)

        def pod_changed(old: PodView | None, new: PodView) -> None:
            # Upstream queues every newly bound pod and its worker then finds most nodes Ready;
            # here that check comes first, as each queued key costs a durable work item. A node
            # that goes NotReady later has its pods marked by the monitor instead.
            bound = new.spec.node_name and (old is None or old.spec.node_name != new.spec.node_name)
            if bound and self._node_not_ready(new.spec.node_name):
                enqueue(codec.key_of(new))

        self.nodes.add_handler(node_changed, lambda _old, new: node_changed(new))
        self.pods.add_handler(lambda p: pod_changed(None, p), pod_changed)

    def keys(self) -> list[str]:
        return [MONITOR_KEY, *(n.metadata.name for n in self.nodes.list())]

    async def reconcile(self, key: str) -> runtime.Result | None:
        if key == MONITOR_KEY:
            return await self.monitor_key()
        if "/" in key:
            await self.process_pod(key)
        else:
            await self.process_node(key)
        return None

    # -- the monitor key ----------------------------------------------------------------------

    async def monitor_key(self) -> runtime.Result:
        if self.monotonic() >= self.next_monitor:
            await self.monitor_node_health()
            self.next_monitor = self.monotonic() + self.config.monitor_period
        await self.no_execute_tainting_pass()
        delay = self.next_monitor - self.monotonic()
        due = [d for q in self.tainters.values() if (d := q.next_due(self.monotonic())) is not None]
        if due:
            delay = min(delay, max(min(due), NODE_EVICTION_PERIOD))
        return runtime.Result(requeue_after=max(delay, NODE_EVICTION_PERIOD))

    async def monitor_node_health(self) -> None:
        start = time.perf_counter()
        nodes = self.nodes.list()
        added, deleted, new_zones = self._classify(nodes)
        for node in new_zones:
            self._tainter_for(node)
        for node in added:
            log.info("Controller observed a new Node", extra={"node": node.metadata.name})
            self._node_event(node, "RegisteredNode", f"Registered Node {node.metadata.name} in Controller")
            self.known[node.metadata.name] = node
            self._tainter_for(node)
            await self._mark_reachable(node)
        for node in deleted:
            log.info("Controller observed a Node deletion", extra={"node": node.metadata.name})
            self._node_event(node, "RemovingNode", f"Removing Node {node.metadata.name} from Controller")
            del self.known[node.metadata.name]
            self.healths.pop(node.metadata.name, None)
            self.retry.discard(node.metadata.name)
        by_zone: dict[str, list[NodeCondition | None]] = {}

        async def one(node: NodeView) -> None:
            began = time.perf_counter()
            try:
                await self._monitor_one(node, by_zone)
            finally:
                metrics.UPDATE_NODE_HEALTH.observe(time.perf_counter() - began)

        await fanout.each(nodes, NODE_UPDATE_WORKERS, one)
        await self._handle_disruption(by_zone, nodes)
        metrics.UPDATE_ALL_NODES_HEALTH.observe(time.perf_counter() - start)

    def _classify(self, nodes: Sequence[NodeView]) -> tuple[list[NodeView], list[NodeView], list[NodeView]]:
        """(added, deleted, known nodes of a zone without state): upstream classifyNodes."""
        added, new_zones = [], []
        for node in nodes:
            if node.metadata.name not in self.known:
                added.append(node)
            elif health.zone_key(node) not in self.zone_states:
                new_zones.append(node)
        present = {n.metadata.name for n in nodes}
        deleted = [n for name, n in self.known.items() if name not in present]
        return added, deleted, new_zones

    def _tainter_for(self, node: NodeView) -> RateLimitedTimedQueue:
        zone = health.zone_key(node)
        if zone not in self.zone_states:
            self.zone_states[zone] = health.INITIAL
            self.tainters[zone] = RateLimitedTimedQueue(self.config.rates.eviction, self.monotonic())
            log.info("Initializing eviction metric for zone", extra={"zone": zone})
            metrics.EVICTIONS.labels(zone).inc(0)
        return self.tainters[zone]

    async def _monitor_one(self, node: NodeView, by_zone: dict[str, list[NodeCondition | None]]) -> None:
        name = node.metadata.name
        outcome = await self._update_health(node)
        if outcome is None:
            log.error(
                "Update health of Node from Controller error, Skipping - no pods will be evicted",
                extra={"node": name},
            )
            return
        node, observed, current = outcome
        if not health.excluded_from_disruption(node):
            by_zone.setdefault(health.zone_key(node), []).append(current)
        if current is None:
            self.retry.discard(name)
            return
        pods = self.pods.by_index(NODE_INDEX, name)
        await self._taint_by_readiness(node, observed)
        mark = False
        if current.status != "True" and observed.status == "True":
            self._node_event(node, "NodeNotReady", f"Node {name} status is now: NodeNotReady", status=True)
            mark = True
        elif name in self.retry and observed.status != "True":
            mark = True
        if mark and not await self._mark_pods_not_ready(pods, name):
            self.retry.add(name)
            return
        self.retry.discard(name)

    async def _update_health(
        self, node: NodeView
    ) -> tuple[NodeView, NodeCondition, NodeCondition | None] | None:
        """(node, Ready as observed, Ready now) after tryUpdateNodeHealth, retried on a conflict
        with the node read again; None when it kept failing or the node is gone."""
        for attempt in range(NODE_HEALTH_UPDATE_RETRY):
            try:
                observed, current = await self._try_update_health(node)
                return node, observed, current
            except kubeclient.REQUEST_ERRORS as exc:
                log.error("Error updating node", extra={"node": node.metadata.name, "error": str(exc)})
            if attempt + 1 == NODE_HEALTH_UPDATE_RETRY:
                break
            fresh = await self._get_node(node.metadata.name)
            if fresh is None:
                return None
            node = fresh
        return None

    async def _try_update_health(self, node: NodeView) -> tuple[NodeCondition, NodeCondition | None]:
        name = node.metadata.name
        now = self.now()
        lease = self.leases.get(NODE_LEASE_NAMESPACE, name)
        seen = health.observe(
            node,
            self.healths.get(name),
            lease.spec.renew_time if lease else None,
            now,
            monitor_grace=self.config.monitor_grace,
            startup_grace=self.config.startup_grace,
        )
        self.healths[name] = seen.health
        current = condition(node, health.READY)
        if not seen.stale:
            return seen.observed, current
        log.debug("Node hasn't been updated", extra={"node": name, "grace": seen.grace})
        conditions = health.unknown_conditions(node, now)
        unknown = next(c for c in conditions if c.type == health.READY)
        if unknown == seen.observed:
            return seen.observed, unknown
        path = kubeclient.resource_path("", "v1", "nodes", name=name, subresource="status")
        patch = {
            "metadata": {"resourceVersion": node.metadata.resource_version},
            "status": {"conditions": msgspec.to_builtins(conditions)},
        }
        await self.client.patch(path, patch, "strategic")
        self.healths[name] = replace(seen.health, ready=unknown, ready_transition=now)
        return seen.observed, unknown

    async def _get_node(self, name: str) -> NodeView | None:
        try:
            raw = await self.client.get(kubeclient.resource_path("", "v1", "nodes", name=name))
        except kubeclient.REQUEST_ERRORS as exc:
            log.error(
                "Failed while getting a Node to retry updating node health. Probably Node was deleted",
                extra={"node": name, "error": str(exc)},
            )
            return None
        return msgspec.convert(raw, NodeView, from_attributes=False, strict=False)

    async def _taint_by_readiness(self, node: NodeView, observed: NodeCondition) -> None:
        """upstream processTaintBaseEviction: NoExecute taints follow the observed Ready."""
        if observed.status in ("False", "Unknown"):
            want, other = (
                (taints.NOT_READY_NO_EXECUTE, taints.UNREACHABLE_NO_EXECUTE)
                if observed.status == "False"
                else (taints.UNREACHABLE_NO_EXECUTE, taints.NOT_READY_NO_EXECUTE)
            )
            if taints.has(node, other):
                if not await self._swap(node, [want], [other]):
                    log.error("Failed to instantly swap taints. Will try again in the next cycle")
            else:
                queue = self._tainter_for(node)
                if not taints.has(node, want):
                    queue.remove(node.metadata.name)
                queue.add(node.metadata.name, node.metadata.uid, self.monotonic())
        elif observed.status == "True":
            await self._mark_reachable(node)

    async def _mark_reachable(self, node: NodeView) -> bool:
        """Both NoExecute taints off and the node out of its zone queue (markNodeAsReachable)."""
        present = [
            r for r in (taints.UNREACHABLE_NO_EXECUTE, taints.NOT_READY_NO_EXECUTE) if taints.has(node, r)
        ]
        if present and not await self._swap(node, [], present):
            log.error("Failed to remove taints from node", extra={"node": node.metadata.name})
            return False
        return self._tainter_for(node).remove(node.metadata.name)

    async def _handle_disruption(
        self, by_zone: dict[str, list[NodeCondition | None]], nodes: Sequence[NodeView]
    ) -> None:
        """upstream handleDisruption: each zone's state and its queue's rate."""
        rates = self.config.rates
        new_states: dict[str, str] = {}
        all_down = True
        for zone, ready in by_zone.items():
            unhealthy, state = health.zone_state(ready, rates.unhealthy_threshold)
            metrics.ZONE_SIZE.labels(zone).set(len(ready))
            metrics.ZONE_HEALTH.labels(zone).set(100 * (len(ready) - unhealthy) / len(ready))
            metrics.UNHEALTHY_NODES.labels(zone).set(unhealthy)
            all_down = all_down and state == health.FULL_DISRUPTION
            new_states[zone] = state
            if zone not in self.zone_states:
                log.error("Setting initial state for unseen zone", extra={"zone": zone})
                self.zone_states[zone] = health.INITIAL
                self._tainter_for_zone(zone)
        all_were_down = True
        for zone, state in list(self.zone_states.items()):
            if zone not in by_zone:
                metrics.ZONE_SIZE.labels(zone).set(0)
                metrics.ZONE_HEALTH.labels(zone).set(100)
                metrics.UNHEALTHY_NODES.labels(zone).set(0)
                del self.zone_states[zone]
                continue
            if state != health.FULL_DISRUPTION:
                all_were_down = False
                break
        if all_down and all_were_down:
            return
        now = self.monotonic()
        if all_down:
            log.info("Controller detected that all Nodes are not-Ready. Entering master disruption mode")
            for node in nodes:
                await self._mark_reachable(node)
            for zone in self.zone_states:
                self.tainters[zone].swap_limiter(0, now)
                self.zone_states[zone] = health.FULL_DISRUPTION
            return
        if all_were_down:
            log.info("Controller detected that some Nodes are Ready. Exiting master disruption mode")
            wall = self.now()
            for node in nodes:
                saved = self.healths.get(node.metadata.name)
                if saved is not None:
                    self.healths[node.metadata.name] = replace(saved, probe=wall, ready_transition=wall)
            for zone in self.zone_states:
                state = new_states.get(zone, health.NORMAL)
                self.tainters[zone].swap_limiter(
                    health.zone_qps(state, len(by_zone.get(zone, [])), rates), now
                )
                self.zone_states[zone] = state
            return
        for zone, state in list(self.zone_states.items()):
            new = new_states.get(zone, state)
            if new == state:
                continue
            log.info(
                "Controller detected that zone is now in new state", extra={"zone": zone, "newState": new}
            )
            self.tainters[zone].swap_limiter(health.zone_qps(new, len(by_zone.get(zone, [])), rates), now)
            self.zone_states[zone] = new

    def _tainter_for_zone(self, zone: str) -> None:
        self.tainters.setdefault(zone, RateLimitedTimedQueue(self.config.rates.eviction, self.monotonic()))

    async def no_execute_tainting_pass(self) -> None:
        """upstream doNoExecuteTaintingPass: each zone's due nodes, as fast as its rate lets."""
        for zone, queue in list(self.tainters.items()):

            async def attempt(entry: TimedValue, zone: str = zone) -> tuple[bool, float]:
                node = self.nodes.get("", entry.value)
                if node is None:
                    log.info("Node no longer present in nodeLister", extra={"node": entry.value})
                    return True, 0.0
                ready = condition(node, health.READY)
                if ready is None:
                    return False, RETRY_LATER
                if ready.status == "False":
                    add, other = taints.NOT_READY_NO_EXECUTE, taints.UNREACHABLE_NO_EXECUTE
                elif ready.status == "Unknown":
                    add, other = taints.UNREACHABLE_NO_EXECUTE, taints.NOT_READY_NO_EXECUTE
                else:
                    return True, 0.0  # Ready again: nothing to taint
                done = await self._swap(node, [add], [other])
                if done:
                    metrics.EVICTIONS.labels(health.zone_key(node) or zone).inc()
                return done, 0.0

            await queue.try_each(self.monotonic, attempt)

    # -- node keys: NoSchedule taints and labels ------------------------------------------------

    async def process_node(self, name: str) -> None:
        node = self.nodes.get("", name)
        if node is None:
            return
        add, remove = taints.no_schedule_diff(node)
        if (add or remove) and not await self._swap(node, add, remove):
            raise RuntimeError(f"failed to swap taints of node {name}")
        updates = taints.label_updates(node)
        if updates:
            path = kubeclient.resource_path("", "v1", "nodes", name=name)
            await self.client.patch(path, {"metadata": {"labels": updates}}, "strategic")

    async def _swap(self, node: NodeView, add: list[TaintRef], remove: list[TaintRef]) -> bool:
        """One write of the node's taints with `add` on and `remove` off (upstream
        SwapNodeControllerTaint's two), guarded by the resourceVersion and redone on the node
        read again after a conflict; False (logged) when it failed."""
        name = node.metadata.name
        path = kubeclient.resource_path("", "v1", "nodes", name=name)
        current: list[dict[str, Any]] = msgspec.to_builtins(node.spec.taints)
        version = node.metadata.resource_version
        for _ in range(NODE_HEALTH_UPDATE_RETRY):
            wanted = taints.with_taints(current, add, remove, health.rfc3339(self.now()))
            if wanted == current:
                return True
            try:
                await self.client.patch(
                    path, {"metadata": {"resourceVersion": version}, "spec": {"taints": wanted}}
                )
                return True
            except kubeclient.ApiError as exc:
                if not exc.conflict:
                    log.error("unable to swap taints of node", extra={"node": name, "error": str(exc)})
                    return False
            except kubeclient.REQUEST_ERRORS as exc:
                log.error("unable to swap taints of node", extra={"node": name, "error": str(exc)})
                return False
            fresh = await self._get_node(name)
            if fresh is None:
                return False
            current, version = msgspec.to_builtins(fresh.spec.taints), fresh.metadata.resource_version
        return False

    # -- pod keys and MarkPodsNotReady ------------------------------------------------------

    async def process_pod(self, key: str) -> None:
        namespace, _, name = key.partition("/")
        pod = self.pods.get(namespace, name)
        if pod is None or not pod.spec.node_name:
            return
        if self._node_not_ready(pod.spec.node_name) and not await self._mark_pods_not_ready(
            [pod], pod.spec.node_name
        ):
            raise RuntimeError(f"unable to mark pod {key} NotReady")

    def _node_not_ready(self, name: str) -> bool:
        """The node is known and its Ready condition says other than True."""
        node = self.nodes.get("", name)
        ready = condition(node, health.READY) if node else None
        return ready is not None and ready.status != "True"

    async def _mark_pods_not_ready(self, pods: Sequence[PodView], node_name: str) -> bool:
        """upstream MarkPodsNotReady: each pod's Ready condition False (its reason and message
        kept, its transition now), then a NodeNotReady Event on it; False when a write failed."""
        ok = True
        for pod in pods:
            if pod.spec.node_name != node_name:
                continue
            ready = next((c for c in pod.status.conditions if c.type == "Ready"), None)
            if ready is None or ready.status == "False":
                continue
            cond = msgspec.to_builtins(
                msgspec.structs.replace(
                    ready, status="False", last_transition_time=health.rfc3339(self.now())
                )
            )
            path = kubeclient.resource_path("", "v1", "pods", pod.metadata.namespace, pod.metadata.name)
            try:
                await self.client.patch(f"{path}/status", {"status": {"conditions": [cond]}}, "strategic")
            except kubeclient.ApiError as exc:
                if exc.not_found:
                    continue
                log.info(
                    "Failed to update status for pod", extra={"pod": codec.key_of(pod), "error": str(exc)}
                )
                ok = False
            except kubeclient.REQUEST_ERRORS as exc:
                log.info(
                    "Failed to update status for pod", extra={"pod": codec.key_of(pod), "error": str(exc)}
                )
                ok = False
            self.recorder.event(pod, events.WARNING, "NodeNotReady", "Node is not ready")
        return ok

    def _node_event(self, node: NodeView, reason: str, message: str, *, status: bool = False) -> None:
        """RecordNodeEvent ("Node X event: ...") or, with `status`, RecordNodeStatusChange."""
        ref = {"apiVersion": "v1", "kind": "Node", "name": node.metadata.name, "uid": node.metadata.uid}
        text = message if status else f"Node {node.metadata.name} event: {message}"
        self.recorder.event(ref, events.NORMAL, reason, text)


def flags(p: runtime.FlagSet) -> None:
    p.add_argument("--node-monitor-period", type=pflagvalue.duration, default=5.0, metavar="DURATION")
    p.add_argument("--node-monitor-grace-period", type=pflagvalue.duration, default=50.0, metavar="DURATION")
    p.add_argument("--node-startup-grace-period", type=pflagvalue.duration, default=60.0, metavar="DURATION")
    p.add_argument("--node-eviction-rate", type=pflagvalue.float32, default=0.1, metavar="QPS")
    p.add_argument("--secondary-node-eviction-rate", type=pflagvalue.float32, default=0.01, metavar="QPS")
    p.add_argument("--large-cluster-size-threshold", type=pflagvalue.int32, default=50, metavar="N")
    p.add_argument("--unhealthy-zone-threshold", type=pflagvalue.float32, default=0.55, metavar="FRACTION")


def config(args: Any) -> Config:
    return Config(
        monitor_period=args.node_monitor_period,
        monitor_grace=args.node_monitor_grace_period,
        startup_grace=args.node_startup_grace_period,
        rates=health.Rates(
            eviction=args.node_eviction_rate,
            secondary=args.secondary_node_eviction_rate,
            large_cluster=args.large_cluster_size_threshold,
            unhealthy_threshold=args.unhealthy_zone_threshold,
        ),
    )


def build(ctx: runtime.Context) -> runtime.Reconcile:
    nlc = NodeLifecycle(
        ctx.client, ctx.caches[NODES], ctx.caches[LEASES], ctx.caches[PODS], ctx.recorder, config(ctx.args)
    )
    nlc.register(ctx.enqueue)
    ctx.keys = nlc.keys
    return nlc.reconcile


SPEC = runtime.Spec(
    name="node-lifecycle-controller",
    alias="nodelifecycle",
    primary=None,
    views={NODES: NodeView, LEASES: LeaseView, PODS: PodView},
    build=build,
    workers=NODE_UPDATE_WORKERS,
    flags=flags,
    event_component="node-controller",
    queue_name="node_lifecycle_controller",
    package=__package__,
)
