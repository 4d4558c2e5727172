"""The namespace controller: empties namespaces being deleted and finalizes them.

Upstream pkg/controller/namespace/namespace_controller.go on our runtime (docs/runtime.md);
the work itself is `kcm_controllers.namespace.deleter` (namespaced_resources_deleter.go).

Wiring. The namespaces cache (from the bus) enqueues a namespace's name whenever it is added
or changed while it has a deletionTimestamp. A reconcile waits until the namespace has been
terminating for DELETION_GRACE (upstream delays every namespace event by those 5 s, so HA
API servers' admission sees the deletion and late creations reach storage before the
content is listed), then runs one round of the deleter: content remaining is looked at
again after upstream's `estimate/2 + 1` seconds, a failure is retried with the runtime's
backoff, and a finished round has removed the `kubernetes` finalizer.

`--namespace-sync-period` (upstream's informer resync, 5m) is the well-known key RESYNC,
reconciled in one replica: every namespace still terminating is handed to its partition's
owner again, then the key comes back after the period. A new owner of partitions enqueues
RESYNC (if it falls in them) and the terminating namespaces (`Context.keys`).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from kcm_shared import runtime
from kcm_shared.apimachinery import codec, goduration
from kcm_shared.runtime import cache, upstreamflags

from kcm_controllers.namespace import conditions, deleter

log = logging.getLogger("kcm.namespace")

NAMESPACES = deleter.NAMESPACES
DELETION_GRACE = 5.0  # upstream namespaceDeletionGracePeriod
# Not a namespace name (those are DNS labels), so it never meets a namespace's key.
RESYNC = "@resync"


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def grace_left(deleted_at: dt.datetime, now: dt.datetime) -> float:
    """Seconds until the namespace has been terminating for DELETION_GRACE (never more than
    that, so a clock ahead of the API server's cannot stall it)."""
    return min(DELETION_GRACE, DELETION_GRACE - (now - deleted_at).total_seconds())


class NamespaceController:
    def __init__(
        self,
        ctx: runtime.Context,
        namespaces: cache.Cache[codec.NamespaceView],
        *,
        sync_period: float,
        now: Callable[[], dt.datetime] = _utcnow,
    ) -> None:
        self.ctx = ctx
        self.namespaces = namespaces
        self.sync_period = sync_period
        self.now = now
        self.deleter = deleter.Deleter(
            ctx.client, now=now, ordered=upstreamflags.gate(ctx.args, "OrderedNamespaceDeletion")
        )

    def register(self) -> None:
        # A namespace that is gone needs nothing (upstream has no delete handler either).
        self.namespaces.add_handler(on_add=self._changed, on_update=lambda _old, new: self._changed(new))

    def _changed(self, ns: codec.NamespaceView) -> None:
        if ns.metadata.deletion_timestamp is not None:
            self.ctx.enqueue(codec.key_of(ns))

    def terminating(self) -> list[str]:
        return [
            codec.key_of(ns) for ns in self.namespaces.list() if ns.metadata.deletion_timestamp is not None
        ]

    def keys(self) -> list[str]:
        return [RESYNC, *self.terminating()]

    async def reconcile(self, key: str) -> runtime.Result | None:
        if key == RESYNC:
            for name in self.terminating():
                await self.ctx.hand_off(name)
            return runtime.Result(requeue_after=self.sync_period)
        ns = self.namespaces.get_key(key)
        deleted_at = ns.metadata.deletion_timestamp if ns is not None else None
        if ns is None or deleted_at is None:
            return None  # gone, or not being deleted
        wait = grace_left(deleted_at, self.now())
        if wait > 0:
            return runtime.Result(requeue_after=wait)
        try:
            await self.deleter.delete(ns.metadata.name)
        except deleter.ResourcesRemaining as exc:
            wait = conditions.requeue_seconds(exc.estimate)
            log.info("content remaining in namespace", extra={"namespace": key, "waitSeconds": wait})
            return runtime.Result(requeue_after=wait)
        return None


def _flags(p: runtime.FlagSet) -> None:
    p.add_argument(
        "--namespace-sync-period",
        type=goduration.positive_seconds,
        default=300.0,
        metavar="DURATION",
        help="the period for syncing namespace life-cycle updates (default 5m0s)",
    )


def build(ctx: runtime.Context) -> runtime.Reconcile:
    period = float(getattr(ctx.args, "namespace_sync_period", 300.0))
    nc = NamespaceController(ctx, ctx.caches[NAMESPACES], sync_period=period)
    nc.register()
    ctx.keys = nc.keys
    return nc.reconcile


SPEC = runtime.Spec(
    name="namespace-controller",
    alias="namespace",
    queue_name="namespace",
    primary=NAMESPACES,
    views={NAMESPACES: codec.NamespaceView},
    build=build,
    workers=10,
    flags=_flags,
    # Upstream multiplies the namespace controller's client qps by 20 and burst by 100: it
    # makes a discovery round and two requests per resource for every namespace it empties.
    client_rate_scale=(20.0, 100.0),
    # Upstream's nsControllerRateLimiter: a namespace stuck on an error is retried at least
    # every minute.
    retry_backoff=(0.005, 60.0),
    package=__package__,
)
