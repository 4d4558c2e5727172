"""Micro-benchmark of the CPU one pod event costs in a controller's cache, in process.

Needs no stack (`make bench` runs it too): a tool for profiling the shared runtime's per-event
path. It builds the pod messages a Job's pod produces on the object stream (created, bound,
running, succeeded, tracking finalizer removed, deleted), as real `nats.aio.msg.Msg`
objects with the watcher's headers (event type, resourceVersion, traceparent) and a
JetStream reply subject, and feeds them through `Cache._on_msg` (sequence check, trace
context, subject parsing, decode into the job controller's `JobPodView`, indexes, metrics)
with a handler that does what the job controller's does at the bottom (controller ref, key,
enqueue into the runtime's pending dict with the trace context).

The same events, as watch lines, also go through the watcher's publish path
(`ResourceWatch._on_events`: head decode, subject, staleness, headers, trace context, the
lane and its ack handling) over a stand-in NATS connection that acknowledges each publish
at once, so what is measured is the watcher's own CPU, not the server's.

Printed: CPU microseconds per event through the cache and through the watcher, beside a
bare msgspec decode of the same bodies into the same view (the floor any cache pays), and
the ratios.
`--profile FILE` writes a cProfile of the cache run.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import time
from typing import Any

import msgspec
from kcm_controllers.job import podview
from kcm_shared.apimachinery import codec, gvr
from kcm_shared.base import tracing
from kcm_shared.bus import subjects, wire
from kcm_shared.runtime import cache
from kcm_watcher import objects, publisher, resourcewatch
from nats.aio.msg import Msg

PODS = gvr.Resource("", "v1", "pods")
NAMESPACE = "bench"
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def pod_states(i: int, rv: int) -> list[tuple[str, dict[str, Any] | None]]:
    """The (event, body) pairs of one Job pod's life, as the API server serves them."""
    name = f"work-{i:05d}"
    meta = {
        "name": name,
        "generateName": "work-",
        "namespace": NAMESPACE,
        "uid": f"00000000-0000-0000-0000-{i:012d}",
        "resourceVersion": "",
        "creationTimestamp": "2026-11-25T01:00:00Z",
        "labels": {
            "batch.kubernetes.io/controller-uid": "5f0c3a1e-1111-2222-3333-444455556666",
            "batch.kubernetes.io/job-name": "work",
            "controller-uid": "5f0c3a1e-1111-2222-3333-444455556666",
            "job-name": "work",
        },
        "annotations": {"sim.kcm.dev/exit-code": "0"},
        "ownerReferences": [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": "work",
                "uid": "5f0c3a1e-1111-2222-3333-444455556666",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
        "finalizers": ["batch.kubernetes.io/job-tracking"],
    }
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "command": ["sh", "-c", "true"],
                "resources": {},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "Always",
            }
        ],
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "securityContext": {},
        "schedulerName": "default-scheduler",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
    }
    states: list[tuple[str, dict[str, Any] | None]] = []

    def emit(event: str, status: dict[str, Any]) -> None:
        nonlocal rv
        rv += 1
        body = {"kind": "Pod", "apiVersion": "v1", "metadata": {**meta, "resourceVersion": str(rv)}}
        body["spec"] = dict(spec)
        body["status"] = status
        states.append((event, body))

    emit("ADDED", {"phase": "Pending", "qosClass": "BestEffort"})
    spec["nodeName"] = "node-1"
    cond = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-25T01:00:00Z"}]
    emit("MODIFIED", {"phase": "Pending", "conditions": cond, "qosClass": "BestEffort"})
    running = {
        "phase": "Running",
        "conditions": [
            *cond,
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-25T01:00:01Z"},
        ],
        "hostIP": "10.0.0.1",
        "podIP": "10.1.0.5",
        "startTime": "2026-11-25T01:00:01Z",
        "containerStatuses": [
            {
                "name": "main",
                "ready": True,
                "restartCount": 0,
                "image": "busybox",
                "imageID": "",
                "started": True,
                "state": {"running": {"startedAt": "2026-11-25T01:00:01Z"}},
            }
        ],
        "qosClass": "BestEffort",
    }
    emit("MODIFIED", running)
    done = {
        **running,
        "phase": "Succeeded",
        "containerStatuses": [
            {
                "name": "main",
                "ready": False,
                "restartCount": 0,
                "image": "busybox",
                "imageID": "",
                "started": False,
                "state": {
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": "2026-11-25T01:00:01Z",
                        "finishedAt": "2026-11-25T01:00:02Z",
                    }
                },
            }
        ],
    }
    emit("MODIFIED", done)
    meta["finalizers"] = []
    emit("MODIFIED", done)
    emit("DELETED", done)
    return states


def messages(pods: int) -> list[Msg]:
    out: list[Msg] = []
    rv = 1000
    for i in range(pods):
        for event, body in pod_states(i, rv):
            rv += 1
            assert body is not None
            seq = len(out) + 1
            out.append(
                Msg(
                    _client=None,  # type: ignore[arg-type]
                    subject=subjects.object_subject(PODS, NAMESPACE, body["metadata"]["name"]),
                    reply=f"$JS.ACK.{wire.OBJECTS_STREAM}.c1.1.{seq + 50}.{seq}.1764032400000000000.{1 if i < pods - 1 else 0}",
                    data=json.dumps(body, separators=(",", ":")).encode(),
                    headers={
                        wire.EVENT: event,
                        wire.RESOURCE_VERSION: body["metadata"]["resourceVersion"],
                        wire.TRACEPARENT: TRACEPARENT,
                    },
                )
            )
    # Only the last message of a run says nothing is pending.
    return out


class _Pending:
    """The job controller's pod handlers' work, reduced to the runtime's part of it."""

    def __init__(self) -> None:
        self.pending: dict[str, Any] = {}

    def enqueue_owner(self, pod: codec.Meta) -> None:
        ref = codec.controller_ref(pod)
        if ref is not None:
            self.pending[f"{pod.metadata.namespace}/{ref.name}"] = tracing.later()

    def on_update(self, old: codec.Meta, cur: codec.Meta) -> None:
        self.enqueue_owner(cur)


async def through_cache(msgs: list[Msg], profile: cProfile.Profile | None) -> float:
    store: cache.Cache[podview.JobPodView] = cache.Cache(None, None, PODS, podview.JobPodView)  # type: ignore[arg-type]
    work = _Pending()
    store.add_handler(on_add=work.enqueue_owner, on_update=work.on_update, on_delete=work.enqueue_owner)
    store._snapshot = None  # live messages, as after the initial sync
    failure: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    for m in msgs:
        m._metadata = None  # parsed again each run, as each delivery is
    subjects.parse_object_subject.cache_clear()  # each pod's first event parses, as live
    if profile is not None:
        profile.enable()
    start = time.process_time()
    for m in msgs:
        await store._on_msg(failure, m)
    spent = time.process_time() - start
    if profile is not None:
        profile.disable()
    assert not failure.done(), failure.result()
    assert len(store) == 0 and work.pending, "every pod should have come and gone"
    return spent


class _AckingNats:
    """What the publisher uses of a NATS connection; every publish is acknowledged at once."""

    max_payload = 8 * 1024 * 1024

    def __init__(self) -> None:
        self.pub: publisher.Publisher | None = None
        self.seq = 0
        self._inbox = 0

    def new_inbox(self) -> str:
        self._inbox += 1
        return f"_INBOX.bench{self._inbox}"

    async def subscribe(self, subject: str, cb: Any) -> None:
        pass

    async def publish(self, subject: str, body: bytes, reply: str = "", headers: Any = None) -> None:
        self.seq += 1
        assert self.pub is not None
        ack = Msg(
            _client=None,  # type: ignore[arg-type]
            subject=reply,
            data=b'{"stream":"%s","seq":%d}' % (wire.OBJECTS_STREAM.encode(), self.seq),
        )
        await self.pub._on_reply(ack)


async def through_watcher(msgs: list[Msg], profile: cProfile.Profile | None) -> float:
    nc = _AckingNats()
    pub = nc.pub = publisher.Publisher(nc)  # type: ignore[arg-type]
    watch = resourcewatch.ResourceWatch(PODS, None, None, pub.lane(str(PODS)))  # type: ignore[arg-type]
    lines = [
        msgspec.json.encode({"type": m.headers[wire.EVENT], "object": msgspec.Raw(m.data)})  # type: ignore[index]
        for m in msgs
    ]
    if profile is not None:
        profile.enable()
    start = time.process_time()
    rv = ""
    for line in lines:  # one event per read, as a watch delivers them when not saturated
        rv = await watch._on_events([objects.decode_line(line)], rv)
    spent = time.process_time() - start
    if profile is not None:
        profile.disable()
    assert nc.seq == len(msgs), f"published {nc.seq} of {len(msgs)}"
    return spent


def bare_decode(msgs: list[Msg]) -> float:
    decoder = msgspec.json.Decoder(podview.JobPodView)
    start = time.process_time()
    for m in msgs:
        decoder.decode(m.data)
    return time.process_time() - start


async def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pods", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=5, help="best of this many runs of each")
    p.add_argument("--profile", help="write a cProfile of the cache and watcher runs to this file")
    args = p.parse_args()
    msgs = messages(args.pods)
    profile = cProfile.Profile() if args.profile else None
    cached, bare, watched = [], [], []
    for _ in range(args.rounds):
        bare.append(bare_decode(msgs))
        cached.append(await through_cache(msgs, profile))
        watched.append(await through_watcher(msgs, profile))
    per_cache = min(cached) / len(msgs) * 1e6
    per_watch = min(watched) / len(msgs) * 1e6
    per_bare = min(bare) / len(msgs) * 1e6
    size = sum(len(m.data) for m in msgs) / len(msgs)
    print(f"events: {len(msgs)} ({args.pods} pods x {len(msgs) // args.pods}), mean body {size:.0f} bytes")
    print(f"cache (job pod view, indexes, handler): {per_cache:.1f} us CPU per event (best of {args.rounds})")
    print(f"baseline, bare msgspec decode into the same view: {per_bare:.1f} us CPU per event")
    print(f"ratio cache/bare: {per_cache / per_bare:.2f}")
    print(f"watcher publish path (watch line to acknowledged message): {per_watch:.1f} us CPU per event")
    print(f"ratio watcher/bare: {per_watch / per_bare:.2f}")
    if profile is not None:
        profile.dump_stats(args.profile)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
