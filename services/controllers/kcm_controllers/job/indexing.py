"""Completion indexes of Indexed Jobs (upstream indexed_job_utils.go).

Pods of an Indexed Job carry their index in the `batch.kubernetes.io/job-completion-index`
annotation and label, are named `<job>-<index>-<random>` and have the hostname
`<job>-<index>`; every container gets `JOB_COMPLETION_INDEX` from the label. This module
reads and writes those, finds the lowest indexes still to run (`first_pending_indexes`),
the surplus pods of an index run twice or of an index out of range
(`active_pods_for_removal`), the succeeded and failed indexes (`succeeded_indexes`,
`failed_indexes`, in `intervals.Intervals`), and for backoffLimitPerIndex the per-index
failure counts carried from a failed pod to its replacement in the
`batch.kubernetes.io/job-index-failure-count` and `...-ignored-failure-count` annotations.
Values of those annotations are hostile input: anything but a non-negative int32 counts as
absent, as upstream parses them. Used by `job_controller.py` and `backoff.py`.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kcm_shared.controllerutil import podranking

from kcm_controllers.job import intervals, jobview, pod_failure_policy, podview, tracking

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
INDEX_FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"
INDEX_IGNORED_FAILURE_COUNT = "batch.kubernetes.io/job-index-ignored-failure-count"
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"
UNKNOWN = -1
MAX_GENERATED_NAME_LENGTH = 63 - 5  # the API server appends 5 random characters
_MAX_INT32 = 2**31 - 1

_ATOI = re.compile(r"[+-]?[0-9]+")  # what Go's strconv.Atoi takes (no spaces, no underscores)


def _atoi(text: str) -> int | None:
    if not _ATOI.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def completion_index(annotations: dict[str, str]) -> int:
    """The pod's index, or UNKNOWN when the annotation is missing, unparsable or negative."""
    text = annotations.get(COMPLETION_INDEX)
    value = None if text is None else _atoi(text)
    return UNKNOWN if value is None or value < 0 else value


def _int32(text: str | None) -> int:
    value = None if text is None else _atoi(text)
    return value if value is not None and 0 <= value <= _MAX_INT32 else 0


def failure_count(pod: podview.JobPodView) -> int:
    return _int32(pod.metadata.annotations.get(INDEX_FAILURE_COUNT))


def ignored_failure_count(pod: podview.JobPodView) -> int:
    return _int32(pod.metadata.annotations.get(INDEX_IGNORED_FAILURE_COUNT))


def absolute_failure_count(pod: podview.JobPodView) -> int:
    return failure_count(pod) + ignored_failure_count(pod)


def generate_name(job_name: str, index: int) -> str:
    """`<job>-<index>-`, with the job name cut so the generated name fits (podGenerateNameWithIndex)."""
    suffix = f"-{index}-"
    prefix = job_name + suffix
    if len(prefix) > MAX_GENERATED_NAME_LENGTH:
        prefix = prefix[: MAX_GENERATED_NAME_LENGTH - len(suffix)] + suffix
    return prefix


def with_index_env(pod_spec: dict[str, Any]) -> dict[str, Any]:
    """A copy of `pod_spec` whose init and regular containers read JOB_COMPLETION_INDEX from the label."""
    spec = copy.deepcopy(pod_spec)
    field_path = f"metadata.labels['{COMPLETION_INDEX}']"
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            if not isinstance(container, dict):
                continue
            env = container.setdefault("env", [])
            if any(isinstance(v, dict) and v.get("name") == COMPLETION_INDEX_ENV for v in env):
                continue
            env.append({"name": COMPLETION_INDEX_ENV, "valueFrom": {"fieldRef": {"fieldPath": field_path}}})
    return spec


def indexes_of(pods: Iterable[podview.JobPodView]) -> set[int]:
    return {ix for ix in (completion_index(p.metadata.annotations) for p in pods) if ix != UNKNOWN}


def first_pending_indexes(non_pending: intervals.Intervals, count: int, completions: int) -> list[int]:
    """The `count` lowest indexes below `completions` not in `non_pending`."""
    result: list[int] = []
    candidate = 0
    while candidate < completions and len(result) < count:
        if candidate not in non_pending:
            result.append(candidate)
        candidate += 1
    return result


def _by_index(pods: Sequence[podview.JobPodView]) -> list[podview.JobPodView]:
    return sorted(pods, key=lambda p: completion_index(p.metadata.annotations))


def duplicated_index_pods(
    pods: Sequence[podview.JobPodView], completions: int
) -> tuple[list[podview.JobPodView], list[podview.JobPodView]]:
    """(to remove, to keep): of each index all pods but the best to keep, and every pod
    without an index or with one out of range (appendDuplicatedIndexPodsForRemoval)."""
    rm: list[podview.JobPodView] = []
    left: list[podview.JobPodView] = []
    groups: dict[int, list[podview.JobPodView]] = {}
    for pod in _by_index(pods):
        ix = completion_index(pod.metadata.annotations)
        if ix == UNKNOWN or ix >= completions:
            rm.append(pod)
        else:
            groups.setdefault(ix, []).append(pod)
    for ix in sorted(groups):
        group = groups[ix]
        if len(group) > 1:
            group = podranking.sort_active(group)  # type: ignore[assignment]
        rm.extend(group[:-1])
        left.append(group[-1])
    return rm, left


def active_pods_for_removal(
    job: jobview.JobView, pods: Sequence[podview.JobPodView], rm_at_least: int
) -> list[podview.JobPodView]:
    """Pods to delete: duplicates for Indexed Jobs, then the least advanced ones until
    `rm_at_least` (activePodsForRemoval)."""
    if jobview.is_indexed(job):
        rm, left = duplicated_index_pods(pods, job.spec.completions or 0)
    else:
        rm, left = [], list(pods)
    if len(rm) < rm_at_least:
        ordered = podranking.sort_active(left)
        rm.extend(ordered[: rm_at_least - len(rm)])  # type: ignore[arg-type]
    return rm


def _uncounted_indexes(
    job: jobview.JobView, pods: Sequence[podview.JobPodView], counts: Callable[[podview.JobPodView], bool]
) -> list[int]:
    """The valid indexes, ascending, of pods still holding the finalizer (not counted yet) that `counts` takes."""
    completions = job.spec.completions or 0
    found = set()
    for pod in pods:
        ix = completion_index(pod.metadata.annotations)
        if ix != UNKNOWN and ix < completions and tracking.has_tracking_finalizer(pod) and counts(pod):
            found.add(ix)
    return sorted(found)


def succeeded_indexes(
    job: jobview.JobView, pods: Sequence[podview.JobPodView]
) -> tuple[intervals.Intervals, intervals.Intervals]:
    """(indexes in status.completedIndexes, those plus the indexes of succeeded pods not yet counted)."""
    previous = intervals.Intervals.parse(job.status.completed_indexes, job.spec.completions or 0)
    new = _uncounted_indexes(job, pods, lambda p: p.status.phase == "Succeeded")
    return previous, previous.with_indexes(new)


def is_index_failed(job: jobview.JobView, pod: podview.JobPodView) -> bool:
    """Whether this failed pod fails its whole index: FailIndex, or the index is out of retries."""
    counted = False
    if jobview.is_pod_failed(pod, job):
        if job.spec.pod_failure_policy is not None:
            match = pod_failure_policy.match(job.spec.pod_failure_policy, pod)
            if match.action == "FailIndex":
                return True
            counted = match.count_failed
        else:
            counted = True
    return counted and failure_count(pod) >= (job.spec.backoff_limit_per_index or 0)


def failed_indexes(job: jobview.JobView, pods: Sequence[podview.JobPodView]) -> intervals.Intervals:
    """status.failedIndexes plus the indexes failed since it was written (calculateFailedIndexes)."""
    previous = intervals.Intervals.parse(job.status.failed_indexes, job.spec.completions or 0)
    return previous.with_indexes(_uncounted_indexes(job, pods, lambda p: is_index_failed(job, p)))


def new_failure_counts(job: jobview.JobView, replaced: podview.JobPodView | None) -> tuple[int, int]:
    """(failure count, ignored failure count) for the pod that replaces `replaced` in its index."""
    if replaced is None:
        return 0, 0
    count, ignored = failure_count(replaced), ignored_failure_count(replaced)
    if (
        job.spec.pod_failure_policy is not None
        and not pod_failure_policy.match(job.spec.pod_failure_policy, replaced).count_failed
    ):
        ignored += 1
    else:
        count += 1
    return count, ignored
