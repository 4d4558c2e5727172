"""`--feature-gates` changes what the controllers do, as upstream's DefaultFeatureGate does
(issue 29 item 2; docs/flags.md "Feature gates").

One stack for the module, started with the four Job gates off (`JOB_GATES_OFF`): the Job
controller then ignores spec.managedBy, spec.successPolicy, spec.backoffLimitPerIndex and
spec.podReplacementPolicy and leaves status.terminating unset, as upstream v1.32's does with
those gates off (with them on, the default, tests/e2e/test_job.py and test_job_policies.py
show the other side). OrderedNamespaceDeletion is on (off by default): the namespace
controller deletes nothing else while a terminating namespace still has pods.
MaxUnavailableStatefulSet is on (alpha, off by default): a StatefulSet's rolling update
replaces up to `rollingUpdate.maxUnavailable` pods at once.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator

import pytest

from tests.conftest import KCM, wait_for
from tests.e2e import devstack
from tests.e2e.jobs import apply, get, job_yaml, pods_of, wait_condition

REVISION = "controller-revision-hash"
JOB_GATES_OFF = (
    "JobManagedBy=false,JobSuccessPolicy=false,JobBackoffLimitPerIndex=false,JobPodReplacementPolicy=false"
)
GATES = f"{JOB_GATES_OFF},OrderedNamespaceDeletion=true,MaxUnavailableStatefulSet=true"
stack = devstack.stack_fixture(
    "--controllers", "job,namespace,statefulset", "--nodes", "1", f"--feature-gates={GATES}"
)


@pytest.fixture
def ns(stack: devstack.DevStack) -> Iterator[str]:
    name = f"gates-{uuid.uuid4().hex[:8]}"
    stack.kubectl("create", "namespace", name)
    yield name


def test_with_job_managed_by_off_a_job_managed_by_another_controller_is_run(
    stack: devstack.DevStack, ns: str
) -> None:
    apply(stack, job_yaml(ns, "theirs", spec={"managedBy": "example.com/other-controller"}))
    wait_for(lambda: pods_of(stack, ns, "theirs"), 30, what="a pod of the job, managedBy ignored")
    wait_for(lambda: get(stack, ns, "job", "theirs").get("status", {}).get("active") == 1, 30)


def test_with_job_success_policy_off_every_index_must_succeed(stack: devstack.DevStack, ns: str) -> None:
    # With the gate on, index 0's success alone would complete this Job (reason SuccessPolicy).
    spec = {
        "completionMode": "Indexed",
        "completions": 2,
        "parallelism": 2,
        "successPolicy": {"rules": [{"succeededIndexes": "0"}]},
    }
    apply(stack, job_yaml(ns, "all", spec=spec, annotations={"sim.kcm.dev/exit-code": "0"}))
    job = wait_condition(stack, ns, "all", "Complete", timeout=60)
    status = job["status"]
    assert status["succeeded"] == 2 and status["completedIndexes"] == "0,1"
    assert all(c.get("reason", "") != "SuccessPolicy" for c in status["conditions"])
    # JobPodReplacementPolicy off: upstream leaves status.terminating unset.
    assert "terminating" not in status


def test_with_job_backoff_limit_per_index_off_the_global_limit_fails_the_job(
    stack: devstack.DevStack, ns: str
) -> None:
    # With the gate on, the Job would fail with FailedIndexes and status.failedIndexes "0,1".
    spec = {
        "completionMode": "Indexed",
        "completions": 2,
        "parallelism": 2,
        "backoffLimitPerIndex": 1,
        "backoffLimit": 0,
    }
    apply(stack, job_yaml(ns, "global", spec=spec, annotations={"sim.kcm.dev/exit-code": "1"}))
    job = wait_condition(stack, ns, "global", "Failed", timeout=60)
    (failed,) = (c for c in job["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "BackoffLimitExceeded"
    assert "failedIndexes" not in job["status"]


POD_HELD = """
apiVersion: v1
kind: Pod
metadata: {name: held, namespace: NS, finalizers: [example.com/hold]}
spec:
  nodeSelector: {example.com/no-such-node: "true"}
  containers: [{name: c, image: busybox}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: kept, namespace: NS}
"""


def test_with_ordered_namespace_deletion_on_pods_go_first(stack: devstack.DevStack, ns: str) -> None:
    # The pod never schedules, so only its finalizer holds it once deleted.
    apply(stack, POD_HELD.replace("NS", ns))
    stack.kubectl("delete", "namespace", ns, "--wait=false")

    def round_done() -> bool:
        pod = get(stack, ns, "pod", "held")
        conditions = get(stack, "default", "namespace", ns).get("status", {}).get("conditions")
        return bool(pod["metadata"].get("deletionTimestamp") and conditions)

    # The conditions are written once a round is over: with the gate off, that round would
    # have deleted the ConfigMap along with the pods.
    wait_for(round_done, 60, what="a deletion round that deleted the pod")
    assert get(stack, ns, "configmap", "kept")["metadata"]["name"] == "kept"
    stack.kubectl("patch", "-n", ns, "pod", "held", "--type=merge", "-p", '{"metadata":{"finalizers":null}}')

    def gone() -> bool:
        res = stack.kubectl("get", "namespace", ns, check=False)
        return res.returncode != 0 and "NotFound" in res.stderr

    wait_for(gone, 90, what="the namespace removed once its pod is gone")


def _set(ready: str) -> str:
    return json.dumps(
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "web"},
            "spec": {
                "serviceName": "web",
                "replicas": 3,
                "podManagementPolicy": "Parallel",
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}},
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {
                        "labels": {"app": "web"},
                        "annotations": {"sim.kcm.dev/ready": ready, "sim.kcm.dev/terminate-seconds": "0"},
                    },
                    "spec": {"containers": [{"name": "c", "image": "nginx:1"}]},
                },
            },
        }
    )


def test_with_max_unavailable_stateful_set_on_two_pods_roll_at_once(
    stack: devstack.DevStack, ns: str
) -> None:
    stack.kubectl("apply", "-n", ns, "-f", "-", input=_set("true"))
    rolling = get(stack, ns, "statefulset", "web")["spec"]["updateStrategy"]["rollingUpdate"]
    if "maxUnavailable" not in rolling:
        pytest.skip("this API server drops maxUnavailable: its own MaxUnavailableStatefulSet gate is off")
    stack.kubectl("rollout", "status", "-n", ns, "sts/web", "--timeout=60s")
    # The new revision's pods never turn ready: with one pod at a time (the gate off), web-2's
    # replacement would hold the rollout and web-1 would never be replaced.
    stack.kubectl("apply", "-n", ns, "-f", "-", input=_set("false"))

    def replaced() -> set[str]:
        status = get(stack, ns, "statefulset", "web").get("status", {})
        update = status.get("updateRevision")
        items = get(stack, ns, "pods", "-l", "app=web")["items"]
        if not update or status.get("currentRevision") == update:
            return set()
        return {p["metadata"]["name"] for p in items if p["metadata"]["labels"].get(REVISION) == update}

    wait_for(lambda: replaced() == {"web-1", "web-2"}, 60, what="web-2 and web-1 at the new revision")
    assert "web-0" not in replaced()  # two unavailable already: web-0 waits


@pytest.mark.parametrize(
    ("gates", "message"),
    [
        ("NoSuchGate=true", "unrecognized feature gate: NoSuchGate"),
        ("JobManagedBy=maybe", "invalid value of JobManagedBy=maybe"),
    ],
)
def test_an_unknown_gate_or_a_bad_value_is_refused_in_one_line(gates: str, message: str) -> None:
    done = subprocess.run(
        [KCM, "controllers", f"--feature-gates={gates}"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert message in done.stderr and "Traceback" not in done.stderr
