"""PVC and PV protection, generic ephemeral volumes, expansion and the storage admission
plugins, end to end through kubectl: `kcm dev` with the pvc-protection, pv-protection,
ephemeral-volume, persistentvolume-expander and garbage-collector controllers and one simulated
node, on the embedded API server and (with `--apiserver=upstream`) on kube-apiserver.

The PV binder does not run in this stack (tests/e2e/test_pv_binder.py has it): a claim and a
volume are bound by hand here as the binder would bind them (the PV's claimRef and the claim's
volumeName, phases Bound written through the status subresource), and the PV is moved to
Released by hand once its claim is gone.

"Stays Terminating" needs proof that the controller looked and kept the object, not a sleep:
each such test deletes a second, unused object of the same kind after the kept one, and waits
for that one to go. Both controllers run one worker, in key order of arrival, so once the
second is gone the first has been decided too.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
from typing import Any

from tests.conftest import wait_for
from tests.e2e import devstack

stack = devstack.stack_fixture(
    "--controllers",
    "pvc-protection,pv-protection,ephemeral-volume,persistentvolume-expander,garbagecollector",
    "--nodes",
    "1",
)

PVC_FINALIZER = "kubernetes.io/pvc-protection"
PV_FINALIZER = "kubernetes.io/pv-protection"


def namespace(s: devstack.DevStack, name: str) -> str:
    s.kubectl("create", "namespace", name)
    return name


def apply(s: devstack.DevStack, doc: dict[str, Any]) -> None:
    s.kubectl("create", "-f", "-", input=json.dumps(doc))


def get(s: devstack.DevStack, *args: str) -> dict[str, Any] | None:
    res = s.kubectl("get", *args, "-o", "json", check=False)
    if res.returncode != 0:
        assert "NotFound" in res.stderr, res.stderr
        return None
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def must(s: devstack.DevStack, *args: str) -> dict[str, Any]:
    doc = get(s, *args)
    assert doc is not None, f"{args} not found"
    return doc


def claim(name: str, ns: str, **spec: Any) -> dict[str, Any]:
    body = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, **spec}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": ns},
        "spec": body,
    }


def pod(name: str, ns: str, volume: dict[str, Any], **spec: Any) -> dict[str, Any]:
    body = {"containers": [{"name": "main", "image": "busybox:1"}], "volumes": [volume], **spec}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}, "spec": body}


def gone(s: devstack.DevStack, *args: str) -> bool:
    return get(s, *args) is None


def test_a_claim_used_by_a_running_pod_stays_until_the_pod_goes(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "pvc-in-use")
    apply(stack, claim("data", ns))
    apply(stack, claim("spare", ns))
    # StorageObjectInUseProtection admission: the finalizer is there from the start.
    assert must(stack, "-n", ns, "pvc", "data")["metadata"]["finalizers"] == [PVC_FINALIZER]
    apply(stack, pod("user", ns, {"name": "d", "persistentVolumeClaim": {"claimName": "data"}}))
    wait_for(
        lambda: (get(stack, "-n", ns, "pod", "user") or {}).get("status", {}).get("phase") == "Running",
        60,
        interval=0.2,
        what="pod running",
    )
    stack.kubectl("delete", "-n", ns, "pvc", "data", "--wait=false")
    stack.kubectl("delete", "-n", ns, "pvc", "spare", "--wait=false")
    wait_for(lambda: gone(stack, "-n", ns, "pvc", "spare"), 30, interval=0.2, what="unused claim gone")
    kept = get(stack, "-n", ns, "pvc", "data")
    assert kept is not None and kept["metadata"]["deletionTimestamp"]
    assert kept["metadata"]["finalizers"] == [PVC_FINALIZER]
    assert "Terminating" in stack.kubectl("get", "-n", ns, "pvc", "data").stdout
    stack.kubectl("delete", "-n", ns, "pod", "user", "--wait=false")
    wait_for(lambda: gone(stack, "-n", ns, "pvc", "data"), 60, interval=0.2, what="claim gone with its pod")


def test_a_claim_released_while_the_controller_was_killed_goes_after_its_restart(
    stack: devstack.DevStack,
) -> None:
    """kill -9 of the pvc-protection controller's process with a claim in use: the claim deleted
    and its pod gone while no process runs it; the restarted one still lifts the finalizer."""
    ns = namespace(stack, "pvc-kill")
    apply(stack, claim("data", ns))
    apply(stack, pod("user", ns, {"name": "d", "persistentVolumeClaim": {"claimName": "data"}}))
    wait_for(
        lambda: (get(stack, "-n", ns, "pod", "user") or {}).get("status", {}).get("phase") == "Running",
        60,
        interval=0.2,
        what="pod running",
    )
    for pid in stack.controller_pids("pvc-protection"):
        os.kill(pid, signal.SIGKILL)
    stack.kubectl("delete", "-n", ns, "pvc", "data", "--wait=false")
    stack.kubectl("delete", "-n", ns, "pod", "user", "--grace-period=0", "--force")
    wait_for(
        lambda: gone(stack, "-n", ns, "pvc", "data"), 90, interval=0.3, what="claim gone after the restart"
    )
    stack.wait_healthy()


def _bind_by_hand(s: devstack.DevStack, ns: str, pv: str, pvc: str) -> None:
    apply(
        s,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": pv},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": "/tmp/" + pv},
                "claimRef": {"namespace": ns, "name": pvc},
            },
        },
    )
    apply(s, claim(pvc, ns, volumeName=pv))
    bound = json.dumps({"status": {"phase": "Bound"}})
    s.kubectl("patch", "pv", pv, "--subresource=status", "--type=merge", "-p", bound)
    s.kubectl("patch", "-n", ns, "pvc", pvc, "--subresource=status", "--type=merge", "-p", bound)


def test_a_bound_volume_stays_until_it_is_released(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "pv-bound")
    _bind_by_hand(stack, ns, "pv-bound-vol", "claim")
    bound = get(stack, "pv", "pv-bound-vol")
    assert bound is not None and bound["metadata"]["finalizers"] == [PV_FINALIZER]
    assert bound["status"]["phase"] == "Bound" and bound["status"]["lastPhaseTransitionTime"]
    apply(
        stack,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "pv-bound-spare"},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": "/tmp/s"},
            },
        },
    )
    stack.kubectl("delete", "pv", "pv-bound-vol", "--wait=false")
    stack.kubectl("delete", "pv", "pv-bound-spare", "--wait=false")
    wait_for(lambda: gone(stack, "pv", "pv-bound-spare"), 30, interval=0.2, what="unbound volume gone")
    kept = get(stack, "pv", "pv-bound-vol")
    assert kept is not None and kept["metadata"]["deletionTimestamp"]
    assert kept["metadata"]["finalizers"] == [PV_FINALIZER]
    # The claim goes (no pod uses it); the binder would then release the volume: done by hand.
    stack.kubectl("delete", "-n", ns, "pvc", "claim")
    released = json.dumps({"status": {"phase": "Released"}})
    stack.kubectl("patch", "pv", "pv-bound-vol", "--subresource=status", "--type=merge", "-p", released)
    wait_for(lambda: gone(stack, "pv", "pv-bound-vol"), 30, interval=0.2, what="released volume gone")


EPHEMERAL = {
    "name": "scratch",
    "ephemeral": {
        "volumeClaimTemplate": {
            "metadata": {"labels": {"tier": "cache"}, "annotations": {"example.com/note": "x"}},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "resources": {"requests": {"storage": "2Gi"}},
            },
        }
    },
}
# A pod no scheduler binds: the claim protection does not hold a claim of an unscheduled pod.
UNSCHEDULED = {"schedulerName": "nobody"}


def test_an_ephemeral_volume_gets_its_claim_owned_by_the_pod(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "ephemeral")
    apply(stack, pod("web", ns, EPHEMERAL, **UNSCHEDULED))
    owner = get(stack, "-n", ns, "pod", "web")
    assert owner is not None
    made = wait_for(lambda: get(stack, "-n", ns, "pvc", "web-scratch"), 30, interval=0.2, what="claim made")
    assert made["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "web",
            "uid": owner["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert made["metadata"]["labels"] == {"tier": "cache"}
    assert made["metadata"]["annotations"]["example.com/note"] == "x"
    assert made["spec"]["resources"] == {"requests": {"storage": "2Gi"}}
    assert made["spec"]["storageClassName"] == ""
    # Deleted while its pod lives: made again.
    stack.kubectl("delete", "-n", ns, "pvc", "web-scratch", "--wait=false")
    again = wait_for(
        lambda: (
            (c := get(stack, "-n", ns, "pvc", "web-scratch"))
            and c["metadata"]["uid"] != made["metadata"]["uid"]
            and c
        ),
        30,
        interval=0.2,
        what="claim made again",
    )
    assert again["metadata"]["ownerReferences"][0]["uid"] == owner["metadata"]["uid"]
    # Upstream's counter of create requests saw both.
    assert stack.metric("ephemeral-volume-controller", "ephemeral_volume_controller_create_total") >= 2
    # The garbage collector deletes it with its pod.
    stack.kubectl("delete", "-n", ns, "pod", "web", "--wait=false")
    wait_for(lambda: gone(stack, "-n", ns, "pvc", "web-scratch"), 60, interval=0.2, what="claim collected")


def test_a_claim_of_that_name_made_by_someone_else_is_left_alone(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "ephemeral-clash")
    apply(stack, claim("clash-scratch", ns, storageClassName=""))
    before = must(stack, "-n", ns, "pvc", "clash-scratch")
    apply(stack, pod("clash", ns, EPHEMERAL, **UNSCHEDULED))
    expected = f"ephemeral volume scratch: PVC {ns}/clash-scratch was not created for pod {ns}/clash (pod is not owner)"

    def event() -> dict[str, Any] | None:
        items = (get(stack, "-n", ns, "events", "--field-selector=involvedObject.name=clash") or {}).get(
            "items", []
        )
        return next((e for e in items if e.get("reason") == "FailedBinding"), None)

    found = wait_for(event, 30, interval=0.2, what="FailedBinding event")
    assert found["type"] == "Warning" and found["message"] == expected
    assert found["source"]["component"] == "ephemeral_volume"
    after = get(stack, "-n", ns, "pvc", "clash-scratch")
    assert after is not None and after["metadata"].get("ownerReferences") is None
    assert after["metadata"]["uid"] == before["metadata"]["uid"]


def _stamp(doc: dict[str, Any]) -> dt.datetime:
    return dt.datetime.fromisoformat(doc["metadata"]["creationTimestamp"].replace("Z", "+00:00"))


def storage_class(name: str, *, default: bool = False, expand: bool | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "example.com/none",
    }
    if default:
        doc["metadata"]["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    if expand is not None:
        doc["allowVolumeExpansion"] = expand
    return doc


def test_default_storage_class_admission(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "default-class")
    # The default class `kcm dev` ships, as kind does.
    apply(stack, claim("before", ns))
    assert must(stack, "-n", ns, "pvc", "before")["spec"]["storageClassName"] == "standard"
    try:
        apply(stack, storage_class("aa-older", default=True))
        older = get(stack, "storageclass", "aa-older")
        assert older is not None
        # The newest default wins, whatever the names say: create the second one a second later.
        wait_for(
            lambda: dt.datetime.now(dt.UTC).replace(microsecond=0) > _stamp(older),
            5,
            interval=0.05,
            what="a new second",
        )
        apply(stack, storage_class("zz-newer", default=True))
        apply(stack, claim("defaulted", ns))
        assert must(stack, "-n", ns, "pvc", "defaulted")["spec"]["storageClassName"] == "zz-newer"
        apply(stack, claim("explicit-none", ns, storageClassName=""))
        assert must(stack, "-n", ns, "pvc", "explicit-none")["spec"]["storageClassName"] == ""
    finally:
        stack.kubectl("delete", "storageclass", "aa-older", "zz-newer", "--ignore-not-found")


def test_resize_admission_refuses_growing_a_claim_its_class_cannot_expand(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "resize")
    try:
        apply(stack, storage_class("fixed-size", expand=False))
        apply(stack, storage_class("growable", expand=True))
        for name, cls in (("fixed", "fixed-size"), ("grows", "growable")):
            apply(stack, claim(name, ns, storageClassName=cls, volumeName=f"pv-{name}"))
            stack.kubectl(
                "patch",
                "-n",
                ns,
                "pvc",
                name,
                "--subresource=status",
                "--type=merge",
                "-p",
                json.dumps({"status": {"phase": "Bound", "capacity": {"storage": "1Gi"}}}),
            )
        bigger = json.dumps({"spec": {"resources": {"requests": {"storage": "2Gi"}}}})
        refused = stack.kubectl("patch", "-n", ns, "pvc", "fixed", "--type=merge", "-p", bigger, check=False)
        assert refused.returncode != 0
        assert (
            'persistentvolumeclaims "fixed" is forbidden: only dynamically provisioned pvc can be resized and '
            "the storageclass that provisions the pvc must support resize"
        ) in refused.stderr
        stack.kubectl("patch", "-n", ns, "pvc", "grows", "--type=merge", "-p", bigger)
        grown = get(stack, "-n", ns, "pvc", "grows")
        assert grown is not None and grown["spec"]["resources"]["requests"]["storage"] == "2Gi"
    finally:
        stack.kubectl("delete", "storageclass", "fixed-size", "growable", "--ignore-not-found")


def test_a_grown_csi_claim_is_left_to_the_drivers_resizer(stack: devstack.DevStack) -> None:
    """kcm's expander records ExternalExpanding (source volume_expand) and leaves the claim to the
    simulated driver's external-resizer, which grows the volume; the node that mounts it (a
    running pod's) then grows the claim."""
    ns = namespace(stack, "expand")
    apply(
        stack,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "pv-expand-vol"},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "standard",
                "persistentVolumeReclaimPolicy": "Retain",
                "csi": {"driver": "csi.sim.kcm.dev", "volumeHandle": "pv-expand-vol"},
                "claimRef": {"namespace": ns, "name": "data"},
            },
        },
    )
    apply(stack, claim("data", ns, storageClassName="standard", volumeName="pv-expand-vol"))
    claim_uid = must(stack, "-n", ns, "pvc", "data")["metadata"]["uid"]
    # Bound by hand as the binder would: the PV's claimRef names the claim's uid.
    ref = json.dumps({"spec": {"claimRef": {"uid": claim_uid}}})
    stack.kubectl("patch", "pv", "pv-expand-vol", "--type=merge", "-p", ref)
    bound = json.dumps({"status": {"phase": "Bound", "capacity": {"storage": "1Gi"}}})
    stack.kubectl("patch", "pv", "pv-expand-vol", "--subresource=status", "--type=merge", "-p", bound)
    stack.kubectl("patch", "-n", ns, "pvc", "data", "--subresource=status", "--type=merge", "-p", bound)
    apply(stack, pod("user", ns, {"name": "d", "persistentVolumeClaim": {"claimName": "data"}}))
    wait_for(
        lambda: (get(stack, "-n", ns, "pod", "user") or {}).get("status", {}).get("phase") == "Running",
        30,
        interval=0.2,
        what="pod Running",
    )
    bigger = json.dumps({"spec": {"resources": {"requests": {"storage": "2Gi"}}}})
    stack.kubectl("patch", "-n", ns, "pvc", "data", "--type=merge", "-p", bigger)

    def expanding() -> dict[str, Any] | None:
        found = must(stack, "-n", ns, "events", "--field-selector", "involvedObject.name=data")["items"]
        return next((e for e in found if e["reason"] == "ExternalExpanding"), None)

    event = wait_for(expanding, 30, interval=0.2, what="ExternalExpanding event")
    assert (event["type"], event["message"]) == (
        "Normal",
        "waiting for an external controller to expand this PVC",
    )
    assert event["source"]["component"] == "volume_expand"
    wait_for(
        lambda: must(stack, "-n", ns, "pvc", "data")["status"].get("capacity", {}).get("storage") == "2Gi",
        30,
        interval=0.2,
        what="the claim's capacity 2Gi",
    )
    assert must(stack, "pv", "pv-expand-vol")["spec"]["capacity"]["storage"] == "2Gi"
    # The resizer's business alone: upstream sets the resizer annotation only for migrated
    # in-tree volumes.
    assert "volume.kubernetes.io/storage-resizer" not in (
        must(stack, "-n", ns, "pvc", "data")["metadata"].get("annotations") or {}
    )
