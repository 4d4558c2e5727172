"""Honest health of the watcher and the coordinators, on one `kcm dev` stack (invariant 7).

The watcher heartbeats its health to the coordinator, which aggregates it as
`/healthz/watcher` and in `kcm status`; a standby coordinator answers `/healthz/<name>` with
the leader's verdict. Freezing the watcher (SIGSTOP, as a stalled VM does) must turn both
red within a bounded time, and resuming it green again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from tests.conftest import KCM, stop_process, wait_for
from tests.e2e.devstack import DevStack, stack_fixture

stack = stack_fixture("--controllers", "replicaset", "--nodes", "0")


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:
        return 0, str(exc)


def kcm_status(stack: DevStack) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KCM, "status", "--state-dir", str(stack.state)], capture_output=True, text=True, timeout=30
    )


def leader_url(stack: DevStack) -> str:
    return (stack.state / "coordinator.url").read_text().strip()


@pytest.fixture(scope="module")
def standby(stack: DevStack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A second coordinator on the stack's NATS and API server: it stands by, as the Lease is taken."""
    work = tmp_path_factory.mktemp("standby")
    url_file = work / "standby.url"
    argv = [KCM, "coordinator", "--kubeconfig", str(stack.kubeconfig)]
    argv += ["--nats-url", (stack.state / "nats.url").read_text().strip(), "--instance", "standby"]
    argv += ["--nats-nkey-seed", str(stack.state / "nats-auth" / "coordinator.nk")]
    argv += ["--ops-bind", "127.0.0.1", "--ops-port", "0", "--ops-url-file", str(url_file)]
    with open(work / "standby.log", "ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=log)
    try:
        wait_for(lambda: url_file.exists() or proc.poll() is not None, 60, what="the standby's ops url")
        assert proc.poll() is None, (work / "standby.log").read_text()
        yield url_file.read_text().strip()
    finally:
        stop_process(proc)


def test_kcm_dev_waits_for_a_healthy_watcher_and_status_shows_it(stack: DevStack) -> None:
    assert "kcm dev: watcher healthy\n" in stack.progress
    done = kcm_status(stack)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {line.split()[0] + " " + line.split()[2] for line in done.stdout.splitlines() if line.strip()}
    assert {"coordinator leader", "watcher leader"} <= rows, done.stdout
    status = stack.status()
    assert status["watcher"]["healthy"] and status["watcher"]["resources"]["apps/v1/replicasets"]
    assert status["coordinator"]["replicas"][0]["leader"]
    assert get(leader_url(stack) + "/healthz/watcher") == (200, "ok")


def test_a_standby_answers_the_leaders_verdict(stack: DevStack, standby: str) -> None:
    assert get(standby + "/status")[0] == 200
    wait_for(lambda: get(standby + "/healthz/replicaset-controller") == (200, "ok"), 20, what="the verdict")
    assert get(standby + "/healthz/watcher") == (200, "ok")
    # `kcm status` pointed at the standby says where the leader answers.
    done = subprocess.run([KCM, "status", "--url", standby], capture_output=True, text=True, timeout=30)
    assert done.returncode == 1 and f"--url {leader_url(stack)}" in done.stderr, done.stderr


def test_a_frozen_watcher_is_unhealthy_until_it_resumes(stack: DevStack, standby: str) -> None:
    wait_for(lambda: get(standby + "/healthz/watcher")[0] == 200, 20, what="the standby to follow the leader")
    pid = stack.service_pid("watcher")
    os.kill(pid, signal.SIGSTOP)
    try:
        # Within 3 heartbeats + 1 s of silence; the bound here is only the test's patience.
        def red() -> subprocess.CompletedProcess[str] | None:
            done = kcm_status(stack)
            return done if done.returncode != 0 and "no active watcher" in done.stdout else None

        done = wait_for(red, 30, what="kcm status to fail on the watcher")
        watcher_rows = [line for line in done.stdout.splitlines() if line.startswith("watcher")]
        assert any("silent for" in line for line in watcher_rows), done.stdout
        code, text = get(leader_url(stack) + "/healthz/watcher")
        assert code == 500 and "no active watcher" in text
        wait_for(lambda: "no active watcher" in get(standby + "/healthz/watcher")[1], 20, what="standby red")
        assert get(standby + "/healthz/watcher")[0] == 500
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_for(lambda: kcm_status(stack).returncode == 0, 30, what="kcm status healthy again")
    assert get(leader_url(stack) + "/healthz/watcher") == (200, "ok")
    wait_for(lambda: get(standby + "/healthz/watcher") == (200, "ok"), 20, what="standby green again")
