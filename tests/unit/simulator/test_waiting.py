"""The Pending statuses the simulated kubelet reports before its containers run (ContainerCreating,
image errors, an init container's) and the references its Events name (kcm_simulator.podstatus)."""

from __future__ import annotations

from typing import Any

from kcm_simulator import podstatus

Obj = dict[str, Any]
NOW = "2026-01-01T00:00:00Z"


def pod(*, inits: tuple[str, ...] = ()) -> Obj:
    spec: Obj = {"containers": [{"name": "web", "image": "nginx:404"}, {"name": "log", "image": "busybox"}]}
    if inits:
        spec["initContainers"] = [{"name": n, "image": "busybox"} for n in inits]
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "7"}, "spec": spec}


def states(statuses: list[Obj]) -> dict[str, Obj]:
    return {s["name"]: s["state"] for s in statuses}


def test_container_creating_before_the_sandbox_has_an_address() -> None:
    status = podstatus.waiting(pod(), now=NOW, host_ip="10.0.0.1", pod_ips=[], start_time=NOW)
    assert status["phase"] == "Pending" and "podIP" not in status
    assert states(status["containerStatuses"]) == {
        "web": {"waiting": {"reason": "ContainerCreating"}},
        "log": {"waiting": {"reason": "ContainerCreating"}},
    }
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["PodReadyToStartContainers"]["status"] == "False"
    assert conditions["Initialized"]["status"] == "True"
    assert conditions["Ready"]["reason"] == "ContainersNotReady"
    assert conditions["Ready"]["message"] == "containers with unready status: [web log]"
    assert all(not s["ready"] and s["imageID"] == "" for s in status["containerStatuses"])


def test_an_image_error_names_its_container_the_others_keep_creating() -> None:
    status = podstatus.waiting(
        pod(),
        now=NOW,
        host_ip="10.0.0.1",
        pod_ips=["10.244.0.5"],
        start_time=NOW,
        reason="ErrImagePull",
        message="not found",
        container="web",
    )
    assert status["podIP"] == "10.244.0.5" and status["podIPs"] == [{"ip": "10.244.0.5"}]
    assert states(status["containerStatuses"]) == {
        "web": {"waiting": {"reason": "ErrImagePull", "message": "not found"}},
        "log": {"waiting": {"reason": "ContainerCreating"}},
    }
    assert {c["type"]: c["status"] for c in status["conditions"]}["PodReadyToStartContainers"] == "True"


def test_a_failing_init_container_holds_the_rest_at_pod_initializing() -> None:
    status = podstatus.waiting(
        pod(inits=("setup", "migrate")),
        now=NOW,
        host_ip="10.0.0.1",
        pod_ips=["10.244.0.5"],
        start_time=NOW,
        reason="ImagePullBackOff",
        message='Back-off pulling image "busybox"',
        container="migrate",
    )
    inits = states(status["initContainerStatuses"])
    assert inits["setup"]["terminated"]["reason"] == "Completed"
    assert inits["migrate"] == {
        "waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "busybox"'}
    }
    assert {s["state"]["waiting"]["reason"] for s in status["containerStatuses"]} == {"PodInitializing"}
    initialized = next(c for c in status["conditions"] if c["type"] == "Initialized")
    assert initialized["status"] == "False" and initialized["reason"] == "ContainersNotInitialized"
    assert initialized["message"] == "containers with incomplete status: [migrate]"


def test_event_references_name_the_pod_and_container() -> None:
    assert podstatus.reference(pod(), "spec.containers{web}") == {
        "kind": "Pod",
        "apiVersion": "v1",
        "namespace": "ns",
        "name": "p",
        "uid": "u1",
        "resourceVersion": "7",
        "fieldPath": "spec.containers{web}",
    }
    assert "fieldPath" not in podstatus.reference(pod())


def test_a_failing_container_comes_after_every_init_container_ran() -> None:
    status = podstatus.waiting(
        pod(inits=("setup",)),
        now=NOW,
        host_ip="10.0.0.1",
        pod_ips=["10.244.0.5"],
        start_time=NOW,
        reason="ErrImagePull",
        message="not found",
        container="web",
    )
    assert states(status["initContainerStatuses"])["setup"]["terminated"]["reason"] == "Completed"
    assert states(status["containerStatuses"])["log"] == {"waiting": {"reason": "ContainerCreating"}}
    assert {c["type"]: c["status"] for c in status["conditions"]}["Initialized"] == "True"


def test_container_creating_with_init_containers_shows_them_pending() -> None:
    status = podstatus.waiting(pod(inits=("setup",)), now=NOW, host_ip="10.0.0.1", pod_ips=[], start_time=NOW)
    assert states(status["initContainerStatuses"]) == {"setup": {"waiting": {"reason": "PodInitializing"}}}
    assert {s["state"]["waiting"]["reason"] for s in status["containerStatuses"]} == {"PodInitializing"}


def test_containers_waiting_to_restart_keep_the_run_that_ended_as_last_state() -> None:
    last = (1, "2026-01-01T00:00:00Z", "2026-01-01T00:00:05Z")
    message = "back-off 10s restarting failed container=web pod=p_ns(u1)"
    status = podstatus.restarting(
        pod(inits=("setup",)),
        now=NOW,
        start_time=NOW,
        host_ip="10.0.0.1",
        pod_ips=["10.244.0.5"],
        restarts=1,
        last_exit=last,
        waits={"web": ("CrashLoopBackOff", message)},
    )
    assert status["phase"] == "Running" and status["podIP"] == "10.244.0.5"
    assert states(status["containerStatuses"]) == {
        "web": {"waiting": {"reason": "CrashLoopBackOff", "message": message}},
        "log": {"waiting": {"reason": "ContainerCreating"}},
    }
    web = status["containerStatuses"][0]
    assert (web["restartCount"], web["ready"], web["started"]) == (1, False, False)
    terminated = web["lastState"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"], terminated["finishedAt"]) == (1, "Error", last[2])
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Ready"]["status"] == "False" and conditions["Ready"]["reason"] == "ContainersNotReady"
    assert conditions["ContainersReady"]["message"] == "containers with unready status: [web log]"
    # The init containers ran once and are not run again.
    assert "terminated" in status["initContainerStatuses"][0]["state"]
