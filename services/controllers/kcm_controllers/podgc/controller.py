"""The pod garbage collector: deletes terminated pods over a threshold and pods left behind.

Upstream pkg/controller/podgc/gc_controller.go (v1.32, default feature gates) and its metrics
(pkg/controller/podgc/metrics) on our runtime; which pods each step picks is `selection.py`.

One pass (`PodGC.gc`) over the cached pods and nodes, in one replica at a time: the work
queue's well-known key GC_KEY (`Context.keys`, `primary=None`) whose reconcile runs the
pass and requeues itself after the check period (upstream's gcCheckPeriod, 20 s). In order:
1. terminated pods (Succeeded, Failed) beyond `--terminated-pod-gc-threshold` (12500; <= 0
   turns this step off), evicted ones first, then the oldest;
2. terminating pods on a node that is not Ready and has the `node.kubernetes.io/out-of-service`
   taint;
3. pods bound to a node that does not exist: the node must have been missing from the cache
   for the quarantine (upstream's 40 s) and a GET must answer 404;
4. terminating pods bound to no node.
Each pod is force-deleted as upstream's markFailedAndDeletePod does: a pod not yet Succeeded
or Failed is first patched Failed through pods/status (with the DisruptionTarget condition,
reason DeletionByPodGC, for an orphan), then deleted with gracePeriodSeconds 0.
`pod_gc_collector_force_delete_pods_total` and `..._errors_total` count them by namespace and
reason (terminated, out-of-service, orphaned, unscheduled). A failed deletion is logged and
counted, whether the API answered or the connection broke; the pass goes on and the next
one tries again 20 s later, as upstream's (a failed request never turns the period into the
queue's backoff). The quarantine is this replica's memory: a
new owner of the key starts it over, which only delays a deletion.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import time
from collections.abc import Callable, Sequence

import prometheus_client
from kcm_shared import runtime
from kcm_shared.apimachinery import codec, goduration, gvr
from kcm_shared.base import fanout
from kcm_shared.client import kubeclient
from kcm_shared.runtime import cache

from kcm_controllers.podgc import selection
from kcm_controllers.podgc.selection import NodeView, PodView

log = logging.getLogger("kcm.podgc")

PODS = gvr.Resource("", "v1", "pods")
NODES = gvr.Resource("", "v1", "nodes")
GC_KEY = "@gc"  # not a namespace/name: the pass's one well-known key
GC_CHECK_PERIOD = 20.0  # upstream gcCheckPeriod
QUARANTINE_TIME = 40.0  # upstream quarantineTime
DEFAULT_THRESHOLD = 12500
DELETE_CONCURRENCY = 50  # force deletions in flight at once (upstream: one goroutine per pod)

REASON_TERMINATED = "terminated"
REASON_OUT_OF_SERVICE = "out-of-service"
REASON_ORPHANED = "orphaned"
REASON_UNSCHEDULED = "unscheduled"
ORPHAN_CONDITION = {
    "type": selection.DISRUPTION_TARGET,
    "status": "True",
    "reason": "DeletionByPodGC",
    "message": "PodGC: node no longer exists",
}

DELETING_PODS = prometheus_client.Counter(
    "pod_gc_collector_force_delete_pods_total",
    "Number of pods that are being forcefully deleted since the Pod GC Controller started.",
    ["namespace", "reason"],
)
DELETING_POD_ERRORS = prometheus_client.Counter(
    "pod_gc_collector_force_delete_pod_errors_total",
    "Number of errors encountered when forcefully deleting the pods since the Pod GC Controller started.",
    ["namespace", "reason"],
)


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class PodGC:
    """The pass of one replica; the API client and both clocks are injected."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        pods: cache.Cache[PodView],
        nodes: cache.Cache[NodeView],
        *,
        threshold: int = DEFAULT_THRESHOLD,
        check_period: float = GC_CHECK_PERIOD,
        quarantine: float = QUARANTINE_TIME,
        now: Callable[[], dt.datetime] = _utcnow,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.pods = pods
        self.nodes = nodes
        self.threshold = threshold
        self.check_period = check_period
        self.quarantine = selection.Quarantine(quarantine)
        self.now = now
        self.monotonic = monotonic

    async def reconcile(self, key: str) -> runtime.Result | None:
        if key != GC_KEY:
            raise runtime.TerminalError(f"not a key of this controller: {key!r}")
        await self.gc()
        return runtime.Result(requeue_after=self.check_period)

    async def gc(self) -> None:
        pods = self.pods.list()
        nodes = {n.metadata.name: n for n in self.nodes.list()}
        if self.threshold > 0:
            await self.gc_terminated(pods)
        await self.gc_terminating(pods, nodes)
        await self.gc_orphaned(pods, nodes)
        await self.gc_unscheduled_terminating(pods)

    async def gc_terminated(self, pods: Sequence[PodView]) -> None:
        doomed = selection.terminated_to_delete(pods, self.threshold)
        if doomed:
            log.info("Garbage collecting pods", extra={"numPods": len(doomed)})
            await self._delete_all(doomed, REASON_TERMINATED)

    async def gc_terminating(self, pods: Sequence[PodView], nodes: dict[str, NodeView]) -> None:
        doomed = selection.terminating_out_of_service(pods, nodes)
        if doomed:
            log.debug(
                "Garbage collecting pods that are terminating on node tainted with "
                "node.kubernetes.io/out-of-service",
                extra={"numPods": len(doomed)},
            )
            await self._delete_all(doomed, REASON_OUT_OF_SERVICE)

    async def gc_orphaned(self, pods: Sequence[PodView], nodes: dict[str, NodeView]) -> None:
        due = self.quarantine.observe(selection.missing_nodes(pods, nodes), self.monotonic())
        deleted = set()
        for name in due:
            self.quarantine.release(name)
            try:
                if not await self._node_exists(name):
                    deleted.add(name)
            except kubeclient.REQUEST_ERRORS as exc:
                # The name comes back into quarantine on the next pass if pods still need it.
                log.error("Error while getting node", extra={"node": name, "error": str(exc)})
        for pod in pods:
            if pod.spec.node_name not in deleted:
                continue
            log.info(
                "Found orphaned Pod assigned to the Node, deleting",
                extra={"pod": codec.key_of(pod), "node": pod.spec.node_name},
            )
            if await self._force_delete(pod, REASON_ORPHANED, ORPHAN_CONDITION):
                log.info("Forced deletion of orphaned Pod succeeded", extra={"pod": codec.key_of(pod)})

    async def gc_unscheduled_terminating(self, pods: Sequence[PodView]) -> None:
        for pod in selection.unscheduled_terminating(pods):
            log.info(
                "Found unscheduled terminating Pod not assigned to any Node, deleting",
                extra={"pod": codec.key_of(pod)},
            )
            if await self._force_delete(pod, REASON_UNSCHEDULED):
                log.info(
                    "Forced deletion of unscheduled terminating Pod succeeded",
                    extra={"pod": codec.key_of(pod)},
                )

    async def _node_exists(self, name: str) -> bool:
        try:
            await self.client.get(kubeclient.resource_path("", "v1", "nodes", None, name))
        except kubeclient.ApiError as exc:
            if exc.not_found:
                return False
            raise
        return True

    async def _delete_all(self, pods: Sequence[PodView], reason: str) -> None:
        async def one(pod: PodView) -> None:
            await self._force_delete(pod, reason)

        await fanout.each(pods, DELETE_CONCURRENCY, one)

    async def _force_delete(self, pod: PodView, reason: str, condition: dict[str, str] | None = None) -> bool:
        """Mark `pod` Failed unless it is terminal already, then delete it with no grace
        period (upstream markFailedAndDeletePodWithCondition); False (logged and counted)
        when a request failed."""
        meta = pod.metadata
        DELETING_PODS.labels(meta.namespace, reason).inc()
        log.info("PodGC is force deleting Pod", extra={"pod": codec.key_of(pod)})
        path = kubeclient.resource_path("", "v1", "pods", meta.namespace, meta.name)
        try:
            if pod.status.phase not in ("Succeeded", "Failed"):
                patch = selection.failed_status_patch(pod, condition, self.now())
                await self.client.patch(f"{path}/status", patch, "strategic")
            await self.client.delete(path, {"gracePeriodSeconds": 0})
        except kubeclient.REQUEST_ERRORS as exc:
            DELETING_POD_ERRORS.labels(meta.namespace, reason).inc()
            log.error("PodGC could not force delete Pod", extra={"pod": codec.key_of(pod), "error": str(exc)})
            return False
        return True


def flags(p: runtime.FlagSet) -> None:
    p.add_argument(
        "--terminated-pod-gc-threshold",
        type=int,
        default=DEFAULT_THRESHOLD,
        metavar="N",
        help="number of terminated pods that can exist before the terminated pod garbage collector "
        "starts deleting terminated pods; <= 0 disables it (default 12500)",
    )
    # Test-only (not upstream flags): shorter periods so tests need not wait upstream's.
    p.add_argument(
        "--podgc-test-check-period",
        type=goduration.positive_seconds,
        default=GC_CHECK_PERIOD,
        help=argparse.SUPPRESS,
    )
    p.add_argument(
        "--podgc-test-quarantine-time",
        type=goduration.positive_seconds,
        default=QUARANTINE_TIME,
        help=argparse.SUPPRESS,
    )


def build(ctx: runtime.Context) -> runtime.Reconcile:
    gcc = PodGC(
        ctx.client,
        ctx.caches[PODS],
        ctx.caches[NODES],
        threshold=ctx.args.terminated_pod_gc_threshold,
        check_period=ctx.args.podgc_test_check_period,
        quarantine=ctx.args.podgc_test_quarantine_time,
    )
    ctx.keys = lambda: [GC_KEY]
    return gcc.reconcile


SPEC = runtime.Spec(
    name="pod-garbage-collector-controller",
    alias="podgc",
    queue_name="orphaned_pods_nodes",
    primary=None,
    views={PODS: PodView, NODES: NodeView},
    build=build,
    workers=1,  # one key: the pass
    flags=flags,
    package=__package__,
)
