"""kcm_shared.controllerutil.endpoints.endpointutil against upstream's table cases (pkg/controller/util/endpoint
controller_utils_test.go, trigger_time_tracker_test.go, pkg/api/v1/pod util_test.go FindPort,
pkg/api/v1/endpoints util_test.go TestPackSubsets)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec
import pytest
from kcm_shared.apimachinery import codec
from kcm_shared.controllerutil.endpoints import endpointutil as eu


def pod(**fields: Any) -> eu.EndpointPodView:
    doc: dict[str, Any] = {"metadata": {"name": "pod", "namespace": "test", "uid": "uid-1"}}
    doc.update(fields)
    return codec.decode(msgspec.json.encode(doc), eu.EndpointPodView)


def svc(doc: dict[str, Any]) -> eu.ServiceView:
    return codec.decode(msgspec.json.encode(doc), eu.ServiceView)


# --- ShouldPodBeInEndpoints ------------------------------------------------------------------

SHOULD_BE_IN = [
    ("Failed pod with Never RestartPolicy", "Never", "Failed", {"podIP": "1.2.3.4"}, False, False),
    ("Succeeded pod with Never RestartPolicy", "Never", "Succeeded", {"podIP": "1.2.3.4"}, False, False),
    (
        "Succeeded pod with OnFailure RestartPolicy",
        "OnFailure",
        "Succeeded",
        {"podIP": "1.2.3.4"},
        False,
        False,
    ),
    ("Failed pod with Always RestartPolicy", "Always", "Failed", {"podIP": "1.2.3.4"}, False, False),
    ("Empty Pod IPs, Running pod", "Never", "Running", {"podIP": "", "podIPs": []}, False, False),
    ("Pending pod with Never RestartPolicy", "Never", "Pending", {"podIP": "1.2.3.4"}, False, True),
    ("Unknown pod with OnFailure RestartPolicy", "OnFailure", "Unknown", {"podIP": "1.2.3.4"}, False, True),
    ("Running pod with Never RestartPolicy", "Never", "Running", {"podIP": "1.2.3.4"}, False, True),
    (
        "Multiple Pod IPs, Running pod",
        "Never",
        "Running",
        {"podIPs": [{"ip": "1.2.3.4"}, {"ip": "1234::5678:0000:0000:9abc:def0"}]},
        False,
        True,
    ),
]


@pytest.mark.parametrize(("name", "policy", "phase", "ips", "terminating", "expected"), SHOULD_BE_IN)
def test_should_pod_be_in_endpoints(
    name: str, policy: str, phase: str, ips: dict[str, Any], terminating: bool, expected: bool
) -> None:
    p = pod(spec={"restartPolicy": policy}, status={"phase": phase, **ips})
    assert eu.should_pod_be_in_endpoints(p, include_terminating=False) is expected, name


@pytest.mark.parametrize(("include", "expected"), [(False, False), (True, True)])
def test_terminating_pod_only_when_included(include: bool, expected: bool) -> None:
    p = pod(
        metadata={"name": "p", "deletionTimestamp": "2024-01-01T00:00:00Z"},
        status={"phase": "Running", "podIP": "1.2.3.4"},
    )
    assert eu.should_pod_be_in_endpoints(p, include_terminating=include) is expected


# --- ShouldSetHostname -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod_ns", "hostname", "subdomain", "svc_ns", "svc_name", "expected"),
    [
        ("ns", "foo", "svc-name", "ns", "svc-name", True),  # all matching
        ("ns", "", "svc-name", "ns", "svc-name", False),  # hostname not set
        ("ns", "hostname", "subdomain", "ns", "name", False),  # different name/subdomain
        ("ns1", "hostname", "svc-name", "ns2", "svc-name", False),  # different namespace
    ],
)
def test_should_set_hostname(
    pod_ns: str, hostname: str, subdomain: str, svc_ns: str, svc_name: str, expected: bool
) -> None:
    p = pod(metadata={"namespace": pod_ns}, spec={"hostname": hostname, "subdomain": subdomain})
    s = svc({"metadata": {"name": svc_name, "namespace": svc_ns}})
    assert eu.should_set_hostname(p, s) is expected


# --- FindPort ----------------------------------------------------------------------------------

CONTAINERS = [
    {"ports": [{"name": "", "containerPort": 8080, "protocol": "TCP"}]},
    {
        "ports": [
            {"name": "p", "containerPort": 8080, "protocol": "TCP"},
            {"name": "q", "containerPort": 8081, "protocol": "TCP"},
            {"name": "u", "containerPort": 53, "protocol": "UDP"},
        ]
    },
]


@pytest.mark.parametrize(
    ("target", "protocol", "expected"),
    [
        (8080, "TCP", 8080),  # a number is used as it is
        (9999, "TCP", 9999),  # even when no container declares it
        ("p", "TCP", 8080),
        ("q", "TCP", 8081),
        ("u", "UDP", 53),
    ],
)
def test_find_port(target: int | str, protocol: str, expected: int) -> None:
    p = pod(spec={"containers": CONTAINERS})
    port = eu.ServicePort(port=80, protocol=protocol, target_port=target)
    assert eu.find_port(p, port) == expected


@pytest.mark.parametrize(("target", "protocol"), [("x", "TCP"), ("u", "TCP"), ("p", "UDP")])
def test_find_port_named_not_found(target: str, protocol: str) -> None:
    p = pod(spec={"containers": CONTAINERS})
    with pytest.raises(eu.PortNotFound, match="no suitable port for manifest: uid-1"):
        eu.find_port(p, eu.ServicePort(port=80, protocol=protocol, target_port=target))


def test_find_port_in_sidecar_only() -> None:
    sidecar = {"name": "s", "restartPolicy": "Always", "ports": [{"name": "s", "containerPort": 7000}]}
    plain_init = {"name": "i", "ports": [{"name": "i", "containerPort": 7001}]}
    p = pod(spec={"containers": [], "initContainers": [sidecar, plain_init]})
    assert eu.find_port(p, eu.ServicePort(port=80, target_port="s")) == 7000
    with pytest.raises(eu.PortNotFound):
        eu.find_port(p, eu.ServicePort(port=80, target_port="i"))


def test_find_port_defaults_to_service_port() -> None:
    assert eu.find_port(pod(), eu.ServicePort(port=80)) == 80


# --- podEndpointsChanged -------------------------------------------------------------------------

ORIG: dict[str, Any] = {
    "metadata": {"namespace": "test", "name": "pod", "labels": {"foo": "bar"}},
    "status": {"conditions": [{"type": "Ready", "status": "False"}]},
}


def _with(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(doc))
    node = out
    *parents, last = path.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return out


def _ips(*ips: str) -> list[dict[str, str]]:
    return [{"ip": ip} for ip in ips]


CHANGES: list[tuple[str, dict[str, Any], dict[str, Any], bool, bool]] = [
    ("no changes", ORIG, ORIG, False, False),
    ("change NodeName", ORIG, _with(ORIG, "spec.nodeName", "changed"), False, False),
    ("change ResourceVersion", ORIG, _with(ORIG, "metadata.resourceVersion", "changed"), False, False),
    ("add primary IPv4", ORIG, _with(ORIG, "status.podIPs", _ips("1.2.3.4")), True, False),
    (
        "modify primary IPv4",
        _with(ORIG, "status.podIPs", _ips("1.2.3.4")),
        _with(ORIG, "status.podIPs", _ips("2.3.4.5")),
        True,
        False,
    ),
    ("add primary IPv6", ORIG, _with(ORIG, "status.podIPs", _ips("fd00:10:96::1")), True, False),
    (
        "modify primary IPv6",
        _with(ORIG, "status.podIPs", _ips("fd00:10:96::1")),
        _with(ORIG, "status.podIPs", _ips("fd00:10:96::2")),
        True,
        False,
    ),
    (
        "add secondary IP",
        _with(ORIG, "status.podIPs", _ips("1.2.3.4")),
        _with(ORIG, "status.podIPs", _ips("1.2.3.4", "fd00:10:96::1")),
        True,
        False,
    ),
    (
        "modify secondary IP",
        _with(ORIG, "status.podIPs", _ips("1.2.3.4", "fd00:10:96::1")),
        _with(ORIG, "status.podIPs", _ips("1.2.3.4", "fd00:10:96::2")),
        True,
        False,
    ),
    (
        "remove secondary IP",
        _with(ORIG, "status.podIPs", _ips("1.2.3.4", "fd00:10:96::1")),
        _with(ORIG, "status.podIPs", _ips("1.2.3.4")),
        True,
        False,
    ),
    (
        "change readiness",
        ORIG,
        _with(ORIG, "status.conditions", [{"type": "Ready", "status": "True"}]),
        True,
        False,
    ),
    (
        "mark for deletion",
        ORIG,
        _with(ORIG, "metadata.deletionTimestamp", "2024-01-01T00:00:00Z"),
        True,
        False,
    ),
    ("add label", ORIG, _with(ORIG, "metadata.labels", {"foo": "bar", "label": "new"}), False, True),
    (
        "modify label",
        _with(ORIG, "metadata.labels", {"foo": "bar", "label": "old"}),
        _with(ORIG, "metadata.labels", {"foo": "bar", "label": "new"}),
        False,
        True,
    ),
    ("remove label", _with(ORIG, "metadata.labels", {"foo": "bar", "label": "old"}), ORIG, False, True),
    ("change hostname", ORIG, _with(ORIG, "spec.hostname", "h"), False, True),
    ("change subdomain", ORIG, _with(ORIG, "spec.subdomain", "s"), False, True),
]


@pytest.mark.parametrize(("name", "old", "new", "pod_changed", "labels_changed"), CHANGES)
def test_pod_endpoints_changed(
    name: str, old: dict[str, Any], new: dict[str, Any], pod_changed: bool, labels_changed: bool
) -> None:
    got = eu.pod_endpoints_changed(pod(**old), pod(**new))
    assert got == (pod_changed, labels_changed), name


# --- determineNeededServiceUpdates ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "union", "xor"),
    [
        ({"a", "b", "c"}, {"a", "b", "c"}, {"a", "b", "c"}, set()),
        ({"a", "b", "c"}, {"d", "e", "f"}, {"a", "b", "c", "d", "e", "f"}, {"a", "b", "c", "d", "e", "f"}),
        ({"a", "b", "c"}, set(), {"a", "b", "c"}, {"a", "b", "c"}),
        (set(), {"a", "b", "c"}, {"a", "b", "c"}, {"a", "b", "c"}),
        ({"a", "b", "c"}, {"b", "c", "d"}, {"a", "b", "c", "d"}, {"a", "d"}),
        (set(), set(), set(), set()),
    ],
)
def test_determine_needed_service_updates(a: set[str], b: set[str], union: set[str], xor: set[str]) -> None:
    assert eu.determine_needed_service_updates(a, b, pod_changed=False) == xor
    assert eu.determine_needed_service_updates(a, b, pod_changed=True) == union


# --- ServiceSelectorCache --------------------------------------------------------------------------


def _services() -> list[eu.ServiceView]:
    out = [
        svc(
            {
                "metadata": {"name": f"service-{i}", "namespace": "test"},
                "spec": {"selector": {"app": f"test-{i}"}},
            }
        )
        for i in range(3)
    ]
    out.append(svc({"metadata": {"name": "no-selector", "namespace": "test"}}))
    out.append(svc({"metadata": {"name": "empty", "namespace": "test"}, "spec": {"selector": {}}}))
    out.append(
        svc(
            {"metadata": {"name": "other", "namespace": "elsewhere"}, "spec": {"selector": {"app": "test-0"}}}
        )
    )
    return out


@pytest.mark.parametrize(
    ("i", "expected"),
    [(0, {"test/service-0"}), (1, {"test/service-1"}), (2, {"test/service-2"}), (3, set()), (4, set())],
)
def test_pod_service_memberships(i: int, expected: set[str]) -> None:
    cache = eu.SelectorCache()
    p = pod(
        metadata={
            "namespace": "test",
            "name": f"test-pod-{i}",
            "labels": {"app": f"test-{i}", "label": f"label-{i}"},
        }
    )
    assert cache.pod_service_memberships(_services(), p) == expected


def test_selector_cache_follows_a_changed_selector() -> None:
    cache = eu.SelectorCache()
    assert cache.get("test/service-2", {"app": "test-2"}).matches({"app": "test-2"})
    changed = cache.get("test/service-2", {"app": "test-0"})
    assert changed.matches({"app": "test-0"}) and not changed.matches({"app": "test-2"})


def test_services_to_update_on_pod_change() -> None:
    cache = eu.SelectorCache()
    services = _services()
    base = {"namespace": "test", "name": "p", "resourceVersion": "1", "labels": {"app": "test-0"}}
    old = pod(metadata=base)
    same_rv = pod(metadata={**base, "labels": {"app": "test-1"}})
    assert eu.services_to_update_on_pod_change(services, cache, old, same_rv) == set()
    relabelled = pod(metadata={**base, "resourceVersion": "2", "labels": {"app": "test-1"}})
    assert eu.services_to_update_on_pod_change(services, cache, old, relabelled) == {
        "test/service-0",
        "test/service-1",
    }
    unchanged = pod(metadata={**base, "resourceVersion": "2"})
    assert eu.services_to_update_on_pod_change(services, cache, old, unchanged) == set()
    ready = pod(
        metadata={**base, "resourceVersion": "2"},
        status={"conditions": [{"type": "Ready", "status": "True"}]},
    )
    assert eu.services_to_update_on_pod_change(services, cache, old, ready) == {"test/service-0"}


# --- TriggerTimeTracker ----------------------------------------------------------------------------

T0 = dt.datetime(2019, 1, 1, 0, 0, 0, tzinfo=dt.UTC)
T1, T2, T3 = (T0 + dt.timedelta(seconds=n) for n in (1, 2, 3))


def _ready_pod(name: str, at: dt.datetime) -> eu.EndpointPodView:
    cond = {"type": "Ready", "status": "True", "lastTransitionTime": at.isoformat()}
    return pod(metadata={"namespace": "ns1", "name": name}, status={"conditions": [cond]})


def _service(created: dt.datetime) -> eu.ServiceView:
    return svc({"metadata": {"namespace": "ns1", "name": "svc1", "creationTimestamp": created.isoformat()}})


def test_trigger_time_new_service_is_its_creation() -> None:
    tracker = eu.TriggerTimeTracker()
    assert tracker.compute(_service(T0), [_ready_pod("pod1", T2)]) == T0


def test_trigger_time_pod_update_and_no_change() -> None:
    tracker = eu.TriggerTimeTracker()
    s = _service(T0)
    tracker.compute(s, [_ready_pod("pod1", T1), _ready_pod("pod2", T2)])
    assert tracker.compute(s, [_ready_pod("pod1", T3), _ready_pod("pod2", T2)]) == T3
    assert tracker.compute(s, [_ready_pod("pod1", T3), _ready_pod("pod2", T2)]) is None  # no change


def test_trigger_time_min_of_changed_pods_and_added_pod() -> None:
    tracker = eu.TriggerTimeTracker()
    s = _service(T0)
    tracker.compute(s, [_ready_pod("pod1", T0)])
    got = tracker.compute(s, [_ready_pod("pod1", T3), _ready_pod("pod2", T2), _ready_pod("pod3", T1)])
    assert got == T1


def test_trigger_time_service_recreated() -> None:
    tracker = eu.TriggerTimeTracker()
    tracker.compute(_service(T0), [_ready_pod("pod1", T1)])
    assert tracker.compute(_service(T3), [_ready_pod("pod1", T1)]) == T3


def test_trigger_time_deleted_service_starts_over() -> None:
    tracker = eu.TriggerTimeTracker()
    tracker.compute(_service(T0), [_ready_pod("pod1", T1)])
    tracker.delete_service("ns1", "svc1")
    assert tracker.compute(_service(T0), [_ready_pod("pod1", T1)]) == T0


def _stopped_pod(name: str, at: dt.datetime) -> eu.EndpointPodView:
    cond = {"type": "Ready", "status": "False", "lastTransitionTime": at.isoformat()}
    return pod(
        metadata={"namespace": "ns1", "name": name},
        status={"phase": "Succeeded", "conditions": [cond]},
    )


def test_trigger_time_pod_stopped_and_deleted_within_one_sync() -> None:
    # Upstream syncs between the pod's last status and its deletion and keeps that status' time;
    # a sync that sees both at once reports the same time.
    tracker = eu.TriggerTimeTracker()
    s = _service(T0)
    tracker.compute(s, [_ready_pod("pod1", T1), _ready_pod("pod2", T1)])
    tracker.pod_deleted({"ns1/svc1"}, _stopped_pod("pod1", T3))
    assert tracker.compute(s, [_ready_pod("pod2", T1)]) == T3
    assert tracker.compute(s, [_ready_pod("pod2", T1)]) is None  # reported once


def test_trigger_time_deleted_pod_whose_status_was_synced() -> None:
    tracker = eu.TriggerTimeTracker()
    s = _service(T0)
    tracker.compute(s, [_ready_pod("pod1", T1)])
    tracker.compute(s, [_stopped_pod("pod1", T2)])
    tracker.pod_deleted({"ns1/svc1"}, _stopped_pod("pod1", T2))
    assert tracker.compute(s, []) is None


def test_trigger_time_earliest_of_deleted_and_changed_pods() -> None:
    tracker = eu.TriggerTimeTracker()
    s = _service(T0)
    tracker.compute(s, [_ready_pod("pod1", T0), _ready_pod("pod2", T0)])
    tracker.pod_deleted({"ns1/svc1"}, _stopped_pod("pod1", T2))
    assert tracker.compute(s, [_ready_pod("pod2", T3)]) == T2


def test_trigger_time_deleted_pod_before_first_sync() -> None:
    tracker = eu.TriggerTimeTracker()
    tracker.pod_deleted({"ns1/svc1"}, _stopped_pod("pod1", T3))
    assert tracker.compute(_service(T0), []) == T0


def test_format_trigger_time() -> None:
    assert eu.format_trigger_time(T0) == "2019-01-01T00:00:00Z"
    assert eu.format_trigger_time(T0 + dt.timedelta(microseconds=120000)) == "2019-01-01T00:00:00.12Z"


# --- small helpers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "family"),
    [("1.2.3.4", eu.IPV4), ("fd00:10:96::1", eu.IPV6), ("::ffff:1.2.3.4", eu.IPV4), ("junk", eu.IPV4)],
)
def test_ip_family(address: str, family: str) -> None:
    assert eu.ip_family(address) == family


@pytest.mark.parametrize(("cluster_ip", "expected"), [("10.0.0.1", True), ("None", False), ("", False)])
def test_is_service_ip_set(cluster_ip: str, expected: bool) -> None:
    assert eu.is_service_ip_set(svc({"spec": {"clusterIP": cluster_ip}})) is expected


# --- RepackSubsets ------------------------------------------------------------------------------


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


PACK_CASES: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]]]] = [
    ("empty everything", [], []),
    (
        "one addr, one port",
        [{"addresses": [addr("1.2.3.4")], "ports": [port(111)]}],
        [{"addresses": [addr("1.2.3.4")], "ports": [port(111)]}],
    ),
    (
        "one addr, no ports (a headless Service's)",
        [{"addresses": [addr("1.2.3.4")]}],
        [{"addresses": [addr("1.2.3.4")]}],
    ),
    (
        "one not-ready addr, one port",
        [{"notReadyAddresses": [addr("1.2.3.4")], "ports": [port(111)]}],
        [{"notReadyAddresses": [addr("1.2.3.4")], "ports": [port(111)]}],
    ),
    (
        "one subset, dup addrs",
        [{"addresses": [addr("1.2.3.4"), addr("1.2.3.4")], "ports": [port(111)]}],
        [{"addresses": [addr("1.2.3.4")], "ports": [port(111)]}],
    ),
    (
        "one subset, dup ip, distinct pods",
        [{"addresses": [addr("1.2.3.4", "uid-2"), addr("1.2.3.4", "uid-1")], "ports": [port(111)]}],
        [{"addresses": [addr("1.2.3.4", "uid-1"), addr("1.2.3.4", "uid-2")], "ports": [port(111)]}],
    ),
    (
        "two subsets, same port, merged and sorted by IP",
        [
            {"addresses": [addr("5.6.7.8")], "ports": [port(111)]},
            {"addresses": [addr("1.2.3.4")], "ports": [port(111)]},
        ],
        [{"addresses": [addr("1.2.3.4"), addr("5.6.7.8")], "ports": [port(111)]}],
    ),
    (
        "one addr, two ports from two subsets",
        [
            {"addresses": [addr("1.2.3.4")], "ports": [port(111, "p")]},
            {"addresses": [addr("1.2.3.4")], "ports": [port(222, "q")]},
        ],
        [{"addresses": [addr("1.2.3.4")], "ports": [port(111, "p"), port(222, "q")]}],
    ),
    (
        "not ready trumps ready for the same port",
        [
            {"addresses": [addr("1.2.3.4")], "ports": [port(111)]},
            {"notReadyAddresses": [addr("1.2.3.4")], "ports": [port(111)]},
        ],
        [{"notReadyAddresses": [addr("1.2.3.4")], "ports": [port(111)]}],
    ),
    (
        "not ready trumps ready, whichever comes first",
        [
            {"notReadyAddresses": [addr("1.2.3.4")], "ports": [port(111)]},
            {"addresses": [addr("1.2.3.4")], "ports": [port(111)]},
        ],
        [{"notReadyAddresses": [addr("1.2.3.4")], "ports": [port(111)]}],
    ),
    (
        "ready and not-ready addresses of one port share a subset",
        [
            {"addresses": [addr("1.2.3.4")], "ports": [port(111)]},
            {"notReadyAddresses": [addr("5.6.7.8")], "ports": [port(111)]},
        ],
        [{"addresses": [addr("1.2.3.4")], "notReadyAddresses": [addr("5.6.7.8")], "ports": [port(111)]}],
    ),
]


def udp(number: int, name: str) -> dict[str, Any]:
    return {**port(number, name), "protocol": "UDP"}


def pod_addr(ip: str, name: str, node: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {
        "ip": ip,
        "targetRef": {"kind": "Pod", "namespace": "ns", "name": name, "uid": f"uid-{name}"},
    }
    if node:
        out["nodeName"] = node
    return out


# Expected layouts printed by upstream's own RepackSubsets (k8s.io/kubernetes v1.32.13,
# pkg/api/v1/endpoints) for the same input: ports and subsets in the order of the MD5 of their
# Go dump, which upstream's controller writes and kube-apiserver stores as written. Sorting by
# content instead reverses both of these, so every Endpoints upstream wrote would look changed.
UPSTREAM_ORDER_CASES: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]]]] = [
    (
        "ports in upstream's order",
        [
            {"addresses": [addr("10.0.0.1", "uid-a")], "ports": [udp(8080, "dns"), udp(8080, "https")]},
            {"addresses": [addr("10.0.0.2", "uid-b")], "ports": [port(8081, "web")]},
            {"addresses": [addr("10.0.0.1", "uid-a")], "ports": [port(8080, "web")]},
            {"notReadyAddresses": [addr("10.0.0.3")], "ports": [port(8081, "web")]},
            {"ports": [port(7)]},  # a port without addresses is dropped
        ],
        [
            {
                "addresses": [addr("10.0.0.1", "uid-a")],
                "ports": [port(8080, "web"), udp(8080, "https"), udp(8080, "dns")],
            },
            {
                "addresses": [addr("10.0.0.2", "uid-b")],
                "notReadyAddresses": [addr("10.0.0.3")],
                "ports": [port(8081, "web")],
            },
        ],
    ),
    (
        "subsets in upstream's order",
        [
            {"addresses": [pod_addr("10.244.0.2", "a", "sim-node-0")], "ports": [port(8080, "web")]},
            {"addresses": [pod_addr("10.244.0.2", "a", "sim-node-0")], "ports": [port(9090, "metrics")]},
            {"addresses": [pod_addr("10.244.0.2", "a", "sim-node-0")], "ports": [udp(53, "dns")]},
            {"addresses": [pod_addr("10.244.1.2", "b", "sim-node-1")], "ports": [port(8081, "web")]},
            {"addresses": [pod_addr("10.244.1.2", "b", "sim-node-1")], "ports": [port(9090, "metrics")]},
            {"addresses": [pod_addr("10.244.1.2", "b", "sim-node-1")], "ports": [udp(53, "dns")]},
            {"notReadyAddresses": [pod_addr("10.244.2.2", "c")], "ports": [port(8081, "web")]},
        ],
        [
            {
                "addresses": [pod_addr("10.244.1.2", "b", "sim-node-1")],
                "notReadyAddresses": [pod_addr("10.244.2.2", "c")],
                "ports": [port(8081, "web")],
            },
            {"addresses": [pod_addr("10.244.0.2", "a", "sim-node-0")], "ports": [port(8080, "web")]},
            {
                "addresses": [
                    pod_addr("10.244.0.2", "a", "sim-node-0"),
                    pod_addr("10.244.1.2", "b", "sim-node-1"),
                ],
                "ports": [udp(53, "dns"), port(9090, "metrics")],
            },
        ],
    ),
]


@pytest.mark.parametrize(("name", "given", "expected"), PACK_CASES + UPSTREAM_ORDER_CASES)
def test_repack_subsets(name: str, given: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    assert eu.repack_subsets(given) == expected, name


def test_repack_keeps_distinct_port_sets_apart() -> None:
    given = [
        {"addresses": [addr("1.2.3.4")], "ports": [port(111)]},
        {"addresses": [addr("5.6.7.8")], "ports": [port(222)]},
    ]
    packed = eu.repack_subsets(given)
    assert sorted((s["addresses"][0]["ip"], s["ports"][0]["port"]) for s in packed) == [
        ("1.2.3.4", 111),
        ("5.6.7.8", 222),
    ]
    # The order is a function of the content only: the same input, shuffled, packs the same.
    assert eu.repack_subsets(list(reversed(given))) == packed


# Upstream's order, as upstream's RepackSubsets (v1.32, run on the same input) returned it.
def pod_addr(ip: str, n: int, node: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ip": ip,
        "targetRef": {"kind": "Pod", "namespace": "ns", "name": f"p{n}", "uid": f"uid-{n}"},
    }
    if node is not None:
        out["nodeName"] = node
    return out


def udp(number: int, name: str = "") -> dict[str, Any]:
    return {**port(number, name), "protocol": "UDP"}


UPSTREAM_ORDER_CASES: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]]]] = [
    (
        "a Service's https and http ports",
        [{"addresses": [addr("10.0.0.1")], "ports": [port(80, "http"), port(443, "https")]}],
        [{"addresses": [addr("10.0.0.1")], "ports": [port(443, "https"), port(80, "http")]}],
    ),
    (
        "two subsets, three ports in one",
        [
            {"addresses": [pod_addr("10.0.2.2", 2)], "ports": [port(54, "http7")]},
            {
                "addresses": [addr("10.0.0.3")],
                "ports": [udp(9091, "metrics9"), udp(54, "a7"), port(444, "metrics6")],
            },
        ],
        [
            {"addresses": [pod_addr("10.0.2.2", 2)], "ports": [port(54, "http7")]},
            {
                "addresses": [addr("10.0.0.3")],
                "ports": [udp(54, "a7"), udp(9091, "metrics9"), port(444, "metrics6")],
            },
        ],
    ),
    (
        "two subsets, the one with node names first",
        [
            {
                "addresses": [{"ip": "10.0.2.8", "nodeName": "node-0"}, addr("10.0.0.3")],
                "ports": [port(8081, "grpc8")],
            },
            {
                "addresses": [pod_addr("10.0.0.9", 9, "node-1"), pod_addr("10.0.2.5", 5, "node-1")],
                "ports": [udp(444)],
            },
        ],
        [
            {
                "addresses": [pod_addr("10.0.0.9", 9, "node-1"), pod_addr("10.0.2.5", 5, "node-1")],
                "ports": [udp(444)],
            },
            {
                "addresses": [addr("10.0.0.3"), {"ip": "10.0.2.8", "nodeName": "node-0"}],
                "ports": [port(8081, "grpc8")],
            },
        ],
    ),
    (
        "a subset without ports after one with",
        [
            {"addresses": [pod_addr("10.0.2.8", 8)]},
            {
                "addresses": [pod_addr("10.0.1.1", 1, "node-1")],
                "ports": [udp(9091, "grpc9"), udp(445, "https11")],
            },
        ],
        [
            {
                "addresses": [pod_addr("10.0.1.1", 1, "node-1")],
                "ports": [udp(445, "https11"), udp(9091, "grpc9")],
            },
            {"addresses": [pod_addr("10.0.2.8", 8)]},
        ],
    ),
]


@pytest.mark.parametrize(("name", "given", "expected"), UPSTREAM_ORDER_CASES)
def test_repack_orders_ports_and_subsets_as_upstream(
    name: str, given: list[dict[str, Any]], expected: list[dict[str, Any]]
) -> None:
    # As stock kube-controller-manager orders them, so what it wrote reads as up to date (an
    # order of our own rewrote every multi-port Service's Endpoints after a takeover).
    assert eu.repack_subsets(given) == expected, name
    assert eu.repack_subsets(list(reversed(given))) == expected, name


@pytest.mark.parametrize(
    ("given", "md5"),
    [
        (port(443, "https"), "9b812254c483d72210c747708df106ac"),
        (port(5432), "861c73773439a7d051013333566a326c"),
        ({**udp(1, "x"), "appProtocol": "http"}, "52bf410528e7e8ee9db0bc1d744f0b13"),
    ],
)
def test_a_ports_sort_key_is_the_md5_of_gos_dump(given: dict[str, Any], md5: str) -> None:
    # The digests of k8s.io/apimachinery's dump.ForHash of the same v1.EndpointPort.
    assert eu._port_order(given).hex() == md5


def test_a_subsets_sort_key_is_the_md5_of_gos_dump() -> None:
    subset = {
        "addresses": [pod_addr("10.0.0.1", 0, "n1")],
        "notReadyAddresses": [{"ip": "10.0.0.2", "hostname": "h"}],
        "ports": [port(80, "http")],
    }
    subset["addresses"][0]["targetRef"].update(name="p", uid="u1")
    assert eu._subset_order(subset).hex() == "06681f445bc05f865b6863c6dacd7827"


@pytest.mark.parametrize(
    ("port", "digest"),
    [
        # md5 of Go's dump.ForHash of the discovery/v1 EndpointPort, printed by a Go program
        # over k8s.io/endpointslice v0.32.12 and k8s.io/api v0.32.13.
        ({"name": "http", "protocol": "TCP", "port": 8080}, "3a668b0e210f1dc6528e2da191cd41d4"),
        ({"name": "metrics", "protocol": "TCP", "port": 9090}, "74b10466d80390ba5b632d1af04296da"),
        ({"name": "", "protocol": "SCTP", "port": 53}, "9201a08eb6f5317de416af35b9f2a36d"),
        (
            {"name": "b", "protocol": "TCP", "port": 2, "appProtocol": "kubernetes.io/h2c"},
            "9605cefa0dd6a9274c2c13dd2b1fe082",
        ),
    ],
)
def test_slice_port_order_is_upstreams_digest(port: dict[str, Any], digest: str) -> None:
    assert eu.slice_port_order(port).hex() == digest
