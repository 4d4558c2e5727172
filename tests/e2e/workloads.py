"""Helpers the workload e2e modules share: kubectl reads, a Deployment manifest, and the
owned-pod and status waits of the replica controllers (ReplicaSet and ReplicationController
run one implementation, so their tests wait on the same things).

Used by tests/e2e/test_replicaset.py, test_replicationcontroller.py, test_disruption.py and
test_hpa.py; each keeps its own stack.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.conftest import wait_for
from tests.e2e import devstack


def namespace_fixture(prefix: str) -> Callable[..., Iterator[str]]:
    """A fixture giving each test a namespace of its own, `<prefix>-<n>`, on the module's stack."""
    counter = itertools.count()

    @pytest.fixture
    def fixture(stack: devstack.DevStack) -> Iterator[str]:
        name = f"{prefix}-{next(counter)}"
        stack.kubectl("create", "namespace", name)
        yield name

    return fixture


def get(stack: devstack.DevStack, ns: str, *what: str) -> Any:
    """`kubectl get -n <ns> <what> -o json`, decoded."""
    return json.loads(stack.kubectl("get", "-n", ns, *what, "-o", "json").stdout)


def apply_deployment(
    stack: devstack.DevStack,
    ns: str,
    name: str,
    replicas: int,
    annotations: dict[str, str],
    *,
    cpu_request: str = "",
    grace_seconds: int | None = None,
) -> None:
    """A Deployment of `replicas` pods labelled app=<name>, with the simulator annotations
    given (docs/simulator.md) on its pod template."""
    container: dict[str, Any] = {"name": "c", "image": "nginx"}
    if cpu_request:
        container["resources"] = {"requests": {"cpu": cpu_request}}
    pod_spec: dict[str, Any] = {"containers": [container]}
    if grace_seconds is not None:
        pod_spec["terminationGracePeriodSeconds"] = grace_seconds
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}, "annotations": annotations},
                "spec": pod_spec,
            },
        },
    }
    stack.kubectl("apply", "-f", "-", input=json.dumps(body))


def owned_pods(stack: devstack.DevStack, ns: str, uid: str) -> list[dict[str, Any]]:
    """Active pods whose controllerRef has this uid."""
    return [
        pod
        for pod in get(stack, ns, "pods")["items"]
        if not pod["metadata"].get("deletionTimestamp")
        and any(r.get("controller") and r["uid"] == uid for r in pod["metadata"].get("ownerReferences", []))
    ]


def wait_owned(stack: devstack.DevStack, ns: str, uid: str, count: int) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = wait_for(
        lambda: p if len(p := owned_pods(stack, ns, uid)) == count else None, 30, 0.2, f"{count} pods"
    )
    return pods


def wait_status(stack: devstack.DevStack, ns: str, kind: str, name: str, **want: int) -> dict[str, Any]:
    """The object once its status has the counts wanted for its current generation."""

    def check() -> dict[str, Any] | None:
        obj = get(stack, ns, kind, name)
        status = obj.get("status", {})
        ok = all(status.get(k, 0) == v for k, v in want.items())
        return obj if ok and status.get("observedGeneration") == obj["metadata"]["generation"] else None

    found: dict[str, Any] = wait_for(check, 30, 0.2, f"status {want} of {kind} {ns}/{name}")
    return found
