"""podFailurePolicy matching, with upstream's pod_failure_policy_test.go cases as data."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from kcm_controllers.job import pod_failure_policy
from kcm_controllers.job.podview import JobPodView
from kcm_shared.controllerutil import podranking

Doc = dict[str, Any]


def exit_codes(action: str, operator: str, values: list[int], container: str | None = None) -> Doc:
    req: Doc = {"operator": operator, "values": values}
    if container is not None:
        req["containerName"] = container
    return {"action": action, "onExitCodes": req}


def on_condition(action: str, status: str = "True", type_: str = "DisruptionTarget") -> Doc:
    return {"action": action, "onPodConditions": [{"type": type_, "status": status}]}


def terminated(code: int, name: str = "") -> Doc:
    return {"name": name, "state": {"terminated": {"exitCode": code}}}


def failed_pod(
    containers: list[Doc] | None = None, init: list[Doc] | None = None, conditions: list[Doc] | None = None
) -> Doc:
    return {
        "metadata": {"namespace": "default", "name": "mypod"},
        "status": {
            "phase": "Failed",
            "containerStatuses": containers or [],
            "initContainerStatuses": init or [],
            "conditions": conditions or [],
        },
    }


def disruption(status: str) -> list[Doc]:
    return [{"type": "DisruptionTarget", "status": status}]


FAIL_JOB_MSG = "Container main-container for pod default/mypod failed with exit code {} matching FailJob rule at index {}"

# name: (rules or None for no policy, pod, want message, want count_failed, want action)
CASES: dict[str, tuple[list[Doc] | None, Doc, str | None, bool, str | None]] = {
    "unknown action for rule matching by exit codes - skip rule with unknown action": (
        [exit_codes("UnknownAction", "In", [1, 2]), exit_codes("FailJob", "In", [2, 3])],
        failed_pod([terminated(2, "main-container")]),
        FAIL_JOB_MSG.format(2, 1),
        True,
        "FailJob",
    ),
    "unknown action for rule matching by pod conditions - skip rule with unknown action": (
        [on_condition("UnkonwnAction"), on_condition("Ignore")],
        failed_pod(conditions=disruption("True")),
        None,
        False,
        "Ignore",
    ),
    "unknown operator - rule with unknown action is skipped for onExitCodes": (
        [exit_codes("Ignore", "UnknownOperator", [1, 2]), exit_codes("FailJob", "In", [2, 3])],
        failed_pod([terminated(2, "main-container")]),
        FAIL_JOB_MSG.format(2, 1),
        True,
        "FailJob",
    ),
    "no policy rules": (None, failed_pod([terminated(2)]), None, True, None),
    "ignore rule matched for exit codes": (
        [exit_codes("Ignore", "In", [1, 2, 3])],
        failed_pod([terminated(2)]),
        None,
        False,
        "Ignore",
    ),
    "ignore rule matched on negative exit codes - needed for Windows support": (
        [exit_codes("Ignore", "In", [-1073741676, -1073741510])],
        failed_pod([terminated(-1073741510)]),
        None,
        False,
        "Ignore",
    ),
    "FailJob rule matched for exit codes": (
        [exit_codes("FailJob", "In", [1, 2, 3])],
        failed_pod([terminated(2, "main-container")]),
        FAIL_JOB_MSG.format(2, 0),
        True,
        "FailJob",
    ),
    "successful containers are skipped by the rules": (
        [exit_codes("FailJob", "NotIn", [111])],
        failed_pod(
            [terminated(111, "main-container"), terminated(0, "suppport-container")],
            init=[terminated(0, "init-container")],
        ),
        None,
        True,
        None,
    ),
    "FailIndex rule matched for exit codes": (
        [exit_codes("FailIndex", "In", [1, 2, 3])],
        failed_pod([terminated(2)]),
        None,
        True,
        "FailIndex",
    ),
    "pod failure policy with NotIn operator and value 0": (
        [exit_codes("FailJob", "NotIn", [0])],
        failed_pod([terminated(1, "main-container"), terminated(0, "suppport-container")]),
        FAIL_JOB_MSG.format(1, 0),
        True,
        "FailJob",
    ),
    "second jobfail rule matched for exit codes": (
        [exit_codes("Count", "In", [1, 2, 3]), exit_codes("FailJob", "In", [4, 5, 6])],
        failed_pod([terminated(6, "main-container")]),
        FAIL_JOB_MSG.format(6, 1),
        True,
        "FailJob",
    ),
    "count rule matched for exit codes": (
        [exit_codes("Count", "In", [1, 2, 3])],
        failed_pod([{"name": "foo"}, terminated(2, "bar")]),
        None,
        True,
        "Count",
    ),
    "FailIndex rule matched for pod conditions": (
        [on_condition("FailIndex")],
        failed_pod(conditions=disruption("True")),
        None,
        True,
        "FailIndex",
    ),
    "ignore rule matched for pod conditions": (
        [on_condition("Ignore")],
        failed_pod(conditions=disruption("True")),
        None,
        False,
        "Ignore",
    ),
    "ignore rule matches by the status=False": (
        [on_condition("Ignore", "False")],
        failed_pod(conditions=disruption("False")),
        None,
        False,
        "Ignore",
    ),
    "ignore rule matches by the status=Unknown": (
        [on_condition("Ignore", "Unknown")],
        failed_pod(conditions=disruption("Unknown")),
        None,
        False,
        "Ignore",
    ),
    "ignore rule does not match when status for pattern is False, but actual True": (
        [on_condition("Ignore", "False")],
        failed_pod(conditions=disruption("True")),
        None,
        True,
        None,
    ),
    "ignore rule does not match when status for pattern is True, but actual False": (
        [on_condition("Ignore", "True")],
        failed_pod(conditions=disruption("False")),
        None,
        True,
        None,
    ),
    "job fail rule matched for pod conditions": (
        [on_condition("FailJob")],
        failed_pod(conditions=disruption("True")),
        "Pod default/mypod has condition DisruptionTarget matching FailJob rule at index 0",
        True,
        "FailJob",
    ),
    "count rule matched for pod conditions": (
        [on_condition("Count")],
        failed_pod(conditions=disruption("True")),
        None,
        True,
        "Count",
    ),
    "no rule matched": (
        [
            exit_codes("Count", "NotIn", [8]),
            exit_codes("Ignore", "In", [1, 2, 3]),
            exit_codes("FailJob", "NotIn", [5, 6, 7]),
            on_condition("Count", type_="ResourceLimitExceeded"),
            on_condition("Ignore"),
        ],
        failed_pod([terminated(32)]),
        None,
        True,
        "Count",
    ),
    # Not upstream's table: containerName narrows the match, init containers come second.
    "containerName skips other containers": (
        [exit_codes("FailJob", "In", [3], container="sidecar")],
        failed_pod([terminated(3, "main-container")], init=[terminated(3, "sidecar")]),
        "Container sidecar for pod default/mypod failed with exit code 3 matching FailJob rule at index 0",
        True,
        "FailJob",
    ),
    "a running container has no exit code": (
        [exit_codes("FailJob", "NotIn", [0])],
        failed_pod([{"name": "main-container", "state": {"running": {}}}]),
        None,
        True,
        None,
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_match(case: tuple[list[Doc] | None, Doc, str | None, bool, str | None]) -> None:
    rules, pod, want_message, want_count, want_action = case
    policy = None if rules is None else msgspec.convert({"rules": rules}, pod_failure_policy.PodFailurePolicy)
    got = pod_failure_policy.match(policy, msgspec.convert(pod, JobPodView))
    assert got == pod_failure_policy.Match(message=want_message, count_failed=want_count, action=want_action)


def test_job_pod_view_is_a_ranking_pod_view() -> None:
    pod = msgspec.json.decode(
        b'{"metadata":{"name":"p"},"spec":{"nodeName":"n","restartPolicy":"Never","containers":[{"name":"c"}]},'
        b'"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True","reason":"r"}],'
        b'"containerStatuses":[{"name":"c","restartCount":2,"lastState":{"terminated":'
        b'{"exitCode":1,"finishedAt":"2026-01-01T00:00:00Z"}}}]}}',
        type=JobPodView,
    )
    assert podranking.is_pod_active(pod) and podranking.is_pod_ready(pod)
    assert podranking.max_restarts(pod) == (2, 0)
    assert pod.spec.restart_policy == "Never" and pod.spec.containers[0].name == "c"
    terminated = pod.status.container_statuses[0].last_state.terminated
    assert terminated is not None and terminated.exit_code == 1 and terminated.finished_at is not None
