"""The job controller's pod tracking survives a crash at every write (the kill -9 guarantee).

A fake API server (tests/support/job.py) holds one Job and its finished pods, each with the
tracking finalizer. A controller syncs until its n-th write, after which every write fails as
if the process had been killed there; a fresh controller (no expectations, no memory) then
syncs the state the server was left in until nothing changes. For every n the Job ends with
each pod counted exactly once, no pod left with the finalizer, and the Complete condition.
The e2e test (tests/e2e/test_job.py) kills the real process once, where the kill happens to
land; this tries every point.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator

import pytest
from kcm_shared.testing import recorders

from tests.support import job


def run_to_rest(server: job.JobServer, events: recorders.RecordingEventRecorder) -> None:
    """Sync with fresh controllers (a restart each time) until a sync writes nothing."""
    for _ in range(10):
        before = (json.dumps(server.job, sort_keys=True), json.dumps(server.pods, sort_keys=True))
        asyncio.run(job.controller(server, events).sync(f"{job.NS}/job"))
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
        job.finished_pod(i, phase, succeeded.index(i) if indexed and i in succeeded else None)
        for i, phase in enumerate(phases)
    ]
    server = job.JobServer(job.new_job(completions, indexed), pods)
    events = recorders.RecordingEventRecorder()
    server.writes_left = crash_after
    with contextlib.suppress(job.Crash):
        asyncio.run(job.controller(server, events).sync(f"{job.NS}/job"))
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
    assert events.reasons().count("Completed") == 1
