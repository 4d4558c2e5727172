"""The namespace controller and NamespaceLifecycle admission end to end, through kubectl.

One `kcm dev` with the namespace, deployment and replicaset controllers and no nodes (pods
stay Pending, so they go at once instead of after their 30 s grace period). Covers:
`kubectl delete ns` of a namespace holding a Deployment, a ConfigMap and a custom resource
returns once all of it is gone; content held by a finalizer keeps the namespace Terminating
with upstream's conditions, and creations into it are refused, until the finalizer goes;
the immortal namespaces refuse deletion; and a kill -9 of the controller right after the
delete loses nothing.
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import kubernetes
import pytest

from tests.conftest import schemaless_crd, wait_for
from tests.e2e import devstack

stack = devstack.stack_fixture("--controllers", "namespace,deployment,replicaset", "--nodes", "0")

CRD = schemaless_crd("ns.example.com", "gadgets", "Gadget")
HOLD = "example.com/hold"
CONTENT_REMAINING = "NamespaceContentRemaining"
FINALIZERS_REMAINING = "NamespaceFinalizersRemaining"


def namespace(s: devstack.DevStack, name: str) -> dict[str, Any] | None:
    res = s.kubectl("get", "namespace", name, "-o", "json", "--ignore-not-found")
    return json.loads(res.stdout) if res.stdout.strip() else None


def held_configmap(s: devstack.DevStack, ns: str, name: str) -> None:
    manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "finalizers": [HOLD]},
    }
    s.kubectl("create", "-f", "-", input=json.dumps(manifest))


def conditions(ns: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in ((ns or {}).get("status") or {}).get("conditions") or []}


def test_delete_namespace_returns_once_deployment_configmap_and_custom_resource_are_gone(
    stack: devstack.DevStack,
) -> None:
    stack.kubectl("create", "-f", "-", input=json.dumps(CRD))
    stack.kubectl("create", "namespace", "trial")
    stack.kubectl(
        "-n", "trial", "create", "deployment", "web", "--image=registry.k8s.io/pause:3.9", "--replicas=2"
    )
    stack.kubectl("-n", "trial", "create", "configmap", "settings", "--from-literal=a=b")
    gadget = {
        "apiVersion": "ns.example.com/v1",
        "kind": "Gadget",
        "metadata": {"name": "g1", "namespace": "trial"},
    }
    wait_for(
        lambda: stack.kubectl("create", "-f", "-", check=False, input=json.dumps(gadget)).returncode == 0,
        30,
        0.5,
        "the Gadget kind served",
    )
    wait_for(
        lambda: len(stack.kubectl("-n", "trial", "get", "pods", "-o", "name").stdout.split()) == 2,
        30,
        0.3,
        "the Deployment's pods",
    )

    # kubectl waits for the namespace to be gone.
    stack.kubectl("delete", "namespace", "trial", "--timeout=90s", timeout=120)

    assert namespace(stack, "trial") is None
    left = stack.kubectl("get", "gadgets,deployments,replicasets,pods,configmaps", "-A", "-o", "json").stdout
    assert not [o for o in json.loads(left)["items"] if o["metadata"].get("namespace") == "trial"]


def test_finalizer_keeps_namespace_terminating_with_conditions_until_it_is_removed(
    stack: devstack.DevStack,
) -> None:
    stack.kubectl("create", "namespace", "held")
    held_configmap(stack, "held", "keep")
    stack.kubectl("-n", "held", "create", "configmap", "plain")

    stack.kubectl("delete", "namespace", "held", "--wait=false")

    def reported() -> dict[str, Any] | None:
        ns = namespace(stack, "held")
        found = conditions(ns)
        return ns if CONTENT_REMAINING in found and FINALIZERS_REMAINING in found else None

    ns = wait_for(reported, 30, 0.3, "the deletion conditions")
    assert ns["status"]["phase"] == "Terminating"
    assert ns["spec"]["finalizers"] == ["kubernetes"]
    found = conditions(ns)
    assert {k: found[FINALIZERS_REMAINING][k] for k in ("status", "reason", "message")} == {
        "status": "True",
        "reason": "SomeFinalizersRemain",
        "message": f"Some content in the namespace has finalizers remaining: {HOLD} in 1 resource instances",
    }
    assert {k: found[CONTENT_REMAINING][k] for k in ("status", "reason", "message")} == {
        "status": "True",
        "reason": "SomeResourcesRemain",
        "message": "Some resources are remaining: configmaps. has 1 resource instances",
    }
    assert (
        found["NamespaceDeletionContentFailure"]["status"],
        found["NamespaceDeletionContentFailure"]["reason"],
    ) == (
        "False",
        "ContentDeleted",
    )
    assert found["NamespaceDeletionDiscoveryFailure"]["reason"] == "ResourcesDiscovered"
    assert found["NamespaceDeletionGroupVersionParsingFailure"]["reason"] == "ParsedGroupVersions"
    names = stack.kubectl("-n", "held", "get", "configmaps", "-o", "name").stdout.split()
    assert names == ["configmap/keep"]  # the rest went; the held one waits for its finalizer

    refused = stack.kubectl("-n", "held", "create", "configmap", "late", check=False)
    assert refused.returncode != 0
    assert (
        'configmaps "late" is forbidden: unable to create new content in namespace held because it is being terminated'
        in refused.stderr
    )
    # The official client reads upstream's Status: 403 Forbidden with the NamespaceTerminating cause.
    with pytest.raises(kubernetes.client.ApiException) as caught:
        kubernetes.client.CoreV1Api(stack.api()).create_namespaced_config_map(
            "held", {"metadata": {"generateName": "late-"}}
        )
    status = json.loads(caught.value.body)
    assert (status["code"], status["reason"]) == (403, "Forbidden")
    assert status["message"].startswith('configmaps "late-" is forbidden: unable to create new content')
    assert status["details"]["causes"] == [
        {
            "reason": "NamespaceTerminating",
            "message": "namespace held is being terminated",
            "field": "metadata.namespace",
        }
    ]

    stack.kubectl(
        "-n", "held", "patch", "configmap", "keep", "--type=merge", "-p", '{"metadata":{"finalizers":null}}'
    )
    stack.kubectl("wait", "--for=delete", "namespace/held", "--timeout=60s", timeout=90)


@pytest.mark.parametrize("name", ["default", "kube-system", "kube-public"])
def test_immortal_namespaces_refuse_deletion(stack: devstack.DevStack, name: str) -> None:
    res = stack.kubectl("delete", "namespace", name, check=False)
    assert res.returncode != 0
    assert f'namespaces "{name}" is forbidden: this namespace may not be deleted' in res.stderr
    ns = namespace(stack, name)
    assert ns is not None and ns["status"]["phase"] == "Active"


def test_deletion_completes_after_the_controller_is_killed(stack: devstack.DevStack) -> None:
    stack.kubectl("create", "namespace", "killed")
    held_configmap(stack, "killed", "keep")
    for i in range(10):
        stack.kubectl("-n", "killed", "create", "configmap", f"c{i}")
    pids = stack.controller_pids("namespace")
    assert pids

    # Within upstream's 5 s grace: the only record of the work is the durable work item.
    stack.kubectl("delete", "namespace", "killed", "--wait=false")
    for pid in pids:
        os.kill(pid, signal.SIGKILL)

    wait_for(
        lambda: FINALIZERS_REMAINING in conditions(namespace(stack, "killed")),
        90,
        0.5,
        "the restarted controller at work",
    )
    assert stack.kubectl("-n", "killed", "get", "configmaps", "-o", "name").stdout.split() == [
        "configmap/keep"
    ]
    assert not set(stack.controller_pids("namespace")) & set(pids)
    stack.kubectl(
        "-n", "killed", "patch", "configmap", "keep", "--type=merge", "-p", '{"metadata":{"finalizers":null}}'
    )
    stack.kubectl("wait", "--for=delete", "namespace/killed", "--timeout=60s", timeout=90)
