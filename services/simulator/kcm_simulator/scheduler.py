"""The scheduler stand-in: binds pending default-scheduler pods to the least-loaded node that fits.

Fed pod and node events by `main.py`. New or changed pending pods join a queue; pods that fit
nowhere wait aside and are retried only when a node changes or a pod stops taking capacity
(deleted or finished), as upstream's scheduling queue does. Each node's usage is kept up to date
from the events, so scheduling one pod does not rescan all pods.

As upstream's scheduler, pods are placed one at a time but bound concurrently: a placed pod is
assumed on its node at once (the next placement counts it) and its binding is sent in the
background, at most `BINDS_IN_FLIGHT` at a time; a refused binding forgets the assumption. One
binding at a time held a burst of pods to one API round trip each.

Pods with claims go through upstream's volume binding (with a `csi.VolumeStore`): a missing
claim, or an unbound claim of a class that binds at once, makes the pod unschedulable until a
claim changes; nodes where a bound claim's PV node affinity or an unbound claim's class
allowedTopologies do not hold are filtered out; once placed, the unbound claims get
`volume.kubernetes.io/selected-node` and the binding waits (without its slot, up to
`VOLUME_BIND_TIMEOUT`, upstream's bind timeout) until they are Bound. Pods without claims
cost one scan of their volumes.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from fractions import Fraction
from typing import Any

from kcm_shared.client.kubeclient import KubeClient, resource_path
from kcm_shared.runtime import events

from kcm_simulator import csi, podstatus, scheduling, volumes
from kcm_simulator.calls import Writer

Obj = dict[str, Any]
log = logging.getLogger("kcm.sim.scheduler")
_TERMINAL = ("Succeeded", "Failed")
BINDS_IN_FLIGHT = 32
COMPONENT = "default-scheduler"
VOLUME_BIND_TIMEOUT = 600.0


def _key(obj: Obj) -> str:
    meta = obj.get("metadata", {})
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def is_pending(pod: Obj) -> bool:
    spec = pod.get("spec", {})
    return (
        not spec.get("nodeName")
        and spec.get("schedulerName", "default-scheduler") == "default-scheduler"
        and not pod.get("metadata", {}).get("deletionTimestamp")
        and pod.get("status", {}).get("phase") not in _TERMINAL
    )


def _occupies(pod: Obj) -> str | None:
    """The node whose capacity the pod takes, if any."""
    node = pod.get("spec", {}).get("nodeName")
    return node if node and pod.get("status", {}).get("phase") not in _TERMINAL else None


def _placement(node: Obj) -> tuple[Any, ...]:
    """What of a node the filters read."""
    return (
        node.get("metadata", {}).get("labels"),
        node.get("spec"),
        node.get("status", {}).get("allocatable"),
    )


class Scheduler:
    def __init__(self, client: KubeClient, writer: Writer, store: csi.VolumeStore | None = None) -> None:
        self._client = client
        self._writer = writer
        self.events = events.EventRecorder(client, COMPONENT)
        self._volumes = store
        if store is not None:
            store.listeners.append(self._volumes_changed)
        self._pods: dict[str, Obj] = {}
        self._nodes: dict[str, Obj] = {}
        # `_nodes` by name, rebuilt after a node changes.
        self._node_list: list[Obj] | None = None
        self._start = 0
        self._dirty = asyncio.Event()
        # Pending pods to try, in arrival order (a dict as an ordered set).
        self._queue: dict[str, None] = {}
        self._unschedulable: set[str] = set()
        # What each bound pod takes from its node, and the sums per node.
        self._taken: dict[str, tuple[str, dict[str, Fraction]]] = {}
        self._usage: dict[str, dict[str, Fraction]] = {}
        # Message last reported per pending pod, so a retry that fails the same way writes nothing.
        self._reported: dict[str, str] = {}
        # Pods whose binding is in flight, and the tasks sending them.
        self._binding: set[str] = set()
        self._bind_tasks: set[asyncio.Task[None]] = set()
        self._bind_slots = asyncio.Semaphore(BINDS_IN_FLIGHT)

    def reset_pods(self, pods: list[Obj]) -> None:
        self._pods, self._taken, self._usage = {}, {}, {}
        self._queue, self._unschedulable = {}, set()
        ordered = sorted(pods, key=lambda p: (p.get("metadata", {}).get("creationTimestamp", ""), _key(p)))
        for pod in ordered:
            self._store(_key(pod), pod)
        self._dirty.set()

    def on_pod(self, kind: str, pod: Obj) -> None:
        key = _key(pod)
        if kind == "DELETED":
            self._pods.pop(key, None)
            self._reported.pop(key, None)
            self._queue.pop(key, None)
            self._unschedulable.discard(key)
            self._account(key, None)
            self._retry_unschedulable()
        else:
            self._store(key, pod)
        self._dirty.set()

    def reset_nodes(self, nodes: list[Obj]) -> None:
        self._nodes = {n["metadata"]["name"]: n for n in nodes}
        self._node_list = None
        self._retry_unschedulable()
        self._dirty.set()

    def on_node(self, kind: str, node: Obj) -> None:
        name = node["metadata"]["name"]
        old = self._nodes.pop(name, None)
        self._node_list = None
        if kind != "DELETED":
            self._nodes[name] = node
        # Heartbeats change nothing the filters read: retrying on them would be work for nothing.
        if kind == "DELETED" or old is None or _placement(old) != _placement(node):
            self._retry_unschedulable()
        self._dirty.set()

    def _volumes_changed(self) -> None:
        """A claim, PV or class changed: pods that waited on one may fit now."""
        if self._unschedulable:
            self._retry_unschedulable()
            self._dirty.set()

    def _sorted_nodes(self) -> list[Obj]:
        if self._node_list is None:
            self._node_list = sorted(self._nodes.values(), key=lambda n: n["metadata"]["name"])
        return self._node_list

    def _store(self, key: str, pod: Obj) -> None:
        self._pods[key] = pod
        freed = self._account(key, pod)
        # Any change to a pending pod may make it fit, as upstream's queue assumes.
        self._unschedulable.discard(key)
        if is_pending(pod):
            self._queue[key] = None
        else:
            self._queue.pop(key, None)
        if freed:
            self._retry_unschedulable()

    def _account(self, key: str, pod: Obj | None) -> bool:
        """Moves the pod's requests to the node it now occupies; True when capacity was freed."""
        node = _occupies(pod) if pod is not None else None
        old = self._taken.get(key)
        if old is not None and old[0] == node:
            return False
        if old is not None:
            self._add(old[0], old[1], -1)
            del self._taken[key]
        if node is not None and pod is not None:
            taken = scheduling.used([pod])
            self._taken[key] = (node, taken)
            self._add(node, taken, 1)
        return old is not None

    def _add(self, node: str, taken: dict[str, Fraction], sign: int) -> None:
        total = self._usage.setdefault(node, {"cpu": Fraction(0), "memory": Fraction(0), "pods": Fraction(0)})
        for name, amount in taken.items():
            total[name] += sign * amount

    def _retry_unschedulable(self) -> None:
        for key in sorted(self._unschedulable):
            self._queue[key] = None
        self._unschedulable.clear()

    async def run(self) -> None:
        try:
            while True:
                await self._dirty.wait()
                self._dirty.clear()
                await self._schedule_pending()
        finally:
            for task in list(self._bind_tasks):
                task.cancel()

    async def _schedule_pending(self) -> None:
        while self._queue:
            # The slot first, so that the pod is placed on the state of the moment it is bound.
            await self._bind_slots.acquire()
            if not await self._place_next():
                self._bind_slots.release()

    async def _place_next(self) -> bool:
        """Place the next queued pod and start its binding (which then owns the slot); False
        when there was nothing to bind."""
        if not self._queue:
            return False
        key = next(iter(self._queue))
        del self._queue[key]
        pod = self._pods.get(key)
        # A pod being bound may show up pending again from an event older than its binding.
        if pod is None or not is_pending(pod) or key in self._binding:
            return False
        nodes = self._sorted_nodes()
        claims: list[Obj] = []
        extra = None
        if self._volumes is not None and volumes.claim_names(pod):
            found = self._volumes.pod_claims(pod)
            why = self._volume_prefilter(pod, found)
            if why is not None or found is None:
                self._unschedulable.add(key)
                await self._report_unschedulable(pod, f"0/{len(nodes)} nodes are available: {why}.")
                return False
            claims = found
            store = self._volumes

            def extra(node: Obj) -> str | None:
                return volumes.volume_misfit(claims, store.pvs, store.classes, node)

        target, failures = scheduling.pick_node(pod, nodes, self._usage, self._start, extra)
        # The next search starts past the nodes this one looked at, as upstream's does.
        self._start = (self._start + scheduling.nodes_to_find(len(nodes))) % max(len(nodes), 1)
        if target is None:
            self._unschedulable.add(key)
            await self._report_unschedulable(pod, scheduling.unschedulable_message(len(nodes), failures))
            return False
        assumed = {**pod, "spec": {**pod.get("spec", {}), "nodeName": target}}
        self._store(key, assumed)
        self._binding.add(key)
        task = asyncio.create_task(self._bind_assumed(key, pod, assumed, target, claims))
        self._bind_tasks.add(task)
        task.add_done_callback(self._bind_tasks.discard)
        return True

    def _volume_prefilter(self, pod: Obj, claims: list[Obj] | None) -> str | None:
        """Upstream's VolumeBinding PreFilter: why no node can take the pod now, or None."""
        assert self._volumes is not None
        if claims is None:
            missing = next(
                n
                for n, k in zip(volumes.claim_names(pod), volumes.claim_keys(pod), strict=True)
                if k not in self._volumes.claims
            )
            return f'persistentvolumeclaim "{missing}" not found'
        for claim in claims:
            if claim.get("metadata", {}).get("deletionTimestamp"):
                return f'persistentvolumeclaim "{claim["metadata"]["name"]}" is being deleted'
        if volumes.unbound_immediate(claims, self._volumes.classes):
            return volumes.UNBOUND_IMMEDIATE
        return None

    async def _bind_assumed(self, key: str, pod: Obj, assumed: Obj, target: str, claims: list[Obj]) -> None:
        bound = False
        try:
            if any(not volumes.is_bound(c) for c in claims):
                # Waiting for the volumes must not hold back pods that have none.
                self._bind_slots.release()
                try:
                    ready = await self._bind_volumes(pod, claims, target)
                finally:
                    await self._bind_slots.acquire()
                bound = ready and await self._bind(pod, target)
            else:
                bound = await self._bind(pod, target)
        finally:
            self._binding.discard(key)
            self._bind_slots.release()
        if bound:
            self._reported.pop(key, None)
            return
        # Refused for good (e.g. already bound): the pod's next event or a node change says more.
        if self._pods.get(key) is assumed:
            self._store(key, pod)
            self._queue.pop(key, None)
        self._unschedulable.add(key)
        self._dirty.set()

    async def _bind_volumes(self, pod: Obj, claims: list[Obj], node: str) -> bool:
        """Upstream's PreBind: the selected node on each unbound claim, then until all are
        Bound; False when a write is refused or the wait times out."""
        assert self._volumes is not None
        for claim in volumes.claims_to_select(claims, node):
            meta = claim["metadata"]
            path = resource_path("", "v1", "persistentvolumeclaims", meta.get("namespace"), meta["name"])
            if await self._select_node(f"select node {_key(claim)}", path, node) is None:
                return False
        try:
            async with asyncio.timeout(VOLUME_BIND_TIMEOUT):
                await self._volumes.wait_bound([volumes.key(c) for c in claims])
        except TimeoutError:
            log.info("volumes not bound in time", extra={"pod": _key(pod), "node": node})
            return False
        return True

    async def _select_node(self, what: str, path: str, node: str) -> Obj | None:
        patch = {"metadata": {"annotations": {volumes.SELECTED_NODE: node}}}
        return await self._writer.call(what, lambda: self._client.patch(path, patch))

    async def _bind(self, pod: Obj, node: str) -> bool:
        meta = pod["metadata"]
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": meta["name"], "namespace": meta.get("namespace"), "uid": meta.get("uid")},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        path = resource_path("", "v1", "pods", meta.get("namespace"), meta["name"], "binding")
        done = await self._writer.call(f"bind {_key(pod)}", lambda: self._client.create(path, body))
        if done is not None:
            log.info("bound pod", extra={"pod": _key(pod), "node": node})
            message = f"Successfully assigned {_key(pod)} to {node}"
            self.events.event(podstatus.reference(pod), events.NORMAL, "Scheduled", message)
        return done is not None

    async def _report_unschedulable(self, pod: Obj, message: str) -> None:
        key = _key(pod)
        if self._reported.get(key) == message:
            return
        self._reported[key] = message
        meta = pod["metadata"]
        path = resource_path("", "v1", "pods", meta.get("namespace"), meta["name"], "status")
        patch = {"status": podstatus.unschedulable(message, _now())}
        await self._writer.call(f"unschedulable {key}", lambda: self._client.patch(path, patch))
        log.info("pod unschedulable", extra={"pod": key, "reason": message})
