"""Services reach a NATS server that wants credentials: user/password (on the command line or
from a file) and token, through the same `--nats-*` options every service takes; wrong
credentials fail clearly instead of hanging, and a credentials file that is not there stops
the service with one line (a configuration error, not an outage to wait out)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvloop
from kcm_shared.bus import natsconn

from tests.conftest import KCM, NatsProc, self_signed_cert, start_nats


def _server(tmp_path: Path, *auth: str) -> NatsProc:
    server = start_nats(tmp_path)
    server.stop()
    server.args = [*server.args, *auth]
    server.start()
    return server


@pytest.fixture(params=["user", "user-file", "token"])
def secured(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[NatsProc, list[str]]]:
    if request.param == "user":
        server = _server(tmp_path, "--user", "kcm", "--pass", "s3cret")
        flags = ["--nats-user", "kcm", "--nats-password", "s3cret"]
    elif request.param == "user-file":
        server = _server(tmp_path, "--user", "kcm", "--pass", "s3cret")
        (tmp_path / "password").write_text("s3cret\n")
        flags = ["--nats-user", "kcm", "--nats-password-file", str(tmp_path / "password")]
    else:
        server = _server(tmp_path, "--auth", "t0ken")
        flags = ["--nats-token", "t0ken"]
    yield server, flags
    server.stop()


def _options(url: str, flags: list[str]) -> natsconn.NatsOptions:
    p = argparse.ArgumentParser()
    natsconn.add_arguments(p)
    return natsconn.from_args(p.parse_args(["--nats-url", url, *flags]))


def test_credentials_from_flags_connect_and_publish(secured: tuple[NatsProc, list[str]]) -> None:
    server, flags = secured

    async def body() -> int:
        nc = await natsconn.connect(_options(server.url, flags), "test")
        js = nc.jetstream()
        await natsconn.ensure_object_stream(js)
        ack = await js.publish("kcm.obj.core.v1.configmaps.default.a", b"{}")
        await nc.close()
        return ack.seq

    assert uvloop.run(body()) == 1


def test_wrong_credentials_stop_the_service_with_one_clear_line(
    secured: tuple[NatsProc, list[str]], tmp_path: Path
) -> None:
    """A refusal is a configuration error (docs/runtime.md): the service says so in one line and
    exits 1, so its supervisor (kcm dev, compose, the kubelet) restarts it as a crash-looping pod."""
    server, _ = secured
    log = tmp_path / "watcher.log"
    args = [KCM, "watcher", "--master", "http://127.0.0.1:9", "--nats-url", server.url]
    args += ["--nats-token", "wrong", "--ops-port", "0", "--leader-elect=false"]
    with open(log, "ab") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=out)
    try:
        assert proc.wait(30) == 1
        text = log.read_text()
        assert "authorization violation" in text.lower()
        assert f"kcm: NATS at {server.url} refused this client:" in text
        assert "Traceback" not in text
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(10)


def test_tls_with_a_ca_from_flags_connects(tmp_path: Path) -> None:
    cert, key = self_signed_cert(tmp_path)
    server = _server(tmp_path, "--tls", "--tlscert", str(cert), "--tlskey", str(key))
    try:

        async def body() -> int:
            url = server.url.replace("nats://", "tls://")
            nc = await natsconn.connect(_options(url, ["--nats-tls-ca", str(cert)]), "test")
            js = nc.jetstream()
            await natsconn.ensure_object_stream(js)
            ack = await js.publish("kcm.obj.core.v1.configmaps.default.tls", b"{}")
            await nc.close()
            return ack.seq

        assert uvloop.run(body()) == 1
    finally:
        server.stop()


def test_a_missing_credentials_file_stops_the_service_with_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "no-such.nk"
    args = [KCM, "watcher", "--master", "http://127.0.0.1:9", "--nats-url", "nats://127.0.0.1:9"]
    args += ["--nats-nkey-seed", str(missing), "--ops-port", "0", "--leader-elect=false"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == f"kcm: [Errno 2] No such file or directory: '{missing}'"


CLOSED_FOR_GOOD = """
import asyncio, logging, sys
from kcm_shared.bus import natsconn

async def main() -> None:
    nc = await natsconn.connect(natsconn.NatsOptions(url=sys.argv[1]), "closed-for-good")
    await nc.publish("kcm.obj." + "x" * 5000, b"")  # over the server's 4,096-byte control line
    await asyncio.sleep(30)  # nats-py does not reconnect: without the exit, a silent service

logging.basicConfig(level=logging.INFO)
asyncio.run(main())
"""


def test_a_connection_the_server_closes_for_good_ends_the_service(tmp_path: Path) -> None:
    """Issue 28 finding 2: after the server closed the connection for a protocol error, the
    watcher kept retrying on a closed client and published nothing for ever."""
    server = start_nats(tmp_path)
    try:
        run = subprocess.run(
            [sys.executable, "-c", CLOSED_FOR_GOOD, server.url], capture_output=True, text=True, timeout=60
        )
    finally:
        server.stop()
    assert run.returncode == 1, run.stderr[-2000:]
    assert "nats connection closed for good" in run.stderr
