"""The disruption controller: keeps every PodDisruptionBudget's status, which eviction reads.

Upstream pkg/controller/disruption/disruption.go on our runtime (docs/runtime.md). Work keys
(`primary=None`, so a new partition owner gets both kinds back from its caches):

- `pdb/<namespace>/<name>`: sync one budget. Enqueued on the PDB's own events and on the
  events of every pod its selector matches (upstream picks one of several arbitrarily, with
  a MultiplePodDisruptionBudgets Event on the pod; we enqueue each of them).
- `stale/<namespace>/<name>`: a pod whose DisruptionTarget condition (set by an eviction
  that never led to a deletion) goes stale after --disruption-test-stale-timeout (upstream's
  fixed 2 minutes); its sync sets the condition back to False through pods/status.

The PDB sync (`DisruptionController.sync_pdb`) counts the pods its selector matches; the
number expected comes from minAvailable as an integer, or else from the scale of the pods'
controllers (Deployments via their ReplicaSets, ReplicaSets, ReplicationControllers,
StatefulSets from the caches, anything else through its scale subresource), as upstream's
getExpectedScale finders. A pod whose controller no finder finds fails the sync: the
`NoControllers` and `CalculateExpectedPodCountFailed` Events, and the SyncFailed condition
with disruptionsAllowed 0 (upstream's failSafe). disruptedPods entries the eviction
subresource adds are dropped once their pod is gone or after the two-minute DeletionTimeout,
and the key comes back exactly then (`Result.requeue_after`), not by polling. Pure parts live
in `budget.py`. One worker, as upstream (which has no --concurrent flag for it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
from collections.abc import Callable, Iterable
from typing import Any

import msgspec
from kcm_shared import runtime
from kcm_shared.apimachinery import codec, goduration, gvr, selectors
from kcm_shared.client import discovery, kubeclient
from kcm_shared.client.scale import ScaleTargets
from kcm_shared.controllerutil import ownwrites
from kcm_shared.runtime import cache, events

from kcm_controllers.disruption import budget

log = logging.getLogger("kcm.disruption")

PDBS = gvr.Resource("policy", "v1", "poddisruptionbudgets")
PODS = gvr.Resource("", "v1", "pods")
REPLICASETS = gvr.Resource("apps", "v1", "replicasets")
DEPLOYMENTS = gvr.Resource("apps", "v1", "deployments")
STATEFULSETS = gvr.Resource("apps", "v1", "statefulsets")
RCS = gvr.Resource("", "v1", "replicationcontrollers")
PDB_PREFIX = "pdb/"
STALE_PREFIX = "stale/"


class NoControllers(ValueError):
    """A pod's controller is not found by any finder (upstream's "found no controllers")."""


class ReplicasSpec(codec.View):
    replicas: int = 1  # the API server defaults a missing count to 1


class ScalableView(codec.Meta):
    """What a finder reads of a workload: its identity, owner and spec.replicas."""

    spec: ReplicasSpec = msgspec.field(default_factory=ReplicasSpec)


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _group_of(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def _is(ref: codec.OwnerReference, kind: str, groups: Iterable[str]) -> bool:
    """upstream verifyGroupKind."""
    return ref.kind == kind and _group_of(ref.api_version) in groups


class DisruptionController:
    """Handlers and syncs of one process; the API client, caches and clock are injected."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        caches: dict[gvr.Resource, cache.Cache[Any]],
        enqueue: Callable[[str], None],
        recorder: events.EventRecorder,
        *,
        stale_timeout: float = budget.STALE_POD_DISRUPTION_TIMEOUT,
        now: Callable[[], dt.datetime] = _utcnow,
    ) -> None:
        self.client = client
        self.pdbs: cache.Cache[budget.PDBView] = caches[PDBS]
        self.pods: cache.Cache[budget.PodView] = caches[PODS]
        self.replicasets: cache.Cache[ScalableView] = caches[REPLICASETS]
        self.deployments: cache.Cache[ScalableView] = caches[DEPLOYMENTS]
        self.statefulsets: cache.Cache[ScalableView] = caches[STATEFULSETS]
        self.rcs: cache.Cache[ScalableView] = caches[RCS]
        self.enqueue = enqueue
        self.recorder = recorder
        self.stale_timeout = stale_timeout
        self.now = now
        self.targets = ScaleTargets(client)
        self.own_writes: ownwrites.OwnWrites[budget.PDBView] = ownwrites.OwnWrites()

    def register(self) -> None:
        self.pdbs.add_handler(
            on_add=self.on_pdb, on_update=lambda _old, cur: self.on_pdb(cur), on_delete=self.on_pdb
        )
        self.pods.add_handler(
            on_add=self.on_pod, on_update=lambda _old, cur: self.on_pod(cur), on_delete=self.on_pod
        )

    def keys(self) -> list[str]:
        out = [PDB_PREFIX + codec.key_of(pdb) for pdb in self.pdbs.list()]
        now = self.now()
        for pod in self.pods.list():
            if budget.stale_disruption_wait(pod, self.stale_timeout, now) is not None:
                out.append(STALE_PREFIX + codec.key_of(pod))
        return out

    # --- event handlers ---------------------------------------------------------------------

    def on_pdb(self, pdb: budget.PDBView) -> None:
        self.enqueue(PDB_PREFIX + codec.key_of(pdb))

    def pdbs_of(self, pod: budget.PodView) -> list[budget.PDBView]:
        """Budgets whose (non-empty, valid) selector matches the pod (GetPodPodDisruptionBudgets)."""
        found = []
        for pdb in self.pdbs.list(pod.metadata.namespace):
            try:
                sel = selectors.label_selector_from_dict(pdb.spec.selector)
            except selectors.SelectorError:
                continue
            if not sel.empty and sel.matches(pod.metadata.labels):
                found.append(pdb)
        return found

    def on_pod(self, pod: budget.PodView) -> None:
        found = self.pdbs_of(pod)
        if len(found) > 1:
            msg = (
                f'Pod "{pod.metadata.namespace}"/"{pod.metadata.name}" matches multiple '
                f'PodDisruptionBudgets.  Chose "{found[0].metadata.name}" arbitrarily.'
            )
            self.recorder.event(pod, events.WARNING, "MultiplePodDisruptionBudgets", msg)
        for pdb in found:
            self.on_pdb(pdb)
        if budget.stale_disruption_wait(pod, self.stale_timeout, self.now()) is not None:
            self.enqueue(STALE_PREFIX + codec.key_of(pod))

    # --- syncs ------------------------------------------------------------------------------

    async def reconcile(self, key: str) -> runtime.Result | None:
        if key.startswith(PDB_PREFIX):
            return await self.sync_pdb(key.removeprefix(PDB_PREFIX))
        if key.startswith(STALE_PREFIX):
            return await self.sync_stale(key.removeprefix(STALE_PREFIX))
        log.error("unknown work key", extra={"key": key})
        return None

    async def sync_pdb(self, key: str) -> runtime.Result | None:
        # Our last status write, while the cache still shows what it replaced (kcm_shared.controllerutil.ownwrites).
        pdb = self.own_writes.latest(key, self.pdbs.get_key(key))
        if pdb is None:
            return None
        try:
            return await self.try_sync(pdb)
        except kubeclient.ApiError as exc:
            if exc.conflict:
                raise  # retried on the fresh object, without the fail-safe write
            failure: Exception = exc
        except ValueError as exc:
            failure = exc
        log.error("failed to sync PDB", extra={"pdb": key, "error": str(failure)})
        await self.write_status(pdb, budget.fail_safe_status(pdb, discovery.error_text(failure), self.now()))
        return None

    async def try_sync(self, pdb: budget.PDBView) -> runtime.Result | None:
        try:
            sel = selectors.label_selector_from_dict(pdb.spec.selector)
        except selectors.SelectorError as exc:
            self.recorder.event(pdb, events.WARNING, "NoPods", f"Failed to get pods: {exc}")
            raise ValueError(str(exc)) from exc
        pods = [] if sel.nothing else self.pods.list(pdb.metadata.namespace, sel)
        if not pods:
            self.recorder.event(pdb, events.NORMAL, "NoPods", "No matching pods found")
        try:
            scale = await self.expected_scale(pods) if budget.needs_scale(pdb.spec) else (0, [])
            expected, desired, unmanaged = budget.expected_and_desired(pdb.spec, len(pods), lambda: scale)
        except (ValueError, kubeclient.ApiError) as exc:
            if isinstance(exc, NoControllers):
                self.recorder.event(pdb, events.WARNING, "NoControllers", str(exc))
            self.recorder.event(
                pdb,
                events.WARNING,
                "CalculateExpectedPodCountFailed",
                f"Failed to calculate the number of expected pods: {discovery.error_text(exc)}",
            )
            raise
        if unmanaged:
            log.info("unmanaged pods under a PDB", extra={"pdb": codec.key_of(pdb), "pods": unmanaged})
            self.recorder.event(
                pdb,
                events.WARNING,
                "UnmanagedPods",
                f"Pods selected by this PodDisruptionBudget (selector: {format_selector(pdb.spec.selector)}) "
                "were found to be unmanaged. As a result, the status of the PDB cannot be calculated "
                "correctly, which may result in undefined behavior. To account for these pods please set "
                '".spec.minAvailable" field of the PDB to an integer value.',
            )
        now = self.now()
        disrupted, recheck, not_deleted = budget.build_disrupted_pods(pods, pdb.status.disrupted_pods, now)
        for pod in not_deleted:
            # upstream's message names the PDB's namespace twice; kept for kubectl parity
            ns = pdb.metadata.namespace
            self.recorder.event(
                pod,
                events.WARNING,
                "NotDeleted",
                f"Pod was expected by PDB {ns}/{ns} to be deleted but it wasn't",
            )
        current = budget.count_healthy(pods, disrupted, now)
        if not budget.status_unchanged(pdb, current, desired, expected, disrupted):
            await self.write_status(pdb, budget.new_status(pdb, current, desired, expected, disrupted, now))
        if recheck is None:
            return None
        return runtime.Result(requeue_after=max((recheck - now).total_seconds(), 0.0))

    async def write_status(self, pdb: budget.PDBView, new: budget.PDBStatus) -> None:
        path = kubeclient.resource_path(
            PDBS.group, PDBS.version, PDBS.resource, pdb.metadata.namespace, pdb.metadata.name
        )
        body = budget.status_patch(new, pdb.status, pdb.metadata.resource_version)
        raw = await self.client.request_bytes(
            "PATCH", path + "/status", body=body, content_type=kubeclient.PATCH_TYPES["merge"]
        )
        self.own_writes.record(
            codec.key_of(pdb), pdb.metadata.resource_version, codec.decode(raw, budget.PDBView)
        )

    # --- expected scale (getExpectedScale and its finders) ----------------------------------

    async def expected_scale(self, pods: list[budget.PodView]) -> tuple[int, list[str]]:
        """The summed scale of the pods' controllers and the pods without one."""
        scales: dict[str, int] = {}
        unmanaged: list[str] = []
        for pod in pods:
            ref = codec.controller_ref(pod)
            if ref is None:
                unmanaged.append(pod.metadata.name)
                continue
            if ref.uid in scales:
                continue
            found = None
            for finder in (self.find_rc, self.find_deployment, self.find_replicaset, self.find_statefulset):
                found = finder(ref, pod.metadata.namespace)
                if found is not None:
                    break
            if found is None:
                found = await self.find_by_scale(ref, pod.metadata.namespace)
            if found is None:
                raise NoControllers(f'found no controllers for pod "{pod.metadata.name}"')
            scales[found[0]] = found[1]
        return sum(scales.values()), unmanaged

    def _cached(
        self, store: cache.Cache[ScalableView], ref: codec.OwnerReference, ns: str
    ) -> ScalableView | None:
        obj = store.get(ns, ref.name)
        return obj if obj is not None and obj.metadata.uid == ref.uid else None

    def find_rc(self, ref: codec.OwnerReference, ns: str) -> tuple[str, int] | None:
        rc = self._cached(self.rcs, ref, ns) if _is(ref, "ReplicationController", ("",)) else None
        return None if rc is None else (rc.metadata.uid, rc.spec.replicas)

    def find_replicaset(self, ref: codec.OwnerReference, ns: str) -> tuple[str, int] | None:
        rs = (
            self._cached(self.replicasets, ref, ns)
            if _is(ref, "ReplicaSet", ("apps", "extensions"))
            else None
        )
        if rs is None:
            return None
        owner = codec.controller_ref(rs)
        if owner is not None and owner.kind == "Deployment":
            return None  # counted through its Deployment
        return rs.metadata.uid, rs.spec.replicas

    def find_deployment(self, ref: codec.OwnerReference, ns: str) -> tuple[str, int] | None:
        rs = (
            self._cached(self.replicasets, ref, ns)
            if _is(ref, "ReplicaSet", ("apps", "extensions"))
            else None
        )
        owner = None if rs is None else codec.controller_ref(rs)
        if owner is None or not _is(owner, "Deployment", ("apps", "extensions")):
            return None
        deployment = self._cached(self.deployments, owner, ns)
        return None if deployment is None else (deployment.metadata.uid, deployment.spec.replicas)

    def find_statefulset(self, ref: codec.OwnerReference, ns: str) -> tuple[str, int] | None:
        ss = self._cached(self.statefulsets, ref, ns) if _is(ref, "StatefulSet", ("apps",)) else None
        return None if ss is None else (ss.metadata.uid, ss.spec.replicas)

    async def find_by_scale(self, ref: codec.OwnerReference, ns: str) -> tuple[str, int] | None:
        """Any other controller through its scale subresource (getScaleController)."""
        try:
            res = await self.targets.resource(ref.api_version, ref.kind)
        except discovery.MappingError as exc:
            raise ValueError(f'no matches for kind "{ref.kind}" in version "{ref.api_version}"') from exc
        try:
            scale = await self.targets.get(res, ns, ref.name)
        except kubeclient.ApiError as exc:
            if not exc.not_found:
                raise
            if not await self.targets.implements_scale(res):
                group_resource = f"{res.resource}.{res.group}" if res.group else res.resource
                raise ValueError(f"{group_resource} does not implement the scale subresource") from exc
            return None
        meta = scale.get("metadata") or {}
        if meta.get("uid") != ref.uid:
            return None
        return ref.uid, int((scale.get("spec") or {}).get("replicas") or 0)

    # --- stale DisruptionTarget conditions --------------------------------------------------

    async def sync_stale(self, key: str) -> runtime.Result | None:
        pod = self.pods.get_key(key)
        if pod is None:
            return None
        wait = budget.stale_disruption_wait(pod, self.stale_timeout, self.now())
        if wait is None:
            return None
        if wait > 0:
            return runtime.Result(requeue_after=wait)
        path = kubeclient.resource_path("", "v1", "pods", pod.metadata.namespace, pod.metadata.name)
        # A strategic merge patch keyed by condition type, conditional on the version read
        # (upstream applies it server-side with Force as field manager DisruptionController).
        body = {
            "metadata": {"resourceVersion": pod.metadata.resource_version},
            "status": {
                "conditions": [
                    {
                        "type": budget.DISRUPTION_TARGET,
                        "status": "False",
                        "lastTransitionTime": budget.timestamp(self.now()),
                    }
                ]
            },
        }
        await self.client.patch(path + "/status", body, "strategic")
        log.info("reset stale DisruptionTarget condition to False", extra={"pod": key})
        return None


def format_selector(sel: dict[str, Any] | None) -> str:
    """The selector as Go's %v prints a *metav1.LabelSelector: `&LabelSelector{...}`."""
    if sel is None:
        return "nil"
    labels = ",".join(f"{k}: {v}," for k, v in sorted((sel.get("matchLabels") or {}).items()))
    exprs = ",".join(
        f"LabelSelectorRequirement{{Key:{e.get('key', '')},Operator:{e.get('operator', '')},"
        f"Values:[{' '.join(e.get('values') or [])}],}}"
        for e in sel.get("matchExpressions") or []
    )
    return f"&LabelSelector{{MatchLabels:map[string]string{{{labels}}},MatchExpressions:[]LabelSelectorRequirement{{{exprs}}},}}"


def flags(p: runtime.FlagSet) -> None:
    # Test-only (not an upstream flag): upstream waits a fixed two minutes.
    p.add_argument(
        "--disruption-test-stale-timeout",
        type=goduration.positive_seconds,
        default=budget.STALE_POD_DISRUPTION_TIMEOUT,
        help=argparse.SUPPRESS,
    )


def build(ctx: runtime.Context) -> runtime.Reconcile:
    dc = DisruptionController(
        ctx.client,
        ctx.caches,
        ctx.enqueue,
        ctx.recorder,
        stale_timeout=ctx.args.disruption_test_stale_timeout,
    )
    dc.register()
    ctx.keys = dc.keys
    ctx.on_partitions_lost(dc.own_writes.retain)
    return dc.reconcile


SPEC = runtime.Spec(
    name="disruption-controller",
    alias="disruption",
    queue_name="disruption",
    event_component="controllermanager",  # upstream's disruption controller records as this (seen in a differential run)
    primary=None,
    views={
        PDBS: budget.PDBView,
        PODS: budget.PodView,
        REPLICASETS: ScalableView,
        DEPLOYMENTS: ScalableView,
        STATEFULSETS: ScalableView,
        RCS: ScalableView,
    },
    build=build,
    workers=1,  # upstream runs one worker and has no --concurrent flag for it
    flags=flags,
    package=__package__,
)
