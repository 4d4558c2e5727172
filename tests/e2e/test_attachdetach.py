"""The attach/detach controller and the simulated CSI driver's attach path, end to end through
kubectl: `kcm dev` with the persistentvolume-attach-detach-controller and one simulated node,
on the embedded API server and (with `--apiserver=upstream`) on kube-apiserver.

Static PVs bound by hand both ways (claimRef and volumeName, phases Bound through the status
subresource), as no PV binder runs in this stack. The simulator plays the external-attacher
for `csi.sim.kcm.dev` and the kubelet's volume manager (volumesInUse, waiting for
volumesAttached before the containers start).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from tests.conftest import wait_for
from tests.e2e import devstack

stack = devstack.stack_fixture("--controllers", "attachdetach", "--nodes", "1")

DRIVER = "csi.sim.kcm.dev"
NODE = "sim-node-0"


def _apply(s: devstack.DevStack, doc: dict[str, Any]) -> None:
    s.kubectl("apply", "-f", "-", input=json.dumps(doc))


def _get(s: devstack.DevStack, *args: str) -> dict[str, Any] | None:
    res = s.kubectl("get", *args, "-o", "json", check=False)
    if res.returncode != 0:
        assert "NotFound" in res.stderr, res.stderr
        return None
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def _driver(s: devstack.DevStack, name: str, attach_required: bool) -> None:
    _apply(
        s,
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSIDriver",
            "metadata": {"name": name},
            "spec": {"attachRequired": attach_required},
        },
    )


def _bound_volume(s: devstack.DevStack, ns: str, pv: str, claim: str, driver: str, handle: str) -> None:
    """A CSI PV and its claim, bound to each other by hand as the binder would (the claimRef
    with the claim's uid: upstream attaches nothing for a PV whose claimRef lacks it)."""
    _apply(
        s,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": ns},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
                "volumeName": pv,
                "storageClassName": "",
            },
        },
    )
    uid = (_get(s, "-n", ns, "pvc", claim) or {})["metadata"]["uid"]
    _apply(
        s,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": pv},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "csi": {"driver": driver, "volumeHandle": handle},
                "claimRef": {"namespace": ns, "name": claim, "uid": uid},
            },
        },
    )
    bound = json.dumps({"status": {"phase": "Bound"}})
    s.kubectl("patch", "pv", pv, "--subresource=status", "--type=merge", "-p", bound)
    s.kubectl("patch", "-n", ns, "pvc", claim, "--subresource=status", "--type=merge", "-p", bound)


def _pod(s: devstack.DevStack, ns: str, name: str, claim: str) -> None:
    _apply(
        s,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "containers": [{"name": "main", "image": "busybox:1"}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
            },
        },
    )


def _phase(s: devstack.DevStack, ns: str, pod: str) -> str:
    return str(((_get(s, "-n", ns, "pod", pod) or {}).get("status") or {}).get("phase", ""))


def _node_status(s: devstack.DevStack) -> dict[str, Any]:
    node = _get(s, "node", NODE)
    assert node is not None
    status: dict[str, Any] = node.get("status") or {}
    return status


def _attached_names(s: devstack.DevStack) -> list[str]:
    return [v["name"] for v in _node_status(s).get("volumesAttached") or []]


def _attachments_of(s: devstack.DevStack, pv: str) -> list[dict[str, Any]]:
    listing = _get(s, "volumeattachments") or {}
    return [
        va
        for va in listing.get("items") or []
        if va["spec"].get("source", {}).get("persistentVolumeName") == pv
    ]


def test_a_pod_gets_its_volume_attached_before_it_runs_and_detached_after(stack: devstack.DevStack) -> None:
    ns = "attach-cycle"
    stack.kubectl("create", "namespace", ns)
    _driver(stack, DRIVER, True)
    pv, handle = "attach-cycle-pv", "attach-cycle-handle"
    _bound_volume(stack, ns, pv, "data", DRIVER, handle)
    _pod(stack, ns, "user", "data")

    # Upstream's name: csi-<sha256 of volume handle, driver and node name, run together>.
    name = "csi-" + hashlib.sha256(f"{handle}{DRIVER}{NODE}".encode()).hexdigest()
    va = wait_for(lambda: _get(stack, "volumeattachment", name), 60, interval=0.2, what="VolumeAttachment")
    assert va["spec"] == {"attacher": DRIVER, "nodeName": NODE, "source": {"persistentVolumeName": pv}}
    attached = wait_for(
        lambda: (a := _get(stack, "volumeattachment", name)) and a.get("status", {}).get("attached") and a,
        60,
        interval=0.2,
        what="attached",
    )
    assert attached["metadata"]["finalizers"] == ["external-attacher/csi-sim-kcm-dev"]
    unique = f"kubernetes.io/csi/{DRIVER}^{handle}"
    wait_for(lambda: unique in _attached_names(stack), 60, interval=0.2, what="node.status.volumesAttached")
    assert {"name": unique, "devicePath": ""} in _node_status(stack)["volumesAttached"]
    wait_for(lambda: _phase(stack, ns, "user") == "Running", 60, interval=0.2, what="pod Running")
    wait_for(
        lambda: unique in (_node_status(stack).get("volumesInUse") or []),
        30,
        interval=0.2,
        what="volumesInUse",
    )

    def attach_event() -> dict[str, Any] | None:
        listing = _get(stack, "-n", ns, "events", "--field-selector", "involvedObject.name=user") or {}
        found = [e for e in listing.get("items") or [] if e.get("reason") == "SuccessfulAttachVolume"]
        return found[0] if found else None

    event = wait_for(attach_event, 30, interval=0.2, what="SuccessfulAttachVolume")
    assert event["type"] == "Normal"
    assert event["message"] == f'AttachVolume.Attach succeeded for volume "{pv}" '
    assert event["source"]["component"] == "attachdetach-controller"

    stack.kubectl("delete", "-n", ns, "pod", "user", "--wait=false")
    wait_for(lambda: _get(stack, "volumeattachment", name) is None, 60, interval=0.2, what="detached")
    assert unique not in _attached_names(stack)
    wait_for(
        lambda: unique not in (_node_status(stack).get("volumesInUse") or []),
        30,
        interval=0.2,
        what="volumesInUse dropped",
    )


def test_a_driver_that_needs_no_attach_gets_no_volumeattachment(stack: devstack.DevStack) -> None:
    ns = "attach-not-required"
    stack.kubectl("create", "namespace", ns)
    plain = "plain.sim.kcm.dev"
    _driver(stack, plain, False)
    _driver(stack, DRIVER, True)
    _bound_volume(stack, ns, "attach-plain-pv", "plain", plain, "plain-handle")
    _pod(stack, ns, "plain-user", "plain")
    wait_for(lambda: _phase(stack, ns, "plain-user") == "Running", 60, interval=0.2, what="pod Running")
    # Proof the controller looked at the node since: a second pod's attachable volume on the
    # same node (a reconcile decides every volume of its node) is attached.
    _bound_volume(stack, ns, "attach-marker-pv", "marker", DRIVER, "marker-handle")
    _pod(stack, ns, "marker-user", "marker")
    wait_for(lambda: _attachments_of(stack, "attach-marker-pv"), 60, interval=0.2, what="marker attachment")
    assert _attachments_of(stack, "attach-plain-pv") == []
    assert f"kubernetes.io/csi/{plain}^plain-handle" not in _attached_names(stack)
