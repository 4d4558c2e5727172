"""The secure port's pieces: authentication's order and caching, authorization's paths, groups
and review cache, the TLS context's names, the generated pair, and /configz's shape."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import ssl
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kcm_shared.base import errors
from kcm_shared.bus.secure import authn, authz, certs
from kcm_shared.client import kubeclient
from kcm_shared.runtime import configz
from kcm_shared.testing.clock import FakeClock


class Reviews(kubeclient.KubeClient):
    """Answers POSTs with the given status, recording each body."""

    def __init__(self, status: dict[str, Any] | Exception) -> None:
        super().__init__(kubeclient.Connection("http://127.0.0.1:1"))
        self.status = status
        self.bodies: list[Any] = []

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        self.bodies.append(kwargs.get("body"))
        if isinstance(self.status, Exception):
            raise self.status
        return {"status": self.status}


def headers(**values: str) -> authn.Headers:
    lowered = {k.replace("_", "-").lower(): v for k, v in values.items()}
    return authn.Headers(
        lambda name: [lowered[name.lower()]] if name.lower() in lowered else [], lambda: list(lowered)
    )


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


NOW = dt.datetime.now(dt.UTC)


def ca(name: str) -> tuple[x509.Certificate, rsa.RSAPrivateKey]:
    key = _key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(NOW - dt.timedelta(hours=1))
        .not_valid_after(NOW + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def leaf(
    issuer: tuple[x509.Certificate, rsa.RSAPrivateKey], cn: str, *orgs: str, server: bool = False
) -> bytes:
    attrs = [
        x509.NameAttribute(NameOID.COMMON_NAME, cn),
        *(x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs),
    ]
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(attrs))
        .issuer_name(issuer[0].subject)
        .public_key(_key().public_key())
        .serial_number(2)
        .not_valid_before(NOW - dt.timedelta(hours=1))
        .not_valid_after(NOW + dt.timedelta(days=1))
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .sign(issuer[1], hashes.SHA256())
    )
    from cryptography.hazmat.primitives import serialization

    return cert.public_bytes(serialization.Encoding.DER)


CLIENT_CA, PROXY_CA, OTHER_CA = ca("client-ca"), ca("front-proxy-ca"), ca("other")


def test_no_credentials_is_anonymous() -> None:
    asyncio.run(_test_no_credentials_is_anonymous())


async def _test_no_credentials_is_anonymous() -> None:
    assert await authn.Authenticator().authenticate(headers(), None) == authn.ANONYMOUS


def test_a_client_certificate_is_its_common_name_and_organizations() -> None:
    asyncio.run(_test_a_client_certificate_is_its_common_name_and_organizations())


async def _test_a_client_certificate_is_its_common_name_and_organizations() -> None:
    a = authn.Authenticator(client_cas=(CLIENT_CA[0],))
    user = await a.authenticate(headers(), leaf(CLIENT_CA, "alice", "team", "system:masters"))
    assert (user.name, user.groups) == ("alice", ("team", "system:masters", "system:authenticated"))
    with pytest.raises(authn.Unauthenticated):  # another CA's: 401, not anonymous
        await a.authenticate(headers(), leaf(OTHER_CA, "mallory"))
    with pytest.raises(authn.Unauthenticated):  # a serving certificate is no client's
        await a.authenticate(headers(), leaf(CLIENT_CA, "server", server=True))


def test_front_proxy_headers_are_trusted_only_from_its_allowed_certificate() -> None:
    asyncio.run(_test_front_proxy_headers_are_trusted_only_from_its_allowed_certificate())


async def _test_front_proxy_headers_are_trusted_only_from_its_allowed_certificate() -> None:
    rh = authn.RequestHeader((PROXY_CA[0],), allowed_names=("front-proxy-client",))
    a = authn.Authenticator(client_cas=(CLIENT_CA[0],), request_header=rh)
    proxied = headers(x_remote_user="bob", x_remote_group="devs", x_remote_extra_scopes="a%2Fb")
    user = await a.authenticate(proxied, leaf(PROXY_CA, "front-proxy-client"))
    assert (user.name, user.groups, dict(user.extra)) == (
        "bob",
        ("devs", "system:authenticated"),
        {"scopes": ("a%2Fb",)},
    )
    # The headers of a client-CA certificate are not read: it is its own user.
    user = await a.authenticate(proxied, leaf(CLIENT_CA, "alice"))
    assert user.name == "alice"
    with pytest.raises(authn.Unauthenticated):  # the proxy CA's, but not an allowed name
        await a.authenticate(proxied, leaf(PROXY_CA, "someone-else"))


def test_bearer_tokens_are_reviewed_and_cached_for_the_ttl() -> None:
    asyncio.run(_test_bearer_tokens_are_reviewed_and_cached_for_the_ttl())


async def _test_bearer_tokens_are_reviewed_and_cached_for_the_ttl() -> None:
    clock = FakeClock()
    client = Reviews({"authenticated": True, "user": {"username": "sa", "groups": ["g"]}})
    a = authn.Authenticator(tokens=authn.TokenReviewer(client, 10.0, clock=clock.monotonic))
    for _ in range(2):
        user = await a.authenticate(headers(authorization="Bearer t0k"), None)
        assert (user.name, user.groups) == ("sa", ("g", "system:authenticated"))
    assert client.bodies == [
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "t0k"}}
    ]
    clock.advance(11)
    await a.authenticate(headers(authorization="bearer t0k"), None)
    assert len(client.bodies) == 2
    client.status = {"authenticated": False}
    with pytest.raises(authn.Unauthenticated):
        await a.authenticate(headers(authorization="Bearer other"), None)
    client.status = kubeclient.ApiError(500, "InternalError", "down")
    with pytest.raises(authn.Unauthenticated):
        await a.authenticate(headers(authorization="Bearer third"), None)
    # Without a TokenReview client a token is not looked at.
    assert (
        await authn.Authenticator().authenticate(headers(authorization="Bearer x"), None) == authn.ANONYMOUS
    )


@pytest.mark.parametrize(
    ("patterns", "path", "allowed"),
    [
        (["/healthz", "/readyz", "/livez"], "/healthz", True),
        (["/healthz", "/readyz", "/livez"], "/healthz/job-controller", False),
        (["/healthz", "/readyz", "/livez"], "/metrics", False),
        (["healthz"], "/healthz", True),  # the leading / is optional
        (["/debug/*"], "/debug/controllers/x", True),
        (["/debug/*"], "/debugz", False),
    ],
)
def test_always_allowed_paths(patterns: list[str], path: str, allowed: bool) -> None:
    assert authz.Paths(patterns).allows(path) is allowed


def test_a_star_not_at_the_end_is_refused() -> None:
    with pytest.raises(errors.ConfigError, match="only trailing"):
        authz.Paths(["/a*/b"])


def test_reviews_are_asked_for_with_the_method_as_verb_and_cached() -> None:
    asyncio.run(_test_reviews_are_asked_for_with_the_method_as_verb_and_cached())


async def _test_reviews_are_asked_for_with_the_method_as_verb_and_cached() -> None:
    clock = FakeClock()
    client = Reviews({"allowed": True})
    z = authz.Authorizer(authz.Paths(["/healthz"]), client, 10.0, 5.0, clock=clock.monotonic)
    user = authn.User("sa", groups=("g",))
    assert (await z.authorize(user, "get", "/metrics")).allowed
    assert (await z.authorize(user, "get", "/metrics")).allowed
    assert client.bodies == [
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": "sa",
                "groups": ["g"],
                "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
            },
        }
    ]
    client.status = {"allowed": False, "reason": "no"}
    assert (await z.authorize(user, "post", "/metrics")) == authz.Decision(False, "no")
    assert (await z.authorize(authn.User("root", groups=("system:masters",)), "get", "/configz")).allowed
    assert (await z.authorize(authn.ANONYMOUS, "get", "/healthz")).allowed
    assert len(client.bodies) == 2
    client.status = kubeclient.ApiError(500, "InternalError", "down")
    assert (await z.authorize(authn.User("x"), "get", "/metrics")).error


def test_without_a_review_client_only_the_always_allowed_pass() -> None:
    asyncio.run(_test_without_a_review_client_only_the_always_allowed_pass())


async def _test_without_a_review_client_only_the_always_allowed_pass() -> None:
    z = authz.Authorizer(authz.Paths(["/healthz"]), None, 10.0, 10.0)
    assert not (await z.authorize(authn.User("admin"), "get", "/metrics")).allowed
    assert (await z.authorize(authn.ANONYMOUS, "get", "/healthz")).allowed


def test_the_generated_pair_is_written_to_the_cert_dir_and_reused(tmp_path: Path) -> None:
    pair = certs.serving_pair("", "", str(tmp_path), "kube-controller-manager", "0.0.0.0")
    assert (tmp_path / "kube-controller-manager.crt").read_bytes() == pair.cert
    assert (tmp_path / "kube-controller-manager.key").stat().st_mode & 0o077 == 0
    chain = x509.load_pem_x509_certificates(pair.cert)
    assert chain[0].issuer == chain[1].subject and chain[0].subject.rfc4514_string().startswith(
        "CN=localhost@"
    )
    sans = chain[0].extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in sans.get_values_for_type(x509.DNSName)
    assert certs.serving_pair("", "", str(tmp_path), "kube-controller-manager", "0.0.0.0") == pair
    ctx = certs.server_context(pair, "VersionTLS13", [], b"")
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_3 and ctx.verify_mode == ssl.CERT_NONE


def test_tls_names_upstream_refuses_are_refused() -> None:
    pair = certs.self_signed("localhost", "127.0.0.1")
    with pytest.raises(errors.ConfigError, match="unknown tls version"):
        certs.server_context(pair, "TLS1.2", [], b"")
    with pytest.raises(errors.ConfigError, match="Cipher suite NOPE not supported or doesn't exist"):
        certs.server_context(pair, "", ["NOPE"], b"")
    ctx = certs.server_context(
        pair, "", ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256"], b""
    )
    assert "ECDHE-RSA-AES128-GCM-SHA256" in {c["name"] for c in ctx.get_ciphers()}


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (10, "10s"), (90, "1m30s"), (3600, "1h0m0s"), (0.5, "500ms"), (43200, "12h0m0s")],
)
def test_durations_are_written_as_go_writes_them(seconds: float, text: str) -> None:
    assert configz.go_duration(seconds) == text


def test_configz_is_upstreams_shape() -> None:
    args = argparse.Namespace(
        controllers=["*"],
        kube_api_qps=20.0,
        leader_elect=True,
        leader_elect_lease_duration=15.0,
        concurrent_deployment_syncs=5,
        secure_port=10257,
    )
    config = configz.componentconfig(args)["componentconfig"]
    assert config["Generic"]["Controllers"] == ["*"]
    assert config["Generic"]["ClientConnection"] == {"QPS": 20.0}
    assert config["Generic"]["LeaderElection"] == {"LeaderElect": True, "LeaseDuration": "15s"}
    assert config["DeploymentController"] == {"ConcurrentDeploymentSyncs": 5}
    assert "SecurePort" not in str(config)
