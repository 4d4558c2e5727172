"""The names upstream's CSI attacher gives what it attaches; pure, called by `volumes` and
`controller` (and by the simulator's kubelet through its own copy of the unique name).

Upstream pkg/volume/csi/csi_attacher.go getAttachmentName and csi_plugin.go GetVolumeName,
with pkg/volume/util GetUniqueVolumeNameFromSpec: the VolumeAttachment of volume handle H of
driver D on node N is `csi-<sha256 hex of H + D + N>` (plain concatenation, no separator),
and the volume's unique name, as `node.status.volumesAttached` and `volumesInUse` list it,
`kubernetes.io/csi/D^H`.
"""

from __future__ import annotations

import hashlib

CSI_PLUGIN = "kubernetes.io/csi"
# csi_plugin.go volNameSep: between the driver and the handle in a unique volume name.
_SEP = "^"


def attachment_name(volume_handle: str, driver: str, node: str) -> str:
    digest = hashlib.sha256(f"{volume_handle}{driver}{node}".encode()).hexdigest()
    return f"csi-{digest}"


def unique_volume_name(driver: str, volume_handle: str) -> str:
    return f"{CSI_PLUGIN}/{driver}{_SEP}{volume_handle}"


def parse_unique_volume_name(name: str) -> tuple[str, str] | None:
    """(driver, handle) of a CSI unique volume name; None for any other plugin's, or a name
    without the separator (which upstream's Detach refuses as well)."""
    prefix = CSI_PLUGIN + "/"
    if not name.startswith(prefix):
        return None
    driver, sep, handle = name[len(prefix) :].partition(_SEP)
    if not sep or not driver:
        return None
    return driver, handle


def plugin_name(driver: str) -> str:
    """GetFullQualifiedPluginNameForVolume: the `plugin_name` label of upstream's metrics."""
    return f"{CSI_PLUGIN}:{driver}"
