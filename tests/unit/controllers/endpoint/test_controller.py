"""The endpoints controller's pure helpers and its sync against the testing kit's fake client, with cases
from upstream endpoints_controller_test.go (TestSyncEndpoints*, TestTruncateEndpoints,
TestCapacityAnnotationSetCorrectly, checkLeftoverEndpoints) and pkg/api/v1/endpoints
util_test.go (TestPackSubsets)."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any, cast

import pytest
from kcm_controllers.endpoint import controller as ec
from kcm_controllers.endpoint import subsets as sub
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil.endpoints import endpointutil
from kcm_shared.runtime import cache, delaying
from kcm_shared.testing import caches, fakeclient, recorders

NS = "default"
CREATED = "2024-01-01T00:00:00Z"


def addr(ip: str, uid: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"ip": ip}
    if uid:
        out["targetRef"] = {"kind": "Pod", "uid": uid}
    return out


def port(number: int, name: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"port": number, "protocol": "TCP"}
    if name:
        out["name"] = name
    return out


# --- truncation and the capacity annotation -----------------------------------------------------


def many(prefix: str, n: int) -> list[dict[str, Any]]:
    return [addr(f"10.{prefix}.{i // 250}.{i % 250 + 1}") for i in range(n)]


def test_under_capacity_is_not_truncated() -> None:
    subsets = [{"addresses": many("0", 600), "notReadyAddresses": many("1", 400), "ports": [port(80)]}]
    assert sub.truncate(subsets) is False
    assert sub.count_addresses(subsets) == 1000


def test_not_ready_addresses_go_first() -> None:
    subsets = [{"addresses": many("0", 900), "notReadyAddresses": many("1", 200), "ports": [port(80)]}]
    assert sub.truncate(subsets) is True
    assert len(subsets[0]["addresses"]) == 900
    assert subsets[0]["notReadyAddresses"] == many("1", 200)[:100]


def test_ready_addresses_over_capacity_are_cut_in_proportion_and_not_ready_dropped() -> None:
    subsets = [
        {"addresses": many("0", 600), "notReadyAddresses": many("1", 10), "ports": [port(80)]},
        {"addresses": many("2", 1200), "ports": [port(81)]},
    ]
    assert sub.truncate(subsets) is True
    # ceil(600/1800*1000) = 334 for the first, what is left (666) for the second.
    assert [len(s["addresses"]) for s in subsets] == [334, 666]
    assert all("notReadyAddresses" not in s for s in subsets)


def test_not_ready_cut_in_proportion_across_subsets() -> None:
    subsets = [
        {"addresses": many("0", 500), "notReadyAddresses": many("1", 300), "ports": [port(80)]},
        {"addresses": many("2", 100), "notReadyAddresses": many("3", 300), "ports": [port(81)]},
    ]
    assert sub.truncate(subsets) is True
    assert [len(s["notReadyAddresses"]) for s in subsets] == [200, 200]
    assert sub.count_addresses(subsets) == 1000


@pytest.mark.parametrize(
    ("annotations", "over", "expected"),
    [
        ({}, False, True),  # under capacity, no annotation
        ({sub.OVER_CAPACITY: sub.TRUNCATED}, False, False),  # annotation left behind
        ({sub.OVER_CAPACITY: "warning"}, False, False),
        ({}, True, False),  # truncated without saying so
        ({sub.OVER_CAPACITY: sub.TRUNCATED}, True, True),
        ({sub.OVER_CAPACITY: "warning"}, True, False),
    ],
)
def test_capacity_annotation_set_correctly(annotations: dict[str, str], over: bool, expected: bool) -> None:
    assert sub.capacity_annotation_set_correctly(annotations, over) is expected


def test_subsets_equal_ignore_resource_version() -> None:
    a = [
        {"addresses": [{"ip": "1.1.1.1", "targetRef": {"kind": "Pod", "name": "p", "resourceVersion": "1"}}]}
    ]
    b = [
        {"addresses": [{"ip": "1.1.1.1", "targetRef": {"kind": "Pod", "name": "p", "resourceVersion": "2"}}]}
    ]
    c = [
        {"addresses": [{"ip": "1.1.1.2", "targetRef": {"kind": "Pod", "name": "p", "resourceVersion": "1"}}]}
    ]
    assert sub.subsets_equal_ignore_resource_version(a, b)
    assert not sub.subsets_equal_ignore_resource_version(a, c)
    assert sub.subsets_equal_ignore_resource_version([{"addresses": [], "ports": []}], [{}])


# --- the sync against a recording client -----------------------------------------------------


def service(name: str = "foo", **spec: Any) -> dict[str, Any]:
    spec.setdefault("selector", {"foo": "bar"})
    spec.setdefault("ports", [{"port": 80, "protocol": "TCP", "targetPort": 8080}])
    spec.setdefault("clusterIP", "10.96.0.10")
    spec.setdefault("ipFamilies", ["IPv4"])
    return {
        "metadata": {"name": name, "namespace": NS, "labels": {"app": "foo"}, "creationTimestamp": CREATED},
        "spec": spec,
    }


def pod_doc(
    i: int,
    *,
    ready: bool = True,
    labels: dict[str, str] | None = None,
    ports: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "metadata": {
            "name": f"pod{i}",
            "namespace": NS,
            "uid": f"uid{i}",
            "resourceVersion": "1",
            "labels": labels or {"foo": "bar"},
        },
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "ports": ports or []}]},
        "status": {
            "phase": "Running",
            "podIP": f"1.2.3.{4 + i}",
            "podIPs": [{"ip": f"1.2.3.{4 + i}"}],
            "conditions": [
                {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": CREATED}
            ],
        },
    }
    for path, value in extra.items():
        section, field = path.split("__")
        doc[section][field] = value
    return doc


class Harness:
    """Caches fed as the stream feeds them, the API server (holding the Endpoints the cache
    shows), and the controller registered on them."""

    def __init__(self) -> None:
        self.services = caches.new(ec.SERVICES, endpointutil.ServiceView)
        self.pods = caches.new(ec.PODS, endpointutil.EndpointPodView)
        self.endpoints = caches.new(ec.ENDPOINTS, ec.EndpointsView)
        self.client = fakeclient.FakeClient(resource_version=100)
        self.recorder = recorders.RecordingEventRecorder()
        self.queued: list[str] = []
        self.ctl = ec.EndpointsController(
            self.client,
            self.services,
            self.pods,
            self.endpoints,
            self.queued.append,
            delaying.DelayedEnqueue(self.queued.append, delaying.LoopClock()),
            self.recorder,
        )
        self.ctl.register()

    def add(self, store: cache.Cache[Any], doc: dict[str, Any]) -> None:
        """`doc` as the stream delivers it (the handlers see an add or an update)."""
        if store is self.endpoints:
            meta = doc["metadata"]
            self.client.add(f"/api/v1/namespaces/{meta['namespace']}/endpoints/{meta['name']}", doc)
        caches.deliver(store, caches.ADDED, doc)

    def sync(self, key: str = f"{NS}/foo") -> None:
        asyncio.run(self.ctl.sync(key))

    def written(self) -> dict[str, Any]:
        verb, _path, body = self.client.calls()[-1]
        assert verb in ("create", "update")
        return cast(dict[str, Any], body)


def ready_ips(body: dict[str, Any]) -> list[str]:
    return [a["ip"] for s in body["subsets"] for a in s.get("addresses", [])]


def not_ready_ips(body: dict[str, Any]) -> list[str]:
    return [a["ip"] for s in body["subsets"] for a in s.get("notReadyAddresses", [])]


def test_creates_endpoints_with_ready_and_not_ready_addresses() -> None:
    h = Harness()
    h.add(h.services, service())
    h.add(h.pods, pod_doc(0))
    h.add(h.pods, pod_doc(1, ready=False))
    h.add(h.pods, pod_doc(2, labels={"other": "x"}))  # not selected
    h.sync()
    verb, path, body = h.client.calls()[0]
    assert (verb, path) == ("create", "/api/v1/namespaces/default/endpoints")
    assert body["metadata"]["name"] == "foo"
    assert body["metadata"]["labels"] == {"app": "foo"}  # the Service's labels
    assert body["metadata"]["annotations"] == {endpointutil.LAST_CHANGE_TRIGGER_TIME: CREATED}
    assert body["subsets"] == [
        {
            "addresses": [
                {
                    "ip": "1.2.3.4",
                    "nodeName": "node-1",
                    "targetRef": {"kind": "Pod", "namespace": NS, "name": "pod0", "uid": "uid0"},
                }
            ],
            "notReadyAddresses": [
                {
                    "ip": "1.2.3.5",
                    "nodeName": "node-1",
                    "targetRef": {"kind": "Pod", "namespace": NS, "name": "pod1", "uid": "uid1"},
                }
            ],
            "ports": [{"port": 8080, "protocol": "TCP"}],
        }
    ]


def test_nothing_written_when_nothing_changed() -> None:
    h = Harness()
    h.add(h.services, service())
    h.add(h.pods, pod_doc(0))
    h.sync()
    body = h.written()
    body["metadata"]["resourceVersion"] = "5"
    h.add(h.endpoints, body)
    h.client.actions.clear()
    h.sync()
    assert h.client.calls() == []
    # A pod update that only bumps its resourceVersion queues nothing either.
    newer = pod_doc(0)
    newer["metadata"]["resourceVersion"] = "2"
    h.queued.clear()
    h.add(h.pods, newer)
    assert h.queued == []


def test_readiness_change_updates_with_the_transition_as_trigger_time() -> None:
    h = Harness()
    h.add(h.services, service())
    h.add(h.pods, pod_doc(0))
    h.sync()
    body = h.written()
    body["metadata"]["resourceVersion"] = "5"
    h.add(h.endpoints, body)
    changed = pod_doc(0, ready=False)
    changed["metadata"]["resourceVersion"] = "2"
    changed["status"]["conditions"][0]["lastTransitionTime"] = "2024-01-01T00:00:07.5Z"
    h.queued.clear()
    h.add(h.pods, changed)
    assert h.queued == [f"{NS}/foo"]
    h.sync()
    verb, path, update = h.client.calls()[-1]
    assert (verb, path) == ("update", "/api/v1/namespaces/default/endpoints/foo")
    assert update["metadata"]["resourceVersion"] == "5"
    assert ready_ips(update) == [] and not_ready_ips(update) == ["1.2.3.4"]
    assert (
        update["metadata"]["annotations"][endpointutil.LAST_CHANGE_TRIGGER_TIME] == "2024-01-01T00:00:07.5Z"
    )


def test_named_target_port_is_resolved_per_pod() -> None:
    h = Harness()
    h.add(h.services, service(ports=[{"name": "web", "port": 80, "protocol": "TCP", "targetPort": "http"}]))
    h.add(h.pods, pod_doc(0, ports=[{"name": "http", "containerPort": 8080, "protocol": "TCP"}]))
    h.add(h.pods, pod_doc(1, ports=[{"name": "http", "containerPort": 9090, "protocol": "TCP"}]))
    h.add(h.pods, pod_doc(2, ports=[{"name": "other", "containerPort": 7070, "protocol": "TCP"}]))
    h.sync()
    got = sorted((s["ports"][0]["port"], [a["ip"] for a in s["addresses"]]) for s in h.written()["subsets"])
    assert got == [(8080, ["1.2.3.4"]), (9090, ["1.2.3.5"])]
    assert all(s["ports"][0]["name"] == "web" for s in h.written()["subsets"])


def test_publish_not_ready_addresses_lists_every_pod_as_ready_terminating_too() -> None:
    h = Harness()
    h.add(h.services, service(publishNotReadyAddresses=True))
    h.add(h.pods, pod_doc(0, ready=False))
    terminating = pod_doc(1)
    terminating["metadata"]["deletionTimestamp"] = CREATED
    h.add(h.pods, terminating)
    h.sync()
    assert ready_ips(h.written()) == ["1.2.3.4", "1.2.3.5"]


@pytest.mark.parametrize(
    ("status", "included"),
    [
        ({"phase": "Succeeded"}, False),
        ({"phase": "Failed"}, False),
        ({"podIP": "", "podIPs": []}, False),
        ({"phase": "Pending"}, True),
    ],
)
def test_which_pods_are_listed(status: dict[str, Any], included: bool) -> None:
    h = Harness()
    h.add(h.services, service())
    doc = pod_doc(0)
    doc["status"].update(status)
    h.add(h.pods, doc)
    h.sync()
    assert ready_ips(h.written()) == (["1.2.3.4"] if included else [])


def test_terminating_pod_left_out() -> None:
    h = Harness()
    h.add(h.services, service())
    doc = pod_doc(0)
    doc["metadata"]["deletionTimestamp"] = CREATED
    h.add(h.pods, doc)
    h.add(h.pods, pod_doc(1))
    h.sync()
    assert ready_ips(h.written()) == ["1.2.3.5"]


def test_headless_service_gets_the_label_and_hostnames() -> None:
    h = Harness()
    h.add(h.services, service(clusterIP="None", ports=[]))
    h.add(h.pods, pod_doc(0, spec__hostname="h0", spec__subdomain="foo"))
    h.add(h.pods, pod_doc(1, spec__hostname="h1", spec__subdomain="elsewhere"))
    h.sync()
    body = h.written()
    assert body["metadata"]["labels"] == {"app": "foo", endpointutil.IS_HEADLESS_SERVICE: ""}
    assert body["subsets"] == [
        {
            "addresses": [
                {**body["subsets"][0]["addresses"][0], "ip": "1.2.3.4", "hostname": "h0"},
                {k: v for k, v in body["subsets"][0]["addresses"][1].items() if k != "hostname"},
            ]
        }
    ]
    assert "hostname" not in body["subsets"][0]["addresses"][1]


def test_service_without_ports_that_is_not_headless_gets_no_addresses() -> None:
    h = Harness()
    h.add(h.services, service(ports=[]))
    h.add(h.pods, pod_doc(0))
    h.sync()
    assert h.written()["subsets"] == []


def test_headless_label_removed_when_the_service_gets_an_ip() -> None:
    h = Harness()
    h.add(h.services, service())
    h.add(h.pods, pod_doc(0))
    h.add(
        h.endpoints,
        {
            "metadata": {
                "name": "foo",
                "namespace": NS,
                "resourceVersion": "3",
                "labels": {"app": "foo", endpointutil.IS_HEADLESS_SERVICE: ""},
            }
        },
    )
    h.sync()
    assert h.written()["metadata"]["labels"] == {"app": "foo"}


@pytest.mark.parametrize(
    "svc",
    [
        service(selector=None),  # hand-written Endpoints are the user's
        service(selector={}),  # kube-apiserver stores an empty selector as none
        service(type="ExternalName", externalName="example.com"),
    ],
)
def test_services_without_selector_or_external_name_are_left_alone(svc: dict[str, Any]) -> None:
    h = Harness()
    if svc["spec"].get("selector") is None:
        del svc["spec"]["selector"]
    h.add(h.services, svc)
    h.add(h.pods, pod_doc(0))
    h.add(h.endpoints, {"metadata": {"name": "foo", "namespace": NS, "resourceVersion": "3"}})
    h.sync()
    assert h.client.calls() == []


def test_deleted_service_deletes_its_endpoints() -> None:
    h = Harness()
    h.sync("ns/gone")
    assert h.client.calls() == [("delete", "/api/v1/namespaces/ns/endpoints/gone", None)]


def test_keys_include_leftover_endpoints_but_not_leader_election_locks() -> None:
    h = Harness()
    h.add(h.services, service())
    h.add(h.endpoints, {"metadata": {"name": "leftover", "namespace": NS}})
    h.add(
        h.endpoints,
        {"metadata": {"name": "lock", "namespace": NS, "annotations": {ec.LEADER_ELECTION_ANNOTATION: "{}"}}},
    )
    assert h.ctl.keys() == [f"{NS}/foo", f"{NS}/leftover"]


def test_over_capacity_truncates_and_annotates_then_clears() -> None:
    h = Harness()
    h.add(h.services, service())
    for i in range(1001):
        doc = pod_doc(i)
        ip = f"10.0.{i // 250}.{i % 250 + 1}"
        doc["status"]["podIP"] = ip
        doc["status"]["podIPs"] = [{"ip": ip}]
        h.add(h.pods, doc)
    h.sync()
    body = h.written()
    assert body["metadata"]["annotations"][sub.OVER_CAPACITY] == sub.TRUNCATED
    assert len(ready_ips(body)) == 1000
    body["metadata"]["resourceVersion"] = "7"
    h.add(h.endpoints, body)
    h.client.actions.clear()
    h.sync()
    assert h.client.calls() == []  # unchanged and truncated the same way: nothing to write
    h.pods.evict(f"{NS}/pod0")
    h.pods.evict(f"{NS}/pod1")
    h.sync()
    body = h.written()
    assert sub.OVER_CAPACITY not in body["metadata"]["annotations"]
    assert len(ready_ips(body)) == 999


def test_failed_update_records_the_event_and_retries() -> None:
    h = Harness()
    h.add(h.services, service())
    h.add(h.pods, pod_doc(0))
    h.add(
        h.endpoints, {"metadata": {"name": "foo", "namespace": NS, "uid": "ep-uid", "resourceVersion": "3"}}
    )
    h.client.fail(
        "update",
        None,
        kubeclient.ApiError(409, "Conflict", 'Operation cannot be fulfilled on endpoints "foo"'),
    )
    with pytest.raises(kubeclient.ApiError):
        h.sync()
    assert h.recorder.events == [
        (
            "Warning",
            ec.FAILED_TO_UPDATE,
            'Failed to update endpoint default/foo: Operation cannot be fulfilled on endpoints "foo"',
            {
                "kind": "Endpoints",
                "apiVersion": "v1",
                "namespace": NS,
                "name": "foo",
                "uid": "ep-uid",
                "resourceVersion": "3",
            },
        )
    ]


def test_failed_create_records_the_event_but_a_terminating_namespace_is_dropped() -> None:
    h = Harness()
    h.add(h.services, service())
    h.client.fail("create", None, kubeclient.ApiError(500, "InternalError", "etcd is gone"), times=1)
    with pytest.raises(kubeclient.ApiError):
        h.sync()
    assert [(e[1], e[2]) for e in h.recorder.events] == [
        (ec.FAILED_TO_CREATE, "Failed to create endpoint for service default/foo: etcd is gone")
    ]
    h.recorder.events.clear()
    h.client.fail(
        "create",
        None,
        kubeclient.ApiError(
            403,
            "Forbidden",
            "namespace default is being terminated",
            {"details": {"causes": [{"reason": "NamespaceTerminating"}]}},
        ),
    )
    h.sync()  # no error: the key is dropped
    assert h.recorder.events == []


def test_a_create_the_cache_has_not_shown_yet_is_updated_not_created_again() -> None:
    h = Harness()
    h.add(h.services, service())
    h.add(h.pods, pod_doc(0))
    h.sync()
    h.add(h.pods, {**pod_doc(1), "metadata": {**pod_doc(1)["metadata"], "resourceVersion": "2"}})
    h.sync()
    assert [c[0] for c in h.client.calls()] == ["create", "update"]
    assert h.written()["metadata"]["resourceVersion"] == "101"  # the create's answer


def test_pod_label_change_queues_the_services_it_left_and_joined() -> None:
    h = Harness()
    h.add(h.services, service())
    h.add(h.services, service("other", selector={"foo": "baz"}))
    h.add(h.pods, pod_doc(0))
    h.queued.clear()
    moved = pod_doc(0, labels={"foo": "baz"})
    moved["metadata"]["resourceVersion"] = "2"
    h.add(h.pods, moved)
    assert sorted(h.queued) == [f"{NS}/foo", f"{NS}/other"]


def test_batch_period_delays_and_coalesces_pod_changes() -> None:
    async def scenario() -> list[str]:
        h = Harness()
        h.ctl.batch_period = 0.05
        h.add(h.services, service())
        h.queued.clear()
        h.add(h.pods, pod_doc(0))
        h.add(h.pods, pod_doc(1))
        assert h.queued == []
        await asyncio.sleep(0.2)
        return h.queued

    assert asyncio.run(scenario()) == [f"{NS}/foo"]


def test_ipv6_service_takes_the_pods_ipv6_address() -> None:
    h = Harness()
    h.add(h.services, service(ipFamilies=["IPv6"], clusterIP="fd00::10"))
    doc = pod_doc(0)
    doc["status"]["podIPs"] = [{"ip": "1.2.3.4"}, {"ip": "fd00:10:244::4"}]
    h.add(h.pods, doc)
    h.add(h.pods, pod_doc(1))  # IPv4 only: no address for this Service
    h.sync()
    assert ready_ips(h.written()) == ["fd00:10:244::4"]


def test_trigger_time_is_rfc3339_utc() -> None:
    assert endpointutil.format_trigger_time(
        dt.datetime(2024, 1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    ) == ("2024-01-01T00:00:00Z")
