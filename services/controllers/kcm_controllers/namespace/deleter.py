"""Deletes everything in a terminating namespace, then removes the `kubernetes` finalizer.

Upstream pkg/controller/namespace/deletion/namespaced_resources_deleter.go, on our API client
(`ctx.client`: every write fenced). `Deleter.delete(name)`:

1. read the namespace live; nothing to do when it is gone or not being deleted;
2. set `status.phase: Terminating` (status subresource) if it is not yet;
3. nothing more when `spec.finalizers` is empty (finalized already);
4. delete its content: discovery (`kcm_shared.client.discovery`, upstream's
   ServerPreferredNamespacedResources, custom resources included) lists the namespaced
   resources with the `delete` verb; for each, `deletecollection` with propagationPolicy
   Background where the verb is listed (else list and delete each item), then a list of
   what remains; pods contribute the longest grace period of those not finished as an
   estimate while the namespace has been terminating for less than that; remaining items
   with finalizers count per finalizer and make an estimate of 15 s; remaining items
   without either are an error. With the OrderedNamespaceDeletion gate on (`ordered`), pods
   go first, alone: while any remain, nothing else is deleted this round and the conditions
   carry no content totals, as upstream's early return;
5. write the five deletion conditions (`conditions`) to the status when they changed (a
   failed write is logged, as upstream);
6. raise the errors of step 4 together (the runtime retries with backoff), or
   `ResourcesRemaining(estimate)` while content remains, else
7. `PUT namespaces/<name>/finalize` without the `kubernetes` finalizer; the API server
   removes the namespace once no finalizer is left.

Writes of steps 2 and 7 re-read the namespace and try again on 409 Conflict, for as long as
it conflicts, and stop when its uid changed. Called by `kcm_controllers.namespace.controller`.
"""

from __future__ import annotations

import asyncio
import collections
import copy
import datetime as dt
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
from kcm_shared.apimachinery import codec, gvr
from kcm_shared.client import discovery, kubeclient

from kcm_controllers.namespace import conditions

log = logging.getLogger("kcm.namespace")

FINALIZER = "kubernetes"  # upstream's finalizerToken, v1.FinalizerKubernetes
TERMINATING = "Terminating"
PODS = gvr.Resource("", "v1", "pods")
NAMESPACES = gvr.Resource("", "v1", "namespaces")
CONCURRENCY = 8  # resources emptied at once (upstream: one after another)
_BACKGROUND = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}

Obj = dict[str, Any]
Discover = Callable[[kubeclient.KubeClient], Awaitable[discovery.Mapper]]


class ResourcesRemaining(Exception):
    """Content is still there; look again after `conditions.requeue_seconds(estimate)`."""

    def __init__(self, estimate: int) -> None:
        super().__init__(
            f"some content remains in the namespace, estimate {estimate} seconds before it is removed"
        )
        self.estimate = estimate


class DeletionError(Exception):
    """Some content could not be deleted this round (upstream's aggregated errors)."""


class _PodSpec(msgspec.Struct, rename="camel"):
    termination_grace_period_seconds: int | None = None


class _PodStatus(msgspec.Struct):
    phase: str = ""


class _Pod(msgspec.Struct):
    spec: _PodSpec = msgspec.field(default_factory=_PodSpec)
    status: _PodStatus = msgspec.field(default_factory=_PodStatus)


class _Pods(msgspec.Struct):
    items: list[_Pod] = msgspec.field(default_factory=list)


class _Items(msgspec.Struct):
    items: list[codec.Meta] = msgspec.field(default_factory=list)


@dataclass
class _Outcome:
    """What emptying one resource left (upstream gvrDeletionMetadata, plus its error)."""

    estimate: int = 0
    remaining: int = 0
    finalizers: collections.Counter[str] = field(default_factory=collections.Counter)
    error: str = ""


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _rfc3339(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


class Deleter:
    """The API client, discovery and clock are injected (tests use fakes)."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        *,
        discover: Discover = discovery.discover,
        now: Callable[[], dt.datetime] = _utcnow,
        finalizer: str = FINALIZER,
        ordered: bool = False,
    ) -> None:
        """`ordered`: the OrderedNamespaceDeletion gate (off by default in v1.32)."""
        self.client = client
        self.discover = discover
        self.now = now
        self.finalizer = finalizer
        self.ordered = ordered

    def _ns_path(self, name: str, subresource: str | None = None) -> str:
        return kubeclient.resource_path("", "v1", "namespaces", None, name, subresource)

    async def _get(self, name: str) -> Obj | None:
        try:
            return await self.client.get(self._ns_path(name))
        except kubeclient.ApiError as exc:
            if exc.not_found:
                return None
            raise

    async def delete(self, name: str) -> None:
        """One round; raises ResourcesRemaining or DeletionError while the work is not done."""
        namespace = await self._get(name)
        if namespace is None or not namespace["metadata"].get("deletionTimestamp"):
            return
        namespace = await self._retry_on_conflict(namespace, self._mark_terminating)
        if namespace is None or not namespace["metadata"].get("deletionTimestamp"):
            return  # gone, or (the latest view says) no longer being deleted
        if not (namespace.get("spec") or {}).get("finalizers"):
            return  # finalized already
        estimate = await self._delete_all_content(namespace)
        if estimate > 0:
            raise ResourcesRemaining(estimate)
        await self._retry_on_conflict(namespace, self._finalize)

    async def _retry_on_conflict(self, namespace: Obj, write: Callable[[Obj], Awaitable[Obj]]) -> Obj | None:
        """`write(namespace)`, re-read and tried again for as long as it conflicts, as upstream's
        retryOnConflictError (no limit: a namespace others keep updating is still finalized);
        None once it is gone."""
        latest = namespace
        try:
            while True:
                try:
                    return await write(latest)
                except kubeclient.ApiError as exc:
                    if not exc.conflict:
                        raise
                fresh = await self.client.get(self._ns_path(latest["metadata"]["name"]))
                if fresh["metadata"].get("uid") != latest["metadata"].get("uid"):
                    raise DeletionError("namespace uid has changed across retries")
                latest = fresh
        except kubeclient.ApiError as exc:
            if exc.not_found:
                return None
            raise

    async def _mark_terminating(self, namespace: Obj) -> Obj:
        if (namespace.get("status") or {}).get("phase") == TERMINATING:
            return namespace
        updated = copy.deepcopy(namespace)
        updated.setdefault("status", {})["phase"] = TERMINATING
        return await self.client.update(self._ns_path(updated["metadata"]["name"], "status"), updated)

    async def _finalize(self, namespace: Obj) -> Obj:
        updated = copy.deepcopy(namespace)
        spec = updated.setdefault("spec", {})
        spec["finalizers"] = sorted({f for f in spec.get("finalizers") or [] if f != self.finalizer})
        return await self.client.update(self._ns_path(updated["metadata"]["name"], "finalize"), updated)

    # --- content ---------------------------------------------------------------------------

    async def _delete_all_content(self, namespace: Obj) -> int:
        """Empty every deletable resource of the namespace once; the estimate of seconds left.

        Raises DeletionError after writing the conditions when anything failed."""
        name = namespace["metadata"]["name"]
        deleted_at = _parse_time(namespace["metadata"]["deletionTimestamp"])
        errors: list[str] = []
        found: list[conditions.Condition] = []
        apis: list[discovery.ApiResource] = []
        try:
            mapper = await self.discover(self.client)
        except kubeclient.REQUEST_ERRORS as exc:
            # Not fatal upstream either: what could be discovered is still deleted.
            errors.append(discovery.error_text(exc))
            found.append(conditions.discovery_failure(errors[-1]))
        else:
            if mapper.failures:
                errors.append(conditions.group_discovery_error(mapper.failures))
                found.append(conditions.discovery_failure(errors[-1], mapper.failures))
            apis = [r for r in mapper.server_preferred() if r.namespaced and "delete" in r.verbs]
        try:
            for api in apis:
                conditions.parse_group_version(discovery.api_version(api.resource))
        except ValueError as exc:
            # Upstream's GroupVersionResources gives up on the whole list at the first bad one.
            errors.append(str(exc))
            found.append(conditions.group_version_failure(str(exc)))
            apis = []

        estimate = 0
        remaining: dict[gvr.Resource, int] = {}
        finalizers: collections.Counter[str] = collections.Counter()
        content_errors: list[str] = []

        def take(api: discovery.ApiResource, outcome: _Outcome) -> None:
            nonlocal estimate
            if outcome.error:
                content_errors.append(outcome.error)
            estimate = max(estimate, outcome.estimate)
            if outcome.remaining:
                remaining[api.resource] = outcome.remaining
                finalizers.update(outcome.finalizers)

        pods = [api for api in apis if api.resource == PODS] if self.ordered else []
        if pods:
            apis = [api for api in apis if api.resource != PODS]
            outcome = await self._delete_resource(pods[0], name, deleted_at)
            take(pods[0], outcome)
            if outcome.error:
                errors.append(f"failed to delete pods for namespace: {name}, err: {outcome.error}")
            if outcome.remaining:
                # As upstream's early return: no content totals among the conditions.
                return await self._conclude(namespace, found, errors, content_errors, estimate)
        room = asyncio.Semaphore(CONCURRENCY)

        async def empty(api: discovery.ApiResource) -> _Outcome:
            async with room:
                return await self._delete_resource(api, name, deleted_at)

        outcomes = await asyncio.gather(*(empty(api) for api in apis))
        for api, outcome in zip(apis, outcomes, strict=True):
            take(api, outcome)
            if outcome.error:
                errors.append(outcome.error)
        found += conditions.content_totals(remaining, finalizers)
        return await self._conclude(namespace, found, errors, content_errors, estimate)

    async def _conclude(
        self,
        namespace: Obj,
        found: list[conditions.Condition],
        errors: list[str],
        content_errors: list[str],
        estimate: int,
    ) -> int:
        """Write the conditions; raise the errors together, else return the estimate."""
        failure = conditions.content_failure(content_errors)
        if failure is not None:
            found.append(failure)
        await self._write_conditions(namespace, found)
        if errors:
            raise DeletionError(conditions.aggregate(errors))
        return estimate

    async def _write_conditions(self, namespace: Obj, found: list[conditions.Condition]) -> None:
        status = namespace.setdefault("status", {})
        merged, changed = conditions.update_conditions(
            status.get("conditions") or [], found, _rfc3339(self.now())
        )
        if not changed:
            return
        status["conditions"] = merged
        try:
            written = await self.client.update(
                self._ns_path(namespace["metadata"]["name"], "status"), namespace
            )
        except kubeclient.ApiError as exc:
            log.warning(
                "couldn't update status condition for namespace",
                extra={"namespace": namespace["metadata"]["name"], "error": str(exc)},
            )
            return
        # The finalize that may follow needs the resourceVersion this write made.
        namespace["metadata"]["resourceVersion"] = written["metadata"]["resourceVersion"]

    async def _delete_resource(
        self, api: discovery.ApiResource, namespace: str, deleted_at: dt.datetime
    ) -> _Outcome:
        """Empty one resource in the namespace (upstream deleteAllContentForGroupVersionResource)."""
        res = api.resource
        path = kubeclient.resource_path(res.group, res.version, res.resource, namespace)
        outcome = _Outcome()
        try:
            if res == PODS:
                pods = await self._pods(path)
                outcome.estimate = conditions.effective_estimate(
                    conditions.pods_estimate(pods), deleted_at, self.now()
                )
            if not await self._delete_collection(api, path):
                await self._delete_each(api, path)
            items = await self._list(api, path)
        except kubeclient.REQUEST_ERRORS as exc:
            outcome.error = discovery.error_text(exc)
            return outcome
        if items is None:
            return outcome  # cannot be listed: nothing more to learn
        if not items:
            return _Outcome()
        outcome.remaining = len(items)
        outcome.finalizers.update(f for item in items for f in item.metadata.finalizers)
        if outcome.estimate:
            return outcome
        if outcome.finalizers:
            outcome.estimate = conditions.FINALIZER_ESTIMATE_SECONDS
            return outcome
        outcome.error = (
            f"unexpected items still remain in namespace: {namespace} for gvr: {conditions.gvr_string(res)}"
        )
        return outcome

    async def _pods(self, path: str) -> list[conditions.PodGrace]:
        raw = await self.client.request_bytes("GET", path)
        pods = msgspec.json.decode(raw, type=_Pods).items
        return [conditions.PodGrace(p.status.phase, p.spec.termination_grace_period_seconds) for p in pods]

    async def _delete_collection(self, api: discovery.ApiResource, path: str) -> bool:
        """Whether the resource takes deletecollection (then it was sent)."""
        if "deletecollection" not in api.verbs:
            return False
        try:
            await self.client.request_bytes("DELETE", path, body=_BACKGROUND)
        except kubeclient.ApiError as exc:
            # A resource discovery lists may still refuse the collection: 405, or 404 for
            # one with no top-level verbs (upstream's special case).
            if exc.code in (404, 405):
                return False
            raise
        return True

    async def _list(self, api: discovery.ApiResource, path: str) -> list[codec.Meta] | None:
        """The items left; None when the resource cannot be listed."""
        if "list" not in api.verbs:
            return None
        try:
            raw = await self.client.request_bytes("GET", path)
        except kubeclient.ApiError as exc:
            if exc.code in (404, 405):
                return None
            raise
        return msgspec.json.decode(raw, type=_Items).items

    async def _delete_each(self, api: discovery.ApiResource, path: str) -> None:
        items = await self._list(api, path)
        for item in items or []:
            try:
                await self.client.delete(f"{path}/{kubeclient.segment(item.metadata.name)}", _BACKGROUND)
            except kubeclient.ApiError as exc:
                if exc.code not in (404, 405):
                    raise
