"""What one reconcile of a node does: upstream's reconciler loop body for that node, pure.

Upstream pkg/controller/volume/attachdetach/reconciler/reconciler.go (v1.32) with
statusupdater/node_status_updater.go and the CSI attacher's Attach/Detach:
- A wanted volume without a VolumeAttachment gets one (`create`), unless it may be attached
  to one node only and is attached to another (`multi_attach`: FailedAttachVolume with
  upstream's "Multi-Attach error" text). Once the attachment says attached, the volume is
  reported in `node.status.volumesAttached` and its pods get SuccessfulAttachVolume; while
  it carries an attachError, they get FailedAttachVolume with its message.
- An attachment no pod wants is detached (`detach`: deleted) once the node no longer lists
  the volume in `status.volumesInUse`; or, when `max_wait` has passed since it was first
  found unwanted, the node is not Ready and force detach is not disabled; or at once when
  the node has the `node.kubernetes.io/out-of-service` taint. It leaves
  `volumesAttached` first: the caller writes the node status before it deletes.
- `requested` is the caller's memory of when each attachment was first found unwanted
  (upstream's detachRequestedTime, in memory there too): updated in place.
Called by `controller`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kcm_controllers.attachdetach.desired import Want
from kcm_controllers.attachdetach.views import AttachmentView, PodView

FORCE_TIMEOUT = "timeout"  # upstream metrics.ForceDetachReasonTimeout
FORCE_OUT_OF_SERVICE = "out-of-service"


@dataclass(frozen=True)
class Attached:
    """An attachment the node has, or that its status still reports."""

    unique_name: str
    va: AttachmentView | None  # None: only in node.status.volumesAttached


@dataclass(frozen=True)
class NodeState:
    healthy: bool
    out_of_service: bool
    reported: frozenset[str]  # status.volumesAttached names
    in_use: frozenset[str]  # status.volumesInUse


@dataclass(frozen=True)
class Settings:
    max_wait: float
    disable_force: bool


@dataclass
class Plan:
    create: list[Want] = field(default_factory=list)
    detach: list[str] = field(default_factory=list)
    forced: dict[str, str] = field(default_factory=dict)  # attachment -> reason
    report: list[str] = field(default_factory=list)  # the new status.volumesAttached
    succeeded: list[Want] = field(default_factory=list)
    failed: list[tuple[Want, str]] = field(default_factory=list)
    multi_attach: list[Want] = field(default_factory=list)
    wake_after: float | None = None  # when a force-detach timer runs out


def attach_succeeded(pv: str) -> str:
    """VolumeToAttach.GenerateMsg with no suffix: upstream's text ends with a space."""
    return f'AttachVolume.Attach succeeded for volume "{pv}" '


def attach_failed(pv: str, err: str) -> str:
    return f'AttachVolume.Attach failed for volume "{pv}" : {err}'


def multi_attach_error(pv: str, pod: PodView, others: list[PodView]) -> str:
    """reportMultiAttachError's text for `pod`: names only the pods of its own namespace."""
    local = [o.metadata.name for o in others if o.metadata.namespace == pod.metadata.namespace]
    elsewhere = len(others) - len(local)
    if not others:
        detail = "Volume is already exclusively attached to one node and can't be attached to another"
    elif local:
        detail = f"Volume is already used by pod(s) {', '.join(local)}"
        if elsewhere:
            detail += f" and {elsewhere} pod(s) in different namespaces"
    else:
        detail = f"Volume is already used by {elsewhere} pod(s) in different namespaces"
    return f'Multi-Attach error for volume "{pv}" {detail}'


def _deleting(va: AttachmentView | None) -> bool:
    return va is not None and va.metadata.deletion_timestamp is not None


def decide(
    wanted: dict[str, Want],
    actual: dict[str, Attached],
    node: NodeState,
    blocked: set[str],
    requested: dict[str, float],
    now: float,
    settings: Settings,
) -> Plan:
    """`blocked`: wanted attachments whose volume is exclusively attached to another node."""
    plan = Plan()
    for name, want in wanted.items():
        requested.pop(name, None)  # ResetDetachRequestTime
        have = actual.get(name)
        va = None if have is None else have.va
        if va is None:
            if name in blocked:
                plan.multi_attach.append(want)
            else:
                plan.create.append(want)
        elif _deleting(va):
            continue  # a detach under way; attach again once it is gone
        elif va.status.attached:
            plan.report.append(want.unique_name)
            if want.unique_name not in node.reported:
                plan.succeeded.append(want)
        elif va.status.attach_error is not None:
            plan.failed.append((want, va.status.attach_error.message))
    for name, have in actual.items():
        if name in wanted or have.va is None or _deleting(have.va):
            requested.pop(name, None)
            continue
        first = requested.setdefault(name, now)
        expired = now - first > settings.max_wait
        force_timeout = expired and not settings.disable_force
        mounted = have.unique_name in node.in_use
        if mounted and not (force_timeout and not node.healthy) and not node.out_of_service:
            if have.va.status.attached:
                plan.report.append(have.unique_name)
            if not settings.disable_force and not expired:
                left = settings.max_wait - (now - first)
                plan.wake_after = left if plan.wake_after is None else min(plan.wake_after, left)
            continue
        plan.detach.append(name)
        if force_timeout:
            plan.forced[name] = FORCE_TIMEOUT
        elif node.out_of_service:
            plan.forced[name] = FORCE_OUT_OF_SERVICE
    plan.report.sort()
    return plan
