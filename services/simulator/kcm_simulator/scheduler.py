"""The scheduler stand-in: binds pending default-scheduler pods to the least-loaded node that fits.

Fed pod and node events by `main.py`; every change marks the queue dirty and the loop
retries all pending pods, so unschedulable pods are retried as soon as capacity appears.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from decimal import Decimal
from typing import Any

from kcm_shared.kubeclient import KubeClient, resource_path

from kcm_simulator import podstatus, scheduling
from kcm_simulator.calls import Writer

Obj = dict[str, Any]
log = logging.getLogger("kcm.sim.scheduler")
_TERMINAL = ("Succeeded", "Failed")


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


class Scheduler:
    def __init__(self, client: KubeClient, writer: Writer) -> None:
        self._client = client
        self._writer = writer
        self._pods: dict[str, Obj] = {}
        self._nodes: dict[str, Obj] = {}
        self._dirty = asyncio.Event()
        # Message last reported per pending pod, so a retry that fails the same way writes nothing.
        self._reported: dict[str, str] = {}

    def reset_pods(self, pods: list[Obj]) -> None:
        self._pods = {_key(p): p for p in pods}
        self._dirty.set()

    def on_pod(self, kind: str, pod: Obj) -> None:
        key = _key(pod)
        if kind == "DELETED":
            self._pods.pop(key, None)
            self._reported.pop(key, None)
        else:
            self._pods[key] = pod
        self._dirty.set()

    def reset_nodes(self, nodes: list[Obj]) -> None:
        self._nodes = {n["metadata"]["name"]: n for n in nodes}
        self._dirty.set()

    def on_node(self, kind: str, node: Obj) -> None:
        name = node["metadata"]["name"]
        if kind == "DELETED":
            self._nodes.pop(name, None)
        else:
            self._nodes[name] = node
        self._dirty.set()

    def _usage(self) -> dict[str, dict[str, Decimal]]:
        by_node: dict[str, list[Obj]] = {}
        for pod in self._pods.values():
            node = pod.get("spec", {}).get("nodeName")
            if node and pod.get("status", {}).get("phase") not in _TERMINAL:
                by_node.setdefault(node, []).append(pod)
        return {name: scheduling.used(pods) for name, pods in by_node.items()}

    async def run(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            await self._schedule_pending()

    async def _schedule_pending(self) -> None:
        pending = sorted(
            (p for p in self._pods.values() if is_pending(p)),
            key=lambda p: (p.get("metadata", {}).get("creationTimestamp", ""), _key(p)),
        )
        if not pending:
            return
        usage = self._usage()
        nodes = sorted(self._nodes.values(), key=lambda n: n["metadata"]["name"])
        for pod in pending:
            target, failures = scheduling.pick_node(pod, nodes, usage)
            if target is None:
                await self._report_unschedulable(pod, scheduling.unschedulable_message(len(nodes), failures))
                continue
            if await self._bind(pod, target):
                bound = {**pod, "spec": {**pod.get("spec", {}), "nodeName": target}}
                self._pods[_key(pod)] = bound
                self._reported.pop(_key(pod), None)
                usage[target] = scheduling.used(
                    p
                    for p in self._pods.values()
                    if p.get("spec", {}).get("nodeName") == target
                    and p.get("status", {}).get("phase") not in _TERMINAL
                )

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
