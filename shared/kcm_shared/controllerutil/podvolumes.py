"""A pod as the volume controllers read it: the claims its volumes name, and whether the
kubelet is done with it.

- `PodView`: node, volumes (claim and generic ephemeral sources), phase and container states.
- `claim_names`: its persistentVolumeClaim volumes' claims and the `<pod>-<volume>` claims of
  its generic ephemeral volumes (`volumeprotection.ephemeral_claim_name`).
- `CLAIM_INDEX` / `claim_keys`: the pod cache's index by `namespace/claim` (upstream's
  PodPVCIndex). The three controllers read pods through this one view, hence one cache: they add
  the index under one name with one function (`Cache.add_index` takes the same pair twice).
- `is_terminated`: upstream's volumeutil.IsPodTerminated: finished, or deleted with none of
  its containers (init, regular, ephemeral) running.

Called by kcm_controllers.pvcprotection, kcm_controllers.attachdetach and
kcm_controllers.pvbinder.
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


CLAIM_INDEX = "pvc"  # upstream common.PodPVCIndex (the attach/detach controller's pvcKeyIndex)


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
