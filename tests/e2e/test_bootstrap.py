"""The bootstrap signer and the token cleaner end to end: `kcm dev --controllers
bootstrapsigner,tokencleaner` (both off by default, as upstream).

Through kubectl, as kubeadm scripts it: a bootstrap token Secret in kube-system and the
cluster-info ConfigMap in kube-public; the `jws-kubeconfig-<id>` signature appears and verifies
the way kubeadm's discovery verifies it (recomputed here with the standard library's HMAC:
header `{"alg":"HS256","kid":"<id>"}`, detached payload, compared as strings); it goes when the
token stops signing. A token Secret whose `expiration` passes is deleted then; one already
expired at once. One stack.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import json
import secrets
from typing import Any

import pytest
import yaml

from tests.conftest import wait_for
from tests.e2e import devstack

stack = devstack.stack_fixture("--controllers", "bootstrapsigner,tokencleaner", "--nodes", "0")

KUBECONFIG = (
    "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: https://10.0.0.1:6443\n  name: ''\n"
)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def kubeadm_signature(content: str, token_id: str, token_secret: str) -> str:
    header = b64url(('{"alg":"HS256","kid":"' + token_id + '"}').encode())
    mac = hmac.new(token_secret.encode(), f"{header}.{b64url(content.encode())}".encode(), hashlib.sha256)
    return f"{header}..{b64url(mac.digest())}"


def token_secret(token_id: str, secret: str, **data: str) -> str:
    doc = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "bootstrap.kubernetes.io/token",
        "metadata": {"name": f"bootstrap-token-{token_id}", "namespace": "kube-system"},
        "stringData": {"token-id": token_id, "token-secret": secret, **data},
    }
    # JSON, not YAML: a random hex id such as 1e4567 is a string to PyYAML but a number to kubectl.
    return json.dumps(doc)


def cluster_info(s: devstack.DevStack) -> dict[str, str]:
    res = s.kubectl("-n", "kube-public", "get", "configmap", "cluster-info", "-o", "json", check=False)
    if res.returncode != 0:
        return {}
    data: dict[str, str] = json.loads(res.stdout).get("data") or {}
    return data


@pytest.fixture(scope="module")
def published(stack: devstack.DevStack) -> None:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cluster-info", "namespace": "kube-public"},
        "data": {"kubeconfig": KUBECONFIG},
    }
    stack.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))


def test_a_signing_token_signs_cluster_info_as_kubeadm_verifies(
    stack: devstack.DevStack, published: None
) -> None:
    token_id, secret = secrets.token_hex(3), secrets.token_hex(8)
    stack.kubectl(
        "apply", "-f", "-", input=token_secret(token_id, secret, **{"usage-bootstrap-signing": "true"})
    )
    key = f"jws-kubeconfig-{token_id}"
    signature = wait_for(lambda: cluster_info(stack).get(key), 30, interval=0.25, what=key)
    assert signature == kubeadm_signature(KUBECONFIG, token_id, secret)
    header = json.loads(base64.urlsafe_b64decode(signature.split(".")[0] + "=="))
    assert header == {"alg": "HS256", "kid": token_id}
    assert cluster_info(stack)["kubeconfig"] == KUBECONFIG
    # No longer for signing: the signature goes.
    stack.kubectl(
        "-n",
        "kube-system",
        "patch",
        "secret",
        f"bootstrap-token-{token_id}",
        "--type=merge",
        "-p",
        json.dumps({"stringData": {"usage-bootstrap-signing": "false"}}),
    )
    wait_for(lambda: key not in cluster_info(stack), 30, interval=0.25, what=f"{key} removed")


def test_a_token_not_for_signing_signs_nothing(stack: devstack.DevStack, published: None) -> None:
    signer_id, other_id = secrets.token_hex(3), secrets.token_hex(3)
    stack.kubectl("apply", "-f", "-", input=token_secret(other_id, secrets.token_hex(8)))
    # A signing token afterwards: once its signature is there, the other one was seen before it.
    stack.kubectl(
        "apply",
        "-f",
        "-",
        input=token_secret(signer_id, secrets.token_hex(8), **{"usage-bootstrap-signing": "true"}),
    )
    wait_for(lambda: f"jws-kubeconfig-{signer_id}" in cluster_info(stack), 30, interval=0.25, what="signed")
    assert f"jws-kubeconfig-{other_id}" not in cluster_info(stack)
    stack.kubectl("-n", "kube-system", "delete", "secret", f"bootstrap-token-{signer_id}")
    wait_for(
        lambda: f"jws-kubeconfig-{signer_id}" not in cluster_info(stack), 30, interval=0.25, what="removed"
    )


def stamp(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_expired_token_secrets_are_deleted_at_their_expiry(stack: devstack.DevStack) -> None:
    soon_id, past_id, kept_id = (secrets.token_hex(3) for _ in range(3))
    now = dt.datetime.now(dt.UTC)
    stack.kubectl(
        "apply",
        "-f",
        "-",
        input=token_secret(past_id, "x" * 16, expiration=stamp(now - dt.timedelta(hours=1))),
    )
    stack.kubectl(
        "apply",
        "-f",
        "-",
        input=token_secret(soon_id, "x" * 16, expiration=stamp(now + dt.timedelta(seconds=5))),
    )
    stack.kubectl(
        "apply",
        "-f",
        "-",
        input=token_secret(kept_id, "x" * 16, expiration=stamp(now + dt.timedelta(hours=1))),
    )

    def exists(token_id: str) -> bool:
        res = stack.kubectl("-n", "kube-system", "get", "secret", f"bootstrap-token-{token_id}", check=False)
        return res.returncode == 0

    wait_for(lambda: not exists(past_id), 30, interval=0.25, what="the expired token deleted")
    wait_for(lambda: not exists(soon_id), 40, interval=0.25, what="the token deleted at its expiry")
    assert exists(kept_id)
