"""The bootstrap signer: `jws-kubeconfig-<token id>` signatures in kube-public/cluster-info.

Upstream pkg/controller/bootstrap/bootstrapsigner.go on our runtime; off by default, on with
`--controllers=*,bootstrapsigner` (what kubeadm runs). One work key, `signer` (upstream's one
sync queue key): the ConfigMap `cluster-info` in kube-public added or updated, or a bootstrap
token Secret of kube-system added, updated or deleted, queues it. The sync reads cluster-info
from the cache; without it, or without its `kubeconfig` key, nothing is done. It reads the
bootstrap token Secrets from the API server (their data never travels on the bus, docs/bus.md),
keeps those valid for signing (`signing_tokens`: named `bootstrap-token-<id>` with the same
`token-id`, a `token-secret`, not expired, `usage-bootstrap-signing: "true"`), and computes
each one's detached JWS of the `kubeconfig` value (`jws`). When a signature is new or changed, or
an old `jws-kubeconfig-*` key has no valid token any more, it writes the ConfigMap (every other
key as it was) with an update carrying the cached resourceVersion; a conflict or a ConfigMap gone
is left to the next event, as upstream.

Difference from upstream: the sync runs again when the first signing token expires, so an
expired token's signature goes even when no token cleaner deletes its Secret (upstream signs
again only on the next change).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

import msgspec
from kcm_shared import runtime
from kcm_shared.apimachinery import codec, gvr
from kcm_shared.apis import bootstrapsecret
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import bootstraptoken
from kcm_shared.runtime import cache

from kcm_controllers.bootstrapsigner import jws

log = logging.getLogger("kcm.bootstrapsigner")

CONFIGMAPS = gvr.Resource("", "v1", "configmaps")
SIGNER_KEY = "signer"
CONFIGMAP_NAMESPACE = "kube-public"
CONFIGMAP_NAME = "cluster-info"
KUBECONFIG_KEY = "kubeconfig"
SIGNATURE_PREFIX = "jws-kubeconfig-"


class ConfigMapView(codec.Meta):
    data: dict[str, str] = msgspec.field(default_factory=dict)
    binary_data: dict[str, str] | None = None  # kept as it is by the update


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def signing_tokens(
    secrets: list[dict[str, Any]], now: dt.datetime
) -> tuple[dict[str, str], dt.timedelta | None]:
    """({token id: token secret} of the Secrets valid for signing, the time until the first of
    them expires, or None when none has an expiry); upstream's validateSecretForSigning."""
    tokens: dict[str, str] = {}
    first: dt.timedelta | None = None
    for secret in secrets:
        name_id = bootstrapsecret.parse_name(str((secret.get("metadata") or {}).get("name", "")))
        token_id = bootstrapsecret.data(secret, bootstrapsecret.TOKEN_ID_KEY)
        token_secret = bootstrapsecret.data(secret, bootstrapsecret.TOKEN_SECRET_KEY)
        if name_id is None or not token_id or token_id != name_id or not token_secret:
            continue
        left, expired = bootstrapsecret.expiration(secret, now)
        if expired or bootstrapsecret.data(secret, bootstrapsecret.USAGE_SIGNING_KEY) != "true":
            continue
        tokens[token_id] = token_secret
        if left > dt.timedelta(0):
            first = left if first is None else min(first, left)
    return tokens, first


def signed_data(data: dict[str, str], tokens: dict[str, str]) -> dict[str, str] | None:
    """The ConfigMap's data with exactly the tokens' signatures, or None when it has them already."""
    content = data[KUBECONFIG_KEY]
    old = {k.removeprefix(SIGNATURE_PREFIX): v for k, v in data.items() if k.startswith(SIGNATURE_PREFIX)}
    new = {token_id: jws.detached_signature(content, token_id, secret) for token_id, secret in tokens.items()}
    if new == old:
        return None
    kept = {k: v for k, v in data.items() if not k.startswith(SIGNATURE_PREFIX)}
    return kept | {SIGNATURE_PREFIX + token_id: sig for token_id, sig in new.items()}


class Signer:
    """Handlers and sync; the API client, caches and clock are injected."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        configmaps: cache.Cache[ConfigMapView],
        *,
        now: Callable[[], dt.datetime] = _utcnow,
    ) -> None:
        self.client = client
        self.configmaps = configmaps
        self.now = now

    async def sync(self, key: str) -> runtime.Result | None:
        if key != SIGNER_KEY:
            raise runtime.TerminalError(f"not a key of this controller: {key!r}")
        cm = self.configmaps.get(CONFIGMAP_NAMESPACE, CONFIGMAP_NAME)
        if cm is None or KUBECONFIG_KEY not in cm.data:
            return None
        tokens, first_expiry = signing_tokens(await bootstraptoken.token_secrets(self.client), self.now())
        again = runtime.Result(requeue_after=first_expiry.total_seconds() + 1.0) if first_expiry else None
        data = signed_data(cm.data, tokens)
        if data is None:
            return again
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": msgspec.to_builtins(cm.metadata),
            "data": data,
        }
        if cm.binary_data is not None:
            body["binaryData"] = cm.binary_data
        path = kubeclient.resource_path("", "v1", "configmaps", CONFIGMAP_NAMESPACE, CONFIGMAP_NAME)
        try:
            await self.client.update(path, body)
        except kubeclient.ApiError as exc:
            if not (exc.conflict or exc.not_found):  # a newer cluster-info queues the key again
                raise
        return again


def register(ctx: runtime.Context) -> None:
    def cm_changed(cm: ConfigMapView) -> None:
        if cm.metadata.namespace == CONFIGMAP_NAMESPACE and cm.metadata.name == CONFIGMAP_NAME:
            ctx.enqueue(SIGNER_KEY)

    def secret_changed(secret: bootstraptoken.SecretView) -> None:
        if bootstraptoken.is_token_secret(secret):
            ctx.enqueue(SIGNER_KEY)

    ctx.caches[CONFIGMAPS].add_handler(on_add=cm_changed, on_update=lambda _, cm: cm_changed(cm))
    ctx.caches[bootstraptoken.SECRETS].add_handler(
        on_add=secret_changed, on_update=lambda _, s: secret_changed(s), on_delete=secret_changed
    )


def build(ctx: runtime.Context) -> runtime.Reconcile:
    signer = Signer(ctx.client, ctx.caches[CONFIGMAPS])
    register(ctx)
    ctx.keys = lambda: [SIGNER_KEY]
    return signer.sync


SPEC = runtime.Spec(
    name="bootstrap-signer-controller",
    alias="bootstrapsigner",
    primary=None,
    views={CONFIGMAPS: ConfigMapView, bootstraptoken.SECRETS: bootstraptoken.SecretView},
    build=build,
    workers=1,  # upstream's one sync worker
    enabled_by_default=False,
    queue_name="bootstrap_signer_queue",
    package=__package__,
)
