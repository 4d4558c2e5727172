"""What the Service-networking benchmarks share (bench/endpoint_latency.py, endpoint_churn.py).

A `kcm dev --nodes 0` stack with whichever of the endpoint controllers this tree has
(`endpointslice-controller` always, `endpoints-controller` when it is registered), one Node
object and pods whose status the benchmark writes itself (no simulator: a pod is Ready the
moment this process says so, so the time of that write is exact). `Tracker` follows a
Service's EndpointSlices and Endpoints through watches and remembers, per pod, when its
address was first seen ready in each.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
from kcm_cli import controllers

import benchlib

NODE = "bench-node"
SLICES_CONTROLLER = "endpointslice-controller"
ENDPOINTS_CONTROLLER = "endpoints-controller"
MERGE = {"Content-Type": "application/merge-patch+json"}


def available_controllers() -> list[str]:
    """The endpoint controllers this tree registers, the EndpointSlice one first."""
    names = {spec.name for spec in controllers.BUILTIN}
    return [n for n in (SLICES_CONTROLLER, ENDPOINTS_CONTROLLER) if n in names]


def controller_pids(dev_pid: int, name: str) -> list[int]:
    """The `kcm controller <name>` processes under a `kcm dev`."""
    found = []
    for pid in benchlib.descendants(dev_pid):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"controller" in argv and name.encode() in argv:
            found.append(pid)
    return found


def cpu_seconds(pids: list[int]) -> float:
    return sum(benchlib.process_cpu_seconds(pid) for pid in pids)


@contextlib.asynccontextmanager
async def stack(
    command: list[str], workdir: Path, extra: tuple[str, ...] = ()
) -> AsyncIterator[benchlib.Dev]:
    names = available_controllers()
    # Each in a process of its own (`--replicas NAME=1`), so its CPU time is its own; the
    # embedded API server runs in the `kcm dev` process itself.
    aliases = [spec.alias for spec in controllers.BUILTIN if spec.name in names]
    replicas = [arg for alias in aliases for arg in ("--replicas", f"{alias}=1")]
    args = ["--nodes", "0", "--controllers", ",".join(names), *replicas, "--log-level", "warning", *extra]
    async with benchlib.kcm_dev(command, workdir, args) as dev:
        yield dev


class Api:
    """The few calls the benchmarks make, on one session."""

    def __init__(self, session: aiohttp.ClientSession, url: str) -> None:
        self.session = session
        self.url = url

    async def setup_namespace(self, ns: str, service: str) -> None:
        """The namespace, the node (once), and a Service selecting `app=<service>`."""
        await benchlib.call(
            self.session,
            "POST",
            f"{self.url}/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        )
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": NODE, "labels": {"topology.kubernetes.io/zone": "zone-a"}},
        }
        await benchlib.call(self.session, "POST", f"{self.url}/api/v1/nodes", node, allowed=(409,))
        svc = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": service},
            "spec": {"selector": {"app": service}, "ports": [{"port": 80, "targetPort": 8080}]},
        }
        await benchlib.call(self.session, "POST", f"{self.url}/api/v1/namespaces/{ns}/services", svc)

    async def create_pod(self, ns: str, app: str, name: str) -> None:
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": app}},
            "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]},
        }
        await benchlib.call(self.session, "POST", f"{self.url}/api/v1/namespaces/{ns}/pods", pod)

    async def set_ready(self, ns: str, name: str, ip: str, ready: bool) -> float:
        """Write the pod's status (running with `ip`, Ready or not); the perf_counter time of
        the response."""
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status = {
            "phase": "Running",
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "conditions": [
                {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": now}
            ],
        }
        url = f"{self.url}/api/v1/namespaces/{ns}/pods/{name}/status"
        await benchlib.call(self.session, "PATCH", url, {"status": status}, headers=MERGE)
        return time.perf_counter()

    async def delete_pod(self, ns: str, name: str) -> float:
        url = f"{self.url}/api/v1/namespaces/{ns}/pods/{name}"
        await benchlib.call(self.session, "DELETE", url, {"gracePeriodSeconds": 0})
        return time.perf_counter()


def pod_ip(i: int) -> str:
    return f"10.{64 + i // 65536}.{i // 256 % 256}.{i % 256}"


# -- watches ---------------------------------------------------------------------------------------


class _Meta(msgspec.Struct):
    name: str = ""
    resourceVersion: str = ""


class _Ref(msgspec.Struct):
    name: str = ""


class _Conditions(msgspec.Struct):
    ready: bool | None = None


class _SliceEndpoint(msgspec.Struct):
    targetRef: _Ref | None = None
    conditions: _Conditions = msgspec.field(default_factory=_Conditions)


class _Object(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    endpoints: list[_SliceEndpoint] | None = None  # an EndpointSlice's
    subsets: list[dict[str, Any]] | None = None  # an Endpoints'
    status: dict[str, Any] | None = None  # a Pod's


class _Event(msgspec.Struct):
    type: str
    object: _Object


DECODER = msgspec.json.Decoder(_Event)


@dataclass
class Tracker:
    """When each pod was first seen ready (and not ready) in the Service's slices, in its
    Endpoints, and as a Ready pod (the baseline); and how many slice writes were seen."""

    ready_in_slices: dict[str, float] = field(default_factory=dict)
    ready_in_endpoints: dict[str, float] = field(default_factory=dict)
    ready_pods: dict[str, float] = field(default_factory=dict)
    in_slices: dict[str, dict[str, bool]] = field(default_factory=dict)  # slice -> pod -> ready
    slice_writes: int = 0
    endpoints_writes: int = 0
    last_slice_write: float = 0.0
    errors: list[str] = field(default_factory=list)

    def on_slice(self, obj: _Object, now: float) -> None:
        self.slice_writes += 1
        self.last_slice_write = now
        members = {}
        for ep in obj.endpoints or ():
            if ep.targetRef is None:
                continue
            members[ep.targetRef.name] = bool(ep.conditions.ready)
            if ep.conditions.ready:
                self.ready_in_slices.setdefault(ep.targetRef.name, now)
        self.in_slices[obj.metadata.name] = members

    def on_slice_deleted(self, name: str) -> None:
        self.slice_writes += 1
        self.in_slices.pop(name, None)

    def on_endpoints(self, obj: _Object, now: float) -> None:
        self.endpoints_writes += 1
        for subset in obj.subsets or ():
            for address in subset.get("addresses") or ():
                ref = address.get("targetRef") or {}
                if ref.get("name"):
                    self.ready_in_endpoints.setdefault(ref["name"], now)

    def on_pod(self, obj: _Object, now: float) -> None:
        for cond in (obj.status or {}).get("conditions") or ():
            if cond.get("type") == "Ready" and cond.get("status") == "True":
                self.ready_pods.setdefault(obj.metadata.name, now)

    def members(self) -> dict[str, bool]:
        """Pod -> ready, over every slice of the Service as last seen."""
        out: dict[str, bool] = {}
        for members in self.in_slices.values():
            out.update(members)
        return out

    def forget(self, names: list[str]) -> None:
        """Start timing these pods afresh (they are about to be made ready again)."""
        for table in (self.ready_in_slices, self.ready_in_endpoints, self.ready_pods):
            for name in names:
                table.pop(name, None)

    async def follow(self, api: Api, ns: str, service: str, *, pods: bool = True) -> list[asyncio.Task[None]]:
        """Start the watches; they run until the tasks are cancelled."""
        base = f"{api.url}/api/v1/namespaces/{ns}"
        query = f"labelSelector=kubernetes.io%2Fservice-name%3D{service}"
        slices = f"{api.url}/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices?{query}"
        tasks = [asyncio.create_task(self._watch(api, slices, self.on_slice, self.on_slice_deleted))]
        if ENDPOINTS_CONTROLLER in available_controllers():
            url = f"{base}/endpoints?fieldSelector=metadata.name%3D{service}"
            tasks.append(asyncio.create_task(self._watch(api, url, self.on_endpoints)))
        if pods:
            tasks.append(asyncio.create_task(self._watch(api, f"{base}/pods", self.on_pod)))
        return tasks

    async def _watch(
        self,
        api: Api,
        url: str,
        seen: Callable[[_Object, float], None],
        deleted: Callable[[str], None] | None = None,
    ) -> None:
        sep = "&" if "?" in url else "?"
        async with api.session.get(f"{url}{sep}watch=true&allowWatchBookmarks=false") as resp:
            if resp.status != 200:
                self.errors.append(f"watch {url}: HTTP {resp.status}")
                return
            async for lines in benchlib.watch_lines(resp):
                now = time.perf_counter()
                for line in lines:
                    event = DECODER.decode(line)
                    if event.type == "DELETED" and deleted is not None:
                        deleted(event.object.metadata.name)
                    elif event.type in ("ADDED", "MODIFIED"):
                        seen(event.object, now)


async def wait_until(
    check: Callable[[], bool], what: str, limit: float = 120.0, state: Callable[[], str] | None = None
) -> None:
    deadline = time.monotonic() + limit
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}{f': {state()}' if state else ''}")
        await asyncio.sleep(0.05)


async def settle(tracker: Tracker, quiet: float = 2.0, limit: float = 120.0) -> None:
    """Wait until no slice write was seen for `quiet` seconds."""
    deadline = time.monotonic() + limit
    while time.perf_counter() - tracker.last_slice_write < quiet:
        if time.monotonic() > deadline:
            raise RuntimeError("slice writes did not settle")
        await asyncio.sleep(0.1)


async def in_parallel(count: int, items: list[Any], fn: Callable[[Any], Any]) -> None:
    """Run `fn(item)` for every item on `count` workers."""
    todo = iter(items)

    async def worker() -> None:
        for item in todo:
            await fn(item)

    await asyncio.gather(*(worker() for _ in range(count)))
