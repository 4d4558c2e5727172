"""The job controller's pure helpers, with upstream's table cases (indexed_job_utils_test.go,
backoff_utils_test.go, job_controller_test.go) as data."""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec
import pytest
from kcm_controllers.job import backoff, indexing, jobview, podview, tracking
from kcm_controllers.job.intervals import Intervals

NOW = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


def pod(
    name: str = "p",
    *,
    index: str | None = None,
    phase: str = "Running",
    annotations: dict[str, str] | None = None,
    finished: list[dt.datetime | None] | None = None,
    ready_false_at: dt.datetime | None = None,
    deleted_at: dt.datetime | None = None,
    grace: int | None = None,
    created: dt.datetime | None = NOW,
    ready: bool = False,
) -> podview.JobPodView:
    ann = dict(annotations or {})
    if index is not None:
        ann[indexing.COMPLETION_INDEX] = index
    statuses: list[dict[str, Any]] = []
    for i, at in enumerate(finished or []):
        state = {"terminated": {"finishedAt": at.isoformat()}} if at else {"running": {}}
        statuses.append({"name": f"c{i}", "state": state})
    conditions: list[dict[str, Any]] = []
    if ready_false_at is not None:
        conditions.append(
            {"type": "Ready", "status": "False", "lastTransitionTime": ready_false_at.isoformat()}
        )
    if ready:
        conditions.append({"type": "Ready", "status": "True"})
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}", "annotations": ann}
    if created is not None:
        meta["creationTimestamp"] = created.isoformat()
    if deleted_at is not None:
        meta["deletionTimestamp"] = deleted_at.isoformat()
    if grace is not None:
        meta["deletionGracePeriodSeconds"] = grace
    raw = {
        "metadata": meta,
        "status": {"phase": phase, "containerStatuses": statuses, "conditions": conditions},
    }
    return msgspec.json.decode(msgspec.json.encode(raw), type=podview.JobPodView)


# --- indexes ------------------------------------------------------------------------------------

COMPLETION_INDEX = {
    "valid": ("3", 3),
    "zero": ("0", 0),
    "signed": ("+4", 4),
    "negative": ("-1", indexing.UNKNOWN),
    "not a number": ("a", indexing.UNKNOWN),
    "space": (" 1", indexing.UNKNOWN),
    "underscore": ("1_0", indexing.UNKNOWN),
}


@pytest.mark.parametrize("case", COMPLETION_INDEX.values(), ids=COMPLETION_INDEX.keys())
def test_completion_index(case: tuple[str, int]) -> None:
    text, want = case
    assert indexing.completion_index({indexing.COMPLETION_INDEX: text}) == want


def test_completion_index_missing() -> None:
    assert indexing.completion_index({}) == indexing.UNKNOWN


FAILURE_COUNT = {"valid": ("3", 3), "negative": ("-1", 0), "too big": ("2147483648", 0), "garbage": ("x", 0)}


@pytest.mark.parametrize("case", FAILURE_COUNT.values(), ids=FAILURE_COUNT.keys())
def test_failure_count_annotation_is_parsed_as_upstream(case: tuple[str, int]) -> None:
    text, want = case
    p = pod(annotations={indexing.INDEX_FAILURE_COUNT: text, indexing.INDEX_IGNORED_FAILURE_COUNT: "2"})
    assert indexing.failure_count(p) == want
    assert indexing.absolute_failure_count(p) == want + 2


# TestFirstPendingIndexes: (active indexes, succeeded text, failed text, count, completions, want)
FIRST_PENDING = {
    "cnt greater than completions": ([], "", "", 5, 3, [0, 1, 2]),
    "cnt less than completions": ([], "", "", 2, 5, [0, 1]),
    "first pods active": ([0, 1], "", "", 3, 3, [2]),
    "last pods active or succeeded": ([6], "4,5", "", 6, 6, [0, 1, 2, 3]),
    "mixed": ([3, 5, 8, 12, 15], "0,2,4,6-7,10-11,14", "", 5, 20, [1, 9, 13, 16, 17]),
    "with failed indexes": ([3, 9], "", "1-2,8", 5, 20, [0, 4, 5, 6, 7]),
    "with succeeded and failed": ([], "0,2", "1,3", 2, 6, [4, 5]),
}


@pytest.mark.parametrize("case", FIRST_PENDING.values(), ids=FIRST_PENDING.keys())
def test_first_pending_indexes(case: tuple[list[int], str, str, int, int, list[int]]) -> None:
    active, succeeded, failed, count, completions, want = case
    taken = (
        Intervals.parse(succeeded, completions)
        .with_indexes(active)
        .merge(Intervals.parse(failed, completions))
    )
    assert indexing.first_pending_indexes(taken, count, completions) == want


def test_duplicated_indexes_keep_one_per_index_and_drop_the_invalid() -> None:
    # TestAppendDuplicatedIndexPodsForRemoval: duplicates, no index and out of range go.
    pods = [
        pod("a0", index="0"),
        pod("b0", index="0", ready=True),
        pod("c1", index="1"),
        pod("d", index=None),
        pod("e5", index="5"),
        pod("f2", index="2"),
        pod("g2", index="2"),
    ]
    rm, left = indexing.duplicated_index_pods(pods, completions=4)
    # Of index 0 the ready pod stays; of the equal pods of index 2 the later one (a stable sort).
    assert [p.metadata.name for p in left] == ["b0", "c1", "g2"]
    assert sorted(p.metadata.name for p in rm) == ["a0", "d", "e5", "f2"]


GENERATE_NAME = {
    "short": ("job", 5, "job-5-"),
    "exactly fits": ("a" * 55, 1, "a" * 55 + "-1-"),
    "cut": ("a" * 60, 123, "a" * 53 + "-123-"),
}


@pytest.mark.parametrize("case", GENERATE_NAME.values(), ids=GENERATE_NAME.keys())
def test_generate_name_with_index(case: tuple[str, int, str]) -> None:
    name, index, want = case
    assert indexing.generate_name(name, index) == want
    assert len(want) <= indexing.MAX_GENERATED_NAME_LENGTH


def test_index_env_is_added_once_to_every_container() -> None:
    spec = {
        "initContainers": [{"name": "i"}],
        "containers": [
            {"name": "a", "env": [{"name": "X", "value": "1"}]},
            {"name": "b", "env": [{"name": "JOB_COMPLETION_INDEX", "value": "mine"}]},
        ],
    }
    out = indexing.with_index_env(spec)
    ref = {"fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/job-completion-index']"}}
    assert out["initContainers"][0]["env"] == [{"name": "JOB_COMPLETION_INDEX", "valueFrom": ref}]
    assert out["containers"][0]["env"][1] == {"name": "JOB_COMPLETION_INDEX", "valueFrom": ref}
    assert out["containers"][1]["env"] == [{"name": "JOB_COMPLETION_INDEX", "value": "mine"}]
    assert spec["containers"][0]["env"] == [{"name": "X", "value": "1"}]  # the template is untouched


# --- backoff ------------------------------------------------------------------------------------

# TestGetRemainingBackoffTime (defaultBackoff 5 s, maxBackoff 15 s): (failures, seconds since, want)
REMAINING = {
    "no failures": (0, 0, 0.0),
    "one failure; no time passed": (1, 0, 5.0),
    "one failure; some time passed": (1, 2, 3.0),
    "two failures; no time passed": (2, 0, 10.0),
    "too many failures; capped": (50, 0, 15.0),
    "backoff over": (2, 20, 0.0),
}


@pytest.mark.parametrize("case", REMAINING.values(), ids=REMAINING.keys())
def test_remaining_backoff(case: tuple[int, int, float]) -> None:
    failures, since, want = case
    last = NOW - dt.timedelta(seconds=since)
    assert backoff.remaining_for_failures(NOW, failures, last, base=5, cap=15) == want


def test_default_backoff_doubles_from_ten_seconds_to_the_cap() -> None:
    delays = [backoff.remaining_for_failures(NOW, n, NOW) for n in range(1, 9)]
    assert delays == [10, 20, 40, 80, 160, 320, backoff.MAX_BACKOFF, backoff.MAX_BACKOFF]


T1, T2, T3 = (NOW - dt.timedelta(seconds=s) for s in (30, 20, 10))


def finished_at(name: str, at: dt.datetime, phase: str) -> podview.JobPodView:
    return pod(name, phase=phase, finished=[at])


# TestNewBackoffRecord: (old record, succeeded finish times, failed finish times, want record)
NEW_RECORD = {
    "no changes": (backoff.Record(1, T1), [], [], backoff.Record(1, T1)),
    "new failures": (backoff.Record(1, T1), [], [T2, T3], backoff.Record(3, T3)),
    "success resets": (backoff.Record(2, T1), [T2], [], backoff.Record()),
    "failures after the last success count": (backoff.Record(5, T1), [T2], [T1, T3], backoff.Record(1, T3)),
    "failures before the last success do not": (backoff.Record(5, T1), [T3], [T1, T2], backoff.Record()),
}


@pytest.mark.parametrize("case", NEW_RECORD.values(), ids=NEW_RECORD.keys())
def test_new_backoff_record(
    case: tuple[backoff.Record, list[dt.datetime], list[dt.datetime], backoff.Record],
) -> None:
    old, succeeded, failed, want = case
    ok = [finished_at(f"s{i}", t, "Succeeded") for i, t in enumerate(succeeded)]
    bad = [finished_at(f"f{i}", t, "Failed") for i, t in enumerate(failed)]
    assert backoff.new_record(old, ok, bad) == want


# TestGetFinishedTime
FINISHED = {
    "latest container finish": (pod(finished=[T1, T2]), T2),
    "a container still running: Ready=False": (pod(finished=[T1, None], ready_false_at=T3), T3),
    "deleted: deletion less grace": (pod(deleted_at=T3, grace=5), T3 - dt.timedelta(seconds=5)),
    "nothing else: creation": (pod(created=T1), T1),
}


@pytest.mark.parametrize("case", FINISHED.values(), ids=FINISHED.keys())
def test_finished_time(case: tuple[podview.JobPodView, dt.datetime]) -> None:
    p, want = case
    assert backoff.finished_time(p) == want


def _with_sidecar(p: podview.JobPodView, sidecar_at: dt.datetime) -> podview.JobPodView:
    raw = msgspec.to_builtins(p)
    raw["spec"] = {"initContainers": [{"name": "side", "restartPolicy": "Always"}, {"name": "setup"}]}
    raw["status"]["initContainerStatuses"] = [
        {"name": "side", "state": {"terminated": {"finishedAt": sidecar_at.isoformat()}}},
        {"name": "setup", "state": {"terminated": {"finishedAt": NOW.isoformat()}}},
    ]
    return msgspec.convert(raw, podview.JobPodView)


@pytest.mark.parametrize(("gate", "want"), [(True, T3), (False, T1)])
def test_a_sidecar_finishes_the_pod_only_with_sidecar_containers_on(gate: bool, want: dt.datetime) -> None:
    # A sidecar outlives the regular containers; a plain init container ended first and never counts.
    p = _with_sidecar(pod(finished=[T1]), T3)
    assert backoff.finished_time(p, sidecars=gate) == want
    assert backoff.new_record(backoff.Record(), [], [p], sidecars=gate) == backoff.Record(1, want)


# --- tracking and status ------------------------------------------------------------------------


def test_uncounted_pods_without_finalizer_move_into_the_counters() -> None:
    counts = {"succeeded": 1, "failed": 2}
    uncounted = {"succeeded": ["a", "b"], "failed": ["c", "d"]}
    assert tracking.clean_uncounted_without_finalizers(counts, uncounted, {"b", "d"})
    assert counts == {"succeeded": 2, "failed": 3}
    assert uncounted == {"succeeded": ["b"], "failed": ["d"]}
    assert not tracking.clean_uncounted_without_finalizers(counts, uncounted, {"b", "d"})


def test_finalizer_expectations_forget_what_was_observed() -> None:
    fe = tracking.FinalizerExpectations()
    fe.expect_removed("ns/j", ["a", "b"])
    fe.removal_observed("ns/j", "a")
    assert fe.expected("ns/j") == {"b"}
    fe.removal_observed("ns/j", "b")
    assert fe.expected("ns/j") == set()


def cond(cond_type: str, status: str, reason: str = "", message: str = "") -> jobview.JobCondition:
    return jobview.JobCondition(cond_type, status, "t0", "t0", reason, message)


# TestEnsureJobConditions: (existing, type, status, reason, message, want (type, status, reason) list, changed)
ENSURE = {
    "append true condition": ([], "Suspended", "True", "r", "m", [("Suspended", "True", "r")], True),
    "false condition is not appended": ([], "Suspended", "False", "r", "m", [], False),
    "update true to false": (
        [cond("Suspended", "True", "r", "m")],
        "Suspended",
        "False",
        "JobResumed",
        "Job resumed",
        [("Suspended", "False", "JobResumed")],
        True,
    ),
    "no change": (
        [cond("Suspended", "True", "r", "m")],
        "Suspended",
        "True",
        "r",
        "m",
        [("Suspended", "True", "r")],
        False,
    ),
}


@pytest.mark.parametrize("case", ENSURE.values(), ids=ENSURE.keys())
def test_ensure_condition(case: tuple[Any, ...]) -> None:
    existing, cond_type, status, reason, message, want, changed = case
    got, did = jobview.ensure_condition(existing, cond_type, status, reason, message, NOW)
    assert [(c.type, c.status, c.reason) for c in got] == want
    assert did is changed
    if changed:
        assert got[-1].last_transition_time == "2026-01-01T12:00:00Z"


def test_is_pod_failed_counts_deleted_pods_unless_only_failed_are_replaced() -> None:
    deleted = pod(deleted_at=NOW)
    job = jobview.JobView()
    assert jobview.is_pod_failed(deleted, job)
    job.spec.pod_replacement_policy = "Failed"
    assert not jobview.is_pod_failed(deleted, job)
    assert jobview.is_pod_failed(pod(phase="Failed"), job)


def test_status_body_removes_what_upstream_omits() -> None:
    body = jobview.status_body(jobview.JobStatus(ready=0, terminating=0))
    assert body["active"] is None and body["succeeded"] is None and body["completionTime"] is None
    assert body["ready"] == 0 and body["terminating"] == 0
    assert body["uncountedTerminatedPods"] == {"succeeded": None, "failed": None}


def test_managed_by() -> None:
    job = jobview.JobView()
    assert jobview.managed_by_external(job) is None
    job.spec.managed_by = jobview.JOB_CONTROLLER_NAME
    assert jobview.managed_by_external(job) is None
    job.spec.managed_by = "example.com/mine"
    assert jobview.managed_by_external(job) == "example.com/mine"
