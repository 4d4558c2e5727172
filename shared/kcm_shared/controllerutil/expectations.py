"""Expectations: how many creations/deletions a controller is still waiting to see in its cache.

Upstream's ControllerExpectations (pkg/controller/controller_utils.go). A ReplicaSet-like
controller that just asked the API server for N pods records "expect N creations" under its
own key; each pod add seen in the cache (or each failed create) lowers the count. Until the
count reaches zero, or the record is older than `EXPECTATIONS_TIMEOUT` (a watch event may
have been lost), `satisfied_expectations` says no, and the controller skips managing
replicas, so a stale cache never makes it create the same pods twice (invariant 6).

`UIDTrackingControllerExpectations` also remembers which pod keys it expects to disappear,
so a deletion observed twice (an update with deletionTimestamp, then the delete) lowers the
count once.

Used by the controllers' sync functions and event handlers; everything runs on the event
loop, so no locking is needed. The clock is injected for tests.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

log = logging.getLogger("kcm.expectations")

EXPECTATIONS_TIMEOUT = 5 * 60.0  # seconds after which unmet expectations are ignored


@dataclass
class ControlleeExpectations:
    """Creations (`add`) and deletions (`delete`) still expected, and when they were set."""

    add: int
    delete: int
    key: str
    timestamp: float

    def fulfilled(self) -> bool:
        # Counts go below zero when more is observed than expected (e.g. a failed create
        # also being lowered): that still means "nothing pending".
        return self.add <= 0 and self.delete <= 0


class ControllerExpectations:
    def __init__(
        self, clock: Callable[[], float] = time.monotonic, timeout: float = EXPECTATIONS_TIMEOUT
    ) -> None:
        self._clock = clock
        self._timeout = timeout
        self._store: dict[str, ControlleeExpectations] = {}

    def get_expectations(self, controller_key: str) -> ControlleeExpectations | None:
        return self._store.get(controller_key)

    def satisfied_expectations(self, controller_key: str) -> bool:
        """True when the controller may act: nothing pending, no record, or the record expired.

        No record means a new controller, or one whose expectations were deleted: sync.
        """
        exp = self._store.get(controller_key)
        if exp is None:
            return True
        if exp.fulfilled():
            return True
        if self._clock() - exp.timestamp > self._timeout:
            log.info(
                "expectations expired",
                extra={"controller": controller_key, "add": exp.add, "delete": exp.delete},
            )
            return True
        return False

    def set_expectations(self, controller_key: str, add: int, delete: int) -> None:
        """Replace the record with fresh counts, timed from now."""
        self._store[controller_key] = ControlleeExpectations(add, delete, controller_key, self._clock())

    def expect_creations(self, controller_key: str, adds: int) -> None:
        self.set_expectations(controller_key, adds, 0)

    def expect_deletions(self, controller_key: str, dels: int) -> None:
        self.set_expectations(controller_key, 0, dels)

    def raise_expectations(self, controller_key: str, add: int, delete: int) -> None:
        """Add to an existing record (its timestamp stays); no record, no effect."""
        exp = self._store.get(controller_key)
        if exp is not None:
            exp.add += add
            exp.delete += delete

    def lower_expectations(self, controller_key: str, add: int, delete: int) -> None:
        self.raise_expectations(controller_key, -add, -delete)

    def creation_observed(self, controller_key: str) -> None:
        """Call on an add event of an owned object, and when a create request failed."""
        self.lower_expectations(controller_key, 1, 0)

    def deletion_observed(self, controller_key: str) -> None:
        """Call on a delete event of an owned object, and when a delete request failed."""
        self.lower_expectations(controller_key, 0, 1)

    def delete_expectations(self, controller_key: str) -> None:
        """Forget the controller (call when the controller object itself is deleted)."""
        self._store.pop(controller_key, None)

    def retain(self, keep: Callable[[str], bool]) -> None:
        """Forget every controller `keep` refuses (its partition moved to another replica)."""
        for key in [k for k in self._store if not keep(k)]:
            self.delete_expectations(key)


class UIDTrackingControllerExpectations(ControllerExpectations):
    """Expectations whose deletions are tracked by the keys of the objects being deleted.

    Despite the upstream name, the tracked values are object keys (`namespace/name`), which is
    what upstream's ReplicaSet controller passes in.
    """

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, timeout: float = EXPECTATIONS_TIMEOUT
    ) -> None:
        super().__init__(clock, timeout)
        self._uids: dict[str, set[str]] = {}

    def get_uids(self, controller_key: str) -> set[str] | None:
        return self._uids.get(controller_key)

    def expect_deletions_of(self, controller_key: str, deleted_keys: Iterable[str]) -> None:
        """Expect the deletion of exactly these objects (upstream's UID-tracking ExpectDeletions)."""
        expected = set(deleted_keys)
        if self._uids.get(controller_key):
            # Upstream logs this too: a sync set new deletions before the last ones were seen.
            log.error(
                "clobbering existing delete keys",
                extra={"controller": controller_key, "keys": sorted(self._uids[controller_key])},
            )
        self._uids[controller_key] = expected
        self.set_expectations(controller_key, 0, len(expected))

    def deletion_observed_of(self, controller_key: str, deleted_key: str) -> None:
        """Lower the deletions once per expected key, however often its deletion is seen."""
        keys = self._uids.get(controller_key)
        if keys is not None and deleted_key in keys:
            self.lower_expectations(controller_key, 0, 1)
            keys.discard(deleted_key)

    def delete_expectations(self, controller_key: str) -> None:
        super().delete_expectations(controller_key)
        self._uids.pop(controller_key, None)

    def retain(self, keep: Callable[[str], bool]) -> None:
        super().retain(keep)
        self._uids = {key: uids for key, uids in self._uids.items() if keep(key)}
