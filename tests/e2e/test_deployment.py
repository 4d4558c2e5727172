"""The Deployment controller end to end: the whole stack (`kcm dev`), driven with kubectl.

One stack for the module, with two deployment-controller replicas so that killing one
mid-rollout is part of the story. Rollouts are watched pod by pod (the official client's
watch) to check maxSurge / maxUnavailable at every observed moment, not only at the end.
Pod templates carry `sim.kcm.dev/terminate-seconds: "0"` so deleted pods go at once.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from dataclasses import dataclass, field
from typing import Any

import kubernetes
from kcm_shared.bus import subjects

from tests.conftest import wait_for
from tests.e2e import devstack

stack = devstack.stack_fixture("--replicas", "deployment=2")

NS = "default"


def manifest(
    name: str,
    replicas: int,
    image: str = "nginx:1",
    *,
    surge: int | str = "25%",
    unavailable: int | str = "25%",
    strategy: str = "RollingUpdate",
    pod_annotations: dict[str, str] | None = None,
    **spec: Any,
) -> str:
    strat: dict[str, Any] = {"type": strategy}
    if strategy == "RollingUpdate":
        strat["rollingUpdate"] = {"maxSurge": surge, "maxUnavailable": unavailable}
    doc = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": strat,
            "template": {
                "metadata": {
                    "labels": {"app": name},
                    "annotations": {"sim.kcm.dev/terminate-seconds": "0", **(pod_annotations or {})},
                },
                "spec": {"containers": [{"name": "c", "image": image}]},
            },
            **spec,
        },
    }
    return json.dumps(doc)


def get(stack: devstack.DevStack, kind: str, name: str = "", selector: str = "") -> Any:
    args = ["get", kind, "-n", NS, "-o", "json"]
    if name:
        args.insert(2, name)
    if selector:
        args += ["-l", selector]
    return json.loads(stack.kubectl(*args).stdout)


def rollout_status(stack: devstack.DevStack, name: str, timeout: int = 90) -> None:
    stack.kubectl("rollout", "status", f"deployment/{name}", f"--timeout={timeout}s", timeout=timeout + 10)


def replica_sets(stack: devstack.DevStack, name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = get(stack, "replicasets", selector=f"app={name}")["items"]
    return items


@dataclass
class PodWatch:
    """Every pod event of one app, with the bounds checked against each observed state."""

    stack: devstack.DevStack
    app: str
    pods: dict[str, tuple[bool, bool]] = field(default_factory=dict)  # name -> (terminating, ready)
    hashes: dict[str, str] = field(default_factory=dict)  # name -> pod-template-hash, unless terminal
    max_templates: int = 0  # most pod templates seen running side by side
    created: set[str] = field(default_factory=set)
    max_running: int = 0
    min_available: int | None = None
    events: int = 0
    error: BaseException | None = None

    def __post_init__(self) -> None:
        self._watch = kubernetes.watch.Watch()
        self._synced = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PodWatch:
        self._thread.start()
        # The initial list arrives as ADDED events; bounds count from the first full state.
        self._synced.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping = True
        self._watch.stop()
        self._thread.join(10)

    def _run(self) -> None:
        try:
            api = kubernetes.client.CoreV1Api(self.stack.api())
            listing = api.list_namespaced_pod(NS, label_selector=f"app={self.app}")
            for pod in listing.items:
                self._observe(pod)
            self.created |= set(self.pods)
            self._synced.set()
            for event in self._watch.stream(
                api.list_namespaced_pod,
                NS,
                label_selector=f"app={self.app}",
                resource_version=listing.metadata.resource_version if listing.metadata else None,
                timeout_seconds=300,
            ):
                pod = event["object"]
                if event["type"] == "DELETED":
                    self.pods.pop(pod.metadata.name, None)
                    self.hashes.pop(pod.metadata.name, None)
                else:
                    if event["type"] == "ADDED":
                        self.created.add(pod.metadata.name)
                    self._observe(pod)
                self._measure()
        except BaseException as exc:  # surfaced by the test, unless we stopped the watch
            if not self._stopping:
                self.error = exc
            self._synced.set()

    def _observe(self, pod: Any) -> None:
        ready = any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))
        self.pods[pod.metadata.name] = (pod.metadata.deletion_timestamp is not None, ready)
        # A pod that ended (Succeeded or Failed, as a kubelet reports a deleted pod before it
        # removes it) runs nothing: upstream's Recreate counts it gone, and so does the bound.
        if pod.status.phase in ("Succeeded", "Failed"):
            self.hashes.pop(pod.metadata.name, None)
        else:
            self.hashes[pod.metadata.name] = (pod.metadata.labels or {}).get("pod-template-hash", "")

    def _measure(self) -> None:
        self.events += 1
        running = [ready for terminating, ready in self.pods.values() if not terminating]
        available = sum(running)
        self.max_running = max(self.max_running, len(running))
        self.max_templates = max(self.max_templates, len(set(self.hashes.values())))
        self.min_available = available if self.min_available is None else min(self.min_available, available)


def deployment(stack: devstack.DevStack, name: str) -> dict[str, Any]:
    doc: dict[str, Any] = get(stack, "deployment", name)
    return doc


def condition(d: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in d.get("status", {}).get("conditions", []) if c["type"] == type_), None)


def test_create_rolls_out_with_revision_and_hash(stack: devstack.DevStack) -> None:
    stack.kubectl("apply", "-f", "-", input=manifest("web", 3))
    rollout_status(stack, "web")
    d = deployment(stack, "web")
    status = d["status"]
    assert (
        status["replicas"],
        status["updatedReplicas"],
        status["readyReplicas"],
        status["availableReplicas"],
    ) == (
        3,
        3,
        3,
        3,
    )
    assert status["observedGeneration"] == d["metadata"]["generation"]
    assert condition(d, "Available")["reason"] == "MinimumReplicasAvailable"  # type: ignore[index]
    assert condition(d, "Progressing")["reason"] == "NewReplicaSetAvailable"  # type: ignore[index]
    assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    (rs,) = replica_sets(stack, "web")
    pod_hash = rs["metadata"]["labels"]["pod-template-hash"]
    assert rs["metadata"]["name"] == f"web-{pod_hash}"
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", "pod-template-hash": pod_hash}
    assert rs["spec"]["template"]["metadata"]["labels"]["pod-template-hash"] == pod_hash
    assert rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    assert rs["metadata"]["annotations"]["deployment.kubernetes.io/desired-replicas"] == "3"
    assert rs["metadata"]["annotations"]["deployment.kubernetes.io/max-replicas"] == "4"
    assert rs["metadata"]["ownerReferences"][0]["uid"] == d["metadata"]["uid"]
    events = stack.kubectl("get", "events", "-n", NS, "--field-selector", "involvedObject.name=web").stdout
    assert f"Scaled up replica set web-{pod_hash} from 0 to 3" in events


def test_kubectl_create_deployment_stays_at_generation_one(stack: devstack.DevStack) -> None:
    # The revision annotation travels with the status, which bumps no generation (upstream's
    # UpdateStatus); an annotation written through the main resource does bump it.
    stack.kubectl("create", "deployment", "gen", "-n", NS, "--image=nginx:1", "--replicas=2")
    rollout_status(stack, "gen")
    d = deployment(stack, "gen")
    assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    assert (d["metadata"]["generation"], d["status"]["observedGeneration"]) == (1, 1)
    stack.kubectl("annotate", "deployment", "gen", "-n", NS, "team=blue")
    wait_for(lambda: deployment(stack, "gen")["status"]["observedGeneration"] == 2, 30, what="observed 2")
    rollout_status(stack, "gen")
    (rs,) = get(stack, "replicasets", selector="app=gen")["items"]
    wait_for(
        lambda: (
            get(stack, "replicaset", rs["metadata"]["name"])["metadata"]["annotations"].get("team") == "blue"
        ),
        30,
        what="annotation copied to the replica set",
    )
    history = stack.kubectl("rollout", "history", "deployment/gen", "-n", NS).stdout
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1"], history


def test_image_change_stays_within_surge_and_unavailable_bounds(stack: devstack.DevStack) -> None:
    stack.kubectl("apply", "-f", "-", input=manifest("roll", 4, surge=1, unavailable=1))
    rollout_status(stack, "roll")
    with PodWatch(stack, "roll") as watch:
        stack.kubectl("set", "image", "deployment/roll", "c=nginx:2")
        rollout_status(stack, "roll")
        wait_for(lambda: len(watch.pods) == 4, 30, what="old pods gone")
    assert watch.error is None, watch.error
    assert watch.events > 0
    assert watch.max_running <= 4 + 1, f"{watch.max_running} pods ran at once"
    assert watch.min_available is not None and watch.min_available >= 4 - 1
    rss = replica_sets(stack, "roll")
    assert sorted(rs["spec"]["replicas"] for rs in rss) == [0, 4]
    new = next(rs for rs in rss if rs["spec"]["replicas"] == 4)
    assert new["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"
    assert new["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"


def test_history_and_undo_restore_the_previous_template(stack: devstack.DevStack) -> None:
    stack.kubectl("apply", "-f", "-", input=manifest("undo", 2, image="nginx:1"))
    rollout_status(stack, "undo")
    stack.kubectl("set", "image", "deployment/undo", "c=nginx:2")
    rollout_status(stack, "undo")
    history = stack.kubectl("rollout", "history", "deployment/undo").stdout
    revisions = [line.split()[0] for line in history.splitlines()[2:] if line.strip()]
    assert revisions == ["1", "2"], history
    stack.kubectl("rollout", "undo", "deployment/undo")
    rollout_status(stack, "undo")
    d = deployment(stack, "undo")
    assert d["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1"
    assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    rss = replica_sets(stack, "undo")
    assert len(rss) == 2  # the first replica set came back as revision 3, none was created
    current = next(rs for rs in rss if rs["spec"]["replicas"] == 2)
    assert current["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1"
    assert current["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    assert current["metadata"]["annotations"]["deployment.kubernetes.io/revision-history"] == "1"
    history = stack.kubectl("rollout", "history", "deployment/undo").stdout
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["2", "3"], history


def test_rollout_restart_replaces_every_pod(stack: devstack.DevStack) -> None:
    stack.kubectl("apply", "-f", "-", input=manifest("restart", 2))
    rollout_status(stack, "restart")
    before = {p["metadata"]["name"] for p in get(stack, "pods", selector="app=restart")["items"]}
    stack.kubectl("rollout", "restart", "deployment/restart")
    rollout_status(stack, "restart")

    def pods() -> set[str]:
        return {p["metadata"]["name"] for p in get(stack, "pods", selector="app=restart")["items"]}

    wait_for(lambda: len(pods()) == 2 and not pods() & before, 30, what="every pod replaced")
    assert deployment(stack, "restart")["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"


def test_pause_stops_the_rollout_and_resume_continues(stack: devstack.DevStack) -> None:
    stack.kubectl("apply", "-f", "-", input=manifest("paused", 2))
    rollout_status(stack, "paused")
    stack.kubectl("rollout", "pause", "deployment/paused")
    stack.kubectl("set", "image", "deployment/paused", "c=nginx:2")

    def observed_paused() -> bool:
        d = deployment(stack, "paused")
        cond = condition(d, "Progressing")
        return d["status"].get("observedGeneration") == d["metadata"]["generation"] and bool(
            cond and cond["reason"] == "DeploymentPaused"
        )

    wait_for(observed_paused, 30, what="the controller saw the paused change")
    rss = replica_sets(stack, "paused")
    assert len(rss) == 1, "a paused deployment must not start a new replica set"
    assert rss[0]["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1"
    stack.kubectl("rollout", "resume", "deployment/paused")
    rollout_status(stack, "paused")
    d = deployment(stack, "paused")
    assert d["status"]["updatedReplicas"] == 2
    images = {
        rs["spec"]["template"]["spec"]["containers"][0]["image"]: rs["spec"]["replicas"]
        for rs in replica_sets(stack, "paused")
    }
    assert images == {"nginx:1": 0, "nginx:2": 2}


def test_recreate_never_runs_old_and_new_pods_together(stack: devstack.DevStack) -> None:
    stack.kubectl("apply", "-f", "-", input=manifest("recreate", 3, strategy="Recreate"))
    rollout_status(stack, "recreate")
    with PodWatch(stack, "recreate") as watch:
        stack.kubectl("set", "image", "deployment/recreate", "c=nginx:2")
        rollout_status(stack, "recreate")
        wait_for(lambda: len(watch.pods) == 3, 30, what="old pods gone")
    assert watch.error is None, watch.error
    assert watch.events > 0
    # Terminating pods count too: Recreate starts new pods only once no old one runs.
    assert watch.max_templates == 1
    assert sorted(rs["spec"]["replicas"] for rs in replica_sets(stack, "recreate")) == [0, 3]


def test_scaling_mid_rollout_is_proportional(stack: devstack.DevStack) -> None:
    stack.kubectl("apply", "-f", "-", input=manifest("prop", 4, surge=1, unavailable=0))
    rollout_status(stack, "prop")
    # New pods never become ready, so the rollout stays at old 4 + new 1.
    stack.kubectl(
        "patch",
        "deployment/prop",
        "-p",
        json.dumps({"spec": {"template": {"metadata": {"annotations": {"sim.kcm.dev/ready": "false"}}}}}),
    )

    def sizes() -> list[int]:
        return sorted(rs["spec"]["replicas"] for rs in replica_sets(stack, "prop"))

    wait_for(lambda: sizes() == [1, 4], 30, what="rollout stuck at 4 old + 1 new")
    stack.kubectl("scale", "deployment/prop", "--replicas=8")
    # 9 pods allowed (8 + surge 1), shared as the replica sets shared the last 5: 7.2 -> 7 and 1.8 -> 2.
    wait_for(lambda: sizes() == [2, 7], 30, what="proportional sizes")
    for rs in replica_sets(stack, "prop"):
        assert rs["metadata"]["annotations"]["deployment.kubernetes.io/desired-replicas"] == "8"
        assert rs["metadata"]["annotations"]["deployment.kubernetes.io/max-replicas"] == "9"


def test_old_replica_sets_beyond_the_history_limit_are_deleted(stack: devstack.DevStack) -> None:
    stack.kubectl("apply", "-f", "-", input=manifest("limit", 1, revisionHistoryLimit=1))
    for image in ("nginx:2", "nginx:3", "nginx:4"):
        rollout_status(stack, "limit")
        stack.kubectl("set", "image", "deployment/limit", f"c={image}")
    rollout_status(stack, "limit")

    def revisions() -> list[str]:
        return sorted(
            rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
            for rs in replica_sets(stack, "limit")
        )

    wait_for(lambda: revisions() == ["3", "4"], 30, what="only the newest old replica set kept")


def test_orphaned_replica_set_is_adopted(stack: devstack.DevStack) -> None:
    doc = manifest("adopt", 2)
    stack.kubectl("apply", "-f", "-", input=doc)
    rollout_status(stack, "adopt")
    (rs,) = replica_sets(stack, "adopt")
    stack.kubectl("delete", "deployment", "adopt", "--cascade=orphan", "--wait=true")
    wait_for(
        lambda: not replica_sets(stack, "adopt")[0]["metadata"].get("ownerReferences"), 30, what="orphaned"
    )
    stack.kubectl("apply", "-f", "-", input=doc)
    rollout_status(stack, "adopt")
    d = deployment(stack, "adopt")
    (adopted,) = replica_sets(stack, "adopt")
    assert adopted["metadata"]["uid"] == rs["metadata"]["uid"]
    assert adopted["metadata"]["ownerReferences"][0]["uid"] == d["metadata"]["uid"]
    assert adopted["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"


def test_hash_collision_bumps_collision_count(stack: devstack.DevStack) -> None:
    doc = manifest("collide", 1)
    stack.kubectl("apply", "-f", "-", input=doc)
    rollout_status(stack, "collide")
    (first,) = replica_sets(stack, "collide")
    taken = first["metadata"]["name"]
    stack.kubectl("delete", "deployment", "collide", "--wait=true")
    stack.kubectl("delete", "rs", taken, "--ignore-not-found", "--wait=true")
    # Someone else's replica set takes the name the same template hashes to.
    impostor = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": taken, "namespace": NS},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "impostor"}},
            "template": {
                "metadata": {"labels": {"app": "impostor"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1"}]},
            },
        },
    }
    stack.kubectl("create", "-f", "-", input=json.dumps(impostor))
    stack.kubectl("apply", "-f", "-", input=doc)
    rollout_status(stack, "collide")
    d = deployment(stack, "collide")
    assert d["status"]["collisionCount"] == 1
    (rs,) = replica_sets(stack, "collide")
    assert rs["metadata"]["name"] != taken
    assert rs["metadata"]["ownerReferences"][0]["uid"] == d["metadata"]["uid"]


def test_stuck_rollout_exceeds_its_progress_deadline(stack: devstack.DevStack) -> None:
    doc = manifest("stuck", 2, pod_annotations={"sim.kcm.dev/ready": "false"}, progressDeadlineSeconds=5)
    stack.kubectl("apply", "-f", "-", input=doc)

    def timed_out() -> bool:
        cond = condition(deployment(stack, "stuck"), "Progressing")
        return bool(cond and cond["status"] == "False" and cond["reason"] == "ProgressDeadlineExceeded")

    wait_for(timed_out, 40, what="Progressing=False ProgressDeadlineExceeded")
    res = stack.kubectl("rollout", "status", "deployment/stuck", "--timeout=20s", check=False, timeout=30)
    assert res.returncode != 0
    assert "exceeded its progress deadline" in res.stderr + res.stdout
    d = deployment(stack, "stuck")
    assert condition(d, "Available")["reason"] == "MinimumReplicasUnavailable"  # type: ignore[index]


def test_scale_zero_to_hundred_to_three(stack: devstack.DevStack) -> None:
    stack.kubectl("apply", "-f", "-", input=manifest("scale", 0))
    wait_for(lambda: len(replica_sets(stack, "scale")) == 1, 30, what="replica set of an empty deployment")
    stack.kubectl("scale", "deployment/scale", "--replicas=100")
    rollout_status(stack, "scale", timeout=120)
    assert deployment(stack, "scale")["status"]["availableReplicas"] == 100
    stack.kubectl("scale", "deployment/scale", "--replicas=3")
    rollout_status(stack, "scale")
    (rs,) = replica_sets(stack, "scale")
    assert rs["spec"]["replicas"] == 3
    assert rs["metadata"]["annotations"]["deployment.kubernetes.io/desired-replicas"] == "3"
    wait_for(lambda: len(get(stack, "pods", selector="app=scale")["items"]) == 3, 60, what="3 pods left")


def owner_pid(stack: devstack.DevStack, key: str) -> int:
    """The pid of the deployment-controller replica that owns `key`'s partition (instance = host-pid)."""
    partitions = stack.status()["controllers"]["deployment-controller"]["partitions"]
    owner = partitions[str(subjects.partition_of(key, len(partitions)))]
    pid = int(owner.rsplit("-", 1)[1])
    assert pid in stack.controller_pids("deployment"), (owner, partitions)
    return pid


def test_killed_controller_replica_mid_rollout_completes_within_bounds(stack: devstack.DevStack) -> None:
    replicas = 6
    stack.kubectl("apply", "-f", "-", input=manifest("kill", replicas, surge=1, unavailable=0))
    rollout_status(stack, "kill")
    pids = stack.controller_pids("deployment")
    assert len(pids) == 2, pids
    with PodWatch(stack, "kill") as watch:
        stack.kubectl("set", "image", "deployment/kill", "c=nginx:2")
        wait_for(lambda: len(watch.created) > replicas, 30, what="the rollout under way")
        os.kill(owner_pid(stack, f"{NS}/kill"), signal.SIGKILL)
        rollout_status(stack, "kill", timeout=120)
        wait_for(lambda: len(watch.pods) == replicas, 30, what="old pods gone")
    assert watch.error is None, watch.error
    assert watch.max_running <= replicas + 1, f"{watch.max_running} pods ran at once"
    assert watch.min_available is not None and watch.min_available >= replicas
    # Each old pod was replaced exactly once: no pod too many was ever created.
    assert len(watch.created) == 2 * replicas, sorted(watch.created)
    stack.wait_healthy(90)
