"""kubectl, unchanged, against the embedded API server: what a user types every day."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from tests.conftest import ApiServer, wait_for
from tests.e2e.deployments import manifest


def test_create_then_get_shows_upstream_columns(apiserver: ApiServer) -> None:
    apiserver.kubectl("create", "-f", "-", input=manifest("cols"))
    out = apiserver.kubectl("get", "deployment", "cols")
    header = out.splitlines()[0].split()
    assert header == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert out.splitlines()[1].split()[:2] == ["cols", "0/2"]


def test_apply_twice_is_unchanged_then_configured(apiserver: ApiServer) -> None:
    assert "created" in apiserver.kubectl("apply", "-f", "-", input=manifest("applied"))
    assert "unchanged" in apiserver.kubectl("apply", "-f", "-", input=manifest("applied"))
    assert "configured" in apiserver.kubectl(
        "apply", "-f", "-", input=manifest("applied", image="nginx:1.26")
    )
    d = apiserver.kubectl_json("get", "deploy", "applied")
    assert d["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.26"
    assert d["metadata"]["generation"] == 2
    assert "kubectl.kubernetes.io/last-applied-configuration" in d["metadata"]["annotations"]


def test_server_side_apply_and_conflicts(apiserver: ApiServer) -> None:
    apiserver.kubectl("apply", "--server-side", "-f", "-", input=manifest("ssa", replicas=2))
    d = apiserver.kubectl_json("get", "deploy", "ssa", "--show-managed-fields")
    assert any(
        m["manager"] == "kubectl" and m["operation"] == "Apply" for m in d["metadata"]["managedFields"]
    )
    apiserver.kubectl("scale", "deploy", "ssa", "--replicas=5")
    out = apiserver.kubectl(
        "apply",
        "--server-side",
        "--field-manager=other",
        "-f",
        "-",
        input=manifest("ssa", replicas=3),
        check=False,
    )
    assert "conflict" in out.lower()
    apiserver.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=other",
        "-f",
        "-",
        input=manifest("ssa", replicas=3),
    )
    assert apiserver.kubectl_json("get", "deploy", "ssa")["spec"]["replicas"] == 3


@pytest.mark.parametrize(
    ("ptype", "patch"),
    [
        ("merge", '{"spec":{"replicas":4}}'),
        ("json", '[{"op":"replace","path":"/spec/replicas","value":4}]'),
        ("strategic", '{"spec":{"replicas":4}}'),
    ],
)
def test_patch_with_each_type(apiserver: ApiServer, ptype: str, patch: str) -> None:
    name = f"patch-{ptype}"
    apiserver.kubectl("apply", "-f", "-", input=manifest(name))
    apiserver.kubectl("patch", "deploy", name, "--type", ptype, "-p", patch)
    assert apiserver.kubectl_json("get", "deploy", name)["spec"]["replicas"] == 4


def test_strategic_patch_merges_containers_by_name(apiserver: ApiServer) -> None:
    apiserver.kubectl("apply", "-f", "-", input=manifest("smp"))
    patch = '{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox"}]}}}}'
    apiserver.kubectl("patch", "deploy", "smp", "-p", patch)
    containers = apiserver.kubectl_json("get", "deploy", "smp")["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["sidecar", "web"] or [c["name"] for c in containers] == [
        "web",
        "sidecar",
    ]


def test_scale_label_annotate(apiserver: ApiServer) -> None:
    apiserver.kubectl("apply", "-f", "-", input=manifest("sla"))
    apiserver.kubectl("scale", "deploy/sla", "--replicas=7")
    apiserver.kubectl("label", "deploy/sla", "team=blue")
    apiserver.kubectl("annotate", "deploy/sla", "note=hello")
    d = apiserver.kubectl_json("get", "deploy", "sla")
    assert d["spec"]["replicas"] == 7
    assert d["metadata"]["labels"]["team"] == "blue"
    assert d["metadata"]["annotations"]["note"] == "hello"
    assert apiserver.kubectl("get", "deploy", "-l", "team=blue", "-o", "name").split() == [
        "deployment.apps/sla"
    ]


def test_get_watch_prints_events(apiserver: ApiServer) -> None:
    apiserver.kubectl("create", "configmap", "watched", "--from-literal=a=1")
    cmd = apiserver.kubectl_cmd("get", "configmap", "watched", "-w", "--output-watch-events")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        header = first if first.startswith("EVENT") else proc.stdout.readline()
        assert header.split()[:2] == ["EVENT", "NAME"]
        added = proc.stdout.readline() if first.startswith("EVENT") else first
        apiserver.kubectl("label", "configmap", "watched", "x=y")
        modified = proc.stdout.readline()
        assert added.split()[:2] == ["ADDED", "watched"]
        assert modified.split()[:2] == ["MODIFIED", "watched"]
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize(
    ("cascade", "finalizer"), [("foreground", "foregroundDeletion"), ("orphan", "orphan")]
)
def test_delete_cascade_modes_mark_for_the_garbage_collector(
    apiserver: ApiServer, cascade: str, finalizer: str
) -> None:
    name = f"casc-{cascade}"
    apiserver.kubectl("apply", "-f", "-", input=manifest(name))
    apiserver.kubectl("delete", "deploy", name, f"--cascade={cascade}", "--wait=false")
    d = apiserver.kubectl_json("get", "deploy", name)
    assert d["metadata"]["finalizers"] == [finalizer] and d["metadata"]["deletionTimestamp"]


def test_delete_background_removes(apiserver: ApiServer) -> None:
    apiserver.kubectl("apply", "-f", "-", input=manifest("casc-bg"))
    apiserver.kubectl("delete", "deploy", "casc-bg", "--cascade=background")
    out = apiserver.kubectl("get", "deploy", "casc-bg", check=False)
    assert "NotFound" in out


def test_api_resources_lists_groups_and_short_names(apiserver: ApiServer) -> None:
    out = apiserver.kubectl("api-resources")
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert rows["deployments"][1:3] == ["deploy", "apps/v1"]
    assert rows["poddisruptionbudgets"][1:3] == ["pdb", "policy/v1"]
    assert "customresourcedefinitions" in rows and "leases" in rows and "endpointslices" in rows


def test_explain_reads_openapi(apiserver: ApiServer) -> None:
    out = apiserver.kubectl("explain", "deployment.spec.strategy")
    assert "KIND:" in out and "Deployment" in out and "rollingUpdate" in out
    out = apiserver.kubectl("explain", "pods.spec.containers.image")
    assert "FIELD: image" in out


def test_strict_validation_rejects_unknown_fields(apiserver: ApiServer) -> None:
    bad = manifest("typo").replace("replicas:", "replicaz:")
    out = apiserver.kubectl("apply", "-f", "-", input=bad, check=False)
    assert 'unknown field "spec.replicaz"' in out


def test_wait_for_condition_and_delete(apiserver: ApiServer) -> None:
    apiserver.kubectl("apply", "-f", "-", input=manifest("waited"))
    status = {
        "status": {
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "message": "ok"}
            ]
        }
    }

    def mark_available() -> None:
        time.sleep(0.5)
        apiserver.kubectl(
            "patch", "deploy", "waited", "--subresource=status", "--type=merge", "-p", json.dumps(status)
        )

    import threading

    t = threading.Thread(target=mark_available)
    t.start()
    apiserver.kubectl("wait", "--for=condition=Available", "deploy/waited", "--timeout=20s")
    t.join()
    apiserver.kubectl("delete", "deploy", "waited", "--wait=false")
    apiserver.kubectl("wait", "--for=delete", "deploy/waited", "--timeout=20s")


def test_create_generators_send_protobuf(apiserver: ApiServer) -> None:
    apiserver.kubectl("create", "deployment", "gen", "--image=nginx", "--replicas=2")
    apiserver.kubectl("create", "configmap", "gen-cm", "--from-literal=k=v")
    apiserver.kubectl("create", "secret", "generic", "gen-s", "--from-literal=p=q")
    d = apiserver.kubectl_json("get", "deploy", "gen")
    assert d["spec"]["replicas"] == 2 and d["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx"
    assert apiserver.kubectl_json("get", "cm", "gen-cm")["data"] == {"k": "v"}
    assert apiserver.kubectl_json("get", "secret", "gen-s")["data"] == {"p": "cQ=="}


def test_custom_resources_are_served(apiserver: ApiServer) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}
                            },
                        }
                    },
                }
            ],
        },
    }
    apiserver.kubectl("apply", "-f", "-", input=json.dumps(crd))
    apiserver.kubectl("wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=20s")
    widget = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w1"},
        "spec": {"size": 3},
    }
    wait_for(
        lambda: "created" in apiserver.kubectl("apply", "-f", "-", input=json.dumps(widget), check=False),
        20,
        interval=0.5,
        what="widget created",
    )
    assert apiserver.kubectl_json("get", "wd", "w1")["spec"]["size"] == 3
    apiserver.kubectl("delete", "crd", "widgets.example.com")
    assert "error" in apiserver.kubectl("get", "widgets", check=False).lower()
