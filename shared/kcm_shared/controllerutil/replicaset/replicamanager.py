"""The ReplicaSet sync, shared by the ReplicaSet and ReplicationController controllers.

Upstream pkg/controller/replicaset/replica_set.go on our runtime (docs/runtime.md); upstream's
pkg/controller/replication runs the same code over RCs through conversion adapters, and so do
we: `ReplicaManager` is the one implementation, an `Adapter` names the resource, its kind and
how its `spec.selector` reads (a LabelSelector for a ReplicaSet, a label map for an RC), and
each controller package subclasses it with its adapter. Both kinds decode into
`replicastatus.ReplicaSetView` (same spec and status fields). Event handlers only map changes
to owner keys and keep the expectations:

- owner added, updated or deleted: its key (a delete also forgets its expectations);
  an owner replaced under the same name is first handled as a delete of the old one.
- Pod added / updated / deleted: the owner its controllerRef names (creations and
  deletions observed); an orphan pod: every owner whose selector matches it, so one
  of them adopts it; a pod that stops being controlled: its former owner too. A pod that
  turns ready under an owner with minReadySeconds is looked at again once it may be
  available.

The sync (`ReplicaManager.sync`): read the owner from the cache; claim the active pods that
refer to it and the orphans of its namespace, found by index (`controllerref.candidates`:
adopt matching orphans, release owned pods that stopped matching); when the expectations
are satisfied and the owner is not being deleted, create the missing pods (at most
BURST_REPLICAS, in slow-start batches) or delete the surplus (the lowest ranked first,
`replicastatus.pods_to_delete`), recording what it expects to see; then write the status
through the status subresource when it changed, with a ReplicaFailure condition while
creating or deleting fails; requeue after minReadySeconds while ready pods are not yet
available. Pure helpers live in
`kcm_shared.controllerutil.replicaset.replicastatus`.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import prometheus_client

from kcm_shared import runtime
from kcm_shared.apimachinery import codec, gvr, selectors
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import controllerref, expectations, ownwrites, podcontrol, podranking, settle
from kcm_shared.controllerutil.replicaset import replicastatus as status
from kcm_shared.runtime import cache, upstreamflags

PODS = gvr.Resource("", "v1", "pods")
STATUS_UPDATE_RETRIES = 1

SORTING_DELETION_AGE_RATIO = prometheus_client.Histogram(
    "replicaset_controller_sorting_deletion_age_ratio",
    "Age of each ready pod a scale-down deleted over the age of the youngest ready pod then; "
    "values near 1 mean the youngest pods went first, as the ranking intends.",
    buckets=[0.25 * 2**i for i in range(6)],
)


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True)
class Adapter:
    """What differs between the resources the sync runs over."""

    resource: gvr.Resource
    kind: str
    # Parses `spec.selector` as decoded; raises selectors.SelectorError.
    parse_selector: Callable[[Mapping[str, Any] | None], selectors.LabelSelector]
    noun: str  # the key naming the owner in log records, and the logger's suffix

    @property
    def api_version(self) -> str:
        res = self.resource
        return f"{res.group}/{res.version}" if res.group else res.version


class ReplicaManager:
    """Handlers and sync of one process; the API client, pod control and clock are injected.
    Subclasses set `adapter`."""

    adapter: ClassVar[Adapter]

    def __init__(
        self,
        client: kubeclient.KubeClient,
        replicasets: cache.Cache[status.ReplicaSetView],
        pods: cache.Cache[podranking.PodView],
        enqueue: Callable[[str], None],
        enqueue_after: Callable[[str, float], None],
        pod_control: podcontrol.PodControl,
        *,
        now: Callable[[], dt.datetime] = _utcnow,
        burst_replicas: int = podcontrol.BURST_REPLICAS,
        deletion_cost: bool = True,
    ) -> None:
        """`deletion_cost`: the PodDeletionCost gate (on by default in v1.32): whether a
        scale-down ranks pods by their pod-deletion-cost annotation."""
        self.client = client
        self.replicasets = replicasets
        self.pods = pods
        self.enqueue = enqueue
        self.enqueue_after = enqueue_after
        self.pod_control = pod_control
        self.now = now
        self.burst_replicas = burst_replicas
        self.deletion_cost = deletion_cost
        self.expectations = expectations.UIDTrackingControllerExpectations()
        self.own_writes: ownwrites.OwnWrites[status.ReplicaSetView] = ownwrites.OwnWrites()
        self._selectors: dict[str, tuple[str, dict[str, Any] | None, selectors.LabelSelector]] = {}
        self.log = logging.getLogger(f"kcm.{self.adapter.noun}")

    @classmethod
    def start(cls, ctx: runtime.Context) -> runtime.Reconcile:
        """The Spec's `build`: one manager over the adapter's cache and the pods'."""
        manager = cls(
            ctx.client,
            ctx.caches[cls.adapter.resource],
            ctx.caches[PODS],
            ctx.enqueue,
            ctx.enqueue_after,
            podcontrol.RealPodControl(ctx.client, ctx.recorder),
            deletion_cost=upstreamflags.gate(ctx.args, "PodDeletionCost"),
        )
        manager.register()
        ctx.on_partitions_lost(manager.expectations.retain)
        ctx.on_partitions_lost(manager.own_writes.retain)
        return manager.sync

    def register(self) -> None:
        controllerref.index_orphans(self.pods)
        self.replicasets.add_handler(on_add=self.add_rs, on_update=self.update_rs, on_delete=self.delete_rs)
        self.pods.add_handler(on_add=self.add_pod, on_update=self.update_pod, on_delete=self.delete_pod)

    # --- lookups ---------------------------------------------------------------------------

    def selector(self, rs: status.ReplicaSetView) -> selectors.LabelSelector:
        """The parsed spec.selector, memoised per uid and selector (an apps/v1 selector is
        immutable but an RC's is not, and a resourceVersion changes with every status write);
        raises SelectorError."""
        key = codec.key_of(rs)
        memo = self._selectors.get(key)
        if memo is not None and memo[0] == rs.metadata.uid and memo[1] == rs.spec.selector:
            return memo[2]
        parsed = self.adapter.parse_selector(rs.spec.selector)
        self._selectors[key] = (rs.metadata.uid, rs.spec.selector, parsed)
        return parsed

    def resolve(self, namespace: str, ref: codec.OwnerReference) -> status.ReplicaSetView | None:
        """The cached owner a controllerRef names, if it is still that object."""
        return controllerref.resolve(self.replicasets.get, namespace, ref, self.adapter.kind)

    def enqueue_owner(self, rs: status.ReplicaSetView) -> None:
        self.enqueue(codec.key_of(rs))

    def pod_replica_sets(self, pod: podranking.PodView) -> list[status.ReplicaSetView]:
        """Owners whose selector matches an orphan pod (upstream GetPodReplicaSets)."""
        namespace = pod.metadata.namespace
        found = controllerref.selecting(self.replicasets.list(namespace), pod.metadata.labels, self.selector)
        if len(found) > 1:
            # Overlapping selectors are a user error upstream warns about; each one still syncs.
            self.log.warning(
                f"more than one {self.adapter.kind} selects a pod",
                extra={"pod": codec.key_of(pod), "owners": [codec.key_of(rs) for rs in found]},
            )
        return found

    def related_pods(self, rs: status.ReplicaSetView) -> list[podranking.PodView]:
        """Pods of every sibling controlled by the same owner (getIndirectlyRelatedPods)."""
        owner = codec.controller_ref(rs)
        if owner is None:
            return []
        seen: set[str] = set()
        related: list[podranking.PodView] = []
        for sibling in self.replicasets.by_index(cache.OWNER_UID_INDEX, owner.uid):
            ref = codec.controller_ref(sibling)
            if ref is None or ref.uid != owner.uid:
                continue
            try:
                sel = self.selector(sibling)
            except selectors.SelectorError:
                continue
            for pod in self.pods.list(sibling.metadata.namespace, sel):
                if pod.metadata.uid not in seen:
                    seen.add(pod.metadata.uid)
                    related.append(pod)
        return related

    # --- event handlers ---------------------------------------------------------------------

    def add_rs(self, rs: status.ReplicaSetView) -> None:
        self.enqueue(codec.key_of(rs))

    def update_rs(self, old: status.ReplicaSetView, cur: status.ReplicaSetView) -> None:
        if old.metadata.uid != cur.metadata.uid:
            self.delete_rs(old)
        if old.spec.replicas != cur.spec.replicas:
            self.log.info(
                "replicas changed",
                extra={
                    self.adapter.noun: codec.key_of(cur),
                    "old": old.spec.replicas,
                    "new": cur.spec.replicas,
                },
            )
        self.enqueue(codec.key_of(cur))

    def delete_rs(self, rs: status.ReplicaSetView) -> None:
        key = codec.key_of(rs)
        self.expectations.delete_expectations(key)
        self._selectors.pop(key, None)
        self.enqueue(key)

    def add_pod(self, pod: podranking.PodView) -> None:
        if pod.metadata.deletion_timestamp is not None:
            # Seen for the first time while already terminating (e.g. after a restart): it
            # must count as a deletion, never as the creation of a new replica.
            self.delete_pod(pod)
            return
        controllerref.route_add(
            pod,
            self.resolve,
            self.pod_replica_sets,
            self.enqueue_owner,
            lambda rs: self.expectations.creation_observed(codec.key_of(rs)),
        )

    def update_pod(self, old: podranking.PodView, cur: podranking.PodView) -> None:
        if old.metadata.resource_version == cur.metadata.resource_version:
            return
        labels_changed = old.metadata.labels != cur.metadata.labels
        if cur.metadata.deletion_timestamp is not None:
            # Graceful deletion: the ReplicaSet can make a replacement now rather than once
            # the kubelet is done; the old labels may have pointed at another ReplicaSet.
            self.delete_pod(cur)
            if labels_changed:
                self.delete_pod(old)
            return
        rs = controllerref.route_update(old, cur, self.resolve, self.pod_replica_sets, self.enqueue_owner)
        if (
            rs is not None
            and rs.spec.min_ready_seconds > 0
            and not podranking.is_pod_ready(old)
            and podranking.is_pod_ready(cur)
        ):
            # Available only minReadySeconds from now; one second more absorbs clock skew.
            self.enqueue_after(codec.key_of(rs), rs.spec.min_ready_seconds + 1)

    def delete_pod(self, pod: podranking.PodView) -> None:
        ref = codec.controller_ref(pod)
        if ref is None:
            return  # an orphan's deletion changes no ReplicaSet's count
        rs = self.resolve(pod.metadata.namespace, ref)
        if rs is None:
            return
        key = codec.key_of(rs)
        self.expectations.deletion_observed_of(key, codec.key_of(pod))
        self.enqueue(key)

    # --- sync -------------------------------------------------------------------------------

    async def sync(self, key: str) -> runtime.Result | None:
        rs = self.own_writes.latest(key, self.replicasets.get_key(key))
        if rs is None:
            self.expectations.delete_expectations(key)
            return None
        needs_sync = self.expectations.satisfied_expectations(key)
        try:
            sel = self.selector(rs)
        except selectors.SelectorError as exc:
            # The API server validates selectors: retrying cannot make this one parse.
            self.log.error("invalid selector", extra={self.adapter.noun: key, "error": str(exc)})
            return None
        # Upstream walks every pod of the namespace; the claim can only keep, adopt or release
        # the owner's own and the orphans, so those are the candidates (flat as namespaces grow).
        owned, orphans = controllerref.candidates(self.pods, rs)
        active = [p for p in (*owned, *orphans) if podranking.is_pod_active(p)]
        res = self.adapter.resource
        path = kubeclient.resource_path(
            res.group,
            res.version,
            res.resource,
            rs.metadata.namespace,
            rs.metadata.name,
        )
        pods = await controllerref.claim(
            self.client,
            rs,
            self.adapter.api_version,
            self.adapter.kind,
            sel,
            active,
            PODS,
            controllerref.recheck(self.client, path, rs.metadata.uid),
        )
        manage_error: Exception | None = None
        if needs_sync and rs.metadata.deletion_timestamp is None:
            try:
                await self.manage_replicas(key, rs, pods)
            except Exception as exc:
                manage_error = exc
        message = None if manage_error is None else podcontrol.error_message(manage_error)
        new_status = status.calculate_status(rs, pods, message, self.now())
        await self.write_status(key, path, rs, new_status)
        if manage_error is not None:
            raise manage_error
        delay = status.requeue_after(rs, new_status)
        return runtime.Result(requeue_after=delay) if delay is not None else None

    async def manage_replicas(
        self, key: str, rs: status.ReplicaSetView, pods: list[podranking.PodView]
    ) -> None:
        """Create or delete pods so that `pods` (claimed, active) becomes spec.replicas."""
        diff = len(pods) - rs.spec.replicas
        namespace = rs.metadata.namespace
        if diff < 0:
            count = min(-diff, self.burst_replicas)
            ref = controllerref.new_controller_ref(rs, self.adapter.api_version, self.adapter.kind)
            self.log.info(
                "too few replicas",
                extra={self.adapter.noun: key, "need": rs.spec.replicas, "creating": count},
            )

            async def create() -> None:
                await self.pod_control.create_pods(namespace, rs.spec.template, rs, ref)

            _, error = await podcontrol.create_in_batches(count, create, self.expectations, key)
            if error is not None:
                raise error
        elif diff > 0:
            count = min(diff, self.burst_replicas)
            self.log.info(
                "too many replicas",
                extra={self.adapter.noun: key, "need": rs.spec.replicas, "deleting": count},
            )
            now = self.now()
            doomed = status.pods_to_delete(
                pods, self.related_pods(rs), count, now, by_deletion_cost=self.deletion_cost
            )
            if count < len(pods):
                for ratio in status.deletion_age_ratios(pods, doomed, now):
                    SORTING_DELETION_AGE_RATIO.observe(ratio)
            # Expect these exact pods to go, so a pod seen deleted twice counts once.
            self.expectations.expect_deletions_of(key, [codec.key_of(p) for p in doomed])
            settled = await settle.each(
                doomed, lambda p: self.pod_control.delete_pod(namespace, p.metadata.name, rs)
            )
            for pod in settled.raised:  # its delete event will never come
                self.expectations.deletion_observed_of(key, codec.key_of(pod))
            if settled.error is not None:
                raise settled.error

    async def write_status(
        self, key: str, path: str, rs: status.ReplicaSetView, new: status.ReplicaSetStatus
    ) -> None:
        """Write `new` unless nothing changed; one retry on the latest resourceVersion after a
        conflict, as upstream's updateReplicaSetStatus. The written object is remembered, so
        the next sync starts from it even before its event is back (`kcm_shared.controllerutil.ownwrites`)."""
        if status.status_unchanged(rs, new):
            return
        resource_version = rs.metadata.resource_version
        for attempt in range(STATUS_UPDATE_RETRIES + 1):
            body = status.status_patch(new, rs.metadata.generation, resource_version)
            try:
                raw = await self.client.request_bytes(
                    "PATCH", path + "/status", body=body, content_type=kubeclient.PATCH_TYPES["merge"]
                )
                self.own_writes.record(key, resource_version, codec.decode(raw, status.ReplicaSetView))
                return
            except kubeclient.ApiError as exc:
                if not exc.conflict or attempt == STATUS_UPDATE_RETRIES:
                    raise
            fresh = await self.client.get(path)
            resource_version = (fresh.get("metadata") or {}).get("resourceVersion", "")
