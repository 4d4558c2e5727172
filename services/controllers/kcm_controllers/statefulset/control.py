"""One StatefulSet's update: revisions, pods, claims and status (upstream
stateful_set_control.go, stateful_pod_control.go and stateful_set_status_updater.go).

`StatefulSetControl.update` is upstream's UpdateStatefulSet for a set and its claimed pods:

1. revisions: the set's template as a ControllerRevision (`kcm_shared.controllerutil.history`): the latest
   one when equal, an older equal one renumbered (a rollback), else a new one; the current
   revision is the one `status.currentRevision` names, else the update revision;
2. pods: each ordinal in `[start, start + replicas)` is created (its claims first) at the
   current revision below the partition and the update revision above it; OrderedReady
   creates one at a time, each after its predecessors are Running and Ready (and available
   with minReadySeconds), and stops at the first that is not; Parallel does them all in
   slow-start batches. Failed or succeeded pods are deleted (and made again next sync);
   pods outside the range are deleted highest ordinal first (OrderedReady: one at a time,
   only while all the others are healthy), after their claims got the owner the retention
   policy wants; then RollingUpdate deletes the highest-ordinal pod not at the update
   revision, down to the partition, one at a time, waiting for each replacement to be
   available (with the MaxUnavailableStatefulSet gate on: as many at a time as
   `rollingUpdate.maxUnavailable` allows, counting every unhealthy pod of the set, without
   waiting in order); OnDelete leaves that to the user;
3. status: the counts, revisions and collisionCount, written to the status subresource when
   they changed (a rollout whose pods are all updated and ready makes the update revision
   current);
4. history: revisions no pod, current or update revision uses are deleted, oldest first,
   beyond `revisionHistoryLimit`.

Events are upstream's: `SuccessfulCreate` "create Pod web-0 in StatefulSet web successful",
`FailedCreate` "create Pod web-0 in StatefulSet web failed error: ...", the same for delete
and update, and "create Claim data-web-0 Pod web-0 in StatefulSet web success" for claims.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec
from kcm_shared.apimachinery import codec, gvr, selectors
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import history, ownwrites, podcontrol, podranking
from kcm_shared.runtime import cache, events

from . import utils

log = logging.getLogger("kcm.statefulset")

STATEFULSETS = gvr.Resource("apps", "v1", "statefulsets")
PODS = gvr.Resource("", "v1", "pods")
CLAIMS = gvr.Resource("", "v1", "persistentvolumeclaims")
T = TypeVar("T")
MAX_BATCH_SIZE = 500  # most requests of one Parallel step in flight (upstream MaxBatchSize)


def _path(res: gvr.Resource, namespace: str, name: str | None = None, sub: str | None = None) -> str:
    return kubeclient.resource_path(res.group, res.version, res.resource, namespace, name, sub)


def _error_text(exc: BaseException) -> str:
    """What Go's %s of the error shows: the API server's Status message in full."""
    if isinstance(exc, kubeclient.ApiError):
        return str(exc.status.get("message") or exc.message)
    return podcontrol.error_message(exc)


def _already_exists(exc: BaseException) -> bool:
    return isinstance(exc, kubeclient.ApiError) and exc.code == 409 and exc.reason == "AlreadyExists"


def _revision_view(obj: dict[str, Any]) -> history.ControllerRevisionView:
    return codec.decode(msgspec.json.encode(obj), history.ControllerRevisionView)


@dataclass
class Slot:
    """One ordinal of the set: its pod as cached, or the manifest of the pod to create."""

    ordinal: int
    pod: podranking.PodView
    manifest: dict[str, Any] | None = None  # set while the pod does not exist


@dataclass
class Step:
    """What one update decided, for the status and history steps."""

    status: utils.StatefulSetStatus
    current: history.ControllerRevisionView
    update: history.ControllerRevisionView
    slots: list[Slot] = field(default_factory=list)
    condemned: list[podranking.PodView] = field(default_factory=list)


class StatefulSetControl:
    """The update of one set at a time; shared by the controller's workers (no per-set state
    besides the own-writes memory of status writes)."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        claims: cache.Cache[codec.Meta],
        revisions: cache.Cache[history.ControllerRevisionView],
        recorder: events.EventRecorder,
        now: Callable[[], dt.datetime],
        *,
        max_unavailable: bool = False,
    ) -> None:
        """`max_unavailable`: the MaxUnavailableStatefulSet gate (off by default in v1.32)."""
        self.client = client
        self.claims = claims
        self.revisions = revisions
        self.recorder = recorder
        self.now = now
        self.max_unavailable = max_unavailable
        self.own_writes: ownwrites.OwnWrites[utils.StatefulSetView] = ownwrites.OwnWrites()

    # --- events ----------------------------------------------------------------------------

    def _pod_event(self, verb: str, sts: utils.StatefulSetView, pod: str, err: BaseException | None) -> None:
        name = sts.metadata.name
        if err is None:
            message = f"{verb} Pod {pod} in StatefulSet {name} successful"
            self.recorder.event(sts, events.NORMAL, f"Successful{verb.title()}", message)
        else:
            message = f"{verb} Pod {pod} in StatefulSet {name} failed error: {_error_text(err)}"
            self.recorder.event(sts, events.WARNING, f"Failed{verb.title()}", message)

    def _claim_event(
        self, verb: str, sts: utils.StatefulSetView, pod: str, claim: str, err: BaseException | None
    ) -> None:
        name = sts.metadata.name
        if err is None:
            message = f"{verb} Claim {claim} Pod {pod} in StatefulSet {name} success"
            self.recorder.event(sts, events.NORMAL, f"Successful{verb.title()}", message)
        else:
            message = (
                f"{verb} Claim {claim} for Pod {pod} in StatefulSet {name} failed error: {_error_text(err)}"
            )
            self.recorder.event(sts, events.WARNING, f"Failed{verb.title()}", message)

    # --- claims (stateful_pod_control.go) --------------------------------------------------

    async def create_claims(self, sts: utils.StatefulSetView, slot_pod: utils.Owner, ordinal: int) -> None:
        """createPersistentVolumeClaims: the ordinal's missing claims, each created with the
        owners the retention policy gives it; raises the failures together."""
        errors: list[str] = []
        for claim in utils.new_claims(sts, ordinal):
            name = claim["metadata"]["name"]
            cached = self.claims.get(sts.metadata.namespace, name)
            if cached is not None:
                if cached.metadata.deletion_timestamp is not None:
                    errors.append(f"pvc {name} is being deleted")
                continue
            refs = utils.claim_owner_refs([], sts, slot_pod, ordinal)
            if refs:
                claim["metadata"]["ownerReferences"] = [msgspec.to_builtins(r) for r in refs]
            try:
                await self.client.create(_path(CLAIMS, sts.metadata.namespace), claim)
            except Exception as exc:
                if _already_exists(exc):
                    continue  # made by an earlier sync this cache has not seen yet
                errors.append(f"failed to create PVC {name}: {_error_text(exc)}")
                self._claim_event("create", sts, slot_pod.name, name, exc)
                continue
            self._claim_event("create", sts, slot_pod.name, name, None)
        if errors:
            raise RuntimeError("; ".join(errors) if len(errors) > 1 else errors[0])

    def _claims_of(self, sts: utils.StatefulSetView, ordinal: int) -> list[codec.Meta]:
        found = []
        for template in sts.spec.volume_claim_templates:
            tname = (template.get("metadata") or {}).get("name") or ""
            claim = self.claims.get(sts.metadata.namespace, utils.claim_name(tname, sts, ordinal))
            if claim is not None:  # a missing claim is picked up on a later sync
                found.append(claim)
        return found

    def claims_match_policy(self, sts: utils.StatefulSetView, pod: utils.Owner, ordinal: int) -> bool:
        """ClaimsMatchRetentionPolicy, on the cached claims."""
        return all(
            utils.claim_owner_up_to_date(c.metadata.owner_references, sts, pod, ordinal)
            for c in self._claims_of(sts, ordinal)
        )

    async def update_claims_for_policy(
        self, sts: utils.StatefulSetView, pod: utils.Owner, ordinal: int
    ) -> None:
        """UpdatePodClaimForRetentionPolicy: rewrite the ownerReferences of each claim whose
        owners disagree with the policy (a merge patch conditional on its resourceVersion)."""
        for claim in self._claims_of(sts, ordinal):
            m = claim.metadata
            if utils.claim_owner_up_to_date(m.owner_references, sts, pod, ordinal):
                continue
            refs = utils.claim_owner_refs(m.owner_references, sts, pod, ordinal)
            body = {
                "metadata": {
                    "ownerReferences": [msgspec.to_builtins(r) for r in refs],
                    "resourceVersion": m.resource_version,
                }
            }
            try:
                await self.client.patch(_path(CLAIMS, m.namespace, m.name), body, "merge")
            except Exception as exc:
                raise RuntimeError(
                    f"could not update claim {m.name} for delete policy ownerRefs: {_error_text(exc)}"
                ) from exc

    def claim_is_stale(self, sts: utils.StatefulSetView, pod: utils.Owner, ordinal: int) -> bool:
        """PodClaimIsStale: with whenScaled=Delete, a claim still owned by an earlier pod of
        this name is on its way out; the pod waits for it to go."""
        if utils.retention_policy(sts).when_scaled == utils.RETAIN:
            return False
        return any(
            utils.claim_is_stale(c.metadata.owner_references, pod) for c in self._claims_of(sts, ordinal)
        )

    # --- pods ------------------------------------------------------------------------------

    async def create_pod(self, sts: utils.StatefulSetView, slot: Slot) -> None:
        """CreateStatefulPod: the claims, then the pod."""
        assert slot.manifest is not None
        name = slot.pod.metadata.name
        try:
            await self.create_claims(sts, utils.pod_owner(name, ""), slot.ordinal)
        except Exception as exc:
            self._pod_event("create", sts, name, exc)
            raise
        try:
            await self.client.create(_path(PODS, sts.metadata.namespace), slot.manifest)
        except Exception as exc:
            if _already_exists(exc):
                return  # created by an earlier sync; its event is on its way
            if not podcontrol.has_status_cause(exc, podcontrol.NAMESPACE_TERMINATING_CAUSE):
                self._pod_event("create", sts, name, exc)
            raise
        self._pod_event("create", sts, name, None)

    async def delete_pod(self, sts: utils.StatefulSetView, pod: podranking.PodView) -> None:
        """DeleteStatefulPod, with a uid precondition so a successor of the same name is safe."""
        m = pod.metadata
        try:
            await self.client.delete(_path(PODS, m.namespace, m.name), {"preconditions": {"uid": m.uid}})
        except kubeclient.ApiError as exc:
            if exc.not_found or exc.code == 409:
                return  # gone already, or replaced: nothing of ours to delete
            self._pod_event("delete", sts, m.name, exc)
            raise
        self._pod_event("delete", sts, m.name, None)

    async def update_pod(self, sts: utils.StatefulSetView, slot: Slot) -> None:
        """UpdateStatefulPod: the identity labels and the claims' owners made right."""
        pod = slot.pod
        m = pod.metadata
        owner = utils.pod_owner(m.name, m.uid)
        try:
            if not self.claims_match_policy(sts, owner, slot.ordinal):
                await self.update_claims_for_policy(sts, owner, slot.ordinal)
            if not utils.identity_matches(sts, pod):
                body = {
                    "metadata": {
                        "labels": utils.identity_labels(sts, slot.ordinal),
                        "resourceVersion": m.resource_version,
                    }
                }
                await self.client.patch(_path(PODS, m.namespace, m.name), body, "merge")
        except Exception as exc:
            self._pod_event("update", sts, m.name, exc)
            raise
        self._pod_event("update", sts, m.name, None)

    # --- revisions -------------------------------------------------------------------------

    async def revisions_of(
        self,
        sts: utils.StatefulSetView,
        template: dict[str, Any],
        revisions: list[history.ControllerRevisionView],
    ) -> tuple[history.ControllerRevisionView, history.ControllerRevisionView, int]:
        """getStatefulSetRevisions: the current and update revisions and the collision count."""
        collision = sts.status.collision_count or 0
        number = history.next_revision(revisions)
        labels = (template.get("metadata") or {}).get("labels") or {}
        manifest = history.new_revision(
            sts, utils.API_VERSION, utils.KIND, labels, utils.revision_data(template), number, collision
        )
        if sts.metadata.annotations:
            manifest["metadata"]["annotations"] = dict(sts.metadata.annotations)
        wanted = _revision_view(manifest)
        equal = history.find_equal_revisions(revisions, wanted)
        if equal and history.equal_revision(revisions[-1], equal[-1]):
            update = revisions[-1]
        elif equal:
            patched = await history.update_revision(self.client, equal[-1], number)
            update = _revision_view(patched) if patched is not None else equal[-1]
        else:
            created, collision = await history.create_revision(self.client, sts, manifest, collision)
            update = _revision_view(created)
        current = next((r for r in revisions if r.metadata.name == sts.status.current_revision), update)
        return current, update, collision

    async def truncate_history(
        self,
        sts: utils.StatefulSetView,
        pods: Sequence[podranking.PodView],
        revisions: Sequence[history.ControllerRevisionView],
        live: Sequence[history.ControllerRevisionView],
    ) -> None:
        """truncateHistory: delete the oldest revisions nobody uses beyond the limit."""
        in_use = {r.metadata.name for r in live} | {utils.revision_of(p) for p in pods}
        old = [r for r in revisions if r.metadata.name not in in_use]
        limit = sts.spec.revision_history_limit
        if limit < 0 or len(old) <= limit:
            return
        for revision in old[: len(old) - limit]:
            await history.delete_revision(self.client, revision)

    # --- the update --------------------------------------------------------------------------

    async def update(
        self, sts: utils.StatefulSetView, selector: selectors.LabelSelector, pods: list[podranking.PodView]
    ) -> utils.StatefulSetStatus:
        """UpdateStatefulSet: returns the status written (or found already written)."""
        revisions = history.sort_revisions(history.owned_revisions(self.revisions, sts, selector))
        template = json.loads(bytes(sts.spec.template))
        current, update, collision = await self.revisions_of(sts, template, revisions)
        try:
            step = Step(
                status=utils.StatefulSetStatus(
                    observed_generation=sts.metadata.generation,
                    current_revision=current.metadata.name,
                    update_revision=update.metadata.name,
                    collision_count=collision,
                ),
                current=current,
                update=update,
            )
            error: Exception | None = None
            try:
                await self.update_pods(sts, step, pods)
            except Exception as exc:
                error = exc
            await self.write_status(sts, step.status)
            if error is not None:
                raise error
        finally:
            await self.truncate_history(sts, pods, revisions, (current, update))
        return step.status

    def _count(self, sts: utils.StatefulSetView, step: Step, pods: Sequence[podranking.PodView]) -> None:
        counts = utils.replica_status(
            pods,
            sts.spec.min_ready_seconds,
            step.current.metadata.name,
            step.update.metadata.name,
            self.now(),
        )
        s = step.status
        s.replicas, s.ready_replicas, s.available_replicas = counts.replicas, counts.ready, counts.available
        s.current_replicas, s.updated_replicas = counts.current, counts.updated

    async def update_pods(
        self, sts: utils.StatefulSetView, step: Step, pods: list[podranking.PodView]
    ) -> None:
        """updateStatefulSet: fills `step.status`; raises what a pod or claim write raised."""
        self._count(sts, step, pods)
        current_template = utils.template_of_revision(bytes(step.current.data))
        update_template = utils.template_of_revision(bytes(step.update.data))
        start = utils.start_ordinal(sts)
        by_ordinal: dict[int, podranking.PodView] = {}
        condemned: list[podranking.PodView] = []
        for pod in pods:
            ordinal = utils.ordinal_of(pod.metadata.name)
            if utils.in_ordinal_range(sts, ordinal):
                by_ordinal[ordinal] = pod
            elif ordinal >= 0:
                condemned.append(pod)
        slots: list[Slot] = []
        for ordinal in range(start, start + sts.spec.replicas):
            existing = by_ordinal.get(ordinal)
            if existing is not None:
                slots.append(Slot(ordinal, existing))
                continue
            if utils.use_current_revision(sts, ordinal):
                manifest = utils.new_pod(sts, current_template, ordinal, step.current.metadata.name)
            else:
                manifest = utils.new_pod(sts, update_template, ordinal, step.update.metadata.name)
            placeholder = podranking.PodView(
                metadata=codec.ObjectMeta(
                    name=manifest["metadata"]["name"],
                    namespace=sts.metadata.namespace,
                    labels=manifest["metadata"]["labels"],
                )
            )
            slots.append(Slot(ordinal, placeholder, manifest))
        condemned.sort(key=lambda p: utils.ordinal_of(p.metadata.name), reverse=True)
        step.slots, step.condemned = slots, condemned
        now = self.now()
        min_ready = sts.spec.min_ready_seconds
        first_unavailable: podranking.PodView | None = None
        for pod in itertools.chain((s.pod for s in slots), reversed(condemned)):
            if utils.is_unavailable(pod, min_ready, now):
                first_unavailable = pod
                break
        if sts.metadata.deletion_timestamp is not None:
            return
        monotonic = sts.spec.pod_management_policy != utils.PARALLEL

        def recount() -> None:
            self._count(sts, step, [s.pod for s in slots] + condemned)

        async def process_replica(slot: Slot) -> bool:
            return await self.process_replica(sts, slot, monotonic)

        if await self._run_for_all(slots, process_replica, monotonic):
            recount()
            return

        async def fix_claims(pod: podranking.PodView) -> bool:
            owner = utils.pod_owner(pod.metadata.name, pod.metadata.uid)
            ordinal = utils.ordinal_of(pod.metadata.name)
            if not self.claims_match_policy(sts, owner, ordinal):
                await self.update_claims_for_policy(sts, owner, ordinal)
            return False

        if await self._run_for_all(condemned, fix_claims, monotonic):
            recount()
            return

        async def process_condemned(pod: podranking.PodView) -> bool:
            if utils.is_terminating(pod):
                return monotonic  # OrderedReady waits for it to be gone
            healthy = utils.is_running_and_ready(pod) and utils.is_running_and_available(pod, min_ready, now)
            if monotonic and pod is not first_unavailable and not healthy:
                return True  # OrderedReady deletes only while the others are healthy
            log.info(
                "deleting pod for scale down",
                extra={"statefulset": codec.key_of(sts), "pod": pod.metadata.name},
            )
            await self.delete_pod(sts, pod)
            return True

        if await self._run_for_all(condemned, process_condemned, monotonic):
            recount()
            return
        recount()
        strategy = sts.spec.update_strategy
        if strategy.type == utils.ON_DELETE:
            return
        partition = strategy.rolling_update.partition if strategy.rolling_update is not None else 0
        update_name = step.update.metadata.name
        if self.max_unavailable:
            await self._update_unavailable(sts, step, slots, partition)
            return
        for target in range(len(slots) - 1, partition - 1, -1):
            pod = slots[target].pod
            if utils.revision_of(pod) != update_name and not utils.is_terminating(pod):
                await self._delete_for_update(sts, step, pod)
                return
            if utils.is_unavailable(pod, min_ready, now):
                return  # wait for the replacement before the next one

    async def _update_unavailable(
        self, sts: utils.StatefulSetView, step: Step, slots: list[Slot], partition: int
    ) -> None:
        """The rolling update with MaxUnavailableStatefulSet on (upstream's
        updateStatefulSetAfterInvariantEstablished): while fewer than maxUnavailable of the
        set's pods are unhealthy, delete that many more pods not at the update revision,
        highest ordinal first, down to the partition."""
        budget = utils.max_unavailable(sts) - sum(1 for s in slots if not utils.is_healthy(s.pod))
        update_name = step.update.metadata.name
        for target in range(len(slots) - 1, partition - 1, -1):
            if budget <= 0:
                return
            pod = slots[target].pod
            if utils.revision_of(pod) != update_name and not utils.is_terminating(pod):
                await self._delete_for_update(sts, step, pod)
                budget -= 1

    async def _delete_for_update(
        self, sts: utils.StatefulSetView, step: Step, pod: podranking.PodView
    ) -> None:
        log.info(
            "deleting pod for update", extra={"statefulset": codec.key_of(sts), "pod": pod.metadata.name}
        )
        await self.delete_pod(sts, pod)
        step.status.current_replicas -= 1

    async def _run_for_all(
        self, items: Sequence[T], fn: Callable[[T], Awaitable[bool]], monotonic: bool
    ) -> bool:
        """runForAll: in order, stopping at the first item that says so (OrderedReady), or all
        at once in slow-start batches (Parallel); True when the update should stop here."""
        if monotonic:
            for item in items:
                if await fn(item):
                    return True
            return False
        pending = iter(items)

        async def one() -> None:
            await fn(next(pending))

        _, error = await podcontrol.slow_start_batch(len(items), 1, one, MAX_BATCH_SIZE)
        if error is not None:
            raise error
        return False

    async def process_replica(self, sts: utils.StatefulSetView, slot: Slot, monotonic: bool) -> bool:
        """processReplica: make the ordinal's pod exist and be what the set says; True when an
        OrderedReady set must wait here."""
        pod = slot.pod
        phase = pod.status.phase
        if phase in ("Failed", "Succeeded"):
            # Made again on the next sync, once this one is gone (upstream does the same).
            if not utils.is_terminating(pod):
                await self.delete_pod(sts, pod)
            return True
        owner = utils.pod_owner(pod.metadata.name, pod.metadata.uid)
        if slot.manifest is not None:
            if self.claim_is_stale(sts, owner, slot.ordinal):
                return True
            await self.create_pod(sts, slot)
            return monotonic
        if phase == "Pending":
            await self.create_claims(sts, owner, slot.ordinal)
            if not self.claims_match_policy(sts, owner, slot.ordinal):
                try:
                    await self.update_claims_for_policy(sts, owner, slot.ordinal)
                except Exception as exc:
                    self._pod_event("update", sts, pod.metadata.name, exc)
                    raise
        if monotonic:
            if utils.is_terminating(pod) or not utils.is_running_and_ready(pod):
                return True
            if not utils.is_running_and_available(pod, sts.spec.min_ready_seconds, self.now()):
                return True
        if utils.identity_matches(sts, pod) and self.claims_match_policy(sts, owner, slot.ordinal):
            return False
        await self.update_pod(sts, slot)
        return False

    # --- status (stateful_set_status_updater.go) ---------------------------------------------

    async def write_status(self, sts: utils.StatefulSetView, status: utils.StatefulSetStatus) -> None:
        """updateStatefulSetStatus: complete a finished rollout, then write if anything changed."""
        utils.complete_rolling_update(sts, status)
        if not utils.inconsistent_status(sts, status):
            return
        m = sts.metadata
        raw = await self.client.request_bytes(
            "PATCH",
            _path(STATEFULSETS, m.namespace, m.name, "status"),
            body=utils.status_patch(status),
            content_type=kubeclient.PATCH_TYPES["merge"],
        )
        self.own_writes.record(
            codec.key_of(sts), m.resource_version, codec.decode(raw, utils.StatefulSetView)
        )
