"""The StatefulSet controller: pods with stable names and storage, in ordinal order.

Upstream pkg/controller/statefulset/stateful_set.go on our runtime (docs/runtime.md). Event
handlers map changes to StatefulSet keys:

- set added, updated or deleted: its key;
- pod added, updated or deleted: the set its controllerRef names; an orphan (or a pod whose
  labels or controllerRef changed): every set whose selector matches it, so one adopts it;
  a pod that turns ready under a set with minReadySeconds: the set again once it may be
  available.

The sync reads the set from the cache, adopts orphaned ControllerRevisions its selector
matches, claims the pods of its namespace whose names make them members
(`kcm_shared.controllerutil.controllerref`: adopt matching orphans, release owned pods that stopped
matching) and hands them to `control.StatefulSetControl.update`; with minReadySeconds it is
requeued until every replica is available. Claims (PVCs) and revisions are read from
caches; nothing here waits on a timer besides that requeue.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from kcm_shared import runtime
from kcm_shared.apimachinery import codec, selectors
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import controllerref, history, podranking
from kcm_shared.runtime import cache, upstreamflags

from . import control, utils

log = logging.getLogger("kcm.statefulset")

STATEFULSETS = control.STATEFULSETS
PODS = control.PODS
CLAIMS = control.CLAIMS
REVISIONS = history.CONTROLLER_REVISIONS


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class StatefulSetController:
    def __init__(
        self,
        ctx: runtime.Context,
        *,
        now: Any = _utcnow,
    ) -> None:
        self.client: kubeclient.KubeClient = ctx.client
        self.sets: cache.Cache[utils.StatefulSetView] = ctx.caches[STATEFULSETS]
        self.pods: cache.Cache[podranking.PodView] = ctx.caches[PODS]
        self.revisions: cache.Cache[history.ControllerRevisionView] = ctx.caches[REVISIONS]
        self.enqueue = ctx.enqueue
        self.enqueue_after = ctx.enqueue_after
        self.control = control.StatefulSetControl(
            ctx.client,
            ctx.caches[CLAIMS],
            self.revisions,
            ctx.recorder,
            now,
            max_unavailable=upstreamflags.gate(ctx.args, "MaxUnavailableStatefulSet"),
        )
        self._selectors: dict[str, tuple[str, selectors.LabelSelector]] = {}

    def register(self) -> None:
        self.sets.add_handler(
            on_add=self.enqueue_set,
            on_update=lambda _old, new: self.enqueue_set(new),
            on_delete=self.delete_set,
        )
        self.pods.add_handler(on_add=self.add_pod, on_update=self.update_pod, on_delete=self.delete_pod)

    def selector(self, sts: utils.StatefulSetView) -> selectors.LabelSelector:
        """The parsed selector, memoised per uid (apps/v1 selectors are immutable); raises SelectorError."""
        key = codec.key_of(sts)
        memo = self._selectors.get(key)
        if memo is not None and memo[0] == sts.metadata.uid:
            return memo[1]
        parsed = selectors.label_selector_from_dict(sts.spec.selector)
        self._selectors[key] = (sts.metadata.uid, parsed)
        return parsed

    # --- event handlers -----------------------------------------------------------------------

    def enqueue_set(self, sts: utils.StatefulSetView) -> None:
        self.enqueue(codec.key_of(sts))

    def delete_set(self, sts: utils.StatefulSetView) -> None:
        self._selectors.pop(codec.key_of(sts), None)
        self.enqueue(codec.key_of(sts))

    def resolve(self, namespace: str, ref: codec.OwnerReference | None) -> utils.StatefulSetView | None:
        return controllerref.resolve(self.sets.get, namespace, ref, utils.KIND)

    def sets_for_orphan(self, pod: podranking.PodView) -> list[utils.StatefulSetView]:
        """getStatefulSetsForPod: sets whose selector matches the orphan."""
        return controllerref.selecting(
            self.sets.list(pod.metadata.namespace), pod.metadata.labels, self.selector
        )

    def add_pod(self, pod: podranking.PodView) -> None:
        if pod.metadata.deletion_timestamp is not None:
            self.delete_pod(pod)
            return
        controllerref.route_add(pod, self.resolve, self.sets_for_orphan, self.enqueue_set)

    def update_pod(self, old: podranking.PodView, cur: podranking.PodView) -> None:
        if old.metadata.resource_version == cur.metadata.resource_version:
            return
        sts = controllerref.route_update(old, cur, self.resolve, self.sets_for_orphan, self.enqueue_set)
        if sts is None:
            return
        delay = sts.spec.min_ready_seconds
        if delay > 0 and not podranking.is_pod_ready(old) and podranking.is_pod_ready(cur):
            # Available only minReadySeconds from now; one second more absorbs clock skew.
            self.enqueue_after(codec.key_of(sts), delay + 1)

    def delete_pod(self, pod: podranking.PodView) -> None:
        sts = self.resolve(pod.metadata.namespace, codec.controller_ref(pod))
        if sts is not None:
            self.enqueue_set(sts)

    # --- sync ---------------------------------------------------------------------------------

    async def sync(self, key: str) -> runtime.Result | None:
        sts = self.control.own_writes.latest(key, self.sets.get_key(key))
        if sts is None:
            return None
        try:
            sel = self.selector(sts)
        except selectors.SelectorError as exc:
            # The API server validates selectors: retrying cannot make this one parse.
            log.error("invalid selector", extra={"statefulset": key, "error": str(exc)})
            return None
        m = sts.metadata
        path = kubeclient.resource_path(
            STATEFULSETS.group, STATEFULSETS.version, STATEFULSETS.resource, m.namespace, m.name
        )
        can_adopt = controllerref.recheck(self.client, path, m.uid)
        await self.adopt_orphan_revisions(sts, sel, can_adopt)
        members = [p for p in self.pods.list(m.namespace) if utils.is_member_of(sts, p.metadata.name)]
        pods = await controllerref.claim(
            self.client, sts, utils.API_VERSION, utils.KIND, sel, members, PODS, can_adopt
        )
        status = await self.control.update(sts, sel, pods)
        if sts.spec.min_ready_seconds > 0 and status.available_replicas != sts.spec.replicas:
            return runtime.Result(requeue_after=float(sts.spec.min_ready_seconds))
        return None

    async def adopt_orphan_revisions(
        self, sts: utils.StatefulSetView, sel: selectors.LabelSelector, can_adopt: Any
    ) -> None:
        orphans = [
            r for r in history.owned_revisions(self.revisions, sts, sel) if codec.controller_ref(r) is None
        ]
        if not orphans:
            return
        await can_adopt()
        for revision in orphans:
            await history.adopt_revision(self.client, sts, utils.API_VERSION, utils.KIND, revision)


def build(ctx: runtime.Context) -> runtime.Reconcile:
    ssc = StatefulSetController(ctx)
    ssc.register()
    ctx.on_partitions_lost(ssc.control.own_writes.retain)
    return ssc.sync


SPEC = runtime.Spec(
    name="statefulset-controller",
    alias="statefulset",
    queue_name="statefulset",
    primary=STATEFULSETS,
    views={
        STATEFULSETS: utils.StatefulSetView,
        PODS: podranking.PodView,
        CLAIMS: codec.Meta,
        REVISIONS: history.ControllerRevisionView,
    },
    build=build,
    workers=5,
    package=__package__,
)
