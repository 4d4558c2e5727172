"""Pod tracking with the `batch.kubernetes.io/job-tracking` finalizer (upstream tracking_utils.go).

Every pod the job controller creates or adopts carries the finalizer, so a finished pod
stays in the API until the controller has counted it. A sync first writes the UIDs of newly
finished pods into `status.uncountedTerminatedPods`, then removes their finalizers, then
moves them from the uncounted lists into `status.succeeded`/`failed`
(`clean_uncounted_without_finalizers`): a controller killed between any two steps finds
each pod either still holding its finalizer, or listed as uncounted, never both lost and
never counted twice.

`FinalizerExpectations` is upstream's uidTrackingExpectations: the pod UIDs whose
finalizer removal this process requested and has not yet seen in its cache, so a sync on a
cache that lags behind does not count those pods again. Used by `job_controller.py`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from kcm_shared.apimachinery import codec

log = logging.getLogger("kcm.job")

JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"


def has_tracking_finalizer(meta: codec.Meta) -> bool:
    return JOB_TRACKING_FINALIZER in meta.metadata.finalizers


def remove_finalizer_patch() -> dict[str, Any]:
    """Strategic-merge patch that takes the tracking finalizer off a pod, leaving the others."""
    return {"metadata": {"$deleteFromPrimitiveList/finalizers": [JOB_TRACKING_FINALIZER]}}


def with_tracking_finalizer(finalizers: Iterable[str]) -> list[str]:
    """`finalizers` with the tracking finalizer appended when missing (appendJobCompletionFinalizerIfNotFound)."""
    result = list(finalizers)
    if JOB_TRACKING_FINALIZER not in result:
        result.append(JOB_TRACKING_FINALIZER)
    return result


def clean_uncounted_without_finalizers(
    counts: dict[str, int], uncounted: dict[str, list[str]], with_finalizer: set[str]
) -> bool:
    """Move the uncounted UIDs whose pods no longer hold the finalizer into the counters.

    `counts` and `uncounted` have the keys "succeeded" and "failed" and are updated in place;
    returns whether anything moved (cleanUncountedPodsWithoutFinalizers).
    """
    updated = False
    for kind in ("succeeded", "failed"):
        kept = [uid for uid in uncounted[kind] if uid in with_finalizer]
        if len(kept) != len(uncounted[kind]):
            counts[kind] += len(uncounted[kind]) - len(kept)
            uncounted[kind] = kept
            updated = True
    return updated


class FinalizerExpectations:
    """Pod UIDs per Job key whose finalizer removal is requested but not yet observed."""

    def __init__(self) -> None:
        self._uids: dict[str, set[str]] = {}

    def expected(self, key: str) -> set[str]:
        return set(self._uids.get(key, ()))

    def expect_removed(self, key: str, uids: Iterable[str]) -> None:
        self._uids.setdefault(key, set()).update(uids)

    def removal_observed(self, key: str, uid: str) -> None:
        uids = self._uids.get(key)
        if uids is None:
            return
        uids.discard(uid)
        if not uids:
            del self._uids[key]

    def delete(self, key: str) -> None:
        self._uids.pop(key, None)

    def retain(self, keep: Callable[[str], bool]) -> None:
        """Forget the Jobs `keep` refuses (their partition moved away)."""
        self._uids = {key: uids for key, uids in self._uids.items() if keep(key)}
