"""The simulated CSI driver's external-attacher (kubernetes-csi/external-attacher's part for
driver `csi.sim.kcm.dev`): attaches and detaches what the attach/detach controller asks.

- A VolumeAttachment of our driver that is not attached gets the attacher's finalizer
  (`external-attacher/csi-sim-kcm-dev`, the driver name with dots and slashes made dashes,
  as the sidecar names it) and then `status.attached: true` through the status subresource:
  ControllerPublishVolume always succeeds here.
- One being deleted loses that finalizer (ControllerUnpublishVolume succeeded), so it goes.
- Attachments of other drivers are left alone, as another driver's sidecar would own them.
Fed VolumeAttachment events by `main.py`; writes go through the shared `Writer`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kcm_shared.client.kubeclient import KubeClient, resource_path

from kcm_simulator.calls import Writer

Obj = dict[str, Any]
log = logging.getLogger("kcm.sim.attacher")

DRIVER = "csi.sim.kcm.dev"


def finalizer(driver: str) -> str:
    """The sidecar's finalizer: `external-attacher/` and the driver name, `.` and `/` as `-`."""
    return "external-attacher/" + driver.replace("/", "-").replace(".", "-")


FINALIZER = finalizer(DRIVER)


class ExternalAttacher:
    def __init__(self, client: KubeClient, writer: Writer, driver: str = DRIVER) -> None:
        self._client = client
        self._writer = writer
        self._driver = driver
        self._finalizer = finalizer(driver)
        # Per attachment, the latest version not yet handled; one worker per attachment at a
        # time works through them, so a deletion seen during an attach is not lost.
        self._latest: dict[str, Obj] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}

    def reset(self, items: list[Obj]) -> None:
        for va in items:
            self.on_event("ADDED", va)

    def on_event(self, kind: str, va: Obj) -> None:
        if kind == "DELETED" or (va.get("spec") or {}).get("attacher") != self._driver:
            return
        name = str((va.get("metadata") or {}).get("name") or "")
        if not name:
            return
        self._latest[name] = va
        if name not in self._workers:
            self._workers[name] = asyncio.ensure_future(self._work(name))

    async def _work(self, name: str) -> None:
        try:
            while name in self._latest:
                await self._sync(self._latest.pop(name))
        finally:
            self._workers.pop(name, None)

    async def _sync(self, va: Obj) -> None:
        meta = va["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        path = resource_path("storage.k8s.io", "v1", "volumeattachments", name=meta["name"])
        if meta.get("deletionTimestamp"):
            if self._finalizer in finalizers:
                kept = [f for f in finalizers if f != self._finalizer]
                patch = {
                    "metadata": {"resourceVersion": meta.get("resourceVersion"), "finalizers": kept or None}
                }
                await self._writer.call(f"detach {meta['name']}", lambda: self._client.patch(path, patch))
                log.info("detached", extra={"attachment": meta["name"]})
            return
        if (va.get("status") or {}).get("attached"):
            return
        if self._finalizer not in finalizers:
            patch = {
                "metadata": {
                    "resourceVersion": meta.get("resourceVersion"),
                    "finalizers": [*finalizers, self._finalizer],
                }
            }
            if (
                await self._writer.call(f"finalizer {meta['name']}", lambda: self._client.patch(path, patch))
                is None
            ):
                return  # changed meanwhile (409) or gone: its next event decides again
        status = {"status": {"attached": True}}
        await self._writer.call(
            f"attach {meta['name']}", lambda: self._client.patch(f"{path}/status", status)
        )
        log.info("attached", extra={"attachment": meta["name"]})
