"""A Job controller over a fake API server holding one Job and its pods, for the job tests
(tests/unit/controllers/job/): the tracking-crash scenarios and the sync scenarios.

- `JobServer` is the testing kit's fake client holding the Job and its pods; it serves only
  the writes a sync makes (the Job's status patch, a pod's finalizer removal or release), and once
  `writes_left` reaches 0 every write raises `Crash`, as if the process had died there.
- `controller(server, ...)` is a registered controller whose caches hold what the server holds
  now; `refresh` brings the same controller's caches up to the server and moves its clock.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec
from kcm_controllers.job import controller as job_controller
from kcm_controllers.job import gates as job_gates
from kcm_controllers.job import jobview, podview, tracking
from kcm_shared.runtime import cache
from kcm_shared.testing import caches, fakeclient, recorders

NS = "ns"
UID = "job-uid"
JOB = f"/apis/batch/v1/namespaces/{NS}/jobs/job"
PODS = f"/api/v1/namespaces/{NS}/pods"


class Crash(Exception):
    """What every write meets once the process is dead."""


class JobServer(fakeclient.FakeClient):
    def __init__(self, job: dict[str, Any], pods: list[dict[str, Any]]) -> None:
        super().__init__({JOB: job, **{f"{PODS}/{p['metadata']['name']}": p for p in pods}})
        self.writes_left: int | None = None  # None: never crash

    async def handle(self, action: fakeclient.Action) -> dict[str, Any] | None:
        status = action.verb == "patch" and action.path == f"{JOB}/status"
        pod_patch = (
            action.verb == "patch" and action.path.startswith(f"{PODS}/") and action.patch_type == "strategic"
        )
        finalizer = pod_patch and action.body == tracking.remove_finalizer_patch()
        release = pod_patch and "ownerReferences" in (action.body or {}).get("metadata", {})
        assert status or finalizer or release, action
        if self.writes_left is not None:
            if self.writes_left == 0:
                raise Crash("killed")
            self.writes_left -= 1
        return await super().handle(action)

    @property
    def job(self) -> dict[str, Any]:
        return self.objects[JOB]

    @property
    def pods(self) -> dict[str, dict[str, Any]]:
        return {
            path.rsplit("/", 1)[1]: obj for path, obj in self.objects.items() if path.startswith(f"{PODS}/")
        }

    def job_view(self) -> jobview.JobView:
        return msgspec.json.decode(msgspec.json.encode(self.job), type=jobview.JobView)

    def pod_views(self) -> list[podview.JobPodView]:
        return [
            msgspec.json.decode(msgspec.json.encode(p), type=podview.JobPodView) for p in self.pods.values()
        ]


def new_job(completions: int, indexed: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "completions": completions,
        "parallelism": completions,
        "backoffLimit": 6,
        "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": UID}},
        "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": UID}}, "spec": {}},
    }
    if indexed:
        spec["completionMode"] = "Indexed"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "job", "namespace": NS, "uid": UID, "resourceVersion": "1"},
        "spec": spec,
        "status": {"startTime": "2026-01-01T00:00:00Z"},
    }


def finished_pod(i: int, phase: str, index: int | None) -> dict[str, Any]:
    annotations = {"batch.kubernetes.io/job-completion-index": str(index)} if index is not None else {}
    return {
        "metadata": {
            "name": f"p{i}",
            "namespace": NS,
            "uid": f"pod-{i}",
            "resourceVersion": "1",
            "labels": {"batch.kubernetes.io/controller-uid": UID},
            "annotations": annotations,
            "finalizers": [tracking.JOB_TRACKING_FINALIZER],
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "job", "uid": UID, "controller": True}
            ],
        },
        "status": {"phase": phase},
    }


def controller(
    server: JobServer,
    events: recorders.RecordingEventRecorder,
    pod_control: recorders.RecordingPodControl | None = None,
    now: dt.datetime = dt.datetime(2026, 1, 1, 0, 0, 10, tzinfo=dt.UTC),
    *,
    gates: job_gates.Gates = job_gates.DEFAULTS,
) -> job_controller.JobController:
    """A registered controller whose caches hold what `server` holds now, with these feature
    gates (`kcm_controllers.job.gates`)."""
    jc = job_controller.JobController(
        server,
        caches.new(job_controller.JOBS, jobview.JobView),
        caches.new(job_controller.PODS, podview.JobPodView),
        lambda key: None,
        lambda key, delay: None,
        pod_control or recorders.RecordingPodControl(),
        events,
        now=lambda: now,
        gates=gates,
    )
    jc.register()
    refresh(jc, server, now)
    return jc


def refresh(jc: job_controller.JobController, server: JobServer, now: dt.datetime) -> None:
    """The same controller (its memory kept) with caches caught up with `server`, at `now`."""
    _hold(jc.jobs, [server.job_view()])
    _hold(jc.pods, server.pod_views())
    jc.now = lambda: now


def _hold(store: cache.Cache[Any], views: list[Any]) -> None:
    """`store` holding exactly `views`, without telling the handlers."""
    keep = {f"{v.metadata.namespace}/{v.metadata.name}" for v in views}
    for key in set(store.keys()) - keep:
        store.evict(key)
    for view in views:
        store.seed(view)
