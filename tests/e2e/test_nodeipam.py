"""The node IPAM controller end to end: `kcm dev` with only it, dual-stack, three simulated nodes.

The cluster ranges are small on purpose: 10.200.0.0/21 cut into eight /24s, one of them
(10.200.7.0/24) the service range and so never given out, and fd00:10::/61 into eight /64s.
The three simulated nodes register without a podCIDR (`kcm dev` tells the simulator the
controller runs) and take three of the seven usable IPv4 blocks; the tests add Nodes through
kubectl (no kubelet behind them: the API server taints them not-ready, so nothing is scheduled
there) to fill the rest. Covers: distinct dual-stack CIDRs in spec.podCIDRs order, pods' IPs
from their node's CIDRs, CIDRNotAvailable on a full range and a deleted node's CIDR given to
the node that waited, kill -9 of the controller while nodes wait (no CIDR handed out twice),
flags refused with upstream's messages, and the API server's side: podCIDR immutable, nodePort
allocation from --service-node-port-range with upstream's conflict messages.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import KCM, wait_for
from tests.e2e import devstack

stack = devstack.stack_fixture(
    "--controllers",
    "nodeipam",
    "--nodes",
    "3",
    "--pod-start-delay",
    "0.1",
    "--allocate-node-cidrs",
    "--cluster-cidr=10.200.0.0/21,fd00:10::/61",
    "--service-cluster-ip-range=10.200.7.0/24",
)

V4 = ipaddress.ip_network("10.200.0.0/21")
V6 = ipaddress.ip_network("fd00:10::/61")
SERVICES = ipaddress.ip_network("10.200.7.0/24")
SIM_NODES = ["sim-node-0", "sim-node-1", "sim-node-2"]


def nodes(s: devstack.DevStack) -> dict[str, list[str]]:
    """Every node's spec.podCIDRs (podCIDR must be the first of them)."""
    out = {}
    for node in json.loads(s.kubectl("get", "nodes", "-o", "json").stdout)["items"]:
        spec = node["spec"]
        cidrs = spec.get("podCIDRs") or []
        assert spec.get("podCIDR", "") == (cidrs[0] if cidrs else ""), node
        out[node["metadata"]["name"]] = cidrs
    return out


def create_nodes(s: devstack.DevStack, *names: str) -> None:
    items = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n}} for n in names]
    s.kubectl("create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))


def all_distinct(found: dict[str, list[str]]) -> None:
    v4 = [c[0] for c in found.values() if c]
    v6 = [c[1] for c in found.values() if c]
    assert len(set(v4)) == len(v4) and len(set(v6)) == len(v6), found


def test_simulated_nodes_get_distinct_dual_stack_cidrs(stack: devstack.DevStack) -> None:
    wait_for(lambda: all(nodes(stack).get(n) for n in SIM_NODES), 30, interval=0.2, what="sim nodes' CIDRs")
    found = nodes(stack)
    for name in SIM_NODES:
        v4, v6 = (ipaddress.ip_network(c) for c in found[name])
        assert v4.subnet_of(V4) and v4.prefixlen == 24 and not v4.overlaps(SERVICES), found
        assert v6.subnet_of(V6) and v6.prefixlen == 64, found
    all_distinct(found)
    jsonpath = stack.kubectl("get", "nodes", *SIM_NODES, "-o", "jsonpath={.items[*].spec.podCIDR}").stdout
    assert jsonpath.split() == [found[n][0] for n in SIM_NODES]


def test_pods_take_their_ips_from_their_nodes_cidrs(stack: devstack.DevStack) -> None:
    stack.kubectl("create", "namespace", "ipam-pods")
    # No workload controller runs here: bare pods, spread by the simulator's scheduler.
    for i in range(4):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": "ipam-pods"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        }
        stack.kubectl("create", "-f", "-", input=json.dumps(pod))

    def running() -> list[dict[str, Any]]:
        pods = json.loads(stack.kubectl("-n", "ipam-pods", "get", "pods", "-o", "json").stdout)["items"]
        return [p for p in pods if p.get("status", {}).get("phase") == "Running" and p["status"].get("podIP")]

    wait_for(lambda: len(running()) == 4, 30, interval=0.2, what="pods running with IPs")
    found = nodes(stack)
    for pod in running():
        cidrs = [ipaddress.ip_network(c) for c in found[pod["spec"]["nodeName"]]]
        ips = [ipaddress.ip_address(ip["ip"]) for ip in pod["status"]["podIPs"]]
        assert ips[0] == ipaddress.ip_address(pod["status"]["podIP"])
        assert [ip in cidr for ip, cidr in zip(ips, cidrs, strict=True)] == [True, True], (
            pod["status"],
            cidrs,
        )


def test_a_full_range_records_cidr_not_available_and_a_deleted_nodes_cidr_is_reused(
    stack: devstack.DevStack,
) -> None:
    extra = ["fill-1", "fill-2", "fill-3", "fill-4"]
    create_nodes(stack, *extra)
    wait_for(lambda: all(nodes(stack).get(n) for n in extra), 30, interval=0.2, what="the range filled")
    create_nodes(stack, "waiting")

    def not_available() -> list[dict[str, Any]]:
        evs = json.loads(
            stack.kubectl(
                "get",
                "events",
                "-n",
                "default",
                "--field-selector",
                "involvedObject.name=waiting",
                "-o",
                "json",
            ).stdout
        )["items"]
        return [e for e in evs if e["reason"] == "CIDRNotAvailable"]

    wait_for(not_available, 30, interval=0.2, what="CIDRNotAvailable for the node that does not fit")
    (event,) = not_available()
    assert event["type"] == "Normal"
    assert event["message"] == "Node waiting status is now: CIDRNotAvailable"
    assert event["involvedObject"]["kind"] == "Node"
    assert event["source"]["component"] == "cidrAllocator"
    assert nodes(stack)["waiting"] == []
    freed = nodes(stack)["fill-2"]
    stack.kubectl("delete", "node", "fill-2")
    wait_for(lambda: nodes(stack).get("waiting"), 30, interval=0.2, what="the freed CIDR given out")
    assert nodes(stack)["waiting"][0] == freed[0]  # the one free IPv4 block
    all_distinct(nodes(stack))
    stack.kubectl("delete", "node", "fill-1", "fill-3", "fill-4", "waiting")


def test_kill_9_while_nodes_wait_hands_out_no_cidr_twice(stack: devstack.DevStack) -> None:
    (pid,) = stack.controller_pids("nodeipam")
    batch = ["kill-1", "kill-2", "kill-3", "kill-4"]
    create_nodes(stack, *batch)
    os.kill(pid, signal.SIGKILL)
    wait_for(
        lambda: all(nodes(stack).get(n) for n in batch), 60, interval=0.3, what="CIDRs after the restart"
    )
    assert stack.controller_pids("nodeipam") != [pid]
    all_distinct(nodes(stack))
    stack.kubectl("delete", "node", *batch)


def test_bad_flags_are_refused_with_upstreams_message(tmp_path: Path) -> None:
    for flags, message in [
        (
            ["--cluster-cidr=10.0.0.0/16", "--node-cidr-mask-size=8"],
            "Controller: Invalid --cluster-cidr, mask size of cluster CIDR must be less than or equal to "
            "--node-cidr-mask-size configured for CIDR family",
        ),
        (
            ["--cluster-cidr=10.0.0.0/16,fd00::/48", "--node-cidr-mask-size=24"],
            "usage of --node-cidr-mask-size is not allowed with dual-stack clusters",
        ),
        (
            ["--cluster-cidr=10.0.0.0/8,10.1.0.0/16"],
            "len of ClusterCIDRs==2 and they are not configured as dual stack",
        ),
    ]:
        argv = [
            KCM,
            "dev",
            "--state-dir",
            str(tmp_path / "state"),
            "--controllers",
            "nodeipam",
            "--allocate-node-cidrs",
        ]
        res = subprocess.run([*argv, *flags], capture_output=True, text=True, timeout=60)
        assert res.returncode == 1 and message in res.stderr, res.stderr
    # The controller service itself, before it connects anywhere.
    res = subprocess.run(
        [KCM, "controller", "nodeipam", "--allocate-node-cidrs", "--cluster-cidr=10.0.0.0/33"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 1 and "kcm: invalid CIDR[0]" in res.stderr, res.stderr


def test_a_nodes_pod_cidr_is_immutable(stack: devstack.DevStack) -> None:
    wait_for(lambda: nodes(stack).get("sim-node-0"), 30, interval=0.2, what="sim-node-0's CIDRs")
    res = stack.kubectl(
        "patch",
        "node",
        "sim-node-0",
        "-p",
        '{"spec":{"podCIDR":"10.9.0.0/24","podCIDRs":["10.9.0.0/24"]}}',
        check=False,
    )
    assert res.returncode != 0
    assert (
        'spec.podCIDRs: Forbidden: node updates may not change podCIDR except from "" to valid' in res.stderr
    )


def test_node_ports_are_allocated_unique_and_released(stack: devstack.DevStack) -> None:
    ns = "ipam-nodeports"
    stack.kubectl("create", "namespace", ns)
    stack.kubectl("-n", ns, "create", "service", "nodeport", "a", "--tcp=80:8080")
    port = json.loads(stack.kubectl("-n", ns, "get", "service", "a", "-o", "json").stdout)["spec"]["ports"][
        0
    ]["nodePort"]
    assert 30000 <= port <= 32767
    res = stack.kubectl(
        "-n", ns, "create", "service", "nodeport", "b", "--tcp=80:8080", f"--node-port={port}", check=False
    )
    assert f"spec.ports[0].nodePort: Invalid value: {port}: provided port is already allocated" in res.stderr
    res = stack.kubectl(
        "-n", ns, "create", "service", "nodeport", "c", "--tcp=80:8080", "--node-port=80", check=False
    )
    assert (
        "spec.ports[0].nodePort: Invalid value: 80: provided port is not in the valid range. "
        "The range of valid ports is 30000-32767"
    ) in res.stderr
    stack.kubectl("-n", ns, "create", "service", "loadbalancer", "lb", "--tcp=80:8080")
    lb = json.loads(stack.kubectl("-n", ns, "get", "service", "lb", "-o", "json").stdout)["spec"]["ports"][0]
    assert 30000 <= lb["nodePort"] <= 32767 and lb["nodePort"] != port
    stack.kubectl("-n", ns, "delete", "service", "a")
    stack.kubectl("-n", ns, "create", "service", "nodeport", "b", "--tcp=80:8080", f"--node-port={port}")
    # A type change to ClusterIP drops the nodePort (upstream's dropTypeDependentFields) and frees it.
    stack.kubectl("-n", ns, "patch", "service", "b", "-p", '{"spec":{"type":"ClusterIP"}}')
    assert (
        "nodePort"
        not in json.loads(stack.kubectl("-n", ns, "get", "service", "b", "-o", "json").stdout)["spec"][
            "ports"
        ][0]
    )
    stack.kubectl("-n", ns, "create", "service", "nodeport", "d", "--tcp=80:8080", f"--node-port={port}")
