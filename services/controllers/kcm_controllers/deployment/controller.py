"""The Deployment controller: event handlers and sync (upstream pkg/controller/deployment).

Follows deployment_controller.go (handlers, syncDeployment), sync.go (ReplicaSet claims,
revisions, proportional scaling, cleanup, status), rolling.go, recreate.go and progress.go.
The pure arithmetic lives in `kcm_controllers.deployment.util`; this module reads the caches and makes
every API write:

- ReplicaSets are claimed with `kcm_shared.controllerutil.controllerref.claim`; a new one is named
  `<deployment>-<pod-template-hash>`, carries the deployment's template byte for byte plus
  the hash label, and a revision one above the highest old one.
- Every write names the resourceVersion it was computed from (merge patches with a
  `metadata.resourceVersion` precondition), so a stale cache makes it fail with a conflict
  and retry instead of over-scaling: like upstream, no expectations are needed.
- The deployment's revision annotation goes through `/status` with the status, as upstream's
  UpdateStatus carries it (the status strategy keeps annotation changes and does not bump
  `metadata.generation`, so a new deployment stays at generation 1); the progress deadline is
  re-checked with `runtime.Result(requeue_after)`.

Registered by the launcher as `SPEC` (services/cli/kcm_cli/controllers.py).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
from kcm_shared import runtime
from kcm_shared.apimachinery import codec, selectors
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import controllerref, ownwrites, podcontrol
from kcm_shared.runtime import cache, events

from kcm_controllers.deployment import util, views

log = logging.getLogger("kcm.deployment")

API_VERSION = "apps/v1"
KIND = "Deployment"
_STATUS_FIELDS = (
    "observedGeneration",
    "replicas",
    "updatedReplicas",
    "readyReplicas",
    "availableReplicas",
    "unavailableReplicas",
    "collisionCount",
    "conditions",
)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _path(res: Any, namespace: str, name: str, subresource: str | None = None) -> str:
    return kubeclient.resource_path(res.group, res.version, res.resource, namespace, name, subresource)


def selector_of(d: views.Deployment) -> selectors.LabelSelector:
    return selectors.label_selector_from_dict(d.spec.selector)


def status_patch(status: views.DeploymentStatus) -> dict[str, Any]:
    """The whole status as a merge patch: zero fields are sent as null, so they are dropped
    the way upstream's omitempty drops them, and fields we do not know are kept."""
    present = msgspec.to_builtins(status)
    return {name: present.get(name) for name in _STATUS_FIELDS}


class DeploymentSync:
    """One controller's handlers and sync; built once per process by `build`."""

    def __init__(self, ctx: runtime.Context, clock: Callable[[], dt.datetime] = _now) -> None:
        self.client = ctx.client
        self.recorder = ctx.recorder
        self.enqueue = ctx.enqueue
        self.clock = clock
        self.deployments: cache.Cache[views.Deployment] = ctx.caches[views.DEPLOYMENTS]
        self.replicasets: cache.Cache[views.ReplicaSet] = ctx.caches[views.REPLICASETS]
        self.pods: cache.Cache[views.Pod] = ctx.caches[views.PODS]
        self.own_writes: ownwrites.OwnWrites[views.Deployment] = ownwrites.OwnWrites()

    # --- event handlers: they only map changes to deployment keys --------------------------

    def register(self) -> None:
        self.deployments.add_handler(
            on_add=self._enqueue_deployment,
            on_update=lambda old, new: self._enqueue_deployment(new),
            on_delete=self._enqueue_deployment,
        )
        self.replicasets.add_handler(
            on_add=self._add_replica_set,
            on_update=self._update_replica_set,
            on_delete=self._delete_replica_set,
        )
        self.pods.add_handler(on_delete=self._delete_pod)

    def _enqueue_deployment(self, d: views.Deployment) -> None:
        self.enqueue(codec.key_of(d.metadata))

    def _resolve(self, namespace: str, ref: codec.OwnerReference | None) -> views.Deployment | None:
        """The deployment a controllerRef points at, if it is one we have and the uid matches."""
        return controllerref.resolve(self.deployments.get, namespace, ref, KIND)

    def _deployments_selecting(self, rs: views.ReplicaSet) -> list[views.Deployment]:
        """Deployments whose selector matches an orphan replica set (candidates to adopt it)."""
        namespace = rs.metadata.namespace
        found = controllerref.selecting(self.deployments.list(namespace), rs.metadata.labels, selector_of)
        if len(found) > 1:
            log.info(
                "more than one deployment selects replica set",
                extra={
                    "replicaset": codec.key_of(rs.metadata),
                    "deployments": [d.metadata.name for d in found],
                },
            )
        return found

    def _add_replica_set(self, rs: views.ReplicaSet) -> None:
        if rs.metadata.deletion_timestamp is not None:
            # Seen for the first time while being deleted (e.g. after a restart).
            self._delete_replica_set(rs)
            return
        ref = codec.controller_ref(rs)
        if ref is not None:
            d = self._resolve(rs.metadata.namespace, ref)
            if d is not None:
                self._enqueue_deployment(d)
            return
        for d in self._deployments_selecting(rs):
            self._enqueue_deployment(d)

    def _update_replica_set(self, old: views.ReplicaSet, cur: views.ReplicaSet) -> None:
        if old.metadata.resource_version == cur.metadata.resource_version:
            return
        old_ref, cur_ref = codec.controller_ref(old), codec.controller_ref(cur)
        ref_changed = old_ref != cur_ref
        if ref_changed and old_ref is not None:
            d = self._resolve(old.metadata.namespace, old_ref)
            if d is not None:
                self._enqueue_deployment(d)  # the old owner lost it
        if cur_ref is not None:
            d = self._resolve(cur.metadata.namespace, cur_ref)
            if d is not None:
                self._enqueue_deployment(d)
            return
        if ref_changed or old.metadata.labels != cur.metadata.labels:
            for d in self._deployments_selecting(cur):
                self._enqueue_deployment(d)

    def _delete_replica_set(self, rs: views.ReplicaSet) -> None:
        d = self._resolve(rs.metadata.namespace, codec.controller_ref(rs))
        if d is not None:
            self._enqueue_deployment(d)

    def _delete_pod(self, pod: views.Pod) -> None:
        """A Recreate deployment waits for its old pods to be gone: sync when the last one goes."""
        ref = codec.controller_ref(pod)
        rs = controllerref.resolve(self.replicasets.get, pod.metadata.namespace, ref, "ReplicaSet")
        if rs is None:
            return
        d = self._resolve(rs.metadata.namespace, codec.controller_ref(rs))
        if d is None or d.spec.strategy.type != views.RECREATE:
            return
        owned = self.replicasets.by_index(cache.OWNER_UID_INDEX, d.metadata.uid)
        if not any(self._pods_of(owned).values()):
            self._enqueue_deployment(d)

    # --- reading ----------------------------------------------------------------------------

    def _pods_of(self, rss: Sequence[views.ReplicaSet]) -> dict[str, list[views.Pod]]:
        """Pods controlled by each of `rss`, by replica set uid (upstream getPodMapForDeployment)."""
        by_uid: dict[str, list[views.Pod]] = {rs.metadata.uid: [] for rs in rss}
        for uid in by_uid:
            for pod in self.pods.by_index(cache.OWNER_UID_INDEX, uid):
                ref = codec.controller_ref(pod)
                if ref is not None and ref.uid == uid:
                    by_uid[uid].append(pod)
        return by_uid

    async def _claim_replica_sets(
        self, d: views.Deployment, sel: selectors.LabelSelector
    ) -> list[views.ReplicaSet]:
        m = d.metadata
        return await controllerref.claim(
            self.client,
            d,
            API_VERSION,
            KIND,
            sel,
            self.replicasets.list(m.namespace),
            views.REPLICASETS,
            controllerref.recheck(self.client, _path(views.DEPLOYMENTS, m.namespace, m.name), m.uid),
        )

    # --- writes -----------------------------------------------------------------------------

    async def _patch(self, path: str, body: dict[str, Any]) -> bytes:
        return await self.client.request_bytes(
            "PATCH", path, body=body, content_type=kubeclient.PATCH_TYPES["merge"]
        )

    async def _write_status(
        self, d: views.Deployment, status: views.DeploymentStatus, revision: str | None = None
    ) -> views.Deployment:
        """Write `status`, and `revision` into the revision annotation when given."""
        m = d.metadata
        meta: dict[str, Any] = {"resourceVersion": m.resource_version}
        if revision is not None:
            meta["annotations"] = {util.REVISION: revision}
        body = {"metadata": meta, "status": status_patch(status)}
        raw = await self._patch(_path(views.DEPLOYMENTS, m.namespace, m.name, "status"), body)
        return self._written(d, raw)

    @staticmethod
    def _revision_change(d: views.Deployment, rev: str) -> str | None:
        """`rev` if the deployment's revision annotation differs (upstream SetDeploymentRevision)."""
        return None if d.metadata.annotations.get(util.REVISION) == rev else rev

    def _written(self, before: views.Deployment, raw: bytes) -> views.Deployment:
        result = codec.decode(raw, views.Deployment)
        self.own_writes.record(codec.key_of(before.metadata), before.metadata.resource_version, result)
        return self._working_copy(result)

    @staticmethod
    def _working_copy(d: views.Deployment) -> views.Deployment:
        """A copy whose status the sync may change (cached objects are shared and read-only)."""
        status = msgspec.structs.replace(d.status, conditions=list(d.status.conditions))
        return msgspec.structs.replace(d, status=status, kind=KIND, api_version=API_VERSION)

    async def _patch_replica_set(self, rs: views.ReplicaSet, body: dict[str, Any]) -> views.ReplicaSet:
        m = rs.metadata
        body.setdefault("metadata", {})["resourceVersion"] = m.resource_version
        raw = await self._patch(_path(views.REPLICASETS, m.namespace, m.name), body)
        return codec.decode(raw, views.ReplicaSet)

    async def _scale_replica_set(
        self, rs: views.ReplicaSet, new_scale: int, d: views.Deployment
    ) -> tuple[bool, views.ReplicaSet]:
        """Set the size and replicas annotations of `rs`; True when the size changed (upstream scaleReplicaSet)."""
        old_scale = rs.spec.replicas
        size_changes = old_scale != new_scale
        if not size_changes and not util.replicas_annotations_need_update(rs, d):
            return False, rs
        body: dict[str, Any] = {
            "metadata": {"annotations": util.replicas_annotations(d)},
            "spec": {"replicas": new_scale},
        }
        updated = await self._patch_replica_set(rs, body)
        if size_changes:
            direction = "up" if old_scale < new_scale else "down"
            self.recorder.event(
                d,
                events.NORMAL,
                "ScalingReplicaSet",
                f"Scaled {direction} replica set {rs.metadata.name} from {old_scale} to {new_scale}",
            )
        return size_changes, updated

    async def _scale_and_record(
        self, rs: views.ReplicaSet, new_scale: int, d: views.Deployment
    ) -> tuple[bool, views.ReplicaSet]:
        """Scale only when the size differs (upstream scaleReplicaSetAndRecordEvent)."""
        if rs.spec.replicas == new_scale:
            return False, rs
        return await self._scale_replica_set(rs, new_scale, d)

    # --- revisions and the new replica set ---------------------------------------------------

    async def _new_and_old(
        self, d: views.Deployment, rss: list[views.ReplicaSet]
    ) -> tuple[views.Deployment, views.ReplicaSet | None, list[views.ReplicaSet]]:
        """The new replica set, if there is one yet, and the old ones, with revisions synced
        (upstream getAllReplicaSetsAndSyncRevision without creating; the rollouts create)."""
        existing = util.find_new_replica_set(d, rss)
        old = util.find_old_replica_sets(rss, existing)
        if existing is None:
            return d, None, old
        d, new_rs = await self._sync_new_replica_set(d, existing, util.max_revision(old) + 1)
        return d, new_rs, old

    async def _sync_new_replica_set(
        self, d: views.Deployment, existing: views.ReplicaSet, new_revision: int
    ) -> tuple[views.Deployment, views.ReplicaSet]:
        """Bring the found new replica set's annotations and minReadySeconds up to date, then
        the deployment's revision (upstream getNewReplicaSet for an existing one)."""
        now = self.clock()
        annotations = util.new_rs_annotations(d, existing.metadata.annotations, new_revision, exists=True)
        changed = {k: v for k, v in annotations.items() if existing.metadata.annotations.get(k) != v}
        if changed or existing.spec.min_ready_seconds != d.spec.min_ready_seconds:
            body = {
                "metadata": {"annotations": changed},
                "spec": {"minReadySeconds": d.spec.min_ready_seconds},
            }
            return d, await self._patch_replica_set(existing, body)
        revision = self._revision_change(d, existing.metadata.annotations.get(util.REVISION, ""))
        needs_update = revision is not None
        if util.has_progress_deadline(d) and util.get_condition(d.status, util.PROGRESSING) is None:
            # A deadline set on a deployment that never had one: its clock starts now.
            msg = f'Found new replica set "{existing.metadata.name}"'
            util.set_condition(
                d.status, util.new_condition(util.PROGRESSING, "True", util.FOUND_NEW_RS, msg, now)
            )
            needs_update = True
        if needs_update:
            d = await self._write_status(d, d.status, revision)
        return d, existing

    async def _create_replica_set(
        self, d: views.Deployment, old: list[views.ReplicaSet], new_revision: int
    ) -> tuple[views.Deployment, views.ReplicaSet | None]:
        m = d.metadata
        template = util.template_dict(d.spec.template)
        pod_hash = util.template_hash(template, d.status.collision_count)
        meta = dict(template.get("metadata") or {})
        meta["labels"] = {**(meta.get("labels") or {}), util.POD_TEMPLATE_HASH: pod_hash}
        template = {**template, "metadata": meta}
        selector = dict(d.spec.selector or {})
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}), util.POD_TEMPLATE_HASH: pod_hash}
        name = f"{m.name}-{pod_hash}"
        skeleton = views.ReplicaSet(
            metadata=codec.ObjectMeta(name=name, namespace=m.namespace, uid="", labels=meta["labels"]),
            spec=views.ReplicaSetSpec(replicas=0),
        )
        replicas = util.new_rs_new_replicas(d, [*old, skeleton], skeleton)
        annotations = util.new_rs_annotations(d, {}, new_revision, exists=False)
        ref = controllerref.new_controller_ref(d, API_VERSION, KIND)
        body = {
            "apiVersion": API_VERSION,
            "kind": "ReplicaSet",
            "metadata": {
                "name": name,
                "namespace": m.namespace,
                "labels": meta["labels"],
                "annotations": annotations,
                "ownerReferences": [msgspec.to_builtins(ref)],
            },
            "spec": {
                "replicas": replicas,
                "minReadySeconds": d.spec.min_ready_seconds,
                "selector": selector,
                "template": template,
            },
        }
        now = self.clock()
        path = kubeclient.resource_path("apps", "v1", "replicasets", m.namespace)
        created: views.ReplicaSet | None = None
        already_exists = False
        try:
            raw = await self.client.request_bytes("POST", path, body=body)
            created = codec.decode(raw, views.ReplicaSet)
        except kubeclient.ApiError as exc:
            if exc.reason == "AlreadyExists":
                already_exists = True
                created = await self._existing_is_ours(d, name, template)
                if created is None:
                    await self._record_collision(d)
                    raise
            elif podcontrol.has_status_cause(exc, podcontrol.NAMESPACE_TERMINATING_CAUSE):
                raise  # every create fails until the namespace is gone: nothing to report
            else:
                msg = f'Failed to create new replica set "{name}": {podcontrol.error_message(exc)}'
                if util.has_progress_deadline(d):
                    cond = util.new_condition(util.PROGRESSING, "False", util.FAILED_RS_CREATE, msg, now)
                    util.set_condition(d.status, cond)
                    # The create's failure is the one to report, not this write's.
                    with contextlib.suppress(kubeclient.ApiError):
                        await self._write_status(d, d.status)
                self.recorder.event(d, events.WARNING, util.FAILED_RS_CREATE, msg)
                raise
        if not already_exists and replicas > 0:
            self.recorder.event(
                d, events.NORMAL, "ScalingReplicaSet", f"Scaled up replica set {name} from 0 to {replicas}"
            )
        revision = self._revision_change(d, str(new_revision))
        needs_update = revision is not None
        if not already_exists and util.has_progress_deadline(d):
            msg = f'Created new replica set "{name}"'
            util.set_condition(
                d.status, util.new_condition(util.PROGRESSING, "True", util.NEW_RS_CREATED, msg, now)
            )
            needs_update = True
        if needs_update:
            d = await self._write_status(d, d.status, revision)
        return d, created

    async def _existing_is_ours(
        self, d: views.Deployment, name: str, template: dict[str, Any]
    ) -> views.ReplicaSet | None:
        """After AlreadyExists: the replica set of that name, if it is ours with our template
        (a create whose answer we missed, or a cache that had not seen it yet)."""
        rs = self.replicasets.get(d.metadata.namespace, name)
        if rs is None:
            raw = await self.client.request_bytes("GET", _path(views.REPLICASETS, d.metadata.namespace, name))
            rs = codec.decode(raw, views.ReplicaSet)
        ref = codec.controller_ref(rs)
        same = util.equal_ignore_hash(util.template_dict(rs.spec.template), template)
        if ref is not None and ref.uid == d.metadata.uid and same:
            return rs
        return None

    async def _record_collision(self, d: views.Deployment) -> None:
        """Another object took the hashed name: bump collisionCount so the next hash differs."""
        d.status.collision_count = (d.status.collision_count or 0) + 1
        log.info(
            "hash collision on new replica set",
            extra={"deployment": codec.key_of(d.metadata), "collisionCount": d.status.collision_count},
        )
        await self._write_status(d, d.status)

    # --- status -----------------------------------------------------------------------------

    async def _sync_status(
        self, d: views.Deployment, all_rss: Sequence[views.ReplicaSet | None], new_rs: views.ReplicaSet | None
    ) -> None:
        """Write the status the replica sets imply (upstream syncDeploymentStatus)."""
        status = util.calculate_status(d, all_rss, new_rs, self.clock())
        if status != d.status:
            await self._write_status(d, status)

    async def _sync_rollout_status(
        self, d: views.Deployment, all_rss: Sequence[views.ReplicaSet | None], new_rs: views.ReplicaSet | None
    ) -> runtime.Result | None:
        """Status with the Progressing condition; requeue for the deadline when nothing changed."""
        now = self.clock()
        status = util.rollout_status(d, all_rss, new_rs, now)
        if status == d.status:
            after = util.stuck_requeue_after(d, status, now)
            return runtime.Result(requeue_after=after) if after is not None else None
        await self._write_status(d, status)
        return None

    # --- scaling ----------------------------------------------------------------------------

    async def _scale(
        self, d: views.Deployment, new_rs: views.ReplicaSet | None, old: list[views.ReplicaSet]
    ) -> None:
        """Resize for a changed spec.replicas, proportionally during a rollout (upstream scale)."""
        targets, refresh = util.scale_targets(d, new_rs, old)
        for rs, size in targets:
            if refresh:
                await self._scale_replica_set(rs, size, d)
            else:
                await self._scale_and_record(rs, size, d)

    async def _cleanup(self, d: views.Deployment, old: list[views.ReplicaSet]) -> None:
        """Delete old replica sets beyond revisionHistoryLimit (upstream cleanupDeployment)."""
        for rs in util.cleanup_candidates(d, old):
            m = rs.metadata
            try:
                await self.client.delete(
                    _path(views.REPLICASETS, m.namespace, m.name), {"preconditions": {"uid": m.uid}}
                )
            except kubeclient.ApiError as exc:
                if not exc.not_found:
                    raise

    # --- sync -------------------------------------------------------------------------------

    async def reconcile(self, key: str) -> runtime.Result | None:
        cached = self.own_writes.latest(key, self.deployments.get_key(key))
        if cached is None:
            return None  # deleted: its replica sets go with the garbage collector
        d = self._working_copy(cached)
        if d.spec.selector == {}:
            self.recorder.event(
                d,
                events.WARNING,
                "SelectingAll",
                "This deployment is selecting all pods. A non-empty selector is required.",
            )
            if d.status.observed_generation < d.metadata.generation:
                d.status.observed_generation = d.metadata.generation
                await self._write_status(d, d.status)
            return None
        sel = selector_of(d)
        rss = await self._claim_replica_sets(d, sel)
        if d.metadata.deletion_timestamp is not None:
            d, new_rs, old = await self._new_and_old(d, rss)
            await self._sync_status(d, [*old, new_rs], new_rs)
            return None
        pause = util.paused_condition(d, self.clock())
        if pause is not None:
            util.set_condition(d.status, pause)
            d = await self._write_status(d, d.status)
        d, new_rs, old = await self._new_and_old(d, rss)
        if d.spec.paused or util.is_scaling_event(d, new_rs, old):
            await self._scale(d, new_rs, old)
            if d.spec.paused:
                await self._cleanup(d, old)
            await self._sync_status(d, [*old, new_rs], new_rs)
            return None
        if d.spec.strategy.type == views.RECREATE:
            return await self._rollout_recreate(d, new_rs, old)
        return await self._rollout_rolling(d, new_rs, old)

    async def _rollout_rolling(
        self,
        d: views.Deployment,
        new_rs: views.ReplicaSet | None,
        old: list[views.ReplicaSet],
    ) -> runtime.Result | None:
        """One step of a rolling update (upstream rolloutRolling)."""
        if new_rs is None:
            d, new_rs = await self._create_replica_set(d, old, util.max_revision(old) + 1)
        all_rss: list[views.ReplicaSet | None] = [*old, new_rs]
        if new_rs is not None and await self._reconcile_new(d, all_rss, new_rs):
            return await self._sync_rollout_status(d, all_rss, new_rs)
        if await self._reconcile_old(d, all_rss, util.active(old), new_rs):
            return await self._sync_rollout_status(d, all_rss, new_rs)
        if util.deployment_complete(d, d.status):
            await self._cleanup(d, old)
        return await self._sync_rollout_status(d, all_rss, new_rs)

    async def _reconcile_new(
        self, d: views.Deployment, all_rss: Sequence[views.ReplicaSet | None], new_rs: views.ReplicaSet
    ) -> bool:
        """Scale the new replica set up within maxSurge, or down to the desired size."""
        return (await self._scale_and_record(new_rs, util.new_rs_target(d, all_rss, new_rs), d))[0]

    async def _reconcile_old(
        self,
        d: views.Deployment,
        all_rss: Sequence[views.ReplicaSet | None],
        old: list[views.ReplicaSet],
        new_rs: views.ReplicaSet | None,
    ) -> bool:
        """Scale old replica sets down as far as maxUnavailable allows (upstream reconcileOldReplicaSets)."""
        if util.spec_replicas(old) == 0:
            return False
        limit = util.old_scale_down_limit(d, all_rss, new_rs)
        if limit <= 0:
            return False
        # Unavailable old pods go first: removing them costs no availability.
        scaled = False
        current = {rs.metadata.uid: rs for rs in old}
        try:
            for rs, size in util.unhealthy_cleanup(old, limit):
                changed, current[rs.metadata.uid] = await self._scale_and_record(rs, size, d)
                scaled = scaled or changed
            old = list(current.values())
            for rs, size in util.old_scale_down(d, [*old, new_rs], old):
                scaled = (await self._scale_and_record(rs, size, d))[0] or scaled
        except kubeclient.REQUEST_ERRORS as exc:
            # Upstream reports a failed scale-down as none and goes on to the status: the
            # rollout is not held up, and the replica set's next event tries again.
            log.info(
                "scaling down old replica sets failed",
                extra={"deployment": codec.key_of(d), "error": podcontrol.error_message(exc)},
            )
            return False
        return scaled

    async def _rollout_recreate(
        self,
        d: views.Deployment,
        new_rs: views.ReplicaSet | None,
        old: list[views.ReplicaSet],
    ) -> runtime.Result | None:
        """Kill every old pod, then start the new ones (upstream rolloutRecreate)."""
        all_rss: list[views.ReplicaSet | None] = [*old, new_rs]
        scaled = False
        for rs in util.active(old):
            scaled = (await self._scale_and_record(rs, 0, d))[0] or scaled
        if scaled:
            return await self._sync_rollout_status(d, all_rss, new_rs)
        if self._old_pods_running(new_rs, old):
            return await self._sync_rollout_status(d, all_rss, new_rs)
        if new_rs is None:
            d, new_rs = await self._create_replica_set(d, old, util.max_revision(old) + 1)
            all_rss = [*old, new_rs]
        if new_rs is not None:
            await self._scale_and_record(new_rs, d.spec.replicas, d)
        if util.deployment_complete(d, d.status):
            await self._cleanup(d, old)
        return await self._sync_rollout_status(d, all_rss, new_rs)

    def _old_pods_running(self, new_rs: views.ReplicaSet | None, old: list[views.ReplicaSet]) -> bool:
        if util.actual_replicas(old) > 0:
            return True
        new_uid = new_rs.metadata.uid if new_rs is not None else None
        for uid, pods in self._pods_of([*old, *([new_rs] if new_rs else [])]).items():
            if uid == new_uid:
                continue
            if any(pod.status.phase not in ("Failed", "Succeeded") for pod in pods):
                return True
        return False


def build(ctx: runtime.Context) -> runtime.Reconcile:
    sync = DeploymentSync(ctx)
    sync.register()
    ctx.on_partitions_lost(sync.own_writes.retain)
    return sync.reconcile


SPEC = runtime.Spec(
    name="deployment-controller",
    alias="deployment",
    queue_name="deployment",
    primary=views.DEPLOYMENTS,
    views={views.DEPLOYMENTS: views.Deployment, views.REPLICASETS: views.ReplicaSet, views.PODS: views.Pod},
    build=build,
    workers=5,
    package=__package__,
)
