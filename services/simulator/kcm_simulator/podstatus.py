"""Pod statuses a kubelet would report, built from the pod and the simulator's annotations.

Pure builders called by `kubelet.py`; the annotations are documented in docs/simulator.md.
"""

from __future__ import annotations

import copy
import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]

READY_ANNOTATION = "sim.kcm.dev/ready"
EXIT_CODE_ANNOTATION = "sim.kcm.dev/exit-code"
EXIT_CODE_BY_INDEX_ANNOTATION = "sim.kcm.dev/exit-code-by-index"
FAIL_ATTEMPTS_ANNOTATION = "sim.kcm.dev/fail-attempts"
FAIL_CONDITION_ANNOTATION = "sim.kcm.dev/fail-condition"
RUN_SECONDS_ANNOTATION = "sim.kcm.dev/run-seconds"
TERMINATE_SECONDS_ANNOTATION = "sim.kcm.dev/terminate-seconds"
IGNORE_SIGTERM_ANNOTATION = "sim.kcm.dev/ignore-sigterm"
# How long a container takes to exit after SIGTERM by default: a real nginx or fluentd is gone
# within a second; a pod that wants the whole grace period says so (IGNORE_SIGTERM_ANNOTATION).
STOP_SECONDS = 0.5
# What the Job controller writes on the pods it creates (upstream batch/v1 constants).
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
INDEX_FAILURE_COUNT_ANNOTATION = "batch.kubernetes.io/job-index-failure-count"
INDEX_IGNORED_FAILURE_COUNT_ANNOTATION = "batch.kubernetes.io/job-index-ignored-failure-count"
# What a runtime reports for a container it had to SIGKILL when the grace period ran out.
KILLED_EXIT_CODE = 137
DEFAULT_GRACE_SECONDS = 30.0
# The reason a kubelet gives the DisruptionTarget condition of a pod it evicted.
DISRUPTION_TARGET = "DisruptionTarget"
EVICTED_BY_KUBELET = "TerminationByKubelet"
# The pod conditions a kubelet owns (upstream kubetypes.PodConditionByKubelet).
_KUBELET_CONDITIONS = frozenset(
    ("PodScheduled", "Ready", "Initialized", "ContainersReady", "PodReadyToStartContainers")
)
# How long the command of a batch pod without `sim.kcm.dev/run-seconds` runs.
COMMAND_RUN_SECONDS = 1.0
_DECIMAL = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True)
class Behaviour:
    """What the annotations ask of the pod's containers."""

    ready: bool = True
    exit_code: int | None = None
    run_seconds: float = 0.0
    # With fail_attempts N, the first N attempts exit with exit_code (1 if unset) and the later
    # ones with 0, so that retries succeed; a pod (or index) whose code is 0 always succeeds.
    fail_attempts: int | None = None
    # (type, reason) of a condition a failed pod is reported with, e.g. DisruptionTarget.
    fail_condition: tuple[str, str] | None = None

    def exit_code_for(self, attempt: int) -> int | None:
        """The code attempt number `attempt` (0 for the first) exits with; None runs until a crash."""
        if self.fail_attempts is None:
            return self.exit_code
        if attempt >= self.fail_attempts:
            return 0
        return 1 if self.exit_code is None else self.exit_code


def _int(text: object) -> int | None:
    value = str(text).strip()
    return int(value) if _DECIMAL.fullmatch(value) else None


def runs_a_command(pod: Obj) -> bool:
    """A pod that is not restarted when it exits (restartPolicy Never or OnFailure) and whose
    containers name a command or args."""
    spec = pod.get("spec") or {}
    if spec.get("restartPolicy", "Always") == "Always":
        return False
    return any(c.get("command") or c.get("args") for c in spec.get("containers") or [])


def completion_index(pod: Obj) -> int | None:
    """The pod's Job completion index, if it has a valid one."""
    annotations = pod.get("metadata", {}).get("annotations") or {}
    index = _int(annotations.get(COMPLETION_INDEX_ANNOTATION, ""))
    return index if index is not None and index >= 0 else None


def exit_code_by_index(text: str, index: int) -> int | None:
    """The code `"0=1,2-4=3"` gives `index`, if any; malformed items are skipped."""
    for item in text.split(","):
        indexes, sep, code_text = item.partition("=")
        code = _int(code_text)
        if not sep or code is None:
            continue
        first_text, dash, last_text = indexes.strip().partition("-")
        first, last = _int(first_text), _int(last_text) if dash else _int(first_text)
        if first is not None and last is not None and first <= index <= last:
            return code
    return None


def behaviour(pod: Obj) -> Behaviour:
    annotations = pod.get("metadata", {}).get("annotations") or {}
    ready = str(annotations.get(READY_ANNOTATION, "true")).lower() != "false"
    exit_code = _int(annotations[EXIT_CODE_ANNOTATION]) if EXIT_CODE_ANNOTATION in annotations else None
    by_index = annotations.get(EXIT_CODE_BY_INDEX_ANNOTATION)
    index = completion_index(pod)
    if by_index is not None and index is not None:
        # An index the map does not name runs as the pod-wide code says (without one, until stopped).
        mapped = exit_code_by_index(str(by_index), index)
        exit_code = mapped if mapped is not None else exit_code
    default_run = 0.0
    if exit_code is None and runs_a_command(pod):
        # A batch pod told what to run (`kubectl create job x --image=busybox -- date`) finishes
        # it, as a real container would; without a command it is a server and runs until stopped.
        exit_code, default_run = 0, COMMAND_RUN_SECONDS
    try:
        run_seconds = max(0.0, float(annotations.get(RUN_SECONDS_ANNOTATION, default_run)))
    except ValueError:
        run_seconds = default_run
    fail_attempts = _int(annotations.get(FAIL_ATTEMPTS_ANNOTATION, ""))
    if fail_attempts is not None and fail_attempts < 0:
        fail_attempts = None
    fail_condition = None
    condition_text = str(annotations.get(FAIL_CONDITION_ANNOTATION, "")).strip()
    if condition_text:
        kind, _, reason = condition_text.partition(":")
        default_reason = EVICTED_BY_KUBELET if kind == DISRUPTION_TARGET else ""
        fail_condition = (kind.strip(), reason.strip() or default_reason)
    return Behaviour(ready, exit_code, run_seconds, fail_attempts, fail_condition)


def attempts_before(pod: Obj) -> int | None:
    """How many earlier attempts of this pod's Job index failed, from the counts the Job
    controller writes on pods of Jobs with backoffLimitPerIndex; None when it wrote none."""
    annotations = pod.get("metadata", {}).get("annotations") or {}
    if INDEX_FAILURE_COUNT_ANNOTATION not in annotations:
        return None
    counted = _int(annotations[INDEX_FAILURE_COUNT_ANNOTATION]) or 0
    ignored = _int(annotations.get(INDEX_IGNORED_FAILURE_COUNT_ANNOTATION, "")) or 0
    return max(0, counted) + max(0, ignored)


def attempt_key(pod: Obj) -> tuple[str, int | None]:
    """What the pods that are attempts at the same work share: their controller's uid (the
    pod's own without one) and completion index."""
    meta = pod.get("metadata", {})
    owner = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
    uid = str(owner.get("uid", "")) if owner is not None else f"pod:{meta.get('uid', '')}"
    return uid, completion_index(pod)


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


def stop_after(
    pod: Obj, prompt: float | None = STOP_SECONDS, grace: float | None = None
) -> tuple[float, bool]:
    """Seconds from the deletion request until the containers are gone, and whether they exit on
    their own (code 0) rather than being killed when the grace period ends (code 137).

    `prompt` is how long a container takes to exit after SIGTERM (None: containers ignore it, as
    `kcm sim --ignore-sigterm` asks); `sim.kcm.dev/terminate-seconds` sets it for one pod, and
    `sim.kcm.dev/ignore-sigterm: "true"` keeps that pod running for the whole grace period: the
    deletion's, or `grace` for a container killed otherwise (`kill_grace`).
    """
    meta = pod.get("metadata", {})
    annotations = meta.get("annotations") or {}
    if grace is None:
        grace = float(meta.get("deletionGracePeriodSeconds") or 0)
    grace = max(0.0, grace)
    try:
        wanted: float | None = float(annotations[TERMINATE_SECONDS_ANNOTATION])
    except (KeyError, ValueError):
        ignores = str(annotations.get(IGNORE_SIGTERM_ANNOTATION, "")).lower() == "true"
        wanted = None if ignores else prompt
    if wanted is not None and 0 <= wanted < grace:
        return wanted, True
    return grace, False


def kill_grace(pod: Obj) -> float:
    """The grace period of a container the kubelet kills while the pod stays (a changed
    definition): the pod's terminationGracePeriodSeconds, 30 s by the API's default."""
    value = pod.get("spec", {}).get("terminationGracePeriodSeconds")
    return float(value) if isinstance(value, int | float) else DEFAULT_GRACE_SECONDS


def restarts_after(restart_policy: str, exit_code: int) -> bool:
    """Whether the kubelet restarts a container that exited with this code."""
    if restart_policy == "Never":
        return False
    if restart_policy == "OnFailure":
        return exit_code != 0
    return True


def reference(pod: Obj, field_path: str = "") -> Obj:
    """The involvedObject of an Event about the pod (or, with `field_path`, one of its
    containers); built here because pods from a list carry no kind or apiVersion."""
    meta = pod.get("metadata", {})
    ref = {
        "kind": "Pod",
        "apiVersion": "v1",
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "resourceVersion": meta.get("resourceVersion", ""),
        "fieldPath": field_path,
    }
    return {k: v for k, v in ref.items() if v}


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
    pod_ips: list[str] | None = None,
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
        "podIPs": [{"ip": ip} for ip in pod_ips or [pod_ip]],
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


def restarting(
    pod: Obj,
    *,
    now: str,
    start_time: str,
    host_ip: str,
    pod_ips: list[str],
    restarts: int,
    last_exit: tuple[int, str, str],
    waits: dict[str, tuple[str, str]],
) -> Obj:
    """A Running pod whose containers exited and wait to start again, as a kubelet reports it:
    each container waiting with the (reason, message) `waits` gives it (CrashLoopBackOff while
    the restart backs off, ErrImagePull or ImagePullBackOff for a new image), ContainerCreating
    without one, its `restartCount` and `lastState.terminated` those of the run that ended;
    Ready and ContainersReady False."""
    out = running(
        pod,
        now=now,
        start_time=start_time,
        host_ip=host_ip,
        pod_ip=pod_ips[0],
        pod_ips=pod_ips,
        ready=False,
        restarts=restarts,
        last_exit=last_exit,
    )
    names = []
    for status in out["containerStatuses"]:
        names.append(status["name"])
        reason, message = waits.get(status["name"], ("ContainerCreating", ""))
        status["started"] = False
        status["state"] = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
    for cond in out["conditions"]:
        if cond["type"] in ("Ready", "ContainersReady"):
            cond["message"] = f"containers with unready status: [{' '.join(names)}]"
    return out


@dataclass(frozen=True)
class Resumed:
    """A run a restarted kubelet finds under way: when its containers started, how often they
    restarted, and the status it already reported."""

    started: str
    restarts: int
    status: Obj


def resumed(pod: Obj, ready: bool) -> Resumed | None:
    """The run the pod's status already reports, when every container is running with the
    readiness `ready` asks for: a restarted kubelet keeps such containers and rewrites nothing
    (a fresh status would move every start and transition time, and with them Endpoints'
    trigger times). None when the status says anything else, so the run starts anew."""
    status = pod.get("status") or {}
    names = [c.get("name", "") for c in pod.get("spec", {}).get("containers") or []]
    by_name = {c.get("name"): c for c in status.get("containerStatuses") or []}
    if status.get("phase") != "Running" or not status.get("podIP") or not names:
        return None
    if any(name not in by_name or "running" not in (by_name[name].get("state") or {}) for name in names):
        return None
    if any(bool(by_name[name].get("ready")) != ready for name in names):
        return None
    first = by_name[names[0]]
    started = first["state"]["running"].get("startedAt") or status.get("startTime") or ""
    return Resumed(started, int(first.get("restartCount") or 0), status)


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
    condition: tuple[str, str] | None = None,
    pod_ips: list[str] | None = None,
) -> Obj:
    """The terminal status once every container exited with `exit_code` and none restarts;
    a failed pod also gets `condition` (type, reason), True, when one is given."""
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
    conditions = [
        _condition("PodReadyToStartContainers", False, now),
        _condition("Initialized", True, now, "PodCompleted"),
        _condition("Ready", False, now, "PodCompleted"),
        _condition("ContainersReady", False, now, "PodCompleted"),
        _condition("PodScheduled", True, now),
    ]
    if condition is not None and exit_code != 0:
        extra = _condition(condition[0], True, now, condition[1])
        extra["message"] = f"Simulated by the {FAIL_CONDITION_ANNOTATION} annotation"
        conditions.insert(0, extra)
    return {
        "phase": "Succeeded" if exit_code == 0 else "Failed",
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": ip} for ip in pod_ips or [pod_ip]],
        "startTime": start_time,
        "conditions": conditions,
        "initContainerStatuses": _init_statuses(pod, start_time),
        "containerStatuses": statuses,
    }


def stopped(pod: Obj, *, now: str, exit_code: int) -> Obj:
    """The terminal status of a Running pod whose containers were stopped for its deletion."""
    status = pod.get("status", {})
    start_time = status.get("startTime") or now
    container = (status.get("containerStatuses") or [{}])[0]
    out = finished(
        pod,
        now=now,
        start_time=start_time,
        started=container.get("state", {}).get("running", {}).get("startedAt") or start_time,
        host_ip=status.get("hostIP", ""),
        pod_ip=status.get("podIP", ""),
        pod_ips=[ip["ip"] for ip in status.get("podIPs") or [] if ip.get("ip")],
        exit_code=exit_code,
        restarts=int(container.get("restartCount") or 0),
    )
    # A kubelet's status merge keeps the conditions others own (upstream mergePodStatus), e.g.
    # the DisruptionTarget an eviction set, which the Job controller's podFailurePolicy reads.
    theirs = [c for c in status.get("conditions") or [] if c.get("type") not in _KUBELET_CONDITIONS]
    out["conditions"] = theirs + out["conditions"]
    return out


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


def waiting(
    pod: Obj,
    *,
    now: str,
    host_ip: str,
    pod_ips: list[str],
    start_time: str,
    reason: str = "ContainerCreating",
    message: str = "",
    container: str = "",
) -> Obj:
    """A Pending status while the containers are not started yet, as a kubelet reports it:
    every container waiting with `reason` (ContainerCreating while the sandbox and images are
    prepared), or, with `container` named, that one with `reason` and `message` (ErrImagePull,
    ImagePullBackOff, InvalidImageName) and the others ContainerCreating. An init container
    that is still to run makes the regular containers wait with PodInitializing. Before the
    sandbox has an address (`pod_ips` empty) PodReadyToStartContainers is False."""
    spec = pod.get("spec", {})
    inits = [c.get("name", "") for c in spec.get("initContainers") or []]
    names = [c.get("name", "") for c in spec.get("containers") or []]
    failing_init = container in inits
    # Init containers before the failing one ran (all of them when a regular container fails);
    # while the pod is still being created, none ran yet.
    if failing_init:
        done_inits = set(inits[: inits.index(container)])
    else:
        done_inits = set(inits) if container else set()

    def entry(c: Obj, state: Obj) -> Obj:
        return {
            "name": c.get("name", ""),
            "ready": False,
            "started": False,
            "restartCount": 0,
            "image": c.get("image", ""),
            "imageID": "",
            "state": state,
            "lastState": {},
        }

    def state_of(name: str, default: str) -> Obj:
        if name == container:
            return {"waiting": {"reason": reason, **({"message": message} if message else {})}}
        return {"waiting": {"reason": default}}

    init_statuses = []
    for c in spec.get("initContainers") or []:
        name = c.get("name", "")
        if name in done_inits:
            done = _terminated(pod, 0, start_time, start_time, name)
            init_statuses.append(
                {
                    **entry(c, {"terminated": done}),
                    "ready": True,
                    "imageID": _image_id(c.get("image", "")),
                    "containerID": _container_id(pod, name),
                }
            )
        else:
            init_statuses.append(entry(c, state_of(name, "PodInitializing")))
    initializing = bool(inits) and (failing_init or not container)
    statuses = [
        entry(c, state_of(c.get("name", ""), "PodInitializing" if initializing else "ContainerCreating"))
        for c in spec.get("containers") or []
    ]
    unready = f"containers with unready status: [{' '.join(names)}]"
    conditions = [
        _condition("PodReadyToStartContainers", bool(pod_ips), now),
        _condition("Initialized", not initializing, now, "ContainersNotInitialized" if initializing else ""),
        _condition("Ready", False, now, "ContainersNotReady"),
        _condition("ContainersReady", False, now, "ContainersNotReady"),
        _condition("PodScheduled", True, now),
    ]
    for cond in conditions[2:4]:
        cond["message"] = unready
    if initializing:
        pending = [n for n in inits if n not in done_inits]
        conditions[1]["message"] = f"containers with incomplete status: [{' '.join(pending)}]"
    out: Obj = {
        "phase": "Pending",
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": start_time,
        "qosClass": pod.get("status", {}).get("qosClass", "BestEffort"),
        "conditions": conditions,
        "containerStatuses": statuses,
    }
    if init_statuses:
        out["initContainerStatuses"] = init_statuses
    if pod_ips:
        out["podIP"] = pod_ips[0]
        out["podIPs"] = [{"ip": ip} for ip in pod_ips]
    return out
