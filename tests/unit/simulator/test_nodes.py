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
