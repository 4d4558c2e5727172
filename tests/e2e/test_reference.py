"""`kcm dev --reference`: upstream kube-controller-manager (`make upstream`), as kubeadm runs it,
in place of kcm's bus and controllers, on kube-apiserver and on the embedded API server.

One stack at a time: the module's fixture runs each API server in turn, and every test runs on
both. What upstream kube-controller-manager trips over on the embedded server is listed in
docs/apiserver.md ("Known differences"); what works is asserted here.
"""

from __future__ import annotations

import copy
import json
import re
import ssl
import subprocess
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from kcm_shared.controllerutil.endpoints import endpointutil

from tests.conftest import KCM, wait_for
from tests.e2e import devstack
from tests.e2e.serviceobjects import settled, several_subsets_and_ports

Stack = devstack.DevStack


@pytest.fixture(scope="module", params=["upstream", "embedded"])
def stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    args = ["--reference", f"--apiserver={request.param}"]
    with devstack.dev_stack(tmp_path_factory.mktemp(f"reference-{request.param}"), *args) as dev:
        yield dev


def get(stack: Stack, *args: str) -> Any:
    return json.loads(stack.kubectl("get", *args, "-o", "json").stdout)


def healthz(stack: Stack) -> str:
    """kube-controller-manager's /healthz?verbose, from the URL `kcm dev` printed."""
    ready = next(line for line in stack.progress if "kube-controller-manager healthy at" in line)
    url = re.search(r"https://\S+/healthz", ready)
    assert url, ready
    unverified = ssl.create_default_context()
    unverified.check_hostname = False
    unverified.verify_mode = ssl.CERT_NONE  # its own self-signed serving certificate
    with urllib.request.urlopen(url.group(0) + "?verbose", timeout=10, context=unverified) as resp:
        body: str = resp.read().decode()
        return body


def test_the_reference_runs_instead_of_kcm(stack: Stack) -> None:
    assert "healthz check passed" in healthz(stack)
    # Every supervised process has its log: no NATS, watcher, coordinator or kcm controller.
    supervised = {path.stem for path in (stack.state / "logs").glob("*.log")}
    control_plane = {"etcd", "kube-apiserver"} if "--apiserver=upstream" in stack.proc.args else set()
    assert supervised == {"kube-controller-manager", "sim", *control_plane}
    status = subprocess.run(
        [KCM, "status", "--state-dir", str(stack.state)], capture_output=True, text=True, timeout=30
    )
    assert status.returncode == 1 and "no coordinator URL" in status.stderr


def test_a_deployment_converges_written_by_kube_controller_manager(stack: Stack) -> None:
    stack.kubectl("create", "namespace", "ref-deploy")
    stack.kubectl("create", "deployment", "web", "--image=nginx", "--replicas=3", "-n", "ref-deploy")
    stack.kubectl("rollout", "status", "deployment/web", "-n", "ref-deploy", "--timeout=90s", timeout=100)
    (replica_set,) = get(stack, "replicasets", "-n", "ref-deploy", "--show-managed-fields")["items"]
    # The manager is the writer's User-Agent: kcm's controllers write as `kcm`.
    assert {m["manager"] for m in replica_set["metadata"]["managedFields"]} == {"kube-controller-manager"}
    pods = get(stack, "pods", "-n", "ref-deploy")["items"]
    assert len(pods) == 3 and {p["status"]["phase"] for p in pods} == {"Running"}


def test_nodes_get_pod_cidrs_from_its_node_ipam_controller(stack: Stack) -> None:
    def cidrs() -> list[str]:
        return [n["spec"].get("podCIDR", "") for n in get(stack, "nodes")["items"]]

    wait_for(lambda: all(cidrs()), 30, interval=0.5, what="every node's podCIDR")
    assert all(c.startswith("10.244.") and c.endswith("/24") for c in cidrs()), cidrs()


def test_a_job_completes_and_a_service_gets_endpoints(stack: Stack) -> None:
    stack.kubectl("create", "namespace", "ref-batch")
    stack.kubectl("create", "job", "once", "--image=busybox", "-n", "ref-batch", "--", "date")
    stack.kubectl(
        "wait", "--for=condition=Complete", "job/once", "-n", "ref-batch", "--timeout=60s", timeout=70
    )
    stack.kubectl("create", "deployment", "backend", "--image=nginx", "--replicas=2", "-n", "ref-batch")
    stack.kubectl("expose", "deployment", "backend", "--port=80", "-n", "ref-batch")

    def addresses() -> int:
        slices = get(stack, "endpointslices", "-n", "ref-batch", "-l", "kubernetes.io/service-name=backend")
        return sum(len(s.get("endpoints") or []) for s in slices["items"])

    wait_for(lambda: addresses() == 2, 60, interval=0.5, what="two endpoints in the Service's slices")


def test_a_deleted_namespace_goes(stack: Stack) -> None:
    stack.kubectl("create", "namespace", "ref-gone")
    stack.kubectl("create", "configmap", "c", "-n", "ref-gone", "--from-literal=a=b")
    stack.kubectl("delete", "namespace", "ref-gone", "--wait=false")
    wait_for(
        lambda: stack.kubectl("get", "namespace", "ref-gone", check=False).returncode != 0,
        60,
        interval=0.5,
        what="the namespace gone",
    )


def test_its_endpoints_layout_is_the_one_kcm_writes(stack: Stack) -> None:
    """Upstream kube-controller-manager's Endpoints of several subsets and ports, as the API server
    stored them, are already in kcm's canonical layout: kcm taking over compares equal and writes
    nothing (a layout in another order would be rewritten, and lose its trigger-time annotation)."""
    ns = "ref-endpoints"
    stack.kubectl("create", "namespace", ns)
    stack.kubectl(
        "create",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": several_subsets_and_ports(ns)}),
    )

    def endpoints() -> Any:
        ep = get(stack, "endpoints", "m", "-n", ns)
        return ep if settled(ep) else None

    ep = wait_for(endpoints, 60, interval=0.5, what="three subsets written by kube-controller-manager")
    assert endpointutil.repack_subsets(copy.deepcopy(ep["subsets"])) == ep["subsets"]
