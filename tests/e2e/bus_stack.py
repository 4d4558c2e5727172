"""A whole bus stack of real processes for end-to-end tests: apiserver, nats-server, watcher,
coordinator and replicas of the probe controller (tests/e2e/probe_controller.py).

Every process can be killed with -9 and started again, which is what the invariant tests do.
NATS runs locked down as in `kcm dev`: the stack restarts the server it is given with
authentication on (`secure`), and each process connects with its own identity's nkey
(kcm_cli.natsauth); tests inspect the bus as `ADMIN`, an identity only tests have.
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

from kcm_cli import natsauth, natsd

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
PROBE = "probe-controller"
ADMIN = "admin"
# The identity each kind of process connects as.
ROLES = {"watcher": "watcher", "coordinator": "coordinator", "controller": "probe"}
GC = "garbage-collector-controller"  # a built-in controller some bus tests run beside the probe


def identities() -> dict[str, natsauth.Permissions]:
    return {
        "watcher": natsauth.watcher(),
        "coordinator": natsauth.coordinator(),
        "probe": natsauth.controllers([PROBE]),
        "gc": natsauth.controllers([GC]),
        "consumer": natsauth.consumer(),
        ADMIN: natsauth.Permissions((">",), (">",)),
    }


def secure(server: NatsProc, auth_dir: Path, users: dict[str, natsauth.Permissions] | None = None) -> None:
    """Restart `server` (same port and files) from a config with authentication on, for
    `users` (default: the bus stack's `identities()`)."""
    server.stop()
    planned = natsd.NatsServer(server.url, server.port, server.store_dir)
    planned.write_config(auth_dir.parent / f"nats-{server.port}.conf", auth_dir, users or identities())
    server.args = planned.args()
    server.start()


def seed(auth_dir: Path, identity: str) -> str:
    return str(auth_dir / f"{identity}{natsauth.SEED_SUFFIX}")


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
    # Where the identities' seeds are; None: restart `nats` with authentication on, here.
    auth_dir: Path | None = None

    def __post_init__(self) -> None:
        if self.auth_dir is None:
            self.auth_dir = self.workdir / "nats-auth"
            secure(self.nats, self.auth_dir)

    def seed(self, identity: str) -> str:
        assert self.auth_dir is not None
        return seed(self.auth_dir, identity)

    def _proc(self, name: str, args: list[str], identity: str = "") -> Proc:
        port = natsd.free_port()
        env = {**os.environ, **self.env, "PROBE_LOG": str(self.probe_log), "PYTHONPATH": str(REPO)}
        argv = [KCM, *args, "--kubeconfig", str(self.api.kubeconfig), "--nats-url", self.nats.url]
        argv += ["--nats-nkey-seed", self.seed(identity or ROLES[args[0]])]
        argv += ["--ops-bind", "127.0.0.1", "--ops-port", str(port), "--instance", name]
        if args[0] in ("controller", "controllers"):
            argv.append("--secure-port=0")  # replicas on one host: the plain ops port only
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

    def garbage_collector(self, name: str, *extra: str) -> Proc:
        return self._proc(name, ["controller", GC, *extra], identity="gc").start()

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
