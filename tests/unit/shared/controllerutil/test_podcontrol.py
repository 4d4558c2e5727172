"""Slow-start batches (upstream TestSlowStartBatch) and the pod built from a template."""

from __future__ import annotations

import asyncio
import json

import msgspec
import pytest
from kcm_shared.apimachinery import codec
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import controllerref, podcontrol
from kcm_shared.testing import fakeclient, recorders

FAIL = RuntimeError("fake error")


@pytest.mark.parametrize(
    ("count", "initial", "fail_after", "successes", "failed", "calls", "batches"),
    [
        # (calls beyond `fail_after` fail; None: none fail)
        (10, 5, None, 10, False, 10, [5, 5]),
        (10, 5, 0, 0, True, 5, [5]),
        (10, 1, 6, 6, True, 7, [1, 2, 4]),  # the 7th call fails: its batch is the last
        (15, 1, None, 15, False, 15, [1, 2, 4, 8]),
        (3, 5, None, 3, False, 3, [3]),
        (0, 1, None, 0, False, 0, []),
    ],
)
def test_slow_start_batch(
    count: int,
    initial: int,
    fail_after: int | None,
    successes: int,
    failed: bool,
    calls: int,
    batches: list[int],
) -> None:
    made = 0
    in_flight = 0
    seen_batches: list[int] = []

    async def fn() -> None:
        nonlocal made, in_flight
        made += 1
        n = made
        if in_flight == 0:
            seen_batches.append(0)
        in_flight += 1
        seen_batches[-1] += 1
        await asyncio.sleep(0)  # let the whole batch start before any call ends
        in_flight -= 1
        if fail_after is not None and n > fail_after:
            raise FAIL

    done, error = asyncio.run(podcontrol.slow_start_batch(count, initial, fn))
    assert (done, error is not None, made, seen_batches) == (successes, failed, calls, batches)
    if failed:
        assert error is FAIL


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
    fake = recorders.RecordingPodControl()
    ref = controllerref.new_controller_ref(OWNER, "apps/v1", "ReplicaSet")
    asyncio.run(fake.create_pods("ns", template(), OWNER, ref))
    asyncio.run(fake.delete_pod("ns", "p1", OWNER))
    assert (len(fake.templates), fake.refs, fake.deleted) == (1, [ref], ["p1"])
    fake.err = FAIL
    with pytest.raises(RuntimeError):
        asyncio.run(fake.create_pods("ns", template(), OWNER, ref))
    assert len(fake.templates) == 2


def test_a_failed_delete_says_unable_to_delete_pods_and_a_404_stays_itself() -> None:
    # Upstream RealPodControl.DeletePod: its wording reaches the ReplicaFailure condition.
    client = fakeclient.FakeClient({"/api/v1/namespaces/ns/pods/p1": {"metadata": {"name": "p1"}}})
    forbidden = kubeclient.ApiError(403, "Forbidden", 'pods "p1" is forbidden: no')
    client.fail("delete", "/api/v1/namespaces/ns/pods/p1", forbidden, times=1)
    events = recorders.RecordingEventRecorder()
    control = podcontrol.RealPodControl(client, events)
    with pytest.raises(podcontrol.DeletePodError) as raised:
        asyncio.run(control.delete_pod("ns", "p1", OWNER))
    assert str(raised.value) == 'unable to delete pods: pods "p1" is forbidden: no'
    assert raised.value.__cause__ is forbidden
    assert podcontrol.error_message(raised.value) == str(raised.value)
    assert events.seen() == [("Warning", "FailedDelete", 'Error deleting: pods "p1" is forbidden: no')]
    with pytest.raises(kubeclient.ApiError) as gone:
        asyncio.run(control.delete_pod("ns", "p2", OWNER))
    assert gone.value.not_found
