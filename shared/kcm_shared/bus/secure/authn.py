"""Delegated authentication of the secure port's requests (upstream's
DelegatingAuthenticatorConfig), in upstream's order:

1. front-proxy headers (`--requestheader-*`), trusted only from a client certificate issued by
   a `--requestheader-client-ca-file` CA whose common name is in `--requestheader-allowed-names`
   (any name when that list is empty); the user is the first non-empty username header, groups
   every group header's values, extras the prefixed headers (key lower-cased, %-unescaped);
2. a client certificate issued by a `--client-ca-file` CA: user its common name, groups its
   organizations;
3. a bearer token, reviewed by the API server (TokenReview, through `--authentication-kubeconfig`),
   answers cached for `--authentication-token-webhook-cache-ttl` (errors are not cached);
4. else `system:anonymous` in `system:unauthenticated`.
A step that fails (a certificate no configured CA issued, a rejected token) makes the request
unauthenticated (401) unless a later step succeeds; an authenticated user also gets the group
`system:authenticated`. With no TokenReview client a token is not looked at (anonymous).

`lookup` reads what the flags leave out from `kube-system/extension-apiserver-authentication`
(the ConfigMap kube-apiserver publishes), as upstream does unless `--authentication-skip-lookup`.
Unlike upstream, the CAs read there are not watched for changes: a restart picks up a new one.
Only a certificate directly issued by a CA of the bundle counts (no intermediates).
Called by `kcm_shared.bus.secure.server`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import logging
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kcm_shared.base import errors
from kcm_shared.client import kubeclient

log = logging.getLogger("kcm.secure")

ANONYMOUS_USER = "system:anonymous"
UNAUTHENTICATED = "system:unauthenticated"
AUTHENTICATED = "system:authenticated"
CONFIGMAP_PATH = "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication"
CACHE_SIZE = 4096  # tokens remembered; bounded so a stream of made-up tokens cannot grow it


@dataclass(frozen=True)
class User:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


ANONYMOUS = User(ANONYMOUS_USER, groups=(UNAUTHENTICATED,))


class Unauthenticated(Exception):
    """The request carried credentials that did not authenticate it (401)."""


@dataclass(frozen=True)
class RequestHeader:
    """The front proxy's configuration (`--requestheader-*`)."""

    cas: tuple[x509.Certificate, ...]
    allowed_names: tuple[str, ...] = ()
    username_headers: tuple[str, ...] = ("x-remote-user",)
    group_headers: tuple[str, ...] = ("x-remote-group",)
    extra_prefixes: tuple[str, ...] = ("x-remote-extra-",)
    uid_headers: tuple[str, ...] = ()


class Headers:
    """What authentication reads of a request's headers: case-insensitive, each value of a
    repeated header (aiohttp's CIMultiDictProxy fits)."""

    def __init__(self, getall: Callable[[str], list[str]], names: Callable[[], Sequence[str]]) -> None:
        self.getall = getall
        self.names = names


def issued_by(cert: x509.Certificate, cas: Sequence[x509.Certificate], now: dt.datetime) -> bool:
    """Whether one of `cas` issued `cert` (signature checked), both are valid at `now`, and
    `cert` may authenticate a client (no extended key usage, or client auth among them)."""
    if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
        return False
    try:
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        if (
            ExtendedKeyUsageOID.CLIENT_AUTH not in usages
            and ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE not in usages
        ):
            return False
    except x509.ExtensionNotFound:
        pass
    for ca in cas:
        if not ca.not_valid_before_utc <= now <= ca.not_valid_after_utc:
            continue
        try:
            cert.verify_directly_issued_by(ca)
        except (InvalidSignature, ValueError, TypeError):  # not its issuer, or another key type
            continue
        return True
    return False


def _common_name(cert: x509.Certificate) -> str:
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else ""


class TokenReviewer:
    """Bearer tokens reviewed by the API server, answers cached per `ttl` (keyed by the token's
    SHA-256: the cache holds no token)."""

    def __init__(
        self, client: kubeclient.KubeClient, ttl: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._client = client
        self._ttl = ttl
        self._clock = clock
        self._cache: OrderedDict[bytes, tuple[float, User | None]] = OrderedDict()

    async def review(self, token: str) -> User | None:
        """The token's user, None when the API server says it does not authenticate;
        Unauthenticated when the review failed (not cached)."""
        key = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        hit = self._cache.get(key)
        if hit is not None and hit[0] > self._clock():
            return hit[1]
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        try:
            answer = await self._client.request(
                "POST", "/apis/authentication.k8s.io/v1/tokenreviews", body=body
            )
        except kubeclient.REQUEST_ERRORS as exc:
            log.warning("TokenReview failed", extra={"error": repr(exc)})
            raise Unauthenticated(f"token review failed: {exc}") from exc
        status = answer.get("status") or {}
        user = None
        if status.get("authenticated"):
            u = status.get("user") or {}
            user = User(
                str(u.get("username", "")),
                str(u.get("uid", "")),
                tuple(str(g) for g in u.get("groups") or ()),
                {str(k): tuple(str(v) for v in vs or ()) for k, vs in (u.get("extra") or {}).items()},
            )
        elif status.get("error"):
            raise Unauthenticated(str(status["error"]))
        self._cache[key] = (self._clock() + self._ttl, user)
        self._cache.move_to_end(key)
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return user


@dataclass
class Authenticator:
    client_cas: tuple[x509.Certificate, ...] = ()
    request_header: RequestHeader | None = None
    tokens: TokenReviewer | None = None

    async def authenticate(self, headers: Headers, peer_cert: bytes | None) -> User:
        """The request's user (see the module docstring); Unauthenticated for a 401."""
        failures: list[str] = []
        cert = _parse(peer_cert, failures)
        now = dt.datetime.now(dt.UTC)
        user = None
        if cert is not None and self.request_header is not None:
            user = _from_proxy(self.request_header, cert, headers, now, failures)
        if user is None and cert is not None and self.client_cas:
            if issued_by(cert, self.client_cas, now):
                orgs = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
                name = _common_name(cert)
                user = User(name, groups=tuple(str(o.value) for o in orgs)) if name else None
            else:
                failures.append("x509: certificate signed by unknown authority")
        if user is None and self.tokens is not None:
            token = bearer(headers)
            if token is not None:
                try:
                    user = await self.tokens.review(token)
                except Unauthenticated as exc:
                    failures.append(str(exc))
                else:
                    if user is None:
                        failures.append("invalid bearer token")
        if user is not None:
            if AUTHENTICATED not in user.groups:
                user = dataclasses.replace(user, groups=(*user.groups, AUTHENTICATED))
            return user
        if failures:
            raise Unauthenticated("; ".join(failures))
        return ANONYMOUS


def _parse(der: bytes | None, failures: list[str]) -> x509.Certificate | None:
    if not der:
        return None
    try:
        return x509.load_der_x509_certificate(der)
    except ValueError as exc:
        failures.append(f"x509: {exc}")
        return None


def bearer(headers: Headers) -> str | None:
    """The token of `Authorization: Bearer <token>` (the scheme in any case), as upstream reads it."""
    values = headers.getall("Authorization")
    parts = values[0].strip().split(" ", 2) if values else []
    if len(parts) < 2 or parts[0].lower() != "bearer" or not parts[1]:
        return None
    return parts[1]


def _from_proxy(
    rh: RequestHeader, cert: x509.Certificate, headers: Headers, now: dt.datetime, failures: list[str]
) -> User | None:
    if not issued_by(cert, rh.cas, now):
        return None  # not the proxy: the client CA step may know it
    cn = _common_name(cert)
    if rh.allowed_names and cn not in rh.allowed_names:
        failures.append(f"client certificate common name {cn!r} is not allowed")
        return None
    name = next((v for h in rh.username_headers for v in headers.getall(h) if v), "")
    if not name:
        return None
    groups = tuple(v for h in rh.group_headers for v in headers.getall(h))
    uid = next((v for h in rh.uid_headers for v in headers.getall(h) if v), "")
    extra: dict[str, list[str]] = {}
    for key in headers.names():
        lower = key.lower()
        for prefix in rh.extra_prefixes:
            if lower.startswith(prefix.lower()):
                extra_key = urllib.parse.unquote(lower[len(prefix) :])
                extra.setdefault(extra_key, []).extend(headers.getall(key))
                break
    return User(name, uid, groups, {k: tuple(dict.fromkeys(v)) for k, v in extra.items()})


@dataclass(frozen=True)
class LookedUp:
    """What `kube-system/extension-apiserver-authentication` holds."""

    client_ca: bytes = b""
    requestheader_ca: bytes = b""
    requestheader: dict[str, tuple[str, ...]] = field(default_factory=dict)


async def lookup(client: kubeclient.KubeClient) -> LookedUp:
    """Read the ConfigMap kube-apiserver publishes; an absent one holds nothing. Raises the
    client's request errors (e.g. 403 without the extension-apiserver-authentication-reader
    Role)."""
    try:
        cm = await client.get(CONFIGMAP_PATH)
    except kubeclient.ApiError as exc:
        if exc.not_found:
            return LookedUp()
        raise
    data: dict[str, Any] = cm.get("data") or {}
    lists = {}
    for key in (
        "requestheader-username-headers",
        "requestheader-group-headers",
        "requestheader-extra-headers-prefix",
        "requestheader-allowed-names",
        "requestheader-uid-headers",
    ):
        try:
            value = json.loads(data.get(key) or "[]")
        except ValueError as exc:
            raise errors.ConfigError(f"configmap extension-apiserver-authentication: {key}: {exc}") from exc
        lists[key] = tuple(str(v) for v in value or ())
    return LookedUp(
        str(data.get("client-ca-file", "")).encode(),
        str(data.get("requestheader-client-ca-file", "")).encode(),
        lists,
    )
