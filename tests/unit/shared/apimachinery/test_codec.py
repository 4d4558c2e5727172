"""Partial views: only the named fields are decoded, camelCase names, keys and controller refs."""

from __future__ import annotations

import datetime as dt

import msgspec
import pytest
from kcm_shared.apimachinery import codec

POD = b"""{"apiVersion": "v1", "kind": "Pod",
 "metadata": {"name": "web-1", "namespace": "prod", "uid": "u-1", "resourceVersion": "42",
   "generation": 3, "generateName": "web-", "labels": {"app": "web"}, "annotations": {"a": "b"},
   "finalizers": ["f"], "creationTimestamp": "2024-05-01T10:00:00Z",
   "deletionTimestamp": "2024-05-01T11:00:00Z", "deletionGracePeriodSeconds": 30,
   "ownerReferences": [
     {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u-n"},
     {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u-rs",
      "controller": true, "blockOwnerDeletion": true}],
   "managedFields": [{"manager": "kubectl"}]},
 "spec": {"nodeName": "node-1", "containers": [{"name": "c"}]}, "status": {"phase": "Running"}}"""


class Spec(codec.View):
    node_name: str = ""


class PodView(codec.Meta):
    spec: Spec = msgspec.field(default_factory=Spec)


def test_decode_reads_the_named_fields_and_ignores_the_rest() -> None:
    pod = codec.decode(POD, PodView)
    m = pod.metadata
    assert (pod.kind, pod.api_version, pod.spec.node_name) == ("Pod", "v1", "node-1")
    assert (m.name, m.namespace, m.uid, m.resource_version, m.generation) == ("web-1", "prod", "u-1", "42", 3)
    assert (m.generate_name, m.labels, m.annotations, m.finalizers) == (
        "web-",
        {"app": "web"},
        {"a": "b"},
        ["f"],
    )
    assert m.creation_timestamp == dt.datetime(2024, 5, 1, 10, tzinfo=dt.UTC)
    assert m.deletion_timestamp == dt.datetime(2024, 5, 1, 11, tzinfo=dt.UTC)
    assert m.deletion_grace_period_seconds == 30
    assert m.owner_references[1].block_owner_deletion is True


def test_missing_fields_take_defaults() -> None:
    pod = codec.decode(b'{"metadata": {"name": "x"}}', PodView)
    assert pod.metadata.labels == {} and pod.metadata.owner_references == [] and pod.spec.node_name == ""
    assert pod.metadata.deletion_timestamp is None


def test_bad_input_raises_decode_error() -> None:
    with pytest.raises(msgspec.DecodeError):
        codec.decode(b'{"metadata": {"name": 5}}', PodView)
    with pytest.raises(msgspec.DecodeError):
        codec.decode(b"{not json", codec.Meta)


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        (b'{"metadata": {"name": "a", "namespace": "ns"}}', "ns/a"),
        (b'{"metadata": {"name": "node-1"}}', "node-1"),
        (b'{"metadata": {"name": "a.b", "namespace": "kube-system"}}', "kube-system/a.b"),
    ],
)
def test_key_of(raw: bytes, key: str) -> None:
    obj = codec.decode(raw, codec.Meta)
    assert codec.key_of(obj) == key
    assert codec.key_of(obj.metadata) == key


def test_controller_ref_is_the_owner_with_controller_true() -> None:
    pod = codec.decode(POD, PodView)
    ref = codec.controller_ref(pod)
    assert ref is not None and (ref.kind, ref.name, ref.uid) == ("ReplicaSet", "web", "u-rs")
    orphan = codec.decode(
        b'{"metadata": {"ownerReferences": [{"uid": "x", "controller": false}]}}', codec.Meta
    )
    assert codec.controller_ref(orphan.metadata) is None


def test_encode_round_trip_uses_api_names_and_omits_defaults() -> None:
    pod = codec.decode(POD, PodView)
    again = msgspec.json.decode(msgspec.json.encode(pod))
    assert again["metadata"]["resourceVersion"] == "42"
    assert again["metadata"]["ownerReferences"][1]["blockOwnerDeletion"] is True
    assert "controller" not in again["metadata"]["ownerReferences"][0]


def nested(depth: int) -> bytes:
    """An object whose `spec` nests `depth` objects (the object itself is one level more)."""
    return b'{"metadata": {"name": "n"}, "spec": ' + b'{"a": ' * depth + b"1" + b"}" * depth + b"}"


def test_a_body_nested_beyond_the_recursion_budget_is_a_decode_error() -> None:
    with pytest.raises(msgspec.DecodeError, match="nested too deeply"):
        codec.decode(nested(5000), codec.Meta)
    with pytest.raises(msgspec.DecodeError, match="nested too deeply"):
        codec.bounded(msgspec.json.Decoder().decode)(nested(5000))
    assert codec.decode(nested(100), codec.Meta).metadata.name == "n"


@pytest.mark.parametrize(
    ("value", "limit", "exceeds"),
    [
        (1, 1, False),
        ({}, 1, False),
        ({"a": {}}, 1, True),
        ({"a": [1, {"b": []}]}, 4, False),
        ({"a": [1, {"b": []}]}, 3, True),
        (msgspec.json.decode(nested(codec.MAX_DEPTH - 1)), codec.MAX_DEPTH, False),
        (msgspec.json.decode(nested(codec.MAX_DEPTH)), codec.MAX_DEPTH, True),
    ],
)
def test_exceeds_depth(value: object, limit: int, exceeds: bool) -> None:
    assert codec.exceeds_depth(value, limit) is exceeds
