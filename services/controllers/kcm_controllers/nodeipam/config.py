"""The node IPAM controller's flags, checked as kube-controller-manager checks them at start.

Upstream cmd/kube-controller-manager/app/core.go (startNodeIpamController, validateCIDRs,
processCIDRs, setNodeCIDRMaskSizes), app/options/nodeipamcontroller.go (the service range
split into primary and secondary) and pkg/controller/nodeipam/node_ipam_controller.go (the
mask size check), v1.32, with their error messages. `parse` is called by the Spec's
`disabled_by` (before the process connects anywhere, so a bad flag stops it at once with one
line) and by `build`.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
from dataclasses import dataclass

from kcm_shared import runtime
from kcm_shared.apimachinery import pflagvalue
from kcm_shared.base import errors
from kcm_shared.runtime import pflag

from kcm_controllers.nodeipam.cidrset import CIDRSet, CIDRSetError, Network

log = logging.getLogger("kcm.nodeipam")

RANGE_ALLOCATOR = "RangeAllocator"
CLOUD_ALLOCATOR = "CloudAllocator"
DEFAULT_MASK_IPV4 = 24
DEFAULT_MASK_IPV6 = 64


@dataclass(frozen=True)
class Config:
    cluster_cidrs: list[Network]
    node_mask_sizes: list[int]  # one per cluster CIDR
    service_cidrs: list[Network]  # the primary and secondary service ranges that parsed

    def cidr_sets(self) -> list[CIDRSet]:
        return [CIDRSet(c, m) for c, m in zip(self.cluster_cidrs, self.node_mask_sizes, strict=True)]


def flags(p: runtime.FlagSet) -> None:
    pflag.add_bool(
        p,
        "--allocate-node-cidrs",
        default=False,
        help="should CIDRs for Pods be allocated and set on the cloud provider (the node IPAM "
        "controller runs only with it)",
    )
    p.add_argument(
        "--cluster-cidr", default="", help="CIDR Range for Pods in cluster (comma-separated: dual-stack)"
    )
    p.add_argument(
        "--service-cluster-ip-range",
        default="",
        help="CIDR Range for Services in cluster, reserved from the pod ranges; requires --allocate-node-cidrs",
    )
    p.add_argument(
        "--node-cidr-mask-size", type=pflagvalue.int32, default=0, help="mask size for node cidr in cluster"
    )
    p.add_argument(
        "--node-cidr-mask-size-ipv4",
        type=pflagvalue.int32,
        default=0,
        help=f"mask size for IPv4 node cidr in dual-stack cluster (default {DEFAULT_MASK_IPV4})",
    )
    p.add_argument(
        "--node-cidr-mask-size-ipv6",
        type=pflagvalue.int32,
        default=0,
        help=f"mask size for IPv6 node cidr in dual-stack cluster (default {DEFAULT_MASK_IPV6})",
    )
    p.add_argument(
        "--cidr-allocator-type",
        default=RANGE_ALLOCATOR,
        help="type of CIDR allocator to use (only RangeAllocator here: no cloud provider)",
    )


def disabled_by(args: argparse.Namespace) -> str | None:
    """Off without --allocate-node-cidrs, as upstream; errors.ConfigError for flags that cannot work."""
    if not getattr(args, "allocate_node_cidrs", False):
        return "--allocate-node-cidrs is not set"
    parse(args)
    return None


def parse(args: argparse.Namespace) -> Config:
    try:
        return _parse(args)
    except (ValueError, CIDRSetError) as exc:
        raise errors.ConfigError(str(exc)) from exc


def _parse(args: argparse.Namespace) -> Config:
    kind = args.cidr_allocator_type
    if kind == CLOUD_ALLOCATOR:
        raise ValueError(
            "--cidr-allocator-type is set to 'CloudAllocator' but cloud provider is not configured"
        )
    if kind != RANGE_ALLOCATOR:
        raise ValueError(f"invalid CIDR allocator type: {kind}")
    if not args.cluster_cidr.strip():
        raise ValueError("Controller: Must specify --cluster-cidr if --allocate-node-cidrs is set")
    clusters = validate_cidrs(args.cluster_cidr)
    masks = node_cidr_mask_sizes(
        clusters, args.node_cidr_mask_size, args.node_cidr_mask_size_ipv4, args.node_cidr_mask_size_ipv6
    )
    for cidr, mask in zip(clusters, masks, strict=True):
        if not 0 <= mask <= cidr.max_prefixlen:
            raise ValueError(f"invalid node CIDR mask size {mask} for {cidr}")
        if cidr.prefixlen > mask:
            raise ValueError(
                "Controller: Invalid --cluster-cidr, mask size of cluster CIDR must be less than or "
                "equal to --node-cidr-mask-size configured for CIDR family"
            )
    config = Config(clusters, masks, service_cidrs(args.service_cluster_ip_range))
    config.cidr_sets()  # upstream's NewCIDRSet refuses an IPv6 range cut into too many blocks
    return config


def parse_cidrs(text: str) -> list[Network]:
    """Comma-separated CIDRs (k8s.io/utils/net ParseCIDRs), host bits allowed as Go's ParseCIDR."""
    out = []
    for i, item in enumerate(text.strip().split(",")):
        try:
            out.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ValueError(f"invalid CIDR[{i}]: <nil> (invalid CIDR address: {item})") from None
    return out


def validate_cidrs(text: str) -> list[Network]:
    cidrs = parse_cidrs(text)
    dual = {c.version for c in cidrs} == {4, 6}
    if len(cidrs) > 1 and not dual:
        raise ValueError(
            f"len of ClusterCIDRs=={len(cidrs)} and they are not configured as dual stack "
            "(at least one from each IPFamily"
        )
    if len(cidrs) > 2:
        raise ValueError(f"length of clusterCIDRs is:{len(cidrs)} more than max allowed of 2")
    return cidrs


def node_cidr_mask_sizes(clusters: list[Network], mask: int, mask_v4: int, mask_v6: int) -> list[int]:
    """The node mask size for each cluster CIDR (0 = flag not set), as setNodeCIDRMaskSizes."""
    v4, v6 = DEFAULT_MASK_IPV4, DEFAULT_MASK_IPV6
    if len(clusters) > 1:
        if mask:
            raise ValueError("usage of --node-cidr-mask-size is not allowed with dual-stack clusters")
        v4, v6 = mask_v4 or v4, mask_v6 or v6
    elif mask:
        if mask_v4 or mask_v6:
            raise ValueError(
                "usage of --node-cidr-mask-size-ipv4 and --node-cidr-mask-size-ipv6 is not allowed if "
                "--node-cidr-mask-size is set. For dual-stack clusters please unset it and use IPFamily "
                "specific flags"
            )
        v4 = v6 = mask
    else:
        single_v6 = clusters[0].version == 6
        if mask_v4:
            if single_v6:
                raise ValueError(
                    "usage of --node-cidr-mask-size-ipv4 is not allowed for a single-stack IPv6 cluster"
                )
            v4 = mask_v4
        if mask_v6:
            if not single_v6:
                raise ValueError(
                    "usage of --node-cidr-mask-size-ipv6 is not allowed for a single-stack IPv4 cluster"
                )
            v6 = mask_v6
    return [v6 if c.version == 6 else v4 for c in clusters]


def service_cidrs(text: str) -> list[Network]:
    """The primary and secondary service range; one that does not parse is only logged, as upstream."""
    items = text.split(",") if text.strip() else []
    if len(items) > 2:
        raise ValueError("--service-cluster-ip-range can not contain more than two entries")
    out = []
    for item in items:
        try:
            out.append(ipaddress.ip_network(item.strip(), strict=False))
        except ValueError as exc:
            log.warning(
                "Warning: unsuccessful parsing of service CIDR", extra={"CIDR": item, "err": str(exc)}
            )
    if len(out) == 2 and out[0].version == out[1].version:
        raise ValueError("serviceCIDR and secondaryServiceCIDR are not dualstack (from different IPfamiles)")
    return out
