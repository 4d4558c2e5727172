"""The bus on a three-server NATS cluster with `--nats-stream-replicas 3` (k8s/overlays/production).

Three real nats-servers form a JetStream cluster; a real watcher and a real controller replica
declare their streams with three replicas; with one server killed, a change still reaches the
object stream (two of three is a quorum).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path

import nats
import nats.errors
import pytest
import uvloop
from kcm_cli import natsd
from kcm_shared.apimachinery import gvr
from kcm_shared.bus import subjects, wire
from nats.aio.client import Client
from nats.js.errors import Error as JetStreamError

from tests.conftest import ApiServer, NatsProc, wait_for
from tests.e2e import bus_stack

CONFIGMAPS = gvr.Resource("", "v1", "configmaps")
STREAMS = (wire.OBJECTS_STREAM, subjects.work_stream("probe-controller"), wire.DLQ_STREAM)


def distinct_ports(count: int) -> list[int]:
    """Free ports, all different: each socket stays bound until every port is chosen."""
    with contextlib.ExitStack() as held:
        socks = [held.enter_context(socket.socket()) for _ in range(count)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def auth_dir(workdir: Path) -> Path:
    return workdir / "nats-auth"


async def connect(url: str, workdir: Path) -> Client:
    """As the tests' own identity, which may read every stream."""
    seed = bus_stack.seed(auth_dir(workdir), bus_stack.ADMIN)
    return await nats.connect(url.split(","), connect_timeout=2, max_reconnect_attempts=0, nkeys_seed=seed)


def start_cluster(workdir: Path, size: int = 3) -> list[NatsProc]:
    ports = distinct_ports(2 * size)
    clients, routes = ports[:size], ports[size:]
    servers = []
    for i in range(size):
        planned = natsd.plan(workdir / f"n{i}" / "jetstream", clients[i])
        others = [f"nats://127.0.0.1:{p}" for j, p in enumerate(routes) if j != i]
        cluster = {"name": "kcm", "listen": f"127.0.0.1:{routes[i]}", "routes": others}
        # Locked down as every configuration is: the bus stack's identities, seeds shared.
        planned.write_config(
            workdir / f"n{i}.conf",
            auth_dir(workdir),
            bus_stack.identities(),
            {"server_name": f"n{i}", "cluster": cluster},
        )
        server = NatsProc(planned.url, planned.port, planned.store_dir, planned.args(), workdir / f"n{i}.log")
        servers.append(server)
        try:
            server.start()
        except BaseException:
            for started in servers:
                started.stop()  # never leave the servers already up running past the test
            raise
    return servers


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[list[NatsProc]]:
    servers = start_cluster(tmp_path)
    yield servers
    for server in servers:
        server.stop()


async def stream_replicas(url: str, workdir: Path) -> dict[str, int]:
    """Each stream's configured replicas and how many servers hold it (leader + peers)."""
    nc = await connect(url, workdir)
    try:
        js = nc.jetstream(timeout=2)
        out = {}
        for name in STREAMS:
            try:
                info = await js.stream_info(name)
            except (JetStreamError, nats.errors.TimeoutError):
                continue  # not declared yet, or the cluster still electing its leaders
            held = 1 + len(info.cluster.replicas or []) if info.cluster else 1
            out[name] = min(info.config.num_replicas or 1, held)
        return out
    finally:
        await nc.close()


async def last_object(url: str, workdir: Path, name: str) -> bool:
    nc = await connect(url, workdir)
    try:
        js = nc.jetstream(timeout=2)
        subject = subjects.object_subject(CONFIGMAPS, "default", name)
        try:
            await js.get_last_msg(wire.OBJECTS_STREAM, subject)
        except (JetStreamError, nats.errors.TimeoutError):
            return False
        return True
    finally:
        await nc.close()


def test_streams_are_replicated_and_survive_losing_a_server(
    apiserver: ApiServer, cluster: list[NatsProc], tmp_path: Path
) -> None:
    url = ",".join(s.url for s in cluster)
    bus = NatsProc(url, cluster[0].port, cluster[0].store_dir, [], tmp_path / "unused.log")
    stack = bus_stack.Stack(apiserver, bus, tmp_path, tmp_path / "probe.jsonl", auth_dir=auth_dir(tmp_path))
    try:
        replicas = ["--nats-stream-replicas", "3"]
        stack._proc("watcher-0", ["watcher", "--resources", "v1/configmaps", *replicas]).start()
        stack.probe("probe-0", *replicas)

        def replicated() -> dict[str, int] | None:
            got = uvloop.run(stream_replicas(url, tmp_path))
            return got if got == dict.fromkeys(STREAMS, 3) else None

        wait_for(replicated, 60, 0.5, "three replicas of every stream")

        cluster[2].kill()
        survivors = ",".join(s.url for s in cluster[:2])
        apiserver.kubectl("create", "configmap", "after-loss")
        wait_for(
            lambda: uvloop.run(last_object(survivors, tmp_path, "after-loss")),
            60,
            0.5,
            "a change published with one server of three gone",
        )
    except BaseException:
        print(stack.logs())
        raise
    finally:
        stack.stop()


def test_replicas_beyond_a_single_server_fail_with_the_servers_reason(nats_server: NatsProc) -> None:
    from kcm_shared.bus import natsconn

    async def body() -> str:
        nc = await nats.connect(nats_server.url)
        try:
            with pytest.raises(JetStreamError) as err:
                await asyncio.wait_for(natsconn.ensure_dlq_stream(nc.jetstream(), replicas=3), 10)
            return str(err.value)
        finally:
            await nc.close()

    assert "replicas > 1 not supported in non-clustered mode" in uvloop.run(body())
