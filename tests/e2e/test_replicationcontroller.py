"""The ReplicationController controller end to end: `kcm dev --controllers
replicationcontroller,garbagecollector,resourcequota`, driven with kubectl and the official client.

Each test works in its own namespace on one shared stack: an RC made without a selector
(the API server defaults it from the template's labels) gets its pods, owned by the RC, and
the status counts them; `kubectl scale rc` grows and shrinks it; a matching orphan is adopted
instead of a new pod and a pod relabelled out of the selector is released and replaced;
the Events come from "replication-controller"; creates a quota refuses set the ReplicaFailure
condition until they succeed; deleting the RC deletes its pods (the garbage
collector, through the ownerReferences the controller wrote).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from tests.conftest import wait_for
from tests.e2e import devstack, workloads
from tests.e2e.workloads import get, wait_owned, wait_status

# resourcequota: a quota limits nothing until its controller has written status.hard (upstream).
stack = devstack.stack_fixture("--controllers", "replicationcontroller,garbagecollector,resourcequota")
ns = workloads.namespace_fixture("rc")


@pytest.fixture(scope="module")
def core(stack: devstack.DevStack) -> Iterator[kubernetes.client.CoreV1Api]:
    with stack.api() as api:
        yield kubernetes.client.CoreV1Api(api)


def create_rc(core: kubernetes.client.CoreV1Api, ns: str, name: str, replicas: int) -> dict[str, Any]:
    """An RC with no selector: the API server defaults it from the template's labels."""
    body = {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "template": {
                "metadata": {
                    "labels": {"app": name},
                    "annotations": {"sim.kcm.dev/terminate-seconds": "0"},
                },
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    }
    rc = core.create_namespaced_replication_controller(ns, body)
    out: dict[str, Any] = core.api_client.sanitize_for_serialization(rc)
    return out


def test_creates_owned_pods_and_reports_status(
    stack: devstack.DevStack, core: kubernetes.client.CoreV1Api, ns: str
) -> None:
    rc = create_rc(core, ns, "web", 3)
    assert rc["spec"]["selector"] == {"app": "web"}  # defaulted from the template
    uid = rc["metadata"]["uid"]
    done = wait_status(
        stack, ns, "rc", "web", replicas=3, fullyLabeledReplicas=3, readyReplicas=3, availableReplicas=3
    )
    assert "conditions" not in done["status"]
    for pod in wait_owned(stack, ns, uid, 3):
        meta = pod["metadata"]
        assert meta["generateName"] == "web-" and meta["labels"] == {"app": "web"}
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "v1",
                "kind": "ReplicationController",
                "name": "web",
                "uid": uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    # kubectl's table reads the same status fields.
    assert stack.kubectl("get", "-n", ns, "rc", "web", "--no-headers").stdout.split()[1:4] == ["3", "3", "3"]

    def created_events() -> list[dict[str, Any]] | None:
        items = get(stack, ns, "events")["items"]
        found = [e for e in items if e["reason"] == "SuccessfulCreate"]
        return found if found else None

    event = wait_for(created_events, 30, 0.2, "SuccessfulCreate events")[0]
    assert event["source"]["component"] == "replication-controller"
    assert event["involvedObject"]["kind"] == "ReplicationController"
    assert event["message"].startswith("Created pod: web-")


def test_kubectl_scale_rc_up_and_down(
    stack: devstack.DevStack, core: kubernetes.client.CoreV1Api, ns: str
) -> None:
    uid = create_rc(core, ns, "app", 1)["metadata"]["uid"]
    wait_status(stack, ns, "rc", "app", replicas=1, readyReplicas=1)
    stack.kubectl("scale", "-n", ns, "rc", "app", "--replicas=4")
    wait_status(stack, ns, "rc", "app", replicas=4, readyReplicas=4)
    wait_owned(stack, ns, uid, 4)
    stack.kubectl("scale", "-n", ns, "rc", "app", "--replicas=1")
    wait_status(stack, ns, "rc", "app", replicas=1, readyReplicas=1)
    wait_owned(stack, ns, uid, 1)


def test_adopts_a_matching_orphan_and_releases_a_relabelled_pod(
    stack: devstack.DevStack, core: kubernetes.client.CoreV1Api, ns: str
) -> None:
    stack.kubectl("run", "-n", ns, "orphan", "--image=nginx", "--labels=app=adopt")
    uid = create_rc(core, ns, "adopt", 2)["metadata"]["uid"]
    pods = wait_owned(stack, ns, uid, 2)
    assert "orphan" in {p["metadata"]["name"] for p in pods}  # adopted, so only one was created
    wait_status(stack, ns, "rc", "adopt", replicas=2, fullyLabeledReplicas=2)
    stack.kubectl("label", "-n", ns, "pod/orphan", "app=elsewhere", "--overwrite")

    def released() -> bool:
        return not get(stack, ns, "pod", "orphan")["metadata"].get("ownerReferences")

    wait_for(released, 30, 0.2, "the relabelled pod released")
    replaced = wait_owned(stack, ns, uid, 2)
    assert "orphan" not in {p["metadata"]["name"] for p in replaced}


def test_deleting_the_rc_deletes_its_pods(
    stack: devstack.DevStack, core: kubernetes.client.CoreV1Api, ns: str
) -> None:
    uid = create_rc(core, ns, "gone", 2)["metadata"]["uid"]
    wait_owned(stack, ns, uid, 2)
    stack.kubectl("delete", "-n", ns, "rc", "gone", "--wait=false")
    wait_for(lambda: not get(stack, ns, "pods")["items"], 30, 0.2, "the RC's pods deleted")


def test_refused_creates_set_replica_failure_until_they_succeed(
    stack: devstack.DevStack, core: kubernetes.client.CoreV1Api, ns: str
) -> None:
    stack.kubectl("create", "quota", "one-pod", "-n", ns, "--hard=pods=1")
    wait_for(lambda: get(stack, ns, "quota", "one-pod").get("status", {}).get("used"), 30, 0.2, "quota known")
    create_rc(core, ns, "capped", 3)

    def failure() -> dict[str, Any] | None:
        conditions = get(stack, ns, "rc", "capped").get("status", {}).get("conditions", [])
        return next((c for c in conditions if c["type"] == "ReplicaFailure" and c["status"] == "True"), None)

    cond = wait_for(failure, 30, 0.2, "ReplicaFailure condition")
    assert cond["reason"] == "FailedCreate" and "exceeded quota: one-pod" in cond["message"], cond
    # The Events section only: the condition's reason FailedCreate is in the describe output first.
    out = wait_for(
        lambda: (
            o
            if "FailedCreate"
            in (o := stack.kubectl("describe", "-n", ns, "rc", "capped").stdout.split("Events:")[-1])
            else None
        ),
        30,
        0.2,
        "FailedCreate event in describe",
    )
    assert "Error creating: pods" in out
    stack.kubectl("patch", "quota", "one-pod", "-n", ns, "-p", '{"spec":{"hard":{"pods":"10"}}}')
    done = wait_status(stack, ns, "rc", "capped", replicas=3, readyReplicas=3)
    assert "conditions" not in done["status"], done["status"]
