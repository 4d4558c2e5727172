"""The attach/detach controller and the simulated CSI driver's attach path, end to end through
kubectl: `kcm dev` with the persistentvolume-attach-detach-controller and one simulated node,
on the embedded API server and (with `--apiserver=upstream`) on kube-apiserver.

Static PVs bound by hand both ways (claimRef and volumeName, phases Bound through the status
subresource), as no PV binder runs in this stack. The simulator plays the external-attacher
for `csi.sim.kcm.dev` and the kubelet's volume manager (volumesInUse, waiting for
volumesAttached before the containers start).

Force detach uses nodes whose kubelet is gone: Node objects made here with the
controller-managed annotation, no Ready condition (unhealthy) and the volumes a kubelet would
still list in `volumesInUse`, written by hand; their pods are force-deleted, as the pod GC
does on an out-of-service node (tests/e2e/test_podgc.py). The wait for unmount is shortened
to 10 s (upstream's is a fixed 6 minutes) so that the timeout path can be seen.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
from collections import Counter
from typing import Any

from tests.conftest import wait_for
from tests.e2e import devstack

stack = devstack.stack_fixture(
    "--controllers",
    "attachdetach",
    "--nodes",
    "1",
    "--attach-detach-reconcile-max-wait-unmount-duration=10s",
)

CONTROLLER = "persistentvolume-attach-detach-controller"
FORCED = "attachdetach_controller_forced_detaches_total"
DRIVER = "csi.sim.kcm.dev"
NODE = "sim-node-0"
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"


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


def _bound_volumes(s: devstack.DevStack, ns: str, *volumes: tuple[str, str, str, str]) -> None:
    """CSI PVs and their claims, each (pv, claim, driver, handle), bound to each other by hand
    as the binder would (the claimRef with the claim's uid: upstream attaches nothing for a
    PV whose claimRef lacks it)."""
    claims = [
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
        }
        for pv, claim, _, _ in volumes
    ]
    _apply(s, {"apiVersion": "v1", "kind": "List", "items": claims})
    uids = {c["metadata"]["name"]: c["metadata"]["uid"] for c in (_get(s, "-n", ns, "pvc") or {})["items"]}
    pvs = [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": pv},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "csi": {"driver": driver, "volumeHandle": handle},
                "claimRef": {"namespace": ns, "name": claim, "uid": uids[claim]},
            },
        }
        for pv, claim, driver, handle in volumes
    ]
    _apply(s, {"apiVersion": "v1", "kind": "List", "items": pvs})
    bound = json.dumps({"status": {"phase": "Bound"}})
    for pv, claim, _, _ in volumes:
        s.kubectl("patch", "pv", pv, "--subresource=status", "--type=merge", "-p", bound)
        s.kubectl("patch", "-n", ns, "pvc", claim, "--subresource=status", "--type=merge", "-p", bound)


def _bound_volume(s: devstack.DevStack, ns: str, pv: str, claim: str, driver: str, handle: str) -> None:
    _bound_volumes(s, ns, (pv, claim, driver, handle))


def _pod_doc(ns: str, name: str, claim: str, node: str = "") -> dict[str, Any]:
    """A pod using `claim`; bound to `node` when named (no scheduler then)."""
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "busybox:1"}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
    }
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def _pod(s: devstack.DevStack, ns: str, name: str, claim: str, node: str = "") -> None:
    _apply(s, _pod_doc(ns, name, claim, node))


def _phase(s: devstack.DevStack, ns: str, pod: str) -> str:
    return str(((_get(s, "-n", ns, "pod", pod) or {}).get("status") or {}).get("phase", ""))


def _node_status(s: devstack.DevStack, node: str = NODE) -> dict[str, Any]:
    found = _get(s, "node", node)
    assert found is not None
    status: dict[str, Any] = found.get("status") or {}
    return status


def _attached_names(s: devstack.DevStack, node: str = NODE) -> list[str]:
    return [v["name"] for v in _node_status(s, node).get("volumesAttached") or []]


def _attachment_name(handle: str, node: str = NODE) -> str:
    """Upstream's name: csi-<sha256 of volume handle, driver and node name, run together>."""
    return "csi-" + hashlib.sha256(f"{handle}{DRIVER}{node}".encode()).hexdigest()


def _unique(handle: str) -> str:
    return f"kubernetes.io/csi/{DRIVER}^{handle}"


def _attachment_names(s: devstack.DevStack) -> set[str]:
    return {va["metadata"]["name"] for va in (_get(s, "volumeattachments") or {}).get("items") or []}


def _attached(s: devstack.DevStack, name: str) -> bool:
    va = _get(s, "volumeattachment", name)
    return bool(va and (va.get("status") or {}).get("attached"))


def _forced(s: devstack.DevStack, reason: str) -> float:
    return s.metric(CONTROLLER, FORCED, reason=reason)


def _gone_node(s: devstack.DevStack, name: str) -> None:
    """A Node whose kubelet is gone: it asked the controller to attach for it, reports no
    Ready condition, and is cordoned so the simulator's scheduler leaves it alone."""
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"volumes.kubernetes.io/controller-managed-attach-detach": "true"},
        },
        "spec": {"unschedulable": True},
    }
    s.kubectl("create", "-f", "-", input=json.dumps(node))


def _set_in_use(s: devstack.DevStack, node: str, unique_names: list[str]) -> None:
    """What the node's kubelet last reported mounted, written as it would have written it."""
    in_use = json.dumps({"status": {"volumesInUse": unique_names}})
    s.kubectl("patch", "node", node, "--subresource=status", "--type=merge", "-p", in_use)


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

    name = _attachment_name(handle)
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


def test_attachments_under_way_when_the_controller_is_killed_are_made_once(stack: devstack.DevStack) -> None:
    """kill -9 of the controller's process once it has begun attaching the volumes of new pods:
    `kcm dev` restarts it, every pod runs with exactly one VolumeAttachment for its volume, the
    node's volumesAttached lists each volume once, and all goes once the pods are deleted."""
    ns = "attach-kill"
    stack.kubectl("create", "namespace", ns)
    _driver(stack, DRIVER, True)
    count = 4
    handles = [f"attach-kill-{i}" for i in range(count)]
    _bound_volumes(
        stack, ns, *[(f"attach-kill-pv-{i}", f"data-{i}", DRIVER, handles[i]) for i in range(count)]
    )
    pods = [_pod_doc(ns, f"user-{i}", f"data-{i}") for i in range(count)]
    _apply(stack, {"apiVersion": "v1", "kind": "List", "items": pods})
    names = [_attachment_name(h) for h in handles]
    wait_for(lambda: _attachment_names(stack) & set(names), 60, interval=0.1, what="attaching begun")
    killed = stack.controller_pids(CONTROLLER)
    assert killed
    for pid in killed:
        os.kill(pid, signal.SIGKILL)

    def all_running() -> bool:
        return all(_phase(stack, ns, f"user-{i}") == "Running" for i in range(count))

    wait_for(all_running, 120, interval=0.5, what="every pod Running after the restart")
    for i, name in enumerate(names):
        [va] = _attachments_of(stack, f"attach-kill-pv-{i}")
        assert va["metadata"]["name"] == name
        assert va["spec"]["nodeName"] == NODE and va["status"]["attached"] is True
    listed = Counter(_attached_names(stack))
    assert all(listed[_unique(h)] == 1 for h in handles), listed
    assert all(n == 1 for n in listed.values()), listed

    stack.kubectl("delete", "-n", ns, "pod", "--all", "--wait=false")
    wait_for(lambda: not _attachment_names(stack) & set(names), 90, interval=0.5, what="all detached")
    assert not set(map(_unique, handles)) & set(_attached_names(stack))
    stack.wait_healthy()


def test_an_out_of_service_nodes_volume_is_detached_without_waiting_for_the_unmount(
    stack: devstack.DevStack,
) -> None:
    """Non-graceful node shutdown (NodeOutOfServiceVolumeDetach): the node's kubelet is gone
    and still lists the volume as mounted; once the node has the out-of-service taint and its
    pod is gone, the volume is detached at once, counted as a forced detach."""
    ns, node = "attach-oos", "attach-oos-node"
    stack.kubectl("create", "namespace", ns)
    _driver(stack, DRIVER, True)
    _gone_node(stack, node)
    try:
        handle = "attach-oos-handle"
        _bound_volume(stack, ns, "attach-oos-pv", "data", DRIVER, handle)
        _pod(stack, ns, "user", "data", node=node)
        name = _attachment_name(handle, node)
        wait_for(lambda: _attached(stack, name), 60, interval=0.2, what="attached")
        wait_for(lambda: _unique(handle) in _attached_names(stack, node), 60, interval=0.2, what="reported")
        _set_in_use(stack, node, [_unique(handle)])
        before = {r: _forced(stack, r) for r in ("out-of-service", "timeout")}

        # The taint first, then the pod goes: the detach cannot wait for an unmount that will
        # never be reported, nor for the (shortened) wait to run out.
        stack.kubectl("taint", "node", node, f"{OUT_OF_SERVICE}=nodeshutdown:NoExecute")
        stack.kubectl("delete", "-n", ns, "pod", "user", "--grace-period=0", "--force")
        wait_for(lambda: _get(stack, "volumeattachment", name) is None, 60, interval=0.2, what="detached")
        status = _node_status(stack, node)
        assert _unique(handle) not in [v["name"] for v in status.get("volumesAttached") or []]
        assert status["volumesInUse"] == [_unique(handle)], "nothing unmounted it"
        assert _forced(stack, "out-of-service") == before["out-of-service"] + 1
        assert _forced(stack, "timeout") == before["timeout"]
    finally:
        stack.kubectl("delete", "node", node, "--ignore-not-found")


def test_an_unready_nodes_volume_is_force_detached_after_the_wait_for_unmount(
    stack: devstack.DevStack,
) -> None:
    """A node that is not Ready and still lists a volume as mounted after its pod is gone: the
    volume is detached once the wait for unmount (10 s here) runs out, a forced detach for
    `timeout`; another volume of the node that is not mounted is detached at once, unforced."""
    ns, node = "attach-timeout", "attach-timeout-node"
    stack.kubectl("create", "namespace", ns)
    _driver(stack, DRIVER, True)
    _gone_node(stack, node)
    try:
        stuck, free = "attach-timeout-stuck", "attach-timeout-free"
        _bound_volumes(
            stack, ns, (f"{stuck}-pv", "stuck", DRIVER, stuck), (f"{free}-pv", "free", DRIVER, free)
        )
        _pod(stack, ns, "stuck-user", "stuck", node=node)
        _pod(stack, ns, "free-user", "free", node=node)
        names = {h: _attachment_name(h, node) for h in (stuck, free)}
        wait_for(
            lambda: all(_attached(stack, n) for n in names.values()), 60, interval=0.2, what="both attached"
        )
        wait_for(
            lambda: {_unique(stuck), _unique(free)} <= set(_attached_names(stack, node)),
            60,
            interval=0.2,
            what="both reported",
        )
        _set_in_use(stack, node, [_unique(stuck)])
        before = {r: _forced(stack, r) for r in ("out-of-service", "timeout")}

        stack.kubectl("delete", "-n", ns, "pod", "--all", "--grace-period=0", "--force")
        wait_for(lambda: _get(stack, "volumeattachment", names[free]) is None, 60, interval=0.2, what="free")
        wait_for(
            lambda: _get(stack, "volumeattachment", names[stuck]) is None, 90, interval=0.5, what="forced"
        )
        assert not {_unique(stuck), _unique(free)} & set(_attached_names(stack, node))
        assert _forced(stack, "timeout") == before["timeout"] + 1
        assert _forced(stack, "out-of-service") == before["out-of-service"]
    finally:
        stack.kubectl("delete", "node", node, "--ignore-not-found")
