"""The endpointslice-mirroring controller end to end: `kcm dev` with only it, and a test-only
`--mirroring-max-endpoints-per-subset=3` so the limit shows with a handful of addresses.

Covers, through kubectl: a selectorless Service with hand-written Endpoints gets a mirrored
EndpointSlice (upstream's labels, copied labels and annotations but the skipped ones, owner,
ready and not-ready endpoints, ports) that follows updates; the per-subset limit truncates with
the TooManyAddressesToMirror Event; the skip-mirror label opts out (and removes the slice); a
Service with a selector is not mirrored until the selector goes, and is again when it comes back;
deleting the Endpoints or the Service removes the slice; the API server's own
`default/kubernetes` Endpoints and EndpointSlice name its address and TLS port and are not
mirrored; changes made while the controller is killed (-9) are mirrored once `kcm dev` has
restarted it. A namespace per test.
"""

from __future__ import annotations

import json
import os
import signal
import urllib.parse
from typing import Any

import yaml

from tests.conftest import wait_for
from tests.e2e import devstack

stack = devstack.stack_fixture(
    "--controllers", "endpointslicemirroring", "--mirroring-max-endpoints-per-subset=3"
)

CONTROLLER = "endpointslice-mirroring-controller"
SERVICE_NAME = "kubernetes.io/service-name"
MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
MIRRORING = "endpointslicemirroring-controller.k8s.io"
PORTS = [{"name": "http", "port": 8080, "protocol": "TCP"}]


def get_json(s: devstack.DevStack, *args: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(s.kubectl(*args, "-o", "json").stdout)
    return doc


def namespace(s: devstack.DevStack, name: str) -> str:
    s.kubectl("create", "namespace", name)
    return name


def create(s: devstack.DevStack, obj: dict[str, Any], verb: str = "create") -> None:
    s.kubectl(verb, "-f", "-", input=json.dumps(obj))


def service(ns: str, name: str, selector: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}
    if selector:
        spec["selector"] = selector
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def endpoints(
    ns: str,
    name: str,
    ready: list[str],
    not_ready: tuple[str, ...] = (),
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    subset: dict[str, Any] = {"addresses": [{"ip": ip} for ip in ready], "ports": PORTS}
    if not_ready:
        subset["notReadyAddresses"] = [{"ip": ip} for ip in not_ready]
    return {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}, "annotations": annotations or {}},
        "subsets": [subset],
    }


def mirrored(s: devstack.DevStack, ns: str, name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = get_json(
        s, "-n", ns, "get", "endpointslices", "-l", f"{SERVICE_NAME}={name},{MANAGED_BY}={MIRRORING}"
    )["items"]
    return items


def addresses(s: devstack.DevStack, ns: str, name: str) -> set[tuple[str, bool]]:
    return {
        (ep["addresses"][0], ep["conditions"]["ready"])
        for item in mirrored(s, ns, name)
        for ep in item.get("endpoints") or ()
    }


def wait_addresses(s: devstack.DevStack, ns: str, name: str, want: set[tuple[str, bool]], what: str) -> None:
    wait_for(lambda: addresses(s, ns, name) == want, 30, interval=0.2, what=what)


def test_selectorless_endpoints_are_mirrored_and_follow_updates(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "mirror-basic")
    create(stack, service(ns, "ext"))
    create(
        stack,
        endpoints(
            ns,
            "ext",
            ["10.1.0.1", "10.1.0.2"],
            ("10.1.0.3",),
            labels={"team": "a"},
            annotations={
                "note": "kept",
                "endpoints.kubernetes.io/over-capacity": "truncated",
                "endpoints.kubernetes.io/last-change-trigger-time": "2024-01-01T00:00:00Z",
            },
        ),
    )
    want = {("10.1.0.1", True), ("10.1.0.2", True), ("10.1.0.3", False)}
    wait_addresses(stack, ns, "ext", want, "the Endpoints mirrored")
    (item,) = mirrored(stack, ns, "ext")
    ep = get_json(stack, "-n", ns, "get", "endpoints", "ext")
    meta = item["metadata"]
    assert item["addressType"] == "IPv4"
    assert meta["generateName"] == "ext-"
    assert meta["labels"] == {SERVICE_NAME: "ext", MANAGED_BY: MIRRORING, "team": "a"}
    assert meta.get("annotations") == {"note": "kept", "endpoints.kubernetes.io/over-capacity": "truncated"}
    (owner,) = meta["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Endpoints",
        "ext",
        ep["metadata"]["uid"],
        True,
    )
    assert item["ports"] == PORTS
    # An update moves the slice with it (the same slice, rewritten).
    create(stack, endpoints(ns, "ext", ["10.1.0.9"], labels={"team": "b"}), verb="apply")
    wait_addresses(stack, ns, "ext", {("10.1.0.9", True)}, "the update mirrored")
    wait_for(
        lambda: mirrored(stack, ns, "ext")[0]["metadata"]["labels"].get("team") == "b",
        30,
        interval=0.2,
        what="the label change mirrored",
    )
    assert [i["metadata"]["name"] for i in mirrored(stack, ns, "ext")] == [meta["name"]]


def test_per_subset_limit_truncates_with_event(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "mirror-limit")
    create(stack, service(ns, "big"))
    ips = [f"10.2.0.{i}" for i in range(1, 6)]
    create(stack, endpoints(ns, "big", ips))
    wait_for(lambda: len(addresses(stack, ns, "big")) == 3, 30, interval=0.2, what="three addresses mirrored")
    assert addresses(stack, ns, "big") <= {(ip, True) for ip in ips}

    def event() -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = get_json(
            stack, "-n", ns, "get", "events", "--field-selector", "reason=TooManyAddressesToMirror"
        )["items"]
        return found

    wait_for(event, 30, interval=0.2, what="TooManyAddressesToMirror Event")
    (ev,) = event()
    assert ev["type"] == "Warning"
    assert ev["involvedObject"]["kind"] == "Endpoints" and ev["involvedObject"]["name"] == "big"
    assert ev["message"] == (
        "A max of 3 addresses can be mirrored to EndpointSlices per Endpoints subset. 2 addresses were skipped"
    )


def test_skip_mirror_opts_out(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "mirror-skip")
    create(stack, service(ns, "opted"))
    create(
        stack,
        endpoints(ns, "opted", ["10.3.0.1"], labels={"endpointslice.kubernetes.io/skip-mirror": "true"}),
    )
    create(stack, service(ns, "later"))
    create(stack, endpoints(ns, "later", ["10.3.0.2"]))
    wait_addresses(stack, ns, "later", {("10.3.0.2", True)}, "the control Endpoints mirrored")
    # The opted-out Endpoints was created first; a mirroring controller that ignored the label
    # would have written its slice by the time the control's is there.
    assert mirrored(stack, ns, "opted") == []
    stack.kubectl("-n", ns, "label", "endpoints", "later", "endpointslice.kubernetes.io/skip-mirror=true")
    wait_for(lambda: mirrored(stack, ns, "later") == [], 30, interval=0.2, what="opted-out slice removed")


def test_service_with_selector_is_not_mirrored(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "mirror-selector")
    create(stack, service(ns, "sel", {"app": "web"}))
    create(stack, endpoints(ns, "sel", ["10.4.0.1"]))
    create(stack, service(ns, "ctl"))
    create(stack, endpoints(ns, "ctl", ["10.4.0.2"]))
    wait_addresses(stack, ns, "ctl", {("10.4.0.2", True)}, "the control Endpoints mirrored")
    assert mirrored(stack, ns, "sel") == []
    # The selector was what kept it out: without it the Endpoints is mirrored, with it back not.
    stack.kubectl(
        "-n", ns, "patch", "service", "sel", "--type=json", "-p", '[{"op":"remove","path":"/spec/selector"}]'
    )
    wait_addresses(stack, ns, "sel", {("10.4.0.1", True)}, "mirrored once selectorless")
    stack.kubectl("-n", ns, "patch", "service", "sel", "-p", '{"spec":{"selector":{"app":"web"}}}')
    wait_for(
        lambda: mirrored(stack, ns, "sel") == [], 30, interval=0.2, what="slice removed with the selector"
    )


def test_deleting_endpoints_or_service_removes_the_slice(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "mirror-delete")
    for name in ("a", "b"):
        create(stack, service(ns, name))
        create(stack, endpoints(ns, name, ["10.5.0.1"]))
        wait_addresses(stack, ns, name, {("10.5.0.1", True)}, f"{name} mirrored")
    stack.kubectl("-n", ns, "delete", "endpoints", "a")
    wait_for(lambda: mirrored(stack, ns, "a") == [], 30, interval=0.2, what="slice gone with the Endpoints")
    stack.kubectl("-n", ns, "delete", "service", "b")
    wait_for(lambda: mirrored(stack, ns, "b") == [], 30, interval=0.2, what="slice gone with the Service")


def test_kubernetes_service_names_the_api_server(stack: devstack.DevStack) -> None:
    out = stack.kubectl("get", "endpoints,endpointslices", "-n", "default", "kubernetes").stdout
    tls = yaml.safe_load((stack.state / "kubeconfig-tls").read_text())
    port = urllib.parse.urlsplit(tls["clusters"][0]["cluster"]["server"]).port
    ep = get_json(stack, "-n", "default", "get", "endpoints", "kubernetes")
    (subset,) = ep["subsets"]
    (address,) = subset["addresses"]
    assert subset["ports"] == [{"name": "https", "port": port, "protocol": "TCP"}]
    assert f"{address['ip']}:{port}" in out
    eps = get_json(stack, "-n", "default", "get", "endpointslices", "kubernetes")
    assert eps["metadata"]["labels"] == {SERVICE_NAME: "kubernetes"}
    assert eps["endpoints"] == [{"addresses": [address["ip"]], "conditions": {"ready": True}}]
    assert eps["ports"] == [{"name": "https", "port": port, "protocol": "TCP"}]
    svc = get_json(stack, "-n", "default", "get", "service", "kubernetes")
    assert [p["targetPort"] for p in svc["spec"]["ports"]] == [port]
    # skip-mirror on the Endpoints: the mirroring controller writes nothing for it.
    assert ep["metadata"]["labels"] == {"endpointslice.kubernetes.io/skip-mirror": "true"}
    assert mirrored(stack, "default", "kubernetes") == []


def test_changes_while_the_controller_is_killed_are_not_lost(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "mirror-kill")
    create(stack, service(ns, "k"))
    create(stack, endpoints(ns, "k", ["10.6.0.1"]))
    wait_addresses(stack, ns, "k", {("10.6.0.1", True)}, "first mirror")
    for pid in stack.controller_pids(CONTROLLER):
        os.kill(pid, signal.SIGKILL)
    create(stack, endpoints(ns, "k", ["10.6.0.2", "10.6.0.3"]), verb="apply")
    create(stack, service(ns, "k2"))
    create(stack, endpoints(ns, "k2", ["10.6.1.1"]))
    wait_for(
        lambda: (
            addresses(stack, ns, "k") == {("10.6.0.2", True), ("10.6.0.3", True)}
            and addresses(stack, ns, "k2") == {("10.6.1.1", True)}
        ),
        90,
        interval=0.3,
        what="slices caught up after the restart",
    )
    assert len(mirrored(stack, ns, "k")) == 1
