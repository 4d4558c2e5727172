"""A `kcm controllers` process serving upstream's secure port against a dev stack, for the
e2e tests of what that port serves (test_secure_port, test_gc_graph).

- `dev_stack(tmp, controllers)`: a dev stack of `controllers` whose API server can say no.
- `serve(stack, tmp)`: runs the stack's controllers again with `--secure-port` on a free port,
  delegated authentication and authorization through the stack's kubeconfig, a self-signed
  pair in `tmp/certs`; yields once /livez answers, stops the process after.
- `Secure.get(path, token=, cert=, headers=)`: (status, body) over TLS trusting that pair.
- `tokens(stack, namespace, role, url)`: (token allowed `get` on the non-resource `url`, token
  of another ServiceAccount that is not), through a ClusterRole `role` made for them.
- `serves_reviews(stack)`: skips a test unless the API server serves TokenReview and
  SubjectAccessReview.
"""

from __future__ import annotations

import contextlib
import json
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kcm_cli import natsd, pki

from tests.conftest import KCM, stop_process, wait_for
from tests.e2e import devstack


@contextlib.contextmanager
def dev_stack(tmp: Path, controllers: str) -> Iterator[devstack.DevStack]:
    # The embedded server enforces RBAC only when asked: under its AlwaysAllow default every
    # SubjectAccessReview is allowed, as kube-apiserver's would be in that mode.
    rbac = ("--authorization-mode=RBAC",) if devstack.APISERVER == "embedded" else ()
    with devstack.dev_stack(tmp, "--nodes", "0", "--controllers", controllers, *rbac) as served:
        yield served


@dataclass
class Secure:
    proc: subprocess.Popen[bytes]
    url: str
    cert_dir: Path
    log: Path

    def context(self, cert: pki.Pair | None = None) -> ssl.SSLContext:
        """Trusting the self-signed chain in --cert-dir; presenting `cert` when given."""
        ctx = ssl.create_default_context(cafile=str(self.cert_dir / "kube-controller-manager.crt"))
        if cert is not None:
            ctx.load_cert_chain(cert.cert, cert.key)
        return ctx

    def get(
        self,
        path: str,
        *,
        token: str = "",
        cert: pki.Pair | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, str]:
        request = urllib.request.Request(self.url + path, headers=dict(headers or {}))
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=10, context=self.context(cert)) as resp:
                return int(resp.status), resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()


@contextlib.contextmanager
def serve(stack: devstack.DevStack, tmp: Path) -> Iterator[Secure]:
    port = natsd.free_port()
    kubeconfig, pki_dir = stack.state / "kubeconfig", stack.state / "pki"
    argv = [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--client-ca-file={pki_dir / 'ca.crt'}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={tmp / 'certs'}",
        # What the stack's controllers process runs: its NATS identity is scoped to them.
        f"--controllers={','.join(stack.expected)}",
        "--nats-url",
        (stack.state / "nats.url").read_text().strip(),
        "--nats-nkey-seed",
        str(stack.state / "nats-auth" / "controllers.nk"),
        "--instance=secure",
    ]
    log = tmp / "secure.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen([KCM, "controllers", *argv], stdout=out, stderr=out)
    served = Secure(proc, f"https://127.0.0.1:{port}", tmp / "certs", log)
    try:

        def up() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"kcm controllers ended: {log.read_text()[-4000:]}")
            try:
                return served.get("/livez")[0] == 200
            except OSError:
                return False

        wait_for(up, 90, interval=0.2, what="the secure port serving")
        yield served
    finally:
        stop_process(proc)


def serves_reviews(stack: devstack.DevStack) -> None:
    """Skip unless the API server serves TokenReview and SubjectAccessReview."""
    groups = json.loads(stack.kubectl("get", "--raw", "/apis").stdout)
    names = {g["name"] for g in groups.get("groups", [])}
    missing = {"authentication.k8s.io", "authorization.k8s.io"} - names
    if missing:
        pytest.skip(
            f"the API server does not serve {', '.join(sorted(missing))} (TokenReview, SubjectAccessReview)"
        )


def tokens(stack: devstack.DevStack, namespace: str, role: str, url: str) -> tuple[str, str]:
    """ServiceAccounts `allowed` (bound to a new ClusterRole `role`: get on `url`) and `nobody`
    in a new `namespace`, and a token of each."""
    k = stack.kubectl
    k("create", "namespace", namespace)
    for sa in ("allowed", "nobody"):
        k("create", "serviceaccount", sa, "-n", namespace)
    k("create", "clusterrole", role, "--verb=get", f"--non-resource-url={url}")
    k("create", "clusterrolebinding", role, f"--clusterrole={role}", f"--serviceaccount={namespace}:allowed")
    allowed = k("create", "token", "allowed", "-n", namespace).stdout.strip()
    return allowed, k("create", "token", "nobody", "-n", namespace).stdout.strip()
