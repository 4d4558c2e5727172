"""A replica that lost its partition writes nothing more: frozen, or cut off from NATS (invariant 8).

`kcm dev` runs everything but the ReplicaSet controller, with one work partition per
controller (so the replica that gets it back after a hand-over is never the old owner) and
an audit log of every write. Each test starts two replicas of the ReplicaSet controller
itself, throttled so that the scale-up of a few Deployments takes a while; the first one
started owns the partition. Mid-scale the owner is frozen (SIGSTOP: a GC pause, a VM
freeze), or its NATS connection is stalled by a proxy while the API server stays reachable,
until the other replica has taken the partition over and written; then it is resumed.

A watch running through the whole test records the peak of live pods per ReplicaSet: it
must never exceed spec. The audit log (User-Agent `kcm/replicaset-controller (<instance>)`)
must show no write by the old owner after the new owner's first write for a ReplicaSet.
Without write fencing the old owner goes on creating the pods its interrupted reconciles had
planned, after the new owner created them too.

The last test has a single replica, frozen until its grant lapsed and then granted the
partition back: the scale must still finish, with no more pods than spec at any time.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from tests.conftest import KCM, stop_process, wait_for
from tests.e2e import devstack

CONTROLLER = "replicaset-controller"
DEPLOYMENTS = ("alpha", "bravo", "charlie")
REPLICAS = 20
QPS = "5"  # per replica: 60 pods take the owner about 12 s, so the freeze lands mid-scale


@dataclass
class Stack:
    dev: devstack.DevStack
    audit: Path
    tmp: Path


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("fencing")
    audit = tmp / "audit.log"
    with devstack.dev_stack(
        tmp, "--controllers", "deployment", "--partitions", "1", "--audit-log-path", str(audit)
    ) as dev:
        yield Stack(dev, audit, tmp)


@contextmanager
def replica(
    stack: Stack, instance: str, nats_url: str | None = None, qps: str = QPS
) -> Iterator[subprocess.Popen[bytes]]:
    """`kcm controller replicaset-controller` as `instance`, at `qps` (and as many at once);
    resumed and stopped on the way out."""
    url = nats_url or (stack.dev.state / "nats.url").read_text().strip()
    argv = [
        KCM,
        "controller",
        CONTROLLER,
        "--kubeconfig",
        str(stack.dev.kubeconfig),
        "--nats-url",
        url,
        "--nats-nkey-seed",  # kcm dev's identity for a replicaset-controller replica started by hand
        str(stack.dev.state / "nats-auth" / "replicaset.nk"),
        "--ops-bind",
        "127.0.0.1",
        "--ops-port",
        "0",
        "--secure-port=0",
        "--instance",
        instance,
        "--kube-api-qps",
        qps,
        "--kube-api-burst",
        qps,
    ]
    with open(stack.tmp / f"{instance}.log", "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=log)
    try:
        yield proc
    finally:
        with suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)
        stop_process(proc)


def live(stack: Stack) -> list[str]:
    replicas: list[str] = stack.dev.status().get("controllers", {}).get(CONTROLLER, {}).get("replicas", [])
    return replicas


def owner(stack: Stack) -> str | None:
    info = stack.dev.status().get("controllers", {}).get(CONTROLLER, {})
    owner: str | None = info.get("partitions", {}).get("0")
    return owner


@dataclass
class PodPeaks:
    """Live (not deleting) pods per owning ReplicaSet, and the most each ever had, from a watch."""

    api: kubernetes.client.CoreV1Api
    namespace: str
    live: dict[str, set[str]] = field(default_factory=dict)
    peak: dict[str, int] = field(default_factory=dict)
    stopping: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    thread: threading.Thread | None = None
    failed: Exception | None = None

    def start(self) -> None:
        rv = self.api.list_namespaced_pod(self.namespace).metadata.resource_version  # type: ignore[union-attr]
        self.thread = threading.Thread(target=self._run, args=(rv,), daemon=True)
        self.thread.start()

    def _run(self, rv: str) -> None:
        try:
            while not self.stopping.is_set():
                rv = self._follow(rv)
        except Exception as exc:  # seen by the test through `failed`
            self.failed = exc
            raise

    def _follow(self, rv: str) -> str:
        watch = kubernetes.watch.Watch()
        for event in watch.stream(
            self.api.list_namespaced_pod,
            self.namespace,
            resource_version=rv,
            timeout_seconds=2,
            allow_watch_bookmarks=True,
        ):
            pod = event["raw_object"]
            if event["type"] == "ERROR":
                raise AssertionError(f"pod watch failed: {pod}")
            meta = pod["metadata"]
            rv = meta["resourceVersion"]
            owners = [r["name"] for r in meta.get("ownerReferences") or () if r.get("controller")]
            if event["type"] == "BOOKMARK" or not owners:
                continue
            with self.lock:
                pods = self.live.setdefault(owners[0], set())
                if event["type"] == "DELETED" or meta.get("deletionTimestamp"):
                    pods.discard(meta["name"])
                else:
                    pods.add(meta["name"])
                self.peak[owners[0]] = max(self.peak.get(owners[0], 0), len(pods))
        return rv

    def stop(self) -> None:
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(10)

    def total(self) -> int:
        assert self.failed is None, f"pod watch failed: {self.failed!r}"
        with self.lock:
            return sum(len(pods) for pods in self.live.values())

    def count(self, owner: str) -> int:
        assert self.failed is None, f"pod watch failed: {self.failed!r}"
        with self.lock:
            return len(self.live.get(owner, ()))


class StallingProxy:
    """A TCP proxy to a local port that can stall: bytes stop flowing, sockets stay open."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.flowing = threading.Event()
        self.flowing.set()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                return
            self.sockets += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                self.flowing.wait()
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def stall(self) -> None:
        self.flowing.clear()

    def resume(self) -> None:
        self.flowing.set()

    def close(self) -> None:
        self.resume()
        self.listener.close()
        for sock in self.sockets:
            with suppress(OSError):
                sock.close()


def create_deployments(
    stack: Stack, ns: str, names: tuple[str, ...] = DEPLOYMENTS, replicas: int = REPLICAS
) -> None:
    stack.dev.kubectl("create", "namespace", ns)
    docs = [
        textwrap.dedent(f"""\
            apiVersion: apps/v1
            kind: Deployment
            metadata: {{name: {name}, namespace: {ns}}}
            spec:
              replicas: {replicas}
              selector: {{matchLabels: {{app: {name}}}}}
              template:
                metadata: {{labels: {{app: {name}}}}}
                spec:
                  containers: [{{name: c, image: nginx}}]
            """)
        for name in names
    ]
    stack.dev.kubectl("apply", "-f", "-", input="---\n".join(docs))


def replicasets(stack: Stack, ns: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(stack.dev.kubectl("get", "rs", "-n", ns, "-o", "json").stdout)[
        "items"
    ]
    return items


def converged(stack: Stack, ns: str, peaks: PodPeaks) -> bool:
    sets = replicasets(stack, ns)
    return len(sets) == len(DEPLOYMENTS) and all(
        rs.get("status", {}).get("replicas") == REPLICAS and peaks.count(rs["metadata"]["name"]) == REPLICAS
        for rs in sets
    )


def writers(audit: Path, ns: str, names: list[str]) -> dict[str, list[str]]:
    """ReplicaSet name -> the instances of the ReplicaSet controller that wrote for it, in order
    (the ReplicaSet itself, its pods `<rs>-xxxxx`, its Events `<rs>.<hex>`)."""
    prefix = f"kcm/{CONTROLLER} ("
    out: dict[str, list[str]] = {name: [] for name in names}
    for line in audit.read_text().splitlines():
        event = json.loads(line)
        agent, ref = event.get("userAgent", ""), event.get("objectRef", {})
        if not agent.startswith(prefix) or ref.get("namespace") != ns:
            continue
        instance = agent[len(prefix) : -1]
        obj = ref.get("name", "")
        for name in names:
            if obj == name or obj.startswith((name + "-", name + ".")):
                out[name].append(instance)
    return out


def run_scenario(stack: Stack, ns: str, old: str, new: str, interrupt: Any, resume: Any) -> None:
    api = kubernetes.client.CoreV1Api(stack.dev.api())
    peaks = PodPeaks(api, ns)
    peaks.start()
    try:
        create_deployments(stack, ns)
        wait_for(lambda: peaks.total() >= 8, 60, 0.05, "the scale-up under way")
        interrupt()
        try:
            assert peaks.total() < len(DEPLOYMENTS) * REPLICAS, "the scale-up finished: nothing was tested"
            wait_for(lambda: owner(stack) == new, 60, 0.2, f"{new} taking the partition over")
            names = [rs["metadata"]["name"] for rs in replicasets(stack, ns)]
            wait_for(
                lambda: any(new in w for w in writers(stack.audit, ns, names).values()),
                60,
                0.2,
                f"{new} writing",
            )
        finally:
            resume()
        wait_for(lambda: converged(stack, ns, peaks), 180, 0.5, f"{REPLICAS} pods per ReplicaSet")
    finally:
        peaks.stop()
    assert peaks.peak and all(n <= REPLICAS for n in peaks.peak.values()), f"peaks {peaks.peak}"
    names = [rs["metadata"]["name"] for rs in replicasets(stack, ns)]
    for name, order in writers(stack.audit, ns, names).items():
        if new in order:
            late = order[order.index(new) :].count(old)
            assert late == 0, f"{old} wrote {late} times for {name} after {new} did: {order}"


def test_frozen_owner_writes_nothing_after_the_hand_over(stack: Stack) -> None:
    old, new = "fence-frozen-old", "fence-frozen-new"
    with replica(stack, old) as proc:
        wait_for(lambda: owner(stack) == old, 60, 0.2, f"{old} owning the partition")
        with replica(stack, new):
            wait_for(lambda: new in live(stack), 60, 0.2, f"{new} live")
            run_scenario(
                stack,
                "fence-frozen",
                old,
                new,
                lambda: os.kill(proc.pid, signal.SIGSTOP),
                lambda: os.kill(proc.pid, signal.SIGCONT),
            )


def test_owner_cut_off_from_nats_writes_nothing_after_the_hand_over(stack: Stack) -> None:
    old, new = "fence-stalled-old", "fence-stalled-new"
    nats_port = int((stack.dev.state / "nats.url").read_text().strip().rsplit(":", 1)[1])
    proxy = StallingProxy(nats_port)
    try:
        with replica(stack, old, f"nats://127.0.0.1:{proxy.port}"):
            wait_for(lambda: owner(stack) == old, 60, 0.2, f"{old} owning the partition")
            with replica(stack, new):
                wait_for(lambda: new in live(stack), 60, 0.2, f"{new} live")
                run_scenario(stack, "fence-stalled", old, new, proxy.stall, proxy.resume)
    finally:
        proxy.close()


def test_owner_frozen_past_its_lease_and_granted_back_finishes_the_scale(stack: Stack) -> None:
    """The only replica, frozen mid-sync until its grant lapsed, gets the partition back. Its
    stop cancels the sync it froze in (the rest of that slow-start batch outlasts the drain at
    one write a second), and the ReplicaSet must not keep expecting the pods the cancelled sync
    never created: with those expectations kept, it made none for five minutes (issue 33)."""
    instance, ns, name = "fence-lapsed", "fence-lapsed", "delta"
    replicas = 1 + 2 + 4 + 8 + 16  # slow start's batches: the last one is frozen in
    api = kubernetes.client.CoreV1Api(stack.dev.api())
    with replica(stack, instance, qps="1") as proc:
        wait_for(lambda: owner(stack) == instance, 60, 0.2, f"{instance} owning the partition")
        peaks = PodPeaks(api, ns)
        peaks.start()
        try:
            create_deployments(stack, ns, (name,), replicas)
            wait_for(lambda: peaks.total() >= 17, 60, 0.05, "the batch of 16 under way")
            os.kill(proc.pid, signal.SIGSTOP)
            try:
                # The coordinator counts it gone once its lease is over; so does its own clock.
                wait_for(lambda: owner(stack) is None, 30, 0.2, "the grant lapsing")
            finally:
                os.kill(proc.pid, signal.SIGCONT)
            assert peaks.total() < replicas, "the scale-up finished: nothing was tested"
            wait_for(lambda: owner(stack) == instance, 60, 0.2, f"{instance} owning the partition again")
            # Well within the expectations' five minutes, which would end a wait for lost pods.
            wait_for(lambda: peaks.total() == replicas, 120, 0.5, f"{replicas} pods")
        finally:
            peaks.stop()
        for resource in ("core/v1/pods", "apps/v1/replicasets"):
            resyncs = stack.dev.metric(CONTROLLER, "kcm_cache_resyncs_total", resource=resource)
            assert resyncs <= 1, f"the cache of {resource} re-read its stream {resyncs:.0f} times"
    # Forgetting the expectations never made it create pods the stale cache did not show yet.
    assert peaks.peak and all(n <= replicas for n in peaks.peak.values()), f"peaks {peaks.peak}"
    log = (stack.tmp / f"{instance}.log").read_text(errors="replace")
    assert "reconcile outlived the partition hand-over" in log, "no sync was cancelled: nothing was tested"
