"""viewmerge: merged Structs read what each member view reads; conflicts never merge."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from kcm_cli import controllers
from kcm_shared.apimachinery import codec, gvr, viewmerge

RECORDED = json.loads((Path(__file__).parent / "fixtures" / "kube_apiserver_protobuf.json").read_text())


class Port(codec.View):
    port: int = 0


class PortNamed(codec.View):
    name: str = ""


class SpecA(codec.View):
    ports: list[Port] = msgspec.field(default_factory=list)
    first: Port | None = None


class SpecB(codec.View):
    ports: list[PortNamed] = msgspec.field(default_factory=list)
    first: PortNamed | None = None
    node_name: str = msgspec.field(default="", name="nodeName")


class A(codec.Meta):
    spec: SpecA = msgspec.field(default_factory=SpecA)
    since: dt.datetime | None = None


class B(codec.Meta):
    spec: SpecB = msgspec.field(default_factory=SpecB)


DOC = {
    "metadata": {"name": "x"},
    "spec": {"ports": [{"port": 80, "name": "http"}], "first": {"port": 1, "name": "one"}, "nodeName": "n"},
    "since": "2026-01-01T00:00:00Z",
    "ignored": {"deep": [1, 2]},
}


def test_a_merged_struct_reads_every_field_of_both_nested_in_lists_and_unions() -> None:
    merged = viewmerge.merge(A, B)
    assert merged is not None
    obj: Any = codec.decode(json.dumps(DOC).encode(), merged)
    assert (obj.spec.ports[0].port, obj.spec.ports[0].name) == (80, "http")
    assert (obj.spec.first.port, obj.spec.first.name, obj.spec.node_name) == (1, "one", "n")
    assert obj.since == dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    empty: Any = codec.decode(b"{}", merged)
    assert empty.spec.ports == [] and empty.spec.first is None and empty.metadata.name == ""


class Method(codec.Meta):
    def name(self) -> str:
        return self.metadata.name


class OtherDefault(codec.Meta):
    since: dt.datetime | None = None
    kind: str = "Pod"


class OtherType(codec.Meta):
    since: str = ""


class OtherName(codec.Meta):
    spec: SpecA = msgspec.field(default_factory=SpecA, name="other")


class Frozen(codec.Meta, frozen=True):
    pass


class Strict(codec.Meta, forbid_unknown_fields=True):
    pass


class Required(codec.Meta, kw_only=True):
    needed: str


@pytest.mark.parametrize("other", [Method, OtherDefault, OtherType, OtherName, Frozen, Strict, Required])
def test_views_that_differ_in_anything_a_reader_sees_do_not_merge(other: type[msgspec.Struct]) -> None:
    assert viewmerge.merge(A, other) is None
    assert viewmerge.merge(other, other) is other


def test_views_join_the_first_group_they_merge_with() -> None:
    groups = viewmerge.decoded_as([A, Method, B, OtherType, A])
    assert groups[A] is groups[B] and groups[A] not in (A, B)
    assert groups[Method] is Method and groups[OtherType] is OtherType


def _recorded(name: str) -> list[bytes]:
    doc = json.loads(RECORDED["reads"][name]["json"])
    items = doc.get("items")
    return [json.dumps(item).encode() for item in items] if items is not None else [json.dumps(doc).encode()]


SAMPLES = {
    gvr.Resource("", "v1", "pods"): "pod",
    gvr.Resource("", "v1", "nodes"): "node",
    gvr.Resource("", "v1", "services"): "service",
    gvr.Resource("", "v1", "configmaps"): "configmap",
    gvr.Resource("", "v1", "persistentvolumeclaims"): "pvc",
    gvr.Resource("apps", "v1", "deployments"): "deployment",
    gvr.Resource("apps", "v1", "replicasets"): "replicasetlist",
}


@pytest.mark.parametrize("resource", list(SAMPLES), ids=str)
def test_each_builtin_view_reads_from_its_merged_object_what_it_reads_alone(resource: gvr.Resource) -> None:
    """Every built-in controller's view of a resource, on an object kube-apiserver served."""
    views = list(
        dict.fromkeys(v for spec in controllers.BUILTIN for r, v in spec.views.items() if r == resource)
    )
    decoded_as = viewmerge.decoded_as(views)
    assert len(set(decoded_as.values())) <= len(views)
    for data in _recorded(SAMPLES[resource]):
        for view in views:
            alone = codec.decode(data, view)
            merged = codec.decode(data, decoded_as[view])
            assert isinstance(merged, codec.Meta) and codec.key_of(merged) == codec.key_of(alone)
            through = codec.decode(msgspec.json.encode(merged), view)
            assert through == alone, view


def test_most_pod_views_of_the_builtin_controllers_merge() -> None:
    pods = gvr.Resource("", "v1", "pods")
    views = {v for spec in controllers.BUILTIN for r, v in spec.views.items() if r == pods}
    assert len(set(viewmerge.decoded_as(views).values())) < len(views) / 2
