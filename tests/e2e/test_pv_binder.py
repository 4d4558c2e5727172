"""The persistentvolume-binder-controller end to end through kubectl: `kcm dev` with the binder
and the PV/PVC protection controllers, on the embedded API server and (with
`--apiserver=upstream`) on kube-apiserver.

Static binding (the smallest matching volume, annotations, phases, the claim's capacity), pre-
binding both ways, VolumeMismatch, release with Retain and with Delete (a volume no provisioner
made fails, one an external provisioner made is left to it: the simulated CSI driver's, which
deletes it), a hand-bound claim whose volume is missing (ClaimLost) or holds another claim
(ClaimMisbound), FailedBinding, the hand-off to that driver's external-provisioner (which makes
the volume the claim is bound to) and the WaitForFirstConsumer / WaitForPodScheduled Events; a
claim made while the binder's process is killed (-9) is bound once it is back.

PersistentVolumes are cluster-scoped: each test names its volumes and its storage class after
its namespace, so one test's volume can never match another's claim.
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any

from tests.conftest import wait_for
from tests.e2e import devstack

stack = devstack.stack_fixture(
    "--controllers",
    "persistentvolume-binder,pv-protection,pvc-protection",
    "--nodes",
    "1",
    "--pvclaimbinder-sync-period=2s",
)

BOUND_BY = "pv.kubernetes.io/bound-by-controller"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
PROVISIONER = "csi.sim.kcm.dev"


def namespace(s: devstack.DevStack, name: str) -> str:
    s.kubectl("create", "namespace", name)
    return name


def apply(s: devstack.DevStack, *docs: dict[str, Any]) -> None:
    s.kubectl("create", "-f", "-", input="\n".join(json.dumps(d) for d in docs))


def get(s: devstack.DevStack, *args: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(s.kubectl("get", *args, "-o", "json").stdout)
    return doc


def volume(
    name: str,
    size: str,
    cls: str,
    *,
    policy: str = "Retain",
    source: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    spec = {
        "capacity": {"storage": size},
        "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": policy,
        "storageClassName": cls,
        **(source or {"csi": {"driver": PROVISIONER, "volumeHandle": name}}),
        **extra.pop("spec", {}),
    }
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name, **extra}, "spec": spec}


def claim(
    name: str,
    ns: str,
    cls: str | None,
    size: str = "1Gi",
    *,
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": size}},
        **spec,
    }
    if cls is not None:
        body["storageClassName"] = cls
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations or {}},
        "spec": body,
    }


def wait_phase(s: devstack.DevStack, kind: str, name: str, phase: str, ns: str = "") -> dict[str, Any]:
    where = ("-n", ns) if ns else ()

    def reached() -> dict[str, Any] | None:
        obj = get(s, kind, name, *where)
        return obj if obj.get("status", {}).get("phase") == phase else None

    found: dict[str, Any] = wait_for(reached, 60, interval=0.2, what=f"{kind} {name} {phase}")
    return found


def wait_event(s: devstack.DevStack, ns: str, name: str, reason: str) -> dict[str, Any]:
    selector = f"involvedObject.name={name},reason={reason}"

    def found() -> dict[str, Any] | None:
        items = get(s, "events", "-n", ns, "--field-selector", selector).get("items", [])
        return items[0] if items else None

    event: dict[str, Any] = wait_for(found, 60, interval=0.2, what=f"{reason} Event of {name}")
    assert event["source"]["component"] == "persistentvolume-controller"
    return event


def test_a_claim_binds_the_smallest_matching_volume(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "pvb-static")
    apply(
        stack,
        volume(f"{ns}-big", "5Gi", ns),
        volume(f"{ns}-small", "1Gi", ns),
        volume(f"{ns}-tiny", "100Mi", ns),
        volume(f"{ns}-other-class", "1Gi", f"{ns}-other"),
    )
    for name in ("big", "small", "tiny", "other-class"):
        wait_phase(stack, "pv", f"{ns}-{name}", "Available")
    apply(stack, claim("data", ns, ns))
    c = wait_phase(stack, "pvc", "data", "Bound", ns)
    assert c["spec"]["volumeName"] == f"{ns}-small"
    assert c["metadata"]["annotations"][BIND_COMPLETED] == "yes"
    assert c["metadata"]["annotations"][BOUND_BY] == "yes"
    assert c["status"]["capacity"] == {"storage": "1Gi"}
    assert c["status"]["accessModes"] == ["ReadWriteOnce"]
    v = wait_phase(stack, "pv", f"{ns}-small", "Bound")
    ref = v["spec"]["claimRef"]
    assert (ref["kind"], ref["namespace"], ref["name"], ref["uid"]) == (
        "PersistentVolumeClaim",
        ns,
        "data",
        c["metadata"]["uid"],
    )
    assert v["metadata"]["annotations"][BOUND_BY] == "yes"
    assert v["status"]["lastPhaseTransitionTime"]
    for name in ("big", "tiny", "other-class"):
        assert "claimRef" not in get(stack, "pv", f"{ns}-{name}")["spec"]


def test_pre_bound_both_ways_and_a_volume_that_does_not_fit(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "pvb-prebound")
    apply(
        stack,
        volume(f"{ns}-small", "1Gi", ns),
        volume(f"{ns}-reserved", "5Gi", ns, spec={"claimRef": {"namespace": ns, "name": "reserved"}}),
        volume(f"{ns}-named", "5Gi", ns),
        volume(f"{ns}-tiny", "1Mi", ns),
    )
    apply(
        stack,
        claim("reserved", ns, ns),
        claim("named", ns, ns, volumeName=f"{ns}-named"),
        claim("mismatch", ns, ns, volumeName=f"{ns}-tiny"),
    )
    # The volume reserved for the claim wins over the smaller one; the user's binding carries
    # no bound-by-controller on the volume, and the claim's has it.
    c = wait_phase(stack, "pvc", "reserved", "Bound", ns)
    assert c["spec"]["volumeName"] == f"{ns}-reserved"
    assert BOUND_BY in c["metadata"]["annotations"]
    v = wait_phase(stack, "pv", f"{ns}-reserved", "Bound")
    assert BOUND_BY not in v["metadata"].get("annotations", {})
    # A claim naming its volume: the other way round.
    c = wait_phase(stack, "pvc", "named", "Bound", ns)
    assert BOUND_BY not in c["metadata"]["annotations"]
    assert get(stack, "pv", f"{ns}-named")["metadata"]["annotations"][BOUND_BY] == "yes"
    event = wait_event(stack, ns, "mismatch", "VolumeMismatch")
    assert event["type"] == "Warning"
    assert event["message"] == f'Cannot bind to requested volume "{ns}-tiny": requested PV is too small'
    assert get(stack, "pvc", "mismatch", "-n", ns)["status"]["phase"] == "Pending"
    assert "claimRef" not in get(stack, "pv", f"{ns}-small")["spec"]


def test_hand_bound_claims_are_lost_or_misbound(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "pvb-lost")
    done = {BIND_COMPLETED: "yes"}
    # A claim bound by hand to a volume that does not exist is lost.
    apply(stack, claim("orphan", ns, ns, annotations=done, volumeName=f"{ns}-missing"))
    event = wait_event(stack, ns, "orphan", "ClaimLost")
    assert event["type"] == "Warning"
    assert event["message"] == "Bound claim has lost its PersistentVolume. Data on the volume is lost!"
    wait_phase(stack, "pvc", "orphan", "Lost", ns)
    # A claim bound by hand to a volume that holds another claim (its claimRef carries that
    # claim's uid) is misbound, as upstream's binder calls it (the differential's attachdetach
    # scenario found it on its second side); the volume stays with its claim.
    apply(stack, claim("owner", ns, ns, volumeName=f"{ns}-held"))
    apply(stack, volume(f"{ns}-held", "1Gi", ns, spec={"claimRef": {"namespace": ns, "name": "owner"}}))
    owner = wait_phase(stack, "pvc", "owner", "Bound", ns)
    apply(stack, claim("intruder", ns, ns, annotations=done, volumeName=f"{ns}-held"))
    event = wait_event(stack, ns, "intruder", "ClaimMisbound")
    assert event["type"] == "Warning"
    assert event["message"] == "Two claims are bound to the same volume, this one is bound incorrectly"
    wait_phase(stack, "pvc", "intruder", "Lost", ns)
    assert get(stack, "pv", f"{ns}-held")["spec"]["claimRef"]["uid"] == owner["metadata"]["uid"]
    assert get(stack, "pvc", "owner", "-n", ns)["status"]["phase"] == "Bound"


def test_released_volumes_are_retained_or_wait_for_their_deleter(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "pvb-reclaim")
    provisioned = {"annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER}}
    apply(
        stack,
        volume(f"{ns}-retain", "1Gi", f"{ns}-retain"),
        volume(f"{ns}-static", "1Gi", f"{ns}-static", policy="Delete"),
        volume(f"{ns}-provisioned", "1Gi", f"{ns}-provisioned", policy="Delete", **provisioned),
        volume(
            f"{ns}-nfs",
            "1Gi",
            f"{ns}-nfs",
            policy="Delete",
            source={"nfs": {"server": "nfs.example", "path": "/v"}},
        ),
    )
    names = ("retain", "static", "provisioned", "nfs")
    apply(stack, *(claim(name, ns, f"{ns}-{name}") for name in names))
    for name in names:
        wait_phase(stack, "pvc", name, "Bound", ns)
        stack.kubectl("delete", "pvc", name, "-n", ns, "--wait=false")
    v = wait_phase(stack, "pv", f"{ns}-retain", "Released")
    assert v["spec"]["claimRef"]["name"] == "retain"  # kept, as Retain means
    # An in-tree volume with Delete has no deleter (upstream's NFS plugin deletes nothing).
    v = wait_phase(stack, "pv", f"{ns}-nfs", "Failed")
    message = f'error getting deleter volume plugin for volume "{ns}-nfs": no deletable volume plugin matched'
    assert v["status"]["message"] == message
    event = wait_event(stack, "default", f"{ns}-nfs", "VolumeFailedDelete")
    assert (event["type"], event["message"]) == ("Warning", message)
    # CSI volumes are left Released for their external deleter (upstream findDeletablePlugin): a
    # static one stays so; the simulated driver (csi.sim.kcm.dev) deletes the one it provisioned.
    v = wait_phase(stack, "pv", f"{ns}-static", "Released")
    assert "message" not in v["status"]
    wait_for(
        lambda: stack.kubectl("get", "pv", f"{ns}-provisioned", check=False).returncode != 0,
        30,
        interval=0.2,
        what="the provisioned volume deleted by its provisioner",
    )


def test_failed_binding_and_the_hand_off_to_the_external_provisioner(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "pvb-provision")
    sc = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": f"{ns}-now"},
        "provisioner": PROVISIONER,
        "volumeBindingMode": "Immediate",
    }
    apply(stack, sc)
    apply(
        stack,
        claim("classless", ns, ""),
        claim("dynamic", ns, f"{ns}-now"),
        claim("nosuch", ns, f"{ns}-gone"),
    )
    event = wait_event(stack, ns, "classless", "FailedBinding")
    assert (event["type"], event["message"]) == (
        "Normal",
        "no persistent volumes available for this claim and no storage class is set",
    )
    event = wait_event(stack, ns, "dynamic", "ExternalProvisioning")
    assert f"external provisioner '{PROVISIONER}'" in event["message"]
    ann = get(stack, "pvc", "dynamic", "-n", ns)["metadata"]["annotations"]
    assert ann["volume.kubernetes.io/storage-provisioner"] == PROVISIONER
    assert ann["volume.beta.kubernetes.io/storage-provisioner"] == PROVISIONER
    event = wait_event(stack, ns, "nosuch", "ProvisioningFailed")
    assert (event["type"], event["message"]) == (
        "Warning",
        f'storageclass.storage.k8s.io "{ns}-gone" not found',
    )
    # The simulated driver's external-provisioner makes the volume, pre-bound to the claim, and
    # the binder binds it.
    uid = get(stack, "pvc", "dynamic", "-n", ns)["metadata"]["uid"]
    assert wait_phase(stack, "pvc", "dynamic", "Bound", ns)["spec"]["volumeName"] == f"pvc-{uid}"


def test_wait_for_first_consumer(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "pvb-wffc")
    sc = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": f"{ns}-late"},
        "provisioner": PROVISIONER,
        "volumeBindingMode": "WaitForFirstConsumer",
    }
    apply(stack, sc, volume(f"{ns}-pv", "1Gi", f"{ns}-late"))
    apply(stack, claim("data", ns, f"{ns}-late"))
    event = wait_event(stack, ns, "data", "WaitForFirstConsumer")
    assert (event["type"], event["message"]) == (
        "Normal",
        "waiting for first consumer to be created before binding",
    )
    # A pod that cannot be scheduled (no node has its label) is named.
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "user", "namespace": ns},
        "spec": {
            "containers": [{"name": "main", "image": "busybox:1"}],
            "nodeSelector": {"kcm.test/none": "none"},
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}],
        },
    }
    apply(stack, pod)
    event = wait_event(stack, ns, "data", "WaitForPodScheduled")
    assert event["message"] == "waiting for pod user to be scheduled"
    # The binder leaves the volume to the scheduler: still unbound.
    assert "claimRef" not in get(stack, "pv", f"{ns}-pv")["spec"]
    # Once a node is selected, provisioning is handed on.
    stack.kubectl("annotate", "pvc", "data", "-n", ns, "volume.kubernetes.io/selected-node=node-0")
    wait_event(stack, ns, "data", "ExternalProvisioning")
    ann = get(stack, "pvc", "data", "-n", ns)["metadata"]["annotations"]
    assert ann["volume.kubernetes.io/storage-provisioner"] == PROVISIONER


def test_a_claim_made_while_the_binder_is_killed_is_bound(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "pvb-killed")
    pids = stack.controller_pids("persistentvolume-binder")
    assert pids
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    apply(stack, volume(f"{ns}-pv", "1Gi", ns))
    apply(stack, claim("data", ns, ns))
    c = wait_phase(stack, "pvc", "data", "Bound", ns)
    assert c["spec"]["volumeName"] == f"{ns}-pv"
    wait_phase(stack, "pv", f"{ns}-pv", "Bound")
    assert not set(stack.controller_pids("persistentvolume-binder")) & set(pids)
