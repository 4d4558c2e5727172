"""`kcm dev` (what `make run` starts): ready line, a working kubeconfig, simulated nodes, clean Ctrl-C."""

from __future__ import annotations

import signal
import subprocess
import threading
from pathlib import Path

from tests.conftest import KCM, KUBECTL, wait_for
from tests.e2e.devstack import children, read_ready_line


def test_dev_prints_ready_serves_kubectl_runs_simulator_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    state = tmp_path / "state"
    proc = subprocess.Popen(
        [KCM, "dev", "--state-dir", str(state)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    timer = threading.Timer(60, proc.kill)
    timer.start()
    try:
        assert proc.stdout is not None
        line, progress = read_ready_line(proc)
        # The user sees the stack come up, piece by piece, before the ready line.
        said = "".join(progress)
        for piece in ("apiserver at http", "nats-server with JetStream", "watcher up", "coordinator up"):
            assert piece in said, said
        kubeconfig = state / "kubeconfig"
        assert f"KUBECONFIG={kubeconfig.resolve()}" in line
        out = subprocess.run(
            [
                KUBECTL,
                "--kubeconfig",
                str(kubeconfig),
                "--cache-dir",
                str(tmp_path / "c"),
                "get",
                "namespaces",
                "-o",
                "name",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert "namespace/kube-system" in out.stdout.split(), out.stderr

        def nodes() -> list[str]:
            res = subprocess.run(
                [
                    KUBECTL,
                    "--kubeconfig",
                    str(kubeconfig),
                    "--cache-dir",
                    str(tmp_path / "c"),
                    "get",
                    "nodes",
                ],
                capture_output=True,
                text=True,
                timeout=30,
            )
            return [line.split()[0] for line in res.stdout.splitlines()[1:]]

        # The simulator starts beside the API server with three nodes by default.
        wait_for(lambda: len(nodes()) == 3, what="simulated nodes")
        assert "sim-node-0" in nodes()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
    # State lives where it was asked to, so a second `make run` finds it again.
    assert (state / "apiserver" / "apiserver.sqlite3").exists()


def test_apiserver_reports_a_taken_port_clearly(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        res = subprocess.run(
            [KCM, "apiserver", "--port", str(port), "--kubeconfig-out", str(tmp_path / "kc")],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert res.returncode != 0
    assert "address already in use" in res.stderr.lower()
    assert not (tmp_path / "kc").exists()


def test_dev_runs_the_bus_reports_status_and_restarts_a_killed_service(tmp_path: Path) -> None:
    import asyncio
    import os

    import nats

    state = tmp_path / "state"
    proc = subprocess.Popen(
        [KCM, "dev", "--state-dir", str(state), "--nodes", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    timer = threading.Timer(120, proc.kill)
    timer.start()
    try:
        assert proc.stdout is not None
        read_ready_line(proc)
        services = " ".join(children(proc.pid).values())
        for name in ("nats-server", " watcher ", " coordinator "):
            assert name in services, services

        # The watcher publishes the cluster onto the bus: kube-system is in the object stream.
        url = (state / "nats.url").read_text().strip()

        async def published() -> bool:
            # As the read-only identity `kcm dev` makes for your own clients (docs/bus.md).
            nc = await nats.connect(url, nkeys_seed=str(state / "nats-auth" / "consumer.nk"))
            try:
                js = nc.jetstream()
                try:
                    await js.get_last_msg("KCM_OBJECTS", "kcm.obj.core.v1.namespaces._.kube-system")
                except nats.js.errors.NotFoundError:
                    return False
                return True
            finally:
                await nc.close()

        wait_for(lambda: asyncio.run(published()), 30, interval=0.5, what="kube-system on the bus")

        # `kcm status` finds the stack through the state directory.
        status = wait_for(
            lambda: (
                (
                    r := subprocess.run(
                        [KCM, "status", "--state-dir", str(state)], capture_output=True, text=True, timeout=30
                    )
                ).returncode
                == 0
                and r
            ),
            30,
            interval=0.5,
            what="kcm status healthy",
        )
        coordinator_url = (state / "coordinator.url").read_text().strip()
        assert status.stdout.startswith(f"coordinator {coordinator_url} (leader "), status.stdout

        # A reader gone before the tables are printed (`kcm status | head`): no traceback.
        read_end, write_end = os.pipe()
        os.close(read_end)
        try:
            gone_reader = subprocess.run(
                [KCM, "status", "--state-dir", str(state)],
                stdout=write_end,
                stderr=subprocess.PIPE,
                text=True,
                timeout=30,
            )
        finally:
            os.close(write_end)
        assert gone_reader.returncode == 1
        assert gone_reader.stderr == "", gone_reader.stderr

        # A service that dies is restarted, and the restart is announced.
        watcher = next(pid for pid, cmd in children(proc.pid).items() if " watcher " in cmd)
        os.kill(watcher, signal.SIGKILL)
        announced = proc.stdout.readline()
        assert "watcher exited" in announced and "restarting" in announced, announced
        wait_for(
            lambda: any(" watcher " in cmd and pid != watcher for pid, cmd in children(proc.pid).items()),
            30,
            what="watcher restarted",
        )
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
        # Services stop before nats-server and the API server: the coordinator lets its lease go.
        coordinator_log = (state / "logs" / "coordinator.log").read_text()
        assert "released lease" in coordinator_log, coordinator_log[-2000:]
        assert "could not release lease" not in coordinator_log
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
