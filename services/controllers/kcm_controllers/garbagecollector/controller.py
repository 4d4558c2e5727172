"""The garbage collector: deletes objects whose owners are gone, orphans and foreground-deletes
(upstream pkg/controller/garbagecollector: garbagecollector.go, graph_builder.go, operations.go).

Wiring. Every DISCOVERY_PERIOD (30 s, as upstream), and as soon as the watcher starts
publishing a new resource (polled every PUBLISHED_POLL), the collector reads API discovery (`kcm_shared.client.discovery`) and
follows every preferred resource with the delete, list and watch verbs, except upstream's
ignored resources (events in "" and events.k8s.io) and those the watcher does not publish
(no progress marker: a cache of it could never catch up). Each followed resource gets a
metadata-only cache (`codec.Meta`) opened at run time (`Context.open_cache`), whose events
feed the dependency graph (`kcm_controllers.garbagecollector.graph`). The collector takes
work only once every deletable resource is followed, or after INITIAL_SYNC_TIMEOUT (upstream's
bound on its initial sync): at start-up the watcher publishes kinds one by one.

Work. Upstream's two queues are two key prefixes on the runtime's durable queue:
`delete/<uid>` (attemptToDelete) and `orphan/<uid>` (attemptToOrphan). Graph changes from
cache events are enqueued with `Context.enqueue` (every replica sees the same event and
keeps its own partitions); fan-out found while reconciling (a confirmed-absent owner's
dependents, a foreground owner's blocking dependents) goes through `Context.hand_off`, since
no other replica sees it. On gaining partitions the runtime enqueues `Graph.resync()`.

attemptToDelete (`_attempt_to_delete`), as upstream attemptToDeleteItem: the object is read
live; absent (404 or another uid) means a virtual delete in the graph. An object waiting for
its dependents (foregroundDeletion) has them deleted and loses the finalizer once no
dependent with blockOwnerDeletion=true is left. Otherwise each owner reference is checked
live (never from the cache alone): absent (404 / other uid) is *dangling*, an owner being
deleted in the foreground is *waiting*, any other is *solid*. With a solid owner, dangling
and waiting references are removed by patch; with only waiting owners and dependents of its
own, the object is deleted in the foreground; with no owner left, it is deleted with the
propagation its own finalizers ask for (orphan, foreground) or in the background.
attemptToOrphan: the owner's reference is removed from every dependent (a strategic merge
patch each, many at once), then the `orphan` finalizer from the owner. A cluster-scoped
object naming a namespaced owner is left alone (upstream's
namespacedOwnerOfClusterScopedObjectErr); an unresolvable apiVersion/kind is
logged and retried after the next discovery. An owner reference into another namespace
gets the upstream Warning Event `OwnerRefInvalidNamespace` on the dependent.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
import prometheus_client
from kcm_shared import runtime
from kcm_shared.apimachinery import codec, gvr
from kcm_shared.base import cancellation
from kcm_shared.client import discovery, kubeclient
from kcm_shared.runtime import pflag

from kcm_controllers.garbagecollector import dump, graph

log = logging.getLogger("kcm.garbagecollector")

DISCOVERY_PERIOD = 30.0  # upstream's --garbage-collector resync of monitors
INITIAL_SYNC_TIMEOUT = 30.0  # upstream's bound on waiting for every monitor before collecting
PUBLISHED_POLL = 2.0  # seconds between looks for resources the watcher newly publishes
HAND_OFF_WINDOW = 64  # work items published at once while fanning out
ORPHAN_CONCURRENCY = 64  # dependents patched at once while orphaning (upstream: all at once)
VIRTUAL_RECHECK = 30.0  # an owner that exists but was not observed yet is looked at again
IGNORED = frozenset({("", "events"), ("events.k8s.io", "events")})  # upstream ignoredResources
NEEDED_VERBS = ("delete", "list", "watch")
DELETE, ORPHAN = "delete", "orphan"

SYNC_ERRORS = prometheus_client.Counter(
    "garbagecollector_controller_resources_sync_error_total",
    "Number of garbage collector resources sync errors",
)


def work_key(queue: str, uid: str) -> str:
    return f"{queue}/{uid}"


def _delete_options(policy: str, uid: str, resource_version: str) -> dict[str, Any]:
    pre = {"uid": uid, "resourceVersion": resource_version} if resource_version else {"uid": uid}
    return {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": policy, "preconditions": pre}


class Live(codec.Meta):
    """The live object as read for a decision (metadata only, like upstream's metadata client)."""


@dataclass(frozen=True, slots=True)
class _Classified:
    solid: list[codec.OwnerReference]
    dangling: list[codec.OwnerReference]
    waiting: list[codec.OwnerReference]


class _NamespacedOwnerOfClusterScoped(Exception):
    """Will not resolve on retry: the reference is invalid."""


class GarbageCollector:
    def __init__(self, ctx: runtime.Context) -> None:
        self.ctx = ctx
        self.client = ctx.client
        self.graph = graph.Graph()
        self.mapper = discovery.Mapper(())
        self.monitors: set[gvr.Resource] = set()
        # Deletable resources discovery lists that the watcher does not publish (yet).
        self.unpublished: set[gvr.Resource] = set()
        self._reported: set[gvr.Resource] = set()
        self.ready = asyncio.Event()

    # --- monitors (upstream GraphBuilder.syncMonitors) -------------------------------------

    async def run(self) -> None:
        """Keep the followed resources in step with discovery and with what the watcher publishes."""
        known: set[gvr.Resource] = set()
        since = 0.0
        loop = asyncio.get_running_loop()
        started = loop.time()
        while True:
            cancellation.checkpoint()
            try:
                published = await self.ctx.published()
                if published != known or loop.time() - since >= DISCOVERY_PERIOD:
                    await self.sync_monitors(published)
                    known, since = published, loop.time()
                if not self.ready.is_set():
                    self._ready_once_followed(loop.time() - started)
            except Exception as exc:
                SYNC_ERRORS.inc()
                log.warning("garbage collector resources sync failed", extra={"error": repr(exc)})
            await asyncio.sleep(PUBLISHED_POLL)

    def _ready_once_followed(self, waited: float) -> None:
        """Ready (and so caught up, then given partitions) once every deletable resource is
        followed: an owner waiting for its dependents must not lose its finalizer because their
        kind was not on the bus yet. As upstream's initial sync, the wait is bounded."""
        if not self.unpublished:
            log.info("garbage collector: all resource monitors have synced")
        elif waited >= INITIAL_SYNC_TIMEOUT:
            log.warning(
                "garbage collector: not all resource monitors could be synced, proceeding anyway",
                extra={"unpublished": sorted(map(str, self.unpublished))},
            )
        else:
            if self.unpublished != self._reported:
                log.info(
                    "garbage collector waits for the watcher to publish resources",
                    extra={"unpublished": sorted(map(str, self.unpublished))},
                )
                self._reported = set(self.unpublished)
            return
        self.ready.set()

    async def sync_monitors(self, published: set[gvr.Resource]) -> None:
        self.mapper = await discovery.discover(self.client)
        deletable = {
            api.resource
            for api in self.mapper.preferred_with(NEEDED_VERBS)
            if (api.resource.group, api.resource.resource) not in IGNORED
        }
        wanted = deletable & published
        self.unpublished = deletable - published
        for res in sorted(wanted - self.monitors, key=str):
            self._monitor(res)
        for res in sorted(self.monitors - wanted, key=str):
            if res.group in self.mapper.failed_groups:
                continue  # unreadable discovery this time is no proof the resource is gone
            log.info("resource no longer followed", extra={"resource": str(res)})
            self.monitors.discard(res)
            self.ctx.close_cache(res)
        if self.mapper.failed_groups:
            SYNC_ERRORS.inc()
            log.warning(
                "discovery failed for some groups", extra={"groups": sorted(self.mapper.failed_groups)}
            )

    def _monitor(self, res: gvr.Resource) -> None:
        api = self.mapper.get(res)
        assert api is not None
        log.info("following resource", extra={"resource": str(res)})
        self.monitors.add(res)
        store = self.ctx.open_cache(res, codec.Meta)
        version, kind = discovery.api_version(res), api.kind

        def identity(obj: codec.Meta) -> graph.Identity:
            m = obj.metadata
            return graph.Identity(version, kind, m.name, m.uid, m.namespace)

        def apply(change: Callable[[], graph.Effects]) -> None:
            if res not in self.monitors:
                return  # a shared cache we stopped following: neither graph nor queue change
            fx = change()
            for uid in fx.to_delete:
                self.ctx.enqueue(work_key(DELETE, uid))
            for uid in fx.to_orphan:
                self.ctx.enqueue(work_key(ORPHAN, uid))

        store.add_handler(
            on_add=lambda obj: apply(lambda: self.graph.observe(identity(obj), obj.metadata)),
            on_update=lambda old, new: apply(
                lambda: self.graph.observe(identity(new), new.metadata, old.metadata)
            ),
            on_delete=lambda obj: apply(lambda: self.graph.observe_delete(identity(obj))),
        )

    def keys(self) -> list[str]:
        return [work_key(queue, uid) for queue, uid in self.graph.resync()]

    # --- the work queue --------------------------------------------------------------------

    async def reconcile(self, key: str) -> runtime.Result | None:
        queue, _, uid = key.partition("/")
        node = self.graph.get(uid)
        if node is None:
            return None  # gone from the graph: nothing left to do for it
        try:
            if queue == ORPHAN:
                await self._attempt_to_orphan(node)
                return None
            return await self._attempt_to_delete(node)
        except discovery.MappingError as exc:
            # A kind discovery does not list (yet): a CRD may be on its way; retry after discovery.
            log.error("error syncing item", extra={"item": str(node.identity), "error": str(exc)})
            return runtime.Result(requeue_after=DISCOVERY_PERIOD)

    async def _hand_off(self, fx: graph.Effects) -> None:
        await self._hand_off_keys(
            [work_key(DELETE, uid) for uid in fx.to_delete] + [work_key(ORPHAN, uid) for uid in fx.to_orphan]
        )

    async def _hand_off_keys(self, keys: list[str]) -> None:
        """Enqueue `keys` durably, a window at a time: one JetStream ack per key in turn made
        a foreground deletion of thousands of dependents crawl."""
        for start in range(0, len(keys), HAND_OFF_WINDOW):
            await asyncio.gather(*(self.ctx.hand_off(key) for key in keys[start : start + HAND_OFF_WINDOW]))

    def _report_invalid_namespace(self, node: graph.Node) -> None:
        for ref in node.invalid_namespace_refs:
            owner = graph.of_reference(ref, node.identity.namespace)
            self.ctx.recorder.event(
                {
                    "kind": node.identity.kind,
                    "apiVersion": node.identity.api_version,
                    "namespace": node.identity.namespace,
                    "name": node.identity.name,
                    "uid": node.uid,
                },
                "Warning",
                "OwnerRefInvalidNamespace",
                f'ownerRef {owner} does not exist in namespace "{node.identity.namespace}"',
            )
        node.invalid_namespace_refs.clear()

    async def _attempt_to_delete(self, node: graph.Node) -> runtime.Result | None:
        if node.being_deleted and not node.deleting_dependents:
            return None  # a one-way trip: its dependents are handled once it is gone
        self._report_invalid_namespace(node)
        latest = await self._get(node.identity)
        if latest is None:
            await self._hand_off(self.graph.virtual_delete(node.identity))
            return None
        if node.deleting_dependents:
            await self._process_deleting_dependents(node)
        elif latest.metadata.owner_references:
            try:
                await self._collect(node, latest)
            except _NamespacedOwnerOfClusterScoped:
                log.info(
                    "item is cluster-scoped, but refers to a namespaced owner",
                    extra={"item": str(node.identity)},
                )
                return None
        if node.virtual:
            # It exists but no cache showed it yet: look again until one does (upstream requeues).
            return runtime.Result(requeue_after=VIRTUAL_RECHECK)
        return None

    async def _collect(self, node: graph.Node, latest: Live) -> None:
        refs = latest.metadata.owner_references
        found = await self._classify(node, refs)
        if found.solid:
            stale = {ref.uid for ref in found.dangling + found.waiting}
            if stale:
                log.info(
                    "remove dangling references and waiting references for item",
                    extra={"item": str(node.identity), "owners": sorted(stale)},
                )
                await self._patch_owner_references(
                    node.identity, lambda r: [x for x in r if x.uid not in stale]
                )
            return
        if found.waiting and node.dependents:
            if any(dep.deleting_dependents for dep in self.graph.dependents(node)):
                # Owner and dependent both wait for dependents: unblock to avoid a cycle.
                await self._patch_owner_references(node.identity, _unblocked)
            await self._delete(node.identity, latest, "Foreground")
            return
        meta = latest.metadata
        if graph.ORPHAN in meta.finalizers:
            policy = "Orphan"
        elif graph.FOREGROUND in meta.finalizers:
            policy = "Foreground"
        else:
            policy = "Background"
        await self._delete(node.identity, latest, policy)

    async def _classify(self, node: graph.Node, refs: list[codec.OwnerReference]) -> _Classified:
        out = _Classified([], [], [])
        for ref in refs:
            owner = await self._owner(node, ref)
            if owner is None:
                out.dangling.append(ref)
            elif (
                owner.metadata.deletion_timestamp is not None
                and graph.FOREGROUND in owner.metadata.finalizers
            ):
                out.waiting.append(ref)
            else:
                out.solid.append(ref)
        return out

    async def _owner(self, node: graph.Node, ref: codec.OwnerReference) -> Live | None:
        """The live owner `ref` names, or None when it is absent (upstream isDangling)."""
        absent = graph.of_reference(ref, "")
        if self.graph.known_absent(absent) or self.graph.known_absent(
            graph.of_reference(ref, node.identity.namespace)
        ):
            return None
        api = self.mapper.for_kind(ref.api_version, ref.kind)
        if api.namespaced and not node.identity.namespace:
            raise _NamespacedOwnerOfClusterScoped(str(node.identity))
        namespace = node.identity.namespace if api.namespaced else ""
        owner = await self._get_path(api, namespace, ref.name)
        if owner is None or owner.metadata.uid != ref.uid:
            self.graph.mark_absent(graph.of_reference(ref, namespace))
            return None
        return owner

    async def _process_deleting_dependents(self, node: graph.Node) -> None:
        blocking = self.graph.blocking_dependents(node)
        if not blocking:
            log.info("remove DeleteDependents finalizer for item", extra={"item": str(node.identity)})
            await self._remove_finalizer(node.identity, graph.FOREGROUND)
            return
        # A dependent already being deleted (and not itself waiting for dependents) is a no-op
        # for attemptToDelete; its disappearance brings this owner back.
        await self._hand_off_keys([work_key(DELETE, dep.uid) for dep in blocking if not dep.being_deleted])

    async def _attempt_to_orphan(self, owner: graph.Node) -> None:
        if not owner.orphaning:
            return  # the finalizer is gone already (a repeated or resynced key)
        room = asyncio.Semaphore(ORPHAN_CONCURRENCY)

        async def orphan(dep: graph.Node) -> None:
            async with room:
                await self._drop_owner_reference(dep.identity, owner.uid)

        results = await asyncio.gather(
            *(orphan(dep) for dep in self.graph.dependents(owner)), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result  # the key is retried; dependents already orphaned are no-ops then
        await self._remove_finalizer(owner.identity, graph.ORPHAN)

    async def _drop_owner_reference(self, identity: graph.Identity, owner_uid: str) -> None:
        """One strategic merge patch deleting the reference by uid, with the dependent's uid as
        a guard against a re-created namesake (upstream orphanDependents); kinds without
        strategic merge (custom resources) get a merge patch on a fresh read instead."""
        api = self.mapper.for_kind(identity.api_version, identity.kind)
        path = self._path(api, _namespace(api, identity), identity.name)
        body = {
            "metadata": {"uid": identity.uid, "ownerReferences": [{"$patch": "delete", "uid": owner_uid}]}
        }
        try:
            await self.client.patch(path, body, "strategic")
        except kubeclient.ApiError as exc:
            if exc.not_found:
                return
            if exc.code != 415:
                raise
            await self._patch_owner_references(identity, lambda refs: [r for r in refs if r.uid != owner_uid])

    # --- API operations (upstream operations.go) -------------------------------------------

    def _path(self, api: discovery.ApiResource, namespace: str, name: str) -> str:
        res = api.resource
        return kubeclient.resource_path(res.group, res.version, res.resource, namespace or None, name)

    async def _get_path(self, api: discovery.ApiResource, namespace: str, name: str) -> Live | None:
        try:
            raw = await self.client.request_bytes("GET", self._path(api, namespace, name))
        except kubeclient.ApiError as exc:
            if exc.not_found:
                return None
            raise
        return codec.decode(raw, Live)

    async def _get(self, identity: graph.Identity) -> Live | None:
        """The live object with this identity; None when absent or replaced (another uid)."""
        api = self.mapper.for_kind(identity.api_version, identity.kind)
        latest = await self._get_path(api, _namespace(api, identity), identity.name)
        if latest is None or latest.metadata.uid != identity.uid:
            return None
        return latest

    async def _delete(self, identity: graph.Identity, latest: Live, policy: str) -> None:
        log.info("deleting item", extra={"item": str(identity), "propagationPolicy": policy})
        api = self.mapper.for_kind(identity.api_version, identity.kind)
        path = self._path(api, _namespace(api, identity), identity.name)
        options = _delete_options(policy, identity.uid, latest.metadata.resource_version)
        try:
            try:
                await self.client.delete(path, options)
            except kubeclient.ApiError as exc:
                if exc.code != 409 or not latest.metadata.resource_version:
                    raise
                # Changed since it was read (upstream deleteObject): gone is done; with the same
                # owner references the decision stands, so delete without the version.
                now = await self._get(identity)
                if now is None:
                    return
                if now.metadata.owner_references != latest.metadata.owner_references:
                    raise
                await self.client.delete(path, _delete_options(policy, identity.uid, ""))
        except kubeclient.ApiError as exc:
            if not exc.not_found:
                raise
            await self._hand_off(self.graph.virtual_delete(identity))

    async def _update_metadata(self, identity: graph.Identity, change: Any) -> None:
        """Read the object, let `change(meta)` return the metadata fields to write (or None), and
        write them with a merge patch that carries the resourceVersion read: a concurrent change
        makes it conflict, and the whole step is retried on fresh state."""
        api = self.mapper.for_kind(identity.api_version, identity.kind)
        namespace = _namespace(api, identity)
        path = self._path(api, namespace, identity.name)

        async def attempt() -> None:
            latest = await self._get_path(api, namespace, identity.name)
            if latest is None or latest.metadata.uid != identity.uid:
                return  # gone: nothing to change
            fields = change(latest.metadata)
            if fields is None:
                return
            patch = {"metadata": {**fields, "resourceVersion": latest.metadata.resource_version}}
            try:
                await self.client.patch(path, patch, "merge")
            except kubeclient.ApiError as exc:
                if not exc.not_found:
                    raise

        await kubeclient.retry_on_conflict(attempt)

    async def _patch_owner_references(self, identity: graph.Identity, keep: Any) -> None:
        def change(meta: codec.ObjectMeta) -> dict[str, Any] | None:
            refs = keep(meta.owner_references)
            if refs == meta.owner_references:
                return None
            return {"ownerReferences": msgspec.to_builtins(refs)}

        await self._update_metadata(identity, change)

    async def _remove_finalizer(self, identity: graph.Identity, finalizer: str) -> None:
        def change(meta: codec.ObjectMeta) -> dict[str, Any] | None:
            if finalizer not in meta.finalizers:
                return None
            return {"finalizers": [f for f in meta.finalizers if f != finalizer]}

        await self._update_metadata(identity, change)


def _namespace(api: discovery.ApiResource, identity: graph.Identity) -> str:
    """Where to find the object: a cluster-scoped kind has no namespace, whatever a dependent's
    reference implied (upstream resourceDefaultNamespace)."""
    return identity.namespace if api.namespaced else ""


def _unblocked(refs: list[codec.OwnerReference]) -> list[codec.OwnerReference]:
    return [
        msgspec.structs.replace(r, block_owner_deletion=False) if r.block_owner_deletion else r for r in refs
    ]


def build(ctx: runtime.Context) -> runtime.Reconcile:
    gc = GarbageCollector(ctx)
    ctx.keys = gc.keys
    ctx.add_task(gc.run(), ready=gc.ready)
    ctx.serve_debug("graph", dump.handler(gc.graph))
    return gc.reconcile


def flags(p: runtime.FlagSet) -> None:
    pflag.add_bool(
        p,
        "--enable-garbage-collector",
        default=True,
        help="enables the generic garbage collector (must match kube-apiserver's flag of that name)",
    )


def disabled_by(args: argparse.Namespace) -> str | None:
    # Upstream's start function declines to start it, and the controller manager runs on.
    return None if getattr(args, "enable_garbage_collector", True) else "--enable-garbage-collector=false"


SPEC = runtime.Spec(
    name="garbage-collector-controller",
    alias="garbagecollector",
    queue_name="garbage_collector_attempt_to_delete",
    primary=None,
    views={},
    build=build,
    workers=20,
    workers_flag="concurrent-gc-syncs",
    flags=flags,
    disabled_by=disabled_by,
    package=__package__,
    debug_handlers=("graph",),
)
