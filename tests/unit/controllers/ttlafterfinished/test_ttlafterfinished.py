"""The TTL-after-finished controller's helpers and sync (upstream ttlafterfinished_controller_test.go's
TestTimeLeft cases, and the sync against the testing kit's fake client: requeue, re-check, delete)."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import msgspec
import pytest
from kcm_controllers.ttlafterfinished import controller as ttlafterfinished_controller
from kcm_controllers.ttlafterfinished import ttl
from kcm_shared import runtime
from kcm_shared.testing import caches, fakeclient

NOW = dt.datetime(2026, 11, 24, 12, 0, tzinfo=dt.UTC)
SECOND = dt.timedelta(seconds=1)


def _stamp(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def job(
    *,
    completed: dt.datetime | None = None,
    failed: dt.datetime | None = None,
    ttl_seconds: int | None = None,
    uid: str = "uid-1",
    deleting: bool = False,
) -> dict[str, Any]:
    conditions = []
    if completed is not None:
        conditions.append({"type": "Complete", "status": "True", "lastTransitionTime": _stamp(completed)})
    if failed is not None:
        conditions.append({"type": "Failed", "status": "True", "lastTransitionTime": _stamp(failed)})
    meta: dict[str, Any] = {"name": "foobar", "namespace": "default", "uid": uid}
    if deleting:
        meta["deletionTimestamp"] = _stamp(NOW)
    spec = {} if ttl_seconds is None else {"ttlSecondsAfterFinished": ttl_seconds}
    return {"kind": "Job", "metadata": meta, "spec": spec, "status": {"conditions": conditions}}


def view(doc: dict[str, Any]) -> ttl.JobView:
    return msgspec.json.decode(msgspec.json.encode(doc), type=ttl.JobView)


@pytest.mark.parametrize(
    ("name", "doc", "error", "left", "expire_at"),
    [
        ("Error case: Job unfinished", job(ttl_seconds=100), "should not be cleaned up", None, None),
        ("Error case: Job completed now, no TTL", job(completed=NOW), "should not be cleaned up", None, None),
        ("Job completed now, 0s TTL", job(completed=NOW, ttl_seconds=0), None, 0, NOW),
        ("Job completed now, 10s TTL", job(completed=NOW, ttl_seconds=10), None, 10, NOW + 10 * SECOND),
        (
            "Job completed 10s ago, 15s TTL",
            job(completed=NOW - 10 * SECOND, ttl_seconds=15),
            None,
            5,
            NOW + 5 * SECOND,
        ),
        ("Error case: Job failed now, no TTL", job(failed=NOW), "should not be cleaned up", None, None),
        ("Job failed now, 0s TTL", job(failed=NOW, ttl_seconds=0), None, 0, NOW),
        ("Job failed now, 10s TTL", job(failed=NOW, ttl_seconds=10), None, 10, NOW + 10 * SECOND),
        (
            "Job failed 10s ago, 15s TTL",
            job(failed=NOW - 10 * SECOND, ttl_seconds=15),
            None,
            5,
            NOW + 5 * SECOND,
        ),
    ],
)
def test_time_left(
    name: str, doc: dict[str, Any], error: str | None, left: int | None, expire_at: dt.datetime | None
) -> None:
    if error is not None:
        with pytest.raises(ttl.TTLError, match=error):
            ttl.time_left(view(doc), NOW)
        return
    got_left, got_expire, in_future = ttl.time_left(view(doc), NOW)
    assert (got_left, got_expire, in_future) == (dt.timedelta(seconds=left or 0), expire_at, False), name


def test_finish_time_is_the_finished_conditions_transition_and_needs_one() -> None:
    doc = job(completed=NOW, ttl_seconds=5)
    doc["status"]["conditions"].insert(0, {"type": "Suspended", "status": "False"})
    assert ttl.job_finish_time(view(doc)) == NOW
    doc["status"]["conditions"][-1].pop("lastTransitionTime")
    with pytest.raises(ttl.TTLError, match="unable to find the time when the Job default/foobar finished"):
        ttl.job_finish_time(view(doc))
    false = job(ttl_seconds=5)
    false["status"]["conditions"] = [{"type": "Complete", "status": "False"}]
    assert not ttl.needs_cleanup(view(false))


def test_a_job_finished_in_the_future_is_told_apart() -> None:
    _, _, in_future = ttl.time_left(view(job(completed=NOW + SECOND, ttl_seconds=0)), NOW)
    assert in_future


PATH = "/apis/batch/v1/namespaces/default/jobs/foobar"


def sync(
    cached: dict[str, Any] | None, fresh: dict[str, Any] | None
) -> tuple[runtime.Result | None, fakeclient.FakeClient]:
    """One reconcile with `cached` in the cache and `fresh` in the API server (None: neither holds it)."""
    jobs = caches.new(ttlafterfinished_controller.JOBS, ttl.JobView, [cached] if cached is not None else [])
    client = fakeclient.FakeClient({PATH: fresh} if fresh is not None else {})
    controller = ttlafterfinished_controller.TTLAfterFinishedController(
        client, jobs, lambda _key: None, now=lambda: NOW
    )
    return asyncio.run(controller.reconcile("default/foobar")), client


EXPIRED = job(completed=NOW - 10 * SECOND, ttl_seconds=5)


def test_an_expired_job_is_deleted_in_the_foreground_with_the_fresh_uid() -> None:
    result, client = sync(EXPIRED, job(completed=NOW - 10 * SECOND, ttl_seconds=5, uid="uid-fresh"))
    assert result is None
    assert client.calls("delete") == [
        ("delete", PATH, {"propagationPolicy": "Foreground", "preconditions": {"uid": "uid-fresh"}})
    ]


def test_a_job_not_expired_yet_comes_back_at_expiry_without_a_request() -> None:
    result, client = sync(job(completed=NOW - 2 * SECOND, ttl_seconds=5), None)
    assert result == runtime.Result(requeue_after=3.0)
    assert not client.calls("get") and not client.calls("delete")


def test_a_ttl_raised_since_the_cache_saw_it_is_honoured() -> None:
    result, client = sync(EXPIRED, job(completed=NOW - 10 * SECOND, ttl_seconds=60))
    assert result == runtime.Result(requeue_after=50.0)
    assert len(client.calls("get")) == 1 and not client.calls("delete")


@pytest.mark.parametrize(
    ("case", "cached", "fresh"),
    [
        ("gone from the cache", None, EXPIRED),
        ("unfinished", job(ttl_seconds=0), EXPIRED),
        ("no TTL", job(completed=NOW), EXPIRED),
        ("being deleted", job(completed=NOW, ttl_seconds=0, deleting=True), EXPIRED),
        ("gone from the API server", EXPIRED, None),
        ("TTL removed since", EXPIRED, job(completed=NOW - 10 * SECOND)),
        ("being deleted since", EXPIRED, job(completed=NOW - 10 * SECOND, ttl_seconds=5, deleting=True)),
    ],
)
def test_left_alone(case: str, cached: dict[str, Any] | None, fresh: dict[str, Any] | None) -> None:
    result, client = sync(cached, fresh)
    assert result is None and not client.calls("delete"), case
