"""Service account tokens: RS256 JSON Web Tokens, upstream's claims, and their checks.

One module for both ends: the embedded API server signs TokenRequest tokens (bound tokens,
`bound_claims`) and verifies every service account token a client presents, and the
serviceaccount-token-controller signs the tokens of legacy `kubernetes.io/service-account-token`
Secrets (`legacy_claims`). Both load the keys `kcm dev` keeps in STATE_DIR/pki (an RSA key
pair, as kubeadm's sa.key / sa.pub) with `load_private_key` / `load_public_keys`.

Follows upstream pkg/serviceaccount: jwt.go (the signer, the `kid` header derived from the
public key, verification against several keys), claims.go (bound claims and their checks:
expiry with a minute of leeway, audiences) and legacy.go (legacy claims, issuer
`kubernetes/serviceaccount`, and their consistency checks). What needs the cluster's state
(does the ServiceAccount still exist with that uid, does the Secret still hold this token) is
the API server's part; this module only says what a token claims and whether it is authentic.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

LEGACY_ISSUER = "kubernetes/serviceaccount"
DEFAULT_ISSUER = "https://kubernetes.default.svc.cluster.local"
USERNAME_PREFIX = "system:serviceaccount:"
VERIFIED_CACHE = 4096  # tokens whose verified claims a Verifier keeps
# go-jose's jwt.DefaultLeeway: clock skew tolerated on exp, nbf and iat.
LEEWAY = dt.timedelta(minutes=1)
# Legacy claim names (upstream legacyPrivateClaims).
LEGACY_NAMESPACE = "kubernetes.io/serviceaccount/namespace"
LEGACY_SECRET_NAME = "kubernetes.io/serviceaccount/secret.name"
LEGACY_SA_NAME = "kubernetes.io/serviceaccount/service-account.name"
LEGACY_SA_UID = "kubernetes.io/serviceaccount/service-account.uid"


class InvalidToken(ValueError):
    """The token is not one this server can accept; the message says why (for logs, not clients)."""


@dataclass(frozen=True)
class ServiceAccountInfo:
    """Who a verified token speaks for (upstream ServiceAccountInfo)."""

    namespace: str
    name: str
    uid: str
    secret_name: str = ""  # a legacy token's Secret, or a bound token's bound Secret
    secret_uid: str = ""  # bound tokens only
    legacy: bool = False

    @property
    def username(self) -> str:
        return make_username(self.namespace, self.name)

    @property
    def groups(self) -> list[str]:
        """Upstream's groups for a service account user."""
        return ["system:serviceaccounts", f"system:serviceaccounts:{self.namespace}", "system:authenticated"]


def make_username(namespace: str, name: str) -> str:
    return f"{USERNAME_PREFIX}{namespace}:{name}"


def split_username(username: str) -> tuple[str, str] | None:
    """(namespace, name) of `system:serviceaccount:<ns>:<name>`, or None (upstream SplitUsername)."""
    if not username.startswith(USERNAME_PREFIX):
        return None
    parts = username[len(USERNAME_PREFIX) :].split(":")
    if len(parts) != 2 or not all(parts):
        return None
    return parts[0], parts[1]


# -- keys ---------------------------------------------------------------------------------------


def load_private_key(path: Path) -> rsa.RSAPrivateKey:
    """The RSA private key in a PEM file; ValueError naming the file when it holds none."""
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{path}: not a PEM private key: {exc}") from exc
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError(f"{path}: want an RSA private key, got {type(key).__name__}")
    return key


def load_public_keys(path: Path) -> list[rsa.RSAPublicKey]:
    """Every RSA public key a PEM file holds: public keys, certificates, or private keys (their
    public half), as kube-apiserver's --service-account-key-file reads them."""
    keys: list[rsa.RSAPublicKey] = []
    for block in _pem_blocks(path.read_bytes()):
        key: Any
        try:
            if b"CERTIFICATE" in block.split(b"\n", 1)[0]:
                key = x509.load_pem_x509_certificate(block).public_key()
            elif b"PRIVATE KEY" in block.split(b"\n", 1)[0]:
                key = serialization.load_pem_private_key(block, password=None).public_key()
            else:
                key = serialization.load_pem_public_key(block)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{path}: unreadable PEM block: {exc}") from exc
        if isinstance(key, rsa.RSAPublicKey):
            keys.append(key)
    if not keys:
        raise ValueError(f"{path}: no RSA key found")
    return keys


def _pem_blocks(data: bytes) -> list[bytes]:
    blocks, current = [], bytearray()
    for line in data.splitlines(keepends=True):
        if line.startswith(b"-----BEGIN "):
            current = bytearray()
        current += line
        if line.startswith(b"-----END "):
            blocks.append(bytes(current))
    return blocks


def key_id(public_key: rsa.RSAPublicKey) -> str:
    """Upstream keyIDFromPublicKey: base64url(sha256(DER SubjectPublicKeyInfo)), unpadded."""
    der = public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return _b64(hashlib.sha256(der).digest())


# -- claims -------------------------------------------------------------------------------------


def legacy_claims(namespace: str, sa_name: str, sa_uid: str, secret_name: str) -> dict[str, Any]:
    """A legacy Secret token's claims (upstream LegacyClaims); the signer adds `iss`."""
    return {
        "sub": make_username(namespace, sa_name),
        LEGACY_NAMESPACE: namespace,
        LEGACY_SECRET_NAME: secret_name,
        LEGACY_SA_NAME: sa_name,
        LEGACY_SA_UID: sa_uid,
    }


def bound_claims(
    namespace: str,
    sa_name: str,
    sa_uid: str,
    *,
    audiences: Sequence[str],
    expiration_seconds: int,
    now: dt.datetime,
    secret: tuple[str, str] | None = None,
    pod: tuple[str, str] | None = None,
    node: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """A TokenRequest token's claims (upstream Claims, with 1.32's `jti`); `secret` / `pod`
    are the (name, uid) of the object the token is bound to, `node` that of a bound pod's node
    (1.32's ServiceAccountTokenPodNodeInfo). The signer adds `iss`."""
    issued = int(now.timestamp())
    k8s: dict[str, Any] = {"namespace": namespace, "serviceaccount": {"name": sa_name, "uid": sa_uid}}
    if pod is not None:
        k8s["pod"] = {"name": pod[0], "uid": pod[1]}
        if node is not None:
            k8s["node"] = {"name": node[0], "uid": node[1]}
    elif secret is not None:
        k8s["secret"] = {"name": secret[0], "uid": secret[1]}
    return {
        "aud": list(audiences),
        "exp": issued + expiration_seconds,
        "iat": issued,
        "jti": str(uuid.uuid4()),
        "kubernetes.io": k8s,
        "nbf": issued,
        "sub": make_username(namespace, sa_name),
    }


# -- signing and verification -------------------------------------------------------------------


class Signer:
    """Signs claims as `iss` with an RSA key (RS256, `kid` as upstream derives it)."""

    def __init__(self, private_key: rsa.RSAPrivateKey, issuer: str) -> None:
        self._key = private_key
        self.issuer = issuer
        self._header = _b64(
            json.dumps(
                {"alg": "RS256", "kid": key_id(private_key.public_key())}, separators=(",", ":")
            ).encode()
        )

    def sign(self, claims: dict[str, Any]) -> str:
        body = _b64(json.dumps({"iss": self.issuer, **claims}, separators=(",", ":")).encode())
        signing_input = f"{self._header}.{body}".encode()
        signature = self._key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
        return f"{self._header}.{body}.{_b64(signature)}"


class Verifier:
    """Checks a token's signature against the configured public keys and decodes its claims.

    The claims of the last VERIFIED_CACHE tokens that verified are kept by token: a client
    sends its token with every request, and the signature check is most of what verifying
    costs (bench/serviceaccount_tokens.py). A token's signature cannot change, and the keys are
    fixed, so the cache only saves work; what can change (expiry, the ServiceAccount and Secret
    still being there) is the caller's to check each time. Callers must not modify the claims.
    """

    def __init__(self, public_keys: Iterable[rsa.RSAPublicKey]) -> None:
        self._keys = {key_id(k): k for k in public_keys}
        self._verified: dict[str, dict[str, Any]] = {}

    def claims(self, token: str) -> dict[str, Any]:
        """The claims of an authentic RS256 token; InvalidToken for anything else."""
        known = self._verified.get(token)
        if known is not None:
            return known
        payload = self._verify(token)
        if len(self._verified) >= VERIFIED_CACHE:
            del self._verified[next(iter(self._verified))]  # the oldest entry
        self._verified[token] = payload
        return payload

    def _verify(self, token: str) -> dict[str, Any]:
        parts = token.split(".")
        if len(parts) != 3:
            raise InvalidToken("not a compact JWS")
        try:
            header = json.loads(_unb64(parts[0]))
            payload = json.loads(_unb64(parts[1]))
            signature = _unb64(parts[2])
        except (ValueError, binascii.Error) as exc:
            raise InvalidToken(f"malformed token: {exc}") from exc
        if not isinstance(header, dict) or not isinstance(payload, dict):
            raise InvalidToken("malformed token")
        if header.get("alg") != "RS256":
            raise InvalidToken(f"unsupported signing algorithm {header.get('alg')!r}")
        kid = header.get("kid")
        # A token without a kid (or with an unknown one) is tried against every key, as upstream.
        candidates = (
            [self._keys[kid]] if isinstance(kid, str) and kid in self._keys else list(self._keys.values())
        )
        signing_input = f"{parts[0]}.{parts[1]}".encode()
        for key in candidates:
            try:
                key.verify(signature, signing_input, padding.PKCS1v15(), hashes.SHA256())
            except InvalidSignature:
                continue
            return payload
        raise InvalidToken("invalid signature")


def check_legacy(claims: dict[str, Any]) -> ServiceAccountInfo:
    """The service account a legacy token names, if its claims are complete and consistent
    (upstream legacyValidator.Validate before its lookups)."""
    if claims.get("iss") != LEGACY_ISSUER:
        raise InvalidToken("not a legacy token")
    fields = {
        "sub": claims.get("sub"),
        "namespace": claims.get(LEGACY_NAMESPACE),
        "secretName": claims.get(LEGACY_SECRET_NAME),
        "serviceAccountName": claims.get(LEGACY_SA_NAME),
        "serviceAccountUID": claims.get(LEGACY_SA_UID),
    }
    for name, value in fields.items():
        if not isinstance(value, str) or not value:
            raise InvalidToken(f"{name} claim is missing")
    sub = split_username(str(fields["sub"]))
    if sub != (fields["namespace"], fields["serviceAccountName"]):
        raise InvalidToken("sub claim is invalid")
    return ServiceAccountInfo(
        namespace=str(fields["namespace"]),
        name=str(fields["serviceAccountName"]),
        uid=str(fields["serviceAccountUID"]),
        secret_name=str(fields["secretName"]),
        legacy=True,
    )


def check_bound(
    claims: dict[str, Any], *, issuers: Sequence[str], audiences: Sequence[str], now: dt.datetime
) -> ServiceAccountInfo:
    """The service account a bound token names, if it comes from one of `issuers`, is meant for
    one of `audiences` and is within its validity (upstream validator.Validate and go-jose's
    claim checks, with their one-minute leeway)."""
    if claims.get("iss") not in issuers:
        raise InvalidToken("unknown issuer")
    aud = claims.get("aud")
    token_audiences = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
    if not set(token_audiences) & set(audiences):
        raise InvalidToken("token audiences are invalid for the target audiences")
    stamp = now.timestamp()
    leeway = LEEWAY.total_seconds()
    exp, nbf, iat = claims.get("exp"), claims.get("nbf"), claims.get("iat")
    if not isinstance(exp, int | float) or stamp > exp + leeway:
        raise InvalidToken("Token has expired.")
    if isinstance(nbf, int | float) and stamp < nbf - leeway:
        raise InvalidToken("Token is not valid yet.")
    if isinstance(iat, int | float) and stamp < iat - leeway:
        raise InvalidToken("Token was issued in the future.")
    k8s = claims.get("kubernetes.io")
    if not isinstance(k8s, dict):
        raise InvalidToken("kubernetes.io claim is missing")
    sa = k8s.get("serviceaccount")
    namespace = k8s.get("namespace")
    if not isinstance(sa, dict) or not isinstance(namespace, str) or not namespace:
        raise InvalidToken("serviceaccount claim is missing")
    name, uid = sa.get("name"), sa.get("uid")
    if not isinstance(name, str) or not name or not isinstance(uid, str):
        raise InvalidToken("serviceaccount claim is missing")
    if split_username(str(claims.get("sub", ""))) != (namespace, name):
        raise InvalidToken("sub claim is invalid")
    secret = k8s.get("secret")
    secret_name = secret.get("name", "") if isinstance(secret, dict) else ""
    secret_uid = secret.get("uid", "") if isinstance(secret, dict) else ""
    return ServiceAccountInfo(namespace, name, uid, str(secret_name), str(secret_uid))


def unverified_issuer(token: str) -> str | None:
    """The `iss` a token claims, unverified, or None when it is no JWT: whether the token is
    one this server's authenticator answers for at all (upstream's hasCorrectIssuer)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(_unb64(parts[1]))
    except (ValueError, binascii.Error):
        return None
    issuer = payload.get("iss") if isinstance(payload, dict) else None
    return issuer if isinstance(issuer, str) else None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    if not text.isascii():
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
