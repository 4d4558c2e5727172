"""The simulated nodes' objects: Node with upstream's well-known labels and status, and its Lease.

Pure builders called by `kubelet.py` when registering nodes and renewing heartbeats.
"""

from __future__ import annotations

import ipaddress
from typing import Any

Obj = dict[str, Any]

KUBELET_VERSION = "v1.32.0"
# The kubelet leaves attaching and detaching to the attach/detach controller (its default,
# --enable-controller-attach-detach).
CONTROLLER_MANAGED_ATTACH = {"volumes.kubernetes.io/controller-managed-attach-detach": "true"}
INSTANCE_TYPE = "sim.large"
LEASE_SECONDS = 40


def zone_name(index: int, zones: int) -> str:
    return "zone-" + chr(ord("a") + index % max(zones, 1))


def node_name(prefix: str, index: int) -> str:
    return f"{prefix}{index}"


def conditions(now: str, ready: bool, seen: dict[str, Obj] | None = None) -> list[Obj]:
    """The four conditions a kubelet reports, all with a fresh heartbeat. As a kubelet's
    setters, a condition whose status is the one the API holds (`seen`, by type) keeps its
    lastTransitionTime; a new or changed one transitions now."""
    seen = seen or {}

    def cond(kind: str, status: str, reason: str, message: str) -> Obj:
        before = seen.get(kind) or {}
        same = before.get("status") == status and before.get("lastTransitionTime")
        return {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": now,
            "lastTransitionTime": before["lastTransitionTime"] if same else now,
        }

    return [
        cond(
            "MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"
        ),
        cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        cond("Ready", "True", "KubeletReady", "kubelet is posting ready status")
        if ready
        else cond("Ready", "False", "KubeletNotReady", "container runtime is down (simulated)"),
    ]


def conditions_by_type(node: Obj) -> dict[str, Obj]:
    """A Node's conditions by type, as `conditions` takes what the API holds."""
    return {
        c.get("type", ""): c
        for c in (node.get("status") or {}).get("conditions") or []
        if isinstance(c, dict)
    }


def node(
    prefix: str,
    index: int,
    zones: int,
    now: str,
    *,
    with_pod_cidr: bool = True,
    endpoint: tuple[str, int] | None = None,
) -> Obj:
    """The Node a kubelet registers; without a podCIDR when the node IPAM controller assigns it.
    `endpoint` (host, port) is where the simulator's kubelet server listens: the host as the
    node's InternalDNS address (which API servers are told to prefer), the port as its
    kubeletEndpoint, so that `kubectl logs/exec` reach it."""
    name = node_name(prefix, index)
    host, port = endpoint or ("", 10250)
    capacity = {"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": dict(CONTROLLER_MANAGED_ATTACH),
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/region": "sim-region",
                "topology.kubernetes.io/zone": zone_name(index, zones),
                "node.kubernetes.io/instance-type": INSTANCE_TYPE,
                "sim.kcm.dev/simulated": "true",
            },
        },
        "spec": {"podCIDR": pod_cidr(index), "podCIDRs": [pod_cidr(index)]} if with_pod_cidr else {},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": conditions(now, ready=True),
            "addresses": [
                {"type": "InternalIP", "address": f"10.0.{index}.1"},
                *([{"type": "InternalDNS", "address": host}] if host else []),
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
            "nodeInfo": {
                "machineID": f"sim-{index}",
                "systemUUID": f"sim-{index}",
                "bootID": f"sim-boot-{index}",
                "kernelVersion": "6.1.0-sim",
                "osImage": "KCM Simulated Linux",
                "containerRuntimeVersion": "containerd://1.7.0-sim",
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": KUBELET_VERSION,
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


NOT_READY_TAINT = "node.kubernetes.io/not-ready"


def with_not_ready_taint(taints: list[Obj], not_ready: bool) -> list[Obj]:
    """`taints` with the not-ready NoSchedule taint present or absent as the node lifecycle
    controller keeps it for a node's Ready condition (matched by key and effect, as upstream)."""

    def is_it(t: Obj) -> bool:
        return t.get("key") == NOT_READY_TAINT and t.get("effect") == "NoSchedule"

    if not_ready:
        if any(is_it(t) for t in taints):
            return taints
        return [*taints, {"key": NOT_READY_TAINT, "effect": "NoSchedule"}]
    return [t for t in taints if not is_it(t)]


def pod_cidr(index: int) -> str:
    """Node `index`'s own /24 from 10.244.0.0/24 on; past 255 the second octet carries, so a
    bench's thousand nodes each get a valid range (10.244.256.0/24 is refused)."""
    return f"10.{244 + index // 256}.{index % 256}.0/24"


def pod_ip(cidr: str, serial: int) -> str:
    """The serial-th address handed out from `cidr` (either family), skipping the network
    address, the gateway (.1) and the last address; a range too small for that wraps over all."""
    net = ipaddress.ip_network(cidr, strict=False)
    usable = net.num_addresses - 3
    if usable < 1:
        return str(net[serial % net.num_addresses])
    return str(net[2 + serial % usable])


def serial_after(cidr: str, ip: str) -> int:
    """The first serial `pod_ip` hands out after `ip` in `cidr` (0 for an address outside it):
    a restarted simulator goes on past the addresses of the pods it finds running."""
    net = ipaddress.ip_network(cidr, strict=False)
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        return 0
    if addr.version != net.version or addr not in net:
        return 0
    offset = int(addr) - int(net.network_address)
    return offset + 1 if net.num_addresses - 3 < 1 else max(0, offset - 1)


def lease(name: str, now: str, node_uid: str = "") -> Obj:
    """The node's Lease as a kubelet's lease controller writes it: held by the node, owned by
    its Node (so it goes with it), renewTime in microseconds."""
    owner = [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": node_uid}] if node_uid else []
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": name,
            "namespace": "kube-node-lease",
            **({"ownerReferences": owner} if owner else {}),
        },
        "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": now},
    }
