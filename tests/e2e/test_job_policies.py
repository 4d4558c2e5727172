"""A Job's failure and success policies end to end: `kcm dev --controllers job`, kubectl and the client.

One shared stack, a namespace per test. The simulator fails chosen pods: `sim.kcm.dev/exit-code`
(every pod), `exit-code-by-index` (per completion index), `fail-attempts` (only the first
attempts, so retries succeed) and `fail-condition` (a failed pod carrying DisruptionTarget).
Covers podFailurePolicy FailJob, Ignore and Count on exit codes and on a pod condition,
FailIndex, backoffLimitPerIndex with maxFailedIndexes (failedIndexes, MaxFailedIndexesExceeded),
successPolicy (SuccessCriteriaMet, then Complete), and podReplacementPolicy (with Failed a
terminating pod is replaced only once it is gone, with TerminatingOrFailed while it still
terminates; a long `terminationGracePeriodSeconds` keeps it terminating). Retries wait out
upstream's 10 s pod failure backoff, so the Jobs that retry run side by side within one test.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from tests.conftest import wait_for
from tests.e2e import devstack, jobs

stack = devstack.stack_fixture("--controllers", "job")
_namespaces = iter(range(1000))
QUICK_KILL = {"terminationGracePeriodSeconds": 0}


@pytest.fixture
def ns(stack: devstack.DevStack) -> Iterator[str]:
    name = f"policy-{next(_namespaces)}"
    stack.kubectl("create", "namespace", name)
    yield name


def create_job(
    stack: devstack.DevStack, ns: str, name: str, spec: dict[str, Any], annotations: dict[str, str]
) -> None:
    # Pods the controller deletes are killed (exit 137) at once, not after 30 s.
    jobs.apply(stack, jobs.job_yaml(ns, name, spec=spec, annotations=annotations, pod_spec=QUICK_KILL))


def finished(stack: devstack.DevStack, ns: str, name: str, cond: str) -> dict[str, Any]:
    """The Job once it has condition `cond` (kubectl wait, as a user would)."""
    return jobs.wait_condition(stack, ns, name, cond, timeout=45)


def conditions(job: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {
        c["type"]: (c["status"], c.get("reason", ""), c.get("message", ""))
        for c in job["status"]["conditions"]
    }


_clients: dict[int, kubernetes.client.CoreV1Api] = {}


def pods(stack: devstack.DevStack, ns: str, job: str) -> list[Any]:
    """The Job's pods, through the official client."""
    core = _clients.setdefault(id(stack), kubernetes.client.CoreV1Api(stack.api()))
    return list(core.list_namespaced_pod(ns, label_selector=f"batch.kubernetes.io/job-name={job}").items)


def rules(*items: dict[str, Any]) -> dict[str, Any]:
    return {"podFailurePolicy": {"rules": list(items)}}


def on_exit_codes(action: str, *codes: int, operator: str = "In") -> dict[str, Any]:
    return {"action": action, "onExitCodes": {"operator": operator, "values": list(codes)}}


def on_disruption(action: str) -> dict[str, Any]:
    return {"action": action, "onPodConditions": [{"type": "DisruptionTarget"}]}


DISRUPTED = {"sim.kcm.dev/exit-code": "137", "sim.kcm.dev/fail-condition": "DisruptionTarget"}


def test_fail_job_on_an_exit_code_and_on_a_pod_condition(stack: devstack.DevStack, ns: str) -> None:
    # backoffLimit 6 would allow retries: only the rule can fail the Job on the first failure.
    create_job(
        stack,
        ns,
        "by-code",
        {"backoffLimit": 6, **rules(on_exit_codes("FailJob", 42))},
        {"sim.kcm.dev/exit-code": "42"},
    )
    create_job(stack, ns, "by-condition", {"backoffLimit": 6, **rules(on_disruption("FailJob"))}, DISRUPTED)
    by_code = finished(stack, ns, "by-code", "failed")
    (pod,) = pods(stack, ns, "by-code")
    message = f"Container c for pod {ns}/{pod.metadata.name} failed with exit code 42 matching FailJob rule at index 0"
    assert conditions(by_code)["FailureTarget"] == ("True", "PodFailurePolicy", message)
    assert conditions(by_code)["Failed"] == ("True", "PodFailurePolicy", message)
    assert by_code["status"]["failed"] == 1
    by_condition = finished(stack, ns, "by-condition", "failed")
    (pod,) = pods(stack, ns, "by-condition")
    message = f"Pod {ns}/{pod.metadata.name} has condition DisruptionTarget matching FailJob rule at index 0"
    assert conditions(by_condition)["Failed"] == ("True", "PodFailurePolicy", message)


def test_count_rule_counts_towards_the_backoff_limit(stack: devstack.DevStack, ns: str) -> None:
    # The first matching rule decides: Count, though the Ignore after it matches too.
    policy = rules(
        on_exit_codes("Ignore", 1), on_exit_codes("Count", 3), on_exit_codes("Ignore", 0, operator="NotIn")
    )
    create_job(stack, ns, "counted", {"backoffLimit": 0, **policy}, {"sim.kcm.dev/exit-code": "3"})
    job = finished(stack, ns, "counted", "failed")
    assert conditions(job)["Failed"][:2] == ("True", "BackoffLimitExceeded")
    assert job["status"]["failed"] == 1


def test_ignored_failures_are_retried_without_counting(stack: devstack.DevStack, ns: str) -> None:
    once = {"sim.kcm.dev/fail-attempts": "1"}
    # backoffLimit 0: one counted failure would fail the Job; both run side by side.
    create_job(
        stack,
        ns,
        "ignore-code",
        {"backoffLimit": 0, **rules(on_exit_codes("Ignore", 42))},
        {**once, "sim.kcm.dev/exit-code": "42"},
    )
    create_job(
        stack,
        ns,
        "ignore-disruption",
        {"backoffLimit": 0, **rules(on_disruption("Ignore"))},
        {**once, **DISRUPTED},
    )
    for name in ("ignore-code", "ignore-disruption"):
        job = finished(stack, ns, name, "complete")
        assert job["status"]["succeeded"] == 1 and not job["status"].get("failed"), job["status"]
        phases = sorted(p.status.phase for p in pods(stack, ns, name))
        assert phases == ["Failed", "Succeeded"], phases


def test_fail_index_fails_only_that_index(stack: devstack.DevStack, ns: str) -> None:
    spec = {
        "completionMode": "Indexed",
        "completions": 3,
        "parallelism": 3,
        "backoffLimitPerIndex": 2,
        **rules(on_exit_codes("FailIndex", 42)),
    }
    create_job(
        stack,
        ns,
        "fail-index",
        spec,
        {"sim.kcm.dev/exit-code-by-index": "1=42", "sim.kcm.dev/exit-code": "0"},
    )
    job = finished(stack, ns, "fail-index", "failed")
    status = job["status"]
    # backoffLimitPerIndex 2 would retry index 1: FailIndex ends it on its first failure.
    assert (status["failedIndexes"], status["completedIndexes"], status["failed"]) == ("1", "0,2", 1)
    assert conditions(job)["Failed"] == ("True", "FailedIndexes", "Job has failed indexes")
    assert len(pods(stack, ns, "fail-index")) == 3


def test_backoff_limit_per_index_and_max_failed_indexes(stack: devstack.DevStack, ns: str) -> None:
    retried = {"completionMode": "Indexed", "completions": 2, "parallelism": 2, "backoffLimitPerIndex": 1}
    create_job(
        stack,
        ns,
        "retried",
        retried,
        {
            "sim.kcm.dev/exit-code-by-index": "1=5",
            "sim.kcm.dev/exit-code": "0",
            "sim.kcm.dev/fail-attempts": "1",
        },
    )
    # Every index fails; the second failed index is one more than maxFailedIndexes allows.
    capped = {
        "completionMode": "Indexed",
        "completions": 3,
        "parallelism": 3,
        "backoffLimitPerIndex": 0,
        "maxFailedIndexes": 1,
    }
    create_job(stack, ns, "capped", capped, {"sim.kcm.dev/exit-code": "1", "sim.kcm.dev/run-seconds": "1"})
    job = finished(stack, ns, "capped", "failed")
    assert conditions(job)["Failed"] == (
        "True",
        "MaxFailedIndexesExceeded",
        "Job has exceeded the specified maximal number of failed indexes",
    )
    # A pod still running when the Job fails is deleted and its index counted failed too, as upstream.
    assert job["status"]["failedIndexes"] == "0-2" and not job["status"].get("completedIndexes")
    # Index 1 failed once, within its limit of 1, and its retry (counted on the pod) succeeded.
    job = finished(stack, ns, "retried", "complete")
    assert (job["status"]["completedIndexes"], job["status"]["failed"]) == ("0,1", 1)
    assert job["status"].get("failedIndexes", "") == ""
    counts = sorted(
        (
            p.metadata.annotations["batch.kubernetes.io/job-completion-index"],
            p.metadata.annotations["batch.kubernetes.io/job-index-failure-count"],
        )
        for p in pods(stack, ns, "retried")
    )
    assert counts == [("0", "0"), ("1", "0"), ("1", "1")]


def test_success_policy_meets_its_criteria_then_completes(stack: devstack.DevStack, ns: str) -> None:
    spec = {
        "completionMode": "Indexed",
        "completions": 3,
        "parallelism": 3,
        "successPolicy": {"rules": [{"succeededIndexes": "0"}]},
    }
    # Index 0 succeeds; 1 and 2 run until the controller deletes them.
    create_job(stack, ns, "leader", spec, {"sim.kcm.dev/exit-code-by-index": "0=0"})
    job = finished(stack, ns, "leader", "complete")
    conds = conditions(job)
    assert conds["SuccessCriteriaMet"] == ("True", "SuccessPolicy", "Matched rules at index 0")
    assert conds["Complete"] == ("True", "SuccessPolicy", "Matched rules at index 0")
    types = [c["type"] for c in job["status"]["conditions"]]
    assert types.index("SuccessCriteriaMet") < types.index("Complete")
    assert (job["status"]["completedIndexes"], job["status"]["succeeded"]) == ("0", 1)
    assert not job["status"].get("active") and not job["status"].get("terminating")
    wait_for(
        lambda: all(p.status.phase != "Running" for p in pods(stack, ns, "leader")),
        20,
        what="running pods gone",
    )


def pod_state(stack: devstack.DevStack, ns: str, job: str) -> list[tuple[str, bool, str]]:
    """(name, terminating, phase) of each of the Job's pods, through kubectl."""
    return [
        (p["metadata"]["name"], "deletionTimestamp" in p["metadata"], p["status"].get("phase", ""))
        for p in jobs.pods_of(stack, ns, job)
    ]


def counts(stack: devstack.DevStack, ns: str, job: str) -> dict[str, int]:
    status = jobs.get(stack, ns, "job", job).get("status", {})
    return {k: status.get(k, 0) for k in ("active", "terminating", "failed")}


def test_pod_replacement_policy_failed_waits_for_terminating_pods(stack: devstack.DevStack, ns: str) -> None:
    # Containers that ignore SIGTERM and a long grace period keep a deleted pod terminating (the
    # simulator runs it until the grace ends); both Jobs' pods are deleted together and watched
    # side by side.
    slow_stop = {"terminationGracePeriodSeconds": 120}
    ignores = {"sim.kcm.dev/ignore-sigterm": "true"}
    for name, policy in (("on-failed", "Failed"), ("on-terminating", "TerminatingOrFailed")):
        spec = {"backoffLimit": 6, "podReplacementPolicy": policy}
        jobs.apply(stack, jobs.job_yaml(ns, name, spec=spec, annotations=ignores, pod_spec=slow_stop))

    def running(job: str) -> list[tuple[str, bool, str]]:
        return [s for s in pod_state(stack, ns, job) if s[2] == "Running"]

    first: dict[str, str] = {}
    for name in ("on-failed", "on-terminating"):
        ((first[name], _, _),) = wait_for(functools.partial(running, name), 30, what=f"{name}'s pod running")
    stack.kubectl("delete", "pod", "-n", ns, first["on-failed"], first["on-terminating"], "--wait=false")

    # TerminatingOrFailed: the terminating pod counts as failed at once and is replaced once
    # upstream's 10 s pod failure backoff is over, while it is still terminating.
    wait_for(
        lambda: counts(stack, ns, "on-terminating") == {"active": 1, "terminating": 1, "failed": 1},
        45,
        what="on-terminating replaced",
    )
    states = {n: (t, phase) for n, t, phase in pod_state(stack, ns, "on-terminating")}
    assert states.pop(first["on-terminating"]) == (True, "Running")
    assert [terminating for terminating, _ in states.values()] == [False]

    # Failed, over the same time: counted as terminating only, neither failed nor replaced.
    assert counts(stack, ns, "on-failed") == {"active": 0, "terminating": 1, "failed": 0}
    assert pod_state(stack, ns, "on-failed") == [(first["on-failed"], True, "Running")]

    # Once the pod is gone (a shorter grace period ends it: killed, Failed, then deleted) it
    # counts as failed and is replaced after the backoff.
    stack.kubectl("delete", "pod", "-n", ns, first["on-failed"], "--grace-period=1", "--wait=false")
    wait_for(
        lambda: counts(stack, ns, "on-failed") == {"active": 1, "terminating": 0, "failed": 1},
        45,
        what="on-failed replaced",
    )
    ((replacement, terminating, _),) = pod_state(stack, ns, "on-failed")
    assert replacement != first["on-failed"] and not terminating
