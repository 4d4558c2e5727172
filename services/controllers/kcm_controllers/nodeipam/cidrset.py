"""A bitmap of the node CIDRs of one cluster CIDR: which blocks are taken, and the next free one.

Upstream pkg/controller/nodeipam/ipam/cidrset/cidr_set.go (v1.32): the cluster CIDR is cut into
`2**(node mask - cluster mask)` blocks of the node mask size; `allocate_next` hands out the
first free block from a round-robin cursor, `occupy` and `release` take or free every block a
CIDR overlaps (a CIDR larger than the cluster's covers all of it), with upstream's error
messages. Python's integers stand in for Go's big.Int bitmap and for the two 64-bit halves
upstream splits an IPv6 address into. Used by `allocator.py`; the metrics are counted there,
from the bitmap's changes, because the allocator rebuilds its sets from the node cache.
"""

from __future__ import annotations

import ipaddress

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# Upstream's clusterSubnetMaxDiff: its bitmap is uncompressed, so an IPv6 cluster CIDR may be cut
# into at most 2**16 blocks (IPv4 is not limited: it has 32 bits at most).
CLUSTER_SUBNET_MAX_DIFF = 16

NO_CIDRS_REMAINING = (
    "CIDR allocation failed; there are no remaining CIDRs left to allocate in the accepted range"
)
SUBNET_TOO_BIG = "New CIDR set failed; the node CIDR size is too big"


class CIDRSetError(Exception):
    """An allocation, occupation or release that cannot be done; the text is upstream's."""


class CIDRSet:
    def __init__(self, cluster_cidr: Network, node_mask_size: int) -> None:
        cluster_mask = cluster_cidr.prefixlen
        if cluster_cidr.version == 6 and node_mask_size - cluster_mask > CLUSTER_SUBNET_MAX_DIFF:
            raise CIDRSetError(SUBNET_TOO_BIG)
        self.cluster_cidr = cluster_cidr
        self.cluster_mask_size = cluster_mask
        self.node_mask_size = node_mask_size
        self.bits = cluster_cidr.max_prefixlen
        self.max_cidrs = 1 << (node_mask_size - cluster_mask)
        self.used = 0  # bit i set: block i is taken
        self.allocated = 0
        self.next_candidate = 0
        self.last_tries = 0  # blocks skipped by the last allocate_next (upstream's tries metric)

    @property
    def label(self) -> str:
        """The metrics' clusterCIDR label."""
        return str(self.cluster_cidr)

    def index_to_cidr(self, index: int) -> Network:
        base = int(self.cluster_cidr.network_address) | (index << (self.bits - self.node_mask_size))
        return ipaddress.ip_network((base, self.node_mask_size))

    def allocate_next(self) -> Network:
        if self.allocated >= self.max_cidrs:
            raise CIDRSetError(NO_CIDRS_REMAINING)
        candidate = self.next_candidate
        tries = 0
        while tries < self.max_cidrs and self.used >> candidate & 1:
            candidate = (candidate + 1) % self.max_cidrs
            tries += 1
        self.next_candidate = (candidate + 1) % self.max_cidrs
        self.used |= 1 << candidate
        self.allocated += 1
        self.last_tries = tries
        return self.index_to_cidr(candidate)

    def occupy(self, cidr: Network) -> None:
        """Mark every block `cidr` overlaps as taken; taking a taken block again is no error."""
        begin, end = self._indices(cidr)
        for i in range(begin, end + 1):
            if not self.used >> i & 1:
                self.used |= 1 << i
                self.allocated += 1

    def release(self, cidr: Network) -> None:
        begin, end = self._indices(cidr)
        for i in range(begin, end + 1):
            if self.used >> i & 1:
                self.used &= ~(1 << i)
                self.allocated -= 1

    def _indices(self, cidr: Network) -> tuple[int, int]:
        """The first and last block `cidr` overlaps (upstream getBeginningAndEndIndices)."""
        cluster = self.cluster_cidr
        if cidr.version != cluster.version or not (
            cidr.subnet_of(cluster) or cluster.subnet_of(cidr)  # type: ignore[arg-type]
        ):
            raise CIDRSetError(f"cidr {cidr} is out the range of cluster cidr {cluster}")
        if self.cluster_mask_size >= cidr.prefixlen:
            return 0, self.max_cidrs - 1
        return self._index_of(int(cidr.network_address)), self._index_of(int(cidr.broadcast_address))

    def _index_of(self, ip: int) -> int:
        index = (int(self.cluster_cidr.network_address) ^ ip) >> (self.bits - self.node_mask_size)
        if index >= self.max_cidrs:
            address = ipaddress.ip_address(ip & ~((1 << (self.bits - self.node_mask_size)) - 1))
            raise CIDRSetError(f"CIDR: {address}/{self.node_mask_size} is out of the range of CIDR allocator")
        return index
