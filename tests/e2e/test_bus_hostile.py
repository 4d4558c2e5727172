"""Attacks on the bus and the local stack from issue 28, each against one `kcm dev` (the
ReplicaSet controller alone, no nodes), through a real nats-server with the identities'
seeds (`STATE_DIR/nats-auth/<identity>.nk`) and the stack's own API server.

Each test is named after what must hold; its docstring names the finding it reproduces.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import signal
import stat
import subprocess
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import TypeVar

import msgspec
import nats
import uvloop
import yaml
from kcm_shared.apimachinery import gvr
from kcm_shared.bus import membership, subjects, wire
from nats.aio.client import Client
from nats.js.errors import NotFoundError

from tests.conftest import KCM, wait_for
from tests.e2e import bus_identity
from tests.e2e.devstack import DevStack, children, stack_fixture

stack = stack_fixture("--nodes", "0", "--controllers", "replicaset")

T = TypeVar("T")


def as_identity(stack: DevStack, identity: str, body: Callable[[Client], Awaitable[T]]) -> T:
    """Run `body(nc)` connected to the stack's nats-server as `identity`, with its seed."""

    async def run() -> T:
        url = (stack.state / "nats.url").read_text().strip()
        seed = stack.state / "nats-auth" / f"{identity}.nk"
        nc = await nats.connect(
            url,
            nkeys_seed=str(seed),
            inbox_prefix=bus_identity.inbox(stack, identity),
            max_reconnect_attempts=0,
        )
        try:
            return await body(nc)
        finally:
            await nc.close()

    return uvloop.run(run())


def kcm_status(stack: DevStack) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KCM, "status", "--state-dir", str(stack.state)], capture_output=True, text=True, timeout=60
    )


# -- 12: the state directory and the credential-free loopback API ------------------------------


def test_the_state_directory_is_readable_by_its_owner_only(stack: DevStack) -> None:
    """Finding 12: `apiserver.sqlite3` holds every Secret; logs and pki/ are as private."""
    assert any(stack.state.rglob("*.sqlite3")), sorted(stack.state.rglob("*"))
    assert stat.S_IMODE(stack.state.stat().st_mode) == 0o700
    opened = [
        f"{path.relative_to(stack.state)} {stat.S_IMODE(path.stat().st_mode):o}"
        for path in stack.state.rglob("*")
        if path.exists() and not path.is_symlink() and path.stat().st_mode & 0o077
    ]
    assert opened == []


def api_request(
    stack: DevStack, method: str, path: str, headers: dict[str, str], body: bytes | None = None
) -> tuple[int, str]:
    """One request to the stack's credential-free loopback API, with exactly these headers."""
    config = yaml.safe_load(stack.kubeconfig.read_text())
    server = urllib.parse.urlsplit(config["clusters"][0]["cluster"]["server"])
    conn = http.client.HTTPConnection(server.hostname or "", server.port, timeout=10)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        length = {"Content-Length": str(len(body))} if body is not None else {}
        for name, value in {**headers, **length, "Host": headers.get("Host", server.netloc)}.items():
            conn.putheader(name, value)
        conn.endheaders(body)
        resp = conn.getresponse()
        return resp.status, resp.read().decode(errors="replace")
    finally:
        conn.close()


def test_the_loopback_api_refuses_a_rebound_host_name(stack: DevStack) -> None:
    """Finding 12: a page whose own name resolves to 127.0.0.1 (DNS rebinding) reads Secrets
    through the browser with `Host: attacker.example:<port>`."""
    status, _ = api_request(stack, "GET", "/api/v1/secrets", {"Host": "attacker.example"})
    assert status == 403
    ok, _ = api_request(stack, "GET", "/api/v1/namespaces/default", {})
    assert ok == 200


def test_the_loopback_api_refuses_a_body_a_web_form_can_send(stack: DevStack) -> None:
    """Finding 12: a cross-site `fetch` or form POST sends text/plain, a form type or (a Blob)
    no Content-Type at all without a CORS preflight; the server took each as JSON and created
    the object. A body without a Content-Type from a client that is no web page still reads as
    JSON, as kube-apiserver reads it (the official Python client sends none)."""

    def body(name: str) -> bytes:
        return json.dumps(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "b"}}
        ).encode()

    path = "/api/v1/namespaces/default/configmaps"
    page = {"Origin": "http://attacker.example"}
    for ctype in ("text/plain;charset=UTF-8", "application/x-www-form-urlencoded"):
        status, text = api_request(stack, "POST", path, {"Content-Type": ctype}, body("csrf"))
        assert status == 415, (ctype, status, text)
    status, text = api_request(stack, "POST", path, page, body("csrf"))
    assert status == 403, (status, text)
    assert stack.kubectl("get", "configmap", "csrf", "-n", "default", check=False).returncode != 0
    status, _ = api_request(stack, "POST", path, {"Content-Type": "application/json"}, body("csrf"))
    assert status == 201
    status, _ = api_request(stack, "POST", path, {}, body("untyped"))
    assert status == 201


# -- 1: Secrets on the bus, by allow-list -------------------------------------------------------

SECRETS = gvr.Resource("", "v1", "secrets")
PASSWORD = "hunter2-swordfish"


def published_secret(stack: DevStack, name: str) -> bytes:
    """The last message of the Secret's subject, as the read-only consumer reads it."""

    async def read(nc: Client) -> bytes:
        js = nc.jetstream(timeout=3)
        try:
            msg = await js.get_last_msg(
                wire.OBJECTS_STREAM, subjects.object_subject(SECRETS, "default", name)
            )
        except NotFoundError:
            return b""
        return msg.data or b""

    return as_identity(stack, "consumer", read)


def test_a_secret_applied_client_side_reaches_the_bus_without_its_data(stack: DevStack) -> None:
    """Finding 1: client-side `kubectl apply` keeps the whole manifest, `stringData` included,
    in `kubectl.kubernetes.io/last-applied-configuration`; the consumer read it off the bus."""
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "applied", "namespace": "default", "annotations": {"note": PASSWORD}},
        "stringData": {"password": PASSWORD},
    }
    stack.kubectl("apply", "-f", "-", input=json.dumps(secret))
    live = json.loads(stack.kubectl("get", "secret", "applied", "-o", "json").stdout)
    assert "kubectl.kubernetes.io/last-applied-configuration" in live["metadata"]["annotations"]
    body = wait_for(lambda: published_secret(stack, "applied"), 30, 0.5, "the Secret on the bus")
    assert PASSWORD.encode() not in body and base64.b64encode(PASSWORD.encode()) not in body, body
    published = json.loads(body)
    assert published["type"] == "Opaque" and published["metadata"]["uid"] == live["metadata"]["uid"]
    assert published["metadata"]["annotations"] == {"kcm.io/redacted": "data,stringData"}


def test_a_watcher_start_replaces_secret_states_published_before_the_allow_list(stack: DevStack) -> None:
    """Finding 1: a stream written by an older watcher keeps each Secret's unredacted state,
    and a relist skipped every Secret whose resourceVersion had not changed."""
    stack.kubectl("create", "secret", "generic", "older", f"--from-literal=password={PASSWORD}")
    live = json.loads(stack.kubectl("get", "secret", "older", "-o", "json").stdout)
    wait_for(lambda: published_secret(stack, "older"), 30, 0.5, "the Secret on the bus")

    async def publish_as_before(nc: Client) -> None:
        # What the watcher published before it redacted: the Secret whole, at its resourceVersion.
        headers = {wire.EVENT: wire.MODIFIED, wire.RESOURCE_VERSION: live["metadata"]["resourceVersion"]}
        subject = subjects.object_subject(SECRETS, "default", "older")
        await nc.jetstream(timeout=5).publish(subject, json.dumps(live).encode(), headers=headers)

    as_identity(stack, "watcher", publish_as_before)
    assert PASSWORD.encode() in base64.b64decode(
        json.loads(published_secret(stack, "older"))["data"]["password"]
    )
    watchers = [pid for pid, cmd in children(stack.proc.pid).items() if "watcher" in cmd.split()[:3]]
    assert len(watchers) == 1, children(stack.proc.pid)
    os.kill(watchers[0], signal.SIGKILL)  # the supervisor starts it again, as after an upgrade
    wait_for(lambda: b'"data"' not in published_secret(stack, "older"), 60, 0.5, "the old state replaced")
    stack.wait_healthy()


# -- 2: names longer than a subject may be ------------------------------------------------------

ROLES = gvr.Resource("rbac.authorization.k8s.io", "v1", "roles")
CONFIGMAPS = gvr.Resource("", "v1", "configmaps")


def last_message(stack: DevStack, subject: str) -> tuple[dict[str, str], bytes] | None:
    async def read(nc: Client) -> tuple[dict[str, str], bytes] | None:
        try:
            msg = await nc.jetstream(timeout=3).get_last_msg(wire.OBJECTS_STREAM, subject)
        except NotFoundError:
            return None
        return dict(msg.headers or {}), msg.data or b""

    return as_identity(stack, "consumer", read)


def test_a_name_longer_than_a_subject_may_be_stops_no_publishing(stack: DevStack) -> None:
    """Finding 2: a Role named with 5,000 characters (RBAC names have no length limit) put the
    subject over nats-server's 4,096-byte control line; the server closed the watcher's
    connection, nats-py never reconnected, and nothing was published again."""
    name = "r" * 5000
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name}}
    stack.kubectl("create", "-f", "-", input=json.dumps(role))
    subject = subjects.object_subject(ROLES, "default", name)
    found = wait_for(lambda: last_message(stack, subject), 30, 0.5, "the Role on its digest subject")
    headers, body = found
    assert headers[wire.KEY] == f"default/{name}" and json.loads(body)["metadata"]["name"] == name
    assert subjects.parse_object_subject(subject, headers[wire.KEY]).name == name

    stack.kubectl("create", "configmap", "after-the-long-name")
    after = subjects.object_subject(CONFIGMAPS, "default", "after-the-long-name")
    wait_for(lambda: last_message(stack, after), 30, 0.5, "a ConfigMap created after it on the bus")
    assert "nats connection closed for good" not in stack.log("watcher")


# -- 11: bodies nested too deeply --------------------------------------------------------------

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "nests.hostile.example.com"},
    "spec": {
        "group": "hostile.example.com",
        "scope": "Namespaced",
        "names": {"plural": "nests", "singular": "nest", "kind": "Nest"},
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
NESTS = gvr.Resource("hostile.example.com", "v1", "nests")


def nest(name: str, depth: int) -> bytes:
    """A Nest whose `spec` holds objects nested `depth` deep."""
    head = json.dumps({"apiVersion": "hostile.example.com/v1", "kind": "Nest", "metadata": {"name": name}})
    return (head[:-1] + ', "spec": ' + '{"a": ' * depth + "1" + "}" * depth + "}").encode()


def on_the_bus(stack: DevStack, name: str) -> bool:
    async def read(nc: Client) -> bool:
        js = nc.jetstream(timeout=3)
        try:
            await js.get_last_msg(wire.OBJECTS_STREAM, subjects.object_subject(NESTS, "default", name))
        except NotFoundError:
            return False
        return True

    return as_identity(stack, "consumer", read)


def test_a_body_nested_too_deeply_is_refused_and_stops_no_watch(stack: DevStack) -> None:
    """Finding 11: a body nested ~1,000 deep raises RecursionError where Python decodes it.
    The embedded API server answered such a body with 500 (a RecursionError of its own);
    kube-apiserver stores up to 10,000 levels, which killed the watcher's loop for the
    resource (that decoding is covered in tests/unit/watcher/test_objects.py). Now the body
    is refused as kube-apiserver refuses too deep a body (400), a deep-enough one is taken,
    and the custom resources around them reach the bus."""
    stack.kubectl("create", "-f", "-", input=json.dumps(CRD))
    path = "/apis/hostile.example.com/v1/namespaces/default/nests"
    json_type = {"Content-Type": "application/json"}
    wait_for(
        lambda: api_request(stack, "POST", path, json_type, nest("first", 3))[0] == 201,
        30,
        0.5,
        "the CRD served",
    )
    wait_for(lambda: on_the_bus(stack, "first"), 90, 0.5, "the first Nest on the bus")

    status, text = api_request(stack, "POST", path, json_type, nest("deep", 960))
    assert status == 400 and "exceeded max depth" in text, (status, text[:300])
    status, text = api_request(stack, "POST", path, json_type, nest("shallow-enough", 200))
    assert status == 201, (status, text[:300])
    status, _ = api_request(stack, "POST", path, json_type, nest("after", 3))
    assert status == 201
    wait_for(lambda: on_the_bus(stack, "after"), 20, 0.5, "a Nest created after the deep one on the bus")
    assert on_the_bus(stack, "shallow-enough")


# -- 13: `kcm status` escapes what the bus says (last: it leaves a controller behind) -----------

ESCAPES = "\x1b]0;owned\x07\x1b[2J\x1b[31m\u202e"
FORGED_FOR = "replicaset-controller"  # what the stack's `controllers` identity runs


def test_kcm_status_shows_terminal_escapes_from_the_bus_as_escapes(stack: DevStack) -> None:
    """Finding 13: a controller identity beats with an instance name and ops URL holding
    terminal escapes (retitle the window, clear the screen); `kcm status` must not emit them."""
    instance = f"forged{ESCAPES}"
    beat = membership.Heartbeat(
        service="controllers",
        instance=instance,
        # The identity may beat only for the controllers it runs (its heartbeat scope): a
        # replica of its own with a hostile name, which takes partitions until it says goodbye.
        controllers=[FORGED_FOR],
        held={},
        health={FORGED_FOR: f"error{ESCAPES}"},
        depth={},
        ops_url=f"http://127.0.0.1:1/{ESCAPES}",
    )

    subject = subjects.heartbeat_subject(beat.controllers, instance)

    async def forge(nc: Client) -> None:
        await nc.request(subject, msgspec.json.encode(beat), timeout=5)

    async def leave(nc: Client) -> None:
        goodbye = msgspec.structs.replace(beat, controllers=[])
        await nc.request(subject, msgspec.json.encode(goodbye), timeout=5)

    def listed() -> str | None:
        as_identity(stack, "controllers", forge)
        out = kcm_status(stack).stdout
        members = out.partition("\nMEMBER ")[2]  # the forged replica's own row, not only its health
        return out if "forged" in members else None

    try:
        out = wait_for(listed, 60, 0.5, "the forged member in `kcm status`")
    finally:
        as_identity(stack, "controllers", leave)
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out, repr(out)
    assert "forged\\x1b]0;owned\\x07\\x1b[2J\\x1b[31m\\u202e" in out
