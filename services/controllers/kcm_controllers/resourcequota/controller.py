"""The resource quota controller: `status.hard` and `status.used` of every ResourceQuota.

Upstream pkg/controller/resourcequota (resource_quota_controller.go, resource_quota_monitor.go)
on our runtime (docs/runtime.md), counting with the evaluators the API server's quota
admission uses (`kcm_shared.apis.quota`), so the two never disagree (claims: when both run with
the RecoverVolumeExpansionFailure gate set alike; `--feature-gates` decides this side's).

Keys are quota keys (`namespace/name`) plus one well-known key, RESYNC_KEY, whose reconcile
hands every quota key to its owner and requeues itself after `--resource-quota-sync-period`:
the full resync runs in one replica at a time, through the work queue. Event handlers:
- a quota added, or updated so that its spec changed or its status misses a tracked name:
  its key (its own status writes change nothing else, so they enqueue nothing);
- a counted object (pods, services, persistentvolumeclaims, configmaps, secrets,
  replicationcontrollers, resourcequotas; all from the bus caches) deleted, or updated so
  that its usage changed: the keys of the quotas of its namespace that track its resource
  (upstream's quota monitor). Creates are charged by quota admission in the create request
  itself, as upstream, and need no event. A quota naming `count/<resource>.<group>` of any
  other resource the watcher publishes opens a metadata-only cache of it at run time
  (`Context.open_cache`), whose deletes enqueue likewise.

Sync (`ResourceQuotaController.sync`): read the quota from the cache; wait until the caches
it counts from have caught up with the quota's resourceVersion (so a create that admission
charged before that version is counted: upstream has a window here where a stale informer
can hand back usage admission just charged), unless this replica counted that version's
charges already (it waited for it, or its own status write produced it); sum the usage of the matching objects of its
namespace (`evaluators.calculate_usage`). A resource no cache holds (not published by the
watcher, or its run-time cache did not catch up) is listed from the API server, and one no
API serves stays out of `status.used`, so admission answers "status unknown" for it. The
new status goes out as a merge patch of the status subresource carrying the quota's
resourceVersion (upstream's UpdateStatus), so a charge admission made meanwhile makes it
fail and retry; the next sync starts from what that write returned while the cache still
shows the version it replaced (`kcm_shared.controllerutil.ownwrites`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable, Iterable
from typing import Any

from kcm_shared import runtime
from kcm_shared.apimachinery import codec, goduration, gvr
from kcm_shared.apis.quota import evaluators, resources, views
from kcm_shared.apis.quota.evaluators import Evaluator
from kcm_shared.client import discovery, kubeclient
from kcm_shared.controllerutil import ownwrites
from kcm_shared.runtime import cache, upstreamflags

log = logging.getLogger("kcm.resourcequota")

QUOTAS = gvr.Resource("", "v1", "resourcequotas")
PODS = gvr.Resource("", "v1", "pods")
SERVICES = gvr.Resource("", "v1", "services")
CLAIMS = gvr.Resource("", "v1", "persistentvolumeclaims")
CONFIGMAPS = gvr.Resource("", "v1", "configmaps")
SECRETS = gvr.Resource("", "v1", "secrets")
RCS = gvr.Resource("", "v1", "replicationcontrollers")
COUNTED = (PODS, SERVICES, CLAIMS, CONFIGMAPS, SECRETS, RCS)
RESYNC_KEY = "~resync"  # no quota key looks like this: quota keys are namespace/name
CATCH_UP_LIMIT = 10.0  # seconds a sync waits for its caches before failing (and retrying)
DYNAMIC_CATCH_UP_LIMIT = 5.0  # ... for a cache opened at run time, before listing instead
UNKNOWN_RETRY = 30.0  # upstream re-discovers resources every 30 s; so do we, per quota
REDISCOVERY = 5.0  # at most one discovery read per this many seconds for unknown resources
LIST_PAGE = "500"


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class ResourceQuotaController:
    """Handlers and sync of one process; the runtime's Context and the clock are injected."""

    def __init__(
        self, ctx: runtime.Context, resync_period: float, *, now: Callable[[], dt.datetime] = _now
    ) -> None:
        self.ctx = ctx
        self.client = ctx.client
        self.quotas: cache.Cache[views.QuotaView] = ctx.caches[QUOTAS]
        self.caches = ctx.caches
        self.enqueue = ctx.enqueue
        self.resync_period = resync_period
        self.now = now
        # This process's gate, as upstream's controller reads its own; quota admission reads
        # the API server's, so claims are charged alike only with the gate set alike on both.
        self.registry = evaluators.Registry(
            allocated_claims=upstreamflags.gate(ctx.args, "RecoverVolumeExpansionFailure")
        )
        self._mapper: discovery.Mapper | None = None
        self._mapper_at = 0.0
        self._published: set[gvr.Resource] = set()
        self._published_at = 0.0
        # (group, resource) -> the cached resource counted from; the fixed views, plus caches
        # opened at run time for other published resources a quota names (`count/...`).
        self._sources: dict[tuple[str, str], gvr.Resource] = {}
        # Status writes come back through the bus later than the next sync may start.
        self.own_writes: ownwrites.OwnWrites[views.QuotaView] = ownwrites.OwnWrites()
        # Per quota key, the resourceVersions of it whose charges are known to be in the
        # caches: the version a sync waited for, and the version its own write produced
        # from it (a write that succeeds on version R carries exactly R's charges).
        self._counted: dict[str, tuple[str, str]] = {}
        self.quotas.add_handler(
            on_add=self._quota_added, on_update=self._quota_updated, on_delete=self._quota_added
        )
        for res in (*COUNTED, QUOTAS):
            evaluator = self.registry.get(res.group, res.resource)
            self._sources[(res.group, res.resource)] = res
            self.caches[res].add_handler(
                on_update=self._usage_updated(evaluator), on_delete=self._replenish(evaluator)
            )

    # --- event handlers ----------------------------------------------------------------------

    def forget_unowned(self, owned: Callable[[str], bool]) -> None:
        """Drop what is kept for quotas whose partition moved to another replica."""
        self.own_writes.retain(owned)
        self._counted = {key: seen for key, seen in self._counted.items() if owned(key)}

    def keys(self) -> Iterable[str]:
        yield RESYNC_KEY
        yield from self.quotas.keys()

    def _quota_added(self, quota: views.QuotaView) -> None:
        # Also a deleted one, as upstream: its sync finds it gone and frees what was kept for it.
        self.enqueue(codec.key_of(quota.metadata))

    def _quota_updated(self, old: views.QuotaView, new: views.QuotaView) -> None:
        if old.spec != new.spec or not _status_complete(new):
            self.enqueue(codec.key_of(new.metadata))

    def _usage_updated(self, evaluator: Evaluator) -> Callable[[Any, Any], None]:
        def handler(old: Any, new: Any) -> None:
            if not self.quotas.list(new.metadata.namespace):
                return  # most namespaces have no quota: skip the arithmetic
            now = self.now()
            changed = not resources.equals(evaluator.usage(old, now), evaluator.usage(new, now))
            if changed or _scope_facts(evaluator, old) != _scope_facts(evaluator, new):
                self._enqueue_tracking(evaluator, new.metadata.namespace)

        return handler

    def _replenish(self, evaluator: Evaluator) -> Callable[[Any], None]:
        return lambda obj: self._enqueue_tracking(evaluator, obj.metadata.namespace)

    def _enqueue_tracking(self, evaluator: Evaluator, namespace: str) -> None:
        """The quotas of `namespace` that track what `evaluator` charges (upstream replenishQuota)."""
        for quota in self.quotas.list(namespace):
            if evaluator.matching_resources((quota.status.hard or {}).keys()):
                self.enqueue(codec.key_of(quota.metadata))

    # --- sync --------------------------------------------------------------------------------

    async def reconcile(self, key: str) -> runtime.Result | None:
        if key == RESYNC_KEY:
            known = self.quotas.keys()  # a copy: the cache moves on while we hand off
            for quota_key in known:
                await self.ctx.hand_off(quota_key)
            return runtime.Result(requeue_after=self.resync_period)
        quota = self.own_writes.latest(key, self.quotas.get_key(key))
        if quota is None:
            self._counted.pop(key, None)
            return None
        return await self.sync(quota)

    async def sync(self, quota: views.QuotaView) -> runtime.Result | None:
        hard = resources.parse_list(quota.spec.hard)
        scopes = evaluators.quota_scopes(quota.spec)
        namespace = quota.metadata.namespace
        items: dict[tuple[str, str], list[Any] | None] = {}
        quota_key = codec.key_of(quota.metadata)
        rv = quota.metadata.resource_version
        # Asking the watcher for a marker costs up to its 2 s grace when nothing else of the
        # resource changes; a version whose charges are counted already needs no wait.
        counted = rv in self._counted.get(quota_key, ())
        # The limit bounds the waits for caches only: listing a large uncached resource, or
        # discovery, may take what it takes (upstream's sync has no limit at all).
        deadline = asyncio.get_running_loop().time() + CATCH_UP_LIMIT
        for evaluator in self.registry.for_names(hard):
            source = (evaluator.group, evaluator.resource)
            res = await self._source(evaluator, rv, counted, deadline)
            if res is not None:
                items[source] = self.caches[res].list(namespace)
            else:
                items[source] = await self._list(evaluator, namespace)
        used = resources.parse_list(quota.status.used)

        def objects(evaluator: Evaluator) -> list[Any] | None:
            return items.get((evaluator.group, evaluator.resource))

        used.update(evaluators.calculate_usage(hard, scopes, objects, self.now(), self.registry))
        used = resources.mask(used, hard)
        written = await self._write_status(quota, hard, used)
        self._counted[quota_key] = (rv, written or rv)
        if len(used) < len(hard):
            return runtime.Result(requeue_after=UNKNOWN_RETRY)
        return None

    async def _source(
        self, evaluator: Evaluator, resource_version: str, counted: bool, deadline: float
    ) -> gvr.Resource | None:
        """The cache to count `evaluator`'s objects from, caught up with `resource_version`
        (so every create admission charged before it is there) unless that version's charges
        are `counted` in it already; None to list them instead. A published resource without
        one gets a cache now, a metadata-only one whose deletes enqueue the quotas that track it."""
        key = (evaluator.group, evaluator.resource)
        res = self._sources.get(key)
        if res is None:
            counted = False  # a new cache has counted nothing yet
            found = await self._resource(*key)
            if found is None or not found.namespaced or found.resource not in await self._published_now():
                return None
            res = found.resource
            self.ctx.open_cache(res, codec.Meta).add_handler(on_delete=self._replenish(evaluator))
            self._sources[key] = res
        if counted and self.caches[res].has_synced():
            return res
        if res in COUNTED or res == QUOTAS:
            async with asyncio.timeout_at(deadline):
                await self.caches[res].wait_caught_up(resource_version)
            return res
        try:
            async with asyncio.timeout(DYNAMIC_CATCH_UP_LIMIT):
                await self.caches[res].wait_caught_up(resource_version)
        except TimeoutError:
            # The watcher stopped publishing it (a CRD deleted, say): count it from the API.
            log.warning(
                "cache of a counted resource did not catch up; listing it", extra={"resource": str(res)}
            )
            self.ctx.close_cache(res)
            del self._sources[key]
            return None
        return res

    async def _published_now(self) -> set[gvr.Resource]:
        loop = asyncio.get_running_loop()
        if loop.time() - self._published_at > REDISCOVERY:
            self._published = await self.ctx.published()
            self._published_at = loop.time()
        return self._published

    async def _list(self, evaluator: Evaluator, namespace: str) -> list[Any] | None:
        """The namespace's objects of a resource no cache holds (metadata only); None when no
        API serves it."""
        found = await self._resource(evaluator.group, evaluator.resource)
        if found is None or not found.namespaced:
            return None
        path = kubeclient.resource_path(
            found.resource.group, found.resource.version, found.resource.resource, namespace
        )
        items: list[Any] = []
        params = {"limit": LIST_PAGE}
        while True:
            try:
                page = await self.client.get(path, params)
            except kubeclient.ApiError as exc:
                if exc.code == 404:
                    return None
                raise
            items.extend(page.get("items") or ())
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items
            params = {"limit": LIST_PAGE, "continue": token}

    async def _resource(self, group: str, resource: str) -> discovery.ApiResource | None:
        """The preferred served version of group/resource, from discovery re-read (at most every
        REDISCOVERY seconds) when the resource is not (yet) known."""
        loop = asyncio.get_running_loop()
        for attempt in range(2):
            if self._mapper is not None:
                for candidate in self._mapper.resources:
                    res = candidate.resource
                    if (
                        (res.group, res.resource) == (group, resource)
                        and candidate.preferred
                        and "list" in candidate.verbs
                    ):
                        return candidate
            if attempt or (self._mapper is not None and loop.time() - self._mapper_at < REDISCOVERY):
                return None
            self._mapper = await discovery.discover(self.client, all_versions=False)
            self._mapper_at = loop.time()
        return None

    async def _write_status(
        self, quota: views.QuotaView, hard: resources.ResourceList, used: resources.ResourceList
    ) -> str:
        """Write the status when it changed; the resourceVersion written ("" when nothing was)."""
        new_hard, new_used = resources.to_json(hard), resources.to_json(used)
        old_hard = quota.status.hard or {}
        old_used = quota.status.used or {}
        if quota.status.hard is not None and quota.status.used is not None:
            same_hard = resources.equals(resources.parse_list(old_hard), hard)
            if same_hard and resources.equals(resources.parse_list(old_used), used):
                return ""
        status: dict[str, Any] = {
            "hard": {**{name: None for name in old_hard if name not in new_hard}, **new_hard},
            "used": {**{name: None for name in old_used if name not in new_used}, **new_used},
        }
        patch = {"metadata": {"resourceVersion": quota.metadata.resource_version}, "status": status}
        path = kubeclient.resource_path(
            QUOTAS.group,
            QUOTAS.version,
            QUOTAS.resource,
            quota.metadata.namespace,
            quota.metadata.name,
            "status",
        )
        try:
            raw = await self.client.request_bytes(
                "PATCH", path, body=patch, content_type=kubeclient.PATCH_TYPES["merge"]
            )
        except kubeclient.ApiError as exc:
            if exc.code == 404:
                return ""  # deleted meanwhile: nothing left to account for
            raise  # a 409 (admission charged meanwhile) retries with the newer quota
        written = codec.decode(raw, views.QuotaView)
        self.own_writes.record(codec.key_of(quota.metadata), quota.metadata.resource_version, written)
        return written.metadata.resource_version


def _status_complete(quota: views.QuotaView) -> bool:
    hard, used = quota.status.hard, quota.status.used
    if hard is None or used is None:
        return False
    return all(name in used for name in hard) and set(hard) == set(quota.spec.hard)


def _scope_facts(evaluator: Evaluator, obj: Any) -> tuple[bool, ...]:
    """What scoped quotas see of an object, so a change of it (say, activeDeadlineSeconds
    set on a pod) moves usage between Terminating and NotTerminating quotas."""
    return tuple(
        evaluator.matches_scope(evaluators.Requirement(scope), obj) for scope in evaluators.STANDARD_SCOPES
    )


def flags(p: runtime.FlagSet) -> None:
    p.add_argument(
        "--resource-quota-sync-period",
        type=goduration.seconds,
        default=300.0,
        help="the period for syncing quota usage status in the system (default 5m0s)",
    )


def build(ctx: runtime.Context) -> runtime.Reconcile:
    period = float(getattr(ctx.args, "resource_quota_sync_period", 300.0))
    rq = ResourceQuotaController(ctx, period)
    ctx.keys = rq.keys
    ctx.on_partitions_lost(rq.forget_unowned)
    return rq.reconcile


SPEC = runtime.Spec(
    name="resourcequota-controller",
    alias="resourcequota",
    queue_name="resourcequota_primary",
    primary=QUOTAS,
    views={
        QUOTAS: views.QuotaView,
        PODS: views.PodView,
        SERVICES: views.ServiceView,
        CLAIMS: views.ClaimView,
        CONFIGMAPS: codec.Meta,
        SECRETS: codec.Meta,
        RCS: codec.Meta,
    },
    build=build,
    workers=5,
    workers_flag="concurrent-resource-quota-syncs",
    flags=flags,
    package=__package__,
)
