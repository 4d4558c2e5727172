"""The endpointslice-mirroring controller's pure parts: upstream's reconciler_test.go and
utils_test.go cases (pkg/controller/endpointslicemirroring), on `reconciler.plan`, the
Reconciler's Events and writes (fake client), and `utils`."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import msgspec
import pytest
from kcm_apiserver.operations import Api, Ctx
from kcm_apiserver.registry import Registry
from kcm_apiserver.store import Store
from kcm_controllers.endpointslicemirroring import controller as ctl
from kcm_controllers.endpointslicemirroring import reconciler, utils
from kcm_shared.controllerutil.endpoints.endpointslicetracker import EndpointSliceTracker, Ref
from kcm_shared.runtime import events
from kcm_shared.testing import fakeclient, recorders

Obj = dict[str, Any]


def endpoints(
    subsets: list[Obj], labels: Obj | None = None, annotations: Obj | None = None
) -> utils.EndpointsView:
    return msgspec.convert(
        {
            "metadata": {
                "name": "test-ep",
                "namespace": "default",
                "uid": "ep-uid",
                "labels": labels or {},
                "annotations": annotations or {},
            },
            "subsets": subsets,
        },
        utils.EndpointsView,
    )


def existing(slice_: Obj, name: str, uid: str = "") -> utils.EndpointSliceView:
    body = dict(slice_)
    body["metadata"] = {**slice_["metadata"], "name": name, "uid": uid or name, "generation": 1}
    body["metadata"].pop("generateName", None)
    return msgspec.convert(body, utils.EndpointSliceView)


PORTS = [{"name": "http", "port": 80, "protocol": "TCP"}]


def ready_ips(slice_: Obj) -> list[tuple[str, bool]]:
    return [(e["addresses"][0], e["conditions"]["ready"]) for e in slice_["endpoints"]]


def test_no_subsets_no_slices() -> None:
    p = reconciler.plan(endpoints([]), [], 1000)
    assert (p.to_create, p.to_update, p.to_delete) == ([], [], [])


def test_addresses_and_not_ready_addresses() -> None:
    ep = endpoints(
        [
            {
                "ports": PORTS,
                "addresses": [{"ip": "10.0.0.1", "hostname": "pod-1"}, {"ip": "10.0.0.2", "nodeName": "n1"}],
                "notReadyAddresses": [{"ip": "10.0.0.3"}],
            }
        ]
    )
    p = reconciler.plan(ep, [], 1000)
    assert len(p.to_create) == 1 and not p.to_update and not p.to_delete
    created = p.to_create[0]
    assert created["addressType"] == "IPv4"
    assert created["ports"] == PORTS
    assert ready_ips(created) == [("10.0.0.1", True), ("10.0.0.2", True), ("10.0.0.3", False)]
    assert created["endpoints"][0]["hostname"] == "pod-1"
    assert created["endpoints"][1]["nodeName"] == "n1"
    meta = created["metadata"]
    assert meta["generateName"] == "test-ep-"
    assert meta["labels"] == {
        "kubernetes.io/service-name": "test-ep",
        "endpointslice.kubernetes.io/managed-by": "endpointslicemirroring-controller.k8s.io",
    }
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "name": "test-ep",
            "uid": "ep-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert p.added == 3


def test_one_slice_per_address_family() -> None:
    ep = endpoints([{"ports": PORTS, "addresses": [{"ip": "10.0.0.1"}, {"ip": "2001:db8::1"}]}])
    p = reconciler.plan(ep, [], 1000)
    assert sorted((s["addressType"], ready_ips(s)[0][0]) for s in p.to_create) == [
        ("IPv4", "10.0.0.1"),
        ("IPv6", "2001:db8::1"),
    ]


def test_irregular_ip_is_rewritten_canonically() -> None:
    converted = utils.address_to_endpoint(utils.EndpointAddress(ip="2001:db8:0:0:0:0:0:1"), True)
    assert converted is not None
    assert converted[0]["addresses"] == ["2001:db8::1"]
    mapped = utils.address_to_endpoint(utils.EndpointAddress(ip="::ffff:10.0.0.1"), True)
    assert mapped is not None and mapped[1] == "IPv4" and mapped[0]["addresses"] == ["10.0.0.1"]


def test_subsets_with_the_same_ports_share_a_slice_other_ports_get_their_own() -> None:
    other = [{"name": "https", "port": 443, "protocol": "TCP"}]
    ep = endpoints(
        [
            {"ports": PORTS, "addresses": [{"ip": "10.0.0.1"}]},
            {"ports": PORTS, "addresses": [{"ip": "10.0.0.2"}]},
            {"ports": other, "addresses": [{"ip": "10.0.0.3"}]},
        ]
    )
    p = reconciler.plan(ep, [], 1000)
    assert sorted(len(s["endpoints"]) for s in p.to_create) == [1, 2]


def test_labels_copied_annotations_but_skipped_ones_copied() -> None:
    ep = endpoints(
        [{"ports": PORTS, "addresses": [{"ip": "10.0.0.1"}]}],
        labels={"foo": "bar", "endpointslice.kubernetes.io/managed-by": "someone"},
        annotations={
            "foo": "bar",
            "endpoints.kubernetes.io/last-change-trigger-time": "2020-01-01T00:00:00Z",
            "kubectl.kubernetes.io/last-applied-configuration": "{}",
            "endpoints.kubernetes.io/over-capacity": "truncated",
        },
    )
    meta = reconciler.plan(ep, [], 1000).to_create[0]["metadata"]
    assert meta["labels"]["foo"] == "bar"
    assert (
        meta["labels"]["endpointslice.kubernetes.io/managed-by"] == "endpointslicemirroring-controller.k8s.io"
    )
    assert meta["annotations"] == {"foo": "bar", "endpoints.kubernetes.io/over-capacity": "truncated"}


def test_existing_matching_slice_is_left_alone() -> None:
    ep = endpoints(
        [{"ports": PORTS, "addresses": [{"ip": "10.0.0.1"}]}], labels={"a": "b"}, annotations={"x": "y"}
    )
    first = reconciler.plan(ep, [], 1000).to_create[0]
    p = reconciler.plan(ep, [existing(first, "test-ep-abc")], 1000)
    assert (p.to_create, p.to_update, p.to_delete) == ([], [], [])


@pytest.mark.parametrize(
    ("labels", "annotations"),
    [({"a": "changed"}, {"x": "y"}), ({"a": "b"}, {"x": "changed"}), ({}, {})],
)
def test_label_or_annotation_change_updates_the_slice(labels: Obj, annotations: Obj) -> None:
    ep = endpoints(
        [{"ports": PORTS, "addresses": [{"ip": "10.0.0.1"}]}], labels={"a": "b"}, annotations={"x": "y"}
    )
    current = existing(reconciler.plan(ep, [], 1000).to_create[0], "test-ep-abc")
    changed = endpoints(
        [{"ports": PORTS, "addresses": [{"ip": "10.0.0.1"}]}], labels=labels, annotations=annotations
    )
    p = reconciler.plan(changed, [current], 1000)
    assert [u["metadata"]["name"] for u in p.to_update] == ["test-ep-abc"]
    assert p.to_update[0]["metadata"]["annotations"] == annotations


def test_trigger_time_change_alone_is_no_update() -> None:
    ep = endpoints([{"ports": PORTS, "addresses": [{"ip": "10.0.0.1"}]}])
    current = existing(reconciler.plan(ep, [], 1000).to_create[0], "test-ep-abc")
    touched = endpoints(
        [{"ports": PORTS, "addresses": [{"ip": "10.0.0.1"}]}],
        annotations={"endpoints.kubernetes.io/last-change-trigger-time": "2021-01-01T00:00:00Z"},
    )
    p = reconciler.plan(touched, [current], 1000)
    assert (p.to_create, p.to_update, p.to_delete) == ([], [], [])


def test_a_target_refs_resource_version_or_hints_alone_is_no_update() -> None:
    # upstream EndpointsEqualBeyondHash ignores the targetRef's resourceVersion, and hints.
    def pod_ref(version: str) -> Obj:
        ref = {
            "kind": "Pod",
            "namespace": "default",
            "name": "p",
            "uid": "pod-uid",
            "resourceVersion": version,
        }
        return endpoints([{"ports": PORTS, "addresses": [{"ip": "10.0.0.1", "targetRef": ref}]}])

    first = reconciler.plan(pod_ref("1"), [], 1000).to_create[0]
    first["endpoints"][0]["hints"] = {"forZones": [{"name": "zone-a"}]}
    p = reconciler.plan(pod_ref("2"), [existing(first, "test-ep-abc")], 1000)
    assert (p.to_create, p.to_update, p.to_delete) == ([], [], [])


def test_address_change_updates_and_extra_slices_are_deleted() -> None:
    ep = endpoints([{"ports": PORTS, "addresses": [{"ip": "10.0.0.1"}]}])
    made = reconciler.plan(ep, [], 1000).to_create[0]
    slices = [existing(made, "test-ep-a"), existing(made, "test-ep-b")]
    moved = endpoints(
        [{"ports": PORTS, "addresses": [{"ip": "10.0.0.9"}], "notReadyAddresses": [{"ip": "10.0.0.1"}]}]
    )
    p = reconciler.plan(moved, slices, 1000)
    assert [u["metadata"]["name"] for u in p.to_update] == ["test-ep-a"]
    assert sorted(ready_ips(p.to_update[0])) == [("10.0.0.1", False), ("10.0.0.9", True)]
    assert [s.metadata.name for s in p.to_delete] == ["test-ep-b"]
    assert (p.added, p.updated, p.removed) == (1, 1, 0)


def test_ports_change_recycles_the_old_slice() -> None:
    ep = endpoints([{"ports": PORTS, "addresses": [{"ip": "10.0.0.1"}]}])
    current = existing(reconciler.plan(ep, [], 1000).to_create[0], "test-ep-abc")
    new_ports = [{"name": "http", "port": 8080, "protocol": "TCP"}]
    p = reconciler.plan(endpoints([{"ports": new_ports, "addresses": [{"ip": "10.0.0.1"}]}]), [current], 1000)
    assert not p.to_create and not p.to_delete
    assert p.to_update[0]["metadata"]["name"] == "test-ep-abc"
    assert "generateName" not in p.to_update[0]["metadata"]
    assert p.to_update[0]["ports"] == new_ports


def test_no_addresses_left_deletes_the_slices() -> None:
    ep = endpoints([{"ports": PORTS, "addresses": [{"ip": "10.0.0.1"}]}])
    current = existing(reconciler.plan(ep, [], 1000).to_create[0], "test-ep-abc")
    p = reconciler.plan(endpoints([]), [current], 1000)
    assert [s.metadata.name for s in p.to_delete] == ["test-ep-abc"] and not p.to_update


def test_max_per_subset_counts_ready_then_not_ready() -> None:
    ep = endpoints(
        [
            {
                "ports": PORTS,
                "addresses": [{"ip": f"10.0.0.{i}"} for i in range(1, 4)],
                "notReadyAddresses": [{"ip": f"10.0.1.{i}"} for i in range(1, 4)],
            },
            {"ports": PORTS, "addresses": [{"ip": "10.0.2.1"}]},
        ]
    )
    p = reconciler.plan(ep, [], 2)
    assert [ready_ips(s) for s in p.to_create] == [[("10.0.0.1", True), ("10.0.0.2", True)]]
    assert p.skipped == 4 and p.invalid == 0


def run_reconcile(
    ep: utils.EndpointsView, max_per_subset: int
) -> tuple[fakeclient.FakeClient, recorders.RecordingEventRecorder, EndpointSliceTracker]:
    client, recorder, tracker = (
        fakeclient.FakeClient(),
        recorders.RecordingEventRecorder(),
        EndpointSliceTracker(),
    )
    r = reconciler.Reconciler(client, tracker, recorder, max_per_subset)
    asyncio.run(r.reconcile(ep, []))
    return client, recorder, tracker


def test_invalid_ips_skipped_with_upstream_event() -> None:
    ep = endpoints(
        [{"ports": PORTS, "addresses": [{"ip": "10.0.0.1"}, {"ip": "not-an-ip"}, {"ip": "1.2.3"}]}]
    )
    client, recorder, tracker = run_reconcile(ep, 1000)
    assert recorder.seen() == [
        (
            events.WARNING,
            "InvalidIPAddress",
            "Skipped 2 invalid IP addresses when mirroring to EndpointSlices",
        )
    ]
    created = client.calls("create")
    assert (
        len(created) == 1 and created[0][1] == "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
    )
    assert tracker.has(("default", "test-ep"), Ref("uid-1", 1))


def test_too_many_addresses_event() -> None:
    ep = endpoints([{"ports": PORTS, "addresses": [{"ip": f"10.0.0.{i}"} for i in range(1, 6)]}])
    _, recorder, _ = run_reconcile(ep, 2)
    assert recorder.seen() == [
        (
            events.WARNING,
            "TooManyAddressesToMirror",
            "A max of 2 addresses can be mirrored to EndpointSlices per Endpoints subset. 3 addresses were skipped",
        )
    ]


def test_endpoints_being_deleted_creates_nothing() -> None:
    ep = endpoints([{"ports": PORTS, "addresses": [{"ip": "10.0.0.1"}]}])
    ep.metadata.deletion_timestamp = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    client, _, _ = run_reconcile(ep, 1000)
    assert client.calls() == []


@pytest.mark.parametrize(
    ("labels", "annotations", "want"),
    [
        ({}, {}, True),
        ({"endpointslice.kubernetes.io/skip-mirror": "true"}, {}, False),
        ({"endpointslice.kubernetes.io/skip-mirror": "false"}, {}, True),
        ({}, {"control-plane.alpha.kubernetes.io/leader": "{}"}, False),
    ],
)
def test_should_mirror(labels: Obj, annotations: Obj, want: bool) -> None:
    assert utils.should_mirror(endpoints([], labels, annotations)) is want


def test_slice_prefix() -> None:
    assert utils.endpoint_slice_prefix("foo") == "foo-"
    long = "a" * 248
    assert utils.endpoint_slice_prefix(long) == long


@pytest.mark.parametrize(
    ("text", "ok"), [("1", True), ("1000", True), ("0", False), ("1001", False), ("x", False)]
)
def test_max_endpoints_flag_range(text: str, ok: bool) -> None:
    if ok:
        assert ctl.max_endpoints_per_subset(text) == int(text)
    else:
        with pytest.raises(Exception, match="between 1 and 1000"):
            ctl.max_endpoints_per_subset(text)


def test_a_slice_as_the_api_server_stores_it_needs_no_rewrite() -> None:
    """What the embedded API server stores (defaults, generation, ownerReference) plans no write,
    so an unchanged Endpoints costs no slice update."""
    api = Api(Store(None), Registry())
    rt = api._rt("discovery.k8s.io", "v1", "endpointslices")
    ep = endpoints(
        [
            {
                "ports": [{"port": 8080}, {"name": "b", "port": 53, "protocol": "UDP", "appProtocol": "dns"}],
                "addresses": [
                    {
                        "ip": "10.0.0.1",
                        "hostname": "h",
                        "nodeName": "n",
                        "targetRef": {"kind": "Pod", "name": "p"},
                    }
                ],
                "notReadyAddresses": [{"ip": "2001:db8::1"}],
            }
        ],
        labels={"a": "b"},
        annotations={"x": "y"},
    )
    stored = []
    for body in reconciler.plan(ep, [], 1000).to_create:
        created = api.create(Ctx(rt, "default"), body)
        stored.append(msgspec.convert(created, utils.EndpointSliceView))
    assert len(stored) == 2
    again = reconciler.plan(ep, stored, 1000)
    assert (again.to_create, again.to_update, again.to_delete) == ([], [], [])
