"""The object-stream cache against a real nats-server (and the real API server for the RV helper).

The watcher is not involved: the tests publish object messages and progress markers the way
docs/bus.md says the watcher does, and answer `kcm.watcher.sync` with a tiny fake.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import msgspec
import prometheus_client
import uvloop
from benchlib import footprint
from kcm_shared.apimachinery import codec, gvr, selectors
from kcm_shared.bus import natsconn, subjects, wire
from kcm_shared.client import kubeclient
from kcm_shared.runtime import cache, catchup
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from tests.conftest import ApiServer, NatsProc

_names = itertools.count()


class PodSpec(codec.View):
    node_name: str = ""


class PodView(codec.Meta):
    spec: PodSpec = msgspec.field(default_factory=PodSpec)


TYPICAL_CONTAINERS = [
    {
        "name": f"c{i}",
        "image": "registry.example.com/team/app:1.2.3",
        "args": ["--port=8080", "--log-level=info"],
        "env": [{"name": f"VAR_{j}", "value": "x" * 20} for j in range(8)],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
        "volumeMounts": [{"name": "token", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
        "terminationMessagePath": "/dev/termination-log",
        "imagePullPolicy": "IfNotPresent",
    }
    for i in range(2)
]


def new_resource() -> gvr.Resource:
    # A resource of its own per test, so tests sharing the module's server cannot see each other.
    return gvr.Resource("", "v1", f"pods{next(_names)}")


def pod(
    ns: str, name: str, rv: str, labels: dict[str, str] | None = None, owner: str = "", node: str = ""
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": f"uid-{ns}-{name}", "resourceVersion": rv}
    if labels:
        meta["labels"] = labels
    if owner:
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": owner, "controller": True}
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"nodeName": node}, "status": {}}


async def publish(js: JetStreamContext, res: gvr.Resource, obj: dict[str, Any], event: str = "ADDED") -> None:
    meta = obj["metadata"]
    headers = {wire.EVENT: event, wire.RESOURCE_VERSION: meta["resourceVersion"]}
    if event == wire.DELETED:
        headers["Nats-TTL"] = "1h"
    await js.publish(
        subjects.object_subject(res, meta["namespace"], meta["name"]),
        json.dumps(obj).encode(),
        headers=headers,
    )


async def publish_raw(
    js: JetStreamContext, res: gvr.Resource, ns: str, name: str, rv: str, body: bytes
) -> None:
    headers = {wire.EVENT: "MODIFIED", wire.RESOURCE_VERSION: rv}
    await js.publish(subjects.object_subject(res, ns, name), body, headers=headers)


async def marker(js: JetStreamContext, res: gvr.Resource, rv: str) -> None:
    await js.publish(subjects.progress_subject(res), b"", headers={wire.RESOURCE_VERSION: rv})


async def until(pred: Callable[[], Any], limit: float = 15.0, what: str = "") -> Any:
    deadline = time.monotonic() + limit
    while True:
        result = pred()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or pred}")
        await asyncio.sleep(0.02)


class Recorder:
    """Handler calls in order, as (kind, key, resourceVersion[, old resourceVersion])."""

    def __init__(self, store: cache.Cache[PodView]) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.store = store
        store.add_handler(self.add, self.update, self.delete)

    def add(self, obj: PodView) -> None:
        # Handlers run after the store changed: the object is already readable.
        assert self.store.get_key(codec.key_of(obj)) is obj
        self.calls.append(("add", codec.key_of(obj), obj.metadata.resource_version))

    def update(self, old: PodView, new: PodView) -> None:
        assert self.store.get_key(codec.key_of(new)) is new
        self.calls.append(
            ("update", codec.key_of(new), new.metadata.resource_version, old.metadata.resource_version)
        )

    def delete(self, obj: PodView) -> None:
        assert self.store.get_key(codec.key_of(obj)) is None
        self.calls.append(("delete", codec.key_of(obj), obj.metadata.resource_version))


async def connect(url: str) -> tuple[Client, JetStreamContext]:
    nc = await natsconn.connect(natsconn.NatsOptions(url=url), "test-cache")
    js = nc.jetstream()
    await natsconn.ensure_object_stream(js)
    return nc, js


def decode_errors(res: gvr.Resource) -> float:
    value = prometheus_client.REGISTRY.get_sample_value(
        "kcm_cache_decode_errors_total", {"resource": str(res)}
    )
    return value or 0.0


def resync_count(res: gvr.Resource) -> float:
    value = prometheus_client.REGISTRY.get_sample_value("kcm_cache_resyncs_total", {"resource": str(res)})
    return value or 0.0


def test_initial_sync_live_changes_indexes_and_bad_messages(nats_server: NatsProc) -> None:
    async def body() -> None:
        nc, js = await connect(nats_server.url)
        res = new_resource()
        for rv in ("1", "2", "3"):
            await publish(js, res, pod("ns1", "a", rv, {"app": "x"}), "MODIFIED")
        await publish(js, res, pod("ns2", "b", "4", {"app": "x"}, owner="rs-1"))
        await publish(js, res, pod("ns2", "gone", "5"), wire.DELETED)  # tombstone of an unknown object
        await marker(js, res, "5")
        store = cache.Cache(js, nc, res, PodView, keep_raw=True, heartbeat=1.0)
        rec = Recorder(store)
        store.add_index("node", lambda p: [p.spec.node_name] if p.spec.node_name else [])
        task = asyncio.create_task(store.run())
        try:
            await asyncio.wait_for(store.wait_synced(), 15)
            assert store.has_synced()
            # Three versions of one subject: only the last is read.
            assert rec.calls == [("add", "ns1/a", "3"), ("add", "ns2/b", "4")]
            assert store.last_resource_version == "5"
            assert len(store) == 2
            assert json.loads(store.raw("ns1/a") or b"")["metadata"]["resourceVersion"] == "3"

            await publish(js, res, pod("ns1", "a", "6", {"app": "y"}, node="n1"), "MODIFIED")
            await publish(js, res, pod("ns2", "b", "7", {"app": "x"}, owner="rs-1"), wire.DELETED)
            await publish(js, res, pod("ns1", "c", "8", {"app": "x"}, owner="rs-1", node="n1"))
            await publish_raw(js, res, "ns1", "a", "9", b'{"metadata": {"name": 5')  # cannot be decoded
            await publish(js, res, pod("ns1", "d", "10"))
            await marker(js, res, "10")
            await until(lambda: store.last_resource_version == "10", what="marker 10")
            assert rec.calls[2:] == [
                ("update", "ns1/a", "6", "3"),
                ("delete", "ns2/b", "7"),
                ("add", "ns1/c", "8"),
                ("add", "ns1/d", "10"),
            ]
            a = store.get("ns1", "a")
            assert a is not None and a.metadata.resource_version == "6"  # the bad message changed nothing
            assert a.spec.node_name == "n1"
            assert decode_errors(res) == 1

            assert {codec.key_of(p) for p in store.by_index("owner-uid", "rs-1")} == {"ns1/c"}
            assert {codec.key_of(p) for p in store.by_index("node", "n1")} == {"ns1/a", "ns1/c"}
            assert store.by_index("namespace", "ns2") == []
            assert {codec.key_of(p) for p in store.list("ns1")} == {"ns1/a", "ns1/c", "ns1/d"}
            assert {codec.key_of(p) for p in store.list(None, selectors.parse_label_selector("app=x"))} == {
                "ns1/c"
            }
            assert {codec.key_of(p) for p in store.list("ns1", selectors.parse_label_selector("app"))} == {
                "ns1/a",
                "ns1/c",
            }
            c = store.get("ns1", "c")
            assert c is not None and codec.controller_ref(c) is not None
        finally:
            task.cancel()
            await nc.close()

    uvloop.run(body())


def test_a_state_replayed_onto_another_objects_subject_is_refused(nats_server: NatsProc) -> None:
    # nats-server lets a consumer deliver stream messages to any subject (nats-server#8274): a
    # copy of one object's message on another object's subject must not become that object.
    async def body() -> None:
        nc, js = await connect(nats_server.url)
        res = new_resource()
        await publish(js, res, pod("ns1", "a", "1"))
        await publish_raw(js, res, "ns1", "forged", "2", json.dumps(pod("ns1", "a", "2")).encode())
        await publish_raw(js, res, "ns1", "a", "3", json.dumps(pod("ns2", "a", "3")).encode())
        await marker(js, res, "3")
        store = cache.Cache(js, nc, res, PodView, heartbeat=1.0)
        rec = Recorder(store)
        task = asyncio.create_task(store.run())
        try:
            await asyncio.wait_for(store.wait_synced(), 15)
            # The stream keeps one message per subject: ns1/a's last one names ns2/a, so neither counts.
            assert store.keys() == [] and rec.calls == []
            await publish(js, res, pod("ns1", "a", "4"))
            await marker(js, res, "4")
            await until(lambda: store.last_resource_version == "4", what="marker 4")
            assert rec.calls == [("add", "ns1/a", "4")]
            assert decode_errors(res) == 2
        finally:
            task.cancel()
            await nc.close()

    uvloop.run(body())


def test_wait_caught_up_asks_the_watcher_and_waits_for_the_marker(nats_server: NatsProc) -> None:
    async def body() -> None:
        nc, js = await connect(nats_server.url)
        res = new_resource()
        await publish(js, res, pod("ns", "a", "3"))
        await marker(js, res, "3")
        store = cache.Cache(js, nc, res, PodView, heartbeat=1.0)
        task = asyncio.create_task(store.run())
        requests: list[dict[str, str]] = []

        async def fake_watcher(msg: Msg) -> None:
            req = json.loads(msg.data)
            requests.append(req)
            if len(requests) == 1:  # a busy watcher refuses: the cache must ask again
                await msg.respond(b'{"ok": false, "error": "busy, retry"}')
                return
            rv = str(int(req["resourceVersion"]) + 1)
            await marker(js, res, rv)
            await msg.respond(json.dumps({"ok": True, "resourceVersion": rv}).encode())

        try:
            await asyncio.wait_for(store.wait_caught_up("2"), 15)  # already there: no request needed
            # No watcher yet: the request is retried until one answers.
            waiting = asyncio.create_task(store.wait_caught_up("20"))
            await asyncio.sleep(0)
            assert not waiting.done()
            sub = await nc.subscribe(wire.WATCHER_SYNC, cb=fake_watcher)
            await asyncio.wait_for(waiting, 15)
            assert cache.rv_at_least(store.last_resource_version, "20")
            assert len(requests) == 2  # refused once, asked again
            assert requests[1] == {
                "group": "",
                "version": "v1",
                "resource": res.resource,
                "resourceVersion": "20",
            }
            await sub.unsubscribe()
        finally:
            task.cancel()
            await nc.close()

    uvloop.run(body())


def test_resync_after_a_stop_delivers_what_changed_meanwhile(nats_server: NatsProc) -> None:
    async def body() -> None:
        nc, js = await connect(nats_server.url)
        res = new_resource()
        for name in ("keep", "change", "expire"):
            await publish(js, res, pod("ns", name, "1"))
        await marker(js, res, "1")  # the watcher's: the stream vouches for what it lacks
        store = cache.Cache(js, nc, res, PodView, heartbeat=1.0)
        rec = Recorder(store)
        task = asyncio.create_task(store.run())
        await asyncio.wait_for(store.wait_synced(), 15)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        # While the cache is away: one object changes, one's tombstone expires (purged here).
        await publish(js, res, pod("ns", "change", "2"), "MODIFIED")
        await js.purge_stream(wire.OBJECTS_STREAM, subject=subjects.object_subject(res, "ns", "expire"))
        await publish(js, res, pod("ns", "new", "3"))
        rec.calls.clear()
        task = asyncio.create_task(store.run())
        try:
            await until(lambda: len(rec.calls) >= 3, what="re-sync events")
            assert sorted(rec.calls) == [
                ("add", "ns/new", "3"),
                ("delete", "ns/expire", "1"),
                ("update", "ns/change", "2", "1"),
            ]
            assert sorted(store.keys()) == ["ns/change", "ns/keep", "ns/new"]
        finally:
            task.cancel()
            await nc.close()

    uvloop.run(body())


def test_nats_restart_cache_recovers_and_converges(fresh_nats: NatsProc) -> None:
    async def body() -> None:
        nc, js = await connect(fresh_nats.url)
        res = new_resource()
        for name in ("a", "b"):
            await publish(js, res, pod("ns", name, "1"))
        store = cache.Cache(js, nc, res, PodView, heartbeat=0.5)
        rec = Recorder(store)
        task = asyncio.create_task(store.run())
        try:
            await asyncio.wait_for(store.wait_synced(), 15)
            resyncs = resync_count(res)
            fresh_nats.kill()
            await asyncio.to_thread(fresh_nats.start)
            await until(lambda: nc.is_connected, what="reconnect")
            # The watcher publishes what happened while NATS was down once it is back.
            await publish(js, res, pod("ns", "a", "2"), wire.DELETED)
            await publish(js, res, pod("ns", "b", "3"), "MODIFIED")
            await publish(js, res, pod("ns", "c", "4"))
            await until(lambda: sorted(store.keys()) == ["ns/b", "ns/c"], what="convergence")
            b = store.get("ns", "b")
            assert b is not None and b.metadata.resource_version == "3"
            assert ("delete", "ns/a", "2") in rec.calls
            assert resync_count(res) > resyncs  # the consumer was re-created, not silently resumed
            assert [c for c in rec.calls if c[0] == "add"][-1] == ("add", "ns/c", "4")
        finally:
            task.cancel()
            await nc.close()

    uvloop.run(body())


def stall(meanwhile: Callable[[], None], seconds: float) -> None:
    """Block the calling thread (and so its event loop) for at least `seconds`, running
    `meanwhile` on another thread: what a process starved of CPU goes through."""
    started = time.monotonic()
    other = threading.Thread(target=meanwhile)
    other.start()
    other.join()
    time.sleep(max(0.0, seconds - (time.monotonic() - started)))


def test_a_process_too_slow_for_its_consumer_keeps_it(nats_server: NatsProc) -> None:
    # The whole process stalls past the heartbeat window (what a starved CPU does to it) while
    # its consumer delivers: what arrived waits unread, nothing was missed, and the cache goes
    # on with it instead of re-reading the stream from the start.
    async def body() -> None:
        nc, js = await connect(nats_server.url)
        res = new_resource()
        await marker(js, res, "1")
        store = cache.Cache(js, nc, res, PodView, heartbeat=0.5)
        task = asyncio.create_task(store.run())
        try:
            await asyncio.wait_for(store.wait_synced(), 15)
            resyncs = resync_count(res)

            async def publish_all() -> None:
                # Another connection on a loop of its own: this one's loop does not run meanwhile.
                pub, pub_js = await connect(nats_server.url)
                try:
                    for i in range(20):
                        await publish(pub_js, res, pod("ns", f"p{i}", str(i + 2)))
                    await marker(pub_js, res, "21")
                finally:
                    await pub.close()

            stall(lambda: asyncio.run(publish_all()), 3 * 0.5 + 0.5)
            await until(lambda: store.last_resource_version == "21", what="the marker after the stall")
            assert len(store) == 20
            assert resync_count(res) == resyncs, "the consumer was dropped and the stream re-read"
        finally:
            task.cancel()
            await nc.close()

    uvloop.run(body())


async def consumers_of(js: JetStreamContext, res: gvr.Resource) -> int:
    infos = await js.consumers_info(wire.OBJECTS_STREAM)
    return sum(1 for info in infos if subjects.object_filter(res) in (info.config.filter_subjects or []))


def test_caches_of_one_resource_share_one_consumer_through_a_restart(fresh_nats: NatsProc) -> None:
    async def body() -> None:
        nc, js = await connect(fresh_nats.url)
        res = new_resource()
        for name in ("a", "b"):
            await publish(js, res, pod("ns", name, "1", node="n1"))
        await marker(js, res, "1")
        leader = cache.Cache(js, nc, res, PodView, heartbeat=0.5)
        follower: cache.Cache[codec.Meta] = cache.Cache(js, nc, res, codec.Meta, heartbeat=0.5)
        leader.share_consumer(follower)
        seen: list[tuple[str, str]] = []
        follower.add_handler(
            lambda o: seen.append(("add", codec.key_of(o))),
            lambda _, o: seen.append(("update", codec.key_of(o))),
            lambda o: seen.append(("delete", codec.key_of(o))),
        )
        tasks = [asyncio.create_task(store.run()) for store in (leader, follower)]
        try:
            await asyncio.wait_for(asyncio.gather(leader.wait_synced(), follower.wait_synced()), 15)
            assert sorted(follower.keys()) == sorted(leader.keys()) == ["ns/a", "ns/b"]
            assert follower.last_resource_version == "1"
            assert await consumers_of(js, res) == 1
            await publish(js, res, pod("ns", "c", "2"))
            await publish(js, res, pod("ns", "a", "3"), wire.DELETED)
            await until(lambda: sorted(follower.keys()) == ["ns/b", "ns/c"], what="live changes")
            assert ("add", "ns/c") in seen and ("delete", "ns/a") in seen
            # A restart re-reads the stream for both: what changed meanwhile reaches the follower.
            fresh_nats.kill()
            await asyncio.to_thread(fresh_nats.start)
            await until(lambda: nc.is_connected, what="reconnect")
            await publish(js, res, pod("ns", "b", "4", node="n2"), "MODIFIED")
            await marker(js, res, "4")
            await until(lambda: follower.last_resource_version == "4", what="the follower's marker")
            b = leader.get("ns", "b")
            assert b is not None and b.spec.node_name == "n2"
            assert sorted(follower.keys()) == sorted(leader.keys()) == ["ns/b", "ns/c"]
            assert await consumers_of(js, res) == 1
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await nc.close()

    uvloop.run(body())


def test_a_purged_stream_is_not_a_mass_delete(fresh_nats: NatsProc) -> None:
    async def body() -> None:
        nc, js = await connect(fresh_nats.url)
        res = new_resource()
        for i, name in enumerate(("a", "b", "c")):
            await publish(js, res, pod("ns", name, str(i + 1)))
        await marker(js, res, "3")
        store = cache.Cache(js, nc, res, PodView, heartbeat=0.5)
        rec = Recorder(store)
        task = asyncio.create_task(store.run())
        try:
            await asyncio.wait_for(store.wait_caught_up("3"), 15)
            rec.calls.clear()
            await js.purge_stream(wire.OBJECTS_STREAM)
            # A restart makes the cache re-read the (now empty) stream from scratch.
            fresh_nats.kill()
            await asyncio.to_thread(fresh_nats.start)
            # (Any handler call counts, so that a cache that reads the loss as deletes fails below.)
            await until(lambda: rec.calls or store.reset_pending, what="the cache noticing the loss")
            assert [c for c in rec.calls if c[0] == "delete"] == []
            assert sorted(store.keys()) == ["ns/a", "ns/b", "ns/c"]
            try:
                await asyncio.wait_for(store.wait_caught_up("3"), 1.0)
                raise AssertionError("caught up with a stream that lost its content")
            except TimeoutError:
                pass
            # The watcher republishes what exists now ("c" was deleted meanwhile), then a marker.
            await publish(js, res, pod("ns", "a", "1"), "SYNC")
            await publish(js, res, pod("ns", "b", "4"), "SYNC")
            await marker(js, res, "5")
            await asyncio.wait_for(store.wait_caught_up("5"), 15)
            assert rec.calls == [("update", "ns/b", "4", "2"), ("delete", "ns/c", "3")]
            assert not store.reset_pending
        finally:
            task.cancel()
            await nc.close()

    uvloop.run(body())


def test_current_resource_version_from_the_api_server(apiserver: ApiServer) -> None:
    async def body() -> None:
        client = kubeclient.KubeClient(kubeclient.load_connection(str(apiserver.kubeconfig)))
        try:
            res = gvr.Resource("", "v1", "configmaps")
            before = await catchup.current_resource_version(client, res)
            await client.create(
                kubeclient.resource_path("", "v1", "configmaps", "default"), {"metadata": {"name": "rv"}}
            )
            after = await catchup.current_resource_version(client, res)
            assert before and cache.rv_at_least(after, before) and not cache.rv_at_least(before, after)
        finally:
            await client.close()

    uvloop.run(body())


def test_memory_of_10000_pods(nats_server: NatsProc) -> None:
    async def body() -> None:
        nc, js = await connect(nats_server.url)
        res = new_resource()
        pods = []
        for i in range(10_000):
            obj = pod(f"ns{i % 10}", f"pod-{i}", str(i + 1), {"app": f"a{i % 50}"}, owner=f"rs-{i % 100}")
            obj["spec"]["containers"] = TYPICAL_CONTAINERS  # a typical pod body is 2-3 KB
            pods.append(obj)
        for start in range(0, len(pods), 500):
            await asyncio.gather(*(publish(js, res, obj) for obj in pods[start : start + 500]))
        try:
            for keep_raw in (False, True):
                store = cache.Cache(js, nc, res, PodView, keep_raw=keep_raw)
                used = await asyncio.wait_for(footprint.sync_footprint(store), 60)
                assert len(store) == 10_000
                print(f"cache of 10,000 small pods, keep_raw={keep_raw}: {used / 1e6:.1f} MB")
        finally:
            await nc.close()

    uvloop.run(body())
