"""The delay before a Job replaces failed pods (upstream backoff_utils.go).

Upstream keeps, per Job, a backoff record in memory: how many pods failed since the last
success and when the last of them finished. `new_record` folds the pods counted in one
sync into it; `remaining` is how long pod creation must still wait: `DEFAULT_BACKOFF`
doubled per failure after the first, capped at `MAX_BACKOFF`, counted from the last
failure. `remaining_for_index` does the same for one index of a Job with
backoffLimitPerIndex, from the failure count annotation of the index's last failed pod.
A pod's finish time is, in order: its containers' latest `finishedAt` (all must have
finished; its sidecars, restartable init containers, count too with the SidecarContainers
gate on, the `sidecars` argument), its Ready=False transition, its deletion time less the grace period, its
creation time. Used by `job_controller.py`; the record is lost with the process, as
upstream's is.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kcm_controllers.job import indexing, podview

DEFAULT_BACKOFF = 10.0  # seconds: the delay after the first failure
MAX_BACKOFF = 360.0  # seconds: the cap the doubling stops at

_EPOCH = dt.datetime(1, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class Record:
    failures_after_last_success: int = 0
    last_failure_time: dt.datetime | None = None


class Store:
    """Backoff records by Job key."""

    def __init__(self) -> None:
        self._records: dict[str, Record] = {}

    def get(self, key: str) -> Record:
        return self._records.get(key, Record())

    def update(self, key: str, record: Record) -> None:
        self._records[key] = record

    def remove(self, key: str) -> None:
        self._records.pop(key, None)

    def retain(self, keep: Callable[[str], bool]) -> None:
        """Forget the records of every key `keep` refuses (its partition moved away)."""
        self._records = {key: record for key, record in self._records.items() if keep(key)}


def _terminated_at(status: podview.ContainerStatus) -> dt.datetime | None:
    terminated = status.state.terminated
    return terminated.finished_at if terminated is not None else None


def _latest(
    previous: dt.datetime | None, statuses: Sequence[podview.ContainerStatus], names: set[str] | None
) -> tuple[dt.datetime | None, bool]:
    """The latest finish among `statuses` (only `names` when given); False when one has not finished."""
    latest = previous
    for status in statuses:
        if names is not None and status.name not in names:
            continue
        at = _terminated_at(status)
        if at is None:
            return None, False
        if latest is None or latest < at:
            latest = at
    return latest, True


def finished_time(pod: podview.JobPodView, *, sidecars: bool = True) -> dt.datetime:
    """When the pod finished, as upstream's getFinishedTime estimates it."""
    at, complete = _latest(None, pod.status.container_statuses, None)
    if complete and sidecars:
        names = {c.name for c in pod.spec.init_containers if c.restart_policy == "Always"}
        at, complete = _latest(at, pod.status.init_container_statuses, names)
    if complete and at is not None:
        return at
    for cond in pod.status.conditions:
        if cond.type == "Ready" and cond.status == "False" and cond.last_transition_time is not None:
            return cond.last_transition_time
    meta = pod.metadata
    if meta.deletion_timestamp is not None:
        return meta.deletion_timestamp - dt.timedelta(seconds=meta.deletion_grace_period_seconds or 0)
    return meta.creation_timestamp or _EPOCH


def new_record(
    old: Record,
    succeeded: Sequence[podview.JobPodView],
    failed: Sequence[podview.JobPodView],
    *,
    sidecars: bool = True,
) -> Record:
    """`old` after the pods newly counted as succeeded and failed in this sync (newBackoffRecord)."""
    if not failed:
        return Record() if succeeded else old
    failed_times = sorted(finished_time(p, sidecars=sidecars) for p in failed)
    if not succeeded:
        return Record(old.failures_after_last_success + len(failed), failed_times[-1])
    last_success = max(finished_time(p, sidecars=sidecars) for p in succeeded)
    after = [t for t in failed_times if t > last_success]
    return Record(len(after), after[-1] if after else None)


def remaining_for_failures(
    now: dt.datetime,
    failures: int,
    last_failure: dt.datetime | None,
    base: float = DEFAULT_BACKOFF,
    cap: float = MAX_BACKOFF,
) -> float:
    """Seconds left before a replacement may be created after `failures` consecutive failures."""
    if failures == 0 or last_failure is None:
        return 0.0
    delay = base
    for _ in range(1, failures):
        delay *= 2
        if delay >= cap:
            delay = cap
            break
    elapsed = (now - last_failure).total_seconds()
    return 0.0 if delay < elapsed else delay - elapsed


def remaining(record: Record, now: dt.datetime) -> float:
    return remaining_for_failures(now, record.failures_after_last_success, record.last_failure_time)


def remaining_for_index(last_failed: podview.JobPodView | None, now: dt.datetime) -> float:
    """Seconds left before the index of `last_failed` (its last failed pod) gets a new pod."""
    if last_failed is None:
        return 0.0
    failures = indexing.absolute_failure_count(last_failed) + 1
    return remaining_for_failures(now, failures, finished_time(last_failed))
