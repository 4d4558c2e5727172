"""The DaemonSet controller: one pod of each DaemonSet on every node that should run it.

Upstream pkg/controller/daemon/daemon_controller.go (v1.32, default feature gates, so
DaemonSetUpdateSurge on) on our runtime (docs/runtime.md). Event handlers only map changes to
DaemonSet keys and keep the expectations:

- DaemonSet added, updated, deleted (a delete forgets its expectations);
- ControllerRevision and Pod added / updated / deleted: the DaemonSet its controllerRef names
  (pod creations and deletions observed), or for an orphan every DaemonSet selecting it; a pod
  turning ready under a DaemonSet with minReadySeconds is looked at again once it may be
  available;
- Node added: the DaemonSets that should run on it; Node updated (beyond heartbeats): those
  whose shouldRun / shouldContinueRunning changed for it. A deleted node enqueues nothing, as
  upstream: its pods go through the pod garbage collector, and their deletion wakes the set.

The sync (`DaemonSetsController.sync`, upstream syncDaemonSet): read the DaemonSet from the
cache; a selector selecting everything gets the `SelectingAll` Event and nothing else; one
being deleted is left alone; construct its revision history (update.py) for the current
hash; when its expectations are satisfied, manage (create a pod on each node that should run
one and has none, bound there by required node affinity on `metadata.name` for the scheduler
to honour, delete pods on nodes that should not run one, failed pods with a backoff
(`FailedDaemonPod`), succeeded ones (`SucceededDaemonPod`), extra pods beyond the oldest, and
never-bound pods of nodes that are gone), then one rolling-update step (RollingUpdate; nothing
for OnDelete) and the history cleanup; last, write the status counters. Pure helpers are in
`util.py`, the rolling update and history in `update.py`.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec
from kcm_shared import runtime
from kcm_shared.apimachinery import codec, gvr, selectors
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import (
    controllerref,
    expectations,
    history,
    ownwrites,
    podcontrol,
    podranking,
    settle,
)
from kcm_shared.runtime import cache, events

from kcm_controllers.daemonset import update, util, views

log = logging.getLogger("kcm.daemonset")

DAEMONSETS = gvr.Resource("apps", "v1", "daemonsets")
PODS = gvr.Resource("", "v1", "pods")
NODES = gvr.Resource("", "v1", "nodes")
REVISIONS = history.CONTROLLER_REVISIONS

BURST_REPLICAS = 250  # upstream BurstReplicas: most pods one sync creates or deletes
STATUS_UPDATE_RETRIES = 1
# The failed-pod backoff kube-controller-manager gives the controller (flowcontrol.NewBackOff).
FAILED_PODS_BACKOFF_INITIAL = 1.0
FAILED_PODS_BACKOFF_MAX = 15 * 60.0

SELECTING_ALL = "SelectingAll"
FAILED_DAEMON_POD = "FailedDaemonPod"
SUCCEEDED_DAEMON_POD = "SucceededDaemonPod"


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Backoff:
    """flowcontrol.Backoff: per-key delays doubling from `initial` to `cap`, forgotten after
    twice the cap without a step."""

    def __init__(self, initial: float, cap: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.initial, self.cap, self.clock = initial, cap, clock
        self._entries: dict[str, tuple[float, float]] = {}  # key -> (delay, last step)

    def get(self, key: str) -> float:
        entry = self._entries.get(key)
        return entry[0] if entry else 0.0

    def in_backoff_since_update(self, key: str, now: float) -> bool:
        entry = self._entries.get(key)
        if entry is None or now - entry[1] > 2 * self.cap:
            return False
        return now - entry[1] < entry[0]

    def next(self, key: str, now: float) -> None:
        entry = self._entries.get(key)
        if entry is None or now - entry[1] > 2 * self.cap:
            self._entries[key] = (self.initial, now)
        else:
            self._entries[key] = (min(entry[0] * 2, self.cap), now)
        if len(self._entries) > 1000:  # upstream's GC runs every minute; here when it grows
            self._entries = {k: e for k, e in self._entries.items() if now - e[1] <= 2 * self.cap}


NodeToPods = dict[str, list[views.DaemonPodView]]


@dataclass
class SyncState:
    """What one sync of a DaemonSet works from: its cached object, parsed selector, the nodes,
    the decoded template, the current revision's hash (once the history is constructed), and
    the delays after which it wants to be looked at again."""

    key: str
    ds: views.DaemonSetView
    selector: selectors.LabelSelector
    nodes: list[views.NodeView]
    template: util.Template
    hash: str = ""
    delays: list[float] = field(default_factory=list)
    _placements: dict[str, tuple[bool, bool]] = field(default_factory=dict)

    def placement(self, node: views.NodeView) -> tuple[bool, bool]:
        """(shouldRun, shouldContinueRunning) for the node, computed once per sync: the manage
        step, the rolling update and the status all ask, for every node."""
        found = self._placements.get(node.metadata.name)
        if found is None:
            found = self._placements[node.metadata.name] = util.node_should_run(node, self.template.pod_spec)
        return found


class DaemonSetsController:
    """Handlers and sync of one process; client, pod control, recorder and clocks are injected."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        daemonsets: cache.Cache[views.DaemonSetView],
        pods: cache.Cache[views.DaemonPodView],
        nodes: cache.Cache[views.NodeView],
        revisions: cache.Cache[history.ControllerRevisionView],
        enqueue: Callable[[str], None],
        enqueue_after: Callable[[str, float], None],
        pod_control: podcontrol.PodControl,
        recorder: events.EventRecorder,
        *,
        now: Callable[[], dt.datetime] = _utcnow,
        monotonic: Callable[[], float] = time.monotonic,
        burst_replicas: int = BURST_REPLICAS,
    ) -> None:
        self.client = client
        self.daemonsets = daemonsets
        self.pods = pods
        self.nodes = nodes
        self.revisions = revisions
        self.enqueue = enqueue
        self.enqueue_after = enqueue_after
        self.pod_control = pod_control
        self.recorder = recorder
        self.now = now
        self.monotonic = monotonic
        self.burst_replicas = burst_replicas
        self.expectations = expectations.ControllerExpectations()
        self.failed_pods_backoff = Backoff(FAILED_PODS_BACKOFF_INITIAL, FAILED_PODS_BACKOFF_MAX, monotonic)
        self.history = update.History(client, revisions)
        self.own_writes: ownwrites.OwnWrites[views.DaemonSetView] = ownwrites.OwnWrites()
        self._templates: dict[str, tuple[bytes, util.Template]] = {}
        self._selectors: dict[str, tuple[str, dict[str, Any] | None, selectors.LabelSelector]] = {}

    def register(self) -> None:
        self.daemonsets.add_handler(on_add=self.add_ds, on_update=self.update_ds, on_delete=self.delete_ds)
        self.revisions.add_handler(
            on_add=self.add_history, on_update=self.update_history, on_delete=self.delete_history
        )
        self.pods.add_handler(on_add=self.add_pod, on_update=self.update_pod, on_delete=self.delete_pod)
        self.nodes.add_handler(on_add=self.add_node, on_update=self.update_node)

    # --- lookups ---------------------------------------------------------------------------

    def template(self, ds: views.DaemonSetView) -> util.Template:
        """The decoded template, memoised per DaemonSet while its bytes stay the same."""
        key = codec.key_of(ds)
        raw = bytes(ds.spec.template)
        memo = self._templates.get(key)
        if memo is not None and memo[0] == raw:
            return memo[1]
        parsed = util.Template.of(ds.spec.template)
        self._templates[key] = (raw, parsed)
        return parsed

    def selector(self, ds: views.DaemonSetView) -> selectors.LabelSelector:
        """The parsed spec.selector, memoised; raises SelectorError."""
        key = codec.key_of(ds)
        memo = self._selectors.get(key)
        if memo is not None and memo[0] == ds.metadata.uid and memo[1] == ds.spec.selector:
            return memo[2]
        parsed = selectors.label_selector_from_dict(ds.spec.selector)
        self._selectors[key] = (ds.metadata.uid, ds.spec.selector, parsed)
        return parsed

    def resolve(self, namespace: str, ref: codec.OwnerReference | None) -> views.DaemonSetView | None:
        return controllerref.resolve(self.daemonsets.get, namespace, ref, update.KIND)

    def enqueue_ds(self, ds: views.DaemonSetView) -> None:
        self.enqueue(codec.key_of(ds))

    def selecting(self, obj: codec.Meta) -> list[views.DaemonSetView]:
        """DaemonSets whose selector matches an orphan (GetPodDaemonSets / GetHistoryDaemonSets)."""
        found = controllerref.selecting(
            self.daemonsets.list(obj.metadata.namespace), obj.metadata.labels, self.selector
        )
        if len(found) > 1:
            log.warning(
                "user error! more than one daemon is selecting the same object",
                extra={"object": codec.key_of(obj), "labels": obj.metadata.labels},
            )
        return found

    # --- event handlers ---------------------------------------------------------------------

    def add_ds(self, ds: views.DaemonSetView) -> None:
        self.enqueue(codec.key_of(ds))

    def update_ds(self, old: views.DaemonSetView, cur: views.DaemonSetView) -> None:
        if old.metadata.uid != cur.metadata.uid:
            self.delete_ds(old)
        self.enqueue(codec.key_of(cur))

    def delete_ds(self, ds: views.DaemonSetView) -> None:
        key = codec.key_of(ds)
        self.expectations.delete_expectations(key)
        self._templates.pop(key, None)
        self._selectors.pop(key, None)
        self.enqueue(key)

    def add_history(self, rev: history.ControllerRevisionView) -> None:
        if rev.metadata.deletion_timestamp is not None:
            self.delete_history(rev)
            return
        ref = codec.controller_ref(rev)
        if ref is not None:
            # Upstream only logs an owned revision's creation: the sync that made it knows.
            return
        for ds in self.selecting(rev):
            self.enqueue(codec.key_of(ds))

    def update_history(
        self, old: history.ControllerRevisionView, cur: history.ControllerRevisionView
    ) -> None:
        if old.metadata.resource_version == cur.metadata.resource_version:
            return
        controllerref.route_update(old, cur, self.resolve, self.selecting, self.enqueue_ds)

    def delete_history(self, rev: history.ControllerRevisionView) -> None:
        ds = self.resolve(rev.metadata.namespace, codec.controller_ref(rev))
        if ds is not None:
            self.enqueue(codec.key_of(ds))

    def add_pod(self, pod: views.DaemonPodView) -> None:
        if pod.metadata.deletion_timestamp is not None:
            # Seen first while terminating (after a restart): a deletion, never a creation.
            self.delete_pod(pod)
            return
        controllerref.route_add(
            pod,
            self.resolve,
            self.selecting,
            self.enqueue_ds,
            lambda ds: self.expectations.creation_observed(codec.key_of(ds)),
        )

    def update_pod(self, old: views.DaemonPodView, cur: views.DaemonPodView) -> None:
        if old.metadata.resource_version == cur.metadata.resource_version:
            return
        if cur.metadata.deletion_timestamp is not None:
            # A graceful deletion: the set can act now rather than once the kubelet is done.
            self.delete_pod(cur)
            return
        ds = controllerref.route_update(old, cur, self.resolve, self.selecting, self.enqueue_ds)
        if (
            ds is not None
            and ds.spec.min_ready_seconds > 0
            and not podranking.is_pod_ready(old)
            and podranking.is_pod_ready(cur)
        ):
            # Available only minReadySeconds from now; one second more absorbs clock skew.
            self.enqueue_after(codec.key_of(ds), ds.spec.min_ready_seconds + 1)

    def delete_pod(self, pod: views.DaemonPodView) -> None:
        ds = self.resolve(pod.metadata.namespace, codec.controller_ref(pod))
        if ds is None:
            return
        key = codec.key_of(ds)
        self.expectations.deletion_observed(key)
        self.enqueue(key)

    def add_node(self, node: views.NodeView) -> None:
        for ds in self.daemonsets.list():
            if util.node_should_run(node, self.template(ds).pod_spec)[0]:
                self.enqueue(codec.key_of(ds))

    def update_node(self, old: views.NodeView, cur: views.NodeView) -> None:
        if _same_but_heartbeat(old, cur):
            return
        for ds in self.daemonsets.list():
            spec = self.template(ds).pod_spec
            if util.node_should_run(old, spec) != util.node_should_run(cur, spec):
                self.enqueue(codec.key_of(ds))

    # --- sync -------------------------------------------------------------------------------

    async def sync(self, key: str) -> runtime.Result | None:
        ds = self.own_writes.latest(key, self.daemonsets.get_key(key))
        if ds is None:
            self.expectations.delete_expectations(key)
            return None
        nodes = self.nodes.list()
        if ds.spec.selector is not None and not ds.spec.selector:
            self.recorder.event(
                ds,
                events.WARNING,
                SELECTING_ALL,
                "This daemon set is selecting all pods. A non-empty selector is required.",
            )
            return None
        try:
            selector = self.selector(ds)
        except selectors.SelectorError as exc:
            # The API server validates selectors: retrying cannot make this one parse.
            log.error("invalid selector", extra={"daemonset": key, "error": str(exc)})
            return None
        if ds.metadata.deletion_timestamp is not None:
            # Its revisions may be gone or orphaned already: no status can be trusted.
            return None
        state = SyncState(key, ds, selector, nodes, self.template(ds))

        async def relabel(hash_: str) -> None:
            await self.relabel_pods(state, hash_)

        try:
            state.hash, old = await self.history.construct(ds, selector, state.template.template, relabel)
        except Exception as exc:
            raise RuntimeError(f"failed to construct revisions of DaemonSet: {exc}") from exc
        if not self.expectations.satisfied_expectations(key):
            # Only the status; observedGeneration stays, that generation was not acted on.
            await self.update_status(state, update_observed_generation=False)
            return _result(state.delays)
        error: Exception | None = None
        try:
            await self.update_daemon_set(state, old)
        except Exception as exc:
            error = exc
        try:
            await self.update_status(state, update_observed_generation=True)
        except Exception as exc:
            if error is None:
                raise
            log.error("Failed to update status", extra={"daemonset": key, "error": str(exc)})
        if error is not None:
            raise error
        return _result(state.delays)

    async def update_daemon_set(self, state: SyncState, old: list[history.ControllerRevisionView]) -> None:
        await self.manage(state)
        if self.expectations.satisfied_expectations(state.key) and (
            state.ds.spec.update_strategy.type == util.ROLLING_UPDATE
        ):
            await self.rolling_update(state)
        try:
            await self.history.cleanup(
                state.ds, old, await self.node_to_pods(state, include_deleted_terminal=True)
            )
        except Exception as exc:
            raise RuntimeError(f"failed to clean up revisions of DaemonSet: {exc}") from exc

    async def node_to_pods(self, state: SyncState, include_deleted_terminal: bool = False) -> NodeToPods:
        """The DaemonSet's pods (orphans adopted, strays released) by target node
        (getNodesToDaemonPods); terminal pods being deleted left out unless asked for."""
        ds = state.ds
        path = kubeclient.resource_path(*update.DAEMONSETS_PATH, ds.metadata.namespace, ds.metadata.name)
        try:
            claimed = await controllerref.claim(
                self.client,
                ds,
                update.API_VERSION,
                update.KIND,
                state.selector,
                self.pods.list(ds.metadata.namespace),
                PODS,
                controllerref.recheck(self.client, path, ds.metadata.uid),
            )
        except Exception as exc:
            raise RuntimeError(
                f"couldn't get node to daemon pod mapping for daemon set {ds.metadata.name!r}: {exc}"
            ) from exc
        out: NodeToPods = {}
        for pod in claimed:
            if (
                not include_deleted_terminal
                and pod.status.phase in ("Succeeded", "Failed")
                and pod.metadata.deletion_timestamp is not None
            ):
                continue  # the kubelet or the pod GC finishes it; nothing left to do
            node = util.target_node_name(pod.spec.node_name, pod.spec.affinity)
            if node is None:
                log.debug("no target node for a daemon pod", extra={"pod": codec.key_of(pod)})
                continue
            out.setdefault(node, []).append(pod)
        return out

    async def manage(self, state: SyncState) -> None:
        """Create the missing daemon pods and delete the ones that should go (manage)."""
        node_to_pods = await self.node_to_pods(state)
        to_create: list[str] = []
        to_delete: list[str] = []
        for node in state.nodes:
            create, delete = self.pods_should_be_on_node(state, node, node_to_pods)
            to_create += create
            to_delete += delete
        to_delete += util.unscheduled_pods_without_node({n.metadata.name for n in state.nodes}, node_to_pods)
        await self.sync_nodes(state, to_delete, to_create)

    def pods_should_be_on_node(
        self, state: SyncState, node: views.NodeView, node_to_pods: NodeToPods
    ) -> tuple[list[str], list[str]]:
        """(nodes needing a pod, pods to delete) for one node (podsShouldBeOnNode)."""
        ds = state.ds
        name = node.metadata.name
        should_run, should_continue = state.placement(node)
        pods = node_to_pods.get(name)
        if should_run and pods is None:
            return [name], []
        if not should_continue:
            doomed = [p.metadata.name for p in pods or [] if p.metadata.deletion_timestamp is None]
            return [], doomed
        to_delete: list[str] = []
        running: list[views.DaemonPodView] = []
        for pod in pods or []:
            if pod.metadata.deletion_timestamp is not None:
                continue
            where = f"{pod.metadata.namespace}/{pod.metadata.name} on node {name}"
            if pod.status.phase == "Failed":
                # Kubelets that keep rejecting a pod must not make the set hot-loop.
                backoff_key = f"{ds.metadata.uid}/{ds.status.observed_generation}/{name}"
                now = self.monotonic()
                if self.failed_pods_backoff.in_backoff_since_update(backoff_key, now):
                    state.delays.append(self.failed_pods_backoff.get(backoff_key))
                    continue
                self.failed_pods_backoff.next(backoff_key, now)
                self.recorder.event(
                    ds,
                    events.WARNING,
                    FAILED_DAEMON_POD,
                    f"Found failed daemon pod {where}, will try to kill it",
                )
                to_delete.append(pod.metadata.name)
            elif pod.status.phase == "Succeeded":
                self.recorder.event(
                    ds,
                    events.NORMAL,
                    SUCCEEDED_DAEMON_POD,
                    f"Found succeeded daemon pod {where}, will try to delete it",
                )
                to_delete.append(pod.metadata.name)
            else:
                running.append(pod)
        if not util.allows_surge(ds):
            # One pod per node: all but the oldest go.
            to_delete += [p.metadata.name for p in util.by_creation(running)[1:]]
            return [], to_delete
        if len(running) <= 1:
            return ([name] if not running and should_run else []), to_delete
        # Surging: keep the oldest pod of the current hash and the oldest older one; the older
        # one goes once it is not ready or the new one is available.
        newest: views.DaemonPodView | None = None
        oldest: views.DaemonPodView | None = None
        for pod in util.by_creation(running):
            if util.is_pod_updated(pod.metadata.labels, state.hash):
                if newest is None:
                    newest = pod
                    continue
            elif oldest is None:
                oldest = pod
                continue
            to_delete.append(pod.metadata.name)
        if (
            newest is not None
            and oldest is not None
            and (
                not podranking.is_pod_ready(oldest)
                or podranking.is_pod_available(newest, ds.spec.min_ready_seconds, self.now())
            )
        ):
            to_delete.append(oldest.metadata.name)
        return [], to_delete

    async def sync_nodes(self, state: SyncState, to_delete: list[str], nodes_needing: list[str]) -> None:
        """Delete `to_delete` and create a pod for each node of `nodes_needing`, at most
        BURST_REPLICAS of each, creations in slow-start batches (syncNodes)."""
        key, ds = state.key, state.ds
        create_diff = min(len(nodes_needing), self.burst_replicas)
        delete_diff = min(len(to_delete), self.burst_replicas)
        errors: list[Exception] = []
        if create_diff:
            base = util.pod_template(
                state.template.template, util.template_generation(ds.metadata.annotations), state.hash
            )
            meta = msgspec.convert(base.get("metadata") or {}, podcontrol.TemplateMeta)
            spec = base.get("spec") or {}
            ref = controllerref.new_controller_ref(ds, update.API_VERSION, update.KIND)
            queue = iter(nodes_needing[:create_diff])

            async def create() -> None:
                pinned = {**spec, "affinity": util.with_node_affinity(spec.get("affinity"), next(queue))}
                pod = podcontrol.PodTemplate(metadata=meta, spec=msgspec.Raw(msgspec.json.encode(pinned)))
                await self.pod_control.create_pods(ds.metadata.namespace, pod, ds, ref)

            # Expects the creations first (their events may beat the replies), in slow-start
            # batches, a terminating namespace's refusal taken quietly, unmade pods unexpected.
            _, error = await podcontrol.create_in_batches(create_diff, create, self.expectations, key)
            if error is not None:
                errors.append(error)
            self.expectations.raise_expectations(key, 0, delete_diff)
        else:
            # A fresh record even with nothing to do, as upstream's SetExpectations.
            self.expectations.set_expectations(key, 0, delete_diff)
        if delete_diff:
            settled = await settle.each(
                to_delete[:delete_diff],
                lambda name: self.pod_control.delete_pod(ds.metadata.namespace, name, ds),
            )
            for _ in settled.raised:  # its delete event will never come
                self.expectations.deletion_observed(key)
            if settled.error is not None:
                errors.append(settled.error)
        if errors:
            raise errors[0]

    async def rolling_update(self, state: SyncState) -> None:
        """One step of the rolling update (rollingUpdate)."""
        node_to_pods = await self.node_to_pods(state)
        try:
            counts = update.desired_counts(state.ds, state.nodes, state.placement, node_to_pods)
        except ValueError as exc:
            raise ValueError(f"couldn't get unavailable numbers: {exc}") from exc
        by_name = {n.metadata.name: n for n in state.nodes}

        def should_run(name: str) -> bool:
            node = by_name.get(name)
            return node is not None and state.placement(node)[0]

        to_delete, to_create = update.rolling_update_plan(
            state.ds, node_to_pods, counts, state.hash, should_run, self.now()
        )
        await self.sync_nodes(state, to_delete, to_create)

    async def relabel_pods(self, state: SyncState, hash_: str) -> None:
        """Put `hash_` on every pod of the set that has another (dedupCurHistories)."""
        for pods in (await self.node_to_pods(state, include_deleted_terminal=True)).values():
            for pod in pods:
                if pod.metadata.labels.get(util.REVISION_HASH_LABEL) != hash_:
                    m = pod.metadata
                    path = kubeclient.resource_path("", "v1", "pods", m.namespace, m.name)
                    await self.client.patch(path, {"metadata": {"labels": {util.REVISION_HASH_LABEL: hash_}}})

    # --- status -----------------------------------------------------------------------------

    async def update_status(self, state: SyncState, update_observed_generation: bool) -> None:
        """Count the set's pods into its status and write it when it changed (updateDaemonSetStatus)."""
        ds = state.ds
        node_to_pods = await self.node_to_pods(state)
        new = count_status(ds, state.nodes, node_to_pods, state.placement, state.hash, self.now())
        await self.store_status(state.key, ds, new, update_observed_generation)
        if ds.spec.min_ready_seconds > 0 and new.number_ready != new.number_available:
            # A last line of defence against clock skew, as upstream.
            state.delays.append(float(ds.spec.min_ready_seconds))

    async def store_status(
        self, key: str, ds: views.DaemonSetView, new: views.DaemonSetStatus, update_observed_generation: bool
    ) -> None:
        """Write the counters (and observedGeneration) unless nothing changed; one retry on the
        latest resourceVersion after a conflict (storeDaemonSetStatus)."""
        if _counters(ds.status) == _counters(new) and ds.status.observed_generation >= ds.metadata.generation:
            return
        path = kubeclient.resource_path(*update.DAEMONSETS_PATH, ds.metadata.namespace, ds.metadata.name)
        status: dict[str, Any] = {
            "desiredNumberScheduled": new.desired_number_scheduled,
            "currentNumberScheduled": new.current_number_scheduled,
            "numberMisscheduled": new.number_misscheduled,
            "numberReady": new.number_ready,
            # omitempty upstream: a zero is no field at all (null removes it in a merge patch).
            "updatedNumberScheduled": new.updated_number_scheduled or None,
            "numberAvailable": new.number_available or None,
            "numberUnavailable": new.number_unavailable or None,
        }
        if update_observed_generation:
            status["observedGeneration"] = ds.metadata.generation
        resource_version = ds.metadata.resource_version
        for attempt in range(STATUS_UPDATE_RETRIES + 1):
            body = {"metadata": {"resourceVersion": resource_version}, "status": status}
            try:
                raw = await self.client.request_bytes(
                    "PATCH", path + "/status", body=body, content_type=kubeclient.PATCH_TYPES["merge"]
                )
                self.own_writes.record(key, resource_version, codec.decode(raw, views.DaemonSetView))
                return
            except kubeclient.ApiError as exc:
                if not exc.conflict or attempt == STATUS_UPDATE_RETRIES:
                    raise RuntimeError(f"error storing status for daemon set {key}: {exc}") from exc
            fresh = await self.client.get(path)
            resource_version = (fresh.get("metadata") or {}).get("resourceVersion", "")


def _counters(s: views.DaemonSetStatus) -> tuple[int, ...]:
    return (
        s.desired_number_scheduled,
        s.current_number_scheduled,
        s.number_misscheduled,
        s.number_ready,
        s.updated_number_scheduled,
        s.number_available,
        s.number_unavailable,
    )


def count_status(
    ds: views.DaemonSetView,
    nodes: list[views.NodeView],
    node_to_pods: Mapping[str, list[views.DaemonPodView]],
    placement: update.Placement,
    hash_: str,
    now: dt.datetime,
) -> views.DaemonSetStatus:
    """The status counters over the nodes (updateDaemonSetStatus): each node that should run a
    pod counts once as desired, as scheduled when it has one, and by its oldest pod as ready,
    available and updated; a node that should not run one but has one is misscheduled."""
    desired = current = misscheduled = ready = updated = available = 0
    for node in nodes:
        should_run = placement(node)[0]
        pods = node_to_pods.get(node.metadata.name) or []
        if not should_run:
            misscheduled += bool(pods)
            continue
        desired += 1
        if not pods:
            continue
        current += 1
        pod = util.by_creation(pods)[0]
        if podranking.is_pod_ready(pod):
            ready += 1
            available += podranking.is_pod_available(pod, ds.spec.min_ready_seconds, now)
        updated += util.is_pod_updated(pod.metadata.labels, hash_)
    return views.DaemonSetStatus(
        current_number_scheduled=current,
        number_misscheduled=misscheduled,
        desired_number_scheduled=desired,
        number_ready=ready,
        updated_number_scheduled=updated,
        number_available=available,
        number_unavailable=desired - available,
    )


def _true_conditions(node: views.NodeView) -> set[str]:
    return {c.type for c in node.status.conditions if c.status == "True"}


def _same_but_heartbeat(old: views.NodeView, cur: views.NodeView) -> bool:
    """Only heartbeats changed (shouldIgnoreNodeUpdate): the same conditions are True and the
    labels and spec are as they were."""
    return (
        _true_conditions(old) == _true_conditions(cur)
        and old.metadata.labels == cur.metadata.labels
        and old.spec == cur.spec
    )


def _result(delays: list[float]) -> runtime.Result | None:
    return runtime.Result(requeue_after=min(delays)) if delays else None


def build(ctx: runtime.Context) -> runtime.Reconcile:
    dsc = DaemonSetsController(
        ctx.client,
        ctx.caches[DAEMONSETS],
        ctx.caches[PODS],
        ctx.caches[NODES],
        ctx.caches[REVISIONS],
        ctx.enqueue,
        ctx.enqueue_after,
        podcontrol.RealPodControl(ctx.client, ctx.recorder),
        ctx.recorder,
    )
    dsc.register()
    ctx.on_partitions_lost(dsc.expectations.retain)
    ctx.on_partitions_lost(dsc.own_writes.retain)
    return dsc.sync


SPEC = runtime.Spec(
    name="daemonset-controller",
    alias="daemonset",
    queue_name="daemonset",
    primary=DAEMONSETS,
    views={
        DAEMONSETS: views.DaemonSetView,
        PODS: views.DaemonPodView,
        NODES: views.NodeView,
        REVISIONS: history.ControllerRevisionView,
    },
    build=build,
    workers=2,  # upstream's --concurrent-daemonset-syncs default
    package=__package__,
)
