"""The claim a pod's generic ephemeral volume gets, and whether an existing one is it.

Upstream pkg/controller/volume/ephemeral/controller.go (handleVolume) and
component-helpers/storage/ephemeral (VolumeClaimName, VolumeIsForPod). Called by `controller`.
"""

from __future__ import annotations

from typing import Any

import msgspec
from kcm_shared.apimachinery import codec
from kcm_shared.controllerutil import volumeprotection


class ClaimTemplateMeta(codec.View):
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class ClaimTemplate(codec.View):
    metadata: ClaimTemplateMeta = msgspec.field(default_factory=ClaimTemplateMeta)
    spec: dict[str, Any] = msgspec.field(default_factory=dict)  # copied as it is


class EphemeralSource(codec.View):
    volume_claim_template: ClaimTemplate | None = None


class Volume(codec.View):
    name: str = ""
    ephemeral: EphemeralSource | None = None


class PodSpecView(codec.View):
    volumes: list[Volume] = msgspec.field(default_factory=list)


class PodView(codec.Meta):
    spec: PodSpecView = msgspec.field(default_factory=PodSpecView)


class ClaimView(codec.Meta):
    """An existing claim: only who controls it matters."""


def ephemeral_volumes(pod: PodView) -> list[Volume]:
    return [v for v in pod.spec.volumes if v.ephemeral is not None]


def claim_keys(pod: PodView) -> list[str]:
    """`namespace/<pod>-<volume>` of each ephemeral volume: the pod index by claim."""
    ns, name = pod.metadata.namespace, pod.metadata.name
    return [f"{ns}/{volumeprotection.ephemeral_claim_name(name, v.name)}" for v in ephemeral_volumes(pod)]


def not_for_pod(pod: PodView, claim: ClaimView) -> str | None:
    """Why `claim` is not the one made for `pod` (upstream's text), or None when it is."""
    ref = codec.controller_ref(claim)
    if claim.metadata.namespace == pod.metadata.namespace and ref is not None and ref.uid == pod.metadata.uid:
        return None
    c, p = claim.metadata, pod.metadata
    return f"PVC {c.namespace}/{c.name} was not created for pod {p.namespace}/{p.name} (pod is not owner)"


def new_claim(pod: PodView, volume: Volume) -> dict[str, Any]:
    """The claim to create: `<pod>-<volume>`, controlled by the pod (blocking its deletion), with
    the template's labels, annotations and spec."""
    assert volume.ephemeral is not None
    template = volume.ephemeral.volume_claim_template or ClaimTemplate()
    meta: dict[str, Any] = {
        "name": volumeprotection.ephemeral_claim_name(pod.metadata.name, volume.name),
        "ownerReferences": [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod.metadata.name,
                "uid": pod.metadata.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if template.metadata.annotations:
        meta["annotations"] = dict(template.metadata.annotations)
    if template.metadata.labels:
        meta["labels"] = dict(template.metadata.labels)
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": template.spec}
