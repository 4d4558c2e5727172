"""API clients that authenticate as a ServiceAccount: upstream's `--use-service-account-credentials`.

With that flag, upstream kube-controller-manager gives each controller a client of its own
(k8s.io/controller-manager/pkg/clientbuilder, the dynamic builder): the root kubeconfig's
credentials are dropped (`kubeclient.anonymous`) and the bearer token is one the root client asks
for with a TokenRequest on `<namespace>/<the controller's ServiceAccount>`, after creating that
ServiceAccount if it is missing. The API server then authorizes every request of the controller
by that ServiceAccount's roles, and its writes are audited under its name.

- `ClientBuilder(root, namespace).credentials(name)`: the connection and `ServiceAccountToken`
  a `KubeClient` for ServiceAccount `name` is made of. The controller Manager
  (`kcm_shared.runtime.manager`) asks for one per controller; the root client needs `get` and
  `create` on `serviceaccounts` and `create` on `serviceaccounts/token` in that namespace, nothing
  else.
- `ServiceAccountToken`: a `kubeclient.TokenSource`. It asks for a token of `EXPIRATION_SECONDS`
  and asks again once `REFRESH_AT` of the lifetime the server granted has passed (upstream
  refreshes with 20% left), and at once after a 401. A refresh that fails while the token in hand
  is still valid keeps it (logged) and is tried again `RETRY_SECONDS` later; with no valid token
  the request fails with the API error, so a missing permission shows as that error.
- Unlike upstream, the namespace is not created when missing (upstream tries and ignores a
  refusal): the ServiceAccount's create then fails with the API server's 404.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from kcm_shared.client import kubeclient

log = logging.getLogger("kcm.clientbuilder")

EXPIRATION_SECONDS = 3600  # upstream's defaultExpirationSeconds
REFRESH_AT = 0.8  # of the granted lifetime: upstream's defaultLeewayPercent is 20
RETRY_SECONDS = 5.0  # between failed refreshes while the old token still holds


@dataclass(frozen=True)
class Credentials:
    """What a KubeClient for one ServiceAccount is made of."""

    conn: kubeclient.Connection
    tokens: ServiceAccountToken


class ClientBuilder:
    """Credentials for ServiceAccounts of one namespace, each token requested by `root`."""

    def __init__(self, root: kubeclient.KubeClient, namespace: str) -> None:
        self.root = root
        self.namespace = namespace

    def credentials(self, name: str) -> Credentials:
        tokens = ServiceAccountToken(self.root, self.namespace, name)
        return Credentials(kubeclient.anonymous(self.root.conn), tokens)


class ServiceAccountToken:
    """A bound token of ServiceAccount `namespace/name`, requested by `root` and kept fresh."""

    def __init__(
        self,
        root: kubeclient.KubeClient,
        namespace: str,
        name: str,
        *,
        expiration_seconds: int = EXPIRATION_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.root = root
        self.namespace = namespace
        self.name = name
        self._expiration = expiration_seconds
        self._clock = clock
        self._header = ""
        self._refresh_at = 0.0  # monotonic time to ask for the next token
        self._expires_at = 0.0  # monotonic time the token in hand stops being valid
        self._lock = asyncio.Lock()

    async def header(self) -> str:
        if self._header and self._clock() < self._refresh_at:
            return self._header
        async with self._lock:  # one TokenRequest for every request that found the token old
            if not self._header or self._clock() >= self._refresh_at:
                await self._refresh()
        return self._header

    def rejected(self, header: str) -> None:
        if header == self._header:
            self._refresh_at = 0.0

    async def _refresh(self) -> None:
        asked = self._clock()
        try:
            await self._ensure_account()
            answer = await self.root.create(
                kubeclient.resource_path("", "v1", "serviceaccounts", self.namespace, self.name, "token"),
                {
                    "apiVersion": "authentication.k8s.io/v1",
                    "kind": "TokenRequest",
                    "spec": {"expirationSeconds": self._expiration},
                },
            )
            token = answer["status"]["token"]
            # The server may grant less (or, for pod-bound tokens, more) than asked.
            lifetime = int(answer.get("spec", {}).get("expirationSeconds") or self._expiration)
        except (kubeclient.ApiError, OSError, TimeoutError, KeyError, TypeError, ValueError) as exc:
            if self._header and asked < self._expires_at:
                log.warning(
                    "cannot refresh the service account token, keeping the one still valid",
                    extra={"serviceaccount": f"{self.namespace}/{self.name}", "error": repr(exc)},
                )
                self._refresh_at = asked + RETRY_SECONDS
                return
            raise
        self._header = f"Bearer {token}"
        self._refresh_at = asked + lifetime * REFRESH_AT
        self._expires_at = asked + lifetime
        log.debug(
            "service account token issued",
            extra={"serviceaccount": f"{self.namespace}/{self.name}", "seconds": lifetime},
        )

    async def _ensure_account(self) -> None:
        """Upstream's getOrCreateServiceAccount: read it, create it when missing."""
        try:
            await self.root.get(
                kubeclient.resource_path("", "v1", "serviceaccounts", self.namespace, self.name)
            )
            return
        except kubeclient.ApiError as exc:
            if not exc.not_found:
                raise
        try:
            await self.root.create(
                kubeclient.resource_path("", "v1", "serviceaccounts", self.namespace),
                {
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                },
            )
        except kubeclient.ApiError as exc:
            if not exc.conflict:  # AlreadyExists: another replica made it first
                raise
