"""NodePort allocation for Services, as kube-apiserver's service REST does it.

Upstream pkg/registry/core/service/portallocator (the range, `provided port is already
allocated`, `provided port is not in the valid range. The range of valid ports is A-B`) and
storage/alloc.go (a NodePort Service, and a LoadBalancer one unless
`allocateLoadBalancerNodePorts: false`, gets a nodePort for each port without one; a requested
one is honoured or refused with 422 on `spec.ports[i].nodePort`; a port whose number and
protocol the old object had keeps its nodePort on update; the ports a Service stops using are
released after the write). Like the cluster IP allocator, the taken set lives in memory and is
rebuilt from the stored Services at start, so it survives a restart of a persistent store.
Called by `operations.Api` on Service creates, updates and deletes.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from kcm_apiserver import errors

Obj = dict[str, Any]
DEFAULT_RANGE = "30000-32767"
ALLOCATED = "provided port is already allocated"


@dataclass(frozen=True)
class PortRange:
    base: int
    size: int

    @property
    def last(self) -> int:
        return self.base + self.size - 1

    def __str__(self) -> str:
        return f"{self.base}-{self.last}"

    def __contains__(self, port: object) -> bool:
        return isinstance(port, int) and self.base <= port <= self.last


def parse_range(text: str) -> PortRange:
    """`A-B`, `A+N` or `A` (k8s.io/apimachinery utilnet.PortRange); argparse's type for the flag."""
    try:
        if "-" in text:
            low, high = (int(p) for p in text.split("-", 1))
        elif "+" in text:
            low, extra = (int(p) for p in text.split("+", 1))
            high = low + extra
        else:
            low = high = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"unable to parse port range: {text}") from None
    if not 0 <= low <= high <= 65535:
        raise argparse.ArgumentTypeError(f"invalid port range: {text}")
    return PortRange(low, high - low + 1)


def needs_node_ports(svc: Obj) -> bool:
    spec = svc.get("spec") or {}
    kind = spec.get("type")
    return kind == "NodePort" or (
        kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is not False
    )


def node_ports(svc: Obj) -> set[int]:
    ports = (svc.get("spec") or {}).get("ports") or []
    return {
        p["nodePort"]
        for p in ports
        if isinstance(p, dict) and isinstance(p.get("nodePort"), int) and p["nodePort"]
    }


class NodePortAllocator:
    def __init__(self, port_range: PortRange | None = None) -> None:
        self.range = port_range or parse_range(DEFAULT_RANGE)
        self._used: set[int] = set()
        self._next = 0

    def mark_used(self, svc: Obj) -> None:
        self._used |= node_ports(svc)

    def release(self, ports: set[int]) -> None:
        self._used -= ports

    def assign(self, name: str, svc: Obj, old: Obj | None) -> set[int]:
        """Fill and claim `svc`'s nodePorts (in place); the ports newly taken, to release if the
        write does not happen. 422 for a requested port that is taken or out of range."""
        if not needs_node_ports(svc):
            return set()
        mine = node_ports(old) if old is not None else set()
        kept = _by_port(old) if old is not None and needs_node_ports(old) else {}
        taken: set[int] = set()
        try:
            for i, port in enumerate((svc.get("spec") or {}).get("ports") or []):
                if not isinstance(port, dict):
                    continue
                wanted = port.get("nodePort") or kept.get((port.get("port"), port.get("protocol", "TCP")), 0)
                if wanted and (wanted in mine or wanted in taken):
                    port["nodePort"] = wanted
                    continue
                if wanted:
                    problem = self._claim(wanted)
                    if problem:
                        field = f"spec.ports[{i}].nodePort"
                        cause = {
                            "reason": "FieldValueInvalid",
                            "message": f"Invalid value: {wanted}: {problem}",
                            "field": field,
                        }
                        raise errors.invalid("", "Service", name, [cause])
                else:
                    wanted = self._allocate()
                port["nodePort"] = wanted
                taken.add(wanted)
        except BaseException:
            self.release(taken)
            raise
        return taken

    def _claim(self, port: int) -> str:
        if port not in self.range:
            return f"provided port is not in the valid range. The range of valid ports is {self.range}"
        if port in self._used:
            return ALLOCATED
        self._used.add(port)
        return ""

    def _allocate(self) -> int:
        for _ in range(self.range.size):
            candidate = self.range.base + self._next
            self._next = (self._next + 1) % self.range.size
            if candidate not in self._used:
                self._used.add(candidate)
                return candidate
        raise errors.ApiError(500, "InternalError", "failed to allocate a nodePort: range is full")


def _by_port(svc: Obj) -> dict[tuple[Any, Any], int]:
    ports = (svc.get("spec") or {}).get("ports") or []
    return {
        (p.get("port"), p.get("protocol", "TCP")): p["nodePort"]
        for p in ports
        if isinstance(p, dict) and p.get("nodePort")
    }
