"""Jobs applied with kubectl and read back, for the job tests (tests/e2e/test_job.py,
test_job_policies.py).
"""

from __future__ import annotations

import json
from typing import Any

from tests.e2e import devstack


def job_yaml(
    ns: str,
    name: str,
    *,
    spec: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
    pod_spec: dict[str, Any] | None = None,
) -> str:
    """A Job (as JSON, which kubectl reads as YAML) whose pods the simulator runs per `annotations`."""
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            **(spec or {}),
            "template": {
                "metadata": {"annotations": annotations or {}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox"}],
                    **(pod_spec or {}),
                },
            },
        },
    }
    return json.dumps(job)


def apply(stack: devstack.DevStack, text: str) -> None:
    stack.kubectl("apply", "-f", "-", input=text)


def get(stack: devstack.DevStack, ns: str, *what: str) -> Any:
    return json.loads(stack.kubectl("get", "-n", ns, *what, "-o", "json").stdout)


def pods_of(stack: devstack.DevStack, ns: str, job: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = get(stack, ns, "pods", "-l", f"batch.kubernetes.io/job-name={job}")["items"]
    return items


def wait_condition(
    stack: devstack.DevStack, ns: str, name: str, cond: str, timeout: int = 30
) -> dict[str, Any]:
    stack.kubectl("wait", "-n", ns, f"--for=condition={cond}", f"job/{name}", f"--timeout={timeout}s")
    job: dict[str, Any] = get(stack, ns, "job", name)
    return job
