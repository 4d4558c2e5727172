"""The StatefulSet controller end to end: `kcm dev --controllers
statefulset,garbagecollector,pvc-protection` (claims get the pvc-protection finalizer from the
API server, which only that controller lifts), driven with kubectl.

Each test works in its own namespace on one shared stack: OrderedReady creates pod N only once
pod N-1 is Running and Ready and scales down highest ordinal first, one at a time; Parallel
with `ordinals.start` creates every pod at once; a RollingUpdate with a partition updates only
the ordinals above it, `kubectl rollout status/history/undo` work from the ControllerRevisions;
claims from volumeClaimTemplates exist before their pods and outlive them as the retention
policy says (the garbage collector deletes what the policy hands it); a controller killed with
SIGKILL in the middle of a scale-up loses nothing. Pod readiness is driven through the
simulator's `sim.kcm.dev/ready` annotation; `sim.kcm.dev/terminate-seconds` keeps a deleted
pod terminating long enough to look at the order of deletions.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import wait_for
from tests.e2e import devstack

stack = devstack.stack_fixture("--controllers", "statefulset,garbagecollector,pvc-protection")
_counter = iter(range(1000))
REVISION = "controller-revision-hash"


@pytest.fixture
def ns(stack: devstack.DevStack) -> Iterator[str]:
    name = f"sts-{next(_counter)}"
    stack.kubectl("create", "namespace", name)
    yield name


def sts_yaml(
    name: str,
    replicas: int,
    *,
    annotations: dict[str, str] | None = None,
    claims: bool = False,
    **spec: Any,
) -> str:
    body: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "serviceName": name,
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}, "annotations": annotations or {}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1"}]},
            },
            **spec,
        },
    }
    if claims:
        body["spec"]["volumeClaimTemplates"] = [
            {
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            }
        ]
    return json.dumps(body)


def apply(stack: devstack.DevStack, ns: str, text: str) -> None:
    stack.kubectl("apply", "-n", ns, "-f", "-", input=text)


def get(stack: devstack.DevStack, ns: str, *what: str) -> Any:
    return json.loads(stack.kubectl("get", "-n", ns, *what, "-o", "json").stdout)


def pods(stack: devstack.DevStack, ns: str, app: str) -> dict[str, dict[str, Any]]:
    items = get(stack, ns, "pods", "-l", f"app={app}")["items"]
    return {p["metadata"]["name"]: p for p in items}


def claims(stack: devstack.DevStack, ns: str) -> dict[str, dict[str, Any]]:
    return {c["metadata"]["name"]: c for c in get(stack, ns, "pvc")["items"]}


def status(stack: devstack.DevStack, ns: str, name: str) -> dict[str, Any]:
    out: dict[str, Any] = get(stack, ns, "sts", name).get("status") or {}
    return out


def wait_pod_names(stack: devstack.DevStack, ns: str, app: str, names: set[str], timeout: float = 30) -> None:
    wait_for(lambda: set(pods(stack, ns, app)) == names, timeout, 0.2, f"pods {sorted(names)}")


def make_ready(stack: devstack.DevStack, ns: str, pod: str) -> None:
    stack.kubectl("annotate", "-n", ns, "--overwrite", f"pod/{pod}", "sim.kcm.dev/ready=true")


def events(stack: devstack.DevStack, ns: str) -> list[tuple[str, str]]:
    return [(e["reason"], e["message"]) for e in get(stack, ns, "events")["items"]]


def test_ordered_ready_creates_in_order_and_scales_down_in_reverse(stack: devstack.DevStack, ns: str) -> None:
    not_ready = {"sim.kcm.dev/ready": "false", "sim.kcm.dev/terminate-seconds": "3"}
    apply(stack, ns, sts_yaml("web", 2, annotations=not_ready))
    wait_for(
        lambda: (
            status(stack, ns, "web").get("replicas") == 1
            and pods(stack, ns, "web")["web-0"]["status"].get("phase") == "Running"
        ),
        30,
        0.2,
        "web-0 running",
    )
    # A spec change makes the controller sync and write observedGeneration 2 in the same pass
    # that would create web-1 if it did not wait for web-0 to be ready.
    stack.kubectl("scale", "-n", ns, "sts/web", "--replicas=3")
    wait_for(lambda: status(stack, ns, "web").get("observedGeneration") == 2, 30, 0.2, "generation 2 seen")
    assert set(pods(stack, ns, "web")) == {"web-0"}
    make_ready(stack, ns, "web-0")
    wait_pod_names(stack, ns, "web", {"web-0", "web-1"})
    make_ready(stack, ns, "web-1")
    wait_pod_names(stack, ns, "web", {"web-0", "web-1", "web-2"})
    make_ready(stack, ns, "web-2")
    out = stack.kubectl("rollout", "status", "-n", ns, "sts/web", "--timeout=30s").stdout
    assert "3 new pods have been updated" in out
    st = status(stack, ns, "web")
    assert (st["replicas"], st["readyReplicas"], st["availableReplicas"], st["updatedReplicas"]) == (
        3,
        3,
        3,
        3,
    )
    assert st["currentRevision"] == st["updateRevision"]
    one = pods(stack, ns, "web")["web-1"]
    assert one["metadata"]["labels"] == {
        "app": "web",
        "statefulset.kubernetes.io/pod-name": "web-1",
        "apps.kubernetes.io/pod-index": "1",
        REVISION: st["updateRevision"],
    }
    assert (one["spec"]["hostname"], one["spec"]["subdomain"]) == ("web-1", "web")
    assert ("SuccessfulCreate", "create Pod web-1 in StatefulSet web successful") in events(stack, ns)

    # Scale down: the highest ordinal goes first, and the next only once it is gone.
    stack.kubectl("scale", "-n", ns, "sts/web", "--replicas=1")

    def terminating() -> set[str]:
        return {n for n, p in pods(stack, ns, "web").items() if p["metadata"].get("deletionTimestamp")}

    wait_for(
        lambda: status(stack, ns, "web").get("observedGeneration") == 3 and "web-2" in terminating(),
        30,
        0.1,
        "web-2 terminating",
    )
    assert "web-1" not in terminating()
    wait_pod_names(stack, ns, "web", {"web-0"})
    assert ("SuccessfulDelete", "delete Pod web-2 in StatefulSet web successful") in events(stack, ns)
    assert ("SuccessfulDelete", "delete Pod web-1 in StatefulSet web successful") in events(stack, ns)


def test_parallel_with_a_start_ordinal_creates_every_pod_at_once(stack: devstack.DevStack, ns: str) -> None:
    spec: dict[str, Any] = {"podManagementPolicy": "Parallel", "ordinals": {"start": 3}}
    annotations = {"sim.kcm.dev/ready": "false", "sim.kcm.dev/terminate-seconds": "0"}
    apply(stack, ns, sts_yaml("par", 3, annotations=annotations, **spec))
    # None is ready, yet all three exist: Parallel does not wait.
    wait_pod_names(stack, ns, "par", {"par-3", "par-4", "par-5"})
    wait_for(lambda: status(stack, ns, "par").get("replicas") == 3, 30, 0.2, "status counts 3")
    assert status(stack, ns, "par").get("readyReplicas", 0) == 0
    uid = get(stack, ns, "sts", "par")["metadata"]["uid"]
    for pod in pods(stack, ns, "par").values():
        refs = pod["metadata"]["ownerReferences"]
        assert [(r["kind"], r["uid"], r["controller"]) for r in refs] == [("StatefulSet", uid, True)]
    stack.kubectl("delete", "-n", ns, "sts/par", "--wait=false")
    wait_pod_names(stack, ns, "par", set())


def test_rolling_update_with_partition_history_and_undo(stack: devstack.DevStack, ns: str) -> None:
    spec: dict[str, Any] = {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}}
    apply(stack, ns, sts_yaml("ru", 3, annotations={"sim.kcm.dev/terminate-seconds": "0"}, **spec))
    stack.kubectl("rollout", "status", "-n", ns, "sts/ru", "--timeout=60s")
    first = status(stack, ns, "ru")["updateRevision"]
    stack.kubectl("set", "image", "-n", ns, "sts/ru", "c=nginx:2")
    out = stack.kubectl("rollout", "status", "-n", ns, "sts/ru", "--timeout=60s").stdout
    assert "partitioned roll out complete: 1 new pods have been updated" in out
    second = status(stack, ns, "ru")["updateRevision"]
    assert second != first
    images = {n: p["spec"]["containers"][0]["image"] for n, p in pods(stack, ns, "ru").items()}
    assert images == {"ru-0": "nginx:1", "ru-1": "nginx:1", "ru-2": "nginx:2"}
    assert status(stack, ns, "ru")["currentRevision"] == first

    stack.kubectl(
        "patch",
        "-n",
        ns,
        "sts/ru",
        "-p",
        json.dumps({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}}),
    )
    stack.kubectl("rollout", "status", "-n", ns, "sts/ru", "--timeout=60s")

    def settled(image: str, revision: str) -> bool:
        st = status(stack, ns, "ru")
        got = pods(stack, ns, "ru")
        return (
            st.get("currentRevision") == st.get("updateRevision") == revision
            and st.get("updatedReplicas") == 3
            and len(got) == 3
            and all(p["spec"]["containers"][0]["image"] == image for p in got.values())
            and all(p["metadata"]["labels"][REVISION] == revision for p in got.values())
        )

    wait_for(lambda: settled("nginx:2", second), 60, 0.2, "every pod at nginx:2")
    history = stack.kubectl("rollout", "history", "-n", ns, "sts/ru").stdout
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]

    stack.kubectl("rollout", "undo", "-n", ns, "sts/ru")
    wait_for(lambda: settled("nginx:1", first), 60, 0.2, "every pod back at nginx:1")
    # The rollback reuses the first revision (same name), renumbered after the second.
    revisions = {r["metadata"]["name"]: r["revision"] for r in get(stack, ns, "controllerrevisions")["items"]}
    assert revisions == {first: 3, second: 2}
    history = stack.kubectl("rollout", "history", "-n", ns, "sts/ru").stdout
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["2", "3"]


def test_claims_are_made_before_pods_and_kept_or_deleted_as_the_policy_says(
    stack: devstack.DevStack, ns: str
) -> None:
    fast = {"sim.kcm.dev/terminate-seconds": "0"}
    apply(stack, ns, sts_yaml("keep", 2, annotations=fast, claims=True, podManagementPolicy="Parallel"))
    policy = {"whenDeleted": "Delete", "whenScaled": "Delete"}
    apply(
        stack,
        ns,
        sts_yaml(
            "drop",
            2,
            annotations=fast,
            claims=True,
            podManagementPolicy="Parallel",
            persistentVolumeClaimRetentionPolicy=policy,
        ),
    )
    for name in ("keep", "drop"):
        stack.kubectl("rollout", "status", "-n", ns, f"sts/{name}", "--timeout=60s")
    got = claims(stack, ns)
    assert set(got) == {"data-keep-0", "data-keep-1", "data-drop-0", "data-drop-1"}
    pod = pods(stack, ns, "keep")["keep-1"]
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "data")
    assert volume["persistentVolumeClaim"]["claimName"] == "data-keep-1"
    # The claim came first: it is older than (or as old as) its pod.
    assert got["data-keep-1"]["metadata"]["creationTimestamp"] <= pod["metadata"]["creationTimestamp"]
    assert "ownerReferences" not in got["data-keep-0"]["metadata"]
    drop_uid = get(stack, ns, "sts", "drop")["metadata"]["uid"]
    refs = got["data-drop-0"]["metadata"]["ownerReferences"]
    assert [(r["kind"], r["uid"], r["controller"]) for r in refs] == [("StatefulSet", drop_uid, True)]

    for name in ("keep", "drop"):
        stack.kubectl("scale", "-n", ns, f"sts/{name}", "--replicas=1")
    wait_pod_names(stack, ns, "keep", {"keep-0"})
    wait_pod_names(stack, ns, "drop", {"drop-0"})
    # whenScaled=Delete: the condemned pod owned its claim, so it went with the pod.
    wait_for(lambda: "data-drop-1" not in claims(stack, ns), 30, 0.2, "data-drop-1 deleted")
    assert "data-keep-1" in claims(stack, ns)

    for name in ("keep", "drop"):
        stack.kubectl("delete", "-n", ns, f"sts/{name}", "--wait=false")
    wait_for(lambda: set(claims(stack, ns)) == {"data-keep-0", "data-keep-1"}, 30, 0.2, "data-drop-0 deleted")
    wait_pod_names(stack, ns, "keep", set())


def test_killed_controller_mid_scale_loses_nothing(stack: devstack.DevStack, ns: str) -> None:
    replicas = 30
    apply(stack, ns, sts_yaml("big", 0, claims=True, podManagementPolicy="Parallel"))
    stack.kubectl("scale", "-n", ns, "sts/big", f"--replicas={replicas}")
    wait_for(lambda: pods(stack, ns, "big"), 30, 0.02, "the first pods")
    pids = stack.controller_pids("statefulset")
    assert pids
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    expected = {f"big-{i}" for i in range(replicas)}
    wait_pod_names(stack, ns, "big", expected, timeout=90)
    wait_for(lambda: status(stack, ns, "big").get("readyReplicas") == replicas, 60, 0.2, f"{replicas} ready")
    assert set(claims(stack, ns)) == {f"data-{n}" for n in expected}
    st = status(stack, ns, "big")
    assert (st["replicas"], st["updatedReplicas"], st["currentReplicas"]) == (replicas, replicas, replicas)
    stack.wait_healthy(60)
