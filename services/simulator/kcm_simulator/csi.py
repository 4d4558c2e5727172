"""The simulated CSI driver `csi.sim.kcm.dev`: its controller sidecars and its node side.

- `VolumeStore` holds the claims, PVs, StorageClasses and nodes the informers deliver, and
  which claims the simulator's running pods use; the scheduler reads it for volume binding
  and `wait_bound` lets a pod's start (kubelet) or binding (scheduler) wait for its claims.
- `Driver` plays the external-provisioner (PVs for claims handed to this driver, Events
  Provisioning / ProvisioningSucceeded / ProvisioningFailed from `<driver>_<host>_<id>`; a
  Released PV with reclaim Delete is deleted and our finalizer lifted), the external-resizer
  (a Bound claim asking for more: condition Resizing, the PV grown, then
  FileSystemResizePending, Events Resizing and FileSystemResizeRequired from
  `external-resizer csi.sim.kcm.dev`; a raw block volume gets its capacity at once,
  VolumeResizeSuccessful) and the kubelet's NodeExpandVolume (a pending filesystem resize of
  a claim a running pod on our nodes uses: the claim's capacity raised, the condition gone,
  FileSystemResizeSuccessful on the pod from `kubelet`).
- Work is keyed (`claim/<ns>/<name>`, `pv/<name>`), deduplicated, done by a few workers, and
  retried with backoff (5 s doubling to 5 min) when a write or CreateVolume fails.

Fed by `main.py`; decisions are `volumes.py`. Attachment is `attacher.py` (the external-attacher)
and `nodevolumes.py` (the kubelet's wait for `volumesAttached`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import socket
import uuid
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from kcm_shared.client.kubeclient import KubeClient, resource_path
from kcm_shared.runtime import events

from kcm_simulator import volumes
from kcm_simulator.calls import Writer

Obj = dict[str, Any]
log = logging.getLogger("kcm.sim.csi")
WORKERS = 8
RETRY_FIRST, RETRY_MAX = 5.0, 300.0
KUBELET = "kubelet"


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class VolumeStore:
    """What the informers last said of claims, PVs, classes and nodes; no I/O."""

    def __init__(self) -> None:
        self.claims: dict[str, Obj] = {}
        self.pvs: dict[str, Obj] = {}
        self.classes: dict[str, Obj] = {}
        self.nodes: dict[str, Obj] = {}
        # Claim key -> futures of pods waiting for it to be Bound.
        self._waiters: dict[str, list[asyncio.Future[None]]] = defaultdict(list)
        # Claim key -> keys of the running pods on our nodes that use it.
        self.users: dict[str, set[str]] = defaultdict(set)
        self.listeners: list[Callable[[], None]] = []

    def set_claim(self, kind: str, claim: Obj) -> None:
        k = volumes.key(claim)
        if kind == "DELETED":
            self.claims.pop(k, None)
        else:
            self.claims[k] = claim
            if volumes.is_bound(claim):
                for waiter in self._waiters.pop(k, []):
                    if not waiter.done():
                        waiter.set_result(None)
        self._changed()

    def set_pv(self, kind: str, pv: Obj) -> None:
        self._put(self.pvs, kind, pv)

    def set_class(self, kind: str, storage_class: Obj) -> None:
        self._put(self.classes, kind, storage_class)

    def _put(self, held: dict[str, Obj], kind: str, obj: Obj) -> None:
        name = str(obj.get("metadata", {}).get("name", ""))
        if kind == "DELETED":
            held.pop(name, None)
        else:
            held[name] = obj
        self._changed()

    def _changed(self) -> None:
        for listener in self.listeners:
            listener()

    def pod_claims(self, pod: Obj) -> list[Obj] | None:
        """The pod's claims, or None when one is missing (the scheduler's PreFilter fails)."""
        out = []
        for k in volumes.claim_keys(pod):
            claim = self.claims.get(k)
            if claim is None:
                return None
            out.append(claim)
        return out

    async def wait_bound(self, keys: list[str]) -> None:
        """Until every named claim is Bound (as the informer last saw it)."""
        loop = asyncio.get_running_loop()
        for k in keys:
            claim = self.claims.get(k)
            if claim is not None and volumes.is_bound(claim):
                continue
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters[k].append(waiter)
            try:
                await waiter
            finally:
                waiters = self._waiters.get(k)
                if waiters is not None and waiter in waiters:
                    waiters.remove(waiter)
                    if not waiters:
                        del self._waiters[k]


class Driver:
    def __init__(
        self, client: KubeClient, writer: Writer, store: VolumeStore, our_nodes: Callable[[str], bool]
    ) -> None:
        self._client = client
        self._writer = writer
        self._store = store
        self._ours = our_nodes
        host = socket.gethostname()
        self.identity = (
            f"{int(dt.datetime.now(dt.UTC).timestamp() * 1000)}-{uuid.uuid4().hex[:8]}-{volumes.DRIVER}"
        )
        self.provisioner = events.EventRecorder(client, f"{volumes.DRIVER}_{host}_{uuid.uuid4()}")
        self.resizer = events.EventRecorder(client, f"external-resizer {volumes.DRIVER}")
        self.kubelet = events.EventRecorder(client, KUBELET)
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        self._retry: dict[str, float] = {}
        self._pods: dict[str, Obj] = {}

    # -- events from the informers -------------------------------------------------------------

    def on_claim(self, kind: str, claim: Obj) -> None:
        self._store.set_claim(kind, claim)
        if kind != "DELETED":
            self._enqueue("claim/" + volumes.key(claim))

    def on_pv(self, kind: str, pv: Obj) -> None:
        self._store.set_pv(kind, pv)
        if kind == "DELETED":
            return
        if volumes.wants_deletion(pv):
            self._enqueue("pv/" + str(pv["metadata"]["name"]))
        ref = pv.get("spec", {}).get("claimRef") or {}
        if ref.get("name"):
            self._enqueue(f"claim/{ref.get('namespace', '')}/{ref['name']}")

    def on_class(self, kind: str, storage_class: Obj) -> None:
        self._store.set_class(kind, storage_class)
        # Its claims may have come first (the informers start together).
        name = storage_class.get("metadata", {}).get("name")
        if kind != "DELETED" and storage_class.get("provisioner") == volumes.DRIVER:
            for k, claim in self._store.claims.items():
                if volumes.class_name(claim) == name:
                    self._enqueue("claim/" + k)

    def on_node(self, kind: str, node: Obj) -> None:
        name = str(node.get("metadata", {}).get("name", ""))
        if kind == "DELETED":
            self._store.nodes.pop(name, None)
        else:
            self._store.nodes[name] = node

    def on_pod(self, kind: str, pod: Obj) -> None:
        """Which running pods on our nodes use which claims: a pending filesystem resize is
        finished by the node that mounts the volume. Pods without claims cost one scan."""
        keys = volumes.claim_keys(pod)
        if not keys:
            return
        pk = volumes.key(pod)
        running = (
            kind != "DELETED"
            and self._ours(str(pod.get("spec", {}).get("nodeName") or ""))
            and pod.get("status", {}).get("phase") == "Running"
        )
        for k in keys:
            if running:
                self._store.users[k].add(pk)
                self._pods[pk] = pod
                self._enqueue("claim/" + k)
            elif pk in self._store.users.get(k, ()):
                self._store.users[k].discard(pk)
                if not self._store.users[k]:
                    del self._store.users[k]
        if not running:
            self._pods.pop(pk, None)

    def reset(self, held: dict[str, Any], apply: Callable[[str, Obj], None], items: list[Obj]) -> None:
        """A relist: what `held` knew is forgotten, then each listed object is added."""
        held.clear()
        if held is self._pods:
            self._store.users.clear()
        for item in items:
            apply("ADDED", item)

    def pods_held(self) -> dict[str, Obj]:
        return self._pods

    def _enqueue(self, work: str) -> None:
        if work not in self._queued:
            self._queued.add(work)
            self._queue.put_nowait(work)

    # -- workers -------------------------------------------------------------------------------

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            for recorder in (self.provisioner, self.resizer, self.kubelet):
                group.create_task(recorder.run())
            for _ in range(WORKERS):
                group.create_task(self._work())

    async def _work(self) -> None:
        while True:
            work = await self._queue.get()
            self._queued.discard(work)
            try:
                if work.startswith("pv/"):
                    await self._delete(work.removeprefix("pv/"))
                else:
                    await self._sync_claim(work.removeprefix("claim/"))
                self._retry.pop(work, None)
            except Exception as exc:  # any failure is retried with backoff
                delay = min(self._retry.get(work, RETRY_FIRST / 2) * 2, RETRY_MAX)
                self._retry[work] = delay
                log.info(
                    "volume work failed, retrying", extra={"work": work, "err": str(exc), "delay": delay}
                )
                asyncio.get_running_loop().call_later(delay, self._enqueue, work)

    async def _sync_claim(self, k: str) -> None:
        claim = self._store.claims.get(k)
        if claim is None:
            return
        storage_class = self._store.classes.get(volumes.class_name(claim))
        if (
            volumes.wants_provisioning(claim, storage_class)
            and volumes.volume_name_for(claim) not in self._store.pvs
        ):
            assert storage_class is not None
            await self._provision(claim, storage_class)
            return
        pv = self._store.pvs.get(str(claim.get("spec", {}).get("volumeName") or ""))
        if volumes.wants_controller_resize(claim, pv):
            assert pv is not None
            await self._resize(claim, pv)
        elif volumes.wants_node_resize(claim, pv) and self._store.users.get(k):
            assert pv is not None
            await self._expand_on_node(claim, pv, self._store.users[k])

    async def _provision(self, claim: Obj, storage_class: Obj) -> None:
        k = volumes.key(claim)
        self.provisioner.event(
            claim,
            events.NORMAL,
            "Provisioning",
            f'External provisioner is provisioning volume for claim "{k}"',
        )
        selected = claim["metadata"].get("annotations", {}).get(volumes.SELECTED_NODE)
        node = self._store.nodes.get(selected) if selected else None
        try:
            if selected and node is None:
                raise volumes.ProvisioningError(f'failed to get target node: node "{selected}" not found')
            pv = volumes.new_volume(claim, storage_class, node, self.identity)
            path = resource_path("", "v1", "persistentvolumes")
            created = await self._writer.call(f"create pv for {k}", lambda: self._client.create(path, pv))
        except volumes.ProvisioningError as exc:
            name = storage_class["metadata"]["name"]
            self.provisioner.event(
                claim,
                events.WARNING,
                "ProvisioningFailed",
                f'failed to provision volume with StorageClass "{name}": {exc}',
            )
            raise
        if created is not None:
            self.provisioner.event(
                claim,
                events.NORMAL,
                "ProvisioningSucceeded",
                f"Successfully provisioned volume {pv['metadata']['name']}",
            )
            log.info("provisioned volume", extra={"claim": k, "pv": pv["metadata"]["name"]})

    async def _delete(self, name: str) -> None:
        pv = self._store.pvs.get(name)
        if pv is None or not volumes.wants_deletion(pv):
            return
        # DeleteVolume has nothing to free in a simulation; then the finalizer, then the PV.
        path = resource_path("", "v1", "persistentvolumes", name=name)
        remaining = volumes.without_finalizer(pv)
        if remaining is not None:
            patch = {
                "metadata": {
                    "finalizers": remaining,
                    "resourceVersion": pv["metadata"].get("resourceVersion"),
                }
            }
            if (
                await self._writer.call(f"unfinalize pv {name}", lambda: self._client.patch(path, patch))
                is None
            ):
                raise RuntimeError(f"removing the finalizer of PV {name} was refused")
        if not pv["metadata"].get("deletionTimestamp"):
            options = {"preconditions": {"uid": pv["metadata"].get("uid")}}
            await self._writer.call(f"delete pv {name}", lambda: self._client.delete(path, options))
        log.info("deleted volume", extra={"pv": name})

    async def _patch_claim_status(self, claim: Obj, status: Obj) -> None:
        meta = claim["metadata"]
        path = resource_path("", "v1", "persistentvolumeclaims", meta["namespace"], meta["name"], "status")
        if (
            await self._writer.call(
                f"claim status {meta['name']}", lambda: self._client.patch(path, {"status": status})
            )
            is None
        ):
            raise RuntimeError(f"the status of claim {volumes.key(claim)} was refused")

    async def _resize(self, claim: Obj, pv: Obj) -> None:
        name = pv["metadata"]["name"]
        size = claim["spec"]["resources"]["requests"]["storage"]
        kept = volumes.other_conditions(claim, volumes.RESIZING, volumes.FS_RESIZE_PENDING)
        await self._patch_claim_status(
            claim, {"conditions": [*kept, volumes.condition(volumes.RESIZING, _now())]}
        )
        self.resizer.event(claim, events.NORMAL, "Resizing", f"External resizer is resizing volume {name}")
        path = resource_path("", "v1", "persistentvolumes", name=name)
        patch = {"spec": {"capacity": {"storage": size}}}
        if await self._writer.call(f"resize pv {name}", lambda: self._client.patch(path, patch)) is None:
            raise RuntimeError(f"growing PV {name} was refused")
        if volumes.needs_node_expansion(pv):
            pending = volumes.condition(volumes.FS_RESIZE_PENDING, _now(), volumes.FS_RESIZE_PENDING_MESSAGE)
            await self._patch_claim_status(claim, {"conditions": [*kept, pending]})
            self.resizer.event(
                claim,
                events.NORMAL,
                "FileSystemResizeRequired",
                "Require file system resize of volume on node",
            )
        else:
            await self._patch_claim_status(claim, {"conditions": kept or None, "capacity": {"storage": size}})
            self.resizer.event(claim, events.NORMAL, "VolumeResizeSuccessful", "Resize volume succeeded")

    async def _expand_on_node(self, claim: Obj, pv: Obj, users: set[str]) -> None:
        size = pv["spec"]["capacity"]["storage"]
        kept = volumes.other_conditions(claim, volumes.RESIZING, volumes.FS_RESIZE_PENDING)
        await self._patch_claim_status(claim, {"conditions": kept or None, "capacity": {"storage": size}})
        pod = self._pods.get(min(users))
        if pod is not None:
            node = pod["spec"]["nodeName"]
            message = f'MountVolume.NodeExpandVolume succeeded for volume "{pv["metadata"]["name"]}" {node}'
            self.kubelet.event(pod, events.NORMAL, "FileSystemResizeSuccessful", message)
