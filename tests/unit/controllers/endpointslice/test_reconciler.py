"""The endpointslice reconciler and its helpers against upstream's table cases
(staging/src/k8s.io/endpointslice reconciler_test.go and utils_test.go): which slices are
created, updated and deleted for a change, so that the churn-minimising placement is upstream's."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
from typing import Any

import msgspec
import prometheus_client
import pytest
from kcm_controllers.endpointslice import controller as esc
from kcm_controllers.endpointslice import reconciler, utils, views
from kcm_shared import runtime
from kcm_shared.apimachinery import codec
from kcm_shared.controllerutil.endpoints import endpointutil
from kcm_shared.controllerutil.endpoints.endpointslicetracker import EndpointSliceTracker, Ref
from kcm_shared.testing import caches, fakeclient, recorders

NS = "test"
NODE = codec.Meta(metadata=codec.ObjectMeta(name="node-1"))


def nodes(name: str) -> codec.Meta | None:
    return NODE if name == "node-1" else None


def service(name: str = "foo", **spec: Any) -> views.ServiceView:
    doc: dict[str, Any] = {
        "metadata": {"name": name, "namespace": NS, "uid": "svc-uid"},
        "spec": {
            "selector": {"foo": "bar"},
            "ports": [{"name": "", "port": 80, "targetPort": 80, "protocol": "TCP"}],
            "clusterIP": "10.0.0.10",
            "ipFamilies": ["IPv4"],
            **spec,
        },
    }
    return codec.decode(msgspec.json.encode(doc), views.ServiceView)


def pod(i: int, ready: bool = True, *, ips: tuple[str, ...] = (), node: str = "node-1", **extra: Any) -> Any:
    addresses = list(ips) or [f"1.2.{i // 256}.{i % 256}"]
    doc: dict[str, Any] = {
        "metadata": {"name": f"pod{i}", "namespace": NS, "uid": f"uid-{i}", "labels": {"foo": "bar"}},
        "spec": {"nodeName": node, "containers": [{"name": "c"}]},
        "status": {
            "phase": "Running",
            "podIP": addresses[0],
            "podIPs": [{"ip": ip} for ip in addresses],
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }
    doc["metadata"].update(extra.pop("metadata", {}))
    doc.update(extra)
    return codec.decode(msgspec.json.encode(doc), endpointutil.EndpointPodView)


def pods(n: int) -> list[Any]:
    return [pod(i, ready=i % 3 != 0) for i in range(n)]


def slice_with(
    num: int, svc: views.ServiceView, members: list[Any], address_type: str = "IPv4"
) -> views.EndpointSlice:
    """An existing slice as the API server returns it (named, owned by `svc`)."""
    s = utils.new_endpoint_slice(
        svc, [views.EndpointPort(name="", protocol="TCP", port=80)], address_type, views.CONTROLLER_NAME
    )
    s.metadata.name = f"{svc.metadata.name}-{num}"
    s.metadata.uid = f"slice-uid-{num}"
    s.metadata.generation = 1
    s.endpoints = [utils.pod_to_endpoint(p, NODE, svc, "IPv4") for p in members]
    return s


def writes(
    svc: views.ServiceView, current: list[Any], existing: list[views.EndpointSlice], max_per_slice: int = 100
) -> reconciler.Plan:
    """Every write one sync makes, after creates are paired with deletes (upstream finalize)."""
    plans, gone, _ = reconciler.plan(svc, current, existing, nodes, max_per_slice)
    total = reconciler.Plan(delete=list(gone))
    for p in plans:
        total.extend(reconciler.pair_creates_with_deletes(svc, p))
    return total


def lengths(slices: list[views.EndpointSlice]) -> list[int]:
    return sorted(len(s.endpoints or ()) for s in slices)


def apply(existing: list[views.EndpointSlice], p: reconciler.Plan) -> list[views.EndpointSlice]:
    """The slices after the writes of `p` (created ones get names)."""
    by_name = {s.metadata.name: s for s in existing}
    for s in p.delete:
        by_name.pop(s.metadata.name)
    for s in p.update:
        by_name[s.metadata.name] = s
    for i, s in enumerate(p.create):
        s.metadata.name = f"new-{i}-{len(by_name)}"
        by_name[s.metadata.name] = s
    return list(by_name.values())


# --- reconciler_test.go --------------------------------------------------------------------------


def test_no_pods_creates_one_placeholder_and_keeps_it() -> None:
    svc = service()
    p = writes(svc, [], [])
    assert (len(p.create), len(p.update), len(p.delete)) == (1, 0, 0)
    placeholder = p.create[0]
    assert placeholder.endpoints == [] and placeholder.ports == []
    placeholder.metadata.name = "foo-x"
    again = writes(svc, [], [placeholder])
    assert (len(again.create), len(again.update), len(again.delete)) == (0, 0, 0)


def test_250_pods_make_three_slices() -> None:
    p = writes(service(), pods(250), [])
    assert lengths(p.create) == [50, 100, 100] and not p.update and not p.delete


def test_some_preexisting_fills_the_closest_to_full_slice() -> None:
    """TestReconcileEndpointSlicesSomePreexisting: 1 create + 1 update, not 2 updates + 1 create."""
    svc, current = service(), pods(250)
    s1 = slice_with(1, svc, [current[i] for i in range(1, 246, 4)])
    s2 = slice_with(2, svc, [current[i] for i in range(3, 246, 4)])
    p = writes(svc, current, [s1, s2])
    assert (len(p.create), len(p.update), len(p.delete)) == (1, 1, 0)
    assert p.update[0].metadata.name == "foo-1"
    assert p.added == 127
    assert lengths(apply([s1, s2], p)) == [61, 89, 100]


def test_some_preexisting_worse_allocation_creates_instead_of_splitting() -> None:
    """TestReconcileEndpointSlicesSomePreexistingWorseAllocation: 2 creates, no update."""
    svc, current = service(), pods(300)
    s1 = slice_with(1, svc, [current[i] for i in range(1, 296, 4)])
    s2 = slice_with(2, svc, [current[i] for i in range(3, 296, 4)])
    p = writes(svc, current, [s1, s2])
    assert (len(p.create), len(p.update), len(p.delete)) == (2, 0, 0)
    assert lengths(apply([s1, s2], p)) == [52, 74, 74, 100]


def test_port_change_updates_every_slice_instead_of_create_and_delete() -> None:
    """TestReconcileEndpointSlicesUpdating."""
    svc, current = service(), pods(250)
    first = apply([], writes(svc, current, []))
    changed = service(ports=[{"name": "", "port": 80, "targetPort": 81, "protocol": "TCP"}])
    p = writes(changed, current, first)
    assert (len(p.create), len(p.update), len(p.delete)) == (0, 3, 0)
    assert lengths(p.update) == [50, 100, 100]
    assert all(s.ports and s.ports[0].port == 81 for s in p.update)


def test_service_labels_update_every_slice_but_reserved_ones_do_not() -> None:
    """TestReconcileEndpointSlicesServicesLabelsUpdating and ...ServicesReservedLabels."""
    svc, current = service(), pods(250)
    first = apply([], writes(svc, current, []))
    labelled = msgspec.structs.replace(
        svc, metadata=msgspec.structs.replace(svc.metadata, labels={"foo": "bar"})
    )
    p = writes(labelled, current, first)
    assert (len(p.create), len(p.update), len(p.delete)) == (0, 3, 0)
    assert all(s.metadata.labels["foo"] == "bar" for s in p.update)
    reserved = {
        views.LABEL_SERVICE_NAME: "bad",
        views.LABEL_MANAGED_BY: "actor",
        views.LABEL_HEADLESS: "invalid",
    }
    bad = msgspec.structs.replace(svc, metadata=msgspec.structs.replace(svc.metadata, labels=reserved))
    p = writes(bad, current, first)
    assert (len(p.create), len(p.update), len(p.delete)) == (0, 0, 0)


def test_recycling_repacks_ten_small_slices_into_three() -> None:
    """TestReconcileEndpointSlicesRecycling: no-op first, then 3 updates + 7 deletes."""
    svc, current = service(), pods(300)
    existing = [slice_with(n, svc, current[n * 30 : (n + 1) * 30]) for n in range(10)]
    p = writes(svc, current, existing)
    assert (len(p.create), len(p.update), len(p.delete)) == (0, 0, 0)
    changed = service(ports=[{"name": "", "port": 80, "targetPort": 81, "protocol": "TCP"}])
    p = writes(changed, current, existing)
    assert (len(p.create), len(p.update), len(p.delete)) == (0, 3, 7)
    assert lengths(apply(existing, p)) == [100, 100, 100]


def test_update_packing_adds_to_the_fuller_updated_slice() -> None:
    """TestReconcileEndpointSlicesUpdatePacking: 95 and 20, two updates."""
    svc = service()
    first = [pod(i) for i in range(80)]
    second = [pod(i) for i in range(100, 120)]
    s1, s2 = slice_with(1, svc, first), slice_with(2, svc, second)
    current = [pod(int(p.metadata.name[3:]), ready=n % 10 != 0) for n, p in enumerate(first + second)]
    current += [pod(i) for i in range(200, 215)]
    p = writes(svc, current, [s1, s2])
    assert (len(p.create), len(p.update), len(p.delete)) == (0, 2, 0)
    assert p.added == 15
    assert lengths(apply([s1, s2], p)) == [20, 95]
    assert lengths([s1, s2]) == [20, 80]  # the cached slices are never edited in place


def test_deprecated_ip_address_type_is_replaced() -> None:
    """TestReconcileEndpointSlicesReplaceDeprecated: both IP slices deleted, 100 + 30 IPv4."""
    svc = service()
    s1 = slice_with(1, svc, [pod(i) for i in range(80)], address_type="IP")
    s2 = slice_with(2, svc, [pod(i) for i in range(100, 150)], address_type="IP")
    current = [pod(i) for i in range(80)] + [pod(i) for i in range(100, 150)]
    p = writes(svc, current, [s1, s2])
    assert len(p.delete) == 2 and not p.update
    assert lengths(p.create) == [30, 100]
    assert {s.address_type for s in p.create} == {"IPv4"}


@pytest.mark.parametrize(("owned", "changes"), [(True, 0), (False, 2)])
def test_recreated_service_replaces_slices_of_the_old_uid(owned: bool, changes: int) -> None:
    """TestReconcileEndpointSlicesRecreation: a slice of another Service UID is replaced."""
    svc = service()
    s = slice_with(1, svc, [pod(1)])
    if not owned:
        s.metadata.owner_references[0].uid = "different"
    p = writes(svc, [pod(1)], [s])
    assert len(p.create) + len(p.update) + len(p.delete) == changes
    if not owned:
        assert len(p.create) == 1 and len(p.delete) == 1  # never an update of another owner's slice


def test_named_ports_group_slices_by_resolved_port() -> None:
    """TestReconcileEndpointSlicesNamedPorts: 300 pods over 5 port numbers, 5 slices of 60."""
    svc = service(ports=[{"name": "", "port": 80, "targetPort": "http", "protocol": "TCP"}])
    current = []
    for i in range(300):
        spec = {
            "nodeName": "node-1",
            "containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 8080 + i % 5}]}],
        }
        current.append(pod(i, ready=i % 3 != 0, spec=spec))
    p = writes(svc, current, [])
    assert lengths(p.create) == [60] * 5
    assert sorted(s.ports[0].port or 0 for s in p.create if s.ports) == [8080, 8081, 8082, 8083, 8084]


def test_max_endpoints_per_slice_is_respected() -> None:
    p = writes(service(), pods(250), [], max_per_slice=30)
    assert lengths(p.create) == [10] + [30] * 8


def test_one_removed_pod_updates_only_its_slice() -> None:
    """Churn: a pod gone touches one slice; a pod added goes to the slice with room."""
    svc, current = service(), pods(250)
    existing = apply([], writes(svc, current, []))
    gone = current[7]
    p = writes(svc, [x for x in current if x is not gone], existing)
    assert (len(p.create), len(p.update), len(p.delete)) == (0, 1, 0) and p.removed == 1
    p = writes(svc, [*current, pod(999)], existing)
    assert (len(p.create), len(p.update), len(p.delete)) == (0, 1, 0)
    assert lengths(p.update) == [51]


@pytest.mark.parametrize(
    ("families", "cluster_ip", "pod_ips", "expected"),
    [
        (["IPv4"], "10.0.0.10", ("1.2.3.4",), {"IPv4": 1}),
        (["IPv6"], "fd00::10", ("fd00::1",), {"IPv6": 1}),
        (["IPv4", "IPv6"], "10.0.0.10", ("1.2.3.4", "fd00::1"), {"IPv4": 1, "IPv6": 1}),
        (["IPv6"], "fd00::10", ("1.2.3.4",), {"IPv6": 0}),  # no address of that family: placeholder
        ([], "None", ("1.2.3.4",), {"IPv4": 1, "IPv6": 0}),  # headless without families: both
        ([], "fd00::10", ("fd00::1",), {"IPv6": 1}),  # legacy Service: its clusterIP's family
    ],
)
def test_address_type_per_ip_family(
    families: list[str], cluster_ip: str, pod_ips: tuple[str, ...], expected: dict[str, int]
) -> None:
    """TestReconcile1Pod's family cases: one slice per address type of the Service."""
    svc = service(ipFamilies=families, clusterIP=cluster_ip)
    p = writes(svc, [pod(1, ips=pod_ips)], [])
    assert {s.address_type: len(s.endpoints or ()) for s in p.create} == expected


def test_slices_of_a_family_the_service_dropped_are_deleted() -> None:
    svc = service(ipFamilies=["IPv4", "IPv6"])
    v6 = slice_with(1, svc, [], address_type="IPv6")
    p = writes(service(), [pod(1)], [v6])
    assert [s.metadata.name for s in p.delete] == ["foo-1"]


# --- utils_test.go -------------------------------------------------------------------------------


def test_pod_to_endpoint_conditions_and_zone() -> None:
    svc = service()
    zone_node = codec.Meta(metadata=codec.ObjectMeta(name="node-1", labels={utils.LABEL_ZONE: "us-a"}))
    ready = utils.pod_to_endpoint(pod(1), zone_node, svc, "IPv4")
    assert ready.conditions == views.EndpointConditions(ready=True, serving=True, terminating=False)
    assert (ready.zone, ready.node_name, ready.addresses) == ("us-a", "node-1", ["1.2.0.1"])
    assert ready.target_ref == views.TargetRef(kind="Pod", namespace=NS, name="pod1", uid="uid-1")
    deleting = pod(2, metadata={"deletionTimestamp": "2024-01-01T00:00:00Z"})
    ep = utils.pod_to_endpoint(deleting, NODE, svc, "IPv4")
    assert ep.conditions == views.EndpointConditions(ready=False, serving=True, terminating=True)
    assert ep.zone is None
    published = service(publishNotReadyAddresses=True)
    ep = utils.pod_to_endpoint(pod(3, ready=False), NODE, published, "IPv4")
    assert ep.conditions == views.EndpointConditions(ready=True, serving=False, terminating=False)


def test_hostname_only_for_the_pods_subdomain() -> None:
    svc = service()
    named = pod(1, spec={"nodeName": "node-1", "hostname": "h", "subdomain": "foo"})
    assert utils.pod_to_endpoint(named, NODE, svc, "IPv4").hostname == "h"
    other = pod(1, spec={"nodeName": "node-1", "hostname": "h", "subdomain": "bar"})
    assert utils.pod_to_endpoint(other, NODE, svc, "IPv4").hostname is None


def test_slice_labels_headless_and_reserved() -> None:
    headless = service(clusterIP="None")
    s = utils.new_endpoint_slice(headless, [], "IPv4", views.CONTROLLER_NAME)
    assert s.metadata.labels == {
        views.LABEL_SERVICE_NAME: "foo",
        views.LABEL_MANAGED_BY: views.CONTROLLER_NAME,
        views.LABEL_HEADLESS: "",
    }
    assert s.metadata.generate_name == "foo-"
    ref = s.metadata.owner_references[0]
    assert (ref.kind, ref.api_version, ref.uid, ref.controller, ref.block_owner_deletion) == (
        "Service",
        "v1",
        "svc-uid",
        True,
        True,
    )


@pytest.mark.parametrize(
    ("sizes", "count", "expected"),
    [
        ([], 5, None),
        ([95, 90], 5, 0),  # exactly full wins
        ([50, 80, 90], 15, 1),  # closest to full that fits
        ([99, 98], 5, None),  # none fits
    ],
)
def test_get_slice_to_fill(sizes: list[int], count: int, expected: int | None) -> None:
    svc = service()
    slices = [slice_with(n, svc, [pod(i) for i in range(size)]) for n, size in enumerate(sizes)]
    found = utils.get_slice_to_fill(slices, count, 100)
    assert (None if found is None else slices.index(found)) == expected


def test_prefer_close_hints_every_endpoint_with_its_zone() -> None:
    svc = service(trafficDistribution="PreferClose")
    zone_node = codec.Meta(metadata=codec.ObjectMeta(name="node-1", labels={utils.LABEL_ZONE: "us-a"}))
    plans, _, _ = reconciler.plan(svc, [pod(1)], [], lambda _: zone_node, 100)
    ep = (plans[0].create[0].endpoints or [])[0]
    assert ep.hints == views.EndpointHints(for_zones=[views.ForZone(name="us-a")])
    # The annotation takes precedence over trafficDistribution; its hints are not computed here.
    annotated = msgspec.structs.replace(
        svc, metadata=msgspec.structs.replace(svc.metadata, annotations={reconciler.TOPOLOGY_MODE: "Auto"})
    )
    plans, _, _ = reconciler.plan(annotated, [pod(1)], [], lambda _: zone_node, 100)
    assert (plans[0].create[0].endpoints or [])[0].hints is None


def test_prefer_close_leaves_not_ready_endpoints_without_hints() -> None:
    # upstream preferCloseHeuristic: only ready endpoints are hinted (and looked at).
    svc = service(trafficDistribution="PreferClose")
    zone_node = codec.Meta(metadata=codec.ObjectMeta(name="node-1", labels={utils.LABEL_ZONE: "us-a"}))
    plans, _, _ = reconciler.plan(svc, [pod(1), pod(2, ready=False)], [], lambda _: zone_node, 100)
    hints = {ep.target_ref.name: ep.hints for ep in plans[0].create[0].endpoints or () if ep.target_ref}
    assert hints == {"pod1": views.EndpointHints(for_zones=[views.ForZone(name="us-a")]), "pod2": None}
    # A slice whose only difference is a not-ready endpoint without hints needs no write.
    existing = slice_with(1, svc, [])
    existing.endpoints = plans[0].create[0].endpoints
    plans, _, _ = reconciler.plan(svc, [pod(1), pod(2, ready=False)], [existing], lambda _: zone_node, 100)
    assert (plans[0].create, plans[0].update) == ([], [])


def test_with_service_traffic_distribution_off_prefer_close_adds_no_hints() -> None:
    # upstream's reconciler with trafficDistributionEnabled false: hints are removed from the
    # slices it writes and the others are left as they are.
    svc = service(trafficDistribution="PreferClose")
    zone_node = codec.Meta(metadata=codec.ObjectMeta(name="node-1", labels={utils.LABEL_ZONE: "us-a"}))
    plans, _, _ = reconciler.plan(svc, [pod(1)], [], lambda _: zone_node, 100, traffic_distribution=False)
    assert (plans[0].create[0].endpoints or [])[0].hints is None
    hinted, _, _ = reconciler.plan(svc, [pod(1)], [], lambda _: zone_node, 100)
    existing = slice_with(1, svc, [])
    existing.endpoints = hinted[0].create[0].endpoints  # written while the gate was on
    plans, _, _ = reconciler.plan(
        svc, [pod(1)], [existing], lambda _: zone_node, 100, traffic_distribution=False
    )
    assert (plans[0].create, plans[0].update) == ([], [])


def test_with_topology_aware_hints_off_the_annotation_only_removes_hints() -> None:
    # No topology cache (upstream's NewController without TopologyAwareHints): Auto hints nothing.
    svc = service(trafficDistribution="PreferClose")
    annotated = msgspec.structs.replace(
        svc, metadata=msgspec.structs.replace(svc.metadata, annotations={reconciler.TOPOLOGY_MODE: "Auto"})
    )
    zone_node = codec.Meta(metadata=codec.ObjectMeta(name="node-1", labels={utils.LABEL_ZONE: "us-a"}))
    plans, _, _ = reconciler.plan(annotated, [pod(1)], [], lambda _: zone_node, 100, topology=None)
    assert (plans[0].create[0].endpoints or [])[0].hints is None


def test_pod_on_unknown_node_is_left_out_and_reported() -> None:
    plans, _, missing = reconciler.plan(service(), [pod(1), pod(2, node="gone")], [], nodes, 100)
    assert missing == [("pod2", "gone")]
    assert [len(s.endpoints or ()) for s in plans[0].create] == [1]


# --- writes --------------------------------------------------------------------------------------


def test_reconcile_writes_and_tracks_what_it_wrote() -> None:
    client = fakeclient.FakeClient()  # a create is named generateName + a count, uid-<count>, generation 1
    tracker = EndpointSliceTracker()
    r = reconciler.Reconciler(client, tracker, 100)
    trigger = dt.datetime(2024, 5, 1, 12, 0, 0, 500000, tzinfo=dt.UTC)
    asyncio.run(r.reconcile(service(), pods(150), [], nodes, trigger))
    assert [(m, p) for m, p, _ in client.calls()] == [
        ("create", "/apis/discovery.k8s.io/v1/namespaces/test/endpointslices")
    ] * 2
    body = client.calls()[0][2]
    assert body["metadata"]["annotations"] == {views.LAST_CHANGE_TRIGGER_TIME: "2024-05-01T12:00:00.5Z"}
    assert body["metadata"]["generateName"] == "foo-"
    assert body["addressType"] == "IPv4"
    assert body["endpoints"][0]["conditions"] == {"ready": False, "serving": False, "terminating": False}
    assert tracker.stale_slices((NS, "foo"), [])  # created, not in the cache yet
    assert not tracker.stale_slices((NS, "foo"), [Ref("uid-1", 1), Ref("uid-2", 1)])


def test_reconcile_reports_a_pod_on_a_missing_node_after_writing_the_rest() -> None:
    client = fakeclient.FakeClient()
    r = reconciler.Reconciler(client, EndpointSliceTracker(), 100)
    with pytest.raises(
        reconciler.SyncError, match='skipping Pod pod2 for Service test/foo: node "gone" not found'
    ):
        asyncio.run(r.reconcile(service(), [pod(1), pod(2, node="gone")], [], nodes, None))
    assert len(client.calls()) == 1


# --- flags ---------------------------------------------------------------------------------------


def test_flags_have_upstreams_names_defaults_and_limits() -> None:
    p = argparse.ArgumentParser()
    assert esc.SPEC.flags is not None
    esc.SPEC.flags(p)
    args = p.parse_args([])
    assert (args.max_endpoints_per_slice, args.endpointslice_updates_batch_period) == (100, 0.0)
    assert esc.SPEC.flag == "concurrent-service-endpoint-syncs" and esc.SPEC.workers == 5
    assert (
        p.parse_args(["--endpointslice-updates-batch-period=1.5s"]).endpointslice_updates_batch_period == 1.5
    )
    for bad in ("0", "1001", "x"):
        with pytest.raises(SystemExit):
            p.parse_args([f"--max-endpoints-per-slice={bad}"])


# --- metrics -------------------------------------------------------------------------------------


def test_a_sync_on_a_stale_slice_cache_counts_as_stale() -> None:
    # Upstream's trackSync: result="stale" for StaleInformerCache, not "error".
    stores: dict[Any, Any] = {res: caches.new(res, view) for res, view in esc.SPEC.views.items()}
    ctx = runtime.Context(
        "endpointslice-controller",
        fakeclient.FakeClient(),
        stores,
        lambda key: None,
        recorders.RecordingEventRecorder(),
    )
    controller = esc.EndpointSliceController(ctx, max_per_slice=100, batch_period=0.0)
    controller.register()
    caches.deliver(
        stores[esc.SERVICES],
        caches.ADDED,
        {
            "metadata": {"name": "foo", "namespace": NS, "resourceVersion": "1"},
            "spec": {"selector": {"app": "a"}},
        },
    )
    controller.tracker.update((NS, "foo"), Ref("uid-1", 2))  # written by us, not in the cache yet

    def count(result: str) -> float:
        return (
            prometheus_client.REGISTRY.get_sample_value(
                "endpoint_slice_controller_syncs_total", {"result": result}
            )
            or 0.0
        )

    before = count("stale"), count("error")
    with pytest.raises(esc.StaleInformerCache):
        asyncio.run(controller.reconcile(f"{NS}/foo"))
    assert (count("stale"), count("error")) == (before[0] + 1, before[1])


def test_per_sync_histograms_have_upstreams_buckets() -> None:
    # ExponentialBuckets(2, 2, 15): 2 to 32768.
    assert reconciler.ADDED_PER_SYNC._upper_bounds[:-1] == [2.0**i for i in range(1, 16)]
    assert reconciler.REMOVED_PER_SYNC._upper_bounds[:-1] == [2.0**i for i in range(1, 16)]


def test_endpoint_ports_in_upstreams_order() -> None:
    # Upstream's order, from NewPortMapKey (k8s.io/endpointslice v0.32.12) run on these ports:
    # by the md5 of Go's dump of each discovery/v1 EndpointPort, not the Service's order.
    ports = [
        {"name": "metrics", "port": 9090, "targetPort": 9090, "protocol": "TCP"},
        {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"},
    ]
    got = utils.endpoint_ports(service(ports=ports), pod(1))
    assert [(p.name, p.port) for p in got] == [("http", 8080), ("metrics", 9090)]
    ports = [
        {"name": "a", "port": 1, "targetPort": 1, "protocol": "UDP"},
        {"name": "b", "port": 2, "targetPort": 2, "protocol": "TCP", "appProtocol": "kubernetes.io/h2c"},
        {"port": 53, "targetPort": 53, "protocol": "SCTP"},
        {"name": "c", "port": 3, "targetPort": 3, "protocol": "TCP"},
    ]
    got = utils.endpoint_ports(service(ports=ports), pod(1))
    assert [(p.name, p.port) for p in got] == [("a", 1), ("", 53), ("b", 2), ("c", 3)]
