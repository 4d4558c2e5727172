"""Issue 13 item 8, with real processes: NATS and API server trouble is waited out, at start-up
and later; only a configuration error stops a service, with one line and a non-zero exit.

Each test runs its own apiserver, nats-server, watcher, coordinator and probe controller
(tests/e2e/bus_stack.py), since each stops or wipes part of them.
"""

from __future__ import annotations

import asyncio
import subprocess
import urllib.parse
from pathlib import Path
from typing import Any

import nats
import pytest
from kcm_cli import natsd
from kcm_shared.bus import subjects

from tests.conftest import KCM, ApiServer, NatsProc, start_apiserver, start_nats, wait_for
from tests.e2e.bus_stack import ADMIN, Proc, Stack, identities, wait_owned

NAMESPACE = "default"


def _apply(api: ApiServer, name: str, value: str) -> None:
    manifest = f'{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {{"name": "{name}"}}, '
    manifest += f'"data": {{"value": "{value}"}}}}'
    api.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=manifest)


def _reconciled(stack: Stack, name: str, value: str) -> bool:
    return any(r["key"] == f"{NAMESPACE}/{name}" and r.get("value") == value for r in stack.records())


def _start_all(stack: Stack) -> tuple[Proc, Proc]:
    stack.watcher()
    coordinator = stack.coordinator()
    probe = stack.probe("probe-a")
    return coordinator, probe


def test_services_started_before_nats_and_the_api_server_come_up_once_they_are(tmp_path: Path) -> None:
    # The API server's address is known before it runs: start it once, note its port, stop it.
    api = start_apiserver(tmp_path / "api")
    port = urllib.parse.urlsplit(api.url).port
    api.stop()
    planned = natsd.plan(tmp_path / "jetstream")
    auth_dir = tmp_path / "nats-auth"
    planned.write_config(tmp_path / "nats.conf", auth_dir, identities())
    nats_proc = NatsProc(planned.url, planned.port, planned.store_dir, planned.args(), tmp_path / "nats.log")
    # auth_dir given: the stack does not (re)start the server, which must stay down for now.
    stack = Stack(api, nats_proc, tmp_path, tmp_path / "probe.jsonl", auth_dir=auth_dir)
    later: ApiServer | None = None
    try:
        coordinator, probe = _start_all(stack)
        wait_for(lambda: "nats" in probe.log.read_text(), 30, what="the controller trying to reach NATS")
        nats_proc.start()
        # Connected: its ops endpoint serves. Then it needs the API server for its catch-up.
        wait_for(lambda: probe.get("/healthz")[0] or not probe.alive(), 30, what="controller connected")
        wait_for(
            lambda: "catch up failed" in probe.log.read_text() or not probe.alive(),
            30,
            what="the controller trying to reach the API server",
        )
        assert probe.alive(), f"the controller exited while the API server was down: {stack.logs()}"
        later = start_apiserver(tmp_path / "api-later", "--port", str(port))
        stack.api = later
        wait_owned(stack, coordinator, replicas=1, timeout=60)
        _apply(later, "late", "v1")
        wait_for(lambda: _reconciled(stack, "late", "v1"), 60, what=f"reconciled ({stack.logs()})")
        assert all(p.alive() for p in stack.procs), stack.logs()
    finally:
        stack.stop()
        nats_proc.stop()
        if later is not None:
            later.stop()


async def _delete_work_stream(url: str, admin_seed: str) -> None:
    nc = await nats.connect(url, nkeys_seed=admin_seed)
    try:
        await nc.jetstream().delete_stream(subjects.work_stream("probe-controller"))
    finally:
        await nc.close()


def test_a_controller_survives_its_work_stream_deleted_and_nats_restarted(tmp_path: Path) -> None:
    api = start_apiserver(tmp_path / "api")
    nats_proc = start_nats(tmp_path)
    stack = Stack(api, nats_proc, tmp_path, tmp_path / "probe.jsonl")
    try:
        coordinator, probe = _start_all(stack)
        wait_owned(stack, coordinator, replicas=1, timeout=60)
        _apply(api, "before", "v1")
        wait_for(lambda: _reconciled(stack, "before", "v1"), 60, what="reconciled before")

        asyncio.run(_delete_work_stream(nats_proc.url, stack.seed(ADMIN)))
        # A change while the stream is gone: its work item must not be the controller's end.
        _apply(api, "during", "v1")
        nats_proc.kill()
        nats_proc.start()
        _apply(api, "after", "v1")
        wait_for(lambda: _reconciled(stack, "after", "v1"), 60, what=f"reconciled after ({stack.logs()})")
        # Its work item went with the stream; the partition's keys were enqueued again.
        wait_for(lambda: _reconciled(stack, "during", "v1"), 30, what="the change made meanwhile")
        assert probe.alive(), stack.logs()
        wait_for(lambda: probe.get("/healthz")[0] == 200, 30, what="healthy again")
    finally:
        stack.stop()
        nats_proc.stop()
        api.stop()


def _one_line_exit(argv: list[str]) -> str:
    res = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert res.returncode != 0, res
    assert "Traceback" not in res.stderr, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kcm: "), res.stderr
    return lines[0]


@pytest.mark.parametrize("service", [["controllers"], ["watcher"], ["coordinator"]])
def test_a_bad_kubeconfig_path_is_one_line_and_a_non_zero_exit(tmp_path: Path, service: list[str]) -> None:
    # No NATS at that address: the error must come before any waiting for it.
    missing = tmp_path / "no-such-kubeconfig"
    argv = [
        KCM,
        *service,
        "--kubeconfig",
        str(missing),
        "--nats-url",
        f"nats://127.0.0.1:{natsd.free_port()}",
    ]
    line = _one_line_exit([*argv, "--ops-port", "0", "--log-level", "error"])
    assert str(missing) in line


def test_credentials_nats_refuses_are_one_line_and_a_non_zero_exit(
    tmp_path: Path, apiserver: ApiServer
) -> None:
    planned = natsd.plan(tmp_path / "jetstream")
    args: list[Any] = [*planned.args(), "--user", "kcm", "--pass", "right"]
    server = NatsProc(planned.url, planned.port, planned.store_dir, args, tmp_path / "nats.log")
    server.start()
    try:
        argv = [KCM, "controllers", "--kubeconfig", str(apiserver.kubeconfig), "--nats-url", server.url]
        argv += ["--nats-user", "kcm", "--nats-password", "wrong", "--ops-port", "0", "--log-level", "error"]
        line = _one_line_exit(argv)
        assert "authorization violation" in line.lower()
    finally:
        server.stop()
