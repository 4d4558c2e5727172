"""The feature gates upstream v1.32's Job controller reads, and the Job as they let it be seen.

- `Gates.from_args(args)`: JobManagedBy, JobPodReplacementPolicy, JobSuccessPolicy,
  JobBackoffLimitPerIndex and SidecarContainers, each through `upstreamflags.gate` (all beta,
  on by default).
- `Gates.view(job)`: the Job with the fields a gate that is off hides, as upstream's controller
  reads them with that gate off (`onlyReplaceFailedPods`, `matchSuccessPolicy`,
  `hasBackoffLimitPerIndex`, `getFailJobMessage`'s FailIndex case): spec.podReplacementPolicy,
  spec.successPolicy, spec.backoffLimitPerIndex and spec.maxFailedIndexes are absent, and a
  podFailurePolicy rule whose action is FailIndex never matches (upstream's switch falls through
  to the next rule; here its action becomes one `pod_failure_policy.match` skips).
- What else a gate changes is asked of `Gates` by the controller: status.terminating is written
  only with JobPodReplacementPolicy on; the success condition carries CompletionsReached only
  with JobSuccessPolicy on; spec.managedBy counts only with JobManagedBy on; a pod's sidecars
  (restartable init containers) count in its finish time for the backoff only with
  SidecarContainers on (`backoff.finished_time`).
- Called by `controller.JobController` (docs/flags.md "Feature gates").
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import msgspec
from kcm_shared.runtime import upstreamflags

from kcm_controllers.job import jobview, pod_failure_policy

# An action pod_failure_policy.match does not know, so skips.
_IGNORED_FAIL_INDEX = "FailIndex(JobBackoffLimitPerIndex=false)"


@dataclass(frozen=True)
class Gates:
    managed_by: bool = True
    pod_replacement_policy: bool = True
    success_policy: bool = True
    backoff_limit_per_index: bool = True
    sidecar_containers: bool = True

    @classmethod
    def from_args(cls, args: argparse.Namespace | None) -> Gates:
        return cls(
            managed_by=upstreamflags.gate(args, "JobManagedBy"),
            pod_replacement_policy=upstreamflags.gate(args, "JobPodReplacementPolicy"),
            success_policy=upstreamflags.gate(args, "JobSuccessPolicy"),
            backoff_limit_per_index=upstreamflags.gate(args, "JobBackoffLimitPerIndex"),
            sidecar_containers=upstreamflags.gate(args, "SidecarContainers"),
        )

    def view(self, job: jobview.JobView) -> jobview.JobView:
        """`job` as the controller reads it with these gates (the module's docstring)."""
        spec = job.spec
        hidden: dict[str, object] = {}
        if not self.pod_replacement_policy and spec.pod_replacement_policy is not None:
            hidden["pod_replacement_policy"] = None
        if not self.success_policy and spec.success_policy is not None:
            hidden["success_policy"] = None
        if not self.backoff_limit_per_index:
            if spec.backoff_limit_per_index is not None or spec.max_failed_indexes is not None:
                hidden |= {"backoff_limit_per_index": None, "max_failed_indexes": None}
            policy = spec.pod_failure_policy
            if policy is not None and any(r.action == pod_failure_policy.FAIL_INDEX for r in policy.rules):
                # Renamed, not removed: FailJob messages name a rule by its index.
                rules = [
                    msgspec.structs.replace(r, action=_IGNORED_FAIL_INDEX)
                    if r.action == pod_failure_policy.FAIL_INDEX
                    else r
                    for r in policy.rules
                ]
                hidden["pod_failure_policy"] = msgspec.structs.replace(policy, rules=rules)
        if not hidden:
            return job
        return msgspec.structs.replace(job, spec=msgspec.structs.replace(spec, **hidden))


# v1.32's defaults: every gate on.
DEFAULTS = Gates()
