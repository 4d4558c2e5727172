"""The DaemonSet's rolling update and its ControllerRevision history (upstream
pkg/controller/daemon/update.go).

`rolling_update_plan` is rollingUpdate's decision, pure: given the nodes' daemon pods, which
old pods to delete (maxSurge 0: at most maxUnavailable pods unavailable at once) or on which
nodes to create a new pod beside the old one (maxSurge > 0: at most maxSurge such surges,
the old pod deleted once the new one is available). The controller then runs the plan
through its syncNodes.

`History` keeps the revisions: `construct` claims the DaemonSet's ControllerRevisions
(adopting orphans that match its selector), labels those without the hash label, splits the
current one (same template) from the old ones, creates the current one when there is none
(`<ds>-<hash>`, with upstream's collision handling: a name taken by other data bumps
`status.collisionCount` and fails the sync, which retries with the new name), merges
duplicates, and renumbers the current one past the old ones; `cleanup` deletes the oldest
old revisions beyond `revisionHistoryLimit` that no live pod still runs. The revision's data is
upstream's getPatch: `{"spec":{"template":{...,"$patch":"replace"}}}`, what `kubectl rollout
undo` patches back. Revision helpers (names, hashes, sorting, renumbering, adoption) are
kcm_shared.controllerutil.history's.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
from kcm_shared.apimachinery import codec, selectors
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import controllerref, history, podranking
from kcm_shared.runtime import cache

from kcm_controllers.daemonset import util, views

log = logging.getLogger("kcm.daemonset")

API_VERSION = "apps/v1"
KIND = "DaemonSet"
DAEMONSETS_PATH = ("apps", "v1", "daemonsets")


# --- rolling update ------------------------------------------------------------------------


def find_updated_pods_on_node(
    pods: Sequence[views.DaemonPodView], hash_: str
) -> tuple[views.DaemonPodView | None, views.DaemonPodView | None, bool]:
    """(new pod, old pod, ok) among the node's pods not being deleted; not ok when there are
    two of either kind, which the manage step prunes first (findUpdatedPodsOnNode)."""
    new = old = None
    for pod in pods:
        if pod.metadata.deletion_timestamp is not None:
            continue
        if util.is_pod_updated(pod.metadata.labels, hash_):
            if new is not None:
                return None, None, False
            new = pod
        else:
            if old is not None:
                return None, None, False
            old = pod
    return new, old, True


# A node's (shouldRun, shouldContinueRunning) for the DaemonSet being synced.
Placement = Callable[[views.NodeView], tuple[bool, bool]]


@dataclass(frozen=True)
class Counts:
    max_surge: int
    max_unavailable: int
    desired: int


def desired_counts(
    ds: views.DaemonSetView,
    nodes: Sequence[views.NodeView],
    placement: Placement,
    node_to_pods: dict[str, list[views.DaemonPodView]],
) -> Counts:
    """maxSurge, maxUnavailable and desiredNumberScheduled; every node that should run a pod
    gets an entry in `node_to_pods` (updatedDesiredNodeCounts). Raises ValueError for a
    malformed percentage. Neither surge nor unavailability allowed would never progress:
    unavailability 1 then, as upstream."""
    desired = 0
    for node in nodes:
        if placement(node)[0]:
            desired += 1
            node_to_pods.setdefault(node.metadata.name, [])
    try:
        max_unavailable = util.unavailable_count(ds, desired)
    except ValueError as exc:
        raise ValueError(f"invalid value for MaxUnavailable: {exc}") from None
    try:
        max_surge = util.surge_count(ds, desired)
    except ValueError as exc:
        raise ValueError(f"invalid value for MaxSurge: {exc}") from None
    if desired > 0 and max_unavailable == 0 and max_surge == 0:
        max_unavailable = 1
    return Counts(max_surge, max_unavailable, desired)


def rolling_update_plan(
    ds: views.DaemonSetView,
    node_to_pods: dict[str, list[views.DaemonPodView]],
    counts: Counts,
    hash_: str,
    should_run: Callable[[str], bool],
    now: dt.datetime,
) -> tuple[list[str], list[str]]:
    """(pods to delete, nodes to create a pod on) for one rolling-update step (rollingUpdate).

    `node_to_pods` comes from `desired_counts` (every node that should run a pod present);
    `should_run(node)` is the node's shouldRun now (False for a node that is gone)."""
    min_ready = ds.spec.min_ready_seconds

    def available(pod: views.DaemonPodView) -> bool:
        return podranking.is_pod_available(pod, min_ready, now)

    if counts.max_surge == 0:
        unavailable = 0
        replacements: list[str] = []
        candidates: list[str] = []
        for pods in node_to_pods.values():
            new, old, ok = find_updated_pods_on_node(pods, hash_)
            if not ok or (old is None) == (new is None):
                # Excess pods (the manage step prunes them), or nothing / both there: the
                # manage step creates or deletes; either way the node counts as unavailable.
                unavailable += 1
            elif new is not None:
                if not available(new):
                    unavailable += 1
            elif old is not None:
                if not available(old):
                    replacements.append(old.metadata.name)
                    unavailable += 1
                elif unavailable < counts.max_unavailable:
                    candidates.append(old.metadata.name)
        remaining = min(max(counts.max_unavailable - unavailable, 0), len(candidates))
        return replacements + candidates[:remaining], []

    to_delete: list[str] = []
    should_not_run: list[str] = []
    candidate_nodes: list[str] = []
    allowed_nodes: list[str] = []
    surge = 0
    num_available = 0
    for node, pods in node_to_pods.items():
        new, old, ok = find_updated_pods_on_node(pods, hash_)
        if not ok:
            surge += 1
            continue
        if old is not None:
            num_available += available(old)
        elif new is not None:
            num_available += available(new)
        if old is None:
            continue  # nothing old here: the manage step makes sure a new pod exists
        if new is None:
            if not available(old):
                if not should_run(node):
                    to_delete.append(old.metadata.name)
                else:
                    allowed_nodes.append(node)
            elif not should_run(node):
                should_not_run.append(old.metadata.name)
            elif surge < counts.max_surge:
                candidate_nodes.append(node)
            continue
        if not available(new):
            surge += 1  # waiting for the new pod to be available
            continue
        to_delete.append(old.metadata.name)
    # With surge the owner expects full availability: a pod on a node that left the
    # selection goes only once as many pods are available elsewhere as are desired.
    deletable = min(num_available - counts.desired, len(should_not_run))
    if deletable > 0:
        to_delete += should_not_run[:deletable]
    remaining = min(max(counts.max_surge - surge, 0), len(candidate_nodes))
    return to_delete, allowed_nodes + candidate_nodes[:remaining]


# --- history -------------------------------------------------------------------------------


def go_json(value: Any) -> bytes:
    """JSON as Go's encoding/json writes a map: keys sorted, no spaces, <, > and & escaped."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escaped)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").encode()


def go_template(template: Mapping[str, Any]) -> dict[str, Any]:
    """The template as Go's typed round trip writes it: `metadata.creationTimestamp: null`
    and every container's `resources: {}` are there even when empty (fields without
    omitempty). kubectl compares a revision's data byte for byte with its own encoding of the
    DaemonSet (`rollout undo` says "skipped rollback" for the current one), so they must be."""
    out = dict(template)
    out["metadata"] = {"creationTimestamp": None, **(template.get("metadata") or {})}
    spec = dict(template.get("spec") or {})
    for field in ("initContainers", "containers", "ephemeralContainers"):
        if isinstance(spec.get(field), list):
            spec[field] = [{"resources": {}, **c} if isinstance(c, dict) else c for c in spec[field]]
    out["spec"] = spec
    return out


def revision_data(template: Mapping[str, Any]) -> bytes:
    """The revision's data (getPatch): a strategic merge patch replacing spec.template."""
    return go_json({"spec": {"template": {**go_template(template), "$patch": "replace"}}})


def template_hash(template: Mapping[str, Any], collision_count: int | None) -> str:
    """The revision hash of a template (ComputeHash's place in snapshot), in upstream's format."""
    return history.hash_revision(go_json(go_template(template)), collision_count)


class StaleCollisionCount(Exception):
    """The collision count the hash was computed with is out of date; the sync retries."""


class History:
    """The revisions of DaemonSets: one per process, over the revisions cache."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        revisions: cache.Cache[history.ControllerRevisionView],
    ) -> None:
        self.client = client
        self.revisions = revisions

    def _ds_path(self, ds: views.DaemonSetView) -> str:
        return kubeclient.resource_path(*DAEMONSETS_PATH, ds.metadata.namespace, ds.metadata.name)

    def _path(self, namespace: str, name: str | None = None) -> str:
        res = history.CONTROLLER_REVISIONS
        return kubeclient.resource_path(res.group, res.version, res.resource, namespace, name)

    async def controlled(
        self, ds: views.DaemonSetView, selector: selectors.LabelSelector
    ) -> list[history.ControllerRevisionView]:
        """The DaemonSet's revisions, orphans matching its selector adopted (controlledHistories)."""
        return await controllerref.claim(
            self.client,
            ds,
            API_VERSION,
            KIND,
            selector,
            self.revisions.list(ds.metadata.namespace),
            history.CONTROLLER_REVISIONS,
            controllerref.recheck(self.client, self._ds_path(ds), ds.metadata.uid),
        )

    async def construct(
        self,
        ds: views.DaemonSetView,
        selector: selectors.LabelSelector,
        template: Mapping[str, Any],
        relabel: Callable[[str], Any],
    ) -> tuple[str, list[history.ControllerRevisionView]]:
        """(current revision's hash, old revisions) (constructHistory). `relabel(hash)` moves
        the pods of a merged duplicate onto the kept revision's hash."""
        data = revision_data(template)
        current: list[history.ControllerRevisionView] = []
        old: list[history.ControllerRevisionView] = []
        for rev in await self.controlled(ds, selector):
            if util.REVISION_HASH_LABEL not in rev.metadata.labels:
                # The name stands in for the hash: no collision can come of it.
                patch = {"metadata": {"labels": {util.REVISION_HASH_LABEL: rev.metadata.name}}}
                fresh = await self.client.patch(self._path(rev.metadata.namespace, rev.metadata.name), patch)
                rev = codec.decode(msgspec.json.encode(fresh), history.ControllerRevisionView)
            if history.same_data(bytes(rev.data), data):
                current.append(rev)
            else:
                old.append(rev)
        next_number = history.next_revision(old)
        if not current:
            hash_ = await self.snapshot(ds, template, data, next_number)
            return hash_, old
        keep = await self.dedup(current, relabel)
        if keep.revision < next_number:
            await history.update_revision(self.client, keep, next_number)
        return keep.metadata.labels[util.REVISION_HASH_LABEL], old

    async def dedup(
        self, current: list[history.ControllerRevisionView], relabel: Callable[[str], Any]
    ) -> history.ControllerRevisionView:
        """The highest-numbered of the revisions equal to the template; the others deleted after
        their pods were relabelled (dedupCurHistories)."""
        if len(current) == 1:
            return current[0]
        keep = current[0]
        for rev in current:
            if rev.revision >= keep.revision:
                keep = rev
        await relabel(keep.metadata.labels[util.REVISION_HASH_LABEL])
        for rev in current:
            if rev.metadata.name != keep.metadata.name:
                await history.delete_revision(self.client, rev)
        return keep

    async def snapshot(
        self, ds: views.DaemonSetView, template: Mapping[str, Any], data: bytes, number: int
    ) -> str:
        """Create the revision of the current template; returns its hash (snapshot)."""
        collision_count = ds.status.collision_count
        hash_ = template_hash(template, collision_count)
        name = history.revision_name(ds.metadata.name, hash_)
        labels = dict((template.get("metadata") or {}).get("labels") or {})
        labels[util.REVISION_HASH_LABEL] = hash_
        ref = controllerref.new_controller_ref(ds, API_VERSION, KIND)
        meta: dict[str, Any] = {
            "name": name,
            "namespace": ds.metadata.namespace,
            "labels": labels,
            "ownerReferences": [msgspec.to_builtins(ref)],
        }
        if ds.metadata.annotations:
            meta["annotations"] = dict(ds.metadata.annotations)
        body = {
            "apiVersion": "apps/v1",
            "kind": "ControllerRevision",
            "metadata": meta,
            "data": json.loads(data),
            "revision": number,
        }
        try:
            await self.client.create(self._path(ds.metadata.namespace), body)
            return hash_
        except kubeclient.ApiError as exc:
            if exc.code != 409 or exc.reason != "AlreadyExists":
                raise
            outer = exc
        existing = await self.client.get(self._path(ds.metadata.namespace, name))
        if history.same_data(msgspec.json.encode(existing.get("data")), data):
            return hash_
        fresh = await self.client.get(self._ds_path(ds))
        fresh_count = (fresh.get("status") or {}).get("collisionCount")
        if fresh_count != collision_count:
            raise StaleCollisionCount(
                f"found a stale collision count ({collision_count}, expected {fresh_count}) of "
                f"DaemonSet {ds.metadata.name!r} while processing; will retry until it is updated"
            )
        bumped = (collision_count or 0) + 1
        patch = {
            "metadata": {"resourceVersion": (fresh.get("metadata") or {}).get("resourceVersion")},
            "status": {"collisionCount": bumped},
        }
        await self.client.patch(self._ds_path(ds) + "/status", patch)
        log.info(
            "Found a hash collision for DaemonSet - bumping collisionCount to resolve it",
            extra={"daemonset": codec.key_of(ds), "collisionCount": bumped},
        )
        raise outer

    async def cleanup(
        self,
        ds: views.DaemonSetView,
        old: list[history.ControllerRevisionView],
        node_to_pods: Mapping[str, Sequence[views.DaemonPodView]],
    ) -> None:
        """Delete the oldest revisions beyond revisionHistoryLimit that no pod runs (cleanupHistory)."""
        limit = ds.spec.revision_history_limit if ds.spec.revision_history_limit is not None else 10
        to_kill = len(old) - limit
        if to_kill <= 0:
            return
        live = {
            pod.metadata.labels[util.REVISION_HASH_LABEL]
            for pods in node_to_pods.values()
            for pod in pods
            if pod.metadata.labels.get(util.REVISION_HASH_LABEL)
        }
        for rev in sorted(old, key=lambda r: r.revision):
            if to_kill <= 0:
                break
            if rev.metadata.labels.get(util.REVISION_HASH_LABEL) in live:
                continue
            await history.delete_revision(self.client, rev)
            to_kill -= 1
