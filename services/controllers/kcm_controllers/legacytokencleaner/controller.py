"""The legacy service account token cleaner: invalidates, then deletes, unused auto-generated tokens.

Upstream pkg/controller/serviceaccount/legacy_serviceaccount_token_cleaner.go on our runtime.
One periodic pass (`evaluate`), in one replica, through the work queue's well-known key
`evaluate`, which requeues itself. A pass does nothing until the API server has tracked
legacy token use for a whole --legacy-service-account-token-clean-up-period (the `since` date
of `kube-system/kube-apiserver-legacy-service-account-token-tracking`, from the day after).
Then every `kubernetes.io/service-account-token` Secret
- created more than a period ago, not being deleted,
- not used for a period (the API server's `kubernetes.io/legacy-token-last-used` date label,
  none meaning never since tracking began),
- listed in its ServiceAccount's `secrets` (an auto-generated token: one made by hand is
  never touched), and
- referred to by no pod of its namespace,
is labelled `kubernetes.io/legacy-token-invalid-since: <today>` (the API server refuses it
from then on), and deleted once that label is a period old. Dates are days (UTC), as upstream.

Difference from upstream: the pass runs every min(24h, clean-up period) instead of every 24h,
so a short period (a test's) takes effect within that period.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from kcm_shared import runtime
from kcm_shared.apimachinery import goduration
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import serviceaccounts
from kcm_shared.controllerutil.serviceaccounts import (
    PODS,
    SECRETS,
    SERVICEACCOUNTS,
    SecretView,
    ServiceAccountView,
)
from kcm_shared.runtime import cache

from kcm_controllers.legacytokencleaner import podsecrets

log = logging.getLogger("kcm.legacy-serviceaccount-token-cleaner")

EVALUATE = "evaluate"
DATE_FORMAT = "%Y-%m-%d"
LAST_USED_LABEL = "kubernetes.io/legacy-token-last-used"
INVALID_SINCE_LABEL = "kubernetes.io/legacy-token-invalid-since"
TRACKING_NAMESPACE = "kube-system"
TRACKING_CONFIGMAP = "kube-apiserver-legacy-service-account-token-tracking"
TRACKING_KEY = "since"
DEFAULT_SYNC_INTERVAL = 24 * 3600.0
DEFAULT_CLEAN_UP_PERIOD = 365 * 24 * 3600.0  # 8760h


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _date(text: str) -> dt.date | None:
    try:
        return dt.datetime.strptime(text, DATE_FORMAT).date()
    except ValueError:
        return None


class Cleaner:
    """One pass over the cached token Secrets; the API client and the clock are injected."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        secrets: cache.Cache[SecretView],
        service_accounts: cache.Cache[ServiceAccountView],
        pods: cache.Cache[podsecrets.PodSecretsView],
        clean_up_period: float,
        *,
        now: Callable[[], dt.datetime] = _utcnow,
    ) -> None:
        self.client = client
        self.secrets = secrets
        self.service_accounts = service_accounts
        self.pods = pods
        self.period = dt.timedelta(seconds=clean_up_period)
        self.interval = min(DEFAULT_SYNC_INTERVAL, clean_up_period)
        self.now = now

    async def reconcile(self, key: str) -> runtime.Result | None:
        if key != EVALUATE:
            raise runtime.TerminalError(f"not a key of this controller: {key!r}")
        await self.evaluate()
        return runtime.Result(requeue_after=self.interval)

    async def tracked_since(self) -> dt.datetime:
        """Midnight (UTC) after the day the API server began tracking legacy token use."""
        path = kubeclient.resource_path("", "v1", "configmaps", TRACKING_NAMESPACE, TRACKING_CONFIGMAP)
        cm = await self.client.get(path)
        since = (cm.get("data") or {}).get(TRACKING_KEY)
        if since is None:
            raise ValueError("configMap does not have since label")
        day = _date(str(since))
        if day is None:
            raise ValueError(f"error parsing trackedSince time: {since!r}")
        return dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), dt.UTC)

    async def evaluate(self) -> None:
        """Label or delete what is due; a failed write is retried by failing the pass (the
        others are still tried first)."""
        now = self.now()
        if now < await self.tracked_since() + self.period:
            return  # not tracked for long enough to call anything unused
        preserve_created = now - self.period
        preserve_used = (now - self.period).strftime(DATE_FORMAT)
        mounted: dict[str, set[str]] = {}
        failures: list[Exception] = []
        for secret in self.secrets.list():
            try:
                await self._evaluate_one(secret, now, preserve_created, preserve_used, mounted)
            except kubeclient.ApiError as exc:
                log.warning(
                    "could not clean up a legacy token",
                    extra={
                        "secret": f"{secret.metadata.namespace}/{secret.metadata.name}",
                        "error": str(exc),
                    },
                )
                failures.append(exc)
        if failures:
            raise failures[0]

    def _used_by_pods(self, namespace: str, mounted: dict[str, set[str]]) -> set[str]:
        if namespace not in mounted:
            mounted[namespace] = {
                n for pod in self.pods.list(namespace) for n in podsecrets.secret_names(pod)
            }
        return mounted[namespace]

    async def _evaluate_one(
        self,
        secret: SecretView,
        now: dt.datetime,
        preserve_created: dt.datetime,
        preserve_used: str,
        mounted: dict[str, set[str]],
    ) -> None:
        meta = secret.metadata
        if not serviceaccounts.is_token_secret(secret) or meta.deletion_timestamp is not None:
            return
        if meta.creation_timestamp is None or meta.creation_timestamp >= preserve_created:
            return
        last_used = meta.labels.get(LAST_USED_LABEL)
        if last_used is not None:
            if _date(last_used) is None:
                log.warning("malformed last-used label", extra={"secret": f"{meta.namespace}/{meta.name}"})
                return
            if last_used >= preserve_used:
                return
        sa_name, sa_uid = serviceaccounts.token_owner(secret)
        sa = self.service_accounts.get(meta.namespace, sa_name) if sa_name else None
        if sa is None or sa_uid not in ("", sa.metadata.uid) or not serviceaccounts.references(sa, meta.name):
            return  # not provably an auto-generated token
        if meta.name in self._used_by_pods(meta.namespace, mounted):
            return
        path = kubeclient.resource_path("", "v1", "secrets", meta.namespace, meta.name)
        invalid_since = meta.labels.get(INVALID_SINCE_LABEL, "")
        if _date(invalid_since) is None:
            today = now.strftime(DATE_FORMAT)
            log.info(
                "mark the auto-generated service account token as invalid",
                extra={"secret": f"{meta.namespace}/{meta.name}", "invalidSince": today},
            )
            patch = {"metadata": {"uid": meta.uid, "labels": {INVALID_SINCE_LABEL: today}}}
            await self.client.patch(path, patch)
            return
        if invalid_since >= preserve_used:
            return
        log.info(
            "delete auto-generated service account token",
            extra={
                "secret": f"{meta.namespace}/{meta.name}",
                "lastUsed": last_used,
                "invalidSince": invalid_since,
            },
        )
        try:
            await self.client.delete(path, {"preconditions": {"resourceVersion": meta.resource_version}})
        except kubeclient.ApiError as exc:
            if not (exc.conflict or exc.not_found):  # changed since this pass read it: next pass
                raise


def flags(p: runtime.FlagSet) -> None:
    p.add_argument(
        "--legacy-service-account-token-clean-up-period",
        type=goduration.positive_seconds,
        default=DEFAULT_CLEAN_UP_PERIOD,
        metavar="DURATION",
        help="how long an auto-generated legacy token may go unused before it is invalidated, and "
        "invalidated before it is deleted (default 8760h0m0s)",
    )


def build(ctx: runtime.Context) -> runtime.Reconcile:
    cleaner = Cleaner(
        ctx.client,
        ctx.caches[SECRETS],
        ctx.caches[SERVICEACCOUNTS],
        ctx.caches[PODS],
        ctx.args.legacy_service_account_token_clean_up_period,
    )
    ctx.keys = lambda: [EVALUATE]
    return cleaner.reconcile


SPEC = runtime.Spec(
    name="legacy-serviceaccount-token-cleaner-controller",
    alias="legacy-service-account-token-cleaner",  # upstream's alias (controllermanager descriptor)
    also_known_as=("legacy-serviceaccount-token-cleaner",),  # the canonical name's spelling
    primary=None,
    views={SECRETS: SecretView, SERVICEACCOUNTS: ServiceAccountView, PODS: podsecrets.PodSecretsView},
    build=build,
    workers=1,
    flags=flags,
    package=__package__,
)
