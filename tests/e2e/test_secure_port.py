"""`kcm controllers` serves upstream's secure port: HTTPS on `--secure-port` with delegated
authentication and authorization through the API server, as kube-controller-manager does.

- With no `--tls-cert-file`, a self-signed pair is written to `--cert-dir` as
  `kube-controller-manager.crt/.key`, and /healthz, /livez, /readyz answer over TLS to anyone
  (`--authorization-always-allow-paths`).
- An anonymous /metrics is forbidden with upstream's Status; a ServiceAccount token bound to a
  ClusterRole allowing `get` on the nonResourceURL /metrics reads the metrics, another is
  forbidden naming its user, a made-up token is unauthorized; a client certificate of
  `--client-ca-file` authenticates as its common name; the front proxy's certificate (its CA
  looked up in kube-system/extension-apiserver-authentication) carries X-Remote-User; a user in
  `system:masters` reads /configz in upstream's shape. These need TokenReview and
  SubjectAccessReview, and an authorizer that can say no: the embedded server runs with
  `--authorization-mode=RBAC` here; on an API server that does not serve authentication.k8s.io
  they are skipped, naming the missing API.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from kcm_cli import pki

from tests.e2e import devstack, secureport
from tests.e2e.secureport import Secure, serves_reviews


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[devstack.DevStack]:
    with secureport.dev_stack(tmp_path_factory.mktemp("devstack"), "ttl-after-finished") as served:
        yield served


@pytest.fixture(scope="module")
def secure(stack: devstack.DevStack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secure]:
    with secureport.serve(stack, tmp_path_factory.mktemp("secure")) as served:
        yield served


def test_self_signed_pair_in_cert_dir_and_health_over_tls_for_anyone(secure: Secure) -> None:
    assert (secure.cert_dir / "kube-controller-manager.crt").is_file()
    assert (secure.cert_dir / "kube-controller-manager.key").stat().st_mode & 0o077 == 0
    assert secure.get("/healthz") == (200, "ok")
    assert secure.get("/readyz")[0] == 200
    code, body = secure.get("/healthz?verbose")
    assert code == 200 and "[+]ttl-after-finished-controller ok" in body
    with pytest.raises(OSError):  # no plain HTTP: the TLS server drops the connection
        urllib.request.urlopen(secure.url.replace("https", "http") + "/healthz", timeout=5)


def test_anonymous_metrics_are_forbidden_with_upstreams_status(
    stack: devstack.DevStack, secure: Secure
) -> None:
    serves_reviews(stack)
    code, body = secure.get("/metrics")
    assert code == 403, body
    status = json.loads(body)
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "Forbidden", 403)
    assert status["message"].startswith('forbidden: User "system:anonymous" cannot get path "/metrics"')
    # The always-allowed paths are exact, as upstream's: one check's own path is authorized.
    assert secure.get("/healthz/ttl-after-finished-controller")[0] == 403


def test_service_account_tokens_are_reviewed_and_authorized(stack: devstack.DevStack, secure: Secure) -> None:
    serves_reviews(stack)
    allowed, denied = secureport.tokens(stack, "scrape", "kcm-secure-metrics", "/metrics")
    code, body = secure.get("/metrics", token=allowed)
    assert code == 200, body
    assert "workqueue_adds_total" in body
    code, body = secure.get("/metrics", token=denied)
    assert code == 403, body
    assert 'User \\"system:serviceaccount:scrape:nobody\\" cannot get path \\"/metrics\\"' in body
    code, body = secure.get("/metrics", token="not-a-token")
    assert code == 401, body
    assert json.loads(body)["reason"] == "Unauthorized"


def test_client_certificates_and_the_front_proxy_authenticate(
    stack: devstack.DevStack, secure: Secure, tmp_path: Path
) -> None:
    serves_reviews(stack)
    pki_dir = stack.state / "pki"
    # kcm dev's CA signs this one in a copy of its directory, leaving the stack's files alone.
    for name in ("ca.crt", "ca.key", "sa.key", "sa.pub", "apiserver.crt", "apiserver.key"):
        (tmp_path / name).write_bytes((pki_dir / name).read_bytes())
    scraper = pki.client(tmp_path, "scraper", "cert-scraper")
    stack.kubectl("create", "clusterrole", "kcm-secure-cert", "--verb=get", "--non-resource-url=/metrics")
    stack.kubectl(
        "create",
        "clusterrolebinding",
        "kcm-secure-cert",
        "--clusterrole=kcm-secure-cert",
        "--user=cert-scraper",
    )
    code, body = secure.get("/metrics", cert=scraper)
    assert code == 200, body
    master = pki.client(tmp_path, "master", "cert-admin", ("system:masters",))
    assert secure.get("/healthz/ttl-after-finished-controller", cert=master) == (200, "ok")
    code, body = secure.get("/configz", cert=master)
    assert code == 200, body
    config = json.loads(body)["componentconfig"]
    assert config["Generic"]["Controllers"] == stack.expected
    proxy = pki_dir / "front-proxy-client.crt"
    if not proxy.exists():
        return  # the embedded server has no front proxy
    front = pki.Pair(proxy, pki_dir / "front-proxy-client.key")
    code, body = secure.get("/configz", cert=front, headers={"X-Remote-User": "someone"})
    assert code == 403 and 'User \\"someone\\"' in body, body
    code, body = secure.get(
        "/configz", cert=front, headers={"X-Remote-User": "someone", "X-Remote-Group": "system:masters"}
    )
    assert code == 200, body
