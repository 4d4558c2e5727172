"""The Deployment walkthrough of kubectl against the embedded API server alone.

No controller runs here: ReplicaSets with `deployment.kubernetes.io/revision` annotations
and ownerReferences, status written through `/status`, and Events are created by hand,
standing in for the deployment and replicaset controllers. What is under test is that the
API server gives kubectl everything its workload commands read and write: server-side
apply taking over from client-side apply, the scale subresource (and its managedFields),
the JSON patch `rollout undo` sends, watches `rollout status` and `wait` follow, tables,
`describe`'s lookups, and the finalizers each `--cascade` policy sets or switches.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.background import Background
from tests.conftest import ApiServer
from tests.e2e import deployments

REVISION = "deployment.kubernetes.io/revision"
CHANGE_CAUSE = "kubernetes.io/change-cause"


def manifest(name: str, replicas: int = 3, image: str = "nginx:1.25") -> str:
    return deployments.manifest(name, replicas, image)


def get(api: ApiServer, kind: str, name: str) -> Any:
    return api.kubectl_json("get", kind, name, "--show-managed-fields")


def create_deployment(api: ApiServer, name: str, replicas: int = 3, image: str = "nginx:1.25") -> Any:
    api.kubectl("create", "deployment", name, f"--image={image}", f"--replicas={replicas}")
    return get(api, "deploy", name)


def owned_replicaset(
    api: ApiServer,
    deployment: Any,
    revision: int,
    image: str,
    replicas: int,
    *,
    change_cause: str | None = None,
    owned: bool = True,
) -> Any:
    """A ReplicaSet as the deployment controller makes it: the deployment's template with
    `image`, a pod-template-hash label, the revision annotation and a controller reference."""
    name = deployment["metadata"]["name"]
    suffix = f"h{revision}" if owned else f"stray{revision}"
    template = copy.deepcopy(deployment["spec"]["template"])
    template["metadata"]["labels"]["pod-template-hash"] = suffix
    template["spec"]["containers"][0]["image"] = image
    annotations = {REVISION: str(revision)}
    if change_cause:
        annotations[CHANGE_CAUSE] = change_cause
    metadata: dict[str, Any] = {
        "name": f"{name}-{suffix}",
        "labels": template["metadata"]["labels"],
        "annotations": annotations,
    }
    if owned:
        metadata["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": name,
                "uid": deployment["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": metadata,
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": template["metadata"]["labels"]},
            "template": template,
        },
    }
    api.kubectl("create", "-f", "-", input=json.dumps(rs))
    return get(api, "rs", metadata["name"])


def write_status(api: ApiServer, kind: str, name: str, status: dict[str, Any]) -> None:
    body = json.dumps({"status": status})
    api.kubectl("patch", kind, name, "--subresource=status", "--type=merge", "-p", body)


def complete_status(deployment: Any, replicas: int) -> dict[str, Any]:
    """What the deployment controller writes once a rollout has finished."""
    stamp = deployment["metadata"]["creationTimestamp"]
    return {
        "observedGeneration": deployment["metadata"]["generation"],
        "replicas": replicas,
        "updatedReplicas": replicas,
        "readyReplicas": replicas,
        "availableReplicas": replicas,
        "conditions": [
            {
                "type": "Available",
                "status": "True",
                "reason": "MinimumReplicasAvailable",
                "message": "Deployment has minimum availability.",
                "lastUpdateTime": stamp,
                "lastTransitionTime": stamp,
            },
            {
                "type": "Progressing",
                "status": "True",
                "reason": "NewReplicaSetAvailable",
                "message": "ReplicaSet has successfully progressed.",
                "lastUpdateTime": stamp,
                "lastTransitionTime": stamp,
            },
        ],
    }


@pytest.fixture()
def background(apiserver: ApiServer) -> Iterator[list[Background]]:
    running: list[Background] = []
    yield running
    for b in running:
        b.stop()


def start(running: list[Background], api: ApiServer, *args: str) -> Background:
    b = Background(api.kubectl_cmd(*args))
    running.append(b)
    return b


# -- create, get, apply -------------------------------------------------------------------------


def test_create_deployment_then_get_shows_readiness_columns(apiserver: ApiServer) -> None:
    d = create_deployment(apiserver, "cols", replicas=3)
    assert d["spec"]["replicas"] == 3
    assert d["spec"]["selector"] == {"matchLabels": {"app": "cols"}}
    assert d["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": "25%", "maxUnavailable": "25%"}
    rows = [line.split() for line in apiserver.kubectl("get", "deploy", "cols").splitlines()]
    assert rows[0] == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert rows[1][:4] == ["cols", "0/3", "0", "0"]

    write_status(apiserver, "deploy", "cols", {**complete_status(d, 3), "availableReplicas": 2})
    rows = [line.split() for line in apiserver.kubectl("get", "deploy", "cols").splitlines()]
    assert rows[1][:4] == ["cols", "3/3", "3", "2"]
    wide = [line.split() for line in apiserver.kubectl("get", "deploy", "cols", "-o", "wide").splitlines()]
    assert wide[0][5:] == ["CONTAINERS", "IMAGES", "SELECTOR"]
    assert wide[1][5:] == ["nginx", "nginx:1.25", "app=cols"]


def test_apply_client_side_then_server_side(apiserver: ApiServer) -> None:
    assert "created" in apiserver.kubectl("apply", "-f", "-", input=manifest("applied"))
    assert "unchanged" in apiserver.kubectl("apply", "-f", "-", input=manifest("applied"))
    assert "configured" in apiserver.kubectl("apply", "-f", "-", input=manifest("applied", replicas=4))
    assert get(apiserver, "deploy", "applied")["spec"]["replicas"] == 4

    out = apiserver.kubectl("apply", "--server-side", "-f", "-", input=manifest("applied", replicas=5))
    assert "serverside-applied" in out
    d = get(apiserver, "deploy", "applied")
    assert d["spec"]["replicas"] == 5
    assert ("kubectl", "Apply") in {(m["manager"], m["operation"]) for m in d["metadata"]["managedFields"]}


def test_server_side_apply_conflicts_with_a_scale(apiserver: ApiServer) -> None:
    apiserver.kubectl("apply", "--server-side", "-f", "-", input=manifest("ssa-scale", replicas=2))
    apiserver.kubectl("scale", "deployment", "ssa-scale", "--replicas=6")
    out = apiserver.kubectl(
        "apply", "--server-side", "-f", "-", input=manifest("ssa-scale", replicas=3), check=False
    )
    # The scale went through the scale subresource, and managedFields say so, as upstream's.
    assert 'conflict with "kubectl" with subresource "scale" using apps/v1: .spec.replicas' in out
    apiserver.kubectl(
        "apply", "--server-side", "--force-conflicts", "-f", "-", input=manifest("ssa-scale", replicas=3)
    )
    assert get(apiserver, "deploy", "ssa-scale")["spec"]["replicas"] == 3


# -- set image, scale, pause/resume/restart -----------------------------------------------------


def test_set_image_changes_the_template_and_generation(apiserver: ApiServer) -> None:
    before = create_deployment(apiserver, "setimg")
    apiserver.kubectl("set", "image", "deployment/setimg", "nginx=nginx:1.27")
    after = get(apiserver, "deploy", "setimg")
    assert after["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1
    out = apiserver.kubectl("set", "image", "deployment/setimg", "nope=nginx:1", check=False)
    assert "unable to find container named" in out


def test_scale_goes_through_the_scale_subresource(apiserver: ApiServer) -> None:
    create_deployment(apiserver, "scaled", replicas=3)
    apiserver.kubectl("scale", "deployment", "scaled", "--replicas=5")
    d = get(apiserver, "deploy", "scaled")
    assert d["spec"]["replicas"] == 5
    scale_entries = [m for m in d["metadata"]["managedFields"] if m.get("subresource") == "scale"]
    assert [(m["manager"], m["fieldsV1"]) for m in scale_entries] == [
        ("kubectl", {"f:spec": {"f:replicas": {}}})
    ]
    scale = json.loads(
        apiserver.kubectl("get", "--raw", "/apis/apps/v1/namespaces/default/deployments/scaled/scale")
    )
    assert scale["kind"] == "Scale" and scale["spec"] == {"replicas": 5}
    assert scale["status"]["selector"] == "app=scaled"
    out = apiserver.kubectl(
        "scale", "deployment", "scaled", "--current-replicas=3", "--replicas=1", check=False
    )
    assert "Expected replicas to be 3, was 5" in out


def test_rollout_pause_resume_restart(apiserver: ApiServer) -> None:
    create_deployment(apiserver, "paused")
    apiserver.kubectl("rollout", "pause", "deployment/paused")
    assert get(apiserver, "deploy", "paused")["spec"]["paused"] is True
    assert "already paused" in apiserver.kubectl("rollout", "pause", "deployment/paused", check=False)
    apiserver.kubectl("rollout", "resume", "deployment/paused")
    assert "paused" not in get(apiserver, "deploy", "paused")["spec"]
    generation = get(apiserver, "deploy", "paused")["metadata"]["generation"]
    apiserver.kubectl("rollout", "restart", "deployment/paused")
    d = get(apiserver, "deploy", "paused")
    assert "kubectl.kubernetes.io/restartedAt" in d["spec"]["template"]["metadata"]["annotations"]
    assert d["metadata"]["generation"] == generation + 1


# -- history and undo (ReplicaSets stand in for the deployment controller's) ---------------------


def test_rollout_history_lists_the_owned_replicasets(apiserver: ApiServer) -> None:
    d = create_deployment(apiserver, "hist")
    owned_replicaset(apiserver, d, 1, "nginx:1.24", 0, change_cause="first")
    owned_replicaset(apiserver, d, 2, "nginx:1.25", 3)
    # Same selector but no controller reference: kubectl must not count it as history.
    owned_replicaset(apiserver, d, 7, "nginx:1.20", 0, owned=False)
    rows = [line.split() for line in apiserver.kubectl("rollout", "history", "deployment/hist").splitlines()]
    assert ["REVISION", "CHANGE-CAUSE"] in rows
    assert [r[0] for r in rows if r and r[0].isdigit()] == ["1", "2"]
    assert ["1", "first"] in rows
    one = apiserver.kubectl("rollout", "history", "deployment/hist", "--revision=1")
    assert "revision #1" in one and "nginx:1.24" in one
    out = apiserver.kubectl("rollout", "history", "deployment/hist", "--revision=7", check=False)
    assert "unable to find the specified revision" in out


def test_rollout_undo_patches_the_template_back(apiserver: ApiServer) -> None:
    d = create_deployment(apiserver, "undo", image="nginx:1.25")
    owned_replicaset(apiserver, d, 1, "nginx:1.24", 0)
    owned_replicaset(apiserver, d, 2, "nginx:1.25", 3)
    # The deployment has no annotations yet: kubectl's JSON patch replaces
    # /metadata/annotations regardless, which upstream's patch library allows.
    assert "rolled back" in apiserver.kubectl("rollout", "undo", "deployment/undo")
    after = get(apiserver, "deploy", "undo")
    assert after["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.24"
    assert "pod-template-hash" not in after["spec"]["template"]["metadata"]["labels"]
    assert after["metadata"]["generation"] == d["metadata"]["generation"] + 1

    apiserver.kubectl("annotate", "deployment/undo", f"{REVISION}=3")
    assert "rolled back" in apiserver.kubectl("rollout", "undo", "deployment/undo", "--to-revision=2")
    assert (
        get(apiserver, "deploy", "undo")["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.25"
    )
    assert "skipped rollback" in apiserver.kubectl("rollout", "undo", "deployment/undo", "--to-revision=2")
    out = apiserver.kubectl("rollout", "undo", "deployment/undo", "--to-revision=9", check=False)
    assert "unable to find specified revision 9" in out
    apiserver.kubectl("rollout", "pause", "deployment/undo")
    out = apiserver.kubectl("rollout", "undo", "deployment/undo", check=False)
    assert "cannot rollback a paused deployment" in out


# -- watches: rollout status and wait --------------------------------------------------------------


def test_rollout_status_follows_the_status_subresource(
    apiserver: ApiServer, background: list[Background]
) -> None:
    d = create_deployment(apiserver, "status", replicas=4)
    watch = start(background, apiserver, "rollout", "status", "deployment/status", "--timeout=60s")
    watch.wait_for_text("Waiting for deployment spec update to be observed", 20)
    partial = {**complete_status(d, 4), "updatedReplicas": 2, "availableReplicas": 2, "readyReplicas": 2}
    write_status(apiserver, "deploy", "status", partial)
    watch.wait_for_text("2 out of 4 new replicas have been updated", 20)
    assert watch.proc.poll() is None
    write_status(apiserver, "deploy", "status", complete_status(d, 4))
    assert watch.exit_code(30) == 0, watch.output()
    assert 'deployment "status" successfully rolled out' in watch.output()


def test_rollout_status_fails_on_progress_deadline(
    apiserver: ApiServer, background: list[Background]
) -> None:
    d = create_deployment(apiserver, "stuck", replicas=2)
    watch = start(background, apiserver, "rollout", "status", "deployment/stuck", "--timeout=60s")
    watch.wait_for_text("Waiting for deployment spec update to be observed", 20)
    status = complete_status(d, 2)
    status["updatedReplicas"] = 1
    status["conditions"][1].update(
        status="False",
        reason="ProgressDeadlineExceeded",
        message='ReplicaSet "stuck-x" has timed out progressing.',
    )
    write_status(apiserver, "deploy", "stuck", status)
    assert watch.exit_code(30) != 0
    assert 'deployment "stuck" exceeded its progress deadline' in watch.output()


def test_wait_for_available(apiserver: ApiServer, background: list[Background]) -> None:
    d = create_deployment(apiserver, "avail", replicas=1)
    waiter = start(
        background,
        apiserver,
        "wait",
        "--for=condition=Available",
        "deployment/avail",
        "--timeout=60s",
        "-v=6",
    )
    # `kubectl wait` lists, then watches from that list's resourceVersion; -v=6 logs the watch.
    waiter.wait_for_text("watch=true", 20)
    assert waiter.proc.poll() is None
    write_status(apiserver, "deploy", "avail", complete_status(d, 1))
    assert waiter.exit_code(30) == 0, waiter.output()
    assert "condition met" in waiter.output()


# -- get and describe ----------------------------------------------------------------------------


def test_get_and_describe_show_the_replicasets_and_events(apiserver: ApiServer) -> None:
    d = create_deployment(apiserver, "desc", replicas=2, image="nginx:1.25")
    old = owned_replicaset(apiserver, d, 1, "nginx:1.24", 0)
    new = owned_replicaset(apiserver, d, 2, "nginx:1.25", 2)
    write_status(
        apiserver, "rs", new["metadata"]["name"], {"replicas": 2, "readyReplicas": 1, "availableReplicas": 1}
    )
    write_status(apiserver, "deploy", "desc", complete_status(d, 2))
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{new['metadata']['name']}-abcde",
            "labels": new["spec"]["template"]["metadata"]["labels"],
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": new["metadata"]["name"],
                    "uid": new["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": new["spec"]["template"]["spec"],
    }
    apiserver.kubectl("create", "-f", "-", input=json.dumps(pod))
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "desc.scaled"},
        "involvedObject": {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "desc",
            "namespace": "default",
            "uid": d["metadata"]["uid"],
        },
        "reason": "ScalingReplicaSet",
        "message": f"Scaled up replica set {new['metadata']['name']} from 0 to 2",
        "type": "Normal",
        "source": {"component": "deployment-controller"},
        "count": 1,
        "firstTimestamp": d["metadata"]["creationTimestamp"],
        "lastTimestamp": d["metadata"]["creationTimestamp"],
    }
    apiserver.kubectl("create", "-f", "-", input=json.dumps(event))

    out = apiserver.kubectl("get", "rs,pods", "-o", "wide", "-l", "app=desc")
    lines = [line.split() for line in out.splitlines() if line.strip()]
    assert lines[0] == ["NAME", "DESIRED", "CURRENT", "READY", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]
    rs_rows = {r[0]: r for r in lines if r[0].startswith("replicaset.apps/")}
    assert rs_rows[f"replicaset.apps/{new['metadata']['name']}"][1:4] == ["2", "2", "1"]
    assert rs_rows[f"replicaset.apps/{old['metadata']['name']}"][1:4] == ["0", "0", "0"]
    assert any(r[0] == f"pod/{pod['metadata']['name']}" and r[2] == "Pending" for r in lines)

    desc = apiserver.kubectl("describe", "deployment", "desc")
    assert f"NewReplicaSet:   {new['metadata']['name']} (2/2 replicas created)" in desc
    assert f"OldReplicaSets:  {old['metadata']['name']} (0/0 replicas created)" in desc
    assert "Replicas:               2 desired | 2 updated | 2 total | 2 available | 0 unavailable" in desc
    assert "ScalingReplicaSet" in desc and "deployment-controller" in desc
    desc_rs = apiserver.kubectl("describe", "rs", new["metadata"]["name"])
    assert "Controlled By:  Deployment/desc" in desc_rs
    assert "Pods Status:    0 Running / 1 Waiting / 0 Succeeded / 0 Failed" in desc_rs


# -- delete --cascade ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cascade", "finalizer"), [("orphan", "orphan"), ("foreground", "foregroundDeletion")]
)
def test_delete_cascade_leaves_the_object_to_the_garbage_collector(
    apiserver: ApiServer, cascade: str, finalizer: str
) -> None:
    name = f"del-{cascade}"
    d = create_deployment(apiserver, name)
    rs = owned_replicaset(apiserver, d, 1, "nginx:1.25", 0)
    apiserver.kubectl("delete", "deployment", name, f"--cascade={cascade}", "--wait=false")
    terminating = get(apiserver, "deploy", name)
    assert terminating["metadata"]["finalizers"] == [finalizer]
    assert terminating["metadata"]["deletionTimestamp"]
    # A second delete changes nothing while the garbage collector has not acted.
    apiserver.kubectl("delete", "deployment", name, f"--cascade={cascade}", "--wait=false")
    assert get(apiserver, "deploy", name)["metadata"]["finalizers"] == [finalizer]
    child = get(apiserver, "rs", rs["metadata"]["name"])
    assert child["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] is True

    # What the garbage collector does last: remove its finalizer; the object then goes.
    apiserver.kubectl(
        "patch", "deployment", name, "--type=json", "-p", '[{"op":"remove","path":"/metadata/finalizers"}]'
    )
    assert "NotFound" in apiserver.kubectl("get", "deployment", name, check=False)


def test_delete_cascade_background_removes_the_owner_at_once(apiserver: ApiServer) -> None:
    d = create_deployment(apiserver, "del-bg")
    rs = owned_replicaset(apiserver, d, 1, "nginx:1.25", 0)
    apiserver.kubectl("delete", "deployment", "del-bg", "--cascade=background", "--timeout=20s")
    assert "NotFound" in apiserver.kubectl("get", "deployment", "del-bg", check=False)
    # Without a garbage collector running, the dependent stays.
    assert get(apiserver, "rs", rs["metadata"]["name"])["metadata"]["ownerReferences"]


def test_a_later_delete_changes_the_propagation_policy(apiserver: ApiServer) -> None:
    create_deployment(apiserver, "del-switch")
    apiserver.kubectl(
        "patch",
        "deployment",
        "del-switch",
        "--type=merge",
        "-p",
        '{"metadata":{"finalizers":["example.com/hold"]}}',
    )
    apiserver.kubectl("delete", "deployment", "del-switch", "--cascade=foreground", "--wait=false")
    assert get(apiserver, "deploy", "del-switch")["metadata"]["finalizers"] == [
        "example.com/hold",
        "foregroundDeletion",
    ]
    # Without a policy (kubectl itself always sends one) the finalizer already there decides,
    # not the kind's default (Background).
    apiserver.kubectl("delete", "--raw", "/apis/apps/v1/namespaces/default/deployments/del-switch")
    assert get(apiserver, "deploy", "del-switch")["metadata"]["finalizers"][-1] == "foregroundDeletion"
    # Upstream lets a pending deletion switch policy; never both GC finalizers at once.
    apiserver.kubectl("delete", "deployment", "del-switch", "--cascade=orphan", "--wait=false")
    assert get(apiserver, "deploy", "del-switch")["metadata"]["finalizers"] == ["example.com/hold", "orphan"]
    apiserver.kubectl("delete", "deployment", "del-switch", "--cascade=background", "--wait=false")
    assert get(apiserver, "deploy", "del-switch")["metadata"]["finalizers"] == ["example.com/hold"]
    apiserver.kubectl(
        "patch",
        "deployment",
        "del-switch",
        "--type=json",
        "-p",
        '[{"op":"remove","path":"/metadata/finalizers"}]',
    )
    assert "NotFound" in apiserver.kubectl("get", "deployment", "del-switch", check=False)


def test_a_background_delete_drops_the_gc_finalizer_of_a_pod_in_its_grace_period(
    apiserver: ApiServer,
) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "graceful"},
        "spec": {"nodeName": "somewhere", "containers": [{"name": "c", "image": "nginx"}]},
    }
    apiserver.kubectl("create", "-f", "-", input=json.dumps(pod))
    apiserver.kubectl("delete", "pod", "graceful", "--cascade=foreground", "--wait=false")
    assert get(apiserver, "pod", "graceful")["metadata"]["finalizers"] == ["foregroundDeletion"]
    apiserver.kubectl("delete", "pod", "graceful", "--cascade=background", "--wait=false")
    # Still there for its grace period (a kubelet finishes it), but no longer waiting on the GC.
    meta = get(apiserver, "pod", "graceful")["metadata"]
    assert meta.get("deletionTimestamp") and "finalizers" not in meta, meta
    apiserver.kubectl("delete", "pod", "graceful", "--grace-period=0", "--force")


def test_server_dry_run_create_stores_nothing_and_has_no_version(apiserver: ApiServer) -> None:
    out = apiserver.kubectl_json(
        "create", "deployment", "dry", "--image=nginx", "--replicas=3", "--dry-run=server"
    )
    assert out["spec"]["replicas"] == 3 and out["metadata"]["uid"]
    assert "resourceVersion" not in out["metadata"]
    assert "NotFound" in apiserver.kubectl("get", "deployment", "dry", check=False)
