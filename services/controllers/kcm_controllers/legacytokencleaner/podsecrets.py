"""The Secrets a pod refers to (upstream pkg/api/v1/pod VisitPodSecretNames), for the legacy
token cleaner, which leaves a token alone while any pod of its namespace uses it.

`PodSecretsView` decodes only the fields that can name a Secret: image pull secrets, the env
and envFrom of every container (init and ephemeral ones too), and every volume source with a
Secret reference.
"""

from __future__ import annotations

import msgspec
from kcm_shared.apimachinery import codec


class NameRef(codec.View):
    name: str = ""


class SecretVolume(codec.View):
    secret_name: str = ""


class SecretRefVolume(codec.View):
    secret_ref: NameRef | None = None


class CSIVolume(codec.View):
    node_publish_secret_ref: NameRef | None = None


class ProjectionView(codec.View):
    secret: NameRef | None = None


class ProjectedVolume(codec.View):
    sources: list[ProjectionView] = msgspec.field(default_factory=list)


class VolumeView(codec.View):
    secret: SecretVolume | None = None
    projected: ProjectedVolume | None = None
    csi: CSIVolume | None = None
    azure_file: SecretVolume | None = None
    cephfs: SecretRefVolume | None = None
    cinder: SecretRefVolume | None = None
    flex_volume: SecretRefVolume | None = None
    iscsi: SecretRefVolume | None = None
    rbd: SecretRefVolume | None = None
    scale_io: SecretRefVolume | None = msgspec.field(default=None, name="scaleIO")
    storageos: SecretRefVolume | None = None


class EnvSource(codec.View):
    secret_key_ref: NameRef | None = None


class EnvVar(codec.View):
    value_from: EnvSource | None = None


class EnvFrom(codec.View):
    secret_ref: NameRef | None = None


class ContainerView(codec.View):
    env: list[EnvVar] = msgspec.field(default_factory=list)
    env_from: list[EnvFrom] = msgspec.field(default_factory=list)


class PodSpecView(codec.View):
    image_pull_secrets: list[NameRef] = msgspec.field(default_factory=list)
    containers: list[ContainerView] = msgspec.field(default_factory=list)
    init_containers: list[ContainerView] = msgspec.field(default_factory=list)
    ephemeral_containers: list[ContainerView] = msgspec.field(default_factory=list)
    volumes: list[VolumeView] = msgspec.field(default_factory=list)


class PodSecretsView(codec.Meta):
    spec: PodSpecView = msgspec.field(default_factory=PodSpecView)


def secret_names(pod: PodSecretsView) -> set[str]:
    """Every Secret name the pod refers to."""
    spec = pod.spec
    names = {ref.name for ref in spec.image_pull_secrets}
    for container in (*spec.containers, *spec.init_containers, *spec.ephemeral_containers):
        names.update(e.secret_ref.name for e in container.env_from if e.secret_ref is not None)
        names.update(
            v.value_from.secret_key_ref.name
            for v in container.env
            if v.value_from is not None and v.value_from.secret_key_ref is not None
        )
    for vol in spec.volumes:
        if vol.secret is not None:
            names.add(vol.secret.secret_name)
        if vol.azure_file is not None:
            names.add(vol.azure_file.secret_name)
        if vol.csi is not None and vol.csi.node_publish_secret_ref is not None:
            names.add(vol.csi.node_publish_secret_ref.name)
        if vol.projected is not None:
            names.update(src.secret.name for src in vol.projected.sources if src.secret is not None)
        for plugin in (
            vol.cephfs,
            vol.cinder,
            vol.flex_volume,
            vol.iscsi,
            vol.rbd,
            vol.scale_io,
            vol.storageos,
        ):
            if plugin is not None and plugin.secret_ref is not None:
                names.add(plugin.secret_ref.name)
    names.discard("")
    return names
