"""The kubelet's volume manager, for attachable CSI volumes: what a node reports in
`status.volumesInUse`, and the wait for the attach/detach controller's `volumesAttached`.

- `mount(pod)` (before a pod's containers start): the pod's volumes that the controller
  attaches (a Bound claim's PV with `spec.csi` whose CSIDriver does not say
  `attachRequired: false`, upstream csi_plugin.go's rule) are reported in use on its node,
  then it waits until the node's `status.volumesAttached` lists each of them, as a kubelet
  waits for the controller before it mounts. A claim not Bound yet is not waited for here;
  without `wait_attached` (no attach/detach controller runs) nothing is waited for.
- `release(uid)` (after its containers stopped, or when it is gone): its volumes leave
  `volumesInUse` unless another running pod on the node uses them.
- `register(node, uid)` creates the node's CSINode listing driver `csi.sim.kcm.dev`.
- `run()` writes each node's `volumesInUse` whenever it changed (one write at a time per
  node, always the latest list). `on_node` learns `volumesAttached` from node events.
Called by `kubelet.py` (mount, release) and `main.py` (run, on_node).
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from typing import Any

from kcm_shared.client.kubeclient import REQUEST_ERRORS, ApiError, KubeClient, resource_path

from kcm_simulator import attacher
from kcm_simulator.calls import Writer

Obj = dict[str, Any]
log = logging.getLogger("kcm.sim.volumes")


def unique_volume_name(driver: str, handle: str) -> str:
    """The CSI plugin's unique volume name, as the attach/detach controller reports it."""
    return f"kubernetes.io/csi/{driver}^{handle}"


class NodeVolumes:
    def __init__(self, client: KubeClient, writer: Writer, *, wait_attached: bool = True) -> None:
        self._client = client
        self._writer = writer
        self._wait_attached = wait_attached
        self._in_use: dict[str, dict[str, set[str]]] = defaultdict(dict)  # node -> pod uid -> volumes
        self._attached: dict[str, set[str]] = {}
        # Set and replaced whenever some node's volumesAttached changes: wakes every waiter.
        self._attached_changed = asyncio.Event()
        self._dirty: set[str] = set()
        self._wake = asyncio.Event()

    # -- the kubelet's side --------------------------------------------------------------------

    async def register(self, node: str, node_uid: str) -> None:
        """The driver's node plugin registers: the node's CSINode (kept if it exists)."""
        path = resource_path("storage.k8s.io", "v1", "csinodes")
        obj = csinode(node, node_uid, attacher.DRIVER)
        await self._writer.call(f"csinode {node}", lambda: self._client.create(path, obj))

    async def mount(self, pod: Obj) -> None:
        node = pod["spec"]["nodeName"]
        uid = pod["metadata"].get("uid", "")
        wanted = await self._attachable(pod)
        if not wanted:
            return
        self._in_use[node][uid] = wanted
        self._mark(node)
        if not self._wait_attached:
            return
        while not wanted <= self._attached.get(node, set()):
            await self._attached_changed.wait()
        log.info("volumes attached", extra={"pod": pod["metadata"].get("name"), "volumes": sorted(wanted)})

    def release(self, node: str, uid: str) -> None:
        if self._in_use.get(node, {}).pop(uid, None) is not None:
            self._mark(node)

    def on_node(self, kind: str, node: Obj) -> None:
        name = (node.get("metadata") or {}).get("name", "")
        attached = (
            set()
            if kind == "DELETED"
            else {v.get("name", "") for v in (node.get("status") or {}).get("volumesAttached") or []}
        )
        if self._attached.get(name) != attached:
            self._attached[name] = attached
            changed, self._attached_changed = self._attached_changed, asyncio.Event()
            changed.set()

    async def _attachable(self, pod: Obj) -> set[str]:
        ns = pod["metadata"].get("namespace", "")
        out = set()
        for vol in pod["spec"].get("volumes") or []:
            if "persistentVolumeClaim" in vol:
                claim_name = vol["persistentVolumeClaim"].get("claimName", "")
            elif "ephemeral" in vol:
                claim_name = f"{pod['metadata'].get('name', '')}-{vol.get('name', '')}"
            else:
                continue
            claim = await self._get(resource_path("", "v1", "persistentvolumeclaims", ns, claim_name))
            if claim is None or (claim.get("status") or {}).get("phase") != "Bound":
                continue
            pv = await self._get(
                resource_path("", "v1", "persistentvolumes", name=claim["spec"].get("volumeName"))
            )
            spec = {} if pv is None else pv.get("spec") or {}
            csi = spec.get("csi")
            # As the kubelet: a PV whose claimRef names another claim (uid) is not this pod's.
            if not csi or (spec.get("claimRef") or {}).get("uid") != claim["metadata"].get("uid"):
                continue
            driver = await self._get(
                resource_path("storage.k8s.io", "v1", "csidrivers", name=csi.get("driver"))
            )
            if driver is not None and (driver.get("spec") or {}).get("attachRequired") is False:
                continue
            out.add(unique_volume_name(csi.get("driver", ""), csi.get("volumeHandle", "")))
        return out

    async def _get(self, path: str) -> Obj | None:
        """The object, or None when it is absent or cannot be read now (the pod then starts
        without waiting for that volume, as before this simulator attached anything)."""
        try:
            return await self._client.get(path)
        except REQUEST_ERRORS as exc:
            if not (isinstance(exc, ApiError) and exc.not_found):
                log.warning("volume lookup failed", extra={"path": path, "err": str(exc)})
            return None

    # -- the node status writer ----------------------------------------------------------------

    def _mark(self, node: str) -> None:
        self._dirty.add(node)
        self._wake.set()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            dirty, self._dirty = self._dirty, set()
            await asyncio.gather(*(self._report(node) for node in dirty))

    async def _report(self, node: str) -> None:
        in_use = sorted(set().union(*self._in_use.get(node, {}).values()))
        path = resource_path("", "v1", "nodes", name=node, subresource="status")
        patch = {"status": {"volumesInUse": in_use or None}}
        await self._writer.call(f"volumesInUse {node}", lambda: self._client.patch(path, patch))


def csinode(node: str, node_uid: str, driver: str) -> Obj:
    """The CSINode a kubelet's plugin registration writes: owned by its Node, listing the
    driver with the node's name as its node ID."""
    owner = [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid}] if node_uid else []
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": node, **({"ownerReferences": owner} if owner else {})},
        "spec": {"drivers": [{"name": driver, "nodeID": node}]},
    }
