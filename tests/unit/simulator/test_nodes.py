"""The simulated nodes: pod CIDRs (each its own valid /24, however many), kubelet-like conditions, the Lease."""

from __future__ import annotations

import ipaddress

from kcm_simulator import nodes


def test_pod_cidrs_are_valid_and_distinct_for_a_thousand_nodes() -> None:
    cidrs = [nodes.pod_cidr(i) for i in range(1000)]
    nets = [ipaddress.ip_network(c) for c in cidrs]  # raises on 10.244.256.0/24
    assert all(n.prefixlen == 24 for n in nets)
    assert len(set(nets)) == 1000
    assert cidrs[:2] == ["10.244.0.0/24", "10.244.1.0/24"]  # unchanged for small clusters
    assert cidrs[256] == "10.245.0.0/24"


def test_serials_go_on_past_the_addresses_already_handed_out() -> None:
    cidr = "10.244.1.0/24"
    for serial in (0, 1, 7, 252):
        assert nodes.serial_after(cidr, nodes.pod_ip(cidr, serial)) == serial + 1
    tiny = "10.0.0.0/31"  # too small to skip anything: the serials wrap over every address
    assert nodes.serial_after(tiny, nodes.pod_ip(tiny, 1)) == 2
    v6 = "fd00:10:244:1::/64"
    assert nodes.serial_after(v6, nodes.pod_ip(v6, 5)) == 6
    # Not an address of this range: nothing to skip.
    assert [nodes.serial_after(cidr, ip) for ip in ("10.244.2.9", "fd00::1", "bogus", "")] == [0] * 4


def test_a_heartbeat_keeps_the_transition_time_of_an_unchanged_status_as_a_kubelet() -> None:
    first = nodes.conditions("T1", ready=True)
    assert {c["lastTransitionTime"] for c in first} == {"T1"}
    seen = nodes.conditions_by_type({"status": {"conditions": first}})
    again = {c["type"]: c for c in nodes.conditions("T2", ready=True, seen=seen)}
    assert again["Ready"]["lastHeartbeatTime"] == "T2"
    assert again["Ready"]["lastTransitionTime"] == "T1"
    # The node lifecycle controller set Ready Unknown meanwhile: True again is a transition.
    seen["Ready"] = {**seen["Ready"], "status": "Unknown", "lastTransitionTime": "T3"}
    back = {c["type"]: c for c in nodes.conditions("T4", ready=True, seen=seen)}
    assert back["Ready"]["lastTransitionTime"] == "T4"
    assert back["MemoryPressure"]["lastTransitionTime"] == "T1"


def test_the_lease_is_owned_by_its_node_once_the_node_uid_is_known() -> None:
    assert "ownerReferences" not in nodes.lease("n", "T")["metadata"]
    owned = nodes.lease("n", "T", "uid-1")["metadata"]["ownerReferences"]
    assert owned == [{"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "uid-1"}]


def test_a_node_names_the_kubelet_servers_address_and_port() -> None:
    node = nodes.node("sim-node-", 2, 3, "2026-01-01T00:00:00Z", endpoint=("127.0.0.1", 4321))
    status = node["status"]
    assert status["addresses"] == [
        {"type": "InternalIP", "address": "10.0.2.1"},
        {"type": "InternalDNS", "address": "127.0.0.1"},
        {"type": "Hostname", "address": "sim-node-2"},
    ]
    assert status["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 4321}}
    # Without a kubelet server: no InternalDNS, and the kubelet's usual port.
    bare = nodes.node("sim-node-", 2, 3, "2026-01-01T00:00:00Z")["status"]
    assert [a["type"] for a in bare["addresses"]] == ["InternalIP", "Hostname"]
    assert bare["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 10250}}
