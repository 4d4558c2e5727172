"""The simulated CSI driver `csi.sim.kcm.dev` end to end through kubectl, on the embedded API
server and (with `--apiserver=upstream`) on kube-apiserver.

kcm's controllers: the StatefulSet controller makes the claims, the PV binder hands them to the
driver (`volume.kubernetes.io/storage-provisioner`), binds them and releases volumes, the
expander leaves growth to the driver, the protection controllers and the garbage collector let
claims and volumes go; the simulator plays the driver's sidecars, the scheduler's volume
binding and the kubelets.

One stack for the module, a namespace per test: a StatefulSet with volumeClaimTemplates on
the default class `standard` (WaitForFirstConsumer, which `kcm dev` creates) gets its claims
provisioned in the zone of the node each pod was scheduled to, Bound, and its pods Running;
a deleted claim's volume is deleted (reclaim Delete); a grown claim's volume and then the
claim itself grow (the resizer, then the node of the pod that mounts it); a claim grown while
the expander's process is killed (-9) gets its ExternalExpanding once the expander is back,
once, and its new size once a pod mounts it.
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

stack = devstack.stack_fixture(
    "--controllers",
    "statefulset,persistentvolume-binder,persistentvolume-expander,pvc-protection,pv-protection,garbagecollector",
    "--nodes",
    "2",
)
_counter = iter(range(1000))
DRIVER = "csi.sim.kcm.dev"


@pytest.fixture
def ns(stack: devstack.DevStack) -> Iterator[str]:
    name = f"csi-{next(_counter)}"
    stack.kubectl("create", "namespace", name)
    yield name


def get(stack: devstack.DevStack, *args: str) -> Any:
    return json.loads(stack.kubectl("get", *args, "-o", "json").stdout)


def statefulset(name: str, replicas: int) -> str:
    return json.dumps(
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": name},
            "spec": {
                "serviceName": name,
                "replicas": replicas,
                "podManagementPolicy": "Parallel",
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "c", "image": "nginx:1"}]},
                },
                "volumeClaimTemplates": [
                    {
                        "metadata": {"name": "data"},
                        "spec": {
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}},
                        },
                    }
                ],
            },
        }
    )


def running(stack: devstack.DevStack, ns: str, count: int) -> dict[str, Any]:
    pods = {p["metadata"]["name"]: p for p in get(stack, "-n", ns, "pods")["items"]}
    ok = len(pods) == count and all(p["status"].get("phase") == "Running" for p in pods.values())
    return pods if ok else {}


def claims(stack: devstack.DevStack, ns: str) -> dict[str, Any]:
    return {c["metadata"]["name"]: c for c in get(stack, "-n", ns, "pvc")["items"]}


def volume(stack: devstack.DevStack, name: str) -> Any:
    res = stack.kubectl("get", "pv", name, "-o", "json", check=False)
    return json.loads(res.stdout) if res.returncode == 0 else None


def events(stack: devstack.DevStack, ns: str, name: str) -> list[tuple[str, str, str]]:
    found = get(stack, "-n", ns, "events", "--field-selector", f"involvedObject.name={name}")["items"]
    return [(e["reason"], e["message"], e["source"].get("component", "")) for e in found]


def test_the_default_class_and_driver_ship_with_kcm_dev(stack: devstack.DevStack) -> None:
    standard = get(stack, "storageclass", "standard")
    assert standard["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] == "true"
    assert (standard["provisioner"], standard["reclaimPolicy"], standard["volumeBindingMode"]) == (
        DRIVER,
        "Delete",
        "WaitForFirstConsumer",
    )
    assert standard["allowVolumeExpansion"] is True
    assert get(stack, "csidriver", DRIVER)["spec"]["attachRequired"] is True


def test_a_statefulsets_claims_are_provisioned_bound_and_its_pods_run(
    stack: devstack.DevStack, ns: str
) -> None:
    stack.kubectl("apply", "-n", ns, "-f", "-", input=statefulset("db", 2))
    pods = wait_for(lambda: running(stack, ns, 2), 90, interval=0.5, what="2 pods Running")
    got = claims(stack, ns)
    assert set(got) == {"data-db-0", "data-db-1"}
    nodes = {n["metadata"]["name"]: n for n in get(stack, "nodes")["items"]}
    for index in (0, 1):
        claim = got[f"data-db-{index}"]
        node = pods[f"db-{index}"]["spec"]["nodeName"]
        assert claim["status"]["phase"] == "Bound"
        assert claim["spec"]["storageClassName"] == "standard"
        # WaitForFirstConsumer: the scheduler chose the node, the volume was made where it is.
        assert claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == node
        pv = volume(stack, claim["spec"]["volumeName"])
        assert pv["metadata"]["name"] == f"pvc-{claim['metadata']['uid']}"
        assert pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"] == DRIVER
        assert "external-provisioner.volume.kubernetes.io/finalizer" in pv["metadata"]["finalizers"]
        assert pv["spec"]["csi"]["driver"] == DRIVER
        assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
        assert pv["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"]
        zone = nodes[node]["metadata"]["labels"]["topology.kubernetes.io/zone"]
        [term] = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
        assert term["matchExpressions"] == [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}
        ]
        seen = events(stack, ns, f"data-db-{index}")
        reasons = {reason: (message, source) for reason, message, source in seen}
        assert (
            reasons["Provisioning"][0]
            == f'External provisioner is provisioning volume for claim "{ns}/data-db-{index}"'
        )
        assert (
            reasons["ProvisioningSucceeded"][0] == f"Successfully provisioned volume {pv['metadata']['name']}"
        )
        assert reasons["ProvisioningSucceeded"][1].startswith(f"{DRIVER}_")


def test_a_deleted_claims_volume_is_deleted(stack: devstack.DevStack, ns: str) -> None:
    stack.kubectl("apply", "-n", ns, "-f", "-", input=statefulset("gone", 1))
    wait_for(lambda: running(stack, ns, 1), 90, interval=0.5, what="the pod Running")
    pv_name = claims(stack, ns)["data-gone-0"]["spec"]["volumeName"]
    assert volume(stack, pv_name) is not None
    stack.kubectl("delete", "-n", ns, "statefulset", "gone")
    wait_for(lambda: not get(stack, "-n", ns, "pods")["items"], 60, interval=0.5, what="the pod gone")
    stack.kubectl("delete", "-n", ns, "pvc", "data-gone-0")
    # Released by the binder; deleted by the driver, which lifts its finalizer.
    wait_for(lambda: volume(stack, pv_name) is None, 60, interval=0.5, what=f"PV {pv_name} deleted")


def test_a_grown_claim_grows_its_volume_and_then_itself(stack: devstack.DevStack, ns: str) -> None:
    stack.kubectl("apply", "-n", ns, "-f", "-", input=statefulset("big", 1))
    wait_for(lambda: running(stack, ns, 1), 90, interval=0.5, what="the pod Running")
    bigger = json.dumps({"spec": {"resources": {"requests": {"storage": "3Gi"}}}})
    stack.kubectl("patch", "-n", ns, "pvc", "data-big-0", "--type=merge", "-p", bigger)

    def grown() -> Any:
        claim = claims(stack, ns)["data-big-0"]
        return claim if claim["status"].get("capacity", {}).get("storage") == "3Gi" else None

    claim = wait_for(grown, 60, interval=0.5, what="the claim's capacity 3Gi")
    assert not claim["status"].get("conditions")
    assert volume(stack, claim["spec"]["volumeName"])["spec"]["capacity"]["storage"] == "3Gi"
    reasons = {reason for reason, _, _ in events(stack, ns, "data-big-0")}
    assert {"ExternalExpanding", "Resizing", "FileSystemResizeRequired"} <= reasons
    pod_events = events(stack, ns, "big-0")
    assert any(
        reason == "FileSystemResizeSuccessful" and source == "kubelet" for reason, _, source in pod_events
    )


def test_a_claim_grown_while_the_expander_is_killed_is_expanded_after_its_restart(
    stack: devstack.DevStack, ns: str
) -> None:
    """kill -9 of the expander's process, then a Bound claim grown while none runs: the driver's
    resizer grows the volume meanwhile (the filesystem waits for a pod to mount it, so the
    claim still asks for more than it has); the restarted expander records ExternalExpanding
    exactly once, and a pod mounting the claim gives it its new size and clears the condition."""
    cls = f"{ns}-immediate"
    stack.kubectl(
        "create",
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": cls},
                "provisioner": DRIVER,
                "volumeBindingMode": "Immediate",
                "allowVolumeExpansion": True,
            }
        ),
    )
    try:
        claim = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data"},
            "spec": {
                "storageClassName": cls,
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
        stack.kubectl("create", "-n", ns, "-f", "-", input=json.dumps(claim))
        bound = wait_for(
            lambda: (c := claims(stack, ns)["data"])["status"].get("phase") == "Bound" and c,
            60,
            interval=0.5,
            what="the claim provisioned and Bound",
        )
        pv_name = bound["spec"]["volumeName"]
        for pid in stack.controller_pids("persistentvolume-expander"):
            os.kill(pid, signal.SIGKILL)
        bigger = json.dumps({"spec": {"resources": {"requests": {"storage": "2Gi"}}}})
        stack.kubectl("patch", "-n", ns, "pvc", "data", "--type=merge", "-p", bigger)

        def pending() -> bool:
            conditions = claims(stack, ns)["data"]["status"].get("conditions") or []
            return any(c["type"] == "FileSystemResizePending" for c in conditions)

        wait_for(pending, 60, interval=0.5, what="the volume grown, the filesystem pending")
        assert volume(stack, pv_name)["spec"]["capacity"]["storage"] == "2Gi"
        stack.wait_healthy()

        def expanding() -> list[tuple[str, str, str, int]]:
            found = get(stack, "-n", ns, "events", "--field-selector", "involvedObject.name=data")["items"]
            return [
                (e["type"], e["message"], e["source"].get("component", ""), e.get("count") or 1)
                for e in found
                if e["reason"] == "ExternalExpanding"
            ]

        recorded = wait_for(expanding, 60, interval=0.5, what="ExternalExpanding after the restart")
        user = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "user"},
            "spec": {
                "containers": [{"name": "c", "image": "nginx:1"}],
                "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}],
            },
        }
        stack.kubectl("create", "-n", ns, "-f", "-", input=json.dumps(user))

        # The node side's finish (capacity 2Gi, FileSystemResizePending gone); the capacity alone
        # may show first (it did once on kube-apiserver).
        def grown() -> Any:
            claim = claims(stack, ns)["data"]
            status = claim["status"]
            return (
                claim
                if status.get("capacity", {}).get("storage") == "2Gi" and not status.get("conditions")
                else None
            )

        wait_for(grown, 90, interval=0.5, what="the claim's capacity 2Gi, no condition left")
        assert {"Resizing", "FileSystemResizeRequired"} <= {r for r, _, _ in events(stack, ns, "data")}
        assert any(
            reason == "FileSystemResizeSuccessful" and source == "kubelet"
            for reason, _, source in events(stack, ns, "user")
        )
        # Recorded once: neither the growth of the capacity nor the resizer's updates asked
        # the expander again.
        assert (
            expanding()
            == recorded
            == [("Normal", "waiting for an external controller to expand this PVC", "volume_expand", 1)]
        )
    finally:
        stack.kubectl("delete", "-n", ns, "pod", "--all", "--wait=false")
        stack.kubectl("delete", "storageclass", cls)
