"""The bus under faults users and operators cause: objects larger than NATS takes, and a lost
NATS store, against a stack of real processes (apiserver, nats-server, watcher, coordinator,
the deployment and ReplicaSet controllers).

The nats-server takes messages of at most MAX_PAYLOAD bytes (a config file of the test's),
so an object a few times that size stands for one of kube-apiserver's 1.5 MiB under NATS'
default 1 MiB. The NATS store is wiped by killing the server, removing its directory and
starting it again on the same port. Like `kcm dev`, the stack restarts a service that dies,
and the tests check that none had to be.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kcm_cli import natsd
from kcm_shared.apimachinery import gvr
from kcm_shared.bus import subjects

from tests.conftest import KCM, ApiServer, NatsProc, start_apiserver, wait_for
from tests.e2e.bus_stack import FAST_LEASE, REPO, Proc
from tests.e2e.streams import stream_state

MAX_PAYLOAD = 64 * 1024
DEPLOYMENTS = gvr.Resource("apps", "v1", "deployments")
RESOURCES = "apps/v1/deployments,apps/v1/replicasets,v1/pods"


class Stack:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.api: ApiServer = start_apiserver(workdir / "api")
        conf = workdir / "nats.conf"
        conf.write_text(f"max_payload: {MAX_PAYLOAD}\n")
        planned = natsd.plan(workdir / "jetstream")
        args = [planned.args()[0], "-c", str(conf), *planned.args()[1:]]
        self.nats = NatsProc(planned.url, planned.port, planned.store_dir, args, workdir / "nats.log")
        self.nats.start()
        self.procs: list[Proc] = []
        self.watcher = self._proc("watcher", "--leader-elect=false", "--resources", RESOURCES)
        self._proc("coordinator", *FAST_LEASE, "--partitions", "2", "--member-lease", "2s")
        self._proc("controllers", "--controllers", "deployment,replicaset")
        self.restarts: list[str] = []
        self._stopping = threading.Event()
        self._supervisor = threading.Thread(target=self._supervise, daemon=True)
        self._supervisor.start()

    def _supervise(self) -> None:
        while not self._stopping.wait(0.5):
            for proc in self.procs:
                if not proc.alive() and not self._stopping.is_set():
                    self.restarts.append(proc.name)
                    proc.start()

    def _proc(self, service: str, *args: str) -> Proc:
        port = natsd.free_port()
        argv = [KCM, service, *args]
        argv += ["--kubeconfig", str(self.api.kubeconfig), "--nats-url", self.nats.url]
        argv += ["--ops-bind", "127.0.0.1", "--ops-port", str(port), "--instance", service]
        if service in ("controller", "controllers"):
            argv.append("--secure-port=0")  # probed on the plain ops port
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = Proc(service, argv, self.workdir / f"{service}.log", env, port).start()
        self.procs.append(proc)
        return proc

    def kubectl(self, *args: str, input: str | None = None) -> str:
        return self.api.kubectl(*args, input=input)

    def pods(self, ns: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.api.kubectl_json("get", "pods", "-n", ns)["items"]
        return items

    def stop(self) -> None:
        self._stopping.set()
        self._supervisor.join(5)
        for proc in reversed(self.procs):
            proc.stop()
        self.nats.stop()
        self.api.stop()

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.log.read_text()[-4000:]}" for p in self.procs if p.log.exists())


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = Stack(tmp_path_factory.mktemp("faults"))
    try:
        wait_for(lambda: s.watcher.get("/healthz")[0] == 200, 60, 0.2, "the watcher up")
        yield s
    finally:
        s.stop()


def deployment(ns: str, name: str, replicas: int, env_bytes: int = 0) -> str:
    env = ""
    if env_bytes:
        # Many variables, as a generated config would have; their size is what matters.
        count = env_bytes // 1000 + 1
        env = "".join(f"\n        - {{name: V{i}, value: '{'x' * 990}'}}" for i in range(count))
        env = f"\n        env:{env}"
    return f"""
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: {ns}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers:
      - name: c
        image: nginx{env}
"""


def owned_pods(stack: Stack, ns: str, app: str) -> list[dict[str, Any]]:
    return [p for p in stack.pods(ns) if p["metadata"].get("labels", {}).get("app") == app]


def test_an_object_larger_than_max_payload_is_reconciled_and_wedges_nothing(stack: Stack) -> None:
    ns = "big"
    stack.kubectl("create", "namespace", ns)
    stack.kubectl("apply", "-f", "-", input=deployment(ns, "big", 2, env_bytes=3 * MAX_PAYLOAD))
    try:
        # Its ReplicaSet and pods are as large (they copy the template): all go through fetches.
        wait_for(lambda: len(owned_pods(stack, ns, "big")) == 2, 60, 0.5, "the big Deployment's pods")
        stack.kubectl("apply", "-f", "-", input=deployment(ns, "after", 1))
        wait_for(lambda: len(owned_pods(stack, ns, "after")) == 1, 60, 0.5, "a later Deployment's pod")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{stack.logs()}") from None
    entry = stream_state(stack.nats, subjects.object_filter(DEPLOYMENTS))[
        subjects.object_subject(DEPLOYMENTS, ns, "big")
    ]
    assert entry.data == b"" and int(entry.headers["Kcm-Too-Large"]) > MAX_PAYLOAD
    assert entry.headers["Kcm-Event"] in ("ADDED", "MODIFIED", "SYNC")
    assert stack.watcher.get("/healthz")[0] == 200


class PodEvents:
    """Every pod event in a namespace from now on (a watch in a thread), to prove none happened."""

    def __init__(self, stack: Stack, ns: str) -> None:
        client, api_client = stack.api.client()
        self._core = client.CoreV1Api(api_client)
        self._ns = ns
        self.events: list[tuple[str, str]] = []  # (type, pod name)
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._rv = self._core.list_namespaced_pod(ns).metadata.resource_version
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from kubernetes import watch

        try:
            while not self._stop.is_set():
                w = watch.Watch()
                for event in w.stream(
                    self._core.list_namespaced_pod, self._ns, resource_version=self._rv, timeout_seconds=2
                ):
                    pod = event["object"]
                    self._rv = pod.metadata.resource_version
                    if event["type"] in ("ADDED", "DELETED") or pod.metadata.deletion_timestamp:
                        self.events.append((event["type"], pod.metadata.name))
        except BaseException as exc:  # a watch that broke saw nothing: the test must not pass
            self.error = exc

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        assert self.error is None, f"the pod watch failed: {self.error!r}"


def test_a_wiped_nats_store_is_not_a_mass_delete_and_the_stack_recovers(stack: Stack) -> None:
    ns = "wipe"
    stack.kubectl("create", "namespace", ns)
    stack.kubectl("apply", "-f", "-", input=deployment(ns, "web", 3))
    wait_for(lambda: len(owned_pods(stack, ns, "web")) == 3, 60, 0.5, "three pods")
    before = {p["metadata"]["uid"] for p in owned_pods(stack, ns, "web")}
    events = PodEvents(stack, ns)
    try:
        stack.nats.kill()
        shutil.rmtree(stack.nats.store_dir)
        stack.nats.start()
        # The watcher republishes the objects the store lost.
        web = subjects.object_subject(DEPLOYMENTS, ns, "web")
        wait_for(lambda: web in stream_state(stack.nats), 60, 0.5, "the Deployment republished")
        stack.kubectl("scale", "deployment", "web", "-n", ns, "--replicas=5")
        wait_for(lambda: len(owned_pods(stack, ns, "web")) == 5, 60, 0.5, "the scale to 5 acted on")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{stack.logs()}") from None
    finally:
        events.stop()
    after = {p["metadata"]["uid"] for p in owned_pods(stack, ns, "web")}
    assert before <= after, "a pod that existed before the wipe was deleted"
    assert [e for e in events.events if e[0] != "ADDED"] == []
    assert len([e for e in events.events if e[0] == "ADDED"]) == 2, events.events
    # A wiped store is NATS trouble, which every service waits out (item 8): none died of it.
    assert stack.restarts == [], f"{stack.restarts} died\n{stack.logs()}"
