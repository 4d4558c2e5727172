"""The simulator's annotations for Jobs: per-index exit codes, failing only the first attempts,
and failing with a pod condition (kcm_simulator.podstatus)."""

from __future__ import annotations

from typing import Any

import pytest
from kcm_simulator import podstatus

Obj = dict[str, Any]


def pod(annotations: dict[str, str], owner: str | None = "job-uid") -> Obj:
    meta: Obj = {"name": "p", "uid": "pod-uid", "annotations": annotations}
    if owner is not None:
        meta["ownerReferences"] = [{"kind": "Job", "name": "j", "uid": owner, "controller": True}]
    return {"metadata": meta, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


INDEX = "batch.kubernetes.io/job-completion-index"
BY_INDEX = "sim.kcm.dev/exit-code-by-index"


@pytest.mark.parametrize(
    ("annotations", "code"),
    [
        ({INDEX: "1", BY_INDEX: "1=3"}, 3),
        ({INDEX: "3", BY_INDEX: "0=1,2-4=42"}, 42),
        ({INDEX: "5", BY_INDEX: "0=1,2-4=42"}, None),  # unnamed index: runs until stopped
        ({INDEX: "5", BY_INDEX: "0=1", "sim.kcm.dev/exit-code": "7"}, 7),  # ... or the pod-wide code
        ({INDEX: "0", BY_INDEX: "0=1", "sim.kcm.dev/exit-code": "7"}, 1),  # the map wins
        ({INDEX: "2", BY_INDEX: "x=1,2=oops,2=-1073741510"}, -1073741510),  # bad items skipped
        ({INDEX: "2", BY_INDEX: "0-999999999999=9"}, 9),  # a range is never expanded
        ({BY_INDEX: "0=1"}, None),  # not a Job pod: as before, runs until stopped
        ({INDEX: "-1", BY_INDEX: "0=1"}, None),
        ({"sim.kcm.dev/exit-code": "2"}, 2),
        ({"sim.kcm.dev/exit-code": "two"}, None),
    ],
)
def test_exit_code_by_index(annotations: dict[str, str], code: int | None) -> None:
    assert podstatus.behaviour(pod(annotations)).exit_code == code


@pytest.mark.parametrize(
    ("annotations", "codes"),
    [
        ({"sim.kcm.dev/fail-attempts": "2"}, [1, 1, 0, 0]),
        ({"sim.kcm.dev/fail-attempts": "1", "sim.kcm.dev/exit-code": "42"}, [42, 0, 0, 0]),
        ({"sim.kcm.dev/fail-attempts": "1", "sim.kcm.dev/exit-code": "0"}, [0, 0, 0, 0]),
        (
            {INDEX: "0", BY_INDEX: "1=5", "sim.kcm.dev/exit-code": "0", "sim.kcm.dev/fail-attempts": "1"},
            [0, 0, 0, 0],
        ),
        ({"sim.kcm.dev/fail-attempts": "0", "sim.kcm.dev/exit-code": "3"}, [0, 0, 0, 0]),
        ({INDEX: "1", BY_INDEX: "1=5", "sim.kcm.dev/fail-attempts": "1"}, [5, 0, 0, 0]),
        ({"sim.kcm.dev/fail-attempts": "-1", "sim.kcm.dev/exit-code": "3"}, [3, 3, 3, 3]),  # ignored
    ],
)
def test_fail_attempts(annotations: dict[str, str], codes: list[int]) -> None:
    want = podstatus.behaviour(pod(annotations))
    assert [want.exit_code_for(attempt) for attempt in range(4)] == codes


@pytest.mark.parametrize(
    ("annotations", "before"),
    [
        ({}, None),
        ({"batch.kubernetes.io/job-index-failure-count": "2"}, 2),
        (
            {
                "batch.kubernetes.io/job-index-failure-count": "1",
                "batch.kubernetes.io/job-index-ignored-failure-count": "2",
            },
            3,
        ),
        ({"batch.kubernetes.io/job-index-failure-count": "bad"}, 0),
    ],
)
def test_attempts_before_come_from_the_job_controllers_counts(
    annotations: dict[str, str], before: int | None
) -> None:
    assert podstatus.attempts_before(pod(annotations)) == before


def test_attempt_key_is_the_controller_and_index() -> None:
    assert podstatus.attempt_key(pod({INDEX: "4"})) == ("job-uid", 4)
    assert podstatus.attempt_key(pod({})) == ("job-uid", None)
    assert podstatus.attempt_key(pod({}, owner=None)) == ("pod:pod-uid", None)


@pytest.mark.parametrize(
    ("text", "condition"),
    [
        ("DisruptionTarget", ("DisruptionTarget", "TerminationByKubelet")),
        ("DisruptionTarget:EvictionByEvictionAPI", ("DisruptionTarget", "EvictionByEvictionAPI")),
        ("ConfigIssue", ("ConfigIssue", "")),
        ("", None),
    ],
)
def test_fail_condition_goes_on_failed_pods_only(text: str, condition: tuple[str, str] | None) -> None:
    want = podstatus.behaviour(pod({"sim.kcm.dev/fail-condition": text, "sim.kcm.dev/exit-code": "1"}))
    assert want.fail_condition == condition
    common: dict[str, Any] = {"now": "t", "start_time": "t", "started": "t", "host_ip": "h", "pod_ip": "i"}
    failed = podstatus.finished(pod({}), exit_code=137, restarts=0, condition=want.fail_condition, **common)
    types = [(c["type"], c["status"], c.get("reason", "")) for c in failed["conditions"]]
    if condition is None:
        assert types[0][0] == "PodReadyToStartContainers"
    else:
        assert types[0] == (condition[0], "True", condition[1])
    succeeded = podstatus.finished(pod({}), exit_code=0, restarts=0, condition=want.fail_condition, **common)
    assert succeeded["phase"] == "Succeeded"
    assert all(c["type"] != "DisruptionTarget" for c in succeeded["conditions"])


@pytest.mark.parametrize(
    ("restart_policy", "container", "annotations", "want"),
    [
        ("Never", {"command": ["date"]}, {}, (0, podstatus.COMMAND_RUN_SECONDS)),
        ("OnFailure", {"args": ["-c", "true"]}, {"sim.kcm.dev/run-seconds": "5"}, (0, 5.0)),
        ("Never", {"command": ["false"]}, {"sim.kcm.dev/exit-code": "1"}, (1, 0.0)),  # the annotation wins
        ("Never", {}, {}, (None, 0.0)),  # no command: runs until stopped
        ("Always", {"command": ["nginx"]}, {}, (None, 0.0)),  # restarted pods are servers
    ],
)
def test_a_batch_pod_with_a_command_runs_it_and_succeeds(
    restart_policy: str, container: Obj, annotations: dict[str, str], want: tuple[int | None, float]
) -> None:
    subject = pod(annotations)
    subject["spec"] = {"restartPolicy": restart_policy, "containers": [{"name": "c", **container}]}
    got = podstatus.behaviour(subject)
    assert (got.exit_code, got.run_seconds) == want


def test_stopped_pod_keeps_the_conditions_the_kubelet_does_not_own() -> None:
    evicted = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "EvictionByEvictionAPI",
        "message": "Eviction API: evicting",
    }
    ready = {"type": "Ready", "status": "True"}
    pod: dict[str, Any] = {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Running", "startTime": "2024-01-01T00:00:00Z", "conditions": [ready, evicted]},
    }
    status = podstatus.stopped(pod, now="2024-01-01T00:01:00Z", exit_code=podstatus.KILLED_EXIT_CODE)
    assert status["phase"] == "Failed"
    assert [c for c in status["conditions"] if c["type"] == "DisruptionTarget"] == [evicted]
    assert next(c for c in status["conditions"] if c["type"] == "Ready")["status"] == "False"


def running_pod(ready: bool = True) -> Obj:
    subject = pod({})
    subject["status"] = podstatus.running(
        subject,
        now="2024-01-01T00:00:05Z",
        start_time="2024-01-01T00:00:00Z",
        host_ip="10.0.0.1",
        pod_ip="10.244.0.2",
        ready=ready,
        restarts=2,
    )
    return subject


def test_a_restarted_kubelet_resumes_a_running_pod_as_reported() -> None:
    subject = running_pod()
    got = podstatus.resumed(subject, ready=True)
    assert got is not None
    assert (got.started, got.restarts, got.status) == ("2024-01-01T00:00:05Z", 2, subject["status"])


@pytest.mark.parametrize(
    "change",
    [
        lambda p: p["status"].update(phase="Pending"),
        lambda p: p["status"].pop("podIP"),
        lambda p: p["status"]["containerStatuses"][0].update(state={"waiting": {}}),
        lambda p: p["spec"]["containers"].append({"name": "sidecar", "image": "x"}),
        lambda p: p.pop("status"),
    ],
    ids=["pending", "no-ip", "container-not-running", "container-without-status", "no-status"],
)
def test_a_pod_not_reported_running_starts_anew(change: Any) -> None:
    subject = running_pod()
    change(subject)
    assert podstatus.resumed(subject, ready=True) is None


def test_a_pod_whose_readiness_must_change_starts_anew() -> None:
    # Its ready annotation changed while no kubelet ran: the new run reports it.
    assert podstatus.resumed(running_pod(ready=True), ready=False) is None
    assert podstatus.resumed(running_pod(ready=False), ready=False) is not None


def _deleted(grace: int, **annotations: str) -> dict[str, Any]:
    return {"metadata": {"deletionGracePeriodSeconds": grace, "annotations": annotations}}


@pytest.mark.parametrize(
    ("pod", "prompt", "expected"),
    [
        (_deleted(30), podstatus.STOP_SECONDS, (podstatus.STOP_SECONDS, True)),  # exits on SIGTERM
        (_deleted(30), None, (30.0, False)),  # `kcm sim --ignore-sigterm`: killed at the end
        (_deleted(30, **{podstatus.IGNORE_SIGTERM_ANNOTATION: "true"}), 0.5, (30.0, False)),
        (_deleted(30, **{podstatus.IGNORE_SIGTERM_ANNOTATION: "TRUE"}), 0.5, (30.0, False)),
        (_deleted(30, **{podstatus.IGNORE_SIGTERM_ANNOTATION: "no"}), 0.5, (0.5, True)),
        (_deleted(30, **{podstatus.TERMINATE_SECONDS_ANNOTATION: "3"}), 0.5, (3.0, True)),
        (_deleted(30, **{podstatus.TERMINATE_SECONDS_ANNOTATION: "3"}), None, (3.0, True)),
        (_deleted(2, **{podstatus.TERMINATE_SECONDS_ANNOTATION: "5"}), 0.5, (2.0, False)),
        (_deleted(0), 0.5, (0.0, False)),  # no grace: nothing to wait for, killed at once
        (_deleted(30, **{podstatus.TERMINATE_SECONDS_ANNOTATION: "x"}), 0.5, (0.5, True)),
    ],
)
def test_stop_after(pod: dict[str, Any], prompt: float | None, expected: tuple[float, bool]) -> None:
    assert podstatus.stop_after(pod, prompt) == expected


def test_a_container_killed_for_a_changed_definition_has_the_pods_grace_period() -> None:
    running: dict[str, Any] = {"metadata": {}, "spec": {"containers": [{"name": "c"}]}}
    assert podstatus.kill_grace(running) == podstatus.DEFAULT_GRACE_SECONDS == 30
    running["spec"]["terminationGracePeriodSeconds"] = 5
    assert podstatus.kill_grace(running) == 5
    # Not being deleted, the pod's own grace period counts, not a deletion's.
    assert podstatus.stop_after(running, 0.5, podstatus.kill_grace(running)) == (0.5, True)
    running["metadata"]["annotations"] = {podstatus.IGNORE_SIGTERM_ANNOTATION: "true"}
    assert podstatus.stop_after(running, 0.5, podstatus.kill_grace(running)) == (5.0, False)
