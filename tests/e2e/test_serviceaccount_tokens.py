"""Service account tokens end to end: `kcm dev` with the token controller and the legacy token
cleaner, driven with kubectl.

kubectl sends bearer tokens only over TLS, so tokens are presented on the API server's TLS
port (STATE_DIR/kubeconfig-tls, its certificate signed by the cluster CA in STATE_DIR/pki).
Covers `kubectl create token` (authenticates as the ServiceAccount; a forged, an expired and an
orphaned token get 401), legacy token Secrets (filled with token, ca.crt and namespace, the
token authenticates and is stamped with its last use, the Secret goes with its
ServiceAccount, a Secret without the owner annotation is refused), the cleaner (labels an
unused auto-generated token, which is then refused, deletes it a period later, and leaves a
used token and one a pod mounts), work done while the controllers were killed (-9), and the
identity files surviving a restart of the stack.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import signal
import uuid
from pathlib import Path
from typing import Any

from kcm_shared.apis import satoken

from tests.conftest import wait_for
from tests.e2e import devstack

PERIOD = "3s"
ARGS = (
    "--controllers",
    "serviceaccount-token,legacy-service-account-token-cleaner",
    "--nodes",
    "0",
    f"--legacy-service-account-token-clean-up-period={PERIOD}",
)
stack = devstack.stack_fixture(*ARGS)

TRACKING = "kube-apiserver-legacy-service-account-token-tracking"
LAST_USED = "kubernetes.io/legacy-token-last-used"
INVALID_SINCE = "kubernetes.io/legacy-token-invalid-since"


def _namespace(s: devstack.DevStack) -> str:
    ns = f"sat-{uuid.uuid4().hex[:8]}"
    s.kubectl("create", "namespace", ns)
    return ns


def _whoami(s: devstack.DevStack, token: str) -> tuple[int, str]:
    """(exit code, username or error) of `kubectl auth whoami` with `token` over TLS."""
    res = s.kubectl(
        "--kubeconfig",
        str(s.state / "kubeconfig-tls"),
        "auth",
        "whoami",
        "--token",
        token,
        "-o",
        "jsonpath={.status.userInfo.username}",
        check=False,
    )
    return res.returncode, (res.stdout if res.returncode == 0 else res.stderr)


def _get(s: devstack.DevStack, kind: str, name: str, ns: str) -> dict[str, Any] | None:
    res = s.kubectl("get", kind, name, "-n", ns, "-o", "json", "--ignore-not-found")
    return json.loads(res.stdout) if res.stdout.strip() else None


def _apply(s: devstack.DevStack, obj: dict[str, Any]) -> None:
    s.kubectl("apply", "-f", "-", input=json.dumps(obj))


def _refused(stack: devstack.DevStack, token: str, what: str) -> None:
    """The token gets 401 once the change that voids it has reached the authenticator: at once on
    the embedded server, a moment later on kube-apiserver, whose token authenticator reads the
    ServiceAccount, Secret or Pod from its informer cache, and keeps a token it authenticated in
    its own cache for 10 s (the test authenticated it just before)."""
    wait_for(lambda: _unauthorized(_whoami(stack, token)), 30, 0.2, what)


def _token_secret(name: str, ns: str, sa: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": ns,
            "annotations": {"kubernetes.io/service-account.name": sa},
        },
        "type": "kubernetes.io/service-account-token",
    }


def _filled(s: devstack.DevStack, name: str, ns: str) -> dict[str, Any] | None:
    secret = _get(s, "secret", name, ns)
    data = (secret or {}).get("data") or {}
    return secret if secret and all(data.get(k) for k in ("token", "ca.crt", "namespace")) else None


def _unauthorized(code_and_text: tuple[int, str]) -> bool:
    """kubectl's words for a 401 (whoami's own, or client-go's for a request refused)."""
    code, text = code_and_text
    return code != 0 and ("(Unauthorized)" in text or "asked for the client to provide credentials" in text)


def test_create_token_authenticates_as_the_service_account(stack: devstack.DevStack) -> None:
    ns = _namespace(stack)
    stack.kubectl("create", "serviceaccount", "builder", "-n", ns)
    token = stack.kubectl("create", "token", "builder", "-n", ns).stdout.strip()
    assert _whoami(stack, token) == (0, f"system:serviceaccount:{ns}:builder")
    # Upstream's bound claims, signed with the key in STATE_DIR/pki.
    keys = satoken.load_public_keys(stack.state / "pki" / "sa.pub")
    claims = satoken.Verifier(keys).claims(token)
    sa = _get(stack, "serviceaccount", "builder", ns)
    assert sa is not None
    assert claims["iss"] == satoken.DEFAULT_ISSUER and claims["aud"] == [satoken.DEFAULT_ISSUER]
    assert claims["kubernetes.io"] == {
        "namespace": ns,
        "serviceaccount": {"name": "builder", "uid": sa["metadata"]["uid"]},
    }
    assert claims["exp"] - claims["iat"] == 3600

    # A tampered token (another subject, same signature) and garbage are refused.
    head, body, sig = token.split(".")
    forged = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    forged["sub"] = f"system:serviceaccount:{ns}:admin"
    forged_body = base64.urlsafe_b64encode(json.dumps(forged).encode()).decode().rstrip("=")
    assert _unauthorized(_whoami(stack, f"{head}.{forged_body}.{sig}"))
    assert _unauthorized(_whoami(stack, "not-a-token"))

    # Expired: signed with the cluster's real key, an hour past its expiry. The same claims,
    # issued now, pass: what failed was the expiry alone.
    signer = satoken.Signer(satoken.load_private_key(stack.state / "pki" / "sa.key"), satoken.DEFAULT_ISSUER)

    def minted(issued: dt.datetime) -> str:
        claims = satoken.bound_claims(
            ns,
            "builder",
            sa["metadata"]["uid"],
            audiences=[satoken.DEFAULT_ISSUER],
            expiration_seconds=3600,
            now=issued,
        )
        return signer.sign(claims)

    now = dt.datetime.now(dt.UTC)
    assert _unauthorized(_whoami(stack, minted(now - dt.timedelta(hours=2))))
    assert _whoami(stack, minted(now))[0] == 0

    # Once the ServiceAccount is gone, its tokens are worthless.
    stack.kubectl("delete", "serviceaccount", "builder", "-n", ns)
    _refused(stack, token, "the token of a deleted ServiceAccount refused")


def test_token_request_validation(stack: devstack.DevStack) -> None:
    ns = _namespace(stack)
    stack.kubectl("create", "serviceaccount", "short", "-n", ns)
    res = stack.kubectl("create", "token", "short", "-n", ns, "--duration=1m", check=False)
    assert res.returncode != 0
    assert (
        "spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"
        in res.stderr
    )
    res = stack.kubectl("create", "token", "missing", "-n", ns, check=False)
    assert 'serviceaccounts "missing" not found' in res.stderr


def test_bound_token_dies_with_its_object(stack: devstack.DevStack) -> None:
    ns = _namespace(stack)
    stack.kubectl("create", "serviceaccount", "bound", "-n", ns)
    stack.kubectl("create", "secret", "generic", "anchor", "-n", ns, "--from-literal=k=v")
    token = stack.kubectl(
        "create", "token", "bound", "-n", ns, "--bound-object-kind=Secret", "--bound-object-name=anchor"
    ).stdout.strip()
    claims = satoken.Verifier(satoken.load_public_keys(stack.state / "pki" / "sa.pub")).claims(token)
    anchor = _get(stack, "secret", "anchor", ns)
    assert anchor is not None
    assert claims["kubernetes.io"]["secret"] == {"name": "anchor", "uid": anchor["metadata"]["uid"]}
    assert _whoami(stack, token) == (0, f"system:serviceaccount:{ns}:bound")
    stack.kubectl("delete", "secret", "anchor", "-n", ns)
    _refused(stack, token, "the token bound to a deleted Secret refused")

    # kube-apiserver's ServiceAccount admission refuses a pod whose account does not exist.
    stack.kubectl("create", "serviceaccount", "other", "-n", ns)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "other-pod", "namespace": ns},
        "spec": {"serviceAccountName": "other", "containers": [{"name": "c", "image": "busybox"}]},
    }
    _apply(stack, pod)
    res = stack.kubectl(
        "create",
        "token",
        "bound",
        "-n",
        ns,
        "--bound-object-kind=Pod",
        "--bound-object-name=other-pod",
        check=False,
    )
    # kube-apiserver ends "... with different serviceaccount name."; the embedded server names the
    # other account (docs/apiserver.md, "The end-to-end suite on kube-apiserver").
    assert 'cannot bind token for serviceaccount "bound" to pod running with ' in res.stderr

    # Bound to a pod: the pod and its node are in the claims (1.32's pod node info).
    node_name = f"node-{ns}"
    _apply(stack, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node_name}})
    pod["metadata"]["name"] = "own-pod"
    pod["spec"] = {**pod["spec"], "serviceAccountName": "bound", "nodeName": node_name}
    _apply(stack, pod)
    token = stack.kubectl(
        "create", "token", "bound", "-n", ns, "--bound-object-kind=Pod", "--bound-object-name=own-pod"
    ).stdout.strip()
    claims = satoken.Verifier(satoken.load_public_keys(stack.state / "pki" / "sa.pub")).claims(token)
    own_pod, node = _get(stack, "pod", "own-pod", ns), _get(stack, "node", node_name, "default")
    assert own_pod is not None and node is not None
    assert claims["kubernetes.io"]["pod"] == {"name": "own-pod", "uid": own_pod["metadata"]["uid"]}
    assert claims["kubernetes.io"]["node"] == {"name": node_name, "uid": node["metadata"]["uid"]}
    assert _whoami(stack, token)[0] == 0
    stack.kubectl("delete", "node", node_name)


def test_legacy_token_secret_is_filled_and_authenticates(stack: devstack.DevStack) -> None:
    ns = _namespace(stack)
    stack.kubectl("create", "serviceaccount", "legacy", "-n", ns)
    sa = _get(stack, "serviceaccount", "legacy", ns)
    assert sa is not None
    _apply(stack, _token_secret("legacy-token", ns, "legacy"))
    secret = wait_for(lambda: _filled(stack, "legacy-token", ns), 30, 0.2, "token, ca.crt and namespace")
    data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    assert data["ca.crt"] == (stack.state / "pki" / "ca.crt").read_bytes()
    assert data["namespace"] == ns.encode()
    assert secret["metadata"]["annotations"]["kubernetes.io/service-account.uid"] == sa["metadata"]["uid"]
    token = data["token"].decode()
    claims = satoken.Verifier(satoken.load_public_keys(stack.state / "pki" / "sa.pub")).claims(token)
    assert claims == {
        "iss": "kubernetes/serviceaccount",
        "sub": f"system:serviceaccount:{ns}:legacy",
        "kubernetes.io/serviceaccount/namespace": ns,
        "kubernetes.io/serviceaccount/secret.name": "legacy-token",
        "kubernetes.io/serviceaccount/service-account.name": "legacy",
        "kubernetes.io/serviceaccount/service-account.uid": sa["metadata"]["uid"],
    }

    assert _whoami(stack, token) == (0, f"system:serviceaccount:{ns}:legacy")
    today = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    stamped = _get(stack, "secret", "legacy-token", ns)
    assert stamped is not None and stamped["metadata"]["labels"][LAST_USED] == today
    tracking = _get(stack, "configmap", TRACKING, "kube-system")
    assert tracking is not None and tracking["data"]["since"]

    # A second token of the ServiceAccount, listed in its `secrets`: deleting the Secret voids
    # its token (the first one still works) and drops it from the list.
    stack.kubectl(
        "patch", "serviceaccount", "legacy", "-n", ns, "-p", '{"secrets":[{"name":"spare"},{"name":"other"}]}'
    )
    _apply(stack, _token_secret("spare", ns, "legacy"))
    spare = wait_for(lambda: _filled(stack, "spare", ns), 30, 0.2, "spare filled")
    spare_token = base64.b64decode(spare["data"]["token"]).decode()
    # A token its Secret no longer holds is void ("does not match server's copy").
    replaced = base64.b64encode(b"replaced").decode()
    stack.kubectl("patch", "secret", "spare", "-n", ns, "-p", json.dumps({"data": {"token": replaced}}))
    _refused(stack, spare_token, "a token its Secret no longer holds refused")
    stack.kubectl(
        "patch", "secret", "spare", "-n", ns, "-p", json.dumps({"data": {"token": spare["data"]["token"]}})
    )
    wait_for(lambda: _whoami(stack, spare_token)[0] == 0, 10, 0.2, "the token back in its Secret accepted")
    stack.kubectl("delete", "secret", "spare", "-n", ns)
    _refused(stack, spare_token, "the token of a deleted Secret refused")
    assert _whoami(stack, token)[0] == 0

    def listed() -> list[str]:
        sa = _get(stack, "serviceaccount", "legacy", ns) or {}
        return [ref["name"] for ref in sa.get("secrets") or []]

    wait_for(lambda: listed() == ["other"], 30, 0.2, "deleted token Secret unlisted")

    # The Secret goes with its ServiceAccount, and the token with it.
    stack.kubectl("delete", "serviceaccount", "legacy", "-n", ns)
    wait_for(lambda: _get(stack, "secret", "legacy-token", ns) is None, 30, 0.2, "token Secret deleted")
    _refused(stack, token, "the token of a deleted ServiceAccount's Secret refused")


def test_token_secret_of_a_missing_service_account_is_deleted(stack: devstack.DevStack) -> None:
    ns = _namespace(stack)
    _apply(stack, _token_secret("nobody-token", ns, "nobody"))
    wait_for(
        lambda: _get(stack, "secret", "nobody-token", ns) is None, 30, 0.2, "orphaned token Secret deleted"
    )


def test_token_secret_without_owner_annotation_is_refused(stack: devstack.DevStack) -> None:
    ns = _namespace(stack)
    res = stack.kubectl(
        "create",
        "secret",
        "generic",
        "anon",
        "-n",
        ns,
        "--type=kubernetes.io/service-account-token",
        check=False,
    )
    assert res.returncode != 0
    assert (
        'Secret "anon" is invalid: metadata.annotations[kubernetes.io/service-account.name]: Required value'
        in res.stderr
    )


def test_cleaner_invalidates_then_deletes_unused_auto_generated_tokens(stack: devstack.DevStack) -> None:
    ns = _namespace(stack)
    names = ("unused", "used", "mounted", "manual")
    # `manual` is not listed in the ServiceAccount's secrets: a token made by hand, never cleaned.
    _apply(
        stack,
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "auto", "namespace": ns},
            "secrets": [{"name": n} for n in names if n != "manual"],
        },
    )
    for name in names:
        _apply(stack, _token_secret(name, ns, "auto"))
    _apply(
        stack,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "user", "namespace": ns},
            "spec": {
                "containers": [{"name": "c", "image": "busybox"}],
                "volumes": [{"name": "t", "secret": {"secretName": "mounted"}}],
            },
        },
    )
    tokens = {}
    for name in names:
        secret = wait_for(lambda: _filled(stack, name, ns), 30, 0.2, f"{name} filled")  # noqa: B023
        tokens[name] = base64.b64decode(secret["data"]["token"]).decode()
    assert _whoami(stack, tokens["used"])[0] == 0
    # Nothing happens while the API server has tracked token use for less than a period (it
    # started today); a cluster that has tracked for years says so in the tracking ConfigMap.
    stack.kubectl(
        "patch", "configmap", TRACKING, "-n", "kube-system", "-p", '{"data":{"since":"2020-01-01"}}'
    )

    def labels(name: str) -> dict[str, str]:
        secret = _get(stack, "secret", name, ns)
        return dict(((secret or {}).get("metadata") or {}).get("labels") or {})

    today = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    wait_for(lambda: labels("unused").get(INVALID_SINCE) == today, 30, 0.2, "unused token invalidated")
    # The same pass looked at the others and left them alone.
    for name in ("used", "mounted", "manual"):
        assert INVALID_SINCE not in labels(name), name
    _refused(stack, tokens["unused"], "an invalidated token refused")
    assert labels("unused").get(LAST_USED) == today  # a refused use is still a use

    # Deleted once invalidated and unused for a period (dates are days, as upstream: the test
    # sets both back, as if the token had been refused once years ago and never shown since).
    stack.kubectl(
        "label",
        "secret",
        "unused",
        "-n",
        ns,
        f"{INVALID_SINCE}=2020-01-01",
        f"{LAST_USED}=2020-01-02",
        "--overwrite",
    )
    wait_for(lambda: _get(stack, "secret", "unused", ns) is None, 30, 0.2, "invalidated token deleted")
    # By now passes ran with every token older than a period: the others are still untouched.
    for name in ("used", "mounted", "manual"):
        assert _get(stack, "secret", name, ns) is not None, name
        assert INVALID_SINCE not in labels(name), name


def test_work_done_while_the_controller_was_killed(stack: devstack.DevStack) -> None:
    # kill -9 mid-work: the token Secrets created meanwhile are filled once the supervisor has
    # restarted it, and the orphaned one is deleted; nothing is lost with the process.
    ns = _namespace(stack)
    stack.kubectl("create", "serviceaccount", "survivor", "-n", ns)
    pids = stack.controller_pids("serviceaccount-token")
    assert pids
    names = [f"t{i}" for i in range(5)]
    for name in names[:2]:
        _apply(stack, _token_secret(name, ns, "survivor"))
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    for name in names[2:]:
        _apply(stack, _token_secret(name, ns, "survivor"))
    _apply(stack, _token_secret("orphan", ns, "ghost"))
    for name in names:
        wait_for(lambda: _filled(stack, name, ns), 90, 0.3, f"{name} filled after the restart")  # noqa: B023
    wait_for(lambda: _get(stack, "secret", "orphan", ns) is None, 30, 0.3, "orphaned token Secret deleted")
    assert not set(stack.controller_pids("serviceaccount-token")) & set(pids)


def test_identity_files_survive_a_restart(stack: devstack.DevStack) -> None:
    """Last in the module: restarts the stack on its state directory. The CA and keys are
    reused, so a token issued before the restart still authenticates after it."""
    ns = _namespace(stack)
    stack.kubectl("create", "serviceaccount", "keeper", "-n", ns)
    token = stack.kubectl("create", "token", "keeper", "-n", ns).stdout.strip()
    pki = stack.state / "pki"
    before = {p.name: p.read_bytes() for p in sorted(pki.iterdir())}
    assert set(before) >= {"ca.crt", "ca.key", "sa.key", "sa.pub", "apiserver.crt", "apiserver.key"}
    stack.stop()
    with devstack.dev_stack(Path(stack.state).parent, *ARGS) as again:
        assert {p.name: p.read_bytes() for p in sorted(pki.iterdir())} == before
        assert _whoami(again, token) == (0, f"system:serviceaccount:{ns}:keeper")
