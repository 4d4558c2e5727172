"""The token cleaner: deletes bootstrap token Secrets when they expire.

Upstream pkg/controller/bootstrap/tokencleaner.go on our runtime; off by default, on with
`--controllers=*,tokencleaner` (what kubeadm runs). Work keys are Secret keys; those of type
`bootstrap.kubernetes.io/token` in kube-system queue themselves when added or updated, and the
sync passes over every other one without an API read. It reads the token Secret from the API
server, since its data (the `expiration`) never travels on the bus (docs/bus.md): gone, nothing
to do; expired (or an `expiration` that does not parse, as upstream) it is deleted with its uid
as precondition (NotFound and Conflict are not errors); otherwise the key runs again at the
expiry (upstream's AddAfter), durably.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from kcm_shared import runtime
from kcm_shared.apimachinery import codec
from kcm_shared.apis import bootstrapsecret
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import bootstraptoken
from kcm_shared.runtime import cache

log = logging.getLogger("kcm.tokencleaner")


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Cleaner:
    """The sync; the API client, cache and clock are injected."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        secrets: cache.Cache[bootstraptoken.SecretView],
        *,
        now: Callable[[], dt.datetime] = _utcnow,
    ) -> None:
        self.client = client
        self.secrets = secrets
        self.now = now

    async def sync(self, key: str) -> runtime.Result | None:
        namespace, _, name = key.partition("/")
        cached = self.secrets.get(namespace, name)
        if cached is None or not bootstraptoken.is_token_secret(cached):
            return None  # every other Secret is a key too: no API read for them
        path = kubeclient.resource_path("", "v1", "secrets", namespace, name)
        try:
            secret = await self.client.get(path)
        except kubeclient.ApiError as exc:
            if exc.not_found:
                return None
            raise
        if secret.get("type") != bootstrapsecret.SECRET_TYPE:
            return None
        left, expired = bootstrapsecret.expiration(secret, self.now())
        if not expired:
            return runtime.Result(requeue_after=left.total_seconds()) if left > dt.timedelta(0) else None
        log.info("Deleting expired secret", extra={"secret": key})
        uid = (secret.get("metadata") or {}).get("uid")
        options = {"preconditions": {"uid": uid}} if uid else None
        try:
            await self.client.delete(path, options)
        except kubeclient.ApiError as exc:
            if not (exc.not_found or exc.conflict):
                raise
        return None


def build(ctx: runtime.Context) -> runtime.Reconcile:
    def changed(secret: bootstraptoken.SecretView) -> None:
        if bootstraptoken.is_token_secret(secret):
            ctx.enqueue(codec.key_of(secret))

    ctx.caches[bootstraptoken.SECRETS].add_handler(on_add=changed, on_update=lambda _, s: changed(s))
    return Cleaner(ctx.client, ctx.caches[bootstraptoken.SECRETS]).sync


SPEC = runtime.Spec(
    name="token-cleaner-controller",
    alias="tokencleaner",
    primary=bootstraptoken.SECRETS,
    views={bootstraptoken.SECRETS: bootstraptoken.SecretView},
    build=build,
    workers=1,  # upstream's one worker
    enabled_by_default=False,
    queue_name="token_cleaner",
    package=__package__,
)
