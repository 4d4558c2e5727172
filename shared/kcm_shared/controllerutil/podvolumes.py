"""A pod as the volume controllers read it: the claims its volumes name, and whether the
kubelet is done with it.

- `PodView`: node, volumes (claim and generic ephemeral sources), phase and container states.
- `claim_names`: its persistentVolumeClaim volumes' claims and the `<pod>-<volume>` claims of
  its generic ephemeral volumes (`volumeprotection.ephemeral_claim_name`); `claim_keys` the
  same as namespace/name, indexed under `CLAIM_INDEX`.
- `is_terminated`: upstream's volumeutil.IsPodTerminated: finished, or deleted with none of
  its containers (init, regular, ephemeral) running.

Called by kcm_controllers.pvcprotection and kcm_controllers.attachdetach.
"""

from __future__ import annotations

import msgspec

from kcm_shared.apimachinery import codec
from kcm_shared.controllerutil import volumeprotection


class PodSpecView(codec.View):
    node_name: str = ""
    volumes: list[volumeprotection.PodVolume] = msgspec.field(default_factory=list)


class ContainerState(codec.View):
    running: dict[str, object] | None = None
    waiting: dict[str, object] | None = None
    terminated: dict[str, object] | None = None


class ContainerStatus(codec.View):
    state: ContainerState = msgspec.field(default_factory=ContainerState)


class PodStatusView(codec.View):
    phase: str = ""
    init_container_statuses: list[ContainerStatus] = msgspec.field(default_factory=list)
    container_statuses: list[ContainerStatus] = msgspec.field(default_factory=list)
    ephemeral_container_statuses: list[ContainerStatus] = msgspec.field(default_factory=list)


class PodView(codec.Meta):
    spec: PodSpecView = msgspec.field(default_factory=PodSpecView)
    status: PodStatusView = msgspec.field(default_factory=PodStatusView)


def claim_names(pod: PodView) -> list[str]:
    return volumeprotection.claim_names(pod.metadata.name, pod.spec.volumes)


# Upstream's common.PodPVCIndex: the volume controllers of one process share the pods' cache of
# this view, so they register this one function under this one name (`Cache.add_index` takes the
# same function twice, never another under a taken name).
CLAIM_INDEX = "pvc"


def claim_keys(pod: PodView) -> list[str]:
    """namespace/claim of every claim the pod names (the index's values)."""
    return [f"{pod.metadata.namespace}/{name}" for name in claim_names(pod)]


def _not_running(statuses: list[ContainerStatus]) -> bool:
    return all(s.state.terminated is not None or s.state.waiting is not None for s in statuses)


def is_terminated(pod: PodView) -> bool:
    if pod.status.phase in ("Failed", "Succeeded"):
        return True
    status = pod.status
    return (
        pod.metadata.deletion_timestamp is not None
        and _not_running(status.init_container_statuses)
        and _not_running(status.container_statuses)
        and _not_running(status.ephemeral_container_statuses)
    )
