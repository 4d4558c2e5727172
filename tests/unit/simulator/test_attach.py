"""The simulated CSI driver's names: the external-attacher's finalizer, the node's CSINode."""

from __future__ import annotations

from kcm_simulator import attacher, nodes, nodevolumes


def test_the_attacher_finalizer_is_the_sidecars() -> None:
    # external-attacher: "external-attacher/" + the driver name with "/" and "." as "-".
    assert attacher.finalizer("csi.sim.kcm.dev") == "external-attacher/csi-sim-kcm-dev"
    assert attacher.finalizer("example.com/disk") == "external-attacher/example-com-disk"


def test_the_csinode_is_owned_by_its_node_and_lists_the_driver() -> None:
    obj = nodevolumes.csinode("sim-node-0", "u1", "csi.sim.kcm.dev")
    assert obj["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "sim-node-0", "uid": "u1"}
    ]
    assert obj["spec"] == {"drivers": [{"name": "csi.sim.kcm.dev", "nodeID": "sim-node-0"}]}


def test_nodes_register_for_controller_managed_attach_detach() -> None:
    node = nodes.node("sim-node-", 0, 1, "2026-01-01T00:00:00Z")
    assert node["metadata"]["annotations"] == {
        "volumes.kubernetes.io/controller-managed-attach-detach": "true"
    }


def test_the_unique_volume_name_matches_the_controllers() -> None:
    assert nodevolumes.unique_volume_name("csi.sim.kcm.dev", "h") == "kubernetes.io/csi/csi.sim.kcm.dev^h"
