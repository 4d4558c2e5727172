"""The service account token controller: fills legacy token Secrets and removes orphaned ones.

Upstream pkg/controller/serviceaccount/tokens_controller.go (with the legacy claims of
pkg/serviceaccount/legacy.go, signed by `kcm_shared.apis.satoken`) on our runtime. A Secret of
type `kubernetes.io/service-account-token` whose `kubernetes.io/service-account.name`
annotation names a ServiceAccount gets `token` (a JWT with the legacy claims, issuer
`kubernetes/serviceaccount`), `ca.crt` (--root-ca-file) and `namespace`, and the
`kubernetes.io/service-account.uid` annotation. A token Secret whose ServiceAccount is gone
(or has another uid than the Secret records) is deleted, with a uid precondition. When a token
Secret goes, its name leaves the ServiceAccount's `secrets` list.

Work keys (`primary=None`; a new partition owner re-examines every cached token Secret):
- `secret/<namespace>/<name>`: sync one token Secret. Enqueued on its own events and, for
  every token Secret of a ServiceAccount, when that ServiceAccount is deleted.
- `unref/<namespace>/<secret>/<serviceaccount>/<uid>`: drop a deleted token Secret from its
  ServiceAccount's `secrets` (upstream's removeSecretReference). The key carries what the
  deleted Secret said, since nothing is left to read it from.

Cached Secrets carry no data (the watcher redacts it, docs/bus.md), so deciding whether a
Secret needs filling reads it from the API server; the resourceVersion this controller last
found (or wrote) complete is remembered, so its own writes coming back cost no read.
Runs only with --service-account-private-key-file, as upstream.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kcm_shared import runtime
from kcm_shared.apimachinery import codec
from kcm_shared.apis import satoken
from kcm_shared.base import errors
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import identityflags, serviceaccounts
from kcm_shared.controllerutil.serviceaccounts import SECRETS, SERVICEACCOUNTS, SecretView, ServiceAccountView
from kcm_shared.runtime import cache

log = logging.getLogger("kcm.serviceaccount-token")

SECRET_KEY = "secret"
UNREF_KEY = "unref"


def _encode(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _decode(value: Any) -> bytes:
    try:
        return base64.b64decode(value, validate=True) if isinstance(value, str) else b""
    except (binascii.Error, ValueError):
        return b""


def secret_key(namespace: str, name: str) -> str:
    return f"{SECRET_KEY}/{namespace}/{name}"


def unref_key(namespace: str, secret: str, sa_name: str, sa_uid: str) -> str:
    return f"{UNREF_KEY}/{namespace}/{secret}/{sa_name}/{sa_uid}"


def needs(data: dict[str, Any], root_ca: bytes) -> tuple[bool, bool, bool]:
    """(needs CA, needs namespace, needs token) of a token Secret's data (secretUpdateNeeded)."""
    needs_ca = bool(root_ca) and _decode(data.get(serviceaccounts.ROOT_CA_KEY)) != root_ca
    needs_namespace = not _decode(data.get(serviceaccounts.NAMESPACE_KEY))
    needs_token = not _decode(data.get(serviceaccounts.TOKEN_KEY))
    return needs_ca, needs_namespace, needs_token


class TokensController:
    """Handlers and sync of one process; the API client and the signer are injected."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        secrets: cache.Cache[SecretView],
        service_accounts: cache.Cache[ServiceAccountView],
        enqueue: Callable[[str], None],
        signer: satoken.Signer,
        root_ca: bytes,
    ) -> None:
        self.client = client
        self.secrets = secrets
        self.service_accounts = service_accounts
        self.enqueue = enqueue
        self.signer = signer
        self.root_ca = root_ca
        # namespace/name -> resourceVersion at which the Secret was seen complete
        self._complete: dict[str, str] = {}

    def register(self) -> None:
        self.secrets.add_handler(
            on_add=self._secret_changed, on_update=self._secret_updated, on_delete=self._secret_deleted
        )
        self.service_accounts.add_handler(on_delete=self._service_account_deleted)

    def keys(self) -> list[str]:
        return [
            secret_key(s.metadata.namespace, s.metadata.name)
            for s in self.secrets.list()
            if serviceaccounts.is_token_secret(s)
        ]

    # -- handlers -------------------------------------------------------------------------------

    def _secret_changed(self, secret: SecretView) -> None:
        if serviceaccounts.is_token_secret(secret):
            self.enqueue(secret_key(secret.metadata.namespace, secret.metadata.name))

    def _secret_updated(self, _old: SecretView, new: SecretView) -> None:
        self._secret_changed(new)

    def _secret_deleted(self, secret: SecretView) -> None:
        self._complete.pop(codec.key_of(secret), None)
        if not serviceaccounts.is_token_secret(secret):
            return
        name, uid = serviceaccounts.token_owner(secret)
        if name:
            self.enqueue(unref_key(secret.metadata.namespace, secret.metadata.name, name, uid))

    def _service_account_deleted(self, sa: ServiceAccountView) -> None:
        for secret in self.secrets.list(sa.metadata.namespace):
            if serviceaccounts.owns(sa, secret):
                self.enqueue(secret_key(secret.metadata.namespace, secret.metadata.name))

    # -- sync -----------------------------------------------------------------------------------

    async def reconcile(self, key: str) -> runtime.Result | None:
        kind, _, rest = key.partition("/")
        parts = rest.split("/")
        if kind == SECRET_KEY and len(parts) == 2:
            await self.sync_secret(parts[0], parts[1])
        elif kind == UNREF_KEY and len(parts) == 4:
            await self.remove_reference(*parts)
        else:
            raise runtime.TerminalError(f"not a key of this controller: {key!r}")
        return None

    async def _live(self, path: str) -> dict[str, Any] | None:
        """The object at `path` as the API server has it now; None when it does not exist."""
        try:
            return await self.client.get(path)
        except kubeclient.ApiError as exc:
            if exc.not_found:
                return None
            raise

    async def service_account(self, namespace: str, name: str, uid: str) -> dict[str, Any] | None:
        """The ServiceAccount (name, uid if given) from the cache, else from the API server, or
        None when it does not exist (upstream getServiceAccount with fetchOnCacheMiss)."""
        cached = self.service_accounts.get(namespace, name)
        if cached is not None and uid in ("", cached.metadata.uid):
            return {"name": cached.metadata.name, "uid": cached.metadata.uid}
        live = await self._live(kubeclient.resource_path("", "v1", "serviceaccounts", namespace, name))
        meta = (live or {}).get("metadata") or {}
        if live is None or uid not in ("", meta.get("uid")):
            return None
        return {"name": meta.get("name", name), "uid": meta.get("uid", "")}

    async def sync_secret(self, namespace: str, name: str) -> None:
        secret = self.secrets.get(namespace, name)
        if secret is None or not serviceaccounts.is_token_secret(secret):
            return
        sa_name, sa_uid = serviceaccounts.token_owner(secret)
        if not sa_name:
            return  # the API server refuses such Secrets; one from before that has no owner to check
        sa = await self.service_account(namespace, sa_name, sa_uid)
        path = kubeclient.resource_path("", "v1", "secrets", namespace, name)
        if sa is None:
            log.info(
                "service account does not exist, deleting token", extra={"secret": f"{namespace}/{name}"}
            )
            options = {"preconditions": {"uid": secret.metadata.uid}} if secret.metadata.uid else None
            try:
                await self.client.delete(path, options)
            except kubeclient.ApiError as exc:
                # Gone already, or replaced by another Secret of that name (uid precondition).
                if not (exc.not_found or exc.conflict):
                    raise
            return
        await self.fill(namespace, name, secret, sa, path)

    async def fill(
        self, namespace: str, name: str, cached: SecretView, sa: dict[str, Any], path: str
    ) -> None:
        """Write token, ca.crt, namespace and the owner annotations where missing or stale
        (upstream generateTokenIfNeeded), on the Secret as the API server has it now."""
        key = f"{namespace}/{name}"
        if self._complete.get(key) == cached.metadata.resource_version:
            return
        live = await self._live(path)
        if live is None:
            return
        data: dict[str, Any] = dict(live.get("data") or {})
        meta = live.setdefault("metadata", {})
        needs_ca, needs_namespace, needs_token = needs(data, self.root_ca)
        if not (needs_ca or needs_namespace or needs_token):
            self._complete[key] = meta.get("resourceVersion", "")
            return
        if needs_ca:
            data[serviceaccounts.ROOT_CA_KEY] = _encode(self.root_ca)
        if needs_namespace:
            data[serviceaccounts.NAMESPACE_KEY] = _encode(namespace.encode())
        if needs_token:
            claims = satoken.legacy_claims(namespace, sa["name"], sa["uid"], name)
            data[serviceaccounts.TOKEN_KEY] = _encode(self.signer.sign(claims).encode())
        live["data"] = data
        annotations = meta.setdefault("annotations", {}) or {}
        annotations[serviceaccounts.NAME_KEY] = sa["name"]
        annotations[serviceaccounts.UID_KEY] = sa["uid"]
        meta["annotations"] = annotations
        try:
            written = await self.client.update(path, live)
        except kubeclient.ApiError as exc:
            # Changed meanwhile (its event brings the key back) or gone: nothing to fill.
            if exc.conflict or exc.not_found:
                return
            raise
        self._complete[key] = (written.get("metadata") or {}).get("resourceVersion", "")

    async def remove_reference(self, namespace: str, secret_name: str, sa_name: str, sa_uid: str) -> None:
        """Drop a deleted token Secret from its ServiceAccount's `secrets`, when the
        ServiceAccount the Secret named still exists (upstream removeSecretReference)."""
        cached = self.service_accounts.get(namespace, sa_name)
        if cached is None or sa_uid not in ("", cached.metadata.uid):
            return
        path = kubeclient.resource_path("", "v1", "serviceaccounts", namespace, sa_name)

        async def attempt() -> None:
            live = await self._live(path)
            if live is None or sa_uid not in ("", (live.get("metadata") or {}).get("uid")):
                return
            refs = live.get("secrets") or []
            kept = [ref for ref in refs if not (isinstance(ref, dict) and ref.get("name") == secret_name)]
            if len(kept) == len(refs):
                return
            live["secrets"] = kept
            try:
                await self.client.update(path, live)
            except kubeclient.ApiError as exc:
                if not exc.not_found:
                    raise

        await kubeclient.retry_on_conflict(attempt, steps=10, delay=0.1, jitter=1.0)


def _signer(args: argparse.Namespace) -> satoken.Signer:
    try:
        key = satoken.load_private_key(Path(args.service_account_private_key_file))
    except (OSError, ValueError) as exc:
        raise errors.ConfigError(f"error reading key for service account token controller: {exc}") from exc
    return satoken.Signer(key, satoken.LEGACY_ISSUER)


def build(ctx: runtime.Context) -> runtime.Reconcile:
    tc = TokensController(
        ctx.client,
        ctx.caches[SECRETS],
        ctx.caches[SERVICEACCOUNTS],
        ctx.enqueue,
        _signer(ctx.args),
        identityflags.root_ca(ctx.args, ctx.client.conn).encode(),
    )
    tc.register()
    ctx.keys = tc.keys
    return tc.reconcile


def flags(p: runtime.FlagSet) -> None:
    identityflags.add_service_account_private_key_file(p)
    identityflags.add_root_ca_file(p)
    identityflags.add_cluster_signing_files(p)


def disabled_by(args: argparse.Namespace) -> str | None:
    if not getattr(args, "service_account_private_key_file", ""):
        return "no private key (--service-account-private-key-file)"
    return None


SPEC = runtime.Spec(
    name="serviceaccount-token-controller",
    alias="serviceaccount-token",
    queue_name="serviceaccount_tokens_service",
    primary=None,
    views={SECRETS: SecretView, SERVICEACCOUNTS: ServiceAccountView},
    build=build,
    workers=5,
    flags=flags,
    disabled_by=disabled_by,
    package=__package__,
)
