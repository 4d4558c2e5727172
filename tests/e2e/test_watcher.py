"""`kcm watcher` end to end: a real API server, a real nats-server, the watcher as a subprocess.

A test reads the KCM_OBJECTS stream with nats-py and compares it with the API server's state:
what the stream holds per subject (its last message) must be the object's latest state, a
tombstone for deleted objects, and unchanged objects must keep their stream sequence across
restarts (no duplicate flood).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import pytest
import uvloop
from kcm_shared.apimachinery import codec, gvr
from kcm_shared.bus import natsconn, subjects, wire
from kcm_shared.runtime import cache
from nats.js import api

from tests.conftest import (
    KCM,
    ApiServer,
    NatsProc,
    kill_process,
    start_apiserver,
    start_nats,
    stop_process,
    wait_for,
)
from tests.e2e.streams import Entry, stream_state

CM = gvr.Resource("", "v1", "configmaps")


# -- helpers ----------------------------------------------------------------------------------


async def _last_on(url: str, subject: str) -> Entry | None:
    nc = await nats.connect(url, connect_timeout=2, max_reconnect_attempts=0)
    try:
        msg = await nc.jetstream().get_last_msg(wire.OBJECTS_STREAM, subject)
    except nats.js.errors.NotFoundError:
        return None
    finally:
        await nc.close()
    return Entry(msg.seq or 0, dict(msg.headers or {}), msg.data or b"")


def last_on(server: NatsProc, subject: str) -> Entry:
    """The newest message on one subject, read directly: a last-per-subject consumer can miss a
    subject whose message is replaced while it walks the stream (the per-subject limit deletes
    the one it was about to deliver)."""
    return uvloop.run(_last_on(server.url, subject)) or Entry(0, {}, b"")


def cm_subject(name: str, namespace: str = "default") -> str:
    return subjects.object_subject(CM, namespace, name)


async def _request(url: str, subject: str, body: dict[str, Any], wait: float) -> dict[str, Any]:
    nc = await nats.connect(url)
    try:
        reply = await nc.request(subject, json.dumps(body).encode(), timeout=wait)
        result: dict[str, Any] = json.loads(reply.data)
        return result
    finally:
        await nc.close()


@dataclass
class WatcherProc:
    proc: subprocess.Popen[bytes]
    log_path: Path

    def ops_port(self) -> int:
        def port() -> int | None:
            found = re.search(r'"ops endpoint serving".*?"port": (\d+)', self.log_path.read_text())
            return int(found.group(1)) if found else None

        found: int = wait_for(port, 20, what="the watcher's ops endpoint")
        return found

    def metric(self, metric: str, **labels: str) -> float:
        text = (
            urllib.request.urlopen(f"http://127.0.0.1:{self.ops_port()}/metrics", timeout=5).read().decode()
        )
        total = 0.0
        for line in text.splitlines():
            if not line.startswith(metric + "{") and not line.startswith(metric + " "):
                continue
            if all(f'{k}="{v}"' in line for k, v in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def health(self, check: str) -> int:
        return self.health_of(check)[0]

    def health_of(self, check: str) -> tuple[int, str]:
        """The status and text of one check."""
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.ops_port()}/healthz/{check}", timeout=5
            ) as r:
                return int(r.status), r.read().decode()
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read().decode()

    def kill(self) -> None:
        kill_process(self.proc)

    def stop(self) -> None:
        stop_process(self.proc)


def start_watcher(api_server: ApiServer, nats_proc: NatsProc, log_path: Path, *extra: str) -> WatcherProc:
    args = [
        KCM,
        "watcher",
        "--kubeconfig",
        str(api_server.kubeconfig),
        "--nats-url",
        nats_proc.url,
        "--ops-port",
        "0",
        "--ops-bind",
        "127.0.0.1",
        "--discovery-interval",
        "1s",
        *extra,
    ]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=log)
    return WatcherProc(proc, log_path)


@pytest.fixture()
def watchers(tmp_path: Path) -> Iterator[list[WatcherProc]]:
    started: list[WatcherProc] = []
    yield started
    for w in started:
        w.stop()
    for w in started:
        if w.proc.returncode not in (0, -signal.SIGKILL, -signal.SIGTERM):
            raise AssertionError(f"watcher exited {w.proc.returncode}: {w.log_path.read_text()[-3000:]}")


def core_api(api_server: ApiServer) -> Any:
    client, api_client = api_server.client()
    return client.CoreV1Api(api_client)


def create_cm(core: Any, name: str, data: dict[str, str] | None = None) -> Any:
    return core.create_namespaced_config_map(
        "default", {"metadata": {"name": name}, "data": data or {"k": "v"}}
    )


def api_configmaps(api_server: ApiServer) -> dict[str, str]:
    """subject -> resourceVersion of every ConfigMap in the API server."""
    items = api_server.kubectl_json("get", "configmaps", "-A")["items"]
    return {
        cm_subject(i["metadata"]["name"], i["metadata"]["namespace"]): i["metadata"]["resourceVersion"]
        for i in items
    }


def stream_matches_api(nats_proc: NatsProc, api_server: ApiServer, deleted: tuple[str, ...] = ()) -> bool:
    """The stream holds exactly the API's ConfigMaps at their resourceVersions, and tombstones
    for the `deleted` names."""
    want = api_configmaps(api_server)
    held = stream_state(nats_proc, subjects.object_filter(CM))
    live = {s: e.rv for s, e in held.items() if e.event != "DELETED"}
    tombstoned = all(held.get(cm_subject(name), Entry(0, {}, b"")).event == "DELETED" for name in deleted)
    return live == want and tombstoned


def registered_watches(server: ApiServer) -> float:
    text = urllib.request.urlopen(f"{server.url}/metrics", timeout=5).read().decode()
    found = re.search(r"^apiserver_registered_watchers (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


class Follower:
    """Follows one ConfigMap from now on, in a thread of its own: every message the stream
    takes for its subject, and every state a cache of ConfigMaps holds for it, in order."""

    def __init__(self, nats_proc: NatsProc, name: str) -> None:
        self.subject = cm_subject(name)
        self.key = f"default/{name}"
        self.stream: list[tuple[str, str]] = []  # (event, resourceVersion)
        self.cached: list[str] = []  # resourceVersions the cache held, in order
        self._url = nats_proc.url
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=lambda: uvloop.run(self._run()), daemon=True)

    def __enter__(self) -> Follower:
        self._thread.start()
        assert self._ready.wait(20), "the follower did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(20)

    async def _run(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        nc = await natsconn.connect(natsconn.NatsOptions(url=self._url), "test-follower")
        js = nc.jetstream()

        async def on_msg(msg: Any) -> None:
            headers = msg.headers or {}
            self.stream.append((headers.get("Kcm-Event", ""), headers.get("Kcm-Resource-Version", "")))

        sub = await js.subscribe(
            self.subject, ordered_consumer=True, deliver_policy=api.DeliverPolicy.NEW, cb=on_msg
        )
        store = cache.Cache(js, nc, CM, codec.Meta, heartbeat=1.0)

        def held(obj: codec.Meta) -> None:
            if codec.key_of(obj) == self.key:
                self.cached.append(obj.metadata.resource_version)

        store.add_handler(held, lambda _, obj: held(obj))
        task = asyncio.ensure_future(store.run())
        await store.wait_synced()
        self._ready.set()
        await self._stop.wait()
        task.cancel()
        await sub.unsubscribe()
        await nc.close()


# -- tests ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def running(
    apiserver: ApiServer, nats_server: NatsProc, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WatcherProc]:
    w = start_watcher(
        apiserver, nats_server, tmp_path_factory.mktemp("watcher") / "watcher.log", "--leader-elect=false"
    )
    # Listed once: from here on every change arrives through the watch.
    wait_for(lambda: last_on(nats_server, subjects.progress_subject(CM)).seq, what="first list")
    yield w
    w.stop()


def test_changes_are_published_with_headers_and_deletes_leave_tombstones(
    apiserver: ApiServer, nats_server: NatsProc, running: WatcherProc
) -> None:
    core = core_api(apiserver)
    create_cm(core, "app.config", {"a": "1"})
    patched = core.patch_namespaced_config_map("app.config", "default", {"data": {"a": "2"}})
    create_cm(core, "short-lived")
    wait_for(lambda: last_on(nats_server, cm_subject("short-lived")).seq, what="short-lived published")
    deleted_rv = core.read_namespaced_config_map("short-lived", "default").metadata.resource_version
    core.delete_namespaced_config_map("short-lived", "default")

    subject = "kcm.obj.core.v1.configmaps.default.app~2Econfig"  # the dot is escaped (docs/bus.md)

    def settled() -> dict[str, Entry] | None:
        state = stream_state(nats_server)
        done = state.get(subject) and state[subject].rv == patched.metadata.resource_version
        tomb = state.get(cm_subject("short-lived"))
        return state if done and tomb is not None and tomb.event == "DELETED" else None

    state = wait_for(settled, what="update and delete published")
    entry = state[subject]
    assert entry.event == "MODIFIED"
    body = json.loads(entry.data)
    assert body["kind"] == "ConfigMap" and body["apiVersion"] == "v1"
    assert body["data"] == {"a": "2"}
    assert body["metadata"]["resourceVersion"] == patched.metadata.resource_version
    assert re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}", entry.headers["traceparent"])
    assert (
        entry.headers["Nats-Msg-Id"] == f"{patched.metadata.uid}:{patched.metadata.resource_version}:MODIFIED"
    )
    tomb = state[cm_subject("short-lived")]
    assert "Nats-TTL" in tomb.headers
    assert json.loads(tomb.data)["metadata"]["name"] == "short-lived"
    assert int(tomb.rv) > int(deleted_rv)
    # Objects that existed before the watcher started came in through its first list.
    ns = state["kcm.obj.core.v1.namespaces._.kube-system"]
    assert ns.event in ("SYNC", "ADDED", "MODIFIED")
    assert json.loads(ns.data)["kind"] == "Namespace"
    progress = state[subjects.progress_subject(CM)]
    assert progress.data == b"" and int(progress.rv) >= 1
    assert running.metric("kcm_watcher_events_total", resource="core/v1/configmaps", type="DELETED") >= 1
    assert running.metric("kcm_watcher_published_total") > 0
    assert running.health("watcher") == 200 and running.health("nats") == 200


CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
"""


def test_custom_resources_of_a_crd_created_later_are_published(
    apiserver: ApiServer, nats_server: NatsProc, running: WatcherProc
) -> None:
    apiserver.kubectl("apply", "-f", "-", input=CRD)
    widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w.1, namespace: default}\nsize: 3\n"
    wait_for(
        lambda: "created" in apiserver.kubectl("apply", "-f", "-", input=widget, check=False),
        what="widget created",
    )
    subject = subjects.object_subject(gvr.Resource("example.com", "v1", "widgets"), "default", "w.1")
    data = wait_for(lambda: last_on(nats_server, subject).data, what="widget published")
    assert json.loads(data)["size"] == 3


def test_sync_request_answers_once_the_stream_reached_the_resource_version(
    apiserver: ApiServer, nats_server: NatsProc, running: WatcherProc
) -> None:
    core = core_api(apiserver)
    rv = create_cm(core, "sync-probe").metadata.resource_version
    for res in (CM, gvr.Resource("apps", "v1", "deployments")):
        body = {"group": res.group, "version": res.version, "resource": res.resource, "resourceVersion": rv}
        reply = uvloop.run(_request(nats_server.url, wire.WATCHER_SYNC, body, wait=20))
        assert reply["ok"] is True, reply
        assert int(reply["resourceVersion"]) >= int(rv)
        marker = last_on(nats_server, subjects.progress_subject(res))
        assert int(marker.rv) >= int(rv)
    # The created object is in the stream by the time the reply says so.
    assert last_on(nats_server, cm_subject("sync-probe")).rv == rv
    unknown = {"group": "nope.io", "version": "v1", "resource": "things", "resourceVersion": rv}
    reply = uvloop.run(_request(nats_server.url, wire.WATCHER_SYNC, unknown, wait=20))
    assert reply["ok"] is False and "not watched" in reply["error"]


def test_an_expired_tombstone_frees_its_subject_without_a_relist(
    apiserver: ApiServer, nats_server: NatsProc, running: WatcherProc
) -> None:
    core = core_api(apiserver)
    create_cm(core, "reborn")
    core.delete_namespaced_config_map("reborn", "default")
    subject = cm_subject("reborn")
    wait_for(lambda: last_on(nats_server, subject).event == "DELETED", what="tombstone")
    resets = running.metric("kcm_watcher_relists_total", reason="reset")

    async def expire() -> None:  # what Nats-TTL does to the tombstone an hour later
        nc = await nats.connect(nats_server.url)
        await nc.jetstream().purge_stream(wire.OBJECTS_STREAM, subject=subject)
        await nc.close()

    uvloop.run(expire())
    # The watcher expects the tombstone's sequence: the subject is empty now, which is no loss.
    rv = create_cm(core, "reborn").metadata.resource_version
    wait_for(lambda: last_on(nats_server, subject).rv == rv, what="re-created")
    assert last_on(nats_server, subject).event == "ADDED"
    assert running.metric("kcm_watcher_relists_total", reason="reset") == resets


def test_restart_republishes_only_what_changed_while_down(
    fresh_apiserver: ApiServer, fresh_nats: NatsProc, watchers: list[WatcherProc], tmp_path: Path
) -> None:
    core = core_api(fresh_apiserver)
    for i in range(20):
        create_cm(core, f"cm-{i}")
    flags = ("--leader-elect=false", "--resources", "v1/configmaps")
    watchers.append(start_watcher(fresh_apiserver, fresh_nats, tmp_path / "w1.log", *flags))
    wait_for(lambda: stream_matches_api(fresh_nats, fresh_apiserver), what="first list published")
    before = stream_state(fresh_nats, subjects.object_filter(CM))

    # Changes keep coming while the watcher dies and comes back.
    stop = threading.Event()

    def churn() -> None:
        n = 0
        while not stop.is_set():
            core.patch_namespaced_config_map(f"cm-{n % 4}", "default", {"data": {"n": str(n)}})
            n += 1

    churner = threading.Thread(target=churn)
    churner.start()
    try:
        wait_for(lambda: last_on(fresh_nats, cm_subject("cm-0")).event == "MODIFIED", what="churn seen")
        watchers[0].kill()
        core.delete_namespaced_config_map("cm-10", "default")
        create_cm(core, "cm-new")
        core.patch_namespaced_config_map("cm-11", "default", {"data": {"k": "changed"}})
        watchers.append(start_watcher(fresh_apiserver, fresh_nats, tmp_path / "w2.log", *flags))
        wait_for(lambda: last_on(fresh_nats, cm_subject("cm-new")).seq, what="restarted watcher publishes")
    finally:
        stop.set()
        churner.join(10)
    wait_for(
        lambda: stream_matches_api(fresh_nats, fresh_apiserver, ("cm-10",)),
        what="stream caught up after restart",
    )
    after = stream_state(fresh_nats, subjects.object_filter(CM))
    assert after[cm_subject("cm-10")].event == "DELETED"
    assert after[cm_subject("cm-new")].event == "SYNC"
    assert after[cm_subject("cm-11")].event == "SYNC"
    untouched = [cm_subject(f"cm-{i}") for i in range(4, 20) if i not in (10, 11)]
    # Not republished: the very same stream message still stands for each of them.
    assert {s: after[s].seq for s in untouched} == {s: before[s].seq for s in untouched}


def test_expired_watch_relists_and_publishes_the_missed_delete(
    tmp_path: Path, fresh_nats: NatsProc, watchers: list[WatcherProc]
) -> None:
    server = start_apiserver(tmp_path / "api", "--watch-history", "5")
    try:
        core = core_api(server)
        create_cm(core, "victim")
        flags = ("--leader-elect=false", "--resources", "v1/configmaps", "--watch-timeout", "1s")
        watcher = start_watcher(server, fresh_nats, tmp_path / "w.log", *flags)
        watchers.append(watcher)
        wait_for(lambda: stream_matches_api(fresh_nats, server), what="first list published")

        wait_for(lambda: registered_watches(server) >= 1, what="watch open")
        os.kill(watcher.proc.pid, signal.SIGSTOP)
        try:
            # The server ends the watch on its timeout; what happens next is not in the watch.
            wait_for(lambda: registered_watches(server) == 0, what="watch ended by the server")
            core.delete_namespaced_config_map("victim", "default")
            for i in range(8):  # more changes than the server's history keeps
                create_cm(core, f"filler-{i}")
        finally:
            os.kill(watcher.proc.pid, signal.SIGCONT)
        wait_for(
            lambda: stream_matches_api(fresh_nats, server, ("victim",)), what="stream caught up after 410"
        )
        assert (
            watcher.metric("kcm_watcher_relists_total", resource="core/v1/configmaps", reason="expired") >= 1
        )
    finally:
        server.stop()


def test_standby_takes_over_when_the_leader_dies(
    fresh_apiserver: ApiServer, fresh_nats: NatsProc, watchers: list[WatcherProc], tmp_path: Path
) -> None:
    flags = (
        "--resources",
        "v1/configmaps",
        "--leader-elect-lease-duration",
        "3s",
        "--leader-elect-renew-deadline",
        "2s",
        "--leader-elect-retry-period",
        "0.5s",
    )
    for name in ("a", "b"):
        watchers.append(
            start_watcher(fresh_apiserver, fresh_nats, tmp_path / f"{name}.log", "--instance", name, *flags)
        )
    core = core_api(fresh_apiserver)
    client, api_client = fresh_apiserver.client()
    coordination = client.CoordinationV1Api(api_client)

    def holder() -> str | None:
        try:
            return str(
                coordination.read_namespaced_lease("kcm-watcher", "kube-system").spec.holder_identity or ""
            )
        except client.ApiException:
            return None

    leader_name = wait_for(holder, what="a leader")
    leader, standby = (watchers[0], watchers[1]) if leader_name == "a" else (watchers[1], watchers[0])
    create_cm(core, "before")
    wait_for(lambda: last_on(fresh_nats, cm_subject("before")).seq, what="leader publishes")
    assert standby.metric("kcm_watcher_published_total") == 0
    assert standby.metric("leader_election_master_status", name="kcm-watcher") == 0

    leader.kill()
    core.delete_namespaced_config_map("before", "default")
    create_cm(core, "after")
    wait_for(lambda: stream_matches_api(fresh_nats, fresh_apiserver, ("before",)), what="standby took over")
    assert standby.metric("leader_election_master_status", name="kcm-watcher") == 1


def test_nats_killed_mid_load_loses_no_change(
    fresh_apiserver: ApiServer, tmp_path: Path, watchers: list[WatcherProc]
) -> None:
    nats_proc = start_nats(tmp_path / "nats")
    core = core_api(fresh_apiserver)
    create_cm(core, "seed")
    try:
        watchers.append(
            start_watcher(
                fresh_apiserver,
                nats_proc,
                tmp_path / "w.log",
                "--leader-elect=false",
                "--resources",
                "v1/configmaps",
                "--publish-failure-limit",
                "1s",
            )
        )
        wait_for(lambda: stream_matches_api(nats_proc, fresh_apiserver), what="first list published")
        for i in range(30):
            create_cm(core, f"load-{i}")
        nats_proc.kill()
        for i in range(30, 60):
            create_cm(core, f"load-{i}")
        core.delete_namespaced_config_map("load-0", "default")
        watcher = watchers[0]
        wait_for(lambda: watcher.health("nats") == 500, what="nats check failing while NATS is down")
        code, text = watcher.health_of("nats")
        # Per resource: the check names the one that cannot publish.
        assert code == 500 and text.startswith("core/v1/configmaps: publishing has failed for"), text
        nats_proc.start()
        for i in range(60, 90):
            create_cm(core, f"load-{i}")
        wait_for(
            lambda: stream_matches_api(nats_proc, fresh_apiserver, ("load-0",)),
            40,
            what="every change in the stream",
        )
        wait_for(lambda: watcher.health("nats") == 200, what="nats check healthy again")
    finally:
        nats_proc.stop()


def test_a_deposed_watcher_cannot_put_an_older_state_over_a_newer_one(
    fresh_apiserver: ApiServer, fresh_nats: NatsProc, watchers: list[WatcherProc], tmp_path: Path
) -> None:
    """Split brain: the old publisher, frozen with changes in its watch, resumes after a new one
    published a newer state of the same object. Neither the stream nor a cache goes back."""
    core = core_api(fresh_apiserver)
    create_cm(core, "contested")
    flags = ("--leader-elect=false", "--resources", "v1/configmaps")
    old = start_watcher(fresh_apiserver, fresh_nats, tmp_path / "old.log", *flags)
    watchers.append(old)
    wait_for(lambda: stream_matches_api(fresh_nats, fresh_apiserver), what="first list published")
    wait_for(lambda: registered_watches(fresh_apiserver) >= 1, what="the old watcher's watch open")
    with Follower(fresh_nats, "contested") as follower:
        os.kill(old.proc.pid, signal.SIGSTOP)
        try:
            # Both changes wait in the frozen watcher's watch; the new one lists the last.
            core.patch_namespaced_config_map("contested", "default", {"data": {"k": "2"}})
            newest = core.patch_namespaced_config_map("contested", "default", {"data": {"k": "3"}})
            rv = newest.metadata.resource_version
            new = start_watcher(fresh_apiserver, fresh_nats, tmp_path / "new.log", *flags)
            watchers.append(new)
            wait_for(lambda: last_on(fresh_nats, cm_subject("contested")).rv == rv, what="newer state")
        finally:
            os.kill(old.proc.pid, signal.SIGCONT)
        wait_for(
            lambda: (
                old.metric("kcm_watcher_events_total", resource="core/v1/configmaps", type="MODIFIED") >= 2
                and old.metric("kcm_watcher_inflight_publishes") == 0
            ),
            what="the old watcher handled its late events",
        )
        assert last_on(fresh_nats, cm_subject("contested")).rv == rv
        wait_for(lambda: follower.cached and follower.cached[-1] == rv, what="the cache has the newest")
    versions = [int(v) for _, v in follower.stream]
    assert versions == sorted(versions), f"the stream went back in time: {follower.stream}"
    cached = [int(v) for v in follower.cached]
    assert cached == sorted(cached), f"the cache went back in time: {follower.cached}"
