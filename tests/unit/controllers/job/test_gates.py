"""The Job controller with upstream's Job feature gates off (kcm_controllers.job.gates)."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import msgspec
import pytest
from kcm_controllers.job import gates as job_gates
from kcm_controllers.job import jobview, pod_failure_policy, podview
from kcm_shared.testing import recorders

from tests.support.job import NS, JobServer, controller, finished_pod, new_job

KEY = f"{NS}/job"
ALL_OFF = job_gates.Gates(
    managed_by=False, pod_replacement_policy=False, success_policy=False, backoff_limit_per_index=False
)


def test_the_gates_are_read_from_feature_gates() -> None:
    assert job_gates.Gates.from_args(None) == job_gates.DEFAULTS == job_gates.Gates()
    args = argparse.Namespace(
        feature_gates={"JobSuccessPolicy": False, "AllBeta": False, "JobManagedBy": True}
    )
    assert job_gates.Gates.from_args(args) == job_gates.Gates(
        managed_by=True,
        pod_replacement_policy=False,
        success_policy=False,
        backoff_limit_per_index=False,
        sidecar_containers=False,
    )


def _view(spec: dict[str, Any]) -> jobview.JobView:
    job = new_job(2, indexed=True)
    job["spec"] |= spec
    return msgspec.json.decode(msgspec.json.encode(job), type=jobview.JobView)


def test_a_gate_that_is_off_hides_its_fields() -> None:
    job = _view(
        {
            "podReplacementPolicy": "Failed",
            "successPolicy": {"rules": [{"succeededCount": 1}]},
            "backoffLimitPerIndex": 1,
            "maxFailedIndexes": 1,
        }
    )
    assert job_gates.DEFAULTS.view(job) is job
    hidden = ALL_OFF.view(job).spec
    assert (hidden.pod_replacement_policy, hidden.success_policy) == (None, None)
    assert (hidden.backoff_limit_per_index, hidden.max_failed_indexes) == (None, None)
    assert job.spec.backoff_limit_per_index == 1  # the cached Job is left as it was


def test_with_backoff_limit_per_index_off_a_fail_index_rule_never_matches() -> None:
    rules = [
        {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [3]}},
        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3]}},
    ]
    job = job_gates.Gates(backoff_limit_per_index=False).view(_view({"podFailurePolicy": {"rules": rules}}))
    pod = finished_pod(0, "Failed", 0)
    pod["status"]["containerStatuses"] = [{"name": "c", "state": {"terminated": {"exitCode": 3}}}]
    view = msgspec.json.decode(msgspec.json.encode(pod), type=podview.JobPodView)
    found = pod_failure_policy.match(job.spec.pod_failure_policy, view)
    # upstream falls through to the next rule, which keeps its own index in the message.
    assert found.action == "FailJob"
    assert found.message is not None and found.message.endswith("matching FailJob rule at index 1")


def _terminating_pod() -> dict[str, Any]:
    pod = finished_pod(0, "Running", None)
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:05Z"
    return pod


@pytest.mark.parametrize(
    ("gates", "written"), [(job_gates.DEFAULTS, 1), (job_gates.Gates(pod_replacement_policy=False), None)]
)
def test_status_terminating_is_written_only_with_pod_replacement_policy_on(
    gates: job_gates.Gates, written: int | None
) -> None:
    job = new_job(1, indexed=False)
    job["status"]["terminating"] = 7  # a value left from before goes either way
    server = JobServer(job, [_terminating_pod()])
    asyncio.run(controller(server, recorders.RecordingEventRecorder(), gates=gates).sync(KEY))
    assert server.job["status"].get("terminating") == written


def test_with_pod_replacement_policy_off_a_terminating_pod_counts_as_failed() -> None:
    # podReplacementPolicy: Failed waits for a terminating pod to fail; with the gate off the
    # policy is not read, and a deleted pod that has not succeeded counts as failed at once.
    job = new_job(1, indexed=False)
    job["spec"]["podReplacementPolicy"] = "Failed"
    for gates, failed in ((job_gates.DEFAULTS, None), (job_gates.Gates(pod_replacement_policy=False), 1)):
        server = JobServer(job, [_terminating_pod()])
        asyncio.run(controller(server, recorders.RecordingEventRecorder(), gates=gates).sync(KEY))
        assert server.job["status"].get("failed") == failed, gates


def _succeeded_index_0() -> JobServer:
    job = new_job(2, indexed=True)
    job["spec"]["successPolicy"] = {"rules": [{"succeededIndexes": "0"}]}
    return JobServer(job, [finished_pod(0, "Succeeded", 0)])


def test_with_success_policy_off_the_policy_is_ignored() -> None:
    server = _succeeded_index_0()
    asyncio.run(controller(server, recorders.RecordingEventRecorder()).sync(KEY))
    assert {c["reason"] for c in server.job["status"]["conditions"]} == {"SuccessPolicy"}
    server, fake = _succeeded_index_0(), recorders.RecordingPodControl()
    gates = job_gates.Gates(success_policy=False)
    asyncio.run(controller(server, recorders.RecordingEventRecorder(), fake, gates=gates).sync(KEY))
    assert "conditions" not in server.job["status"] and len(fake.templates) == 1  # index 1 still runs


def test_with_success_policy_off_the_completions_condition_has_no_reason() -> None:
    # upstream's newSuccessCondition: CompletionsReached only with JobSuccessPolicy on.
    job = new_job(1, indexed=False)
    server = JobServer(job, [finished_pod(0, "Succeeded", None)])
    gates = job_gates.Gates(success_policy=False)
    asyncio.run(controller(server, recorders.RecordingEventRecorder(), gates=gates).sync(KEY))
    conditions = server.job["status"]["conditions"]
    assert conditions[0]["type"] == jobview.SUCCESS_CRITERIA_MET
    assert not any(c.get("reason") or c.get("message") for c in conditions)


def test_with_backoff_limit_per_index_off_the_global_backoff_limit_counts() -> None:
    job = new_job(2, indexed=True)
    job["spec"] |= {"backoffLimitPerIndex": 0, "backoffLimit": 6}
    failed = finished_pod(0, "Failed", 0)
    server = JobServer(job, [failed])
    asyncio.run(controller(server, recorders.RecordingEventRecorder()).sync(KEY))
    assert server.job["status"]["failedIndexes"] == "0"
    server = JobServer(job, [failed])
    gates = job_gates.Gates(backoff_limit_per_index=False)
    asyncio.run(controller(server, recorders.RecordingEventRecorder(), gates=gates).sync(KEY))
    status = server.job["status"]
    assert status.get("failedIndexes") is None and status["failed"] == 1 and "conditions" not in status
