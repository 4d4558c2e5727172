"""The simulated CSI driver's decisions: which claims it provisions and the PV it makes (class
reclaim policy, mount options, parameters, topology), which PVs it deletes, when the resizer
and the node grow a volume, and the scheduler's volume binding filters."""

from __future__ import annotations

from typing import Any

import pytest
from kcm_simulator import defaults, volumes

Obj = dict[str, Any]
NODE = {"metadata": {"name": "sim-node-1", "labels": {volumes.ZONE_LABEL: "zone-b"}}}


def _class(**fields: Any) -> Obj:
    return {**defaults.STORAGE_CLASS, "metadata": {"name": "standard"}, **fields}


def _claim(
    *,
    handed: str | None = volumes.DRIVER,
    node: str | None = "sim-node-1",
    phase: str = "Pending",
    **spec: Any,
) -> Obj:
    annotations = {}
    if handed:
        annotations[volumes.PROVISIONER_ANNOTATION] = handed
    if node:
        annotations[volumes.SELECTED_NODE] = node
    return {
        "metadata": {
            "name": "data",
            "namespace": "ns",
            "uid": "u1",
            "resourceVersion": "7",
            "annotations": annotations,
        },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": "standard",
            **spec,
        },
        "status": {"phase": phase},
    }


@pytest.mark.parametrize(
    ("claim", "storage_class", "wanted"),
    [
        (_claim(), _class(), True),
        (_claim(handed=None), _class(), False),  # the binder has not handed it over
        (_claim(handed="other.csi"), _class(), False),
        (_claim(node=None), _class(), False),  # WaitForFirstConsumer: no node chosen yet
        (_claim(node=None), _class(volumeBindingMode="Immediate"), True),
        (_claim(volumeName="pv-x"), _class(), False),  # bound (or pre-bound) already
        (_claim(phase="Bound"), _class(), False),
        (_claim(), _class(provisioner="other.csi"), False),
        (_claim(), None, False),
    ],
)
def test_a_claim_is_provisioned_once_handed_over_with_its_node(
    claim: Obj, storage_class: Obj | None, wanted: bool
) -> None:
    assert volumes.wants_provisioning(claim, storage_class) is wanted


def test_the_pv_follows_the_class_and_the_selected_nodes_zone() -> None:
    storage_class = _class(
        reclaimPolicy="Retain",
        mountOptions=["noatime"],
        parameters={
            "tier": "fast",
            volumes.FSTYPE_PARAMETER: "xfs",
            "csi.storage.k8s.io/node-stage-secret-name": "s",
        },
    )
    pv = volumes.new_volume(_claim(), storage_class, NODE, "ident")
    assert pv["metadata"] == {"name": "pvc-u1", "annotations": {volumes.PROVISIONED_BY: volumes.DRIVER}}
    spec = pv["spec"]
    assert spec["persistentVolumeReclaimPolicy"] == "Retain"
    assert spec["mountOptions"] == ["noatime"]
    assert spec["capacity"] == {"storage": "1Gi"}
    assert spec["claimRef"] == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": "ns",
        "name": "data",
        "uid": "u1",
        "resourceVersion": "7",
    }
    assert spec["csi"] == {
        "driver": volumes.DRIVER,
        "volumeHandle": "pvc-u1",
        "fsType": "xfs",
        "volumeAttributes": {"tier": "fast", volumes.PROVISIONER_IDENTITY: "ident"},
    }
    assert spec["nodeAffinity"] == {
        "required": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": volumes.ZONE_LABEL, "operator": "In", "values": ["zone-b"]}]}
            ]
        }
    }


def test_a_delete_policy_pv_carries_the_provisioners_finalizer() -> None:
    pv = volumes.new_volume(_claim(), _class(), NODE, "ident")
    assert pv["metadata"]["finalizers"] == [volumes.FINALIZER]
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Delete"


def test_immediate_binding_takes_the_first_allowed_topology() -> None:
    allowed = [{"matchLabelExpressions": [{"key": volumes.ZONE_LABEL, "values": ["zone-c", "zone-a"]}]}]
    pv = volumes.new_volume(
        _claim(node=None), _class(volumeBindingMode="Immediate", allowedTopologies=allowed), None, "i"
    )
    terms = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert terms == [
        {"matchExpressions": [{"key": volumes.ZONE_LABEL, "operator": "In", "values": ["zone-c"]}]}
    ]
    plain = volumes.new_volume(_claim(node=None), _class(volumeBindingMode="Immediate"), None, "i")
    assert "nodeAffinity" not in plain["spec"]


@pytest.mark.parametrize(
    ("parameters", "allowed", "error"),
    [
        ({volumes.FAIL_PARAMETER: "out of space"}, None, "rpc error: code = Internal desc = out of space"),
        (
            {},
            [{"matchLabelExpressions": [{"key": volumes.ZONE_LABEL, "values": ["zone-a"]}]}],
            "allowedTopologies",
        ),
    ],
)
def test_create_volume_can_fail(parameters: Obj, allowed: list[Obj] | None, error: str) -> None:
    storage_class = _class(parameters=parameters, **({"allowedTopologies": allowed} if allowed else {}))
    with pytest.raises(volumes.ProvisioningError, match=error):
        volumes.new_volume(_claim(), storage_class, NODE, "i")


def _pv(**fields: Any) -> Obj:
    pv = volumes.new_volume(_claim(), _class(), NODE, "i")
    pv["status"] = {"phase": fields.pop("phase", "Bound")}
    pv["metadata"].update(fields.pop("meta", {}))
    pv["spec"].update(fields)
    return pv


@pytest.mark.parametrize(
    ("pv", "wanted"),
    [
        (_pv(phase="Released"), True),
        (_pv(phase="Bound"), False),
        (_pv(phase="Released", persistentVolumeReclaimPolicy="Retain"), False),
        (_pv(phase="Released", csi={"driver": "other.csi", "volumeHandle": "h"}), False),
        (_pv(phase="Released", meta={"annotations": {}}), False),  # a static PV: not the provisioner's
        (
            _pv(phase="Bound", meta={"deletionTimestamp": "2026-11-29T00:00:00Z"}),
            True,
        ),  # HonorPVReclaimPolicy
    ],
)
def test_a_released_or_deleted_pv_of_ours_with_reclaim_delete_is_deleted(pv: Obj, wanted: bool) -> None:
    assert volumes.wants_deletion(pv) is wanted


def test_removing_the_finalizer_keeps_the_others() -> None:
    pv = _pv(meta={"finalizers": ["kubernetes.io/pv-protection", volumes.FINALIZER]})
    assert volumes.without_finalizer(pv) == ["kubernetes.io/pv-protection"]
    assert volumes.without_finalizer(_pv(meta={"finalizers": []})) is None


def test_a_bound_claim_asking_for_more_is_resized_then_finished_on_the_node() -> None:
    claim = _claim(phase="Bound", resources={"requests": {"storage": "2Gi"}})
    claim["status"]["capacity"] = {"storage": "1Gi"}
    pv = _pv()
    assert volumes.wants_controller_resize(claim, pv)
    grown = _pv(capacity={"storage": "2Gi"})
    assert not volumes.wants_controller_resize(claim, grown)
    assert not volumes.wants_node_resize(claim, grown)
    claim["status"]["conditions"] = [volumes.condition(volumes.FS_RESIZE_PENDING, "t")]
    assert volumes.wants_node_resize(claim, grown)
    assert volumes.needs_node_expansion(grown)
    assert not volumes.needs_node_expansion(_pv(volumeMode="Block"))


def test_the_scheduler_waits_for_immediate_claims_and_filters_by_volume_topology() -> None:
    classes = {"standard": _class(), "now": _class(volumeBindingMode="Immediate")}
    assert volumes.unbound_immediate([_claim(storageClassName="now")], classes)
    assert not volumes.unbound_immediate([_claim()], classes)  # WaitForFirstConsumer: the node decides
    bound = _claim(phase="Bound", volumeName="pvc-u1")
    pvs = {"pvc-u1": _pv()}
    other = {"metadata": {"name": "n2", "labels": {volumes.ZONE_LABEL: "zone-a"}}}
    assert volumes.volume_misfit([bound], pvs, classes, NODE) is None
    assert volumes.volume_misfit([bound], pvs, classes, other) == volumes.NODE_AFFINITY_CONFLICT
    zoned = {
        "standard": _class(
            allowedTopologies=[{"matchLabelExpressions": [{"key": volumes.ZONE_LABEL, "values": ["zone-b"]}]}]
        )
    }
    assert volumes.volume_misfit([_claim()], pvs, zoned, NODE) is None
    assert volumes.volume_misfit([_claim()], pvs, zoned, other) == volumes.NO_VOLUME_TO_BIND
    assert volumes.claims_to_select([_claim(node="n2"), bound], "sim-node-1") == [_claim(node="n2")]


def test_a_pod_uses_its_claims_and_its_ephemeral_volumes_claims() -> None:
    pod = {
        "metadata": {"name": "web-0", "namespace": "ns"},
        "spec": {
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}},
                {"name": "cfg", "configMap": {"name": "c"}},
            ]
        },
    }
    assert volumes.claim_keys(pod) == ["ns/data-web-0", "ns/web-0-scratch"]
