"""The endpointslice controller end to end: `kcm dev` with it and the garbage collector, two
simulated nodes (zones zone-a and zone-b), and a test-only `--max-endpoints-per-slice=3` so a
handful of pods spans several slices.

Covers, through kubectl: `kubectl expose` gives a Service whose EndpointSlices hold its pods'
addresses with upstream's labels, owner, node name, zone (from the node's label) and target;
a not-ready pod and a terminating one get upstream's ready/serving/terminating conditions;
seven pods pack into three slices of at most three; a deleted Service's slices go (the garbage
collector follows their owner reference); the API server refuses invalid slices with upstream's
messages; and pods added while the controller is killed (-9) are in the slices once `kcm dev`
has restarted it. A namespace per test.
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import pytest

from tests.conftest import wait_for
from tests.e2e import devstack

stack = devstack.stack_fixture(
    "--controllers",
    "endpointslice,garbagecollector",
    "--nodes",
    "2",
    "--max-endpoints-per-slice=3",
)

CONTROLLER = "endpointslice-controller"
SERVICE_NAME = "kubernetes.io/service-name"
MANAGED_BY = "endpointslice.kubernetes.io/managed-by"


def get_json(s: devstack.DevStack, *args: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(s.kubectl(*args, "-o", "json").stdout)
    return doc


def namespace(s: devstack.DevStack, name: str) -> str:
    s.kubectl("create", "namespace", name)
    return name


def run_pod(s: devstack.DevStack, ns: str, name: str, *, ready: bool = True, grace: int = 0) -> None:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": {"app": "web"}}
    # Containers that ignore SIGTERM: a grace period keeps a deleted pod terminating that long.
    meta["annotations"] = {"sim.kcm.dev/ready": str(ready).lower(), "sim.kcm.dev/ignore-sigterm": "true"}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "terminationGracePeriodSeconds": grace,
            "containers": [
                {"name": "c", "image": "nginx", "ports": [{"name": "http", "containerPort": 8080}]}
            ],
        },
    }
    s.kubectl("create", "-f", "-", input=json.dumps(pod))


def expose(s: devstack.DevStack, ns: str, pod: str = "web-0") -> None:
    s.kubectl("-n", ns, "expose", "pod", pod, "--name=web", "--port=80", "--target-port=http")


def slices(s: devstack.DevStack, ns: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = get_json(s, "-n", ns, "get", "endpointslices")["items"]
    return items


def endpoints_by_pod(s: devstack.DevStack, ns: str) -> dict[str, dict[str, Any]]:
    return {
        ep["targetRef"]["name"]: ep
        for item in slices(s, ns)
        for ep in item.get("endpoints") or ()
        if ep.get("targetRef")
    }


def pod_ips(s: devstack.DevStack, ns: str) -> dict[str, str]:
    pods = get_json(s, "-n", ns, "get", "pods")["items"]
    return {p["metadata"]["name"]: p["status"].get("podIP", "") for p in pods}


def wait_pods_running(s: devstack.DevStack, ns: str, count: int) -> dict[str, str]:
    wait_for(
        lambda: sum(1 for ip in pod_ips(s, ns).values() if ip) == count,
        60,
        interval=0.2,
        what="pods have IPs",
    )
    return pod_ips(s, ns)


def test_expose_gives_slices_with_the_pods_addresses(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "eps-expose")
    for i in range(2):
        run_pod(stack, ns, f"web-{i}")
    ips = wait_pods_running(stack, ns, 2)
    expose(stack, ns)
    wait_for(
        lambda: set(endpoints_by_pod(stack, ns)) == set(ips), 30, interval=0.2, what="both pods in slices"
    )
    svc = get_json(stack, "-n", ns, "get", "service", "web")
    (item,) = slices(stack, ns)
    assert item["addressType"] == "IPv4"
    assert item["metadata"]["generateName"] == "web-"
    assert item["metadata"]["labels"][SERVICE_NAME] == "web"
    assert item["metadata"]["labels"][MANAGED_BY] == "endpointslice-controller.k8s.io"
    (owner,) = item["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Service",
        "web",
        svc["metadata"]["uid"],
        True,
    )
    assert item["ports"] == [{"name": "", "port": 8080, "protocol": "TCP"}]  # the named targetPort resolved
    zones = {
        n["metadata"]["name"]: n["metadata"]["labels"]["topology.kubernetes.io/zone"]
        for n in get_json(stack, "get", "nodes")["items"]
    }
    for name, ep in endpoints_by_pod(stack, ns).items():
        pod = get_json(stack, "-n", ns, "get", "pod", name)
        assert ep["addresses"] == [ips[name]]
        assert ep["conditions"] == {"ready": True, "serving": True, "terminating": False}
        assert ep["nodeName"] == pod["spec"]["nodeName"]
        assert ep["zone"] == zones[pod["spec"]["nodeName"]]
        assert ep["targetRef"] == {
            "kind": "Pod",
            "name": name,
            "namespace": ns,
            "uid": pod["metadata"]["uid"],
        }
    assert "endpoints.kubernetes.io/last-change-trigger-time" in item["metadata"]["annotations"]
    assert item["metadata"]["generation"] >= 1  # what the controller's stale-cache check compares
    out = stack.kubectl("-n", ns, "get", "endpointslices").stdout
    assert all(ip in out for ip in ips.values()), out


def test_readiness_and_terminating_conditions(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "eps-conditions")
    run_pod(stack, ns, "web-0")
    run_pod(stack, ns, "web-1", ready=False)
    run_pod(stack, ns, "web-2", grace=120)
    wait_pods_running(stack, ns, 3)
    expose(stack, ns)
    wait_for(lambda: len(endpoints_by_pod(stack, ns)) == 3, 30, interval=0.2, what="three endpoints")
    wait_for(
        lambda: (
            endpoints_by_pod(stack, ns)["web-1"]["conditions"]
            == {"ready": False, "serving": False, "terminating": False}
        ),
        30,
        interval=0.2,
        what="not-ready pod not ready",
    )
    stack.kubectl("-n", ns, "delete", "pod", "web-2", "--wait=false")
    wait_for(
        lambda: (
            endpoints_by_pod(stack, ns)["web-2"]["conditions"]
            == {"ready": False, "serving": True, "terminating": True}
        ),
        30,
        interval=0.2,
        what="terminating pod serving but not ready",
    )
    stack.kubectl("-n", ns, "annotate", "--overwrite", "pod", "web-1", "sim.kcm.dev/ready=true")
    wait_for(
        lambda: endpoints_by_pod(stack, ns)["web-1"]["conditions"]["ready"] is True,
        30,
        interval=0.2,
        what="ready again",
    )
    stack.kubectl("-n", ns, "delete", "pod", "web-2", "--grace-period=0", "--force")
    wait_for(
        lambda: set(endpoints_by_pod(stack, ns)) == {"web-0", "web-1"},
        30,
        interval=0.2,
        what="deleted pod gone",
    )


def test_more_pods_than_max_pack_into_few_slices_and_go_with_the_service(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "eps-pack")
    for i in range(7):
        run_pod(stack, ns, f"web-{i}")
    ips = wait_pods_running(stack, ns, 7)
    expose(stack, ns)
    wait_for(lambda: set(endpoints_by_pod(stack, ns)) == set(ips), 30, interval=0.2, what="seven endpoints")
    sizes = sorted(len(item.get("endpoints") or ()) for item in slices(stack, ns))
    assert sizes == [1, 3, 3]
    stack.kubectl("-n", ns, "delete", "service", "web")
    wait_for(lambda: not slices(stack, ns), 30, interval=0.2, what="slices deleted with their Service")


def test_topology_mode_auto_hints_endpoints_by_zone(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "eps-hints")
    for i in range(4):
        run_pod(stack, ns, f"web-{i}")
    wait_pods_running(stack, ns, 4)
    expose(stack, ns)
    stack.kubectl("-n", ns, "annotate", "service", "web", "service.kubernetes.io/topology-mode=Auto")

    def hinted() -> dict[str, int]:
        eps = endpoints_by_pod(stack, ns).values()
        zones = [ep.get("hints", {}).get("forZones", [{}])[0].get("name", "") for ep in eps]
        return {z: zones.count(z) for z in zones}

    # Two nodes of equal CPU in zone-a and zone-b: two endpoints hinted at each, wherever the pods run.
    wait_for(lambda: hinted() == {"zone-a": 2, "zone-b": 2}, 30, interval=0.2, what="hints by zone")
    events = get_json(
        stack, "-n", ns, "get", "events", "--field-selector", "reason=TopologyAwareHintsEnabled"
    )
    assert [e["message"] for e in events["items"]] == [
        "Topology Aware Hints has been enabled, addressType: IPv4"
    ]
    stack.kubectl("-n", ns, "annotate", "service", "web", "service.kubernetes.io/topology-mode-")
    wait_for(lambda: hinted() == {"": 4}, 30, interval=0.2, what="hints removed")


def test_a_pod_on_a_missing_node_is_left_out_with_an_event(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "eps-ghost")
    run_pod(stack, ns, "web-0")
    wait_pods_running(stack, ns, 1)
    ghost = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "ghost", "namespace": ns, "labels": {"app": "web"}},
        "spec": {"nodeName": "no-such-node", "containers": [{"name": "c", "image": "nginx"}]},
    }
    stack.kubectl("create", "-f", "-", input=json.dumps(ghost))
    status = {"status": {"phase": "Running", "podIP": "10.250.0.9", "podIPs": [{"ip": "10.250.0.9"}]}}
    stack.kubectl(
        "-n", ns, "patch", "pod", "ghost", "--subresource=status", "--type=merge", "-p", json.dumps(status)
    )
    expose(stack, ns)
    wait_for(
        lambda: set(endpoints_by_pod(stack, ns)) == {"web-0"}, 30, interval=0.2, what="the other pod's slice"
    )

    def event() -> str:
        items = get_json(
            stack, "-n", ns, "get", "events", "--field-selector", "reason=FailedToUpdateEndpointSlices"
        )
        return str(items["items"][0]["message"]) if items["items"] else ""

    wait_for(event, 30, interval=0.2, what="FailedToUpdateEndpointSlices Event")
    assert event() == (
        f"Error updating Endpoint Slices for Service {ns}/web: "
        f'skipping Pod ghost for Service {ns}/web: node "no-such-node" not found'
    )
    assert "ghost" not in endpoints_by_pod(stack, ns)


@pytest.mark.parametrize(
    ("slice_", "message"),
    [
        ({"endpoints": [{"addresses": ["10.1.2.3"]}]}, "addressType: Required value"),
        (
            {"addressType": "IPv4", "endpoints": [{"addresses": ["127.0.0.1"]}]},
            'endpoints[0].addresses[0]: Invalid value: "127.0.0.1": may not be in the loopback range',
        ),
        (
            {"addressType": "IPv4", "endpoints": [{"addresses": []}]},
            "endpoints[0].addresses: Required value: must contain at least 1 address",
        ),
    ],
)
def test_invalid_slices_are_refused(stack: devstack.DevStack, slice_: dict[str, Any], message: str) -> None:
    obj = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": "bad", "namespace": "default"},
    }
    obj.update(slice_)
    res = stack.kubectl("create", "-f", "-", input=json.dumps(obj), check=False)
    assert res.returncode != 0 and message in res.stderr, res.stderr


def test_changes_while_the_controller_is_killed_are_not_lost(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "eps-kill")
    run_pod(stack, ns, "web-0")
    wait_pods_running(stack, ns, 1)
    expose(stack, ns)
    wait_for(lambda: set(endpoints_by_pod(stack, ns)) == {"web-0"}, 30, interval=0.2, what="first endpoint")
    for pid in stack.controller_pids(CONTROLLER):
        os.kill(pid, signal.SIGKILL)
    for i in range(1, 5):
        run_pod(stack, ns, f"web-{i}")
    stack.kubectl("-n", ns, "delete", "pod", "web-0", "--wait=false")
    wait_for(
        lambda: set(endpoints_by_pod(stack, ns)) == {f"web-{i}" for i in range(1, 5)},
        90,
        interval=0.3,
        what="slices caught up after the restart",
    )
    assert sorted(len(item.get("endpoints") or ()) for item in slices(stack, ns)) in ([1, 3], [2, 2])
