"""The attach/detach controller: VolumeAttachments for the CSI volumes of the pods on nodes
that let the controller attach for them, `node.status.volumesAttached`, and detaching.

Upstream pkg/controller/volume/attachdetach (v1.32): attach_detach_controller.go (handlers),
reconciler/ (`plan`), statusupdater/ (the node status write), populator/ and util/
(`desired`), with pkg/volume/csi/csi_attacher.go for the VolumeAttachment (`names`), on our
runtime (docs/runtime.md):
- The work key is a node's name. Upstream keeps a desired and an actual state of the world
  in memory and loops over them every 100 ms; here a reconcile computes both for one node
  from the caches: the wanted volumes from its pods, claims, PVs and CSIDrivers, the actual
  ones from its VolumeAttachments and its reported `volumesAttached`.
- Nodes without `volumes.kubernetes.io/controller-managed-attach-detach: "true"` are left
  alone (their kubelet attaches); a deleted node's attachments are detached.
- Handlers enqueue the nodes a change may concern: a node's own attach-relevant changes, the
  node of a pod that names a claim, the nodes of the pods using a changed claim or PV, an
  attachment's node, and every node on a CSIDriver change.
- Writes in upstream's order: the node status first (a volume about to be detached leaves
  `volumesAttached` before its VolumeAttachment is deleted), then deletes, then creates,
  then the pods' Events (source `attachdetach-controller`).
- The node status and the attachments it deleted are taken from what its own writes returned
  until the caches show them (`ownwrites`): a reconcile that runs again before then (its
  own status write enqueues the node) neither detaches, counts a forced detach, reports nor
  records SuccessfulAttachVolume a second time, as upstream's pending operations prevent.
- With the reconcile sync on (`--disable-attach-detach-reconcile-sync` false and
  `--attach-detach-reconcile-sync-period` at least 1 s, as upstream), a node with
  attachments is looked at again every period.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import time
from collections.abc import Callable
from typing import Any

import msgspec
import prometheus_client
from kcm_shared import runtime
from kcm_shared.apimachinery import codec, gvr, pflagvalue
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import ownwrites, podvolumes
from kcm_shared.runtime import cache, events, pflag

from kcm_controllers.attachdetach import desired, names, plan
from kcm_controllers.attachdetach.views import (
    AttachmentView,
    ClaimView,
    DriverView,
    NodeView,
    PodView,
    VolumeView,
    has_out_of_service_taint,
    is_healthy,
    is_managed,
)

log = logging.getLogger("kcm.attachdetach")

NODES = gvr.Resource("", "v1", "nodes")
PODS = gvr.Resource("", "v1", "pods")
CLAIMS = gvr.Resource("", "v1", "persistentvolumeclaims")
VOLUMES = gvr.Resource("", "v1", "persistentvolumes")
DRIVERS = gvr.Resource("storage.k8s.io", "v1", "csidrivers")
ATTACHMENTS = gvr.Resource("storage.k8s.io", "v1", "volumeattachments")

_BY_NODE = "node"
_BY_CLAIM = podvolumes.CLAIM_INDEX  # upstream's pvcKeyIndex
_BY_VOLUME = "pv"
# upstream DefaultTimerConfig.ReconcilerMaxWaitForUnmountDuration
MAX_WAIT_FOR_UNMOUNT = 360.0

FORCED_DETACHES = prometheus_client.Counter(
    "attachdetach_controller_forced_detaches",  # exposed with _total, as client_golang's counters
    "Number of times the A/D Controller performed a forced detach",
    ["reason"],
)


def _pod_node(pod: PodView) -> list[str]:
    return [pod.spec.node_name] if pod.spec.node_name else []


def _attachment_node(va: AttachmentView) -> list[str]:
    return [va.spec.node_name] if va.spec.node_name else []


def _attachment_volume(va: AttachmentView) -> list[str]:
    pv = va.spec.source.persistent_volume_name
    return [pv] if pv else []


def _node_signature(node: NodeView) -> tuple[Any, ...]:
    """What of a node decides a reconcile: heartbeats change none of it."""
    return (
        is_managed(node),
        is_healthy(node),
        has_out_of_service_taint(node),
        sorted(v.name for v in node.status.volumes_attached),
        sorted(node.status.volumes_in_use),
    )


def _pod_signature(pod: PodView) -> tuple[Any, ...]:
    return (pod.metadata.uid, pod.spec.node_name, podvolumes.is_terminated(pod))


class AttachDetachController:
    """Handlers and sync of one process; the API client, recorder and clock are injected."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        caches: dict[gvr.Resource, cache.Cache[Any]],
        enqueue: Callable[[str], None],
        recorder: events.EventRecorder,
        *,
        settings: plan.Settings,
        sync_period: float | None,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.nodes: cache.Cache[NodeView] = caches[NODES]
        self.pods: cache.Cache[PodView] = caches[PODS]
        self.claims: cache.Cache[ClaimView] = caches[CLAIMS]
        self.volumes: cache.Cache[VolumeView] = caches[VOLUMES]
        self.drivers: cache.Cache[DriverView] = caches[DRIVERS]
        self.attachments: cache.Cache[AttachmentView] = caches[ATTACHMENTS]
        self.enqueue = enqueue
        self.recorder = recorder
        self.settings = settings
        self.sync_period = sync_period
        self.now = now
        # Per node: when each of its attachments was first found unwanted.
        self.requested: dict[str, dict[str, float]] = {}
        self.node_writes: ownwrites.OwnWrites[NodeView] = ownwrites.OwnWrites()
        # Attachments deleted, marked deleting, by name.
        self.detached: ownwrites.OwnWrites[AttachmentView] = ownwrites.OwnWrites()
        self.lookups = desired.Lookups(
            claim=self.claims.get,
            volume=self.volumes.get_key,
            driver=self.drivers.get_key,
        )

    # -- handlers -----------------------------------------------------------------------------

    def register(self) -> None:
        self.pods.add_index(_BY_NODE, _pod_node)
        self.pods.add_index(_BY_CLAIM, podvolumes.claim_keys)
        self.attachments.add_index(_BY_NODE, _attachment_node)
        self.attachments.add_index(_BY_VOLUME, _attachment_volume)
        self.nodes.add_handler(
            on_add=lambda n: self.enqueue(n.metadata.name),
            on_update=self._node_updated,
            on_delete=lambda n: self.enqueue(n.metadata.name),
        )
        self.pods.add_handler(
            on_add=self._pod_changed,
            on_update=self._pod_updated,
            on_delete=self._pod_changed,
        )
        self.claims.add_handler(on_add=self._claim_changed, on_update=self._claim_updated)
        self.volumes.add_handler(on_add=self._volume_changed, on_update=self._volume_updated)
        self.drivers.add_handler(
            on_add=self._driver_changed,
            on_update=lambda _old, new: self._driver_changed(new),
            on_delete=self._driver_changed,
        )
        self.attachments.add_handler(
            on_add=self._attachment_changed,
            on_update=lambda _old, new: self._attachment_changed(new),
            on_delete=self._attachment_changed,
        )

    def _node_updated(self, old: NodeView, new: NodeView) -> None:
        if _node_signature(old) != _node_signature(new):
            self.enqueue(new.metadata.name)

    def _pod_changed(self, pod: PodView) -> None:
        # Only claims are ever attached (`desired.wanted`), and a pod's volumes never change:
        # a pod without one cannot change what its node should have attached, so it costs no
        # sync of the node (upstream's handler processes such a pod's volumes to nothing).
        if pod.spec.node_name and podvolumes.claim_names(pod):
            self.enqueue(pod.spec.node_name)

    def _pod_updated(self, old: PodView, new: PodView) -> None:
        if _pod_signature(old) != _pod_signature(new):
            self._pod_changed(old)
            self._pod_changed(new)

    def _enqueue_claim_users(self, claim_key: str) -> None:
        for node in {p.spec.node_name for p in self.pods.by_index(_BY_CLAIM, claim_key)}:
            if node:
                self.enqueue(node)

    def _claim_changed(self, claim: ClaimView) -> None:
        self._enqueue_claim_users(codec.key_of(claim))

    def _claim_updated(self, old: ClaimView, new: ClaimView) -> None:
        if (old.status.phase, old.spec.volume_name) != (new.status.phase, new.spec.volume_name):
            self._claim_changed(new)

    def _volume_changed(self, pv: VolumeView) -> None:
        ref = pv.spec.claim_ref
        if ref is not None:
            self._enqueue_claim_users(f"{ref.namespace}/{ref.name}")
        for node in {va.spec.node_name for va in self.attachments.by_index(_BY_VOLUME, pv.metadata.name)}:
            self.enqueue(node)

    def _volume_updated(self, old: VolumeView, new: VolumeView) -> None:
        if old.spec != new.spec:
            self._volume_changed(new)

    def _driver_changed(self, _driver: DriverView) -> None:
        for node in self.nodes.list():
            self.enqueue(node.metadata.name)

    def _attachment_changed(self, va: AttachmentView) -> None:
        if va.spec.node_name:
            self.enqueue(va.spec.node_name)

    # -- sync ---------------------------------------------------------------------------------

    def _actual(self, node_name: str, node: NodeView | None) -> dict[str, plan.Attached]:
        """The node's attachments as upstream's CSI attacher names them, and what its status
        still reports; an attachment under another name is not this controller's."""
        actual: dict[str, plan.Attached] = {}
        for cached in self.attachments.by_index(_BY_NODE, node_name):
            va = self.detached.latest(cached.metadata.name, cached)
            if va is None:
                continue
            pv_name = va.spec.source.persistent_volume_name
            pv = self.volumes.get_key(pv_name) if pv_name else None
            if pv is None or pv.spec.csi is None:
                continue
            csi = pv.spec.csi
            if va.metadata.name != names.attachment_name(csi.volume_handle, csi.driver, node_name):
                continue
            actual[va.metadata.name] = plan.Attached(
                names.unique_volume_name(csi.driver, csi.volume_handle), va
            )
        for entry in [] if node is None else node.status.volumes_attached:
            parsed = names.parse_unique_volume_name(entry.name)
            if parsed is None:
                continue
            key = names.attachment_name(parsed[1], parsed[0], node_name)
            actual.setdefault(key, plan.Attached(entry.name, None))
        return actual

    def _users_elsewhere(self, want: desired.Want, node_name: str) -> list[PodView]:
        """The pods on other nodes that use `want`'s volume (through the claim it is bound to)."""
        pv = self.volumes.get_key(want.pv)
        ref = None if pv is None else pv.spec.claim_ref
        if ref is None:
            return []
        return [
            p
            for p in self.pods.by_index(_BY_CLAIM, f"{ref.namespace}/{ref.name}")
            if p.spec.node_name and p.spec.node_name != node_name and not podvolumes.is_terminated(p)
        ]

    def _blocked(self, wanted: dict[str, desired.Want], node_name: str) -> set[str]:
        """Wanted attachments of single-node volumes attached (or attaching) elsewhere."""
        return {
            key
            for key, want in wanted.items()
            if not want.multi_attach
            and any(va.spec.node_name != node_name for va in self.attachments.by_index(_BY_VOLUME, want.pv))
        }

    async def reconcile(self, key: str) -> runtime.Result | None:
        node = self.node_writes.latest(key, self.nodes.get_key(key))
        self.detached.retain(lambda name: self.attachments.get_key(name) is not None)
        if node is not None and not is_managed(node):
            self.requested.pop(key, None)
            return None
        wanted = {} if node is None else desired.wanted(key, self.pods.by_index(_BY_NODE, key), self.lookups)
        actual = self._actual(key, node)
        state = plan.NodeState(
            healthy=node is not None and is_healthy(node),
            out_of_service=node is not None and has_out_of_service_taint(node),
            reported=frozenset(v.name for v in node.status.volumes_attached) if node else frozenset(),
            in_use=frozenset(node.status.volumes_in_use) if node else frozenset(),
        )
        requested = self.requested.setdefault(key, {})
        decided = plan.decide(
            wanted, actual, state, self._blocked(wanted, key), requested, self.now(), self.settings
        )
        if not requested:
            self.requested.pop(key, None)
        if node is not None and set(decided.report) != state.reported:
            await self._report(node, decided.report)
        for name in decided.detach:
            await self._detach(key, actual[name], decided.forced.get(name))
        for want in decided.create:
            await self._attach(key, want)
        self._record(key, decided)
        return self._again(decided, bool(wanted or actual))

    async def _report(self, node: NodeView, unique_names: list[str]) -> None:
        """UpdateNodeStatusForNode: the whole list, as upstream's patch replaces it."""
        name = node.metadata.name
        attached = [{"name": n, "devicePath": ""} for n in unique_names] or None
        path = kubeclient.resource_path("", "v1", "nodes", name=name, subresource="status")
        written = await self.client.request_bytes(
            "PATCH",
            path,
            body={"status": {"volumesAttached": attached}},
            content_type=kubeclient.PATCH_TYPES["merge"],
        )
        self.node_writes.record(name, node.metadata.resource_version, codec.decode(written, NodeView))
        log.info("Updated attached volumes in node status", extra={"node": name, "volumes": unique_names})

    async def _detach(self, node: str, have: plan.Attached, forced: str | None) -> None:
        va = have.va
        assert va is not None, "only attachments are detached"
        name = va.metadata.name
        path = kubeclient.resource_path("storage.k8s.io", "v1", "volumeattachments", name=name)
        try:
            await self.client.delete(path)
        except kubeclient.ApiError as exc:
            if not exc.not_found:
                raise
        gone = msgspec.structs.replace(va.metadata, deletion_timestamp=dt.datetime.now(dt.UTC))
        self.detached.record(name, va.metadata.resource_version, msgspec.structs.replace(va, metadata=gone))
        fields = {"node": node, "volumeName": have.unique_name, "attachment": name}
        if forced is None:
            log.info("attacherDetacher.DetachVolume started", extra=fields)
            return
        FORCED_DETACHES.labels(forced).inc()
        # Upstream's two texts, at its level (Info): an operator greps for them.
        if forced == plan.FORCE_TIMEOUT:
            log.info(
                "attacherDetacher.DetachVolume started: this volume is not safe to detach, but"
                " maxWaitForUnmountDuration expired, force detaching",
                extra={"duration": self.settings.max_wait, **fields},
            )
        else:
            log.info(
                "attacherDetacher.DetachVolume started: node has out-of-service taint, force detaching",
                extra=fields,
            )

    async def _attach(self, node: str, want: desired.Want) -> None:
        obj = {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "VolumeAttachment",
            "metadata": {"name": want.attachment},
            "spec": {
                "attacher": want.driver,
                "nodeName": node,
                "source": {"persistentVolumeName": want.pv},
            },
        }
        path = kubeclient.resource_path("storage.k8s.io", "v1", "volumeattachments")
        try:
            await self.client.create(path, obj)
        except kubeclient.ApiError as exc:
            if not exc.conflict:  # AlreadyExists: made by an earlier try, not in the cache yet
                raise
        log.info(
            "attacherDetacher.AttachVolume started", extra={"node": node, "volumeName": want.unique_name}
        )

    def _record(self, node: str, decided: plan.Plan) -> None:
        for want in decided.succeeded:
            for pod in want.pods:
                self.recorder.event(
                    pod, events.NORMAL, "SuccessfulAttachVolume", plan.attach_succeeded(want.pv)
                )
        for want, err in decided.failed:
            for pod in want.pods:
                self.recorder.event(
                    pod, events.WARNING, "FailedAttachVolume", plan.attach_failed(want.pv, err)
                )
        for want in decided.multi_attach:
            others = self._users_elsewhere(want, node)
            for pod in want.pods:
                text = plan.multi_attach_error(want.pv, pod, others)
                self.recorder.event(pod, events.WARNING, "FailedAttachVolume", text)

    def forget(self, owned: Callable[[str], bool]) -> None:
        """Drop the memory of the nodes whose partitions moved away."""
        for node in [n for n in self.requested if not owned(n)]:
            del self.requested[node]
        self.node_writes.retain(owned)

        def on_owned_node(name: str) -> bool:
            va = self.attachments.get_key(name)
            return va is not None and owned(va.spec.node_name)

        self.detached.retain(on_owned_node)

    def _again(self, decided: plan.Plan, has_volumes: bool) -> runtime.Result | None:
        delays = [d for d in (decided.wake_after, self.sync_period if has_volumes else None) if d is not None]
        return runtime.Result(requeue_after=max(min(delays), 0.1)) if delays else None


def flags(p: runtime.FlagSet) -> None:
    p.add_argument(
        "--attach-detach-reconcile-sync-period", type=pflagvalue.duration, default=60.0, metavar="DURATION"
    )
    pflag.add_bool(p, "--disable-attach-detach-reconcile-sync", default=False)
    pflag.add_bool(p, "--disable-force-detach-on-timeout", default=False)
    # Not an upstream flag (upstream's timer config, 6 min): tests shorten it.
    p.add_argument(
        "--attach-detach-reconcile-max-wait-unmount-duration",
        type=pflagvalue.duration,
        default=MAX_WAIT_FOR_UNMOUNT,
        help=argparse.SUPPRESS,
    )


def sync_period(args: argparse.Namespace) -> float | None:
    """The re-sync period, or None where upstream skips its sync (disabled, or under 1 s)."""
    period: float = args.attach_detach_reconcile_sync_period
    if args.disable_attach_detach_reconcile_sync or period < 1.0:
        return None
    return period


def build(ctx: runtime.Context) -> runtime.Reconcile:
    adc = AttachDetachController(
        ctx.client,
        ctx.caches,
        ctx.enqueue,
        ctx.recorder,
        settings=plan.Settings(
            max_wait=ctx.args.attach_detach_reconcile_max_wait_unmount_duration,
            disable_force=ctx.args.disable_force_detach_on_timeout,
        ),
        sync_period=sync_period(ctx.args),
    )
    adc.register()
    ctx.on_partitions_lost(adc.forget)
    return adc.reconcile


SPEC = runtime.Spec(
    name="persistentvolume-attach-detach-controller",
    alias="attachdetach",
    primary=NODES,
    views={
        NODES: NodeView,
        PODS: PodView,
        CLAIMS: ClaimView,
        VOLUMES: VolumeView,
        DRIVERS: DriverView,
        ATTACHMENTS: AttachmentView,
    },
    build=build,
    workers=5,
    flags=flags,
    event_component="attachdetach-controller",
    queue_name="pvcs",
    package=__package__,
)
