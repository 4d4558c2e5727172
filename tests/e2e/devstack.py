"""The whole system as `make run` starts it (`kcm dev`), for end-to-end tests with kubectl.

`dev_stack(tmp, *args)` starts `kcm dev` in a temporary state directory, waits for its ready
line and until every selected controller owns all its partitions and is healthy (what
`kcm status` reports), and stops it with Ctrl-C at the end; on the API server `APISERVER` unless
the arguments name one. `stack_fixture(*args)` makes a
module-scoped pytest fixture of it, so one module shares one stack. With `--reference` no kcm
controller runs: the ready line (which `kcm dev` prints once kube-controller-manager answers
/healthz) is all there is to wait for.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from kcm_cli import dev
from kcm_cli.controllers import BUILTIN
from kcm_shared.runtime import controllerflags
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import KCM, KUBECTL, wait_for

START_TIMEOUT = 120.0
# The API server of every stack that does not name one: `pytest --apiserver=upstream` (set by
# tests/e2e/conftest.py) runs the `kcm dev` tests on kube-apiserver (make test's second tier).
APISERVER = "embedded"


def children(pid: int) -> dict[int, str]:
    """Child pid -> command line, from /proc (the supervised services of `kcm dev`)."""
    out = {}
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        with contextlib.suppress(OSError):
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            out[int(child)] = cmdline
    return out


def read_ready_line(proc: subprocess.Popen[str], stderr: Path | None = None) -> tuple[str, list[str]]:
    """The `kcm dev ready` line, and the progress lines printed before it."""
    assert proc.stdout is not None
    before: list[str] = []
    for line in proc.stdout:
        if line.startswith("kcm dev ready"):
            return line, before
        before.append(line)
    err = stderr.read_text(errors="replace") if stderr else (proc.stderr.read() if proc.stderr else "")
    raise AssertionError(f"kcm dev ended before it was ready: {''.join(before)}{err[-5000:]}")


@dataclass
class DevStack:
    proc: subprocess.Popen[str]
    state: Path
    expected: list[str]  # canonical names of the controllers this stack runs
    progress: list[str] = field(default_factory=list)  # what `kcm dev` printed before its ready line

    @property
    def kubeconfig(self) -> Path:
        return self.state / "kubeconfig"

    def kubectl(
        self, *args: str, check: bool = True, input: str | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        argv = [KUBECTL, "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(self.state / "kubectl")]
        res = subprocess.run([*argv, *args], capture_output=True, text=True, input=input, timeout=timeout)
        if check and res.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} failed ({res.returncode}): {res.stderr}{res.stdout}"
            )
        return res

    def create_namespace(self, name: str, timeout: float = 60.0) -> None:
        """Create namespace `name` and wait for its default ServiceAccount: kube-apiserver refuses
        pods until it exists (the embedded server admits them, see docs/apiserver.md)."""
        self.kubectl("create", "namespace", name)
        wait_for(
            lambda: self.kubectl("-n", name, "get", "serviceaccount", "default", check=False).returncode == 0,
            timeout,
            what=f"the default ServiceAccount of {name}",
        )

    def api(self) -> kubernetes.client.ApiClient:
        return kubernetes.config.new_client_from_config(config_file=str(self.kubeconfig))

    def status(self) -> dict[str, Any]:
        """The coordinator's /status document (what `kcm status` prints); {} while unreachable."""
        try:
            url = (self.state / "coordinator.url").read_text().strip()
            with urllib.request.urlopen(url + "/status", timeout=5) as resp:
                doc: dict[str, Any] = json.load(resp)
                return doc
        except (OSError, ValueError):
            return {}

    def healthy(self) -> bool:
        doc = self.status()
        controllers = doc.get("controllers", {})
        if not doc.get("leader") or any(name not in controllers for name in self.expected):
            return False
        return all(
            info.get("healthy") and info.get("partitions") and all(info["partitions"].values())
            for info in controllers.values()
        )

    def wait_healthy(self, timeout: float = 60.0) -> None:
        wait_for(self.healthy, timeout, interval=0.25, what=f"controllers healthy: {self.status()}")

    def service_pid(self, service: str) -> int:
        """The pid of the one process of `service` (`watcher`, `coordinator`) `kcm dev` supervises."""
        [pid] = [pid for pid, cmd in children(self.proc.pid).items() if f" {service} " in f" {cmd} "]
        return pid

    def controller_pids(self, alias: str) -> list[int]:
        """Pids of the processes running the controller `alias` (canonical name or alias)."""
        spec = controllerflags.select(BUILTIN, alias)[0]
        pids = []
        for pid, cmd in children(self.proc.pid).items():
            words = cmd.split()
            if "controller" in words and spec.name in words:
                pids.append(pid)
            elif "controllers" in words:
                chosen = words[words.index("--controllers") + 1].split(",")
                if spec.name in chosen:
                    pids.append(pid)
        return pids

    def metric(self, controller: str, sample: str, **labels: str) -> float:
        """A sample of a controller's /metrics (with at least `labels`), summed over its replicas."""
        return sum(self.metric_by_replica(controller, sample, **labels).values())

    def metric_by_replica(self, controller: str, sample: str, **labels: str) -> dict[str, float]:
        """The sample in each replica that runs `controller` (found through the coordinator)."""
        found = {}
        for member in self.status().get("members", []):
            if controller not in member.get("controllers", []):
                continue
            found[member["ops_url"]] = _sample(member["ops_url"], sample, labels)
        return found

    def service_metric(self, service: str, sample: str, **labels: str) -> float:
        """A sample of the /metrics of `service` (`watcher`, `coordinator`), with at least `labels`."""
        words = children(self.proc.pid)[self.service_pid(service)].split()
        port = words[words.index("--ops-port") + 1]
        return _sample(f"http://127.0.0.1:{port}", sample, labels)

    def log(self, name: str) -> str:
        path = self.state / "logs" / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def tail_logs(self, chars: int = 6000) -> str:
        """The end of every service's log: what a failing test's report shows (tests/conftest.py)."""
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-chars:]}"
            for path in sorted((self.state / "logs").glob("*.log"))
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _sample(ops_url: str, sample: str, labels: dict[str, str]) -> float:
    """The sum of `sample` with at least `labels` in the /metrics at `ops_url`."""
    with urllib.request.urlopen(ops_url + "/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == sample and labels.items() <= s.labels.items()
    )


@contextlib.contextmanager
def dev_stack(tmp: Path, *args: str) -> Iterator[DevStack]:
    """`kcm dev --state-dir TMP/state *args`, ready and healthy; stopped on the way out."""
    state = tmp / "state"
    if not any(arg.startswith("--apiserver") for arg in args):
        args = (*args, f"--apiserver={APISERVER}")
    chosen = "*"
    if "--controllers" in args:
        at = args.index("--controllers") + 1
        chosen = args[at]
        if "--apiserver=upstream" in args and "serviceaccount" not in chosen.split(","):
            # kube-apiserver's ServiceAccount admission refuses a pod until its namespace has the
            # `default` ServiceAccount, which the serviceaccount controller creates on a real cluster.
            chosen = f"{chosen},serviceaccount"
            args = (*args[:at], chosen, *args[at + 1 :])
    argv = [KCM, "dev", "--state-dir", str(state), *args]
    # What `kcm dev` runs: the selection less what the flags leave off (it always passes its key).
    reference = "--reference" in args
    flags = ["--service-account-private-key-file=key", *args]
    expected = [] if reference else [spec.name for spec in dev.enabled(chosen, flags)]
    stderr = tmp / "dev.stderr"
    with open(stderr, "w") as err:
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=err, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
        )
    stack = DevStack(proc, state, expected)
    # A hang at start-up must not hang the suite. Ctrl-C, not kill -9: killed, `kcm dev` would leave
    # its supervised etcd, kube-apiserver, nats-server and services running without a parent.
    timer = threading.Timer(START_TIMEOUT, stack.stop)
    timer.start()
    try:
        _, stack.progress = read_ready_line(proc, stderr)
        timer.cancel()
        # Drain stdout (restart announcements) so a chatty stack never blocks on a full pipe.
        threading.Thread(target=lambda: proc.stdout and proc.stdout.read(), daemon=True).start()
        if not reference:
            stack.wait_healthy()
        yield stack
    finally:
        timer.cancel()
        stack.stop()


def stack_fixture(*args: str) -> Callable[..., Iterator[DevStack]]:
    """A module-scoped fixture running one `kcm dev` stack with `args` for the whole module."""

    @pytest.fixture(scope="module")
    def fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevStack]:
        with dev_stack(tmp_path_factory.mktemp("devstack"), *args) as stack:
            yield stack

    return fixture
