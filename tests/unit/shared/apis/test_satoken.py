"""kcm_shared.apis.satoken: claims as upstream writes them, signatures that verify, and every way a
token must be refused (upstream pkg/serviceaccount jwt_test.go / claims_test.go cases)."""

from __future__ import annotations

import base64
import datetime as dt
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from kcm_shared.apis import satoken

NOW = dt.datetime(2026, 11, 24, 12, 0, tzinfo=dt.UTC)
ISSUER = "https://kubernetes.default.svc.cluster.local"


@pytest.fixture(scope="module")
def key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def other_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _segments(token: str) -> tuple[dict[str, object], dict[str, object]]:
    head, body, _ = token.split(".")
    pad = lambda s: s + "=" * (-len(s) % 4)  # noqa: E731
    return json.loads(base64.urlsafe_b64decode(pad(head))), json.loads(base64.urlsafe_b64decode(pad(body)))


def _forge(token: str, **changes: object) -> str:
    """The token with its claims edited and its signature kept (what a tamperer can do)."""
    head, _, sig = token.split(".")
    _, claims = _segments(token)
    claims.update(changes)
    new_body = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"{head}.{new_body}.{sig}"


def test_legacy_claims_are_upstreams(key: rsa.RSAPrivateKey) -> None:
    token = satoken.Signer(key, satoken.LEGACY_ISSUER).sign(
        satoken.legacy_claims("ns", "sa", "uid-1", "sa-token")
    )
    header, claims = _segments(token)
    assert header == {"alg": "RS256", "kid": satoken.key_id(key.public_key())}
    assert claims == {
        "iss": "kubernetes/serviceaccount",
        "sub": "system:serviceaccount:ns:sa",
        "kubernetes.io/serviceaccount/namespace": "ns",
        "kubernetes.io/serviceaccount/secret.name": "sa-token",
        "kubernetes.io/serviceaccount/service-account.name": "sa",
        "kubernetes.io/serviceaccount/service-account.uid": "uid-1",
    }
    info = satoken.check_legacy(satoken.Verifier([key.public_key()]).claims(token))
    assert (info.namespace, info.name, info.uid, info.secret_name, info.legacy) == (
        "ns",
        "sa",
        "uid-1",
        "sa-token",
        True,
    )
    assert info.username == "system:serviceaccount:ns:sa"


def test_bound_claims_are_upstreams(key: rsa.RSAPrivateKey) -> None:
    claims = satoken.bound_claims(
        "ns",
        "sa",
        "uid-1",
        audiences=["api"],
        expiration_seconds=3600,
        now=NOW,
        pod=("p", "pod-uid"),
        node=("n", "node-uid"),
    )
    token = satoken.Signer(key, ISSUER).sign(claims)
    _, decoded = _segments(token)
    stamp = int(NOW.timestamp())
    assert decoded["iss"] == ISSUER and decoded["sub"] == "system:serviceaccount:ns:sa"
    assert (decoded["aud"], decoded["iat"], decoded["nbf"], decoded["exp"]) == (
        ["api"],
        stamp,
        stamp,
        stamp + 3600,
    )
    assert decoded["kubernetes.io"] == {
        "namespace": "ns",
        "serviceaccount": {"name": "sa", "uid": "uid-1"},
        "pod": {"name": "p", "uid": "pod-uid"},
        "node": {"name": "n", "uid": "node-uid"},
    }
    assert isinstance(decoded["jti"], str) and len(decoded["jti"]) == 36
    info = satoken.check_bound(
        satoken.Verifier([key.public_key()]).claims(token), issuers=[ISSUER], audiences=["api"], now=NOW
    )
    assert (info.namespace, info.name, info.uid) == ("ns", "sa", "uid-1")


def _bound(key: rsa.RSAPrivateKey, **kw: object) -> str:
    claims = satoken.bound_claims("ns", "sa", "uid-1", audiences=["api"], expiration_seconds=600, now=NOW)
    claims.update(kw)
    return satoken.Signer(key, ISSUER).sign(claims)


@pytest.mark.parametrize(
    ("now", "issuers", "audiences", "message"),
    [
        (NOW + dt.timedelta(seconds=600 + 61), [ISSUER], ["api"], "Token has expired."),
        (NOW - dt.timedelta(seconds=61), [ISSUER], ["api"], "Token is not valid yet."),
        (NOW, ["https://elsewhere"], ["api"], "unknown issuer"),
        (NOW, [ISSUER], ["other"], "token audiences are invalid for the target audiences"),
    ],
)
def test_bound_token_refused(
    key: rsa.RSAPrivateKey, now: dt.datetime, issuers: list[str], audiences: list[str], message: str
) -> None:
    claims = satoken.Verifier([key.public_key()]).claims(_bound(key))
    with pytest.raises(satoken.InvalidToken, match=message):
        satoken.check_bound(claims, issuers=issuers, audiences=audiences, now=now)


def test_bound_token_within_leeway_accepted(key: rsa.RSAPrivateKey) -> None:
    claims = satoken.Verifier([key.public_key()]).claims(_bound(key))
    later = NOW + dt.timedelta(seconds=600 + 59)  # go-jose's minute of leeway
    assert satoken.check_bound(claims, issuers=[ISSUER], audiences=["api"], now=later).name == "sa"


def test_tampered_claims_fail_the_signature(key: rsa.RSAPrivateKey) -> None:
    verifier = satoken.Verifier([key.public_key()])
    token = _bound(key)
    with pytest.raises(satoken.InvalidToken, match="invalid signature"):
        verifier.claims(_forge(token, sub="system:serviceaccount:kube-system:admin"))
    with pytest.raises(satoken.InvalidToken, match="invalid signature"):
        verifier.claims(_forge(token, exp=int(NOW.timestamp()) + 10**6))


def test_other_keys_and_algorithms_refused(key: rsa.RSAPrivateKey, other_key: rsa.RSAPrivateKey) -> None:
    verifier = satoken.Verifier([key.public_key()])
    with pytest.raises(satoken.InvalidToken, match="invalid signature"):
        verifier.claims(_bound(other_key))
    _, body, _ = _bound(key).split(".")
    none_header = base64.urlsafe_b64encode(b'{"alg":"none"}').decode().rstrip("=")
    with pytest.raises(satoken.InvalidToken, match="unsupported signing algorithm"):
        verifier.claims(f"{none_header}.{body}.")
    for garbage in ("", "abc", "a.b", "a.b.c.d", "!!.??.**", "e30.e30.e30"):
        with pytest.raises(satoken.InvalidToken):
            verifier.claims(garbage)


def test_any_of_several_keys_verifies(key: rsa.RSAPrivateKey, other_key: rsa.RSAPrivateKey) -> None:
    verifier = satoken.Verifier([other_key.public_key(), key.public_key()])
    assert verifier.claims(_bound(key))["sub"] == "system:serviceaccount:ns:sa"


@pytest.mark.parametrize(
    ("drop", "message"),
    [
        ("sub", "sub claim is missing"),
        (satoken.LEGACY_NAMESPACE, "namespace claim is missing"),
        (satoken.LEGACY_SECRET_NAME, "secretName claim is missing"),
        (satoken.LEGACY_SA_NAME, "serviceAccountName claim is missing"),
        (satoken.LEGACY_SA_UID, "serviceAccountUID claim is missing"),
    ],
)
def test_legacy_claims_incomplete(drop: str, message: str) -> None:
    claims = {"iss": satoken.LEGACY_ISSUER, **satoken.legacy_claims("ns", "sa", "uid", "tok")}
    del claims[drop]
    with pytest.raises(satoken.InvalidToken, match=message):
        satoken.check_legacy(claims)


def test_legacy_sub_must_match() -> None:
    claims = {"iss": satoken.LEGACY_ISSUER, **satoken.legacy_claims("ns", "sa", "uid", "tok")}
    claims["sub"] = "system:serviceaccount:ns:other"
    with pytest.raises(satoken.InvalidToken, match="sub claim is invalid"):
        satoken.check_legacy(claims)


@pytest.mark.parametrize(
    ("username", "split"),
    [
        ("system:serviceaccount:ns:name", ("ns", "name")),
        ("system:serviceaccount:ns", None),
        ("system:serviceaccount::name", None),
        ("system:serviceaccount:ns:name:extra", None),
        ("system:admin", None),
    ],
)
def test_split_username(username: str, split: tuple[str, str] | None) -> None:
    assert satoken.split_username(username) == split


def test_key_files(tmp_path: Path, key: rsa.RSAPrivateKey) -> None:
    private = tmp_path / "sa.key"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    public = tmp_path / "sa.pub"
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    loaded = satoken.load_private_key(private)
    assert satoken.key_id(loaded.public_key()) == satoken.key_id(key.public_key())
    # A key file may hold public or private keys: both verify.
    for path in (public, private):
        assert [satoken.key_id(k) for k in satoken.load_public_keys(path)] == [
            satoken.key_id(key.public_key())
        ]
    ec_key = tmp_path / "ec.key"
    ec_key.write_bytes(
        ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    with pytest.raises(ValueError, match="want an RSA private key"):
        satoken.load_private_key(ec_key)
    garbage = tmp_path / "garbage"
    garbage.write_text("not a key")
    with pytest.raises(ValueError, match="no RSA key found"):
        satoken.load_public_keys(garbage)


def test_verified_tokens_are_remembered_within_a_bound(
    key: rsa.RSAPrivateKey, other_key: rsa.RSAPrivateKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(satoken, "VERIFIED_CACHE", 2)
    verifier = satoken.Verifier([key.public_key()])
    first, second, third = _bound(key), _bound(key, jti="2"), _bound(key, jti="3")
    assert verifier.claims(first) is verifier.claims(first)  # the second call is the cache's
    verifier.claims(second)
    verifier.claims(third)  # evicts `first`, the oldest
    assert verifier._verified.keys() == {second, third}
    # A refused token is never remembered: it fails again, every time.
    for _ in range(2):
        with pytest.raises(satoken.InvalidToken):
            verifier.claims(_bound(other_key))
    assert len(verifier._verified) == 2
