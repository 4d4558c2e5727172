"""A whole bus stack of real processes for end-to-end tests: apiserver, nats-server, watcher,
coordinator and replicas of the probe controller (tests/e2e/probe_controller.py).

Every process can be killed with -9 and started again, which is what the invariant tests do.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kcm_cli import natsd

from tests.conftest import KCM, ApiServer, NatsProc, kill_process, stop_process, wait_for

REPO = Path(__file__).resolve().parents[2]
# Short leases so fail-overs happen within a test's patience; the defaults are upstream's.
FAST_LEASE = [
    "--leader-elect-lease-duration",
    "2s",
    "--leader-elect-renew-deadline",
    "1500ms",
    "--leader-elect-retry-period",
    "250ms",
]


@dataclass
class Proc:
    name: str
    argv: list[str]
    log: Path
    env: dict[str, str]
    ops_port: int
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Proc:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=log, env=self.env, cwd=REPO)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        kill_process(self.proc)

    def stop(self) -> None:
        stop_process(self.proc)

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ops_port}{path}", timeout=5) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except OSError as exc:
            return 0, str(exc)


@dataclass
class Stack:
    api: ApiServer
    nats: NatsProc
    workdir: Path
    probe_log: Path
    procs: list[Proc] = field(default_factory=list)
    partitions: int = 4
    env: dict[str, str] = field(default_factory=dict)  # for every process, beside os.environ

    def _proc(self, name: str, args: list[str]) -> Proc:
        port = natsd.free_port()
        env = {**os.environ, **self.env, "PROBE_LOG": str(self.probe_log), "PYTHONPATH": str(REPO)}
        argv = [KCM, *args, "--kubeconfig", str(self.api.kubeconfig), "--nats-url", self.nats.url]
        argv += ["--ops-bind", "127.0.0.1", "--ops-port", str(port), "--instance", name]
        proc = Proc(name, argv, self.workdir / f"{name}.log", env, port)
        self.procs.append(proc)
        return proc

    def watcher(self, name: str = "watcher-0", *extra: str) -> Proc:
        return self._proc(name, ["watcher", *FAST_LEASE, "--resources", "v1/configmaps", *extra]).start()

    def coordinator(self, name: str = "coordinator-0") -> Proc:
        args = ["coordinator", *FAST_LEASE, "--partitions", str(self.partitions), "--member-lease", "2s"]
        return self._proc(name, args).start()

    def probe(self, name: str, *extra: str) -> Proc:
        args = ["controller", "--plugin", "tests.e2e.probe_controller:SPEC", "--ack-wait", "5"]
        # Few deliveries and a short stuck limit, so dead-lettering and health show within a test.
        args += ["--max-deliveries", "6", "--stuck-after", "3", *extra]
        return self._proc(name, args).start()

    def status(self, coordinator: Proc) -> Any:
        code, body = coordinator.get("/status")
        return json.loads(body) if code == 200 else None

    def records(self) -> list[dict[str, Any]]:
        if not self.probe_log.exists():
            return []
        return [json.loads(line) for line in self.probe_log.read_text().splitlines() if line.strip()]

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.log.read_text()[-3000:]}" for p in self.procs if p.log.exists())


def wait_owned(stack: Stack, coordinator: Proc, replicas: int, timeout: float = 30) -> Any:
    """Until every partition of the probe controller is owned, spread over `replicas` replicas."""

    def owned() -> Any:
        status = stack.status(coordinator)
        ctl = (status or {}).get("controllers", {}).get("probe-controller")
        if not ctl:
            return None
        owners = ctl.get("partitions", {})
        if len(owners) == stack.partitions and all(owners.values()) and len(set(owners.values())) == replicas:
            return status
        return None

    return wait_for(owned, timeout, interval=0.2, what=f"partitions owned by {replicas} replicas")
