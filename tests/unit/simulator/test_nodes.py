"""The simulated nodes' pod CIDRs: each node its own valid /24, however many nodes."""

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
