"""The ReplicaSet controller end to end: `kcm dev --controllers replicaset`, driven with kubectl.

Each test works in its own namespace on one shared stack: pods are created from the
template and run by the simulator, the status counts them, scaling deletes the lowest ranked
pods, matching orphans are adopted and pods whose labels change are released, deleted pods
are replaced, and the Events show in `kubectl describe`.
"""

from __future__ import annotations

import textwrap
from typing import Any

from tests.conftest import wait_for
from tests.e2e import devstack, workloads
from tests.e2e.workloads import get, owned_pods, wait_owned, wait_status

# resourcequota: a quota limits nothing until its controller has written status.hard (upstream).
stack = devstack.stack_fixture("--controllers", "replicaset,resourcequota")
ns = workloads.namespace_fixture("rs")


def replicaset_yaml(ns: str, name: str, replicas: int, min_ready: int = 0, ready: str = "true") -> str:
    return textwrap.dedent(f"""\
        apiVersion: apps/v1
        kind: ReplicaSet
        metadata: {{name: {name}, namespace: {ns}}}
        spec:
          replicas: {replicas}
          minReadySeconds: {min_ready}
          selector: {{matchLabels: {{app: {name}}}}}
          template:
            metadata:
              labels: {{app: {name}, tier: web}}
              annotations: {{sim.kcm.dev/terminate-seconds: "0", sim.kcm.dev/ready: "{ready}"}}
            spec:
              containers: [{{name: c, image: nginx}}]
        """)


def create_rs(
    stack: devstack.DevStack, ns: str, name: str, replicas: int, min_ready: int = 0, ready: str = "true"
) -> dict[str, Any]:
    stack.kubectl("apply", "-f", "-", input=replicaset_yaml(ns, name, replicas, min_ready, ready))
    rs: dict[str, Any] = get(stack, ns, "rs", name)
    return rs


def test_creates_pods_from_the_template_and_reports_status(stack: devstack.DevStack, ns: str) -> None:
    rs = create_rs(stack, ns, "web", 3)
    uid = rs["metadata"]["uid"]
    done = wait_status(
        stack, ns, "rs", "web", replicas=3, fullyLabeledReplicas=3, readyReplicas=3, availableReplicas=3
    )
    assert done["status"]["observedGeneration"] == done["metadata"]["generation"]
    assert "conditions" not in done["status"]
    pods = owned_pods(stack, ns, uid)
    assert len(pods) == 3
    for pod in pods:
        meta = pod["metadata"]
        assert meta["generateName"] == "web-" and meta["name"].startswith("web-")
        assert meta["labels"] == {"app": "web", "tier": "web"}
        assert meta["annotations"]["sim.kcm.dev/terminate-seconds"] == "0"
        [ref] = meta["ownerReferences"]
        assert ref == {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "web",
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
        assert pod["spec"]["containers"][0]["image"] == "nginx"
        assert pod["status"]["phase"] == "Running"


def test_scaling_deletes_the_lowest_ranked_pods(stack: devstack.DevStack, ns: str) -> None:
    uid = create_rs(stack, ns, "scale", 2)["metadata"]["uid"]
    wait_status(stack, ns, "rs", "scale", replicas=2, readyReplicas=2)
    stack.kubectl("scale", "-n", ns, "rs/scale", "--replicas=4")
    pods = wait_owned(stack, ns, uid, 4)
    wait_status(stack, ns, "rs", "scale", replicas=4, readyReplicas=4, availableReplicas=4)
    # Ready pods of equal standing: a lower pod-deletion-cost goes first.
    cheap = sorted(p["metadata"]["name"] for p in pods)[1:3]
    for name in cheap:
        stack.kubectl("annotate", "-n", ns, f"pod/{name}", "controller.kubernetes.io/pod-deletion-cost=-10")
    stack.kubectl("scale", "-n", ns, "rs/scale", "--replicas=2")
    remaining = wait_owned(stack, ns, uid, 2)
    assert not {p["metadata"]["name"] for p in remaining} & set(cheap)
    wait_status(stack, ns, "rs", "scale", replicas=2, readyReplicas=2, availableReplicas=2)


def test_adopts_a_matching_orphan_instead_of_creating(stack: devstack.DevStack, ns: str) -> None:
    stack.kubectl("run", "-n", ns, "orphan", "--image=nginx", "--labels=app=adopt")
    uid = create_rs(stack, ns, "adopt", 1)["metadata"]["uid"]
    wait_status(stack, ns, "rs", "adopt", replicas=1, readyReplicas=1)
    [pod] = owned_pods(stack, ns, uid)
    assert pod["metadata"]["name"] == "orphan"
    assert len(get(stack, ns, "pods")["items"]) == 1
    # The adopted pod lacks the template's tier label: counted, but not fully labeled (kube-apiserver
    # leaves the zero out: the Go field is omitempty).
    assert get(stack, ns, "rs", "adopt")["status"].get("fullyLabeledReplicas", 0) == 0


def test_surplus_adopted_pod_that_is_not_ready_goes_first(stack: devstack.DevStack, ns: str) -> None:
    uid = create_rs(stack, ns, "extra", 2)["metadata"]["uid"]
    wait_status(stack, ns, "rs", "extra", replicas=2, readyReplicas=2)
    before = {p["metadata"]["name"] for p in owned_pods(stack, ns, uid)}
    stack.kubectl(
        "run",
        "-n",
        ns,
        "straggler",
        "--image=nginx",
        "--labels=app=extra",
        "--annotations=sim.kcm.dev/ready=false",
    )
    wait_for(
        lambda: (
            not any(p["metadata"]["name"] == "straggler" for p in owned_pods(stack, ns, uid))
            and any(e["reason"] == "SuccessfulDelete" for e in get(stack, ns, "events")["items"])
        ),
        30,
        0.2,
        "the adopted surplus pod deleted",
    )
    assert {p["metadata"]["name"] for p in owned_pods(stack, ns, uid)} == before
    deleted = [e["message"] for e in get(stack, ns, "events")["items"] if e["reason"] == "SuccessfulDelete"]
    assert deleted == ["Deleted pod: straggler"]


def test_releases_a_pod_whose_labels_change_and_replaces_it(stack: devstack.DevStack, ns: str) -> None:
    uid = create_rs(stack, ns, "rel", 2)["metadata"]["uid"]
    wait_status(stack, ns, "rs", "rel", replicas=2, readyReplicas=2)
    victim = owned_pods(stack, ns, uid)[0]["metadata"]["name"]
    stack.kubectl("label", "-n", ns, f"pod/{victim}", "app=elsewhere", "--overwrite")
    wait_for(
        lambda: not get(stack, ns, "pod", victim)["metadata"].get("ownerReferences"), 30, 0.2, "pod released"
    )
    pods = wait_owned(stack, ns, uid, 2)
    assert victim not in {p["metadata"]["name"] for p in pods}
    wait_status(stack, ns, "rs", "rel", replicas=2, readyReplicas=2)


def test_a_deleted_pod_is_replaced(stack: devstack.DevStack, ns: str) -> None:
    uid = create_rs(stack, ns, "heal", 2)["metadata"]["uid"]
    wait_status(stack, ns, "rs", "heal", replicas=2, readyReplicas=2)
    victim = owned_pods(stack, ns, uid)[0]["metadata"]["name"]
    stack.kubectl("delete", "-n", ns, "pod", victim, "--wait=false")
    wait_for(
        lambda: (
            len(p := owned_pods(stack, ns, uid)) == 2 and victim not in {x["metadata"]["name"] for x in p}
        ),
        30,
        0.2,
        "a replacement pod",
    )
    wait_status(stack, ns, "rs", "heal", replicas=2, readyReplicas=2, availableReplicas=2)


def test_min_ready_seconds_makes_pods_available_later(stack: devstack.DevStack, ns: str) -> None:
    create_rs(stack, ns, "slow", 2, min_ready=2)
    # No pod event follows readiness: only the controller's own requeue can count them available.
    wait_status(stack, ns, "rs", "slow", replicas=2, readyReplicas=2, availableReplicas=2)


def test_pods_that_are_not_ready_count_as_replicas_only(stack: devstack.DevStack, ns: str) -> None:
    create_rs(stack, ns, "unready", 2, ready="false")
    wait_status(
        stack, ns, "rs", "unready", replicas=2, fullyLabeledReplicas=2, readyReplicas=0, availableReplicas=0
    )


def test_events_show_in_kubectl_describe(stack: devstack.DevStack, ns: str) -> None:
    uid = create_rs(stack, ns, "loud", 2)["metadata"]["uid"]
    wait_status(stack, ns, "rs", "loud", replicas=2, readyReplicas=2)
    names = sorted(p["metadata"]["name"] for p in owned_pods(stack, ns, uid))
    stack.kubectl("scale", "-n", ns, "rs/loud", "--replicas=1")
    wait_owned(stack, ns, uid, 1)

    def described() -> str | None:
        out = stack.kubectl("describe", "-n", ns, "rs", "loud").stdout
        return out if "SuccessfulDelete" in out else None

    out = wait_for(described, 30, 0.2, "events in describe")
    for name in names:
        assert f"Created pod: {name}" in out
    assert "SuccessfulCreate" in out and "replicaset-controller" in out


def replica_failure(rs: dict[str, Any]) -> dict[str, Any] | None:
    conditions = rs.get("status", {}).get("conditions", [])
    return next((c for c in conditions if c["type"] == "ReplicaFailure"), None)


def test_refused_creates_set_replica_failure_until_they_succeed(stack: devstack.DevStack, ns: str) -> None:
    stack.kubectl("create", "quota", "two-pods", "-n", ns, "--hard=pods=2")
    wait_for(
        lambda: get(stack, ns, "quota", "two-pods").get("status", {}).get("used"),
        30,
        0.2,
        "quota usage known",
    )
    uid = create_rs(stack, ns, "capped", 4)["metadata"]["uid"]

    def failing() -> dict[str, Any] | None:
        cond = replica_failure(get(stack, ns, "rs", "capped"))
        return cond if cond and cond["status"] == "True" else None

    cond = wait_for(failing, 30, 0.2, "ReplicaFailure condition")
    assert cond["reason"] == "FailedCreate"
    assert "exceeded quota: two-pods" in cond["message"], cond
    assert len(owned_pods(stack, ns, uid)) == 2
    out = wait_for(
        lambda: (
            o if "FailedCreate" in (o := stack.kubectl("describe", "-n", ns, "rs", "capped").stdout) else None
        ),
        30,
        0.2,
        "FailedCreate event",
    )
    assert "Error creating: pods" in out and "exceeded quota" in out
    # Room again: the controller's retries create the rest and the condition goes away.
    stack.kubectl("patch", "quota", "two-pods", "-n", ns, "-p", '{"spec":{"hard":{"pods":"10"}}}')
    done = wait_status(stack, ns, "rs", "capped", replicas=4, readyReplicas=4)
    assert replica_failure(done) is None, done["status"]


def test_creates_refused_by_a_terminating_namespace_are_not_failures(
    stack: devstack.DevStack, ns: str
) -> None:
    create_rs(stack, ns, "doomed", 0)
    wait_status(stack, ns, "rs", "doomed", replicas=0)
    # No namespace controller runs here, so the namespace stays Terminating with its content.
    stack.kubectl("delete", "namespace", ns, "--wait=false")
    stack.kubectl("scale", "-n", ns, "rs/doomed", "--replicas=2")
    rs = wait_status(stack, ns, "rs", "doomed", replicas=0)
    # Upstream gives up quietly on these: every create would fail until the namespace is gone.
    assert replica_failure(rs) is None, rs["status"]
    assert get(stack, ns, "pods")["items"] == []
