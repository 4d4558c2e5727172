"""The kubelet stand-in: registers the simulated nodes, heartbeats them, and runs their pods.

Node heartbeats renew the Lease in kube-node-lease and post the node's conditions, as a
kubelet: a fresh lastHeartbeatTime each time, the lastTransitionTime kept while a condition's
status is the one the API holds (the node lifecycle controller may have set it Unknown). A
node whose heartbeats are stopped (`control.py`) does neither, so that controller sees it go
silent; its pods still finish their graceful deletions, and when its heartbeats resume its
running pods post their readiness again (a kubelet's status manager resyncing them). Pods
bound to our nodes become Running (or finish, per the annotations in podstatus.py), a running
pod's readiness follows its `sim.kcm.dev/ready` annotation as it changes, containers that exit
restart after upstream's CrashLoopBackOff back-off, a changed image kills and restarts them
with it, and graceful deletions are completed once their grace period is over. Only with `manage_not_ready_taint`
(for a stack without a node lifecycle controller) does it play that controller's part for its
own nodes: the `node.kubernetes.io/not-ready:NoSchedule` taint removed once the node reports
Ready and put back while it reports NotReady. With a `csi.VolumeStore`, a pod with claims
starts only once each is Bound (and its volumes attached: `VolumeStore.attached`, the
attach/detach hook). Fed pod and node events by `main.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from kcm_shared.client.kubeclient import KubeClient, resource_path
from kcm_shared.runtime import events

from kcm_simulator import backoff, csi, images, nodes, podstatus, volumes
from kcm_simulator.calls import Writer
from kcm_simulator.nodevolumes import NodeVolumes

Obj = dict[str, Any]
log = logging.getLogger("kcm.sim.kubelet")
_TERMINAL = ("Succeeded", "Failed")
# Failed attempts remembered for `sim.kcm.dev/fail-attempts` (per Job and index); the oldest
# are forgotten past this many, as are all on a restart.
_MAX_REMEMBERED_ATTEMPTS = 10_000
# Images a node remembers having pulled (for IfNotPresent); the oldest are forgotten past this.
_MAX_NODE_IMAGES = 1000
# How long after ErrImagePull the kubelet's next sync reports ImagePullBackOff, as a share of the
# back-off's first delay (upstream's pod worker retries a failed sync within seconds).
_RESYNC_SHARE = 0.2
COMPONENT = "kubelet"


CREATING_SHOWN_FROM = 1.0  # seconds of --pod-start-delay


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class NodeState:
    index: int
    heartbeat: bool = True
    ready: bool = True
    serial: int = 0
    uid: str = ""
    # The node's conditions as the API last showed them, by type (heartbeat replies, node events).
    seen: dict[str, Obj] = field(default_factory=dict)
    pod_cidrs: list[str] = field(default_factory=list)
    # Set once the node has its pod CIDRs: at once, or when node IPAM wrote them (`on_node`).
    cidrs_known: asyncio.Event = field(default_factory=asyncio.Event)
    # Normalized references of the images pulled on this node, oldest first.
    images: OrderedDict[str, None] = field(default_factory=OrderedDict)


@dataclass
class PodRun:
    key: tuple[str, str]
    node: str
    task: asyncio.Task[None]
    # What the pod's ready annotation asks for now; `ready_changed` wakes the run to report it.
    ready: bool
    # The latest pod seen; `images_changed` wakes a run stuck on an image when one is fixed.
    pod: Obj
    crash: asyncio.Event = field(default_factory=asyncio.Event)
    ready_changed: asyncio.Event = field(default_factory=asyncio.Event)
    images_changed: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass(frozen=True)
class Sandbox:
    """Where a pod's containers run: its node's address, its own, and when it started."""

    host_ip: str
    pod_ips: list[str]
    start_time: str

    @property
    def pod_ip(self) -> str:
        return self.pod_ips[0]


@dataclass(frozen=True)
class Exited:
    """The run of a pod's containers that just ended: their restart count during it and its
    (exit code, startedAt, finishedAt), what a restart reports as their last state."""

    restarts: int
    last: tuple[int, str, str]


@dataclass
class Termination:
    """A graceful deletion under way: the latest pod seen, and when it was asked for."""

    pod: Obj
    requested: float
    task: asyncio.Task[None]
    # Set when a later event may move the end: a shorter grace period, a changed annotation.
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class Kubelet:
    def __init__(
        self,
        client: KubeClient,
        writer: Writer,
        *,
        count: int,
        zones: int,
        prefix: str,
        pod_start_delay: float,
        heartbeat_interval: float,
        node_ipam: bool = False,
        stop_seconds: float | None = podstatus.STOP_SECONDS,
        manage_not_ready_taint: bool = False,
        volumes: NodeVolumes | None = None,
        backoff_scale: float = 1.0,
        store: csi.VolumeStore | None = None,
        endpoint: tuple[str, int] | None = None,
    ) -> None:
        self._client = client
        self._claims = store
        self._writer = writer
        self._zones = zones
        self._prefix = prefix
        self._delay = pod_start_delay
        self._interval = heartbeat_interval
        self._node_ipam = node_ipam
        self._stop_seconds = stop_seconds  # after SIGTERM; None: containers ignore it
        self._manage_taint = manage_not_ready_taint
        self._volumes = volumes
        self._endpoint = endpoint  # the kubelet server's host and port, registered on each Node
        self.nodes = {nodes.node_name(prefix, i): self._new_state(i) for i in range(count)}
        self._next_index = count
        self._loops: dict[str, asyncio.Task[None]] = {}
        self._group: asyncio.TaskGroup | None = None
        self._runs: dict[str, PodRun] = {}
        self._terminations: dict[str, Termination] = {}
        self._failed_attempts: OrderedDict[tuple[str, int | None], int] = OrderedDict()
        self._pull_backoff = backoff.Backoff(backoff_scale)
        self._restarts = backoff.Backoff(backoff_scale)  # CrashLoopBackOff
        # One recorder for all the simulated kubelets: each Event names its node as the host.
        self.events = events.EventRecorder(client, COMPONENT)

    # -- nodes ------------------------------------------------------------------------------

    def _new_state(self, index: int) -> NodeState:
        """A node's state; without node IPAM its pod CIDR is the simulator's own, known at once."""
        state = NodeState(index)
        if not self._node_ipam:
            state.pod_cidrs = [nodes.pod_cidr(index)]
            state.cidrs_known.set()
        return state

    async def run_nodes(self) -> None:
        async with asyncio.TaskGroup() as group:
            self._group = group
            for name in self.nodes:
                self._loops[name] = group.create_task(self._node_loop(name))
            try:
                # Nodes may be added later, and there may be none yet: the group stays open.
                await asyncio.get_running_loop().create_future()
            finally:
                self._group = None

    def add_node(self) -> str:
        """Register one more node (the next index of the prefix) and start its heartbeats, as a
        kubelet joining the cluster; returns its name. Only while `run_nodes` runs."""
        if self._group is None:
            raise RuntimeError("the simulated nodes are not running")
        name = nodes.node_name(self._prefix, self._next_index)
        self.nodes[name] = self._new_state(self._next_index)
        self._next_index += 1
        self._loops[name] = self._group.create_task(self._node_loop(name))
        return name

    async def remove_node(self, name: str) -> None:
        """Take a node away as when its machine is gone: heartbeats and its pods' runs stop,
        then the Node and its Lease are deleted. Its pods stay bound to it in the API, for the
        pod garbage collector to remove, as on a real cluster."""
        del self.nodes[name]
        loop = self._loops.pop(name, None)
        if loop is not None:
            loop.cancel()
        for uid, run in list(self._runs.items()):
            if run.node == name:
                self._runs.pop(uid).task.cancel()
        for uid, term in list(self._terminations.items()):
            if term.pod.get("spec", {}).get("nodeName") == name:
                self._cancel_termination(uid)
        node_path = resource_path("", "v1", "nodes", name=name)
        lease_path = resource_path("coordination.k8s.io", "v1", "leases", "kube-node-lease", name)
        await self._writer.call(f"delete node {name}", lambda: self._client.delete(node_path))
        await self._writer.call(f"delete lease {name}", lambda: self._client.delete(lease_path))

    async def _node_loop(self, name: str) -> None:
        state = self.nodes[name]
        await self._register(name, state)
        while True:
            if state.heartbeat:
                await self.heartbeat(name)
            await asyncio.sleep(self._interval)

    async def _register(self, name: str, state: NodeState) -> None:
        obj = nodes.node(
            self._prefix,
            state.index,
            self._zones,
            _now(),
            with_pod_cidr=not self._node_ipam,
            endpoint=self._endpoint,
        )
        path = resource_path("", "v1", "nodes")
        await self._writer.call(f"register {name}", lambda: self._client.create(path, obj))
        # Upstream may drop status on create, and a node left from an earlier run keeps its old one.
        status_path = resource_path("", "v1", "nodes", name=name, subresource="status")
        patch = {
            "metadata": {"labels": obj["metadata"]["labels"], "annotations": obj["metadata"]["annotations"]},
            "status": obj["status"],
        }
        node = await self._writer.call(f"node status {name}", lambda: self._client.patch(status_path, patch))
        if node is not None:
            self._saw(state, node)
            await self._sync_not_ready_taint(node, state.ready)
        if self._volumes is not None:
            await self._volumes.register(name, state.uid)
        log.info("registered node", extra={"node": name})

    async def heartbeat(self, name: str) -> None:
        state = self.nodes[name]
        path = resource_path("", "v1", "nodes", name=name, subresource="status")
        patch = {"status": {"conditions": nodes.conditions(_now(), state.ready, state.seen)}}
        node = await self._writer.call(f"heartbeat {name}", lambda: self._client.patch(path, patch))
        if node is None:
            # Someone deleted the node: a kubelet registers itself again.
            state.seen, state.uid = {}, ""
            await self._register(name, state)
        else:
            self._saw(state, node)
            await self._sync_not_ready_taint(node, state.ready)
        await self._renew_lease(name, state)

    @staticmethod
    def _saw(state: NodeState, node: Obj) -> None:
        state.seen = nodes.conditions_by_type(node)
        state.uid = str((node.get("metadata") or {}).get("uid") or state.uid)

    async def _sync_not_ready_taint(self, node: Obj, ready: bool) -> None:
        """The node lifecycle controller's NoSchedule tainting for the Ready condition just
        reported, with `manage_not_ready_taint` only. A write that loses a race (409) is left to
        the next heartbeat."""
        if not self._manage_taint:
            return
        taints = node.get("spec", {}).get("taints") or []
        wanted = nodes.with_not_ready_taint(taints, not ready)
        if wanted == taints:
            return
        meta = node["metadata"]
        path = resource_path("", "v1", "nodes", name=meta["name"])
        patch = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "spec": {"taints": wanted}}
        await self._writer.call(f"taints {meta['name']}", lambda: self._client.patch(path, patch))

    async def _renew_lease(self, name: str, state: NodeState) -> None:
        lease = nodes.lease(name, _micro_now(), state.uid)
        ns = "kube-node-lease"
        path = resource_path("coordination.k8s.io", "v1", "leases", ns, name)
        patch = {"spec": lease["spec"]}
        if await self._writer.call(f"lease {name}", lambda: self._client.patch(path, patch)) is None:
            collection = resource_path("coordination.k8s.io", "v1", "leases", ns)
            await self._writer.call(f"lease {name}", lambda: self._client.create(collection, lease))

    def set_heartbeat(self, name: str, on: bool) -> None:
        state = self.nodes[name]
        resumed = on and not state.heartbeat
        state.heartbeat = on
        if resumed:
            # Back in touch: the running pods post their readiness again, which whoever
            # changed it meanwhile (MarkPodsNotReady) does not get to keep.
            for run in self._runs.values():
                if run.node == name:
                    run.ready_changed.set()

    async def set_ready(self, name: str, ready: bool) -> None:
        self.nodes[name].ready = ready
        if self.nodes[name].heartbeat:
            await self.heartbeat(name)

    def reset_nodes(self, items: list[Obj]) -> None:
        for node in items:
            self.on_node("ADDED", node)

    def on_node(self, kind: str, node: Obj) -> None:
        """With node IPAM, learn the pod CIDRs the controller gave our node; a deleted node
        registers again and waits for new ones."""
        state = self.nodes.get(node.get("metadata", {}).get("name", ""))
        if state is None:
            return
        if kind != "DELETED":
            self._saw(state, node)
        if not self._node_ipam:
            return
        spec = node.get("spec") or {}
        cidrs = (
            []
            if kind == "DELETED"
            else spec.get("podCIDRs") or ([spec["podCIDR"]] if spec.get("podCIDR") else [])
        )
        state.pod_cidrs = list(cidrs)
        if cidrs:
            state.cidrs_known.set()
        else:
            state.cidrs_known.clear()

    # -- pods -------------------------------------------------------------------------------

    def reset_pods(self, pods: list[Obj]) -> None:
        present = {p.get("metadata", {}).get("uid") for p in pods}
        for uid in list(self._runs):
            if uid not in present:
                self._runs.pop(uid).task.cancel()
        for uid in list(self._terminations):
            if uid not in present:
                self._cancel_termination(uid)
        for pod in pods:
            self.on_pod("ADDED", pod)

    def on_pod(self, kind: str, pod: Obj) -> None:
        meta = pod.get("metadata", {})
        uid = meta.get("uid", "")
        if pod.get("spec", {}).get("nodeName") not in self.nodes:
            return
        if kind == "DELETED":
            run = self._runs.pop(uid, None)
            if run is not None:
                run.task.cancel()
            self._cancel_termination(uid)
            return
        if meta.get("deletionTimestamp"):
            run = self._runs.get(uid)
            if run is not None:
                run.task.cancel()
            self._terminate(uid, pod)
            return
        run = self._runs.get(uid)
        if run is not None:
            if _images(pod) != _images(run.pod):
                run.images_changed.set()
            run.pod = pod
            ready = podstatus.behaviour(pod).ready
            if ready != run.ready:
                run.ready = ready
                run.ready_changed.set()
            return
        if pod.get("status", {}).get("phase") not in _TERMINAL:
            self._skip_addresses(pod)
            task = asyncio.ensure_future(self._run_pod(pod))
            key = (meta.get("namespace", ""), meta.get("name", ""))
            node = pod["spec"]["nodeName"]
            self._runs[uid] = PodRun(key, node, task, ready=podstatus.behaviour(pod).ready, pod=pod)

    def _skip_addresses(self, pod: Obj) -> None:
        """Hand out no address a pod already has: after a restart the serials start over."""
        state = self.nodes[pod["spec"]["nodeName"]]
        for ip in pod.get("status", {}).get("podIPs") or []:
            for cidr in state.pod_cidrs:
                state.serial = max(state.serial, nodes.serial_after(cidr, ip.get("ip", "")))

    def crash(self, namespace: str, name: str) -> bool:
        for run in self._runs.values():
            if run.key == (namespace, name) and not run.task.done():
                run.crash.set()
                return True
        return False

    async def stop(self) -> None:
        """Cancel every pod's run and pending deletion; a restarted sim picks them up from the API."""
        tasks = [run.task for run in self._runs.values()]
        tasks += [term.task for term in self._terminations.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._runs.clear()
        self._terminations.clear()

    def _terminate(self, uid: str, pod: Obj) -> None:
        requested = podstatus.deletion_requested(pod, time.time())
        term = self._terminations.get(uid)
        if term is None:
            task = asyncio.ensure_future(self._finish_deletion(uid))
            self._terminations[uid] = Termination(pod, requested, task)
        elif not term.task.done():
            term.pod = pod
            # A second delete only ever shortens the grace; the earliest request time is the real one.
            term.requested = min(term.requested, requested)
            term.changed.set()

    def _cancel_termination(self, uid: str) -> None:
        term = self._terminations.pop(uid, None)
        if term is not None:
            term.task.cancel()

    async def _finish_deletion(self, uid: str) -> None:
        """Stop the containers as a kubelet does: they exit shortly after SIGTERM (exit code 0),
        or are killed when the grace period ends (137) if they ignore it (`podstatus.stop_after`);
        report the pod terminal, then remove it with grace 0."""
        term = self._terminations[uid]
        # A pod whose containers never started has nothing to stop, so nothing to wait for.
        running = term.pod.get("status", {}).get("phase") == "Running"
        on_their_own = False
        while running:
            seconds, on_their_own = podstatus.stop_after(term.pod, self._stop_seconds)
            left = term.requested + seconds - time.time()
            if left <= 0:
                break
            term.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(term.changed.wait(), left)
        pod = term.pod
        meta = pod["metadata"]
        if running:
            for container in pod["spec"].get("containers") or []:
                name = container.get("name", "")
                self._event(pod, "containers", name, events.NORMAL, "Killing", f"Stopping container {name}")
            # As upstream since 1.27: a deleted pod ends Succeeded or Failed before it goes,
            # which is what e.g. the Job controller waits for to drop its finalizer.
            code = 0 if on_their_own else podstatus.KILLED_EXIT_CODE
            await self._patch_status(pod, podstatus.stopped(pod, now=_now(), exit_code=code))
        path = resource_path("", "v1", "pods", meta.get("namespace"), meta["name"])
        options = {"gracePeriodSeconds": 0, "preconditions": {"uid": meta.get("uid")}}
        await self._writer.call(f"delete {meta['name']}", lambda: self._client.delete(path, options))

    async def _patch_status(self, pod: Obj, status: Obj) -> None:
        # A strategic merge patch, as a kubelet's status manager sends: conditions merge by
        # type, so one another writer set since our view (the taint-eviction controller's
        # DisruptionTarget just before its delete) is kept; a JSON merge patch replaced the list.
        meta = pod["metadata"]
        path = resource_path("", "v1", "pods", meta.get("namespace"), meta["name"], "status")
        await self._writer.call(
            f"status {meta['name']}", lambda: self._client.patch(path, {"status": status}, "strategic")
        )

    async def _run_pod(self, pod: Obj) -> None:
        try:
            claims = volumes.claim_keys(pod)
            if claims and self._claims is not None:
                # As a kubelet's volume manager: no container before every claim is Bound, and
                # then (`mount`) its attachable volumes attached to the node.
                await self._claims.wait_bound(claims)
            if self._volumes is not None:
                await self._volumes.mount(pod)
            await self._run_containers(pod)
        finally:
            if self._volumes is not None:
                self._volumes.release(pod["spec"]["nodeName"], pod["metadata"].get("uid", ""))

    async def _run_containers(self, pod: Obj) -> None:
        meta = pod["metadata"]
        run = self._runs[meta.get("uid", "")]
        # A pod this simulator ran before it restarted goes on running, as a kubelet's containers
        # outlive the kubelet: its status is not written again.
        resumed = podstatus.resumed(pod, run.ready)
        node = pod["spec"]["nodeName"]
        state = self.nodes[node]
        host_ip = f"10.0.{state.index}.1"
        start_time = pod.get("status", {}).get("startTime") or _now()
        if resumed is None and self._delay >= CREATING_SHOWN_FROM:
            # What `kubectl get pods` shows as ContainerCreating while the sandbox is made. Only
            # for a delay of a second or more: status times are whole seconds, and a Ready
            # condition going False and then True within one second reads, to the endpoint
            # controllers' trigger-time tracking (upstream's too), as no change at all.
            creating = podstatus.waiting(pod, now=_now(), host_ip=host_ip, pod_ips=[], start_time=start_time)
            await self._patch_status(pod, creating)
        pod_ips = [ip["ip"] for ip in pod.get("status", {}).get("podIPs") or [] if ip.get("ip")]
        if pod["spec"].get("hostNetwork"):
            pod_ips = [host_ip]
        elif not pod_ips:
            # As a kubelet whose network plugin has no range yet: no pod runs before the node's CIDRs.
            await state.cidrs_known.wait()
            pod_ips = [nodes.pod_ip(cidr, state.serial) for cidr in state.pod_cidrs]
            state.serial += 1
        sandbox = Sandbox(host_ip, pod_ips, start_time)
        if resumed is None:
            pod = await self._start_containers(run, sandbox)
        key = podstatus.attempt_key(pod)
        before = podstatus.attempts_before(pod)
        if before is None:
            before = self._failed_attempts.get(key, 0)
        restarts = 0 if resumed is None else resumed.restarts
        last: tuple[int, str, str] | None = None
        while True:
            want = podstatus.behaviour(pod)  # read again for each run
            run.ready_changed.clear()  # this status reports the latest wish
            if resumed is not None:
                started, status, resumed = resumed.started, resumed.status, None
            else:
                started = _now()
                status = podstatus.running(
                    pod,
                    now=started,
                    start_time=start_time,
                    host_ip=host_ip,
                    pod_ip=sandbox.pod_ip,
                    ready=run.ready,
                    restarts=restarts,
                    last_exit=last,
                    pod_ips=pod_ips,
                )
                await self._patch_status(pod, status)
            code = await self._wait_exit(
                run, want.exit_code_for(before + restarts), want.run_seconds, pod, status
            )
            if code is None:
                # A container's image changed: upstream restarts it whatever the restart policy.
                code = await self._kill_changed(run, pod)
            elif not podstatus.restarts_after(pod["spec"].get("restartPolicy", "Always"), code):
                if code != 0 and want.fail_attempts is not None:
                    self._remember_failure(key)
                final = podstatus.finished(
                    pod,
                    now=_now(),
                    start_time=start_time,
                    started=started,
                    host_ip=host_ip,
                    pod_ip=sandbox.pod_ip,
                    exit_code=code,
                    restarts=restarts,
                    condition=want.fail_condition,
                    pod_ips=pod_ips,
                )
                await self._patch_status(pod, final)
                return
            last = (code, started, _now())
            exited = Exited(restarts, last)
            await self._back_off(run, sandbox, exited, time.time())
            pod = await self._start_containers(run, sandbox, exited)
            restarts += 1

    def _event(self, pod: Obj, kind: str, container: str, type_: str, reason: str, message: str) -> None:
        """Record an Event about one of the pod's containers (`kind` "containers" or
        "initContainers"), from the kubelet of the pod's node, as upstream's container refs."""
        ref = podstatus.reference(pod, f"spec.{kind}{{{container}}}")
        self.events.event(ref, type_, reason, message, host=pod["spec"]["nodeName"])

    async def _start_containers(self, run: PodRun, sandbox: Sandbox, exited: Exited | None = None) -> Obj:
        """Pull, create and start the pod's containers in order, init containers first (each of
        which runs to completion at once), recording the kubelet's Events; the start delay is
        spent pulling (or, with every image present, before the first container is created).
        While an image cannot be used the pod reports why (ErrImagePull, then ImagePullBackOff
        until the back-off is over; InvalidImageName or ErrImageNeverPull until the image is
        changed) and tries again; a change of the pod's images retries at once. With `exited`
        (a restart) only the regular containers start again, pulling when their image is not
        on the node (a changed one) and otherwise at once, and the pod stays Running with the
        run that ended as their last state. Returns the pod as last seen, whose containers are
        now started."""
        loop = asyncio.get_running_loop()
        ready_at = loop.time() + self._delay
        started: set[tuple[str, str]] = set()
        if exited is not None:
            started = {
                (kind, c.get("name", "")) for kind, c in _containers(run.pod) if kind == "initContainers"
            }
        while True:
            pod = run.pod
            run.images_changed.clear()
            failure: tuple[str, str, str, str] | None = None
            for kind, container in _containers(pod):
                name = container.get("name", "")
                if (kind, name) in started:
                    continue
                failure = await self._ensure_image(pod, kind, container, ready_at)
                if failure is not None:
                    break
                if exited is None:
                    await asyncio.sleep(max(0.0, ready_at - loop.time()))
                self._event(pod, kind, name, events.NORMAL, "Created", f"Created container: {name}")
                self._event(pod, kind, name, events.NORMAL, "Started", f"Started container {name}")
                started.add((kind, name))
            if failure is None:
                return pod
            name, reason, message, backoff_key = failure
            if exited is None:
                status = podstatus.waiting(
                    pod,
                    now=_now(),
                    host_ip=sandbox.host_ip,
                    pod_ips=sandbox.pod_ips,
                    start_time=sandbox.start_time,
                    reason=reason,
                    message=message,
                    container=name,
                )
            else:
                status = _restarting(pod, sandbox, exited, {name: (reason, message)})
            await self._patch_status(pod, status)
            wait: float | None = None  # a bad name or policy waits for the pod to change
            if backoff_key:
                wait = self._pull_backoff.remaining(backoff_key, time.time())
                if reason == "ErrImagePull":
                    wait = min(wait, self._pull_backoff.initial * _RESYNC_SHARE)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(run.images_changed.wait(), wait)

    async def _ensure_image(
        self, pod: Obj, kind: str, container: Obj, ready_at: float
    ) -> tuple[str, str, str, str] | None:
        """Make the container's image present on the node as upstream's image manager does, with
        its Events; None when it is, else (container, waiting reason, message, back-off key)."""
        name, image = container.get("name", ""), str(container.get("image", ""))
        warn = events.WARNING
        try:
            ref = images.parse(image)
        except images.InvalidImage as exc:
            message = images.inspect_failure(image, exc)
            self._event(pod, kind, name, warn, "InspectFailed", message)
            self._event(pod, kind, name, warn, "Failed", "Error: InvalidImageName")
            return name, "InvalidImageName", message, ""
        state = self.nodes[pod["spec"]["nodeName"]]
        present = ref.full in state.images
        policy = container.get("imagePullPolicy")
        if policy == "Never" or (present and not images.pulls_always(container, ref)):
            if present:
                message = f'Container image "{image}" already present on machine'
                self._event(pod, kind, name, events.NORMAL, "Pulled", message)
                return None
            message = f'Container image "{image}" is not present with pull policy of Never'
            self._event(pod, kind, name, warn, "ErrImageNeverPull", message)
            self._event(pod, kind, name, warn, "Failed", "Error: ErrImageNeverPull")
            return name, "ErrImageNeverPull", message, ""
        key = f"{pod['metadata'].get('uid', '')}_{image}"
        if self._pull_backoff.remaining(key, time.time()) > 0:
            message = f'Back-off pulling image "{image}"'
            self._event(pod, kind, name, events.NORMAL, "BackOff", message)
            self._event(pod, kind, name, warn, "Failed", "Error: ImagePullBackOff")
            return name, "ImagePullBackOff", message, key
        self._event(pod, kind, name, events.NORMAL, "Pulling", f'Pulling image "{image}"')
        loop = asyncio.get_running_loop()
        began = loop.time()
        await asyncio.sleep(max(0.0, ready_at - began))
        error = images.pull_error(ref)
        if error is not None:
            self._event(pod, kind, name, warn, "Failed", f'Failed to pull image "{image}": {error}')
            self._pull_backoff.next(key, time.time())
            self._event(pod, kind, name, warn, "Failed", "Error: ErrImagePull")
            return name, "ErrImagePull", error, key
        self._pull_backoff.forget(key)
        state.images[ref.full] = None
        state.images.move_to_end(ref.full)
        while len(state.images) > _MAX_NODE_IMAGES:
            state.images.popitem(last=False)
        took = images.go_duration(loop.time() - began)
        message = (
            f'Successfully pulled image "{image}" in {took} ({took} including waiting). '
            f"Image size: {images.size_bytes(ref)} bytes."
        )
        self._event(pod, kind, name, events.NORMAL, "Pulled", message)
        return None

    async def _kill_changed(self, run: PodRun, pod: Obj) -> int:
        """Stop the containers because one's image changed, as upstream's kubelet kills a
        container whose definition changed: Event Killing for each changed container, then
        they exit shortly after SIGTERM (code 0) or, if they ignore it, are killed at the end of
        the pod's terminationGracePeriodSeconds (137). Returns the exit code."""
        before = dict(_named_images(pod))
        for name, image in _named_images(run.pod):
            if before.get(name, image) != image:
                message = f"Container {name} definition changed, will be restarted"
                self._event(run.pod, "containers", name, events.NORMAL, "Killing", message)
        seconds, on_their_own = podstatus.stop_after(
            run.pod, self._stop_seconds, podstatus.kill_grace(run.pod)
        )
        await asyncio.sleep(seconds)
        return 0 if on_their_own else podstatus.KILLED_EXIT_CODE

    async def _back_off(self, run: PodRun, sandbox: Sandbox, exited: Exited, exited_at: float) -> None:
        """Wait out upstream kubelet's restart back-off (`backoff.Backoff` per pod, container
        and image, counted from the exit): the first restart is at once, each later one within
        ten minutes of the previous waits twice as long (10 s to 5 min, scaled). Meanwhile the
        containers wait with reason CrashLoopBackOff and the Warning BackOff Event is recorded
        at each of the kubelet's resyncs (every first delay); a changed image starts over."""
        while True:
            pod = run.pod
            keys = {c.get("name", ""): _restart_key(pod, c) for c in pod["spec"].get("containers") or []}
            now = time.time()
            left = max(
                (self._restarts.remaining_since(k, exited_at, now) for k in keys.values()), default=0.0
            )
            if left <= 0:
                break
            full = _format_pod(pod)
            waits = {
                name: (
                    "CrashLoopBackOff",
                    f"back-off {images.go_duration(self._restarts.delay(key))} "
                    f"restarting failed container={name} pod={full}",
                )
                for name, key in keys.items()
            }
            await self._patch_status(pod, _restarting(pod, sandbox, exited, waits))
            for name in keys:
                message = f"Back-off restarting failed container {name} in pod {full}"
                self._event(pod, "containers", name, events.WARNING, "BackOff", message)
            run.images_changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(run.images_changed.wait(), min(left, self._restarts.initial))
        for key in keys.values():
            self._restarts.next(key, exited_at)

    def _remember_failure(self, key: tuple[str, int | None]) -> None:
        """Count a failed attempt before its status is written, so the replacement pod the
        controller then creates already sees it."""
        self._failed_attempts[key] = self._failed_attempts.pop(key, 0) + 1
        while len(self._failed_attempts) > _MAX_REMEMBERED_ATTEMPTS:
            self._failed_attempts.popitem(last=False)

    async def _wait_exit(
        self, run: PodRun, exit_code: int | None, run_seconds: float, pod: Obj, status: Obj
    ) -> int | None:
        """The exit code of the current run: from the annotations' timer, or a crash fault; None
        when a container's image changed (the kubelet is to kill it). Meanwhile a change of the
        ready annotation is reported as a readiness probe would."""
        loop = asyncio.get_running_loop()
        deadline = None if exit_code is None else loop.time() + run_seconds
        run.images_changed.clear()
        while True:
            if _images(run.pod, "containers") != _images(pod, "containers"):
                return None
            waits = {
                asyncio.ensure_future(run.crash.wait()),
                asyncio.ensure_future(run.ready_changed.wait()),
                asyncio.ensure_future(run.images_changed.wait()),
            }
            try:
                timeout = None if deadline is None else max(0.0, deadline - loop.time())
                await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiting in waits:
                    waiting.cancel()
            if run.crash.is_set():
                run.crash.clear()
                return 1
            if run.images_changed.is_set():
                run.images_changed.clear()
                continue
            if not run.ready_changed.is_set():
                assert exit_code is not None  # only a deadline ends the wait otherwise
                return exit_code
            run.ready_changed.clear()
            status = podstatus.with_readiness(status, run.ready, _now())
            await self._patch_status(pod, status)


def _containers(pod: Obj) -> list[tuple[str, Obj]]:
    """The pod's init containers then its containers, each with the spec field it is under."""
    spec = pod.get("spec") or {}
    return [("initContainers", c) for c in spec.get("initContainers") or []] + [
        ("containers", c) for c in spec.get("containers") or []
    ]


def _images(pod: Obj, only: str = "") -> list[str]:
    """The images of the pod's containers (`only` "containers": of the regular ones)."""
    return [str(c.get("image", "")) for kind, c in _containers(pod) if kind == only or not only]


def _restarting(pod: Obj, sandbox: Sandbox, exited: Exited, waits: dict[str, tuple[str, str]]) -> Obj:
    return podstatus.restarting(
        pod,
        now=_now(),
        start_time=sandbox.start_time,
        host_ip=sandbox.host_ip,
        pod_ips=sandbox.pod_ips,
        restarts=exited.restarts,
        last_exit=exited.last,
        waits=waits,
    )


def _named_images(pod: Obj) -> list[tuple[str, str]]:
    return [(str(c.get("name", "")), str(c.get("image", ""))) for c in pod["spec"].get("containers") or []]


def _restart_key(pod: Obj, container: Obj) -> str:
    """The restart back-off's key, as upstream's GetStableKey: the pod, the container and (for
    the hash of its definition) its image, so that a changed image starts without back-off."""
    meta = pod["metadata"]
    return f"{meta.get('name')}_{meta.get('namespace')}_{meta.get('uid')}_{container.get('name')}_{container.get('image')}"


def _format_pod(pod: Obj) -> str:
    """A pod as upstream's kubelet names it in messages (format.Pod): `NAME_NAMESPACE(UID)`."""
    meta = pod["metadata"]
    return f"{meta.get('name')}_{meta.get('namespace')}({meta.get('uid')})"
