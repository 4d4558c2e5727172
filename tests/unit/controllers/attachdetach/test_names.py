"""The names upstream's CSI attacher gives (pkg/volume/csi/csi_attacher.go getAttachmentName)."""

from __future__ import annotations

import pytest
from kcm_controllers.attachdetach import names


def test_the_attachment_name_is_the_sha256_of_handle_driver_and_node_run_together() -> None:
    # sha256("vol-1" + "csi.sim.kcm.dev" + "sim-node-0"), no separator, as upstream's Sprintf("%s%s%s").
    expected = "csi-9a9d5d2e500c1bc77465c47ba5b83132a701d632cbb095cf95f8e38bf76974b5"
    assert names.attachment_name("vol-1", "csi.sim.kcm.dev", "sim-node-0") == expected


def test_the_concatenation_has_no_separator() -> None:
    # Moving a character from the handle to the driver keeps the concatenation, hence the name.
    assert names.attachment_name("ab", "c", "n") == names.attachment_name("a", "bc", "n")
    assert names.attachment_name("a", "b", "n1") != names.attachment_name("a", "b", "n2")


def test_the_unique_volume_name_is_plugin_driver_caret_handle() -> None:
    assert names.unique_volume_name("csi.sim.kcm.dev", "vol-1") == "kubernetes.io/csi/csi.sim.kcm.dev^vol-1"


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("kubernetes.io/csi/csi.sim.kcm.dev^vol-1", ("csi.sim.kcm.dev", "vol-1")),
        ("kubernetes.io/csi/d^h^x", ("d", "h^x")),
        ("kubernetes.io/csi/no-separator", None),
        ("kubernetes.io/csi/^h", None),
        ("kubernetes.io/aws-ebs/vol", None),
    ],
)
def test_parse_unique_volume_name(name: str, parsed: tuple[str, str] | None) -> None:
    assert names.parse_unique_volume_name(name) == parsed
