"""Bootstrap token and client certificate authentication in the embedded API server (upstream
plugin/pkg/auth/authenticator/token/bootstrap bootstrap_test.go's cases, on stored Secrets; the
x509 CommonNameUserConversion)."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kcm_apiserver import authn, errors
from kcm_apiserver.operations import Api, Ctx
from kcm_apiserver.registry import Registry
from kcm_apiserver.store import Store

TOKEN_ID, TOKEN_SECRET = "abc123", "0123456789abcdef"
TOKEN = f"Bearer {TOKEN_ID}.{TOKEN_SECRET}"
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def world(data: dict[str, str] | None = None, *, enabled: bool = True, **secret: Any) -> authn.Authenticator:
    api = Api(Store(None), Registry())
    secret_rt = api.registry.lookup("", "v1", "secrets")
    assert secret_rt is not None
    values = {"token-id": TOKEN_ID, "token-secret": TOKEN_SECRET, "usage-bootstrap-authentication": "true"}
    values.update(data or {})
    obj = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"bootstrap-token-{TOKEN_ID}"},
        "type": "bootstrap.kubernetes.io/token",
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in values.items() if v is not None},
        **secret,
    }
    api.create(Ctx(secret_rt, "kube-system"), obj)
    return authn.Authenticator(api, "static-token", None, bootstrap_tokens=enabled, now=lambda: NOW)


def refused(a: authn.Authenticator, header: str = TOKEN, cert: x509.Certificate | None = None) -> bool:
    try:
        a.authenticate(header, [], cert)
    except errors.ApiError as exc:
        return exc.code == 401
    return False


def test_a_valid_token_is_its_bootstrap_user() -> None:
    user = world().authenticate(TOKEN, [])
    assert user.username == f"system:bootstrap:{TOKEN_ID}"
    assert user.groups == ("system:bootstrappers", "system:authenticated")


def test_extra_groups_are_added_sorted_and_once() -> None:
    extra = "system:bootstrappers:foo,system:bootstrappers:bar,system:bootstrappers:foo"
    user = world({"auth-extra-groups": extra}).authenticate(TOKEN, [])
    assert user.groups == (
        "system:bootstrappers",
        "system:bootstrappers:bar",
        "system:bootstrappers:foo",
        "system:authenticated",
    )


def test_a_future_expiration_still_authenticates() -> None:
    assert not refused(world({"expiration": "2026-01-01T00:00:01Z"}))


@pytest.mark.parametrize(
    ("data", "header"),
    [
        ({}, f"Bearer {TOKEN_ID}.{'f' * 16}"),  # wrong secret
        ({}, "Bearer zzz999.0123456789abcdef"),  # no such Secret
        ({"token-id": "xyz789"}, TOKEN),  # the Secret's id is another
        ({"usage-bootstrap-authentication": "false"}, TOKEN),
        ({"usage-bootstrap-authentication": ""}, TOKEN),
        ({"expiration": "2025-12-31T23:59:59Z"}, TOKEN),
        ({"expiration": "tomorrow"}, TOKEN),  # unparseable counts as expired
        ({"auth-extra-groups": "system:notbootstrappers:foo"}, TOKEN),
        ({"auth-extra-groups": "system:bootstrappers:foo,"}, TOKEN),
        ({}, f"Bearer {TOKEN_ID.upper()}.{TOKEN_SECRET}"),  # not a token's shape
    ],
    ids=[
        "wrong secret",
        "no secret",
        "id mismatch",
        "usage false",
        "usage missing",
        "expired",
        "bad expiration",
        "bad group",
        "empty group",
        "bad shape",
    ],
)
def test_refused(data: dict[str, str], header: str) -> None:
    assert refused(world(data), header)


def test_another_secret_type_is_no_bootstrap_token() -> None:
    assert refused(world(type="Opaque"))


def test_off_without_the_flag() -> None:
    assert refused(world(enabled=False))


def test_token_review_answers_for_a_bootstrap_token() -> None:
    verdict = world().review(f"{TOKEN_ID}.{TOKEN_SECRET}", [])
    assert verdict.user is not None and verdict.user.username == f"system:bootstrap:{TOKEN_ID}"
    assert world().review(f"{TOKEN_ID}.{'f' * 16}", []).user is None


def certificate(*attrs: tuple[x509.ObjectIdentifier, str]) -> x509.Certificate:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(oid, value) for oid, value in attrs])
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(NOW)
        .not_valid_after(NOW + dt.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )


def test_a_client_certificate_is_its_common_name_in_its_organizations() -> None:
    cert = certificate(
        (NameOID.ORGANIZATION_NAME, "system:nodes"),
        (NameOID.ORGANIZATION_NAME, "other"),
        (NameOID.COMMON_NAME, "system:node:n1"),
    )
    user = world().authenticate("", [], cert)
    fingerprint = hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()
    assert user.username == "system:node:n1"
    assert user.groups == ("system:nodes", "other", "system:authenticated")
    assert user.extra == (("authentication.kubernetes.io/credential-id", (f"X509SHA256={fingerprint}",)),)


def test_a_certificate_without_a_common_name_leaves_it_to_the_token() -> None:
    cert = certificate((NameOID.ORGANIZATION_NAME, "system:nodes"))
    a = world()
    assert a.authenticate(TOKEN, [], cert).username == f"system:bootstrap:{TOKEN_ID}"
    assert refused(a, "", cert)
