"""The job controller's pod tracking survives a crash at every write (the kill -9 guarantee).

A fake API server holds one Job and its finished pods, each with the tracking finalizer. A
controller syncs until its n-th write, after which every write fails as if the process had
been killed there; a fresh controller (no expectations, no memory) then syncs the state the
server was left in until nothing changes. For every n the Job ends with each pod counted
exactly once, no pod left with the finalizer, and the Complete condition. The e2e test
(tests/e2e/test_job.py) kills the real process once, where the kill happens to land; this
tries every point.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, cast

import msgspec
import pytest
from kcm_controllers.job import controller as job_controller
from kcm_controllers.job import jobview, podview, tracking
from kcm_shared.apimachinery import selectors
from kcm_shared.client import kubeclient
from kcm_shared.runtime import cache
from kcm_shared.testing import recorders

NS = "ns"
UID = "job-uid"


class Crash(Exception):
    """What every write meets once the process is dead."""


class FakeServer:
    """The Job's status and its pods' finalizers, written through the calls the sync makes."""

    def __init__(self, job: dict[str, Any], pods: list[dict[str, Any]]) -> None:
        self.job = job
        self.pods = {p["metadata"]["name"]: p for p in pods}
        self.rv = 1
        self.writes_left: int | None = None  # None: never crash

    def _write(self) -> None:
        if self.writes_left is not None:
            if self.writes_left == 0:
                raise Crash("killed")
            self.writes_left -= 1

    async def request_bytes(self, method: str, path: str, **kw: Any) -> bytes:
        assert method == "PATCH" and path.endswith("/status"), (method, path)
        self._write()
        body = kw["body"]
        if body["metadata"]["resourceVersion"] != self.job["metadata"]["resourceVersion"]:
            raise kubeclient.ApiError(409, "Conflict", "the object has been modified")
        status = {k: v for k, v in body["status"].items() if v is not None}
        status["uncountedTerminatedPods"] = {
            k: v for k, v in body["status"]["uncountedTerminatedPods"].items() if v is not None
        }
        self.rv += 1
        self.job = {
            **self.job,
            "status": status,
            "metadata": {**self.job["metadata"], "resourceVersion": str(self.rv)},
        }
        return json.dumps(self.job).encode()

    async def patch(self, path: str, body: Any, patch_type: str) -> dict[str, Any]:
        self._write()
        name = path.rsplit("/", 1)[1]
        assert body == tracking.remove_finalizer_patch(), body
        meta = self.pods[name]["metadata"]
        meta["finalizers"] = [f for f in meta.get("finalizers", []) if f != tracking.JOB_TRACKING_FINALIZER]
        return self.pods[name]

    def job_view(self) -> jobview.JobView:
        return msgspec.json.decode(json.dumps(self.job), type=jobview.JobView)

    def pod_views(self) -> list[podview.JobPodView]:
        return [msgspec.json.decode(json.dumps(p), type=podview.JobPodView) for p in self.pods.values()]


class FakeCache:
    """What the controller reads of a cache, over a fixed list."""

    # Shared by every instance: `refresh` swaps the caches of a registered controller.
    indexers: ClassVar[dict[str, Callable[[Any], list[str]]]] = {
        cache.OWNER_UID_INDEX: lambda o: [r.uid for r in o.metadata.owner_references]
    }

    def __init__(self, objs: list[Any]) -> None:
        self.objs = objs

    def add_handler(self, **_: Any) -> None:
        pass

    def add_index(self, name: str, fn: Callable[[Any], list[str]]) -> None:
        self.indexers[name] = fn

    def by_index(self, index: str, value: str) -> list[Any]:
        return [o for o in self.objs if value in self.indexers[index](o)]

    def list(self, namespace: str = "", sel: selectors.LabelSelector | None = None) -> list[Any]:
        return [o for o in self.objs if sel is None or sel.matches(o.metadata.labels)]

    def get(self, namespace: str, name: str) -> Any:
        return next((o for o in self.objs if o.metadata.name == name), None)

    def get_key(self, key: str) -> Any:
        return self.get(NS, key.split("/", 1)[1])


class NoEvents:
    def __init__(self) -> None:
        self.reasons: list[str] = []

    def event(self, obj: Any, type_: str, reason: str, message: str) -> None:
        self.reasons.append(reason)


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
    server: FakeServer,
    events: NoEvents,
    pod_control: recorders.RecordingPodControl | None = None,
    now: dt.datetime = dt.datetime(2026, 1, 1, 0, 0, 10, tzinfo=dt.UTC),
) -> job_controller.JobController:
    """A controller whose caches hold what `server` holds now."""
    jc = job_controller.JobController(
        cast(Any, server),
        cast(Any, FakeCache([server.job_view()])),
        cast(Any, FakeCache(server.pod_views())),
        lambda key: None,
        lambda key, delay: None,
        pod_control or recorders.RecordingPodControl(),
        cast(Any, events),
        now=lambda: now,
    )
    jc.register()
    return jc


def refresh(jc: job_controller.JobController, server: FakeServer, now: dt.datetime) -> None:
    """The same controller (its memory kept) with caches caught up with `server`, at `now`."""
    jc.jobs = cast(Any, FakeCache([server.job_view()]))
    jc.pods = cast(Any, FakeCache(server.pod_views()))
    jc.now = lambda: now


def run_to_rest(server: FakeServer, events: NoEvents) -> None:
    """Sync with fresh controllers (a restart each time) until a sync writes nothing."""
    for _ in range(10):
        before = (json.dumps(server.job, sort_keys=True), json.dumps(server.pods, sort_keys=True))
        asyncio.run(controller(server, events).sync(f"{NS}/job"))
        if (json.dumps(server.job, sort_keys=True), json.dumps(server.pods, sort_keys=True)) == before:
            return
    raise AssertionError("the Job never came to rest")


# (indexed, phases of the finished pods, completions)
SCENARIOS = {
    "NonIndexed, all succeeded": (False, ["Succeeded"] * 3, 3),
    "NonIndexed, one failed among them": (False, ["Succeeded", "Failed", "Succeeded", "Succeeded"], 3),
    "Indexed": (True, ["Succeeded"] * 3, 3),
}


def crash_points() -> Iterator[tuple[str, int]]:
    for name in SCENARIOS:
        for n in range(8):  # more writes than any of these syncs makes
            yield name, n


@pytest.mark.parametrize(("scenario", "crash_after"), list(crash_points()))
def test_a_crash_after_any_write_loses_no_pod_and_counts_none_twice(scenario: str, crash_after: int) -> None:
    indexed, phases, completions = SCENARIOS[scenario]
    succeeded = [i for i, p in enumerate(phases) if p == "Succeeded"]
    # Indexed: the succeeded pods hold indexes 0, 1, 2.
    pods = [
        finished_pod(i, phase, succeeded.index(i) if indexed and i in succeeded else None)
        for i, phase in enumerate(phases)
    ]
    server = FakeServer(new_job(completions, indexed), pods)
    events = NoEvents()
    server.writes_left = crash_after
    with contextlib.suppress(Crash):
        asyncio.run(controller(server, events).sync(f"{NS}/job"))
    server.writes_left = None
    run_to_rest(server, events)
    status = server.job["status"]
    assert status.get("succeeded", 0) == len(succeeded)
    assert status.get("failed", 0) == len(phases) - len(succeeded)
    assert status["uncountedTerminatedPods"] == {}
    assert not any(p["metadata"]["finalizers"] for p in server.pods.values())
    complete = [c for c in status["conditions"] if c["type"] == "Complete"]
    assert complete and complete[0]["status"] == "True"
    if indexed:
        assert status["completedIndexes"] == "0-2"
    assert events.reasons.count("Completed") == 1
