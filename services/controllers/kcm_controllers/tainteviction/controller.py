"""The taint-eviction-controller: deletes pods from nodes with NoExecute taints they do not tolerate.

Upstream pkg/controller/tainteviction (taint_eviction.go, timed_workers.go, metrics) on our
runtime; which pod goes when is `tolerations.py`, the condition it sets `condition.py`.

Keys are pods (`namespace/name`). The pods cache enqueues a pod when it is added, deleted,
bound to another node or its tolerations change, if its node has NoExecute taints or this
replica has a deletion pending for it; the nodes cache enqueues every pod on a node whose
NoExecute taints change (or that comes or goes). A reconcile reads the pod and its node
from the caches:
1. pod gone, unbound, or its node without NoExecute taints: a pending deletion is cancelled,
   with upstream's Event (TaintManagerEviction, "Cancelling deletion of Pod <ns>/<name>");
2. a pod being deleted already is left to finish;
3. a taint it does not tolerate: deleted now (a pending deletion cancelled first, with the
   Event, as upstream does);
4. every taint tolerated for ever: a pending deletion cancelled;
5. else deleted at its deadline: now if it has passed, else the key comes back then
   (`runtime.Result(requeue_after=...)`, durable: a restart or a hand-over recomputes the same
   deadline from the taints' `timeAdded`, instead of upstream's timer that starts over).
A deletion is upstream's: the TaintManagerEviction Event ("Marking for deletion Pod
<ns>/<name>"), the pod read from the API server, DisruptionTarget=True patched into its
status, then a plain DELETE (its grace period honoured); `taint_eviction_controller_pod_deletions_total`
counts them and `taint_eviction_controller_pod_deletion_duration_seconds` observes how late
after its deadline each went. A failed request is retried with the queue's backoff (upstream:
five tries 10 ms apart, then it gives up).

The memory of pending deletions (for the cancel Event, and the start of a taint without
`timeAdded`) is this replica's: the keys of partitions it loses are forgotten, and their new
owner rebuilds it when it reconciles every key it gains.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass

import prometheus_client
from kcm_shared import runtime
from kcm_shared.apimachinery import codec, gvr
from kcm_shared.client import kubeclient
from kcm_shared.runtime import cache, events, upstreamflags

from kcm_controllers.tainteviction import condition, tolerations
from kcm_controllers.tainteviction.tolerations import NodeView, PodView

log = logging.getLogger("kcm.taint-eviction")

PODS = gvr.Resource("", "v1", "pods")
NODES = gvr.Resource("", "v1", "nodes")
NAME = "taint-eviction-controller"
NODE_INDEX = "tainteviction/node"
REASON = "TaintManagerEviction"

POD_DELETIONS = prometheus_client.Counter(
    "taint_eviction_controller_pod_deletions_total",
    "Total number of Pods deleted by TaintEvictionController since its start.",
)
POD_DELETION_LATENCY = prometheus_client.Histogram(
    "taint_eviction_controller_pod_deletion_duration_seconds",
    "Latency, in seconds, between the time when a taint effect has been activated for the Pod "
    "and its deletion via TaintEvictionController.",
    buckets=[0.005, 0.025, 0.1, 0.5, 1, 2.5, 10, 30, 60, 120, 180, 240],
)


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _pod_ref(key: str) -> dict[str, str]:
    namespace, _, name = key.partition("/")
    return {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": name}


@dataclass(frozen=True)
class Pending:
    since: dt.datetime  # when this replica first saw the pod owe a deletion
    deadline: dt.datetime


class TaintEvictionController:
    """Handlers and sync of one process; the API client, the recorder and the clock are injected."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        pods: cache.Cache[PodView],
        nodes: cache.Cache[NodeView],
        enqueue: Callable[[str], None],
        recorder: events.EventRecorder,
        *,
        now: Callable[[], dt.datetime] = _utcnow,
    ) -> None:
        self.client = client
        self.pods = pods
        self.nodes = nodes
        self.enqueue = enqueue
        self.recorder = recorder
        self.now = now
        self.pending: dict[str, Pending] = {}

    def register(self) -> None:
        self.pods.add_index(NODE_INDEX, lambda p: [p.spec.node_name] if p.spec.node_name else [])
        self.pods.add_handler(on_add=self._pod_seen, on_update=self._pod_updated, on_delete=self._pod_seen)
        self.nodes.add_handler(
            on_add=self._node_seen, on_update=self._node_updated, on_delete=self._node_seen
        )

    def forget(self, owned: Callable[[str], bool]) -> None:
        for key in [k for k in self.pending if not owned(k)]:
            del self.pending[key]

    # --- handlers: keys only ---------------------------------------------------------------

    def _pod_seen(self, pod: PodView) -> None:
        if self._may_owe(pod):
            self.enqueue(codec.key_of(pod))

    def _pod_updated(self, old: PodView, new: PodView) -> None:
        moved = old.spec.node_name != new.spec.node_name
        if (moved or old.spec.tolerations != new.spec.tolerations) and self._may_owe(new):
            self.enqueue(codec.key_of(new))

    def _may_owe(self, pod: PodView) -> bool:
        """Whether a sync of the pod can do anything: its node has NoExecute taints, or this
        replica waits to delete it. A pod on an untainted node is left alone, as upstream's
        handlePodUpdate leaves it; the node's handlers enqueue its pods once it is tainted,
        and a pending deletion elsewhere was cancelled when its node's taints went."""
        return codec.key_of(pod) in self.pending or bool(self._taints_of(pod))

    def _node_seen(self, node: NodeView) -> None:
        for pod in self.pods.by_index(NODE_INDEX, node.metadata.name):
            self.enqueue(codec.key_of(pod))

    def _node_updated(self, old: NodeView, new: NodeView) -> None:
        if tolerations.no_execute_taints(old.spec.taints) != tolerations.no_execute_taints(new.spec.taints):
            self._node_seen(new)

    # --- sync -------------------------------------------------------------------------------

    def _taints_of(self, pod: PodView) -> list[tolerations.Taint]:
        node = self.nodes.get("", pod.spec.node_name) if pod.spec.node_name else None
        return tolerations.no_execute_taints(node.spec.taints) if node is not None else []

    def _cancel(self, key: str) -> None:
        if self.pending.pop(key, None) is not None:
            self.recorder.event(_pod_ref(key), events.NORMAL, REASON, f"Cancelling deletion of Pod {key}")

    async def reconcile(self, key: str) -> runtime.Result | None:
        pod = self.pods.get_key(key)
        taints = self._taints_of(pod) if pod is not None else []
        if pod is None or not taints:
            self._cancel(key)
            return None
        if pod.metadata.deletion_timestamp is not None:
            return None
        now = self.now()
        before = self.pending.get(key)
        verdict = tolerations.verdict(taints, pod.spec.tolerations, now, before.since if before else now)
        if verdict.forever:
            log.debug(
                "Current tolerations for pod tolerate forever, cancelling any scheduled deletion",
                extra={"pod": key},
            )
            self._cancel(key)
            return None
        assert verdict.deadline is not None
        deadline = verdict.deadline
        if verdict.untolerated:
            log.info(
                "Not all taints are tolerated after update for pod on node",
                extra={"pod": key, "node": pod.spec.node_name},
            )
            self._cancel(key)  # upstream cancels (with its Event) before it deletes at once
        elif before is not None:
            deadline = min(deadline, before.deadline)  # a wait already begun is never lengthened
        if deadline > now:
            self.pending[key] = Pending(before.since if before else now, deadline)
            return runtime.Result(requeue_after=(deadline - now).total_seconds())
        await self._delete(key, deadline)
        self.pending.pop(key, None)
        return None

    async def _delete(self, key: str, deadline: dt.datetime) -> None:
        """upstream's deletePodHandler and addConditionAndDeletePod; raises on a failed request."""
        log.info("Deleting pod", extra={"controller": NAME, "pod": key})
        self.recorder.event(_pod_ref(key), events.NORMAL, REASON, f"Marking for deletion Pod {key}")
        namespace, _, name = key.partition("/")
        path = kubeclient.resource_path("", "v1", "pods", namespace, name)
        try:
            fresh = await self.client.get(path)
            patch = condition.status_patch(dict(fresh), self.now())
            if patch is not None:
                await self.client.patch(f"{path}/status", patch, "strategic")
            await self.client.delete(path)
        except kubeclient.ApiError as exc:
            if exc.not_found:
                return
            raise
        POD_DELETIONS.inc()
        POD_DELETION_LATENCY.observe(max((self.now() - deadline).total_seconds(), 0.0))


def disabled_by(args: argparse.Namespace) -> str | None:
    """Upstream starts it only with SeparateTaintEvictionController (beta, on by default);
    without the gate its node lifecycle controller evicts, which kcm does not do."""
    gates = getattr(args, "feature_gates", None) or {}
    if upstreamflags.gates_on(gates, ("SeparateTaintEvictionController",)):
        return None
    return "disabled by a feature gate (requires SeparateTaintEvictionController)"


def build(ctx: runtime.Context) -> runtime.Reconcile:
    tc = TaintEvictionController(ctx.client, ctx.caches[PODS], ctx.caches[NODES], ctx.enqueue, ctx.recorder)
    tc.register()
    ctx.on_partitions_lost(tc.forget)
    return tc.reconcile


SPEC = runtime.Spec(
    name=NAME,
    alias=NAME,  # upstream gives it no alias
    primary=PODS,
    views={PODS: PodView, NODES: NodeView},
    build=build,
    workers=8,  # upstream's UpdateWorkerSize
    disabled_by=disabled_by,
    queue_name="noexec_taint_pod",
    package=__package__,
)
