"""kill -9 of the leading coordinator under load stops no work and moves no partition.

`kcm dev` with two ReplicaSet controller replicas, and a second coordinator started by the
test as a standby. The leading coordinator is killed while a Deployment scales; a standby
takes the Lease over only after its 15 s duration, three times the member lease. Meanwhile
the replicas renew their grants in the `kcm-grants` bucket, so the scale goes on, and the new
leader starts from the grants there: no replica drops a partition at any point (on a failover
that dropped grants, both would, once their 5 s lease lapsed), and no partition is ever
reported held by two replicas.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import KCM, stop_process, wait_for
from tests.e2e import devstack

CONTROLLER = "replicaset-controller"

stack = devstack.stack_fixture("--controllers", "replicaset,deployment", "--replicas", "replicaset=2")


def status(url_file: Path) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(url_file.read_text().strip() + "/status", timeout=2) as resp:
            doc: dict[str, Any] = json.load(resp)
            return doc
    except (OSError, ValueError):
        return {}


@pytest.fixture()
def standby(stack: devstack.DevStack, tmp_path: Path) -> Iterator[Path]:
    """A second `kcm coordinator` beside the stack's; yields the file with its ops URL."""
    url_file = tmp_path / "standby.url"
    argv = [
        KCM,
        "coordinator",
        "--kubeconfig",
        str(stack.kubeconfig),
        "--nats-url",
        (stack.state / "nats.url").read_text().strip(),
        "--nats-nkey-seed",
        str(stack.state / "nats-auth" / "coordinator.nk"),
        "--ops-bind",
        "127.0.0.1",
        "--ops-port",
        "0",
        "--ops-url-file",
        str(url_file),
        "--instance",
        "standby",
    ]
    with open(tmp_path / "standby.log", "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=log)
    try:
        wait_for(lambda: status(url_file).get("leader") is False, 60, 0.2, "the standby serving")
        yield url_file
    finally:
        stop_process(proc)


def coordinator_pid(stack: devstack.DevStack) -> int:
    (pid,) = [pid for pid, cmd in devstack.children(stack.proc.pid).items() if "coordinator" in cmd.split()]
    return pid


def pods(stack: devstack.DevStack, ns: str) -> int:
    items = json.loads(stack.kubectl("get", "pods", "-n", ns, "-o", "json").stdout)["items"]
    return sum(1 for p in items if not p["metadata"].get("deletionTimestamp"))


def dropped(log: str) -> list[dict[str, Any]]:
    """The partition losses a replica logged."""
    lines = (json.loads(line) for line in log.splitlines() if line.startswith("{"))
    return [e for e in lines if e.get("msg") == "partitions changed" and e.get("lost")]


class Sampler:
    """Every coordinator's /status, sampled all along: partitions held by two replicas."""

    def __init__(self, url_files: list[Path]) -> None:
        self.url_files = url_files
        self.shared: list[str] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.wait(0.2):
            for url_file in self.url_files:
                doc = status(url_file)
                info = doc.get("controllers", {}).get(CONTROLLER, {}) if doc.get("leader") else {}
                for p, holders in info.get("partitions", {}).items():
                    if holders and "," in holders:
                        self.shared.append(f"partition {p} held by {holders}")

    def stop(self) -> list[str]:
        self.stopping.set()
        self.thread.join(10)
        return self.shared


def holders(stack: devstack.DevStack) -> set[str]:
    partitions = stack.status().get("controllers", {}).get(CONTROLLER, {}).get("partitions", {})
    return {owner for owner in partitions.values() if owner}


def all_owned(url_files: list[Path]) -> bool:
    for url_file in url_files:
        doc = status(url_file)
        if doc.get("leader"):
            info = doc.get("controllers", {}).get(CONTROLLER, {})
            return bool(info.get("partitions")) and all(info["partitions"].values())
    return False


def test_killing_the_leading_coordinator_under_load_stops_no_work(
    stack: devstack.DevStack, standby: Path
) -> None:
    ns = "coordinator-failover"
    stack.kubectl("create", "namespace", ns)
    stack.kubectl(
        "apply",
        "-f",
        "-",
        input=textwrap.dedent(f"""\
            apiVersion: apps/v1
            kind: Deployment
            metadata: {{name: web, namespace: {ns}}}
            spec:
              replicas: 10
              selector: {{matchLabels: {{app: web}}}}
              template:
                metadata: {{labels: {{app: web}}}}
                spec:
                  containers: [{{name: c, image: nginx}}]
            """),
    )
    wait_for(lambda: pods(stack, ns) == 10, 60, 0.2, "10 pods")
    wait_for(lambda: len(holders(stack)) == 2, 30, 0.2, f"both replicas holding partitions: {stack.status()}")
    replicas = ["replicaset-0", "replicaset-1"]
    before = {name: len(dropped(stack.log(name))) for name in replicas}
    sampler = Sampler([stack.state / "coordinator.url", standby])
    try:
        os.kill(coordinator_pid(stack), signal.SIGKILL)
        stack.kubectl("scale", "deployment/web", "-n", ns, "--replicas", "40")
        # The scale goes on with no coordinator leading (the Lease lasts 15 s) ...
        wait_for(lambda: pods(stack, ns) == 40, 90, 0.2, "40 pods")
        # ... and a new leader takes over the grants as they are.
        coordinators = [standby, stack.state / "coordinator.url"]
        wait_for(lambda: all_owned(coordinators), 90, 0.5, "a new leader seeing every partition owned")
    finally:
        shared = sampler.stop()
    assert shared == []
    after = {name: dropped(stack.log(name))[before[name] :] for name in replicas}
    assert after == {name: [] for name in replicas}, "a replica dropped partitions during the failover"
