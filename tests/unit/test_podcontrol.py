"""Slow-start batches (upstream TestSlowStartBatch) and the pod built from a template."""

from __future__ import annotations

import asyncio
import json

import msgspec
import pytest
from kcm_shared import codec, controllerref, kubeclient, podcontrol

FAIL = RuntimeError("fake error")


class Calls:
    """`fn` for slow_start_batch whose calls end when the test says: each waits on its future."""

    def __init__(self) -> None:
        self.pending: list[asyncio.Future[None]] = []
        self.started = 0
        self.most_in_flight = 0

    async def fn(self) -> None:
        self.started += 1
        done = asyncio.get_running_loop().create_future()
        self.pending.append(done)
        self.most_in_flight = max(self.most_in_flight, len(self.pending))
        try:
            await done
        finally:
            self.pending.remove(done)

    def end(self, index: int = 0, error: Exception | None = None) -> None:
        done = self.pending[index]
        if error is None:
            done.set_result(None)
        else:
            done.set_exception(error)


async def settle() -> None:
    for _ in range(5):  # a call's end reaches slow_start_batch, which then starts the next ones
        await asyncio.sleep(0)


@pytest.mark.parametrize(
    ("count", "initial", "fail_after", "successes", "failed", "calls"),
    [
        # (calls beyond `fail_after` fail; None: none fail); calls end in the order they started
        (10, 5, None, 10, False, 10),
        (10, 5, 0, 0, True, 5),
        (10, 1, 0, 0, True, 1),  # a rejected template costs one request
        (10, 1, 6, 6, True, 10),
        (100, 1, 6, 6, True, 13),  # at most 1 + 2 * 6 started: 7 of them fail
        (15, 1, None, 15, False, 15),
        (3, 5, None, 3, False, 3),
        (0, 1, None, 0, False, 0),
    ],
)
def test_slow_start_batch(
    count: int, initial: int, fail_after: int | None, successes: int, failed: bool, calls: int
) -> None:
    made = 0

    async def fn() -> None:
        nonlocal made
        made += 1
        n = made
        await asyncio.sleep(0)
        if fail_after is not None and n > fail_after:
            raise FAIL

    done, error = asyncio.run(podcontrol.slow_start_batch(count, initial, fn))
    assert (done, error is not None, made) == (successes, failed, calls)
    if failed:
        assert error is FAIL
        # Upstream's bound: a failing batch is never larger than the successes before it plus one.
        assert made - done <= done + initial


def test_slow_start_each_success_starts_two_more_without_waiting_for_the_rest() -> None:
    async def scenario() -> None:
        calls = Calls()
        run = asyncio.ensure_future(podcontrol.slow_start_batch(20, 1, calls.fn))
        await settle()
        assert (calls.started, len(calls.pending)) == (1, 1)
        calls.end()
        await settle()
        assert (calls.started, len(calls.pending)) == (3, 2)
        calls.end()  # one of the two ends; the other still runs, and two more start anyway
        await settle()
        assert (calls.started, len(calls.pending)) == (5, 3)
        while calls.pending:
            calls.end()
            await settle()
        assert await run == (20, None)
        assert calls.started == 20

    asyncio.run(scenario())


def test_slow_start_stops_issuing_at_the_first_failure_and_awaits_the_rest() -> None:
    async def scenario() -> None:
        calls = Calls()
        run = asyncio.ensure_future(podcontrol.slow_start_batch(100, 1, calls.fn))
        await settle()
        for _ in range(3):  # 3 successes: 7 started, 4 in flight
            calls.end()
            await settle()
        assert (calls.started, len(calls.pending)) == (7, 4)
        calls.end(0, FAIL)
        await settle()
        calls.end(0)  # a success after the failure starts nothing more
        await settle()
        assert (calls.started, len(calls.pending)) == (7, 2)
        assert not run.done()  # the calls in flight are awaited
        calls.end(0, RuntimeError("second"))
        calls.end(1)
        await settle()
        assert await run == (5, FAIL)

    asyncio.run(scenario())


def test_slow_start_keeps_at_most_max_batch_in_flight() -> None:
    async def scenario() -> None:
        calls = Calls()
        run = asyncio.ensure_future(podcontrol.slow_start_batch(50, 1, calls.fn, max_batch=4))
        await settle()
        while calls.pending:
            calls.end()
            await settle()
        assert await run == (50, None)
        assert (calls.started, calls.most_in_flight) == (50, 4)

    asyncio.run(scenario())


def test_slow_start_cancelled_cancels_its_calls() -> None:
    async def scenario() -> None:
        calls = Calls()
        run = asyncio.ensure_future(podcontrol.slow_start_batch(10, 4, calls.fn))
        await settle()
        assert len(calls.pending) == 4
        run.cancel()
        await settle()
        assert run.cancelled()
        assert calls.pending == []

    asyncio.run(scenario())


def template() -> podcontrol.PodTemplate:
    raw = json.dumps(
        {
            "metadata": {
                "name": "ignored",
                "labels": {"app": "web"},
                "annotations": {"a": "b"},
                "finalizers": ["example.com/f"],
            },
            "spec": {"containers": [{"name": "c", "image": "nginx", "unknownField": 1}]},
        }
    )
    return msgspec.json.decode(raw, type=podcontrol.PodTemplate)


OWNER = codec.decode(b'{"metadata":{"name":"web","namespace":"ns","uid":"u1"}}', codec.Meta)


def test_pod_from_template_copies_the_template_and_sets_the_controller() -> None:
    ref = controllerref.new_controller_ref(OWNER, "apps/v1", "ReplicaSet")
    pod = msgspec.json.decode(msgspec.json.encode(podcontrol.pod_from_template(template(), "web", ref)))
    assert pod == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "web-",
            "labels": {"app": "web"},
            "annotations": {"a": "b"},
            "finalizers": ["example.com/f"],
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web",
                    "uid": "u1",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        # Copied byte for byte: fields our views do not know survive.
        "spec": {"containers": [{"name": "c", "image": "nginx", "unknownField": 1}]},
    }


@pytest.mark.parametrize(
    ("owner", "prefix"),
    [("web", "web-"), ("a.b", "a.b-"), ("x" * 252, "x" * 252 + "-"), ("x" * 253, "x" * 253)],
)
def test_pod_name_prefix(owner: str, prefix: str) -> None:
    assert podcontrol.pod_name_prefix(owner) == prefix


def test_namespace_terminating_cause() -> None:
    status = {"details": {"causes": [{"reason": "NamespaceTerminating", "message": "ns is terminating"}]}}
    assert podcontrol.has_status_cause(
        kubeclient.ApiError(403, "Forbidden", "x", status), "NamespaceTerminating"
    )
    assert not podcontrol.has_status_cause(
        kubeclient.ApiError(403, "Forbidden", "x", {}), "NamespaceTerminating"
    )
    assert not podcontrol.has_status_cause(RuntimeError("x"), "NamespaceTerminating")


def test_recording_pod_control_records_and_fails_on_request() -> None:
    fake = podcontrol.RecordingPodControl()
    ref = controllerref.new_controller_ref(OWNER, "apps/v1", "ReplicaSet")
    asyncio.run(fake.create_pods("ns", template(), OWNER, ref))
    asyncio.run(fake.delete_pod("ns", "p1", OWNER))
    assert (len(fake.templates), fake.refs, fake.deleted) == (1, [ref], ["p1"])
    fake.err = FAIL
    with pytest.raises(RuntimeError):
        asyncio.run(fake.create_pods("ns", template(), OWNER, ref))
    assert len(fake.templates) == 2
