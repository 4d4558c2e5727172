"""The endpoints controller end to end: `kcm dev --controllers endpoint,deployment,replicaset`,
driven with kubectl.

One shared stack, a namespace per test. The simulator gives running pods an IP and reads
`sim.kcm.dev/ready` (docs/simulator.md) for their Ready condition. Covers `kubectl expose
deployment` (addresses, nodeName, targetRef, labels, trigger-time annotation, `kubectl get
endpoints`), settled Endpoints of several subsets and ports not rewritten by a resync, readiness
moving an address between ready and not ready, a named targetPort resolved per pod,
publishNotReadyAddresses, a terminating pod (left out unless not-ready addresses are published),
a headless Service with hostname/subdomain, hand-written Endpoints of a selectorless Service
left alone, a deleted Service's Endpoints removed, bad Endpoints refused by the API server with
upstream's message, and the controller killed with -9 mid-change (nothing lost).
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import wait_for
from tests.e2e import devstack
from tests.e2e.serviceobjects import addresses, ips, pod, service, settled, several_subsets_and_ports

stack = devstack.stack_fixture("--controllers", "endpoint,deployment,replicaset")
_counter = iter(range(1000))
TRIGGER_TIME = "endpoints.kubernetes.io/last-change-trigger-time"
CONTROLLER = "endpoints-controller"
QUEUE = "endpoint"  # upstream's queue name, the workqueue_* metrics' `name`
HEADLESS = "service.kubernetes.io/headless"


@pytest.fixture
def ns(stack: devstack.DevStack) -> Iterator[str]:
    name = f"ep-{next(_counter)}"
    stack.kubectl("create", "namespace", name)
    yield name


def get(stack: devstack.DevStack, ns: str, *what: str) -> Any:
    res = stack.kubectl("get", "-n", ns, *what, "-o", "json", check=False)
    return json.loads(res.stdout) if res.returncode == 0 else None


def create(stack: devstack.DevStack, obj: dict[str, Any]) -> None:
    stack.kubectl("create", "-f", "-", input=json.dumps(obj))


def running_pod_ips(stack: devstack.DevStack, ns: str, selector: str) -> dict[str, str]:
    pods = get(stack, ns, "pods", "-l", selector)["items"]
    return {
        p["metadata"]["name"]: p["status"]["podIP"]
        for p in pods
        if p.get("status", {}).get("podIP") and not p["metadata"].get("deletionTimestamp")
    }


def wait_endpoints(
    stack: devstack.DevStack, ns: str, name: str, check: Any, what: str, timeout: float = 30
) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def ok() -> bool:
        ep = get(stack, ns, "endpoints", name)
        if ep is not None and check(ep):
            found.update(ep)
            return True
        return False

    wait_for(ok, timeout, interval=0.1, what=f"{what}: {get(stack, ns, 'endpoints', name)}")
    return found


def test_expose_deployment_gives_endpoints_with_the_pods_addresses(stack: devstack.DevStack, ns: str) -> None:
    stack.kubectl("-n", ns, "create", "deployment", "web", "--image=nginx", "--replicas=2")
    stack.kubectl("-n", ns, "expose", "deployment", "web", "--port", "80")
    wait_for(
        lambda: len(running_pod_ips(stack, ns, "app=web")) == 2, 30, interval=0.1, what="2 pods with IPs"
    )
    pods = running_pod_ips(stack, ns, "app=web")
    ep = wait_endpoints(stack, ns, "web", lambda e: ips(e) == set(pods.values()), "both pods' addresses")
    svc = get(stack, ns, "service", "web")
    assert ep["metadata"]["labels"] == svc["metadata"]["labels"] == {"app": "web"}
    assert TRIGGER_TIME in ep["metadata"]["annotations"]
    assert [s["ports"] for s in ep["subsets"]] == [[{"port": 80, "protocol": "TCP"}]]
    for address in addresses(ep):
        ref = address["targetRef"]
        assert ref["kind"] == "Pod" and ref["namespace"] == ns
        assert pods[ref["name"]] == address["ip"]
        assert address["nodeName"]
    table = stack.kubectl("-n", ns, "get", "endpoints", "web").stdout
    for ip in pods.values():
        assert f"{ip}:80" in table, table


def test_readiness_moves_addresses_between_ready_and_not_ready(stack: devstack.DevStack, ns: str) -> None:
    create(stack, pod(ns, "a", {"app": "r"}))
    create(stack, pod(ns, "b", {"app": "r"}))
    create(stack, service(ns, "r", selector={"app": "r"}, ports=[{"port": 80, "targetPort": 8080}]))
    wait_endpoints(stack, ns, "r", lambda e: len(ips(e)) == 2, "both ready")
    stack.kubectl("-n", ns, "annotate", "--overwrite", "pod/a", "sim.kcm.dev/ready=false")
    a_ip = get(stack, ns, "pod", "a")["status"]["podIP"]
    ep = wait_endpoints(
        stack, ns, "r", lambda e: ips(e, "notReadyAddresses") == {a_ip}, "a moved to notReadyAddresses"
    )
    assert a_ip not in ips(ep) and len(ips(ep)) == 1
    stack.kubectl("-n", ns, "annotate", "--overwrite", "pod/a", "sim.kcm.dev/ready=true")
    wait_endpoints(
        stack, ns, "r", lambda e: len(ips(e)) == 2 and not ips(e, "notReadyAddresses"), "a ready again"
    )


def test_named_target_port_is_resolved_per_pod(stack: devstack.DevStack, ns: str) -> None:
    create(stack, pod(ns, "p8080", {"app": "n"}, ports=[{"name": "http", "containerPort": 8080}]))
    create(stack, pod(ns, "p9090", {"app": "n"}, ports=[{"name": "http", "containerPort": 9090}]))
    create(stack, pod(ns, "other", {"app": "n"}, ports=[{"name": "admin", "containerPort": 7070}]))
    create(
        stack,
        service(ns, "n", selector={"app": "n"}, ports=[{"name": "web", "port": 80, "targetPort": "http"}]),
    )

    def by_port(ep: dict[str, Any]) -> dict[int, set[str]]:
        return {
            s["ports"][0]["port"]: {a["targetRef"]["name"] for a in s.get("addresses") or []}
            for s in ep.get("subsets") or []
        }

    ep = wait_endpoints(
        stack, ns, "n", lambda e: by_port(e) == {8080: {"p8080"}, 9090: {"p9090"}}, "one subset per port"
    )
    assert all(s["ports"][0]["name"] == "web" for s in ep["subsets"])


def test_settled_endpoints_with_several_subsets_and_ports_are_not_rewritten(
    stack: devstack.DevStack, ns: str
) -> None:
    """Issue 27: a controller whose layout differs from the stored one rewrites on every sync (and
    such a write drops the trigger-time annotation). Once settled, a resync of the Service writes
    nothing: the resourceVersion stays and so does the annotation."""
    for obj in several_subsets_and_ports(ns):
        create(stack, obj)
    ep = wait_endpoints(stack, ns, "m", settled, "three subsets")
    assert TRIGGER_TIME in ep["metadata"]["annotations"]

    def syncs() -> float:
        return stack.metric(CONTROLLER, "workqueue_work_duration_seconds_count", name=QUEUE)

    before = syncs()
    stack.kubectl("-n", ns, "annotate", "service", "m", "resync=1")
    wait_for(lambda: syncs() > before, 30, interval=0.2, what="the Service synced again")
    after = get(stack, ns, "endpoints", "m")
    assert after["metadata"]["resourceVersion"] == ep["metadata"]["resourceVersion"]
    assert after["metadata"]["annotations"][TRIGGER_TIME] == ep["metadata"]["annotations"][TRIGGER_TIME]


def test_publish_not_ready_addresses_lists_unready_pods_as_ready(stack: devstack.DevStack, ns: str) -> None:
    create(stack, pod(ns, "slow", {"app": "p"}, ready=False))
    create(stack, service(ns, "plain", selector={"app": "p"}, ports=[{"port": 80}]))
    create(
        stack,
        service(ns, "published", selector={"app": "p"}, ports=[{"port": 80}], publishNotReadyAddresses=True),
    )
    wait_endpoints(stack, ns, "plain", lambda e: len(ips(e, "notReadyAddresses")) == 1, "not ready")
    ep = wait_endpoints(stack, ns, "published", lambda e: len(ips(e)) == 1, "published as ready")
    assert not ips(ep, "notReadyAddresses")


def test_terminating_pod_leaves_unless_not_ready_addresses_are_published(
    stack: devstack.DevStack, ns: str
) -> None:
    create(stack, pod(ns, "t", {"app": "t"}, ignore_sigterm=True, terminationGracePeriodSeconds=600))
    create(stack, pod(ns, "u", {"app": "t"}))
    create(stack, service(ns, "plain", selector={"app": "t"}, ports=[{"port": 80}]))
    create(
        stack,
        service(ns, "published", selector={"app": "t"}, ports=[{"port": 80}], publishNotReadyAddresses=True),
    )
    wait_endpoints(stack, ns, "plain", lambda e: len(ips(e)) == 2, "both pods")
    wait_endpoints(stack, ns, "published", lambda e: len(ips(e)) == 2, "both pods")
    t_ip = get(stack, ns, "pod", "t")["status"]["podIP"]
    stack.kubectl("-n", ns, "delete", "pod", "t", "--wait=false")
    # Gone from the addresses (not moved to notReadyAddresses) while the pod still runs out its
    # grace period.
    ep = wait_endpoints(stack, ns, "plain", lambda e: t_ip not in ips(e), "the terminating pod left")
    assert t_ip not in ips(ep, "notReadyAddresses") and len(ips(ep)) == 1
    assert get(stack, ns, "pod", "t")["metadata"].get("deletionTimestamp")
    # A Service publishing not-ready addresses keeps it: label the Service so that its Endpoints
    # are written again after the deletion, then look.
    stack.kubectl("-n", ns, "label", "service", "published", "after=delete")
    ep = wait_endpoints(
        stack, ns, "published", lambda e: e["metadata"].get("labels") == {"after": "delete"}, "relabelled"
    )
    assert ips(ep) == {t_ip, get(stack, ns, "pod", "u")["status"]["podIP"]}


def test_headless_service_with_hostname_and_subdomain(stack: devstack.DevStack, ns: str) -> None:
    create(stack, pod(ns, "h0", {"app": "h"}, hostname="web-0", subdomain="hs"))
    create(stack, pod(ns, "h1", {"app": "h"}, hostname="web-1", subdomain="other"))
    create(stack, service(ns, "hs", selector={"app": "h"}, clusterIP="None", ports=[{"port": 80}]))
    ep = wait_endpoints(stack, ns, "hs", lambda e: len(ips(e)) == 2, "both addresses")
    assert ep["metadata"]["labels"] == {HEADLESS: ""}
    hostnames = {a["targetRef"]["name"]: a.get("hostname") for a in addresses(ep)}
    assert hostnames == {"h0": "web-0", "h1": None}


def test_selectorless_endpoints_are_left_alone_and_deleted_services_lose_theirs(
    stack: devstack.DevStack, ns: str
) -> None:
    create(stack, service(ns, "manual", ports=[{"port": 80}]))
    create(
        stack,
        {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {"name": "manual", "namespace": ns, "labels": {"mine": "yes"}},
            "subsets": [{"addresses": [{"ip": "192.0.2.10"}], "ports": [{"port": 80}]}],
        },
    )
    before = get(stack, ns, "endpoints", "manual")
    # Something the controller does act on, queued after the selectorless Service: once it is
    # done, the controller has seen the manual Service too.
    stack.kubectl("-n", ns, "label", "service", "manual", "touched=yes")
    create(stack, pod(ns, "x", {"app": "x"}))
    create(stack, service(ns, "x", selector={"app": "x"}, ports=[{"port": 80}]))
    wait_endpoints(stack, ns, "x", lambda e: len(ips(e)) == 1, "the selected pod")
    after = get(stack, ns, "endpoints", "manual")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["metadata"]["labels"] == {"mine": "yes"} and ips(after) == {"192.0.2.10"}
    stack.kubectl("-n", ns, "delete", "service", "x")
    wait_for(lambda: get(stack, ns, "endpoints", "x") is None, 30, interval=0.1, what="Endpoints deleted")


def test_bad_endpoints_are_refused_with_upstreams_message(stack: devstack.DevStack, ns: str) -> None:
    bad = {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": "bad", "namespace": ns},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"port": 70000}]}],
    }
    res = stack.kubectl("create", "-f", "-", input=json.dumps(bad), check=False)
    assert res.returncode != 0
    # kubectl lists the causes of a 422 one per line.
    assert res.stderr == (
        'The Endpoints "bad" is invalid: \n'
        '* subsets[0].addresses[0].ip: Invalid value: "127.0.0.1": may not be in the loopback range '
        "(127.0.0.0/8, ::1/128)\n"
        "* subsets[0].ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive\n"
    ), res.stderr
    assert get(stack, ns, "endpoints", "bad") is None


def test_killed_controller_loses_no_change(stack: devstack.DevStack, ns: str) -> None:
    stack.kubectl("-n", ns, "create", "deployment", "k", "--image=nginx", "--replicas=2")
    stack.kubectl("-n", ns, "expose", "deployment", "k", "--port", "80")
    wait_endpoints(stack, ns, "k", lambda e: len(ips(e)) == 2, "the first two pods")
    stack.kubectl("-n", ns, "scale", "deployment", "k", "--replicas=8")
    wait_endpoints(stack, ns, "k", lambda e: len(ips(e)) > 2, "some of the new pods", timeout=60)
    pids = stack.controller_pids("endpoint")
    assert pids
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: len(running_pod_ips(stack, ns, "app=k")) == 8, 60, interval=0.1, what="8 pods with IPs")
    want = set(running_pod_ips(stack, ns, "app=k").values())
    wait_endpoints(stack, ns, "k", lambda e: ips(e) == want, "every pod's address", timeout=60)
    stack.wait_healthy(60)
