"""In-process micro-benchmark of the embedded API server's CPU per write on a Job's pod path.

Drives `kcm_apiserver.operations.Api` directly (no HTTP, no NATS) with the writes one pod of
a Job costs, as bench/job_pods.py's stack sends them: the job controller's pod create (with the
`batch.kubernetes.io/job-tracking` finalizer), the simulator's binding and its status merge
patches (Running, then Succeeded), the job controller's strategic-merge patch removing the
tracking finalizer, and its Job /status merge patch. The HTTP layer and the watch fan-out
(whose lines are already encoded once per event, server.py) are left out. Each operation's
CPU time per call is printed beside a plain GET of
the same pod measured in the same run (the cheapest request, the floor), with the ratio.

Figures are printed, never enforced. Used to find and confirm the API server's hot spots
(run with `--profile` to print cProfile's top functions for the whole pod cycle).
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import pstats
import time
from collections.abc import Callable
from typing import Any

from kcm_apiserver import subresources
from kcm_apiserver.operations import Api, Ctx
from kcm_apiserver.registry import Registry
from kcm_apiserver.store import Store

Obj = dict[str, Any]
NS = "bench"
TRACKING = "batch.kubernetes.io/job-tracking"


def ctx(api: Api, resource: str, group: str = "", version: str = "v1", namespace: str = NS) -> Ctx:
    rt = api.registry.lookup(group, version, resource)
    assert rt is not None
    # Warn: what the server uses for a write that names no fieldValidation, as the controllers' do.
    return Ctx(rt, namespace=namespace, field_validation="Warn")


def job_body() -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "work"},
        "spec": {
            "completions": 100000,
            "parallelism": 200,
            "template": {
                "metadata": {"annotations": {"sim.kcm.dev/exit-code": "0"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox", "command": ["true"]}],
                },
            },
        },
    }


def pod_body(job: Obj) -> Obj:
    """The pod the job controller sends (its template, labels, owner, tracking finalizer)."""
    template = copy.deepcopy(job["spec"]["template"])
    meta = template["metadata"]
    meta["generateName"] = "work-"
    meta["finalizers"] = [TRACKING]
    meta["ownerReferences"] = [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": job["metadata"]["name"],
            "uid": job["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"]}


def running_status(now: str) -> Obj:
    return {
        "phase": "Running",
        "hostIP": "10.0.0.1",
        "podIP": "10.244.0.5",
        "podIPs": [{"ip": "10.244.0.5"}],
        "startTime": now,
        "conditions": [
            {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
            for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
        ],
        "containerStatuses": [
            {
                "name": "c",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "image": "busybox",
                "imageID": "docker.io/library/busybox@sha256:0",
                "containerID": "containerd://0",
                "state": {"running": {"startedAt": now}},
                "lastState": {},
            }
        ],
    }


def succeeded_status(now: str) -> Obj:
    status = running_status(now)
    status["phase"] = "Succeeded"
    for cond in status["conditions"]:
        if cond["type"] in ("Ready", "ContainersReady"):
            cond["status"], cond["reason"] = "False", "PodCompleted"
    status["containerStatuses"][0].update(
        ready=False,
        started=False,
        state={
            "terminated": {
                "exitCode": 0,
                "reason": "Completed",
                "startedAt": now,
                "finishedAt": now,
                "containerID": "containerd://0",
            }
        },
    )
    return status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=1500, help="pods per measured round")
    parser.add_argument("--profile", action="store_true", help="print cProfile's top functions")
    args = parser.parse_args()

    api = Api(Store(), Registry())
    api.create(
        ctx(api, "namespaces", namespace=""),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
    )
    job = api.create(ctx(api, "jobs", "batch"), job_body())
    times: dict[str, float] = {}

    def timed(name: str, fn: Callable[..., Any], *args: Any) -> Any:
        start = time.process_time()
        out = fn(*args)
        times[name] = times.get(name, 0.0) + time.process_time() - start
        return out

    now = api.clock()
    body = pod_body(job)
    running, succeeded = running_status(now), succeeded_status(now)
    finalizer_patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": [TRACKING]}}
    counted = 0

    def cycle(n: int) -> None:
        nonlocal counted, job
        for _ in range(n):
            pod = timed("create pod", api.create, ctx(api, "pods"), copy.deepcopy(body))
            name = pod["metadata"]["name"]
            timed("get pod (floor)", api.get, ctx(api, "pods"), name)
            binding = {"target": {"kind": "Node", "name": "node-1"}}
            timed("bind pod", subresources.bind, api, ctx(api, "pods"), name, binding)
            timed(
                "status patch Running",
                api.patch,
                ctx(api, "pods"),
                name,
                "merge",
                {"status": running},
                "status",
            )
            timed(
                "status patch Succeeded",
                api.patch,
                ctx(api, "pods"),
                name,
                "merge",
                {"status": succeeded},
                "status",
            )
            counted += 1
            status = {
                "metadata": {"resourceVersion": job["metadata"]["resourceVersion"]},
                "status": {
                    "active": 1,
                    "succeeded": counted,
                    "ready": 0,
                    "terminating": 0,
                    "startTime": now,
                    "uncountedTerminatedPods": {"succeeded": [pod["metadata"]["uid"]], "failed": None},
                },
            }
            job, _ = timed(
                "job status patch", api.patch, ctx(api, "jobs", "batch"), "work", "merge", status, "status"
            )
            timed("finalizer patch", api.patch, ctx(api, "pods"), name, "strategic", finalizer_patch)
            api.delete(ctx(api, "pods"), name, {"gracePeriodSeconds": 0})

    cycle(100)  # warm up caches
    times.clear()
    profiler = cProfile.Profile() if args.profile else None
    if profiler:
        profiler.enable()
    cycle(args.pods)
    if profiler:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)
    floor = times["get pod (floor)"] / args.pods * 1e6
    print(f"{'operation':<26}{'CPU us/op':>12}{'x GET':>8}")
    for name, total in times.items():
        per = total / args.pods * 1e6
        print(f"{name:<26}{per:>12.1f}{per / floor:>8.1f}")
    writes = sum(t for n, t in times.items() if n != "get pod (floor)") / args.pods * 1e3
    print(f"{'writes per pod (ms)':<26}{writes:>12.3f}")


if __name__ == "__main__":
    main()
