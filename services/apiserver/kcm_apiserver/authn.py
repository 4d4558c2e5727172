"""Who a request is: a client certificate, the static bearer token, a bootstrap token, or a
service account token this server can verify.

`Authenticator.authenticate` runs before every request (`server.Server.handle`). A request
without credentials passes as the cluster admin on a loopback server started without a token
(the dev default); otherwise credentials are required. In kube-apiserver's order:
- a client certificate the TLS handshake verified against --client-ca-file is its subject's
  common name, its organizations the groups (upstream's CommonNameUserConversion; no common
  name: not this authenticator's);
- a bearer token is accepted when it is the static token;
- with --enable-bootstrap-token-auth, a `<id>.<secret>` token matching the kube-system Secret
  `bootstrap-token-<id>` (type bootstrap.kubernetes.io/token, same id and secret, not being
  deleted, not expired, usage-bootstrap-authentication "true", valid auth-extra-groups) is
  `system:bootstrap:<id>` in system:bootstrappers and the extra groups (upstream
  plugin/pkg/auth/authenticator/token/bootstrap);
- otherwise a service account token (`kcm_shared.apis.satoken`) whose signature verifies
  against --service-account-key-file and whose claims still hold against the stored objects:
- bound tokens (TokenRequest): one of --service-account-issuer, an audience of --api-audiences,
  not expired, the ServiceAccount still there with that uid (and the bound Pod or Secret);
- legacy Secret tokens (issuer `kubernetes/serviceaccount`): the Secret still there and still
  holding this very token, the ServiceAccount still there with that uid, and the Secret not
  labelled `kubernetes.io/legacy-token-invalid-since`. Each use stamps the Secret with
  `kubernetes.io/legacy-token-last-used: <date>` at most once a day.
Anything else is 401 Unauthorized, as kube-apiserver answers. `Authenticator.review` answers a
TokenReview: the same checks against the audiences the review asks for, never the open
server's admin for an unverified token.

Follows upstream pkg/serviceaccount (claims.go, legacy.go: validation and
patchSecretWithLastUsedDate) and pkg/controlplane/controller/legacytokentracking (the
`kube-system/kube-apiserver-legacy-service-account-token-tracking` ConfigMap, `ensure_tracking`).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import json
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import NameOID
from kcm_shared.apis import bootstrapsecret, satoken

from kcm_apiserver import errors
from kcm_apiserver.operations import Api, Ctx
from kcm_apiserver.registry import ResourceType, storage_key_of
from kcm_apiserver.store import Obj

log = logging.getLogger("kcm.apiserver.authn")

LAST_USED_LABEL = "kubernetes.io/legacy-token-last-used"
INVALID_SINCE_LABEL = "kubernetes.io/legacy-token-invalid-since"
TRACKING_CONFIGMAP = "kube-apiserver-legacy-service-account-token-tracking"
TRACKING_KEY = "since"
DATE_FORMAT = "%Y-%m-%d"
FIELD_MANAGER = "kube-apiserver"
AUTO_GENERATED_WARNING = (
    "Use tokens from the TokenRequest API or manually created secret-based tokens "
    "instead of auto-generated secret-based tokens."
)


@dataclass(frozen=True)
class User:
    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()  # user.Info's Extra, in header order


@dataclass(frozen=True)
class TokenVerdict:
    """A TokenReview's answer: the user (None: not authenticated), the audiences the token
    is good for among those asked, and the error text when the token was refused."""

    user: User | None
    audiences: tuple[str, ...] = ()
    error: str = ""


INVALID_BEARER_TOKEN = "invalid bearer token"
AUTHENTICATED_GROUP = "system:authenticated"
CREDENTIAL_ID_KEY = "authentication.kubernetes.io/credential-id"


# Who a request without a token is on an open (loopback, tokenless) server, and who the static
# token speaks for: the admin kubeadm's kubeconfig names.
ADMIN = User("kubernetes-admin", groups=("system:masters", "system:authenticated"))


@dataclass
class ServiceAccountTokens:
    """The service account token configuration: who signs, which keys verify, for whom."""

    signer: satoken.Signer | None
    verifier: satoken.Verifier
    issuers: list[str]
    audiences: list[str]
    now: Callable[[], dt.datetime] = field(default=lambda: dt.datetime.now(dt.UTC))


class Authenticator:
    def __init__(
        self,
        api: Api,
        token: str | None,
        tokens: ServiceAccountTokens | None,
        bootstrap_tokens: bool = False,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.api = api
        self.token = token
        self.tokens = tokens
        self.bootstrap_tokens = bootstrap_tokens  # kube-apiserver's --enable-bootstrap-token-auth
        self.now = now
        secrets_rt = api.registry.lookup("", "v1", "secrets")
        sa_rt = api.registry.lookup("", "v1", "serviceaccounts")
        pods_rt = api.registry.lookup("", "v1", "pods")
        assert secrets_rt is not None and sa_rt is not None and pods_rt is not None
        self._secrets: ResourceType = secrets_rt
        self._service_accounts: ResourceType = sa_rt
        self._pods: ResourceType = pods_rt

    def authenticate(
        self, authorization: str, warnings: list[str], certificate: x509.Certificate | None = None
    ) -> User:
        """The user of a request with this Authorization header, over a connection whose client
        presented `certificate` (verified by the handshake); raises 401 when refused."""
        if certificate is not None and (user := certificate_user(certificate)) is not None:
            return user
        scheme, _, bearer = authorization.partition(" ")
        bearer = bearer.strip()
        if scheme.lower() != "bearer" or not bearer:
            if self.token is None:
                return ADMIN  # no static token: a request without one is the local admin
            raise errors.unauthorized()
        if self.token is not None and secrets.compare_digest(bearer.encode(), self.token.encode()):
            return ADMIN
        if (user := self._bootstrap(bearer)) is not None:
            return user
        if self.tokens is None:
            if self.token is None:
                return ADMIN  # nothing verifies tokens here: a token means nothing, as before
            raise errors.unauthorized()
        try:
            info, _ = self._verify(bearer, self.tokens, self.tokens.audiences, warnings)
        except satoken.InvalidToken as exc:
            log.debug(
                "refused a service account token", extra={"reason": str(exc)}
            )  # a flood must not fill logs
            raise errors.unauthorized() from exc
        return User(info.username, info.uid, tuple(info.groups))

    def review(self, bearer: str, audiences: list[str]) -> TokenVerdict:
        """TokenReview (upstream pkg/registry/authentication/tokenreview): the token checked
        against the audiences asked for, or --api-audiences when none are. Unlike a request,
        a token proves something only when it verifies: an open server's `ADMIN` for any
        token is no answer here."""
        implicit = list(self.tokens.audiences) if self.tokens is not None else []
        wanted = audiences or implicit
        if self.token is not None and secrets.compare_digest(bearer.encode(), self.token.encode()):
            # The static token knows no audiences: it is good for those of the server's own
            # that were asked for (upstream's audience-agnostic wrapper).
            granted = tuple(a for a in implicit if a in wanted) if wanted else ()
            if wanted and not granted:
                return TokenVerdict(None, error=INVALID_BEARER_TOKEN)
            return TokenVerdict(ADMIN, granted)
        if (user := self._bootstrap(bearer)) is not None:
            # Audience-agnostic too, as upstream wraps it.
            granted = tuple(a for a in implicit if a in wanted) if wanted else ()
            if wanted and not granted:
                return TokenVerdict(None, error=INVALID_BEARER_TOKEN)
            return TokenVerdict(user, granted)
        if self.tokens is None:
            return TokenVerdict(None, error=INVALID_BEARER_TOKEN)
        try:
            info, granted_list = self._verify(bearer, self.tokens, wanted, [])
        except satoken.InvalidToken as exc:
            if satoken.unverified_issuer(bearer) not in (*self.tokens.issuers, satoken.LEGACY_ISSUER):
                # Not a token of ours: upstream's authenticator passes it by without an error.
                return TokenVerdict(None, error=INVALID_BEARER_TOKEN)
            return TokenVerdict(None, error=f"[{INVALID_BEARER_TOKEN}, {exc}]")
        return TokenVerdict(User(info.username, info.uid, tuple(info.groups)), tuple(granted_list))

    # -- bootstrap tokens -----------------------------------------------------------------------

    def _bootstrap(self, bearer: str) -> User | None:
        """The user of a bootstrap token, or None when it is not one that holds (the next
        authenticator tries it then, as in upstream's union)."""
        if not self.bootstrap_tokens:
            return None
        parsed = bootstrapsecret.parse_token(bearer)
        if parsed is None:
            return None
        token_id, token_secret = parsed
        secret = self._get(self._secrets, bootstrapsecret.NAMESPACE, bootstrapsecret.NAME_PREFIX + token_id)
        if secret is None or secret["metadata"].get("deletionTimestamp"):
            return None
        if secret.get("type") != bootstrapsecret.SECRET_TYPE or not secret.get("data"):
            return None
        held = bootstrapsecret.data(secret, bootstrapsecret.TOKEN_SECRET_KEY)
        if not secrets.compare_digest(held.encode(), token_secret.encode()):
            return None
        if bootstrapsecret.data(secret, bootstrapsecret.TOKEN_ID_KEY) != token_id:
            return None
        if bootstrapsecret.expiration(secret, self.now())[1]:
            return None
        if bootstrapsecret.data(secret, bootstrapsecret.USAGE_AUTHENTICATION_KEY) != "true":
            return None
        try:
            groups = bootstrapsecret.groups(secret)
        except ValueError as exc:
            log.debug("refused a bootstrap token", extra={"token_id": token_id, "reason": str(exc)})
            return None
        return User(bootstrapsecret.USER_PREFIX + token_id, groups=(*groups, AUTHENTICATED_GROUP))

    # -- service account tokens -----------------------------------------------------------------

    def _get(self, rt: ResourceType, namespace: str, name: str) -> Obj | None:
        return self.api.store.get(storage_key_of(rt), namespace, name)

    def _verify(
        self, token: str, config: ServiceAccountTokens, audiences: list[str], warnings: list[str]
    ) -> tuple[satoken.ServiceAccountInfo, list[str]]:
        """Who the token speaks for, and which of `audiences` it is good for."""
        claims = config.verifier.claims(token)
        now = config.now()
        aud = claims.get("aud")
        held = (
            [aud]
            if isinstance(aud, str)
            else [a for a in aud if isinstance(a, str)]
            if isinstance(aud, list)
            else []
        )
        if claims.get("iss") == satoken.LEGACY_ISSUER:
            # A legacy token names no audience: it holds the server's own (upstream's implicit ones).
            held = held or list(config.audiences)
            granted = [a for a in held if a in audiences]
            if audiences and not granted:
                raise satoken.InvalidToken(
                    f"token audiences {_go_strings(held)} is invalid for the target audiences "
                    f"{_go_strings(audiences)}"
                )
            return self._legacy(token, satoken.check_legacy(claims), now, warnings), granted
        info = satoken.check_bound(claims, issuers=config.issuers, audiences=audiences, now=now)
        self._service_account(info, now, grace=True)
        if info.secret_name:
            secret = self._get(self._secrets, info.namespace, info.secret_name)
            if secret is None or _deleted_before(secret, now - satoken.LEEWAY):
                raise satoken.InvalidToken("Token has been invalidated")
            if secret["metadata"].get("uid") != info.secret_uid:
                raise satoken.InvalidToken("Secret UID does not match claim")
        pod = (claims.get("kubernetes.io") or {}).get("pod")
        if isinstance(pod, dict):
            found = self._get(self._pods, info.namespace, str(pod.get("name", "")))
            if found is None or _deleted_before(found, now - satoken.LEEWAY):
                raise satoken.InvalidToken("Token has been invalidated")
            if found["metadata"].get("uid") != pod.get("uid"):
                raise satoken.InvalidToken("Pod UID does not match claim")
        return info, [a for a in held if a in audiences]

    def _service_account(self, info: satoken.ServiceAccountInfo, now: dt.datetime, *, grace: bool) -> Obj:
        sa = self._get(self._service_accounts, info.namespace, info.name)
        if sa is None:
            raise satoken.InvalidToken(f'serviceaccounts "{info.name}" not found')
        # Bound tokens tolerate a deletion younger than the leeway; legacy ones none at all.
        if (grace and _deleted_before(sa, now - satoken.LEEWAY)) or (
            not grace and sa["metadata"].get("deletionTimestamp")
        ):
            raise satoken.InvalidToken(f"ServiceAccount {info.namespace}/{info.name} has been deleted")
        if sa["metadata"].get("uid") != info.uid:
            raise satoken.InvalidToken(
                f"ServiceAccount UID ({sa['metadata'].get('uid')}) does not match claim ({info.uid})"
            )
        return sa

    def _legacy(
        self, token: str, info: satoken.ServiceAccountInfo, now: dt.datetime, warnings: list[str]
    ) -> satoken.ServiceAccountInfo:
        secret = self._get(self._secrets, info.namespace, info.secret_name)
        if secret is None or secret["metadata"].get("deletionTimestamp"):
            raise satoken.InvalidToken("Token has been invalidated")
        if not secrets.compare_digest(_token_of(secret), token.encode()):
            raise satoken.InvalidToken("Token does not match server's copy")
        sa = self._service_account(info, now, grace=False)
        labels = secret["metadata"].get("labels") or {}
        if labels.get(INVALID_SINCE_LABEL):
            self._stamp_last_used(secret, now)
            raise satoken.InvalidToken(
                f"the token in secret {info.namespace}/{info.secret_name} for service account "
                f"{info.namespace}/{info.name} has been marked invalid. Use tokens from the TokenRequest "
                "API or manually created secret-based tokens, or remove the "
                f"'{INVALID_SINCE_LABEL}' label from the secret to temporarily allow use of this token"
            )
        if any(
            ref.get("name") == info.secret_name for ref in sa.get("secrets") or () if isinstance(ref, dict)
        ):
            warnings.append(AUTO_GENERATED_WARNING)
        self._stamp_last_used(secret, now)
        return info

    def _stamp_last_used(self, secret: Obj, now: dt.datetime) -> None:
        """Label the Secret with today's date unless it says today (or tomorrow: a clock behind
        the one that wrote it), so a token in steady use costs one write a day."""
        day = now.date()
        today = day.isoformat()  # DATE_FORMAT, and cheaper than strftime on every request
        meta = secret["metadata"]
        tomorrow = (day + dt.timedelta(days=1)).isoformat()
        if (meta.get("labels") or {}).get(LAST_USED_LABEL) in (today, tomorrow):
            return
        ctx = Ctx(self._secrets, meta["namespace"], field_manager=FIELD_MANAGER)
        try:
            self.api.patch(ctx, meta["name"], "merge", {"metadata": {"labels": {LAST_USED_LABEL: today}}})
        except errors.ApiError as exc:  # the token is still good; upstream logs this too
            log.warning("could not label a legacy token Secret with its last use", extra={"error": str(exc)})


def certificate_user(cert: x509.Certificate) -> User | None:
    """A verified client certificate's user: common name, organizations as groups, and the
    certificate's fingerprint as credential id (upstream's CommonNameUserConversion); None
    without a common name."""
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    name = str(names[0].value) if names else ""
    if not name:
        return None
    orgs = tuple(str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME))
    fingerprint = hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()
    return User(
        name,
        groups=orgs if AUTHENTICATED_GROUP in orgs else (*orgs, AUTHENTICATED_GROUP),
        extra=((CREDENTIAL_ID_KEY, (f"X509SHA256={fingerprint}",)),),
    )


def _go_strings(values: list[str]) -> str:
    """Go's %q of a []string: `["a" "b"]`."""
    return "[" + " ".join(json.dumps(v) for v in values) + "]"


def _token_of(secret: Obj) -> bytes:
    encoded = (secret.get("data") or {}).get("token", "")
    try:
        return base64.b64decode(encoded, validate=True) if isinstance(encoded, str) else b""
    except (binascii.Error, ValueError):
        return b""


def _deleted_before(obj: Obj, moment: dt.datetime) -> bool:
    stamp = obj["metadata"].get("deletionTimestamp")
    if not stamp:
        return False
    try:
        return dt.datetime.fromisoformat(str(stamp).replace("Z", "+00:00")) < moment
    except ValueError:
        return True


def ensure_tracking(api: Api, today: dt.date) -> None:
    """Create the ConfigMap saying since when legacy token use is tracked (key `since`), or fix
    a value that is not a date, as kube-apiserver's legacytokentracking controller does. The
    legacy token cleaner trusts `since` before it calls a token unused."""
    rt = api.registry.lookup("", "v1", "configmaps")
    assert rt is not None
    ctx = Ctx(rt, "kube-system", field_manager=FIELD_MANAGER)
    current = api.store.get(storage_key_of(rt), "kube-system", TRACKING_CONFIGMAP)
    value = today.strftime(DATE_FORMAT)
    if current is None:
        api.create(
            ctx,
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": TRACKING_CONFIGMAP, "namespace": "kube-system"},
                "data": {TRACKING_KEY: value},
            },
        )
        return
    since = (current.get("data") or {}).get(TRACKING_KEY, "")
    try:
        dt.datetime.strptime(str(since), DATE_FORMAT)
    except ValueError:
        api.patch(ctx, TRACKING_CONFIGMAP, "merge", {"data": {TRACKING_KEY: value}})
