"""Attacks on the bus and the local stack from issue 28, each against one `kcm dev` (the
ReplicaSet controller alone, no nodes), through a real nats-server with the identities'
seeds (`STATE_DIR/nats-auth/<identity>.nk`) and the stack's own API server.

Each test is named after what must hold; its docstring names the finding it reproduces.
"""

from __future__ import annotations

import http.client
import json
import stat
import urllib.parse

import yaml

from tests.e2e.devstack import DevStack, stack_fixture

stack = stack_fixture("--nodes", "0", "--controllers", "replicaset")


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
    """Finding 12: a cross-site `fetch` or form POST sends text/plain without a CORS
    preflight; the server took it as JSON and created the object."""
    body = json.dumps(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "csrf"}, "data": {"a": "b"}}
    ).encode()
    for ctype in ("text/plain;charset=UTF-8", "application/x-www-form-urlencoded", None):
        headers = {"Content-Type": ctype} if ctype else {}
        status, text = api_request(stack, "POST", "/api/v1/namespaces/default/configmaps", headers, body)
        assert status == 415, (ctype, status, text)
    assert stack.kubectl("get", "configmap", "csrf", "-n", "default", check=False).returncode != 0
    status, _ = api_request(
        stack, "POST", "/api/v1/namespaces/default/configmaps", {"Content-Type": "application/json"}, body
    )
    assert status == 201
