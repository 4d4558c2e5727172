"""Pure Deployment arithmetic: surge and unavailability, replica set sizes, revisions, conditions.

Upstream keeps these in pkg/controller/deployment/util/deployment_util.go plus the
proportional scaling and cleanup selection of sync.go; here they are free functions over
the cached views (`kcm_controllers.deployment.views`), so the unit tests can drive them with upstream's
cases as data. The sync in `deployment_controller` calls them and does every write itself.

Nothing here touches the API; functions that "set" something return a changed copy or
mutate only a status/annotation object the caller owns, never a cached view.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec
from kcm_shared.apimachinery import apitypes

from kcm_controllers.deployment import views

# Labels and annotations, with upstream's names.
POD_TEMPLATE_HASH = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
ROLLBACK_TO = "deprecated.deployment.rollback.to"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# Deployment annotations that are not copied onto its ReplicaSets.
ANNOTATIONS_TO_SKIP = frozenset(
    {LAST_APPLIED, REVISION, REVISION_HISTORY, DESIRED_REPLICAS, MAX_REPLICAS, ROLLBACK_TO}
)
MAX_REVISION_HISTORY_CHARS = 2000

# Condition types and reasons.
AVAILABLE = "Available"
PROGRESSING = "Progressing"
REPLICA_FAILURE = "ReplicaFailure"
MIN_REPLICAS_AVAILABLE = "MinimumReplicasAvailable"
MIN_REPLICAS_UNAVAILABLE = "MinimumReplicasUnavailable"
NEW_RS_CREATED = "NewReplicaSetCreated"
FOUND_NEW_RS = "FoundNewReplicaSet"
NEW_RS_AVAILABLE = "NewReplicaSetAvailable"
RS_UPDATED = "ReplicaSetUpdated"
TIMED_OUT = "ProgressDeadlineExceeded"
FAILED_RS_CREATE = "ReplicaSetCreateError"
PAUSED = "DeploymentPaused"
RESUMED = "DeploymentResumed"

# kubernetes' rand.SafeEncodeString alphabet: no vowels (no words), no look-alikes.
_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_MAX_INT32 = 2**31 - 1


# --- maxSurge / maxUnavailable ------------------------------------------------------------


def scaled_value(value: int | str | None, total: int, round_up: bool) -> int:
    """An IntOrString as a count: ints as they are, "N%" of `total` rounded up or down."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    if not value.endswith("%"):
        raise ValueError(
            f"invalid value for IntOrString: invalid type: string is not a percentage: {value!r}"
        )
    try:
        percent = int(value[:-1])
    except ValueError:
        raise ValueError(f"invalid value for IntOrString: {value!r}") from None
    scaled = percent * total / 100
    return math.ceil(scaled) if round_up else math.floor(scaled)


def resolve_fenceposts(
    surge: int | str | None, unavailable: int | str | None, desired: int
) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) as counts; both zero would never progress, so unavailable is 1."""
    max_surge = scaled_value(surge, desired, round_up=True)
    max_unavailable = scaled_value(unavailable, desired, round_up=False)
    if max_surge == 0 and max_unavailable == 0:
        max_unavailable = 1
    return max_surge, max_unavailable


def _fenceposts(d: views.Deployment) -> tuple[int, int]:
    rolling = d.spec.strategy.rolling_update or views.RollingUpdate()
    return resolve_fenceposts(rolling.max_surge, rolling.max_unavailable, d.spec.replicas)


def is_rolling_update(d: views.Deployment) -> bool:
    return d.spec.strategy.type == views.ROLLING_UPDATE


def max_surge(d: views.Deployment) -> int:
    return _fenceposts(d)[0] if is_rolling_update(d) else 0


def max_unavailable(d: views.Deployment) -> int:
    if not is_rolling_update(d) or d.spec.replicas == 0:
        return 0
    return min(_fenceposts(d)[1], d.spec.replicas)


# --- counting over replica sets ------------------------------------------------------------


def spec_replicas(rss: Iterable[views.ReplicaSet | None]) -> int:
    return sum(rs.spec.replicas for rs in rss if rs is not None)


def actual_replicas(rss: Iterable[views.ReplicaSet | None]) -> int:
    return sum(rs.status.replicas for rs in rss if rs is not None)


def ready_replicas(rss: Iterable[views.ReplicaSet | None]) -> int:
    return sum(rs.status.ready_replicas for rs in rss if rs is not None)


def available_replicas(rss: Iterable[views.ReplicaSet | None]) -> int:
    return sum(rs.status.available_replicas for rs in rss if rs is not None)


def active(rss: Iterable[views.ReplicaSet | None]) -> list[views.ReplicaSet]:
    """Replica sets that want pods (upstream FilterActiveReplicaSets)."""
    return [rs for rs in rss if rs is not None and rs.spec.replicas > 0]


def _created(rs: views.ReplicaSet) -> tuple[dt.datetime, str]:
    ts = rs.metadata.creation_timestamp or dt.datetime.min.replace(tzinfo=dt.UTC)
    return ts, rs.metadata.name


def by_creation(rss: Iterable[views.ReplicaSet]) -> list[views.ReplicaSet]:
    """Oldest first, ties by name (upstream ReplicaSetsByCreationTimestamp)."""
    return sorted(rss, key=_created)


def by_size_newer(rss: Iterable[views.ReplicaSet]) -> list[views.ReplicaSet]:
    """Largest first, ties newest first (upstream ReplicaSetsBySizeNewer)."""
    newest_first = sorted(rss, key=_created, reverse=True)
    return sorted(newest_first, key=lambda rs: -rs.spec.replicas)


def by_size_older(rss: Iterable[views.ReplicaSet]) -> list[views.ReplicaSet]:
    """Largest first, ties oldest first (upstream ReplicaSetsBySizeOlder)."""
    return sorted(by_creation(rss), key=lambda rs: -rs.spec.replicas)


# --- revisions and annotations --------------------------------------------------------------


def revision(rs: views.ReplicaSet) -> int | None:
    text = rs.metadata.annotations.get(REVISION)
    if text is None:
        return 0
    try:
        return int(text)
    except ValueError:
        return None


def max_revision(rss: Iterable[views.ReplicaSet]) -> int:
    return max((rev for rs in rss if (rev := revision(rs)) is not None), default=0)


def by_revision(rss: Iterable[views.ReplicaSet]) -> list[views.ReplicaSet]:
    """Lowest revision first, ties by creation (upstream ReplicaSetsByRevision)."""
    return sorted(by_creation(rss), key=lambda rs: revision(rs) or 0)


def _int_annotation(rs: views.ReplicaSet, name: str) -> int | None:
    try:
        return int(rs.metadata.annotations[name])
    except (KeyError, ValueError):
        return None


def replicas_annotations(d: views.Deployment) -> dict[str, str]:
    """desired-replicas and max-replicas as the deployment wants them now."""
    return {
        DESIRED_REPLICAS: str(d.spec.replicas),
        MAX_REPLICAS: str(d.spec.replicas + max_surge(d)),
    }


def replicas_annotations_need_update(rs: views.ReplicaSet, d: views.Deployment) -> bool:
    wanted = replicas_annotations(d)
    return any(rs.metadata.annotations.get(k) != v for k, v in wanted.items())


def new_rs_annotations(
    d: views.Deployment, rs_annotations: dict[str, str], new_revision: int, exists: bool
) -> dict[str, str]:
    """The annotations a new (or found) ReplicaSet should carry (upstream SetNewReplicaSetAnnotations).

    Returns the full annotation map; equal to `rs_annotations` when nothing changes.
    """
    out = dict(rs_annotations)
    for key, value in d.metadata.annotations.items():
        if key not in ANNOTATIONS_TO_SKIP:
            out[key] = value
    old_text = out.get(REVISION, "")
    try:
        old_revision = int(old_text) if old_text else 0
    except ValueError:
        return dict(rs_annotations)  # upstream refuses to touch an RS whose revision is garbage
    if old_revision < new_revision:
        out[REVISION] = str(new_revision)
        if old_text:
            history = out.get(REVISION_HISTORY, "")
            entries = history.split(",") if history else []
            entries.append(old_text)
            # Drop the oldest entries rather than exceed the length limit.
            while len(",".join(entries)) > MAX_REVISION_HISTORY_CHARS and len(entries) > 1:
                entries.pop(0)
            out[REVISION_HISTORY] = ",".join(entries)
    if not exists:
        out.update(replicas_annotations(d))
    return out


def max_replicas_annotation(rs: views.ReplicaSet) -> int | None:
    return _int_annotation(rs, MAX_REPLICAS)


# --- templates: hash and equality -----------------------------------------------------------


def template_dict(raw: msgspec.Raw) -> dict[str, Any]:
    decoded = msgspec.json.decode(raw)
    return decoded if isinstance(decoded, dict) else {}


def _fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def template_hash(template: dict[str, Any], collision_count: int | None) -> str:
    """A stable name-safe hash of a pod template and the collision count (upstream ComputeHash).

    FNV-1a over the canonical JSON (sorted keys) instead of Go's object dump, so the value
    differs from upstream's, but it is stable across processes and restarts, which is what
    the name and label need. The decimal digits are mapped to the SafeEncodeString alphabet.
    """
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    if collision_count is not None:
        data += (collision_count & 0xFFFFFFFF).to_bytes(4, "little")
    return "".join(_SAFE_ALPHABET[ord(ch) % len(_SAFE_ALPHABET)] for ch in str(_fnv32a(data)))


def without_hash_label(template: dict[str, Any]) -> dict[str, Any]:
    meta = dict(template.get("metadata") or {})
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != POD_TEMPLATE_HASH}
    meta["labels"] = labels
    return {**template, "metadata": meta}


def equal_ignore_hash(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Pod templates equal apart from the pod-template-hash label (upstream EqualIgnoreHash):
    the whole template compared as its Go type would be (`kcm_shared.apimachinery.apitypes`)."""
    return apitypes.semantic_equal(apitypes.POD_TEMPLATE_SPEC, without_hash_label(a), without_hash_label(b))


def find_new_replica_set(d: views.Deployment, rss: Sequence[views.ReplicaSet]) -> views.ReplicaSet | None:
    """The oldest replica set whose template is the deployment's (there may be several)."""
    want = template_dict(d.spec.template)
    for rs in by_creation(rss):
        if equal_ignore_hash(template_dict(rs.spec.template), want):
            return rs
    return None


def find_old_replica_sets(
    rss: Sequence[views.ReplicaSet], new_rs: views.ReplicaSet | None
) -> list[views.ReplicaSet]:
    """Every replica set but the new one (upstream FindOldReplicaSets' allOldRSs)."""
    return [rs for rs in rss if new_rs is None or rs.metadata.uid != new_rs.metadata.uid]


# --- sizes ----------------------------------------------------------------------------------


def new_rs_new_replicas(
    d: views.Deployment, all_rss: Sequence[views.ReplicaSet | None], new_rs: views.ReplicaSet
) -> int:
    """How far the new replica set may be scaled up now (upstream NewRSNewReplicas).

    Unlike upstream, a replica set counts with the pods its status still reports when that
    is more than its spec: an old replica set just scaled down may not have deleted its pod
    yet, and scaling the new one up meanwhile would briefly run more than maxSurge extra pods.
    """
    if not is_rolling_update(d):
        return d.spec.replicas
    max_total = d.spec.replicas + max_surge(d)
    current = sum(max(rs.spec.replicas, rs.status.replicas) for rs in all_rss if rs is not None)
    if current >= max_total:
        return new_rs.spec.replicas
    scale_up = min(max_total - current, d.spec.replicas - new_rs.spec.replicas)
    return new_rs.spec.replicas + scale_up


def new_rs_target(
    d: views.Deployment, all_rss: Sequence[views.ReplicaSet | None], new_rs: views.ReplicaSet
) -> int:
    """The size the new replica set should have now (upstream reconcileNewReplicaSet)."""
    if new_rs.spec.replicas >= d.spec.replicas:
        return d.spec.replicas
    return new_rs_new_replicas(d, all_rss, new_rs)


def old_scale_down_limit(
    d: views.Deployment, all_rss: Sequence[views.ReplicaSet | None], new_rs: views.ReplicaSet | None
) -> int:
    """How many old pods may go now: all pods less the minimum available less the new
    replica set's pods that are not available yet (they may never become so)."""
    min_available = d.spec.replicas - max_unavailable(d)
    new_unavailable = new_rs.spec.replicas - new_rs.status.available_replicas if new_rs is not None else 0
    return spec_replicas(all_rss) - min_available - new_unavailable


def unhealthy_cleanup(old_rss: Sequence[views.ReplicaSet], limit: int) -> list[tuple[views.ReplicaSet, int]]:
    """New sizes that drop up to `limit` unavailable old pods, oldest replica set first
    (upstream cleanupUnhealthyReplicas): they cost no availability."""
    plan: list[tuple[views.ReplicaSet, int]] = []
    total = 0
    for rs in by_creation(old_rss):
        if total >= limit:
            break
        unhealthy = rs.spec.replicas - rs.status.available_replicas
        if rs.spec.replicas == 0 or unhealthy <= 0:
            continue
        count = min(limit - total, unhealthy)
        plan.append((rs, rs.spec.replicas - count))
        total += count
    return plan


def old_scale_down(
    d: views.Deployment, all_rss: Sequence[views.ReplicaSet | None], old_rss: Sequence[views.ReplicaSet]
) -> list[tuple[views.ReplicaSet, int]]:
    """New sizes of old replica sets, oldest first, that keep at least replicas - maxUnavailable
    pods available (upstream scaleDownOldReplicaSetsForRollingUpdate).

    Unlike upstream, a replica set counts with at most its spec's pods as available. A replica
    set writes the status of the sync that scaled it down from the pods it had before its
    deletes, so until its next sync it reports pods that are already gone; counting them
    would let a second scale-down drop availability below the minimum. Its deletes take
    unavailable pods first, so no more than spec.replicas of the reported ones stay.
    """
    min_available = d.spec.replicas - max_unavailable(d)
    available = sum(min(rs.status.available_replicas, rs.spec.replicas) for rs in all_rss if rs is not None)
    if available <= min_available:
        return []
    budget = available - min_available
    plan: list[tuple[views.ReplicaSet, int]] = []
    total = 0
    for rs in by_creation(old_rss):
        if total >= budget:
            break
        if rs.spec.replicas == 0:
            continue
        count = min(rs.spec.replicas, budget - total)
        plan.append((rs, rs.spec.replicas - count))
        total += count
    return plan


def is_saturated(d: views.Deployment, rs: views.ReplicaSet | None) -> bool:
    """The new replica set alone runs every desired pod, all of them available."""
    if rs is None:
        return False
    desired = _int_annotation(rs, DESIRED_REPLICAS)
    return (
        rs.spec.replicas == d.spec.replicas
        and desired == d.spec.replicas
        and rs.status.available_replicas == d.spec.replicas
    )


def find_active_or_latest(
    new_rs: views.ReplicaSet | None, old_rss: Sequence[views.ReplicaSet]
) -> views.ReplicaSet | None:
    """The one replica set with pods, or the latest when none has any; None when several have."""
    if new_rs is None and not old_rss:
        return None
    newest_first = list(reversed(by_creation(old_rss)))
    candidates = active([*newest_first, new_rs])
    if not candidates:
        return new_rs if new_rs is not None else newest_first[0]
    if len(candidates) == 1:
        return candidates[0]
    return None


def _round_half_away(value: float) -> int:
    return math.floor(value + 0.5) if value >= 0 else -math.floor(-value + 0.5)


def replica_set_fraction(rs: views.ReplicaSet, d: views.Deployment) -> int:
    """Pods to add to `rs` (negative: remove) for it to keep its share of the new size."""
    if d.spec.replicas == 0:
        return -rs.spec.replicas
    deployment_replicas = d.spec.replicas + max_surge(d)
    annotated = max_replicas_annotation(rs)
    if annotated is None:
        # The RS was never annotated: the deployment's last observed size stands in for it.
        annotated = d.status.replicas
    if annotated == 0:
        return 0
    return _round_half_away(rs.spec.replicas * deployment_replicas / annotated) - rs.spec.replicas


def proportion(rs: views.ReplicaSet | None, d: views.Deployment, to_add: int, added: int) -> int:
    """How many of the `to_add` replicas (`added` handed out already) go to `rs` (upstream GetProportion)."""
    if rs is None or rs.spec.replicas == 0 or to_add == 0 or to_add == added:
        return 0
    fraction = replica_set_fraction(rs, d)
    allowed = to_add - added
    return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)


def proportional_sizes(
    d: views.Deployment, rss: Sequence[views.ReplicaSet]
) -> list[tuple[views.ReplicaSet, int]]:
    """New sizes of the active replica sets of a deployment resized during a rollout.

    Each keeps its share of the pods (its max-replicas annotation against the deployment's
    new maximum); what rounding leaves over goes to (or comes off) the largest one. The
    result is in the order the scaling should happen.
    """
    current = active(rss)
    allowed = d.spec.replicas + max_surge(d) if d.spec.replicas > 0 else 0
    to_add = allowed - spec_replicas(current)
    if to_add > 0:
        ordered = by_size_newer(current)
    elif to_add < 0:
        ordered = by_size_older(current)
    else:
        ordered = current
    sizes: list[int] = []
    added = 0
    for rs in ordered:
        share = proportion(rs, d, to_add, added)
        sizes.append(rs.spec.replicas + share)
        added += share
    if ordered and to_add != 0:
        sizes[0] = max(0, sizes[0] + to_add - added)
    return list(zip(ordered, sizes, strict=True))


def scale_targets(
    d: views.Deployment, new_rs: views.ReplicaSet | None, old_rss: Sequence[views.ReplicaSet]
) -> tuple[list[tuple[views.ReplicaSet, int]], bool]:
    """Replica set sizes for a deployment whose spec.replicas changed (upstream scale).

    One active replica set (or none) takes the whole size; a saturated new one lets the old
    ones go to zero; otherwise, during a rolling update, every active one is resized in
    proportion. The flag says whether unchanged sizes still get their replicas annotations
    refreshed (the proportional case) or are left alone.
    """
    only = find_active_or_latest(new_rs, old_rss)
    if only is not None:
        return ([(only, d.spec.replicas)] if only.spec.replicas != d.spec.replicas else []), False
    if is_saturated(d, new_rs):
        return [(rs, 0) for rs in active(old_rss)], False
    if is_rolling_update(d):
        candidates = [rs for rs in [*old_rss, new_rs] if rs is not None]
        return proportional_sizes(d, candidates), True
    return [], False


def cleanup_candidates(d: views.Deployment, old_rss: Sequence[views.ReplicaSet]) -> list[views.ReplicaSet]:
    """Old replica sets beyond revisionHistoryLimit that may be deleted (upstream cleanupDeployment).

    The oldest revisions go first, and only those fully scaled down and observed so by the
    ReplicaSet controller: deleting one with pods would take the pods with it.
    """
    limit = d.spec.revision_history_limit
    if limit is None:
        return []
    alive = [rs for rs in old_rss if rs.metadata.deletion_timestamp is None]
    excess = len(alive) - limit
    if excess <= 0:
        return []
    return [
        rs
        for rs in by_revision(alive)[:excess]
        if rs.status.replicas == 0
        and rs.spec.replicas == 0
        and rs.metadata.generation <= rs.status.observed_generation
    ]


# --- conditions -----------------------------------------------------------------------------


def rfc3339(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def new_condition(type_: str, status: str, reason: str, message: str, now: dt.datetime) -> views.Condition:
    stamp = rfc3339(now)
    return views.Condition(type_, status, stamp, stamp, reason, message)


def get_condition(status: views.DeploymentStatus, type_: str) -> views.Condition | None:
    return next((c for c in status.conditions if c.type == type_), None)


def set_condition(status: views.DeploymentStatus, cond: views.Condition) -> None:
    """Put `cond` into `status` (owned by the caller) as upstream SetDeploymentCondition does.

    An existing condition with the same status and reason is kept as it is; one with the same
    status keeps its lastTransitionTime.
    """
    current = get_condition(status, cond.type)
    if current is not None and current.status == cond.status and current.reason == cond.reason:
        return
    if current is not None and current.status == cond.status:
        cond = msgspec.structs.replace(cond, last_transition_time=current.last_transition_time)
    status.conditions = [c for c in status.conditions if c.type != cond.type] + [cond]


def remove_condition(status: views.DeploymentStatus, type_: str) -> None:
    status.conditions = [c for c in status.conditions if c.type != type_]


def has_progress_deadline(d: views.Deployment) -> bool:
    seconds = d.spec.progress_deadline_seconds
    return seconds is not None and seconds != _MAX_INT32


def deployment_complete(d: views.Deployment, status: views.DeploymentStatus) -> bool:
    want = d.spec.replicas
    return (
        status.updated_replicas == want
        and status.replicas == want
        and status.available_replicas == want
        and status.observed_generation >= d.metadata.generation
    )


def deployment_progressing(d: views.Deployment, status: views.DeploymentStatus) -> bool:
    """Some progress since the last status: more updated, fewer old, more ready or available pods."""
    old = d.status
    return (
        status.updated_replicas > old.updated_replicas
        or status.replicas - status.updated_replicas < old.replicas - old.updated_replicas
        or status.ready_replicas > old.ready_replicas
        or status.available_replicas > old.available_replicas
    )


def deployment_timed_out(d: views.Deployment, status: views.DeploymentStatus, now: dt.datetime) -> bool:
    if not has_progress_deadline(d):
        return False
    cond = get_condition(status, PROGRESSING)
    if cond is None or cond.reason == NEW_RS_AVAILABLE:
        return False
    if cond.reason == TIMED_OUT:
        return True
    since = parse_time(cond.last_update_time)
    if since is None:
        return False
    return since + dt.timedelta(seconds=d.spec.progress_deadline_seconds or 0) < now


def calculate_status(
    d: views.Deployment,
    all_rss: Sequence[views.ReplicaSet | None],
    new_rs: views.ReplicaSet | None,
    now: dt.datetime,
) -> views.DeploymentStatus:
    """The status the replica sets imply, with the Available condition (upstream calculateStatus)."""
    available = available_replicas(all_rss)
    status = views.DeploymentStatus(
        observed_generation=d.metadata.generation,
        replicas=actual_replicas(all_rss),
        updated_replicas=actual_replicas([new_rs]),
        ready_replicas=ready_replicas(all_rss),
        available_replicas=available,
        unavailable_replicas=max(0, spec_replicas(all_rss) - available),
        collision_count=d.status.collision_count,
        conditions=list(d.status.conditions),
    )
    if available >= d.spec.replicas - max_unavailable(d):
        cond = new_condition(
            AVAILABLE, "True", MIN_REPLICAS_AVAILABLE, "Deployment has minimum availability.", now
        )
    else:
        cond = new_condition(
            AVAILABLE,
            "False",
            MIN_REPLICAS_UNAVAILABLE,
            "Deployment does not have minimum availability.",
            now,
        )
    set_condition(status, cond)
    return status


def _rs_or_deployment(d: views.Deployment, new_rs: views.ReplicaSet | None) -> str:
    return f'ReplicaSet "{new_rs.metadata.name}"' if new_rs is not None else f'Deployment "{d.metadata.name}"'


def rollout_status(
    d: views.Deployment,
    all_rss: Sequence[views.ReplicaSet | None],
    new_rs: views.ReplicaSet | None,
    now: dt.datetime,
) -> views.DeploymentStatus:
    """calculate_status plus the Progressing and ReplicaFailure conditions (upstream syncRolloutStatus)."""
    status = calculate_status(d, all_rss, new_rs, now)
    if not has_progress_deadline(d):
        remove_condition(status, PROGRESSING)
    current = get_condition(d.status, PROGRESSING)
    complete = (
        status.replicas == status.updated_replicas
        and current is not None
        and current.reason == NEW_RS_AVAILABLE
    )
    if has_progress_deadline(d) and not complete:
        subject = _rs_or_deployment(d, new_rs)
        if deployment_complete(d, status):
            set_condition(
                status,
                new_condition(
                    PROGRESSING, "True", NEW_RS_AVAILABLE, f"{subject} has successfully progressed.", now
                ),
            )
        elif deployment_progressing(d, status):
            cond = new_condition(PROGRESSING, "True", RS_UPDATED, f"{subject} is progressing.", now)
            # Progress refreshes lastUpdateTime (the deadline counts from it), even when the
            # reason stays the same, which set_condition alone would not do.
            if current is not None:
                if current.status == "True":
                    cond = msgspec.structs.replace(cond, last_transition_time=current.last_transition_time)
                remove_condition(status, PROGRESSING)
            set_condition(status, cond)
        elif deployment_timed_out(d, status, now):
            set_condition(
                status,
                new_condition(PROGRESSING, "False", TIMED_OUT, f"{subject} has timed out progressing.", now),
            )
    failure = replica_failure(all_rss, new_rs)
    if failure is not None:
        set_condition(
            status,
            views.Condition(
                REPLICA_FAILURE,
                failure.status,
                failure.last_transition_time,
                failure.last_transition_time,
                failure.reason,
                failure.message,
            ),
        )
    else:
        remove_condition(status, REPLICA_FAILURE)
    return status


def replica_failure(
    all_rss: Sequence[views.ReplicaSet | None], new_rs: views.ReplicaSet | None
) -> views.Condition | None:
    """The new replica set's ReplicaFailure condition, else any old one's."""
    for rs in [new_rs, *all_rss]:
        if rs is None:
            continue
        for cond in rs.status.conditions:
            if cond.type == REPLICA_FAILURE:
                return cond
    return None


def stuck_requeue_after(
    d: views.Deployment, status: views.DeploymentStatus, now: dt.datetime
) -> float | None:
    """Seconds until the progress deadline would pass, for a deployment whose status did not change."""
    cond = get_condition(status, PROGRESSING)
    if not has_progress_deadline(d) or cond is None:
        return None
    if deployment_complete(d, status) or cond.reason == TIMED_OUT:
        return None
    since = parse_time(cond.last_update_time)
    if since is None:
        return None
    after = (since + dt.timedelta(seconds=d.spec.progress_deadline_seconds or 0) - now).total_seconds()
    return max(after, 1.0)


def paused_condition(d: views.Deployment, now: dt.datetime) -> views.Condition | None:
    """The Progressing condition that pausing or resuming calls for, None when none changes."""
    if not has_progress_deadline(d):
        return None
    cond = get_condition(d.status, PROGRESSING)
    if cond is not None and cond.reason == TIMED_OUT:
        return None  # a reported lack of progress is not papered over by a pause
    paused_now = cond is not None and cond.reason == PAUSED
    if d.spec.paused and not paused_now:
        return new_condition(PROGRESSING, "Unknown", PAUSED, "Deployment is paused", now)
    if not d.spec.paused and paused_now:
        return new_condition(PROGRESSING, "Unknown", RESUMED, "Deployment is resumed", now)
    return None


def is_scaling_event(
    d: views.Deployment, new_rs: views.ReplicaSet | None, old_rss: Sequence[views.ReplicaSet]
) -> bool:
    """Some active replica set was sized for a different number of replicas than the deployment wants."""
    for rs in active([*old_rss, new_rs]):
        desired = _int_annotation(rs, DESIRED_REPLICAS)
        if desired is not None and desired != d.spec.replicas:
            return True
    return False
