"""`kcm dev --apiserver=upstream`: the whole stack on etcd and kube-apiserver v1.32 (`make upstream`),
with RBAC and Node authorization, every kcm service authorized by k8s/'s roles alone.

One stack for the module, with kube-apiserver's audit log of writes; each test works in a
namespace of its own. Writes are checked by who made them as kube-apiserver authenticated them,
so a controller using any identity but its own ServiceAccount fails these tests. The stack runs
with `--kube-api-content-type=application/vnd.kubernetes.protobuf`, upstream's default: kcm's
reads of built-in objects are protobuf here (the watcher's metrics show it), JSON elsewhere.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import KCM, KUBECTL, wait_for
from tests.e2e import devstack

SA = "system:serviceaccount:kcm-system:"
PROTOBUF = "application/vnd.kubernetes.protobuf"
ROLE = "kcm:controller:replicaset-controller"


Stack = devstack.DevStack


@pytest.fixture(scope="module")
def audit_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("audit") / "audit.log"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, audit_log: Path) -> Iterator[Stack]:
    args = ("--apiserver=upstream", "--audit-log-path", str(audit_log), f"--kube-api-content-type={PROTOBUF}")
    with devstack.dev_stack(tmp_path_factory.mktemp("upstream"), *args) as dev:
        yield dev


def audit(path: Path) -> list[dict[str, Any]]:
    """kube-apiserver's audit events so far (writes only: kcm dev's policy)."""
    text = path.read_text() if path.exists() else ""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def writes_in(path: Path, namespace: str, resource: str, verb: str) -> list[dict[str, Any]]:
    """The audited writes that succeeded on `resource` itself (no subresource) in `namespace`."""
    return [
        e
        for e in audit(path)
        if e["verb"] == verb
        and e.get("objectRef", {}).get("namespace") == namespace
        and e.get("objectRef", {}).get("resource") == resource
        and "subresource" not in e.get("objectRef", {})
        and e.get("responseStatus", {}).get("code", 0) < 300
    ]


def namespace(stack: Stack, name: str) -> str:
    stack.kubectl("create", "namespace", name)
    return name


def ready_replicas(stack: Stack, ns: str, kind: str, name: str) -> int:
    obj = json.loads(stack.kubectl("get", kind, name, "-n", ns, "-o", "json").stdout)
    return int(obj.get("status", {}).get("readyReplicas") or 0)


def test_the_stack_is_kube_apiserver_and_kcm_status_reports_it(stack: Stack) -> None:
    version = json.loads(stack.kubectl("version", "-o", "json").stdout)["serverVersion"]
    assert version["gitVersion"] == "v1.32.13"
    # kubeadm's admin: a client certificate in system:masters.
    whoami = json.loads(stack.kubectl("auth", "whoami", "-o", "json").stdout)["status"]["userInfo"]
    assert whoami["username"] == "kubernetes-admin" and "system:masters" in whoami["groups"]
    status = subprocess.run(
        [KCM, "status", "--state-dir", str(stack.state)], capture_output=True, text=True, timeout=30
    )
    assert status.returncode == 0, status.stdout + status.stderr
    assert "deployment-controller" in status.stdout


def test_a_deployment_converges_to_ready_pods_read_as_protobuf(stack: Stack) -> None:
    def protobuf_read_by_watcher() -> float:
        return stack.service_metric("watcher", "kcm_kube_api_bodies_total", content_type=PROTOBUF)

    before = protobuf_read_by_watcher()
    ns = namespace(stack, "converge")
    stack.kubectl("create", "deployment", "web", "--image=nginx", "--replicas=3", "-n", ns)
    stack.kubectl("rollout", "status", "deployment/web", "-n", ns, "--timeout=90s", timeout=100)
    pods = json.loads(stack.kubectl("get", "pods", "-n", ns, "-o", "json").stdout)["items"]
    assert len(pods) == 3
    assert all(
        any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
        for p in pods
    )
    # The Deployment, its ReplicaSet and pods reached the controllers through watch events the
    # watcher read as protobuf: at least one per object created.
    assert protobuf_read_by_watcher() - before >= 5


def test_each_controller_writes_as_its_own_service_account(stack: Stack, audit_log: Path) -> None:
    ns = namespace(stack, "identity")
    stack.kubectl("create", "deployment", "who", "--image=nginx", "--replicas=2", "-n", ns)
    stack.kubectl("rollout", "status", "deployment/who", "-n", ns, "--timeout=90s", timeout=100)

    def made(resource: str) -> set[tuple[str, str]]:
        return {
            (e["user"]["username"], e["userAgent"].split(" ")[0])
            for e in writes_in(audit_log, ns, resource, "create")
        }

    # The audit log is written a moment after the answer.
    wait_for(lambda: len(writes_in(audit_log, ns, "pods", "create")) >= 2, 10, what="pod creates audited")
    assert made("replicasets") == {(f"{SA}deployment-controller", "kcm/deployment-controller")}
    assert made("pods") == {(f"{SA}replicaset-controller", "kcm/replicaset-controller")}
    # Nothing kcm runs writes as the admin; the controllers' own identity only asks for tokens.
    kcm_writes = [e for e in audit(audit_log) if e["userAgent"].startswith("kcm/")]
    assert kcm_writes
    admin = [e for e in kcm_writes if "system:masters" in e["user"].get("groups", [])]
    assert admin == []
    root = {
        (e["verb"], e["objectRef"]["resource"], e["objectRef"].get("subresource", ""))
        for e in kcm_writes
        if e["user"]["username"] == "kcm:controllers"
    }
    assert root == {("create", "serviceaccounts", "token")}
    assert {e["user"]["username"] for e in kcm_writes if e["user"]["username"] != "kcm:controllers"} <= {
        f"{SA}{name}" for name in _service_accounts(stack)
    }


def _service_accounts(stack: Stack) -> set[str]:
    listed = json.loads(stack.kubectl("get", "serviceaccounts", "-n", "kcm-system", "-o", "json").stdout)
    return {item["metadata"]["name"] for item in listed["items"]}


def test_a_missing_permission_is_a_403_and_nothing_else_writes_for_the_controller(
    stack: Stack, audit_log: Path
) -> None:
    """The ReplicaSet controller's role without `create pods`: its ReplicaSet stays without pods
    and says why, naming its ServiceAccount; with the role back, the pods come."""
    ns = namespace(stack, "forbidden")
    original = json.loads(stack.kubectl("get", "clusterrole", ROLE, "-o", "json").stdout)
    reduced = json.loads(json.dumps(original))
    for rule in reduced["rules"]:
        if "pods" in rule.get("resources", []):
            rule["verbs"] = [v for v in rule["verbs"] if v != "create"]
    stack.kubectl("replace", "-f", "-", input=json.dumps(reduced))
    try:
        stack.kubectl("create", "deployment", "denied", "--image=nginx", "--replicas=2", "-n", ns)

        def refusal() -> str:
            events = json.loads(
                stack.kubectl(
                    "get", "events", "-n", ns, "--field-selector", "reason=FailedCreate", "-o", "json"
                ).stdout
            )["items"]
            return " ".join(e["message"] for e in events)

        message = wait_for(refusal, 60, interval=0.5, what="a FailedCreate event")
        assert "forbidden" in message
        assert f'User "{SA}replicaset-controller" cannot create resource "pods"' in message
        assert writes_in(audit_log, ns, "pods", "create") == []
    finally:
        restored = {k: v for k, v in original.items() if k != "metadata"}
        restored["metadata"] = {"name": ROLE}
        stack.kubectl("replace", "-f", "-", input=json.dumps(restored))
    wait_for(
        lambda: ready_replicas(stack, ns, "deployment", "denied") == 2,
        120,
        interval=0.5,
        what="the pods once the role is back",
    )


def test_kube_identities_gives_each_compose_service_its_own_service_account_alone(
    stack: Stack, tmp_path: Path
) -> None:
    """What compose's kube-identities service writes: a kubeconfig per service whose token is
    its own ServiceAccount's, allowed what that service's role allows and nothing of another's."""
    out = tmp_path / "identities"
    argv = [KCM, "kube-identities", "--once", "--kubeconfig", str(stack.kubeconfig), "--out", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr

    def kubectl(service: str, *args: str) -> subprocess.CompletedProcess[str]:
        config = out / service / "kubeconfig"
        return subprocess.run(
            [KUBECTL, "--kubeconfig", str(config), *args], capture_output=True, text=True, timeout=30
        )

    def can(service: str, *what: str) -> bool:
        return kubectl(service, "auth", "can-i", *what).stdout.strip() == "yes"

    for service, account in (("deployment", "deployment-controller"), ("watcher", "kcm-watcher")):
        whoami = json.loads(kubectl(service, "auth", "whoami", "-o", "json").stdout)
        assert whoami["status"]["userInfo"]["username"] == SA + account
        assert (out / service / "token").stat().st_mode & 0o077 == 0  # its owner's alone
    assert can("deployment", "create", "replicasets", "-n", "default")
    assert not can("deployment", "create", "pods", "-n", "default")  # the ReplicaSet controller's
    assert not can("deployment", "get", "secrets", "-n", "kube-system")
    assert can("replicaset", "create", "pods", "-n", "default")
    assert not can("replicaset", "create", "replicasets", "-n", "default")
    assert not can("watcher", "create", "pods", "-n", "default")  # it only reads
