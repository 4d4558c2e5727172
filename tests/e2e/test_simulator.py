"""`kcm sim` against the real embedded API server: nodes, heartbeats, scheduling, pod lifecycles, faults."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import KCM, ApiServer, wait_for


@dataclass
class Sim:
    api: ApiServer
    proc: subprocess.Popen[bytes]
    control_file: Path

    def control(self, path: str) -> Any:
        port = self.control_file.read_text()
        req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method="POST", data=b"")
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.load(resp)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def start_sim(api: ApiServer, *extra: str) -> Sim:
    control_file = api.workdir / "sim-control-port"
    control_file.unlink(missing_ok=True)
    log = open(api.workdir / "sim.log", "ab")  # noqa: SIM115 - handed to the child process
    args = [KCM, "sim", "--kubeconfig", str(api.kubeconfig), "--nodes", "3", "--zones", "2"]
    args += ["--pod-start-delay", "0.1", "--heartbeat-interval", "0.5", "--control-file", str(control_file)]
    # A tenth of upstream's restart back-off (1 s doubling), for the pods restarted more than once.
    args += ["--backoff-scale", "0.1"]
    args += extra
    # No node lifecycle controller runs here: the simulator lifts the not-ready taint itself.
    args += ["--manage-not-ready-taint"]
    proc = subprocess.Popen(args, stdout=log, stderr=log)
    log.close()
    sim = Sim(api, proc, control_file)
    try:
        wait_for(lambda: control_file.exists() or proc.poll() is not None, 20, what="control file")
        assert proc.poll() is None, (api.workdir / "sim.log").read_text()
    except BaseException:
        sim.stop()
        raise
    return sim


@pytest.fixture(scope="module")
def sim(apiserver: ApiServer) -> Iterator[Sim]:
    started = start_sim(apiserver)
    yield started
    started.stop()


def _get(api: ApiServer, *args: str) -> Any:
    out = api.kubectl(*args, "-o", "json", check=False)
    try:
        return json.loads(out)
    except json.JSONDecodeError:
        return None


def _pod(sim: Sim, name: str) -> Any:
    return _get(sim.api, "get", "pod", name)


def _condition(obj: Any, kind: str) -> dict[str, Any]:
    for cond in (obj or {}).get("status", {}).get("conditions") or []:
        if cond["type"] == kind:
            return dict(cond)
    return {}


def _create_pod(
    sim: Sim, name: str, annotations: dict[str, str] | None = None, owner: str = "", **spec: Any
) -> None:
    meta: dict[str, Any] = {"name": name, "annotations": annotations or {}}
    if owner:
        # No controller runs here, so a made-up owner is never looked up.
        meta["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": owner, "controller": True}
        ]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec},
    }
    sim.api.kubectl("create", "-f", "-", input=json.dumps(pod))


def test_nodes_register_ready_with_labels_and_renew_leases(sim: Sim) -> None:
    def ready_nodes() -> list[Any]:
        items = (_get(sim.api, "get", "nodes") or {}).get("items", [])
        return [n for n in items if _condition(n, "Ready").get("status") == "True"]

    nodes = wait_for(lambda: len(ready_nodes()) == 3 and ready_nodes(), what="3 ready nodes")
    node = next(n for n in nodes if n["metadata"]["name"] == "sim-node-1")
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == "sim-node-1"
    assert labels["kubernetes.io/os"] == "linux"
    assert labels["topology.kubernetes.io/zone"] == "zone-b"
    assert {n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes} == {"zone-a", "zone-b"}
    assert node["status"]["allocatable"]["cpu"] == "4"
    assert node["spec"]["podCIDR"] == "10.244.1.0/24"
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.32.0"
    assert {"type": "InternalIP", "address": "10.0.1.1"} in node["status"]["addresses"]

    def renew_time() -> str:
        lease = _get(sim.api, "get", "lease", "-n", "kube-node-lease", "sim-node-0") or {}
        return str(lease.get("spec", {}).get("renewTime", ""))

    first = wait_for(renew_time, what="lease")
    wait_for(lambda: renew_time() not in ("", first), 10, what="lease renewal")


def _taints(sim: Sim, node: str) -> list[Any]:
    return list(((_get(sim.api, "get", "node", node) or {}).get("spec") or {}).get("taints") or [])


NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}


def test_api_taints_new_nodes_not_ready_and_the_sim_lifts_it_once_ready(sim: Sim) -> None:
    # TaintNodesByCondition admission: any Node created through the API starts NoSchedule.
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "not-a-sim-node"}}
    sim.api.kubectl("create", "-f", "-", input=json.dumps(node))
    assert _taints(sim, "not-a-sim-node") == [NOT_READY_TAINT]
    sim.api.kubectl("delete", "node", "not-a-sim-node")
    # The sim's own nodes got it too, and lose it once they report Ready, as the node lifecycle
    # controller would lift it: otherwise no pod could be scheduled on them.
    for name in ("sim-node-0", "sim-node-1", "sim-node-2"):
        wait_for(lambda name=name: _taints(sim, name) == [], what=f"{name} untainted")


def test_plain_pod_is_bound_and_becomes_ready_with_a_pod_ip(sim: Sim) -> None:
    _create_pod(sim, "plain")
    pod = wait_for(
        lambda: _condition(_pod(sim, "plain"), "Ready").get("status") == "True" and _pod(sim, "plain"),
        what="ready pod",
    )
    assert pod["spec"]["nodeName"].startswith("sim-node-")
    assert pod["status"]["phase"] == "Running"
    assert pod["status"]["podIP"].startswith("10.244.")
    status = pod["status"]["containerStatuses"][0]
    assert status["ready"] and status["started"] and "running" in status["state"]


def test_pod_with_unsatisfiable_node_selector_stays_pending_unschedulable(sim: Sim) -> None:
    _create_pod(sim, "nowhere", nodeSelector={"disktype": "ssd"})
    cond = wait_for(lambda: _condition(_pod(sim, "nowhere"), "PodScheduled"), what="PodScheduled")
    assert cond["status"] == "False" and cond["reason"] == "Unschedulable"
    assert cond["message"].startswith("0/3 nodes are available: 3 node(s) didn't match")
    pod = _pod(sim, "nowhere")
    assert not pod["spec"].get("nodeName") and pod["status"]["phase"] == "Pending"


@pytest.mark.parametrize(("code", "phase"), [("0", "Succeeded"), ("1", "Failed")])
def test_exit_code_annotation_ends_a_never_restarting_pod(sim: Sim, code: str, phase: str) -> None:
    name = f"exit-{code}"
    annotations = {"sim.kcm.dev/exit-code": code, "sim.kcm.dev/run-seconds": "0.2"}
    _create_pod(sim, name, annotations, restartPolicy="Never")
    pod = wait_for(
        lambda: (_pod(sim, name) or {}).get("status", {}).get("phase") == phase and _pod(sim, name),
        what=phase,
    )
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == int(code)


def _ended(sim: Sim, name: str) -> Any:
    return wait_for(
        lambda: (
            (_pod(sim, name) or {}).get("status", {}).get("phase") in ("Succeeded", "Failed")
            and _pod(sim, name)
        ),
        what=f"{name} ended",
    )


def _exit_code(pod: Any) -> int:
    return int(pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"])


def test_exit_code_by_index_reads_the_job_completion_index(sim: Sim) -> None:
    for index in ("0", "1"):
        annotations = {
            "batch.kubernetes.io/job-completion-index": index,
            "sim.kcm.dev/exit-code-by-index": "1=3",
            "sim.kcm.dev/exit-code": "0",  # for the indexes the map does not name
        }
        _create_pod(sim, f"indexed-{index}", annotations, restartPolicy="Never")
    first, second = _ended(sim, "indexed-0"), _ended(sim, "indexed-1")
    assert (first["status"]["phase"], _exit_code(first)) == ("Succeeded", 0)
    assert (second["status"]["phase"], _exit_code(second)) == ("Failed", 3)


def test_fail_attempts_fail_only_the_first_attempts(sim: Sim) -> None:
    attempt = {"sim.kcm.dev/fail-attempts": "1", "sim.kcm.dev/exit-code": "42"}
    # Two pods of one Job, one after the other: the first attempt fails, the retry succeeds.
    _create_pod(sim, "attempt-1", attempt, owner="uid-a", restartPolicy="Never")
    assert _exit_code(_ended(sim, "attempt-1")) == 42
    _create_pod(sim, "attempt-2", attempt, owner="uid-a", restartPolicy="Never")
    assert _ended(sim, "attempt-2")["status"]["phase"] == "Succeeded"
    # A pod of an index that already failed once, as the Job controller's count says.
    counted = {**attempt, "batch.kubernetes.io/job-index-failure-count": "1"}
    _create_pod(sim, "attempt-counted", counted, owner="uid-b", restartPolicy="Never")
    assert _ended(sim, "attempt-counted")["status"]["phase"] == "Succeeded"
    # Restarts in place are attempts too.
    _create_pod(sim, "attempt-restarts", {"sim.kcm.dev/fail-attempts": "2"}, restartPolicy="OnFailure")
    done = _ended(sim, "attempt-restarts")
    assert done["status"]["phase"] == "Succeeded"
    assert done["status"]["containerStatuses"][0]["restartCount"] == 2


def test_fail_condition_ends_a_pod_failed_with_that_condition(sim: Sim) -> None:
    annotations = {"sim.kcm.dev/exit-code": "137", "sim.kcm.dev/fail-condition": "DisruptionTarget"}
    _create_pod(sim, "disrupted", annotations, restartPolicy="Never")
    pod = _ended(sim, "disrupted")
    assert pod["status"]["phase"] == "Failed"
    cond = _condition(pod, "DisruptionTarget")
    assert (cond["status"], cond["reason"]) == ("True", "TerminationByKubelet")


def _running(sim: Sim, name: str) -> Any:
    """The pod once it is Running, for its resourceVersion."""
    return wait_for(
        lambda: (_pod(sim, name) or {}).get("status", {}).get("phase") == "Running" and _pod(sim, name),
        what=f"{name} running",
    )


def _last_state(sim: Sim, name: str, rv: str) -> Any:
    """The pod as it was deleted, from the API server's replay of its events since `rv`."""
    query = f"watch=1&resourceVersion={rv}&fieldSelector=metadata.name%3D{name}&timeoutSeconds=1"
    out = sim.api.kubectl("get", "--raw", f"/api/v1/namespaces/default/pods?{query}")
    events = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert events and events[-1]["type"] == "DELETED", [e["type"] for e in events]
    return events[-1]["object"]


def test_graceful_delete_of_containers_that_ignore_sigterm_finishes_only_after_the_grace_period(
    sim: Sim,
) -> None:
    _create_pod(sim, "doomed", {"sim.kcm.dev/ignore-sigterm": "true"})
    rv = _running(sim, "doomed")["metadata"]["resourceVersion"]
    started = time.monotonic()
    sim.api.kubectl("delete", "pod", "doomed", "--grace-period=3", "--wait=false")
    pod = _pod(sim, "doomed")
    assert pod is not None, "deleted before its grace period was over"
    assert pod["metadata"]["deletionTimestamp"] and pod["metadata"]["deletionGracePeriodSeconds"] == 3
    wait_for(lambda: _pod(sim, "doomed") is None, 20, what="pod gone after its grace period")
    # deletionTimestamp has whole seconds, so the sim may finish up to 1 s early, never sooner.
    assert time.monotonic() - started >= 2
    # Containers that outlive the grace period are killed, and the pod reported Failed before it goes.
    final = _last_state(sim, "doomed", rv)
    assert final["status"]["phase"] == "Failed"
    assert final["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137


def test_containers_exit_promptly_on_sigterm_by_default(sim: Sim) -> None:
    _create_pod(sim, "prompt")
    rv = _running(sim, "prompt")["metadata"]["resourceVersion"]
    # Against the default 30 s grace period: gone well within the wait, as a real nginx that
    # exits on SIGTERM, and reported Succeeded (exit code 0), not killed.
    sim.api.kubectl("delete", "pod", "prompt", "--wait=false")
    wait_for(lambda: _pod(sim, "prompt") is None, 15, what="pod gone after SIGTERM")
    final = _last_state(sim, "prompt", rv)
    assert final["metadata"]["deletionGracePeriodSeconds"] == 30
    assert final["status"]["phase"] == "Succeeded"
    assert final["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0


def test_terminate_seconds_annotation_shortens_the_grace_period(sim: Sim) -> None:
    # Even for containers that ignore SIGTERM: the annotation says when they exit.
    annotations = {"sim.kcm.dev/terminate-seconds": "1", "sim.kcm.dev/ignore-sigterm": "true"}
    _create_pod(sim, "quick", annotations)
    rv = _running(sim, "quick")["metadata"]["resourceVersion"]
    # The default grace period is 30 s: only the annotation can end it within the wait.
    sim.api.kubectl("delete", "pod", "quick", "--wait=false")
    wait_for(lambda: _pod(sim, "quick") is None, 15, what="pod gone after terminate-seconds")
    final = _last_state(sim, "quick", rv)
    assert final["metadata"]["deletionGracePeriodSeconds"] == 30
    assert final["status"]["phase"] == "Succeeded"
    assert final["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0


@pytest.mark.parametrize(
    ("name", "annotations", "flags"),
    [
        ("forced", {"sim.kcm.dev/ignore-sigterm": "true"}, ["--grace-period=0", "--force"]),
        ("zero", {"sim.kcm.dev/terminate-seconds": "0"}, []),
    ],
)
def test_delete_without_a_period_to_wait_is_immediate(
    sim: Sim, name: str, annotations: dict[str, str], flags: list[str]
) -> None:
    _create_pod(sim, name, annotations)
    _running(sim, name)
    sim.api.kubectl("delete", "pod", name, "--wait=false", *flags)
    # Against the default 30 s grace period: gone at once, not when it runs out.
    wait_for(lambda: _pod(sim, name) is None, 5, what="pod gone at once")


def test_restarted_sim_finishes_deletions_begun_while_it_was_down(fresh_apiserver: ApiServer) -> None:
    first = start_sim(fresh_apiserver)
    try:
        _create_pod(first, "orphan")
        rv = _running(first, "orphan")["metadata"]["resourceVersion"]
    finally:
        first.stop()
    fresh_apiserver.kubectl("delete", "pod", "orphan", "--grace-period=3", "--wait=false")
    # Its containers ignore SIGTERM (the old default, kept as a flag): killed when the grace ends.
    second = start_sim(fresh_apiserver, "--ignore-sigterm")
    try:
        wait_for(lambda: _pod(second, "orphan") is None, 20, what="pod gone after the restart")
        assert _last_state(second, "orphan", rv)["status"]["phase"] == "Failed"
    finally:
        second.stop()


def test_a_restarted_sim_leaves_running_pods_as_they_are(fresh_apiserver: ApiServer) -> None:
    """As a kubelet's containers outlive the kubelet: no status rewritten (start and transition
    times would move), and no new pod given an address a running one has."""
    first = start_sim(fresh_apiserver)
    try:
        _create_pod(first, "before", nodeName="sim-node-0")
        before = _running(first, "before")
    finally:
        first.stop()
    second = start_sim(fresh_apiserver)
    try:
        # Running only once the new simulator has listed, and taken up, every pod before it.
        _create_pod(second, "after", nodeName="sim-node-0")
        after = _running(second, "after")
        assert _pod(second, "before")["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
        assert after["status"]["podIP"] != before["status"]["podIP"]
    finally:
        second.stop()


def test_stop_heartbeat_freezes_the_lease_and_resume_renews_it(sim: Sim) -> None:
    def renew_time() -> str:
        lease = _get(sim.api, "get", "lease", "-n", "kube-node-lease", "sim-node-2") or {}
        return str(lease.get("spec", {}).get("renewTime", ""))

    wait_for(renew_time, what="lease")
    sim.control("/nodes/sim-node-2/stop-heartbeat")
    # A heartbeat already in flight may still land; after that renewTime must stay put for
    # several heartbeat intervals.
    frozen = wait_for(lambda: _unchanged_for(renew_time, 2.0), 10, what="frozen lease")
    sim.control("/nodes/sim-node-2/resume-heartbeat")
    wait_for(lambda: renew_time() != frozen, 10, what="renewal after resume")


def _unchanged_for(read: Callable[[], str], seconds: float) -> str:
    """The value if `read` kept returning it for `seconds`, else "" (so wait_for polls again)."""
    first = read()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if read() != first:
            return ""
        time.sleep(0.1)
    return first


def test_crash_fault_restarts_an_always_restarting_pod(sim: Sim) -> None:
    _create_pod(sim, "crashy")
    wait_for(lambda: (_pod(sim, "crashy") or {}).get("status", {}).get("phase") == "Running", what="running")
    sim.control("/pods/default/crashy/crash")

    def restarted() -> Any:
        statuses = (_pod(sim, "crashy") or {}).get("status", {}).get("containerStatuses") or [{}]
        return statuses[0].get("restartCount") == 1 and statuses[0]

    status = wait_for(restarted, what="restart")
    assert status["lastState"]["terminated"]["exitCode"] == 1
    assert "running" in status["state"]


def test_not_ready_fault_turns_the_node_ready_condition_false(sim: Sim) -> None:
    sim.control("/nodes/sim-node-1/not-ready")
    cond = wait_for(
        lambda: (
            _condition(_get(sim.api, "get", "node", "sim-node-1"), "Ready").get("status") == "False"
            and _condition(_get(sim.api, "get", "node", "sim-node-1"), "Ready")
        ),
        what="NotReady",
    )
    assert cond["reason"] == "KubeletNotReady"
    wait_for(lambda: _taints(sim, "sim-node-1") == [NOT_READY_TAINT], what="not-ready taint")
    sim.control("/nodes/sim-node-1/ready")
    wait_for(
        lambda: _condition(_get(sim.api, "get", "node", "sim-node-1"), "Ready").get("status") == "True",
        what="Ready again",
    )
    wait_for(lambda: _taints(sim, "sim-node-1") == [], what="not-ready taint lifted")


def test_ready_annotation_changed_on_a_running_pod_flips_its_readiness(sim: Sim) -> None:
    _create_pod(sim, "flip")

    def ready(want: str) -> Any:
        pod = _pod(sim, "flip")
        return _condition(pod, "Ready").get("status") == want and pod

    wait_for(lambda: ready("True"), what="ready")
    sim.api.kubectl("annotate", "pod", "flip", "sim.kcm.dev/ready=false")
    pod = wait_for(lambda: ready("False"), what="not ready after the annotation")
    assert _condition(pod, "ContainersReady")["reason"] == "ContainersNotReady"
    status = pod["status"]["containerStatuses"][0]
    assert not status["ready"] and status["restartCount"] == 0 and "running" in status["state"]
    assert pod["status"]["phase"] == "Running"
    sim.api.kubectl("annotate", "--overwrite", "pod", "flip", "sim.kcm.dev/ready=true")
    pod = wait_for(lambda: ready("True"), what="ready again")
    assert pod["status"]["containerStatuses"][0]["ready"]
