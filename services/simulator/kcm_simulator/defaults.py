"""What a cluster with the simulated CSI driver ships: its CSIDriver and a default StorageClass.

- CSIDriver `csi.sim.kcm.dev` with `attachRequired: true` (its volumes go through
  VolumeAttachments), `podInfoOnMount: false`, persistent volumes only.
- StorageClass `standard`, the default (`storageclass.kubernetes.io/is-default-class`), as kind
  ships one: provisioner `csi.sim.kcm.dev`, reclaimPolicy Delete, WaitForFirstConsumer,
  allowVolumeExpansion.
- `ensure` creates each that is missing and leaves an existing one (the user's edits) alone.

Called by `kcm dev` once its API server answers, embedded or kube-apiserver.
"""

from __future__ import annotations

from typing import Any

from kcm_shared.client.kubeclient import ApiError, KubeClient, resource_path

from kcm_simulator import volumes

DEFAULT_CLASS = "standard"

CSI_DRIVER: dict[str, Any] = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "CSIDriver",
    "metadata": {"name": volumes.DRIVER},
    "spec": {"attachRequired": True, "podInfoOnMount": False, "volumeLifecycleModes": ["Persistent"]},
}

STORAGE_CLASS: dict[str, Any] = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": {
        "name": DEFAULT_CLASS,
        "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
    },
    "provisioner": volumes.DRIVER,
    "reclaimPolicy": "Delete",
    "volumeBindingMode": volumes.WAIT_FOR_FIRST_CONSUMER,
    "allowVolumeExpansion": True,
}


async def ensure(client: KubeClient) -> None:
    for resource, obj in (("csidrivers", CSI_DRIVER), ("storageclasses", STORAGE_CLASS)):
        try:
            await client.create(resource_path("storage.k8s.io", "v1", resource), obj)
        except ApiError as exc:
            if exc.code != 409:  # there already: a kept state directory, or the user's own
                raise
