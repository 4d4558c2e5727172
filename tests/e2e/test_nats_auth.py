"""The bus of `kcm dev` is locked down: every client authenticates with its own nkey, each
identity may publish and subscribe only what its service needs (kcm_cli.natsauth), Secrets'
data never reaches the bus, and the server takes objects as large as kube-apiserver does.

One stack for the module (ReplicaSet controller only, no nodes); each test reads or tries to
forge through a real nats-server with the identities `kcm dev` generated.
"""

from __future__ import annotations

import base64
import json
import stat
from typing import Any

import nats
import nats.errors
import uvloop
from kcm_shared.apimachinery import gvr
from kcm_shared.bus import subjects, wire
from nats.aio.client import Client
from nats.js import api
from nats.js.errors import NotFoundError

from tests.conftest import wait_for
from tests.e2e.bus_identity import as_identity, refused, url
from tests.e2e.devstack import DevStack, stack_fixture

stack = stack_fixture("--nodes", "0", "--controllers", "replicaset")

FORGED = "kcm.obj.apps.v1.replicasets.default.forged"


def test_an_anonymous_client_is_refused(stack: DevStack) -> None:
    async def anonymous() -> str:
        try:
            nc = await nats.connect(url(stack), allow_reconnect=False, max_reconnect_attempts=0)
        except Exception as exc:  # whatever nats-py raises for it, it must say why
            return repr(exc).lower()
        await nc.close()
        return "connected"

    assert "authorization violation" in uvloop.run(anonymous())


def test_credential_files_are_readable_by_their_owner_only(stack: DevStack) -> None:
    files = [stack.state / "nats.conf", *sorted((stack.state / "nats-auth").iterdir())]
    names = {f.name for f in files}
    assert {"watcher.nk", "coordinator.nk", "controllers.nk", "consumer.nk", "nats.conf"} <= names
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stat.S_IMODE((stack.state / "nats-auth").stat().st_mode) == 0o700


def test_the_consumer_reads_objects_but_cannot_forge_one(stack: DevStack) -> None:
    async def body(nc: Client, errors: list[str]) -> dict[str, Any]:
        js = nc.jetstream(timeout=3)
        out: dict[str, Any] = {}
        last = await js.get_last_msg(wire.OBJECTS_STREAM, "kcm.obj.core.v1.namespaces._.kube-system")
        out["read"] = json.loads(last.data)["metadata"]["name"]
        out["core publish refused"] = await refused(nc, errors, FORGED)
        try:
            await js.publish(FORGED, b'{"spec": {"replicas": 1000}}')
            out["jetstream publish"] = "accepted"
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
            out["jetstream publish"] = "refused"
        try:
            await js.get_last_msg(wire.OBJECTS_STREAM, FORGED)
            out["forged state stored"] = True
        except NotFoundError:
            out["forged state stored"] = False
        try:
            name = "third-party"
            work = subjects.work_stream("replicaset-controller")
            await js.add_consumer(
                work, api.ConsumerConfig(durable_name=name, ack_policy=api.AckPolicy.EXPLICIT)
            )
            out["durable on a work stream"] = "created"
        except nats.errors.TimeoutError:
            out["durable on a work stream"] = "refused"
        out["heartbeat refused"] = await refused(nc, errors, "kcm.coord.heartbeat")
        return out

    assert as_identity(stack, "consumer", body) == {
        "read": "kube-system",
        "core publish refused": True,
        "jetstream publish": "refused",
        "forged state stored": False,
        "durable on a work stream": "refused",
        "heartbeat refused": True,
    }


def test_a_controller_publishes_only_its_own_work(stack: DevStack) -> None:
    own = subjects.work_subject("replicaset-controller", 0, "default/no-such-replicaset")
    other = subjects.work_subject("deployment-controller", 0, "default/x")

    async def body(nc: Client, errors: list[str]) -> dict[str, Any]:
        js = nc.jetstream(timeout=3)
        ack = await js.publish(own, b"", stream=subjects.work_stream("replicaset-controller"))
        return {
            "own work stored": ack.seq > 0,
            "object refused": await refused(nc, errors, FORGED),
            "progress refused": await refused(nc, errors, "kcm.progress.apps.v1.replicasets"),
            "other controller's work refused": await refused(nc, errors, other),
            "other controller's dead letters refused": await refused(
                nc, errors, subjects.dlq_subject("deployment-controller")
            ),
        }

    assert set(as_identity(stack, "controllers", body).values()) == {True}


def test_a_secrets_data_never_reaches_the_bus(stack: DevStack) -> None:
    stack.kubectl("create", "namespace", "secrets")
    stack.kubectl(
        "create", "secret", "generic", "db", "-n", "secrets", "--from-literal=password=hunter2-swordfish"
    )
    subject = subjects.object_subject(gvr.Resource("", "v1", "secrets"), "secrets", "db")

    async def body(nc: Client, errors: list[str]) -> bytes | None:
        try:
            return bytes((await nc.jetstream(timeout=3).get_last_msg(wire.OBJECTS_STREAM, subject)).data)
        except NotFoundError:
            return None

    data = wait_for(lambda: as_identity(stack, "consumer", body), 30, 0.5, "the Secret on the bus")
    secret = json.loads(data)
    assert secret["metadata"]["name"] == "db" and secret["type"] == "Opaque"
    assert "data" not in secret and "stringData" not in secret
    assert secret["metadata"]["annotations"]["kcm.io/redacted"] == "data,stringData"
    assert b"hunter2" not in data and base64.b64encode(b"hunter2-swordfish") not in data


def test_the_server_takes_the_largest_object_kube_apiserver_accepts(stack: DevStack) -> None:
    async def body(nc: Client, errors: list[str]) -> int:
        return nc.max_payload

    # kube-apiserver accepts request bodies up to 3 MiB; NATS' default is 1 MiB.
    assert as_identity(stack, "consumer", body) >= 3 * 1024 * 1024
