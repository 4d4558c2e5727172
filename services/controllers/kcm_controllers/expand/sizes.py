"""Which claim changes the expander looks at, and whether a claim still wants to grow.

Upstream pkg/controller/volume/expand/expand_controller.go (v1.32): `worth_enqueueing` is
enqueuePVC's filter (only Bound claims) with the update handler's "the request or the
reported capacity grew", `wants_expansion` the sync's test (request above capacity, or the PV
carries the pre-resize capacity annotation). Called by `controller`; no I/O.
"""

from __future__ import annotations

from fractions import Fraction

import msgspec
from kcm_shared.apimachinery import codec, quantity

# pkg/volume/util AnnPreResizeCapacity: left on a PV by an in-tree resize awaiting the node.
PRE_RESIZE_CAPACITY = "volume.alpha.kubernetes.io/pre-resize-capacity"


class Resources(codec.View):
    requests: dict[str, str] = msgspec.field(default_factory=dict)


class ClaimSpec(codec.View):
    volume_name: str = ""
    resources: Resources = msgspec.field(default_factory=Resources)


class ClaimStatus(codec.View):
    phase: str = ""
    capacity: dict[str, str] = msgspec.field(default_factory=dict)


class ClaimView(codec.Meta):
    spec: ClaimSpec = msgspec.field(default_factory=ClaimSpec)
    status: ClaimStatus = msgspec.field(default_factory=ClaimStatus)


def _storage(amounts: dict[str, str]) -> Fraction:
    """A missing or malformed size counts as zero, as an unset Quantity compares upstream."""
    try:
        return quantity.exact(amounts.get("storage", "0"))
    except ValueError:
        return Fraction(0)


def requested(claim: ClaimView) -> Fraction:
    return _storage(claim.spec.resources.requests)


def capacity(claim: ClaimView) -> Fraction:
    return _storage(claim.status.capacity)


def is_bound(claim: ClaimView) -> bool:
    return claim.status.phase == "Bound"


def grew(old: ClaimView, new: ClaimView) -> bool:
    """The user asked for more, or the reported capacity rose (a resize finished)."""
    return requested(new) > requested(old) or capacity(new) > capacity(old)


def wants_expansion(claim: ClaimView, pv_annotations: dict[str, str]) -> bool:
    return requested(claim) > capacity(claim) or PRE_RESIZE_CAPACITY in pv_annotations
