"""The node IPAM controller's pure parts with upstream's table cases: cidr_set_test.go
(TestCIDRSetFullyAllocated, TestIndexToCIDRBlock, TestCIDRSet_RandomishAllocation,
TestCIDRSet_AllocationOccupied, TestDoubleOccupyRelease, TestGetBitforCIDR, TestOccupy,
TestCIDRSetv6), kube-controller-manager's flag checks (core_test.go TestSetNodeCIDRMaskSizes,
validateCIDRs), and range_allocator_test.go's cases (TestAllocateOrOccupyCIDRSuccess,
...Failure, TestReleaseCIDRSuccess) run as passes of the allocator over a fake cache."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
from typing import Any

import msgspec
import pytest
from kcm_controllers.nodeipam import config, range_allocator
from kcm_controllers.nodeipam import controller as node_ipam_controller
from kcm_controllers.nodeipam.cidrset import CIDRSet, CIDRSetError
from kcm_controllers.nodeipam.range_allocator import NodeView, RangeAllocator
from kcm_shared.base import errors
from kcm_shared.client import kubeclient
from kcm_shared.testing import caches, fakeclient, recorders


def net(text: str) -> Any:
    return ipaddress.ip_network(text, strict=False)


@pytest.mark.parametrize("cluster", ["127.123.234.0/30", "beef:1234::/30"])
def test_fully_allocated(cluster: str) -> None:
    s = CIDRSet(net(cluster), 30)
    first = s.allocate_next()
    assert str(first) == cluster
    with pytest.raises(CIDRSetError, match="no remaining CIDRs"):
        s.allocate_next()
    s.release(first)
    assert str(s.allocate_next()) == cluster
    with pytest.raises(CIDRSetError):
        s.allocate_next()


@pytest.mark.parametrize(
    ("cluster", "mask", "index", "block"),
    [
        ("127.123.3.0/16", 24, 0, "127.123.0.0/24"),
        ("127.123.0.0/16", 24, 15, "127.123.15.0/24"),
        ("192.168.5.219/28", 32, 5, "192.168.5.213/32"),
        ("2001:0db8:1234:3::/48", 64, 0, "2001:db8:1234::/64"),
        ("2001:0db8:1234::/48", 64, 15, "2001:db8:1234:f::/64"),
        ("2001:0db8:85a3::8a2e:0370:7334/50", 63, 6425, "2001:db8:85a3:3232::/63"),
        ("2001:0db8::/32", 48, 0, "2001:db8::/48"),
        ("2001:0db8::/32", 48, 15, "2001:db8:f::/48"),
        ("2001:0db8:85a3::8a2e:0370:7334/32", 48, 6425, "2001:db8:1919::/48"),
        ("2001:0db8:1234:ff00::/56", 72, 0, "2001:db8:1234:ff00::/72"),
        ("2001:0db8:1234:ff00::/56", 72, 15, "2001:db8:1234:ff00:f00::/72"),
        ("2001:0db8:1234:ff00::0370:7334/56", 72, 6425, "2001:db8:1234:ff19:1900::/72"),
        ("2001:0db8:1234:0:1234::/80", 96, 0, "2001:db8:1234:0:1234::/96"),
        ("2001:0db8:1234:0:1234::/80", 96, 15, "2001:db8:1234:0:1234:f::/96"),
        ("2001:0db8:1234:ff00::0370:7334/80", 96, 6425, "2001:db8:1234:ff00:0:1919::/96"),
    ],
)
def test_index_to_cidr_block(cluster: str, mask: int, index: int, block: str) -> None:
    assert str(CIDRSet(net(cluster), mask).index_to_cidr(index)) == block


@pytest.mark.parametrize("cluster", ["127.123.234.0/16", "beef:1234::/16"])
def test_randomish_allocation_and_occupied(cluster: str) -> None:
    s = CIDRSet(net(cluster), 24)
    cidrs = [s.allocate_next() for _ in range(256)]
    assert len(set(cidrs)) == 256
    with pytest.raises(CIDRSetError):
        s.allocate_next()
    for c in cidrs:
        s.release(c)
    assert [s.allocate_next() for _ in range(256)] == cidrs
    for c in cidrs:
        s.release(c)
    for c in cidrs[128:]:
        s.occupy(c)
    s.occupy(cidrs[128])
    again = [s.allocate_next() for _ in range(128)]
    with pytest.raises(CIDRSetError):
        s.allocate_next()
    assert again + cidrs[128:] == cidrs


def test_double_occupy_release() -> None:
    s = CIDRSet(net("10.42.0.0/16"), 24)
    for cidr, op, occupied in [
        ("10.42.5.0/24", "occupy", 1),
        ("10.42.9.0/24", "occupy", 2),
        ("10.42.8.0/22", "occupy", 5),
        ("10.42.9.0/24", "occupy", 5),
        ("10.42.9.0/24", "release", 4),
        ("10.42.9.0/24", "release", 4),
        ("10.42.4.0/22", "release", 3),
    ]:
        getattr(s, op)(net(cidr))
        assert s.allocated == occupied
    for _ in range(256 - 3):
        s.allocate_next()
    with pytest.raises(CIDRSetError):
        s.allocate_next()


@pytest.mark.parametrize(
    ("cluster", "mask", "subnet", "bit"),
    [
        ("127.0.0.0/8", 16, "127.0.0.0/16", 0),
        ("be00::/8", 16, "be00::/16", 0),
        ("127.0.0.0/8", 16, "127.123.0.0/16", 123),
        ("be00::/8", 16, "beef::/16", 0xEF),
        ("127.0.0.0/8", 16, "127.168.0.0/16", 168),
        ("be00::/8", 16, "be68::/16", 0x68),
        ("127.0.0.0/8", 16, "127.224.0.0/16", 224),
        ("be00::/8", 16, "be24::/16", 0x24),
        ("192.168.0.0/16", 24, "192.168.12.0/24", 12),
        ("beef::/16", 24, "beef:1200::/24", 0x12),
        ("192.168.0.0/16", 24, "192.168.151.0/24", 151),
        ("beef::/16", 24, "beef:9700::/24", 0x97),
        ("192.168.0.0/16", 24, "127.168.224.0/24", None),
        ("beef::/16", 24, "2001:db00::/24", None),
    ],
)
def test_bit_for_cidr(cluster: str, mask: int, subnet: str, bit: int | None) -> None:
    s = CIDRSet(net(cluster), mask)
    if bit is None:
        with pytest.raises(CIDRSetError):
            s.occupy(net(subnet))
        return
    s.occupy(net(subnet))
    assert s.used == 1 << bit


@pytest.mark.parametrize(
    ("cluster", "mask", "subnet", "begin", "end"),
    [
        ("127.0.0.0/8", 16, "127.0.0.0/8", 0, 255),
        ("2001:beef:1200::/40", 48, "2001:beef:1200::/40", 0, 255),
        ("127.0.0.0/8", 16, "127.0.0.0/2", 0, 255),
        ("2001:beef:1200::/40", 48, "2001:beef:1234::/34", 0, 255),
        ("127.0.0.0/8", 16, "127.0.0.0/16", 0, 0),
        ("2001:beef:1200::/40", 48, "2001:beef:1200::/48", 0, 0),
        ("127.0.0.0/8", 32, "127.0.0.0/16", 0, 65535),
        ("2001:beef:1200::/48", 64, "2001:beef:1200::/48", 0, 65535),
        ("127.0.0.0/7", 16, "127.0.0.0/15", 256, 257),
        ("2001:beef:7f00::/39", 48, "2001:beef:7f00::/47", 256, 257),
        ("127.0.0.0/7", 15, "127.0.0.0/15", 128, 128),
        ("2001:beef:7f00::/39", 47, "2001:beef:7f00::/47", 128, 128),
        ("127.0.0.0/7", 18, "127.0.0.0/15", 1024, 1031),
        ("2001:beef:7f00::/39", 50, "2001:beef:7f00::/47", 1024, 1031),
    ],
)
def test_occupy(cluster: str, mask: int, subnet: str, begin: int, end: int) -> None:
    s = CIDRSet(net(cluster), mask)
    s.occupy(net(subnet))
    assert s.used == sum(1 << i for i in range(begin, end + 1))


def test_out_of_range_is_upstreams_error() -> None:
    with pytest.raises(
        CIDRSetError, match=r"^cidr 10.1.0.0/24 is out the range of cluster cidr 10.0.0.0/16$"
    ):
        CIDRSet(net("10.0.0.0/16"), 24).occupy(net("10.1.0.0/24"))


@pytest.mark.parametrize(
    ("cluster", "mask", "first", "second"),
    [
        ("127.0.0.0/8", 32, "127.0.0.0/32", "127.0.0.1/32"),
        ("beef:1234::/32", 49, None, None),
        ("2001:beef:1234:369b::/60", 64, "2001:beef:1234:3690::/64", "2001:beef:1234:3691::/64"),
    ],
)
def test_cidr_set_v6(cluster: str, mask: int, first: str | None, second: str | None) -> None:
    if first is None:
        with pytest.raises(CIDRSetError, match="the node CIDR size is too big"):
            CIDRSet(net(cluster), mask)
        return
    s = CIDRSet(net(cluster), mask)
    assert [str(s.allocate_next()), str(s.allocate_next())] == [first, second]


def test_tries_count_the_taken_blocks_skipped() -> None:
    s = CIDRSet(net("10.0.0.0/16"), 24)
    s.occupy(net("10.0.0.0/17"))
    assert str(s.allocate_next()) == "10.0.128.0/24"
    assert s.last_tries == 128
    assert s.allocated == 129


# -- flags ---------------------------------------------------------------------------------


def args(**kw: Any) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    config.flags(p)
    ns = p.parse_args(["--allocate-node-cidrs"])
    for k, v in kw.items():
        setattr(ns, k, v)
    return ns


@pytest.mark.parametrize(
    ("clusters", "mask", "v4", "v6", "want"),
    [
        # TestSetNodeCIDRMaskSizes
        ("10.0.0.0/16", 0, 0, 0, [24]),
        ("10.0.0.0/16", 26, 0, 0, [26]),
        ("10.0.0.0/16", 0, 26, 0, [26]),
        ("10.0.0.0/16", 0, 0, 26, "not allowed for a single-stack IPv4 cluster"),
        ("10.0.0.0/16", 26, 26, 0, "is not allowed if --node-cidr-mask-size is set"),
        ("fd00::/48", 0, 0, 0, [64]),
        ("fd00::/48", 60, 0, 0, [60]),
        ("fd00::/48", 0, 0, 60, [60]),
        ("fd00::/48", 0, 26, 0, "not allowed for a single-stack IPv6 cluster"),
        ("10.0.0.0/16,fd00::/48", 0, 0, 0, [24, 64]),
        ("fd00::/48,10.0.0.0/16", 0, 26, 60, [60, 26]),
        (
            "10.0.0.0/16,fd00::/48",
            26,
            0,
            0,
            "usage of --node-cidr-mask-size is not allowed with dual-stack clusters",
        ),
    ],
)
def test_node_cidr_mask_sizes(clusters: str, mask: int, v4: int, v6: int, want: list[int] | str) -> None:
    ns = args(
        cluster_cidr=clusters,
        node_cidr_mask_size=mask,
        node_cidr_mask_size_ipv4=v4,
        node_cidr_mask_size_ipv6=v6,
    )
    if isinstance(want, str):
        with pytest.raises(errors.ConfigError, match=want):
            config.parse(ns)
    else:
        assert config.parse(ns).node_mask_sizes == want


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({}, "Must specify --cluster-cidr if --allocate-node-cidrs is set"),
        ({"cluster_cidr": "10.0.0.0/33"}, r"invalid CIDR\[0\]"),
        ({"cluster_cidr": "10.0.0.0/8,10.1.0.0/16"}, "they are not configured as dual stack"),
        ({"cluster_cidr": "10.0.0.0/8,fd00::/48,10.1.0.0/16"}, "more than max allowed of 2"),
        (
            {"cluster_cidr": "10.0.0.0/16", "node_cidr_mask_size": 8},
            "mask size of cluster CIDR must be less than",
        ),
        ({"cluster_cidr": "fd00::/32"}, "the node CIDR size is too big"),
        (
            {"cluster_cidr": "10.0.0.0/16", "cidr_allocator_type": "CloudAllocator"},
            "cloud provider is not configured",
        ),
        ({"cluster_cidr": "10.0.0.0/16", "cidr_allocator_type": "Foo"}, "invalid CIDR allocator type: Foo"),
        (
            {"cluster_cidr": "10.0.0.0/16", "service_cluster_ip_range": "10.96.0.0/12,10.97.0.0/16"},
            "not dualstack",
        ),
    ],
)
def test_bad_flags_are_refused_with_upstreams_message(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(errors.ConfigError, match=message):
        node_ipam_controller.SPEC.disabled_by(args(**kw))  # type: ignore[misc]


def test_off_without_allocate_node_cidrs() -> None:
    ns = args()
    ns.allocate_node_cidrs = False
    assert node_ipam_controller.SPEC.disabled_by(ns) == "--allocate-node-cidrs is not set"  # type: ignore[misc]


# -- the allocator's pass ------------------------------------------------------------------


class Harness:
    """Nodes in the cache and the API server alike, and a RangeAllocator over them."""

    def __init__(
        self, nodes: list[dict[str, Any]], client: fakeclient.FakeClient | None = None, **flags: Any
    ) -> None:
        self.nodes = caches.new(node_ipam_controller.NODES, NodeView)
        self.client = client or fakeclient.FakeClient()
        for doc in nodes:
            self.put(doc)
        self.recorder = recorders.RecordingEventRecorder("cidrAllocator")
        self.allocator = RangeAllocator(self.client, self.nodes, self.recorder, config.parse(args(**flags)))

    def put(self, doc: dict[str, Any]) -> None:
        """A node the API server holds and the cache shows."""
        self.client.add(f"/api/v1/nodes/{doc['metadata']['name']}", doc)
        self.nodes.seed(msgspec.json.decode(msgspec.json.encode(doc), type=NodeView))

    def run(self) -> dict[str, list[str]]:
        """One pass: the podCIDRs each node was patched with (strategic patches only)."""
        start = len(self.client.actions)
        asyncio.run(self.allocator.allocate_pass())
        patched: dict[str, list[str]] = {}
        for action in self.client.actions[start:]:
            if action.verb == "patch":
                assert action.patch_type == "strategic", action
                patched[action.path.rsplit("/", 1)[-1]] = action.body["spec"]["podCIDRs"]
        return patched

    def reasons(self) -> list[str]:
        """The Events recorded since the last call."""
        out = [f"{e.reason}: {e.message}" for e in self.recorder.events]
        self.recorder.events.clear()
        return out

    def land(self, name: str, cidrs: list[str]) -> None:
        """The cache sees the node with CIDRs (what the watch delivers after the patch)."""
        self.put(node(name, *cidrs))


def node(name: str, *cidrs: str, rv: str = "1") -> dict[str, Any]:
    spec = {"podCIDR": cidrs[0], "podCIDRs": list(cidrs)} if cidrs else {}
    return {"metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": rv}, "spec": spec}


@pytest.mark.parametrize(
    ("flags", "existing", "want"),
    [
        # "When there's no ServiceCIDR return first CIDR in range"
        ({"cluster_cidr": "127.123.234.0/24", "node_cidr_mask_size": 30}, [], ["127.123.234.0/30"]),
        # "Correctly filter out ServiceCIDR"
        (
            {
                "cluster_cidr": "127.123.234.0/24",
                "service_cluster_ip_range": "127.123.234.0/26",
                "node_cidr_mask_size": 30,
            },
            [],
            ["127.123.234.64/30"],
        ),
        # "Correctly ignore already allocated CIDRs"
        (
            {
                "cluster_cidr": "127.123.234.0/24",
                "service_cluster_ip_range": "127.123.234.0/26",
                "node_cidr_mask_size": 30,
            },
            ["127.123.234.64/30", "127.123.234.68/30", "127.123.234.72/30", "127.123.234.80/30"],
            ["127.123.234.76/30"],
        ),
        # "Dualstack CIDRs v4,v6" / "v6,v4"
        (
            {
                "cluster_cidr": "127.123.234.0/8,ace:cab:deca::/84",
                "service_cluster_ip_range": "127.123.234.0/26",
            },
            [],
            ["127.0.0.0/24", "ace:cab:deca::/64"],
        ),
        (
            {
                "cluster_cidr": "ace:cab:deca::/84,127.123.234.0/8",
                "service_cluster_ip_range": "127.123.234.0/26",
            },
            [],
            ["ace:cab:deca::/64", "127.0.0.0/24"],
        ),
    ],
)
def test_allocate_success(flags: dict[str, Any], existing: list[str], want: list[str]) -> None:
    if "node_cidr_mask_size" not in flags and "," in flags["cluster_cidr"]:
        flags = {**flags, "node_cidr_mask_size_ipv4": 24, "node_cidr_mask_size_ipv6": 98}
        want = [w.replace("/64", "/98") for w in want]
    docs = [node(f"old-{i}", c) for i, c in enumerate(existing)] + [node("new")]
    h = Harness(docs, **flags)
    assert h.run() == {"new": want}


def test_a_full_range_records_cidr_not_available_once_per_node_version() -> None:
    h = Harness(
        [node("a", "127.123.234.0/30"), node("b")], cluster_cidr="127.123.234.0/30", node_cidr_mask_size=30
    )
    assert h.run() == {}
    assert h.reasons() == ["CIDRNotAvailable: Node b status is now: CIDRNotAvailable"]
    h.run()
    assert h.reasons() == []
    h.put(node("b", rv="2"))
    h.run()
    assert h.reasons() == ["CIDRNotAvailable: Node b status is now: CIDRNotAvailable"]


def test_a_deleted_nodes_cidr_goes_to_the_next_node() -> None:
    h = Harness([node("a"), node("b")], cluster_cidr="10.0.0.0/23", node_cidr_mask_size=24)
    first = h.run()
    assert sorted(c for cidrs in first.values() for c in cidrs) == ["10.0.0.0/24", "10.0.1.0/24"]
    for name, cidrs in first.items():
        h.land(name, cidrs)
    h.put(node("c"))
    assert h.run() == {}
    h.nodes.evict("a")
    assert h.run() == {"c": first["a"]}


def test_a_node_whose_patch_the_cache_has_not_shown_is_neither_patched_again_nor_its_cidr_reused() -> None:
    h = Harness([node("a")], cluster_cidr="10.0.0.0/23", node_cidr_mask_size=24)
    assert h.run() == {"a": ["10.0.0.0/24"]}
    h.put(node("b"))
    h.put(node("c"))
    # "a" still shows no CIDR in the cache: its block stays taken, so "c" finds the range full.
    assert h.run() == {"b": ["10.0.1.0/24"]}
    assert h.reasons() == ["CIDRNotAvailable: Node c status is now: CIDRNotAvailable"]
    h.land("a", ["10.0.0.0/24"])
    h.land("b", ["10.0.1.0/24"])
    assert h.run() == {}
    assert h.allocator.pending == {}
    h.nodes.evict("a")
    assert h.run() == {"c": ["10.0.0.0/24"]}


def test_a_new_allocator_occupies_what_the_cache_shows() -> None:
    """A restart, or another replica taking the key over, starts from the cache alone."""
    h = Harness([node("a", "10.0.0.0/24"), node("b")], cluster_cidr="10.0.0.0/23", node_cidr_mask_size=24)
    assert h.run() == {"b": ["10.0.1.0/24"]}


def test_a_refused_patch_records_cidr_assignment_failed_and_frees_the_cidrs() -> None:
    refusing = fakeclient.FakeClient()
    # Every try of the first pass is refused.
    refuse = kubeclient.ApiError(422, "Invalid", "no")
    refusing.fail("patch", None, refuse, times=range_allocator.CIDR_UPDATE_RETRIES)
    h = Harness([node("a")], refusing, cluster_cidr="10.0.0.0/24", node_cidr_mask_size=24)
    h.run()
    assert h.reasons() == ["CIDRAssignmentFailed: Node a status is now: CIDRAssignmentFailed"]
    assert h.allocator.pending == {} and h.allocator.leaked == []
    assert h.run() == {"a": ["10.0.0.0/24"]}
