"""Which EndpointSlice generations a controller wrote, so it never acts on its own stale cache.

Upstream staging/src/k8s.io/endpointslice/util/endpointslice_tracker.go (EndpointSliceTracker),
shared there by the endpointslice and the endpointslice-mirroring controllers. A controller
records the generation of every slice it created or updated (`update`) and the slices it
deleted (`expect_deletion`). Before a sync it asks `stale_slices`: when the cache shows an
older generation of a slice than the one written, or still shows a slice it deleted, the
cache has not caught up with its own writes and the sync must be retried later instead of
writing again from the old state (which would undo or duplicate the last write). Event
handlers ask `should_sync` (a slice change the controller did not cause itself) and
`handle_deletion` (a deletion it did not expect) to decide whether to enqueue the Service.

Keys are (namespace, service name); the slices are identified by UID. Per process, like
upstream's (a new owner of a Service starts without entries: nothing to be stale against).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kcm_shared.apimachinery import codec

DELETION_EXPECTED = -1  # the generation recorded for a slice this controller deleted


@dataclass(frozen=True)
class Ref:
    """A slice's identity and generation, the two things the tracker compares."""

    uid: str
    generation: int

    @classmethod
    def of(cls, slice_: codec.Meta) -> Ref:
        return cls(slice_.metadata.uid, slice_.metadata.generation)


class EndpointSliceTracker:
    """Generations by slice UID, grouped by the Service (namespace, name) that owns them."""

    def __init__(self) -> None:
        self._by_service: dict[tuple[str, str], dict[str, int]] = {}

    def has(self, service: tuple[str, str], slice_: Ref) -> bool:
        """Whether the slice is tracked (created or updated or deleted by this controller)."""
        return slice_.uid in self._by_service.get(service, {})

    def should_sync(self, service: tuple[str, str], slice_: Ref) -> bool:
        """True unless the slice is at or below a generation this controller wrote itself."""
        generations = self._by_service.get(service)
        if generations is None:
            return True
        known = generations.get(slice_.uid)
        return known is None or slice_.generation > known

    def stale_slices(self, service: tuple[str, str], slices: Iterable[Ref]) -> bool:
        """Whether `slices` (the cache's) are older than what this controller wrote: a slice at
        a lower generation than written, one missing that was written, or one still present
        that it deleted."""
        generations = self._by_service.get(service)
        if not generations:
            return False
        provided = {s.uid: s.generation for s in slices}
        for uid, generation in generations.items():
            if generation == DELETION_EXPECTED:
                if uid in provided:
                    return True
                continue
            if provided.get(uid, 0) < generation:
                return True
        return False

    def update(self, service: tuple[str, str], slice_: Ref) -> None:
        """Record a slice this controller created or updated, as the API server returned it."""
        self._by_service.setdefault(service, {})[slice_.uid] = slice_.generation

    def expect_deletion(self, service: tuple[str, str], slice_: Ref) -> None:
        """Record a slice this controller deleted: its cache must stop showing it."""
        self._by_service.setdefault(service, {})[slice_.uid] = DELETION_EXPECTED

    def handle_deletion(self, service: tuple[str, str], slice_: Ref) -> bool:
        """Forget a deleted slice; True when this controller deleted it itself, False when the
        deletion is someone else's (the Service then needs a sync to replace the slice)."""
        generations = self._by_service.get(service)
        if generations is not None and slice_.uid in generations:
            expected = generations.pop(slice_.uid) == DELETION_EXPECTED
            if not generations:
                del self._by_service[service]
            return expected
        return False

    def delete_service(self, service: tuple[str, str]) -> None:
        """Forget a deleted Service's slices."""
        self._by_service.pop(service, None)
