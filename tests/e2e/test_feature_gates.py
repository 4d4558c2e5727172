"""`--feature-gates` changes what the controllers do, as upstream's DefaultFeatureGate does
(issue 29 item 2; docs/flags.md "Feature gates").

One stack for the module, started with `--feature-gates=JobManagedBy=false`: the Job controller
then ignores spec.managedBy, as upstream v1.32's does with that gate off (with it on, the
default, tests/e2e/test_job.py shows such a Job left alone).
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator

import pytest

from tests.conftest import KCM, wait_for
from tests.e2e import devstack
from tests.e2e.jobs import apply, get, job_yaml, pods_of

stack = devstack.stack_fixture("--controllers", "job", "--nodes", "1", "--feature-gates=JobManagedBy=false")


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
