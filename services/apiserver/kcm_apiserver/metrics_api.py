"""metrics.k8s.io/v1beta1 PodMetrics and NodeMetrics, derived from stored pods and nodes.

Nothing here is stored: `server` calls these functions on every request with the stored
objects, so `kubectl top` and the HorizontalPodAutoscaler read usage the simulator (or a
test) put in pod annotations. Shapes follow metrics-server; only Running pods have metrics.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from fractions import Fraction
from typing import Any

from kcm_shared.apimachinery import quantity

Obj = dict[str, Any]

GROUP_VERSION = "metrics.k8s.io/v1beta1"
CPU_ANNOTATION = "sim.kcm.dev/cpu-usage"
MEMORY_ANNOTATION = "sim.kcm.dev/memory-usage"
WINDOW = "10s"
# What a container reports without annotations: idle, but never zero so ratios stay defined.
DEFAULT_CPU = Fraction(1, 1000)
DEFAULT_MEMORY = Fraction(1024 * 1024)

_BINARY_UNITS = (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def parse_quantity(text: str) -> Fraction:
    """A usage annotation ("250m", "64Mi", "1.5", "2G") as an exact number; ValueError when it
    is no quantity or is negative."""
    amount = quantity.exact(text.strip())
    if amount < 0:
        raise ValueError(f"usage must not be negative: {text!r}")
    return amount


def format_cpu(cores: Fraction) -> str:
    """Cores as metrics-server writes them: whole millicores as "250m", finer as nanocores."""
    millis = cores * 1000
    if millis.denominator == 1:
        return f"{millis.numerator}m"
    return f"{int(cores * 10**9)}n"


def format_memory(size: Fraction) -> str:
    """Bytes in the largest binary unit that divides them ("64Mi"), else plain bytes."""
    whole = int(size)
    for suffix, unit in _BINARY_UNITS:
        if whole and whole % unit == 0:
            return f"{whole // unit}{suffix}"
    return str(whole)


def _rfc3339(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def _split(annotations: dict[str, str], key: str, names: list[str], default: Fraction) -> dict[str, Fraction]:
    """Per-container usage: a container's own annotation wins; the pod total is shared by the rest."""
    out = {n: parse_quantity(annotations[f"{key}.{n}"]) for n in names if f"{key}.{n}" in annotations}
    rest = [n for n in names if n not in out]
    if rest and key in annotations:
        share = parse_quantity(annotations[key]) / len(rest)
        out.update({n: share for n in rest})
    out.update({n: default for n in rest if n not in out})
    return out


def container_usage(pod: Obj) -> list[tuple[str, Fraction, Fraction]]:
    """(container name, cpu cores, memory bytes) for each container of a pod, in spec order,
    sidecars (init containers with restartPolicy Always, which keep running) last, as
    metrics-server reports every running container."""
    annotations = pod.get("metadata", {}).get("annotations") or {}
    spec = pod.get("spec") or {}
    sidecars = [c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
    names = [c.get("name", "") for c in [*(spec.get("containers") or []), *sidecars]]
    try:
        cpu = _split(annotations, CPU_ANNOTATION, names, DEFAULT_CPU)
        memory = _split(annotations, MEMORY_ANNOTATION, names, DEFAULT_MEMORY)
    except ValueError:
        # A malformed annotation must not break `kubectl top` for everyone: report idle usage.
        cpu = dict.fromkeys(names, DEFAULT_CPU)
        memory = dict.fromkeys(names, DEFAULT_MEMORY)
    return [(n, cpu[n], memory[n]) for n in names]


def is_running(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running"


def _metadata(obj: Obj, now: datetime) -> Obj:
    meta = obj.get("metadata", {})
    out: Obj = {"name": meta.get("name", "")}
    if meta.get("namespace"):
        out["namespace"] = meta["namespace"]
    # Like metrics-server: the metrics object is created when it is read.
    out["creationTimestamp"] = _rfc3339(now)
    if meta.get("labels"):
        out["labels"] = dict(meta["labels"])
    return out


def pod_metrics(pod: Obj, now: datetime) -> Obj | None:
    """The PodMetrics of a stored pod; None unless it is Running (metrics-server omits others)."""
    if not is_running(pod):
        return None
    return {
        "kind": "PodMetrics",
        "apiVersion": GROUP_VERSION,
        "metadata": _metadata(pod, now),
        "timestamp": _rfc3339(now),
        "window": WINDOW,
        "containers": [
            {"name": name, "usage": {"cpu": format_cpu(cpu), "memory": format_memory(memory)}}
            for name, cpu, memory in container_usage(pod)
        ],
    }


def node_metrics(node: Obj, pods: Iterable[Obj], now: datetime) -> Obj:
    """The NodeMetrics of a stored node: the summed usage of the Running pods bound to it."""
    name = node.get("metadata", {}).get("name", "")
    cpu, memory = Fraction(0), Fraction(0)
    for pod in pods:
        if is_running(pod) and (pod.get("spec") or {}).get("nodeName") == name:
            for _, c, m in container_usage(pod):
                cpu += c
                memory += m
    return {
        "kind": "NodeMetrics",
        "apiVersion": GROUP_VERSION,
        "metadata": _metadata(node, now),
        "timestamp": _rfc3339(now),
        "window": WINDOW,
        "usage": {"cpu": format_cpu(cpu), "memory": format_memory(memory)},
    }


def list_body(kind: str, items: list[Obj], resource_version: str) -> Obj:
    return {
        "kind": f"{kind}List",
        "apiVersion": GROUP_VERSION,
        "metadata": {"resourceVersion": resource_version},
        "items": items,
    }


def all_pod_metrics(pods: Iterable[Obj], now: datetime) -> list[Obj]:
    """PodMetrics of the Running ones among `pods`, in the given order."""
    return [m for m in (pod_metrics(p, now) for p in pods) if m is not None]


def all_node_metrics(nodes: Iterable[Obj], pods: Iterable[Obj], now: datetime) -> list[Obj]:
    """NodeMetrics of every node, grouping the pods by node once rather than per node."""
    by_node: dict[str, list[Obj]] = {}
    for pod in pods:
        by_node.setdefault((pod.get("spec") or {}).get("nodeName") or "", []).append(pod)
    return [node_metrics(n, by_node.get(n.get("metadata", {}).get("name", ""), []), now) for n in nodes]
