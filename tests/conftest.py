"""Fixtures that start real processes: the embedded API server, and kubectl against it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

KCM = str(Path(sys.executable).with_name("kcm"))
KUBECTL = shutil.which("kubectl") or "kubectl"


def wait_for(
    predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.05, what: str = ""
) -> Any:
    """Poll until `predicate` returns something truthy; fail the test after `timeout`."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}: last={last!r}")


def schemaless_crd(group: str, plural: str, kind: str) -> dict[str, Any]:
    """A namespaced CustomResourceDefinition served at v1 that takes any fields."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }


def kill_process(proc: subprocess.Popen[bytes] | None) -> None:
    """kill -9 (what the invariant tests do to any process), then reap it."""
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait(10)


def stop_process(proc: subprocess.Popen[bytes] | None, grace: float = 15.0) -> None:
    """SIGTERM, then kill -9 if it has not exited within `grace` seconds."""
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            kill_process(proc)


@dataclass
class ApiServer:
    url: str
    kubeconfig: Path
    proc: subprocess.Popen[bytes]
    workdir: Path
    args: list[str] = field(default_factory=list)

    def kubectl_cmd(self, *args: str) -> list[str]:
        """A kubectl command line for this server, with a discovery cache of its own."""
        return [
            KUBECTL,
            "--kubeconfig",
            str(self.kubeconfig),
            "--cache-dir",
            str(self.workdir / "kcache"),
            *args,
        ]

    def kubectl(self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60) -> str:
        cmd = self.kubectl_cmd(*args)
        res = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
        if check and res.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} failed ({res.returncode}): {res.stderr}{res.stdout}"
            )
        return res.stdout if check else res.stdout + res.stderr

    def kubectl_json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json"))

    def client(self) -> Any:
        from kubernetes import client, config

        api_client = config.new_client_from_config(config_file=str(self.kubeconfig))
        return client, api_client

    def stop(self) -> None:
        stop_process(self.proc)


def start_apiserver(workdir: Path, *extra: str) -> ApiServer:
    workdir.mkdir(parents=True, exist_ok=True)
    kubeconfig = workdir / "kubeconfig"
    if kubeconfig.exists():
        kubeconfig.unlink()
    log = open(workdir / "apiserver.log", "ab")  # noqa: SIM115 - handed to the child process
    args = [KCM, "apiserver", "--port", "0", "--kubeconfig-out", str(kubeconfig), *extra]
    proc = subprocess.Popen(args, stdout=log, stderr=log)
    try:
        wait_for(lambda: kubeconfig.exists() or proc.poll() is not None, 30, what="kubeconfig")
    except AssertionError:
        kill_process(proc)  # no fixture holds it yet, so nothing else would ever stop it
        raise
    finally:
        log.close()
    if proc.poll() is not None:
        raise AssertionError(f"apiserver exited: {(workdir / 'apiserver.log').read_text()}")
    url = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    return ApiServer(url, kubeconfig, proc, workdir, args)


@pytest.fixture(scope="module")
def apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    server = start_apiserver(tmp_path_factory.mktemp("apiserver"))
    yield server
    server.stop()


@pytest.fixture()
def fresh_apiserver(tmp_path: Path) -> Iterator[ApiServer]:
    server = start_apiserver(tmp_path / "apiserver")
    yield server
    server.stop()


@pytest.fixture(autouse=True, scope="session")
def _no_user_kubeconfig() -> Iterator[None]:
    # Tests must never touch a real cluster from the developer's environment.
    old = os.environ.pop("KUBECONFIG", None)
    yield
    if old is not None:
        os.environ["KUBECONFIG"] = old


@dataclass
class NatsProc:
    """A real nats-server with JetStream on file storage, restartable on the same port and files."""

    url: str
    port: int
    store_dir: Path
    args: list[str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        import socket

        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=log)

        def ready() -> bool:
            assert self.proc is not None and self.proc.poll() is None, self.log_path.read_text()
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    return s.recv(4).startswith(b"INFO")
            except OSError:
                return False

        wait_for(ready, 20, what="nats-server")

    def kill(self) -> None:
        kill_process(self.proc)

    def stop(self) -> None:
        stop_process(self.proc)


def start_nats(workdir: Path) -> NatsProc:
    from kcm_cli import natsd

    planned = natsd.plan(workdir / "jetstream")
    server = NatsProc(planned.url, planned.port, planned.store_dir, planned.args(), workdir / "nats.log")
    server.start()
    return server


@pytest.fixture(scope="module")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsProc]:
    server = start_nats(tmp_path_factory.mktemp("nats"))
    yield server
    server.stop()


@pytest.fixture()
def fresh_nats(tmp_path: Path) -> Iterator[NatsProc]:
    server = start_nats(tmp_path / "nats")
    yield server
    server.stop()


def self_signed_cert(directory: Path) -> tuple[Path, Path]:
    """A certificate and key for 127.0.0.1 made with openssl (the test is skipped without it)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is needed to make a certificate")
    cert, key = directory / "server.crt", directory / "server.key"
    request = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"]
    subprocess.run(
        [openssl, *request, "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    return cert, key


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--apiserver",
        choices=["embedded", "upstream"],
        default="embedded",
        help="the API server of the end-to-end tests' `kcm dev` stacks; upstream: kube-apiserver "
        "(make upstream), and only the tests that can run there (tests/e2e/conftest.py says why not)",
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failing test that used a `kcm dev` stack (tests/e2e/devstack.py) reports the end of its
    services' logs, so a failure seen once in CI can be read, not only re-run."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.when != "call" or not report.failed:
        return
    for value in getattr(item, "funcargs", {}).values():
        if hasattr(value, "tail_logs"):
            report.sections.append(("kcm dev logs", value.tail_logs()))
