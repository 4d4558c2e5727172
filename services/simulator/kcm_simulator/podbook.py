"""The pods the simulator's informer has seen, by namespace and name, with a change signal.

- `put` / `remove` / `reset` are fed by `main.py` beside the kubelet's own callbacks.
- `get(ns, name)` is the latest pod; `changed()` is an event set on the next change of any pod,
  what a log follower or an attach waits on before looking again.

Called by `kubeletserver.py`.
"""

from __future__ import annotations

import asyncio
from typing import Any

Obj = dict[str, Any]


class PodBook:
    def __init__(self) -> None:
        self._pods: dict[tuple[str, str], Obj] = {}
        self._changed = asyncio.Event()

    @staticmethod
    def _key(pod: Obj) -> tuple[str, str]:
        meta = pod.get("metadata") or {}
        return meta.get("namespace", ""), meta.get("name", "")

    def get(self, namespace: str, name: str) -> Obj | None:
        return self._pods.get((namespace, name))

    def changed(self) -> asyncio.Event:
        return self._changed

    def _signal(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def put(self, pod: Obj) -> None:
        """Remember a pod bound to a node; pods not bound yet have nothing to stream."""
        if (pod.get("spec") or {}).get("nodeName"):
            self._pods[self._key(pod)] = pod
            self._signal()

    def remove(self, pod: Obj) -> None:
        if self._pods.pop(self._key(pod), None) is not None:
            self._signal()

    def reset(self, pods: list[Obj]) -> None:
        self._pods = {}
        for pod in pods:
            if (pod.get("spec") or {}).get("nodeName"):
                self._pods[self._key(pod)] = pod
        self._signal()
