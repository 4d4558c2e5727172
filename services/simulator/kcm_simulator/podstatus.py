"""Pod statuses a kubelet would report, built from the pod and the simulator's annotations.

Pure builders called by `kubelet.py`; the annotations are documented in docs/simulator.md.
"""

from __future__ import annotations

import copy
import datetime as dt
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]

READY_ANNOTATION = "sim.kcm.dev/ready"
EXIT_CODE_ANNOTATION = "sim.kcm.dev/exit-code"
RUN_SECONDS_ANNOTATION = "sim.kcm.dev/run-seconds"
TERMINATE_SECONDS_ANNOTATION = "sim.kcm.dev/terminate-seconds"
# What a runtime reports for a container it had to SIGKILL when the grace period ran out.
KILLED_EXIT_CODE = 137


@dataclass(frozen=True)
class Behaviour:
    """What the annotations ask of the pod's containers."""

    ready: bool = True
    exit_code: int | None = None
    run_seconds: float = 0.0


def behaviour(pod: Obj) -> Behaviour:
    annotations = pod.get("metadata", {}).get("annotations") or {}
    ready = str(annotations.get(READY_ANNOTATION, "true")).lower() != "false"
    exit_code: int | None = None
    run_seconds = 0.0
    try:
        if EXIT_CODE_ANNOTATION in annotations:
            exit_code = int(annotations[EXIT_CODE_ANNOTATION])
        run_seconds = max(0.0, float(annotations.get(RUN_SECONDS_ANNOTATION, 0)))
    except ValueError:
        exit_code = None
    return Behaviour(ready, exit_code, run_seconds)


def deletion_requested(pod: Obj, now: float) -> float:
    """When the graceful deletion was asked for (epoch seconds): deletionTimestamp less the grace.

    The API server sets deletionTimestamp to the request time plus the grace period, so this
    holds across a simulator restart. `now` is the answer when the timestamp cannot be read.
    """
    meta = pod.get("metadata", {})
    try:
        deadline = dt.datetime.fromisoformat(str(meta.get("deletionTimestamp"))).timestamp()
    except ValueError:
        return now
    return deadline - float(meta.get("deletionGracePeriodSeconds") or 0)


def stop_after(pod: Obj) -> tuple[float, bool]:
    """Seconds from the deletion request until the containers are gone, and whether they exit on
    their own (terminate-seconds shorter than the grace period) rather than being killed at its end.
    """
    meta = pod.get("metadata", {})
    grace = max(0.0, float(meta.get("deletionGracePeriodSeconds") or 0))
    try:
        wanted = float((meta.get("annotations") or {})[TERMINATE_SECONDS_ANNOTATION])
    except (KeyError, ValueError):
        return grace, False
    if 0 <= wanted < grace:
        return wanted, True
    return grace, False


def restarts_after(restart_policy: str, exit_code: int) -> bool:
    """Whether the kubelet restarts a container that exited with this code."""
    if restart_policy == "Never":
        return False
    if restart_policy == "OnFailure":
        return exit_code != 0
    return True


def _condition(kind: str, ok: bool, now: str, reason: str = "") -> Obj:
    cond: Obj = {"type": kind, "status": "True" if ok else "False", "lastProbeTime": None}
    cond["lastTransitionTime"] = now
    if reason:
        cond["reason"] = reason
    return cond


def _container_id(pod: Obj, container: str) -> str:
    return f"containerd://sim-{pod.get('metadata', {}).get('uid', '')}-{container}"


def _image_id(image: str) -> str:
    return f"docker.io/library/{image}@sha256:{'0' * 64}"


def _terminated(pod: Obj, exit_code: int, started: str, finished: str, name: str) -> Obj:
    return {
        "exitCode": exit_code,
        "reason": "Completed" if exit_code == 0 else "Error",
        "startedAt": started,
        "finishedAt": finished,
        "containerID": _container_id(pod, name),
    }


def running(
    pod: Obj,
    *,
    now: str,
    start_time: str,
    host_ip: str,
    pod_ip: str,
    ready: bool,
    restarts: int = 0,
    last_exit: tuple[int, str, str] | None = None,
) -> Obj:
    """A Running status; `last_exit` is (code, startedAt, finishedAt) of the previous run if restarted."""
    spec = pod.get("spec", {})
    statuses = []
    for container in spec.get("containers") or []:
        name = container.get("name", "")
        status: Obj = {
            "name": name,
            "ready": ready,
            "started": True,
            "restartCount": restarts,
            "image": container.get("image", ""),
            "imageID": _image_id(container.get("image", "")),
            "containerID": _container_id(pod, name),
            "state": {"running": {"startedAt": now}},
            "lastState": {},
        }
        if last_exit is not None:
            status["lastState"] = {
                "terminated": _terminated(pod, last_exit[0], last_exit[1], last_exit[2], name)
            }
        statuses.append(status)
    not_ready = "" if ready else "ContainersNotReady"
    return {
        "phase": "Running",
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": start_time,
        "qosClass": pod.get("status", {}).get("qosClass", "BestEffort"),
        "conditions": [
            _condition("PodReadyToStartContainers", True, now),
            _condition("Initialized", True, now),
            _condition("Ready", ready, now, not_ready),
            _condition("ContainersReady", ready, now, not_ready),
            _condition("PodScheduled", True, now),
        ],
        "initContainerStatuses": _init_statuses(pod, start_time),
        "containerStatuses": statuses,
    }


def with_readiness(status: Obj, ready: bool, now: str) -> Obj:
    """A Running status whose containers became ready or not ready, as a readiness probe's
    verdict changes it: the containers' `ready`, and Ready and ContainersReady when they flip."""
    out = copy.deepcopy(status)
    for container in out.get("containerStatuses") or []:
        container["ready"] = ready
    conditions = []
    for cond in out.get("conditions") or []:
        if cond.get("type") in ("Ready", "ContainersReady") and (cond.get("status") == "True") != ready:
            cond = _condition(cond["type"], ready, now, "" if ready else "ContainersNotReady")
        conditions.append(cond)
    out["conditions"] = conditions
    return out


def _init_statuses(pod: Obj, start_time: str) -> list[Obj]:
    out = []
    for container in pod.get("spec", {}).get("initContainers") or []:
        name = container.get("name", "")
        out.append(
            {
                "name": name,
                "ready": True,
                "started": False,
                "restartCount": 0,
                "image": container.get("image", ""),
                "imageID": _image_id(container.get("image", "")),
                "containerID": _container_id(pod, name),
                "state": {"terminated": _terminated(pod, 0, start_time, start_time, name)},
            }
        )
    return out


def finished(
    pod: Obj,
    *,
    now: str,
    start_time: str,
    started: str,
    host_ip: str,
    pod_ip: str,
    exit_code: int,
    restarts: int,
) -> Obj:
    """The terminal status once every container exited with `exit_code` and none restarts."""
    spec = pod.get("spec", {})
    statuses = [
        {
            "name": c.get("name", ""),
            "ready": False,
            "started": False,
            "restartCount": restarts,
            "image": c.get("image", ""),
            "imageID": _image_id(c.get("image", "")),
            "containerID": _container_id(pod, c.get("name", "")),
            "state": {"terminated": _terminated(pod, exit_code, started, now, c.get("name", ""))},
            "lastState": {},
        }
        for c in spec.get("containers") or []
    ]
    return {
        "phase": "Succeeded" if exit_code == 0 else "Failed",
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": start_time,
        "conditions": [
            _condition("PodReadyToStartContainers", False, now),
            _condition("Initialized", True, now, "PodCompleted"),
            _condition("Ready", False, now, "PodCompleted"),
            _condition("ContainersReady", False, now, "PodCompleted"),
            _condition("PodScheduled", True, now),
        ],
        "initContainerStatuses": _init_statuses(pod, start_time),
        "containerStatuses": statuses,
    }


def stopped(pod: Obj, *, now: str, exit_code: int) -> Obj:
    """The terminal status of a Running pod whose containers were stopped for its deletion."""
    status = pod.get("status", {})
    start_time = status.get("startTime") or now
    container = (status.get("containerStatuses") or [{}])[0]
    return finished(
        pod,
        now=now,
        start_time=start_time,
        started=container.get("state", {}).get("running", {}).get("startedAt") or start_time,
        host_ip=status.get("hostIP", ""),
        pod_ip=status.get("podIP", ""),
        exit_code=exit_code,
        restarts=int(container.get("restartCount") or 0),
    )


def unschedulable(message: str, now: str) -> Obj:
    return {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
                "lastProbeTime": None,
                "lastTransitionTime": now,
            }
        ],
    }
