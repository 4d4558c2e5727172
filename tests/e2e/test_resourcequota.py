"""The resourcequota controller and the API server's quota admission end to end: `kcm dev
--controllers resourcequota` (two replicas), driven with kubectl.

Each test works in its own namespace on one shared stack with no nodes (pods stay
unscheduled, so deleting one removes it at once): `kubectl describe quota` shows what is
used, following creates, updates and deletes; exceeding a quota is refused with upstream's
message, also for creates sent back to back faster than the controller could count; a
BestEffort quota ignores a Burstable pod; a quota on a resource nobody could count yet
answers "status unknown"; and killing every controller replica (-9) loses no delete.
"""

from __future__ import annotations

import json
import os
import signal
import textwrap
from collections.abc import Iterator
from itertools import count
from typing import Any

import pytest
import yaml

from tests.conftest import schemaless_crd, wait_for
from tests.e2e import devstack

stack = devstack.stack_fixture(
    "--controllers", "resourcequota", "--nodes", "0", "--replicas", "resourcequota=2"
)
_counter = count()


@pytest.fixture
def ns(stack: devstack.DevStack) -> Iterator[str]:
    name = f"rq-{next(_counter)}"
    stack.kubectl("create", "namespace", name)
    yield name


def apply(stack: devstack.DevStack, manifest: str, check: bool = True) -> Any:
    return stack.kubectl("apply", "-f", "-", input=textwrap.dedent(manifest), check=check)


def quota(stack: devstack.DevStack, ns: str, name: str) -> dict[str, Any]:
    got: dict[str, Any] = json.loads(stack.kubectl("get", "quota", name, "-n", ns, "-o", "json").stdout)
    return got


def create_quota(stack: devstack.DevStack, ns: str, name: str, hard: dict[str, str], **spec: Any) -> None:
    body = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": ns}}
    body["spec"] = {"hard": hard, **spec}
    stack.kubectl("create", "-f", "-", input=json.dumps(body))
    # Admission enforces a quota once its controller has written status.hard and status.used.
    wait_for(lambda: "used" in quota(stack, ns, name).get("status", {}), 30, 0.2, f"usage of {name} known")


def used(stack: devstack.DevStack, ns: str, name: str) -> dict[str, str]:
    """`kubectl describe quota`'s Used column, by resource."""
    out = stack.kubectl("describe", "quota", name, "-n", ns).stdout
    rows = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] not in ("Resource", "--------"):
            rows[parts[0]] = parts[1]
    return rows


def wait_used(stack: devstack.DevStack, ns: str, name: str, **want: str) -> dict[str, str]:
    wanted = {key.replace("__", "/").replace("_", "."): value for key, value in want.items()}

    def matches() -> dict[str, str] | None:
        rows = used(stack, ns, name)
        return rows if all(rows.get(k) == v for k, v in wanted.items()) else None

    return wait_for(matches, 30, 0.2, f"quota {name} used {wanted}: {used(stack, ns, name)}")


def pod(name: str, cpu: str = "", memory: str = "") -> str:
    resources = ""
    if cpu or memory:
        req = ", ".join(f"{k}: {v}" for k, v in (("cpu", cpu), ("memory", memory)) if v)
        resources = f"resources: {{requests: {{{req}}}, limits: {{{req}}}}}"
    return f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: {name}}}
        spec:
          containers: [{{name: c, image: nginx, {resources}}}]
        """


def test_describe_shows_usage_that_follows_creates_updates_and_deletes(
    stack: devstack.DevStack, ns: str
) -> None:
    hard = {
        "pods": "5",
        "count/pods": "5",
        "requests.cpu": "2",
        "limits.memory": "2Gi",
        "configmaps": "4",
        "services": "2",
        "services.nodeports": "2",
        "count/deployments.apps": "2",
    }
    create_quota(stack, ns, "all", hard)
    wait_used(stack, ns, "all", pods="0", configmaps="0", services="0")
    for name in ("a", "b"):
        stack.kubectl("apply", "-n", ns, "-f", "-", input=textwrap.dedent(pod(name, "500m", "512Mi")))
    stack.kubectl("create", "configmap", "cm", "-n", ns)
    stack.kubectl("create", "service", "nodeport", "np", "-n", ns, "--tcp=80:80")
    stack.kubectl("create", "deployment", "web", "-n", ns, "--image=nginx")
    wait_used(
        stack,
        ns,
        "all",
        pods="2",
        count__pods="2",
        requests_cpu="1",
        limits_memory="1Gi",
        configmaps="1",
        services="1",
        services_nodeports="1",
        count__deployments_apps="1",
    )
    # A finished pod stops counting for compute and `pods`, never for count/pods (upstream).
    status = {"status": {"phase": "Succeeded"}}
    stack.kubectl(
        "patch", "pod", "a", "-n", ns, "--subresource=status", "--type=merge", "-p", json.dumps(status)
    )
    wait_used(stack, ns, "all", pods="1", count__pods="2", requests_cpu="500m", limits_memory="512Mi")
    # Deletes are the controller's alone: admission charges only what is created.
    stack.kubectl("delete", "pod", "b", "-n", ns)
    stack.kubectl("delete", "configmap", "cm", "-n", ns)
    stack.kubectl("patch", "service", "np", "-n", ns, "-p", '{"spec":{"type":"ClusterIP"}}')
    stack.kubectl("delete", "deployment", "web", "-n", ns)
    wait_used(
        stack, ns, "all", pods="0", count__pods="1", requests_cpu="0", configmaps="0", services_nodeports="0"
    )


def test_exceeding_a_quota_is_refused_with_upstreams_messages(stack: devstack.DevStack, ns: str) -> None:
    create_quota(stack, ns, "compute", {"pods": "1", "limits.cpu": "1"})
    refused = stack.kubectl("run", "bare", "-n", ns, "--image=nginx", "--restart=Never", check=False)
    assert refused.returncode != 0
    assert (
        'pods "bare" is forbidden: failed quota: compute: must specify limits.cpu for: bare' in refused.stderr
    )
    apply(stack, pod("p1", cpu="800m").replace("{name: p1}", f"{{name: p1, namespace: {ns}}}"))
    refused = apply(
        stack, pod("p2", cpu="300m").replace("{name: p2}", f"{{name: p2, namespace: {ns}}}"), check=False
    )
    assert refused.returncode != 0
    assert (
        'pods "p2" is forbidden: exceeded quota: compute, requested: limits.cpu=300m,pods=1, '
        "used: limits.cpu=800m,pods=1, limited: limits.cpu=1,pods=1"
    ) in refused.stderr, refused.stderr


def test_back_to_back_creates_past_a_limit_are_refused(stack: devstack.DevStack, ns: str) -> None:
    create_quota(stack, ns, "three", {"configmaps": "3"})
    items = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm{i}"}} for i in range(5)]
    docs = yaml.safe_dump_all(items)
    # One kubectl sends the five creates one after the other, far faster than any controller
    # could count them: admission charges each in its own request.
    res = stack.kubectl("create", "-n", ns, "-f", "-", input=docs, check=False)
    created = stack.kubectl("get", "configmaps", "-n", ns, "-o", "name").stdout.split()
    assert sorted(created) == ["configmap/cm0", "configmap/cm1", "configmap/cm2"], res
    assert (
        res.stderr.count(
            "exceeded quota: three, requested: configmaps=1, used: configmaps=3, limited: configmaps=3"
        )
        == 2
    )
    assert quota(stack, ns, "three")["status"]["used"] == {"configmaps": "3"}


def test_a_best_effort_quota_counts_and_refuses_only_best_effort_pods(
    stack: devstack.DevStack, ns: str
) -> None:
    create_quota(stack, ns, "be", {"pods": "1"}, scopes=["BestEffort"])
    stack.kubectl("run", "be1", "-n", ns, "--image=nginx", "--restart=Never")
    refused = stack.kubectl("run", "be2", "-n", ns, "--image=nginx", "--restart=Never", check=False)
    assert "exceeded quota: be, requested: pods=1, used: pods=1, limited: pods=1" in refused.stderr
    # Burstable: requests without equal limits; the BestEffort quota neither refuses nor counts it.
    stack.kubectl(
        "run",
        "burst",
        "-n",
        ns,
        "--image=nginx",
        "--restart=Never",
        '--overrides={"spec":{"containers":[{"name":"burst","image":"nginx","resources":{"requests":{"cpu":"100m"}}}]}}',
    )
    stack.kubectl("delete", "pod", "be1", "-n", ns)
    wait_used(stack, ns, "be", pods="0")
    stack.kubectl("run", "be3", "-n", ns, "--image=nginx", "--restart=Never")


CRD = schemaless_crd("quota.example.com", "widgets", "Widget")


def test_status_unknown_until_the_controller_has_counted_the_resource(
    stack: devstack.DevStack, ns: str
) -> None:
    # The quota names a resource no API serves yet: its usage stays out of status.used.
    body = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "widgets", "namespace": ns}}
    body["spec"] = {"hard": {"count/widgets.quota.example.com": "1"}}
    stack.kubectl("create", "-f", "-", input=json.dumps(body))
    wait_for(lambda: "hard" in quota(stack, ns, "widgets").get("status", {}), 30, 0.2, "status.hard written")
    assert "count/widgets.quota.example.com" not in (quota(stack, ns, "widgets")["status"].get("used") or {})
    stack.kubectl("create", "-f", "-", input=json.dumps(CRD))
    stack.kubectl("wait", "--for=condition=Established", "crd/widgets.quota.example.com", "--timeout=30s")
    widget = {"apiVersion": "quota.example.com/v1", "kind": "Widget", "metadata": {"namespace": ns}}

    def create(name: str) -> Any:
        return stack.kubectl(
            "create",
            "-f",
            "-",
            input=json.dumps({**widget, "metadata": {"name": name, "namespace": ns}}),
            check=False,
        )

    refused = wait_for(
        lambda: r if "quota" in (r := create("w0")).stderr else None, 30, 0.5, "a quota answer"
    )
    assert (
        'widgets.quota.example.com "w0" is forbidden: status unknown for quota: widgets, '
        "resources: count/widgets.quota.example.com"
    ) in refused.stderr
    # Any change to the quota makes the controller look again (and re-read discovery).
    touches = count()

    def counted() -> bool:
        stack.kubectl("annotate", "quota", "widgets", "-n", ns, f"touch={next(touches)}", "--overwrite")
        return "count/widgets.quota.example.com" in (quota(stack, ns, "widgets")["status"].get("used") or {})

    wait_for(counted, 30, 1.0, "widgets counted")
    assert create("w1").returncode == 0
    refused = create("w2")
    assert "exceeded quota: widgets, requested: count/widgets.quota.example.com=1" in refused.stderr


def test_kill_9_of_every_replica_loses_no_delete(stack: devstack.DevStack, ns: str) -> None:
    create_quota(stack, ns, "pods", {"pods": "50", "configmaps": "50"})
    items = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm{i}"}} for i in range(10)] + [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p{i}"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        }
        for i in range(10)
    ]
    stack.kubectl("create", "-n", ns, "-f", "-", input=yaml.safe_dump_all(items))
    wait_used(stack, ns, "pods", pods="10", configmaps="10")
    pids = stack.controller_pids("resourcequota")
    assert len(pids) == 2
    # Killed mid-work (the first deletes may be in a sync), and down while the rest happen:
    # nobody sees those events; the restarted replicas recount every quota they gain.
    stack.kubectl("delete", "pod", "p0", "-n", ns)
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    stack.kubectl("delete", "pods,configmaps", "--all", "-n", ns, "--wait=false")
    wait_used(stack, ns, "pods", pods="0", configmaps="0")
    assert not set(stack.controller_pids("resourcequota")) & set(pids)
