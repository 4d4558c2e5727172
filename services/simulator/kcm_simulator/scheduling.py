"""Pure scheduling predicates and scoring for the simulator's scheduler stand-in.

`filter_node` says why a pod cannot go to a node (upstream's filter plugins: NodeName,
NodeUnschedulable, NodeAffinity, TaintToleration, NodeResourcesFit), `pick_node` chooses the
least-loaded feasible node (the node-affinity and taint predicates are kcm_shared.apis.nodeaffinity,
which the DaemonSet controller shares), and `unschedulable_message` words the failure like upstream's
"0/3 nodes are available: ...". Called by `scheduler.py`; no I/O.
"""

from __future__ import annotations

import functools
import types
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from kcm_shared.apimachinery import quantity
from kcm_shared.apis import nodeaffinity

Obj = dict[str, Any]

AFFINITY_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
NODE_NAME_MISMATCH = "node(s) didn't match the requested node name"
UNSCHEDULABLE = "node(s) were unschedulable"
TOO_MANY_PODS = "Too many pods"
_MIN_NODES_TO_FIND = 100


def matches_node_selector(pod: Obj, node: Obj) -> bool:
    """spec.nodeSelector and required node affinity (terms ORed, requirements ANDed)."""
    return nodeaffinity.matches_node(pod.get("spec", {}), node)


def tolerates(toleration: Obj, taint: Obj) -> bool:
    return nodeaffinity.tolerates(toleration, taint)


def untolerated_taint(pod: Obj, node: Obj) -> Obj | None:
    """The first NoSchedule/NoExecute taint none of the pod's tolerations accepts, if any."""
    taint = nodeaffinity.find_untolerated_taint(
        node.get("spec", {}).get("taints") or [],
        pod.get("spec", {}).get("tolerations") or [],
        nodeaffinity.schedule_blocking,
    )
    return None if taint is None else dict(taint)


def _container_requests(container: Obj) -> dict[str, Fraction]:
    resources = container.get("resources") or {}
    # Upstream defaults requests to limits when only limits are set.
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    out: dict[str, Fraction] = {}
    for name in ("cpu", "memory"):
        if name in merged:
            try:
                out[name] = quantity.exact(merged[name])
            except ValueError:
                continue
    return out


def pod_requests(pod: Obj) -> dict[str, Fraction]:
    """Effective cpu/memory requests: sum of containers, at least the largest init container."""
    spec = pod.get("spec", {})
    total: dict[str, Fraction] = {"cpu": Fraction(0), "memory": Fraction(0)}
    for container in spec.get("containers") or []:
        for name, amount in _container_requests(container).items():
            total[name] += amount
    for container in spec.get("initContainers") or []:
        for name, amount in _container_requests(container).items():
            total[name] = max(total[name], amount)
    return total


def allocatable(node: Obj) -> Mapping[str, Fraction]:
    alloc = node.get("status", {}).get("allocatable") or {}
    amounts = (alloc.get("cpu", "0"), alloc.get("memory", "0"), alloc.get("pods", "0"))
    try:
        return _cached_allocatable(*amounts)
    except TypeError:  # an unhashable (malformed) value: parsed, not cached
        return _parse_allocatable(*amounts)


def _parse_allocatable(*amounts: Any) -> Mapping[str, Fraction]:
    out: dict[str, Fraction] = {}
    for name, amount in zip(("cpu", "memory", "pods"), amounts, strict=True):
        try:
            out[name] = quantity.exact(amount)
        except ValueError:
            out[name] = Fraction(0)
    return types.MappingProxyType(out)


# Every placement reads every candidate node's allocatable, and nodes share a few values: parsing
# the quantities each time was a third of the simulator's scheduling CPU at 1,000 nodes.
_cached_allocatable = functools.lru_cache(maxsize=4096)(_parse_allocatable)


def used(pods: Iterable[Obj]) -> dict[str, Fraction]:
    """What the given (bound, non-terminal) pods take from their node."""
    total = {"cpu": Fraction(0), "memory": Fraction(0), "pods": Fraction(0)}
    for pod in pods:
        for name, amount in pod_requests(pod).items():
            total[name] += amount
        total["pods"] += 1
    return total


def filter_node(pod: Obj, node: Obj, in_use: Mapping[str, Fraction]) -> list[str]:
    """Reasons the pod cannot run on the node; empty when it fits."""
    return _placement_misfits(pod, node) or _misfits(pod_requests(pod), allocatable(node), in_use)


def _placement_misfits(pod: Obj, node: Obj) -> list[str]:
    """The reasons that do not depend on what already runs on the node."""
    wanted_name = pod.get("spec", {}).get("nodeName")
    if wanted_name and wanted_name != node.get("metadata", {}).get("name"):
        return [NODE_NAME_MISMATCH]
    if node.get("spec", {}).get("unschedulable") and not any(
        tolerates(t, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
        for t in pod.get("spec", {}).get("tolerations") or []
    ):
        return [UNSCHEDULABLE]
    if not matches_node_selector(pod, node):
        return [AFFINITY_MISMATCH]
    taint = untolerated_taint(pod, node)
    if taint is not None:
        value = taint.get("value")
        shown = f"{taint.get('key')}: {value}" if value else str(taint.get("key"))
        return [f"node(s) had untolerated taint {{{shown}}}"]
    return []


def _misfits(
    requests: Mapping[str, Fraction], alloc: Mapping[str, Fraction], in_use: Mapping[str, Fraction]
) -> list[str]:
    reasons = []
    if in_use.get("pods", Fraction(0)) + 1 > alloc["pods"]:
        reasons.append(TOO_MANY_PODS)
    for name, amount in requests.items():
        if amount > 0 and in_use.get(name, Fraction(0)) + amount > alloc[name]:
            reasons.append(f"Insufficient {name}")
    return reasons


def load_after(pod: Obj, node: Obj, in_use: Mapping[str, Fraction]) -> float:
    """Mean fraction of cpu, memory and pod slots taken once the pod is placed: lower is better."""
    return _load(pod_requests(pod), allocatable(node), in_use)


def _load(
    requests: Mapping[str, Fraction], alloc: Mapping[str, Fraction], in_use: Mapping[str, Fraction]
) -> float:
    # A score, not an amount: floats, because the exact Fractions this was summed in were most
    # of the simulator's CPU at 100 nodes (each placement scores up to 100 of them). Nodes
    # alike in what they hold and have still score equal, and tie by name.
    total = 0.0
    for name in ("cpu", "memory", "pods"):
        capacity = alloc[name]
        if capacity > 0:
            taken = in_use.get(name, 0) + (1 if name == "pods" else requests.get(name, 0))
            total += float(taken) / float(capacity)
        else:
            total += 1.0
    return total / 3


def nodes_to_find(total: int) -> int:
    """How many feasible nodes are enough to choose from, as upstream's percentageOfNodesToScore default.

    Large clusters are not searched whole: half of them at first, down to 5% at 5,625 nodes and
    beyond, never fewer than 100.
    """
    if total < _MIN_NODES_TO_FIND:
        return total
    percentage = max(50 - total // 125, 5)
    return max(total * percentage // 100, _MIN_NODES_TO_FIND)


def pick_node(
    pod: Obj,
    nodes: Sequence[Obj],
    in_use: Mapping[str, Mapping[str, Fraction]],
    start: int = 0,
    extra: Callable[[Obj], str | None] | None = None,
) -> tuple[str | None, dict[str, list[str]]]:
    """The least-loaded node the pod fits on (ties by name), or None with each node's reasons.

    Nodes are searched from index `start` round, until `nodes_to_find` feasible ones are seen.
    `extra` is one more filter (the volume binding's), asked only of nodes the others pass.
    """
    requests = pod_requests(pod)
    wanted = nodes_to_find(len(nodes))
    failures: dict[str, list[str]] = {}
    best: tuple[float, str] | None = None
    found = 0
    for i in range(len(nodes)):
        node = nodes[(start + i) % len(nodes)]
        name = node.get("metadata", {}).get("name", "")
        usage = in_use.get(name, {})
        alloc = allocatable(node)
        reasons = _placement_misfits(pod, node) or _misfits(requests, alloc, usage)
        if not reasons and extra is not None:
            misfit = extra(node)
            reasons = [misfit] if misfit else []
        if reasons:
            failures[name] = reasons
            continue
        candidate = (_load(requests, alloc, usage), name)
        if best is None or candidate < best:
            best = candidate
        found += 1
        if found >= wanted:
            break
    return (best[1] if best else None), failures


def unschedulable_message(total_nodes: int, failures: Mapping[str, Sequence[str]]) -> str:
    """Upstream's FitError wording: reasons counted over nodes, sorted."""
    counts = Counter(reason for reasons in failures.values() for reason in reasons)
    parts = sorted(f"{count} {reason}" for reason, count in counts.items())
    detail = ", ".join(parts)
    return (
        f"0/{total_nodes} nodes are available: {detail}."
        if detail
        else f"0/{total_nodes} nodes are available."
    )
