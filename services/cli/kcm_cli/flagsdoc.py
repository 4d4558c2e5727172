"""docs/flags.md: every flag `kcm controllers` and `kcm controller` accept, in one table.

    .venv/bin/python -m kcm_cli.flagsdoc           # rewrite docs/flags.md
    .venv/bin/python -m kcm_cli.flagsdoc --check   # exit 1 when it is out of date

- Upstream's flags (`upstreamflags.FLAGS`) with their type, default and meaning, and what each
  does here: "takes effect", or "accepted, no effect: <why>" (`upstreamflags.no_effect`);
  kcm's own flags ("ours") with their help.
- tests/unit/cli/test_flagsdoc.py fails when the file and this rendering differ, so the table
  follows the flags and upstream's table (which follows the pinned binary) without drifting.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kcm_shared.runtime import controllerflags, upstreamflags

from kcm_cli import controllers

DOC = Path(__file__).resolve().parents[3] / "docs" / "flags.md"

_HEADER = f"""# Flags

`kcm controllers` and `kcm controller NAME` take every flag of upstream kube-controller-manager
{upstreamflags.VERSION}, read as upstream's pflag reads them: a bool as `--x`, `--x=true` or
`--x=false` (or another strconv.ParseBool spelling), durations as Go writes them (`1m30s`), `_`
for `-` in a name, lists as `--x=a,b` (repeating one adds to it), maps as
`--feature-gates=A=true,B=false`, and never a prefix of a name. A flag nobody declares, or a bad
value, ends the command with upstream's one line (`Error: unknown flag: --foo`) and exit status 1.
`--version` prints kcm's version and the upstream release it follows. `kcm dev` takes the same
flags (except the bus services' own: it sets `--kubeconfig`, `--nats-*` and `--ops-*` itself) and
hands them on to the controllers it starts; with `--reference`, upstream's are handed to
kube-controller-manager.

`--controllers` knows every name and alias of upstream's registry. A controller upstream would
start that kcm does not build is logged once at start (`controller not started`, with the reason:
not built in kcm, a cloud provider controller, or a feature gate that is off); a name nobody
knows ends the command with one line. kubeadm's `*,bootstrapsigner,tokencleaner` and k3s's
`*,-service,-route,-cloud-node-lifecycle` start.

The table is generated (`python -m kcm_cli.flagsdoc`) from the flags `kcm controllers` declares
and upstream's table `shared/kcm_shared/runtime/upstream_flags.json`, itself generated from the
pinned binary's `--help` (`tools/upstream/flags.py`); tests fail when either drifts.

`kcm watcher` and `kcm coordinator` read their command lines with the same pflag syntax (their
own flags, the bus and API flags, and the seven `--leader-elect*` flags).

**Leader election.** Upstream's kube-controller-manager runs every controller in the one
process that holds the `kube-system/kube-controller-manager` Lease. kcm has no such process:
- `kcm watcher` and `kcm coordinator` each elect one active replica on a Lease of their own,
  with upstream's seven flags and meanings: `--leader-elect=false` makes the replica active at
  once, with no Lease; `--leader-elect-lease-duration`, `--leader-elect-renew-deadline` and
  `--leader-elect-retry-period` time it as client-go's elector does; `--leader-elect-resource-name`
  defaults to `kcm-watcher` and `kcm-coordinator`, `--leader-elect-resource-namespace` to
  `kube-system`, and `--leader-elect-resource-lock` takes `leases` only, as upstream v1.32.
  `kcm dev` hands the `--leader-elect`, `-lease-duration`, `-renew-deadline`, `-retry-period`
  and `-resource-lock` it is given to its watcher and coordinator too (the Lease's name and
  namespace stay each service's own).
- `kcm controllers` and `kcm controller NAME` accept the seven flags and hold no Lease: every
  replica runs, and the coordinator grants each a share of each controller's partitions. A
  replica keeps a partition while its heartbeats are answered, for the coordinator's
  `--member-lease` (5s) plus `--member-fence-margin` (1s) after the last answer: those two play
  the part of `--leader-elect-lease-duration` for the work a replica holds, and a failover of
  the coordinator itself takes its `--leader-elect-lease-duration`.
- `--leader-elect=false` is refused by `kcm controllers` and `kcm controller` in one line
  (`kcm: --leader-elect=false is not supported by kcm's controllers: ...`), not ignored.
  Upstream's meaning, one replica running every controller without a Lease, would map here to a
  replica owning every partition without waiting for the coordinator's grants. That breaks the
  architecture's invariants: only the coordinator grants partitions (9); two replicas so
  started, or one started beside granted ones, would reconcile one key at once (2); and a
  paused replica would have no deadline to stop writing at (8). One replica already runs
  every controller and every partition with the default `--leader-elect=true`: the
  coordinator grants it all of them. `kcm dev --leader-elect=false` hands the flag to its
  watcher and coordinator only (tests/e2e/test_upstream_command_line.py shows both sides).

**Feature gates.** `--feature-gates` takes every gate of v1.32's kube-controller-manager: the
alpha and beta ones its `--help` lists, `AllAlpha` and `AllBeta`, and the 45 GA and deprecated
ones it hides (found by probing the binary, `tools/upstream/flags.py`). They are judged as
upstream's are, once every flag has parsed and before `--version`: an unknown gate, a bad value
or a locked gate set against its lock ends the command with upstream's message after `kcm: `
(`unrecognized feature gate: Foo`, `invalid value of Foo=bar, err: ...`, `cannot set feature
gate JobPodFailurePolicy to false, feature is locked to true`); a GA or deprecated gate set
otherwise is taken with upstream's warning on stderr after `kcm: warning: ` (`Setting GA feature
gate X=true. It will be removed in a future release.`). Where several items are wrong, upstream
answers in Go's map order, which varies from run to run; kcm answers in the order given. A gate
is on as set, else by `AllAlpha`/`AllBeta` for its stage, else by
its default (`upstreamflags.gate`). Gates that change what kcm's controllers do:
- `JobManagedBy` (beta, on): off, the Job controller ignores `spec.managedBy` and runs every
  Job, as upstream's; on, it leaves Jobs another controller manages alone.
- `JobPodReplacementPolicy` (beta, on): off, `spec.podReplacementPolicy` is not read (a
  terminating pod counts as failed at once unless a podFailurePolicy is set),
  `status.terminating` is left unset, and `job_pods_creation_total` counts every pod as `new`.
- `JobSuccessPolicy` (beta, on): off, `spec.successPolicy` is not read (every index must
  succeed), and the success condition carries no reason or message.
- `JobBackoffLimitPerIndex` (beta, on): off, `spec.backoffLimitPerIndex` and
  `spec.maxFailedIndexes` are not read (the Job's `backoffLimit` counts every failure) and a
  podFailurePolicy rule with action FailIndex never matches.
- `TopologyAwareHints` (beta, on): off, the EndpointSlice controller keeps no topology cache
  and watches no node for it, as upstream's: the `service.kubernetes.io/topology-mode: Auto`
  annotation then only removes hints.
- `ServiceTrafficDistribution` (beta, on): off, `spec.trafficDistribution` is not read: the
  slices the EndpointSlice controller writes lose their hints, and the others are left as
  they are (tests/unit/controllers/endpointslice/test_reconciler.py).
- `SidecarContainers` (beta, on): off, the Job controller's backoff takes a pod's finish time
  from its regular containers only, not also from its sidecars (restartable init containers).
- `PodDeletionCost` (beta, on): off, the ReplicaSet and ReplicationController controllers rank
  the pods a scale-down deletes without reading `controller.kubernetes.io/pod-deletion-cost`.
- `RecoverVolumeExpansionFailure` (beta, on): off, the resourcequota controller charges a
  claim's `requests.storage` from its request only, not from `status.allocatedResources` where
  that is more. Quota admission is the API server's and follows its own gate.
- `OrderedNamespaceDeletion` (beta, off): on, the namespace controller deletes a terminating
  namespace's pods first and, while any remain, nothing else (its conditions then carry no
  content totals, as upstream's).
- `MaxUnavailableStatefulSet` (alpha, off): on, the StatefulSet controller's rolling update
  replaces up to `spec.updateStrategy.rollingUpdate.maxUnavailable` pods at once (a number or
  a percentage of `spec.replicas` rounded down, at least 1), counting every unhealthy pod of
  the set against it, highest ordinal first down to the partition. kube-apiserver drops the
  field from new StatefulSets while its own gate is off; the embedded API server keeps it.
- `HPAScaleToZero` (alpha, off) is read by upstream's API server only (it lets an HPA store
  `minReplicas: 0`); the HPA controller, upstream's and kcm's, honours a `minReplicas` of 0
  whatever the gate says, and goes on computing metrics for a target scaled to zero.
- The Job gates are tested in tests/unit/controllers/job/test_gates.py and, all four off, in
  tests/e2e/test_feature_gates.py, as are OrderedNamespaceDeletion and (on the embedded API
  server) MaxUnavailableStatefulSet, on; the others in the unit tests of their controllers.
  One difference is left: with both `JobManagedBy` and `JobPodReplacementPolicy` off, upstream
  sets Complete or Failed at once, without the interim SuccessCriteriaMet or FailureTarget
  condition and without waiting for terminating pods (`delayTerminalCondition`); kcm's Job
  controller always goes through the interim condition, as v1.32 does with its defaults.
- Gates of controllers kcm does not build decide only whether `--controllers` reports them as
  not started for a gate that is off.
- The other gates of the controllers kcm runs are not read: kcm behaves as v1.32 does with
  their defaults, whatever they are set to.

**API content type.** `--kube-api-content-type` takes effect, but kcm's default is
`application/json`, not upstream's `application/vnd.kubernetes.protobuf`. Set to protobuf, every
kcm service's client (`kcm dev` hands the flag to the watcher and the coordinator too) reads
built-in objects (get, list, watch) as protobuf, asking with `Accept:
application/vnd.kubernetes.protobuf, application/json` as client-go does, and turns them into the
JSON the rest of kcm reads (the watcher publishes that onto NATS). Custom resources, aggregated
APIs, group versions kcm's field table does not cover (apiextensions.k8s.io among them) and
subresources other than status and scale are read as JSON; a server that answers JSON to the
protobuf request is read as JSON. Writes stay JSON (upstream sends create and update bodies as
protobuf; patches are JSON on both): kcm writes what it read back, and a field its table lacked
would be dropped silently. `kcm_kube_api_bodies_total{{content_type}}` counts what each service read.
Why JSON stays the default (bench/content_type.py: 1,500 pods on kube-apiserver v1.32 on a shared
2-core machine, CPU seconds per 1,000 pods, medians of 3, kube-apiserver's background subtracted):
a list cost kube-apiserver 0.086 as JSON and 0.019 as protobuf, and kcm 0.012 and 0.98; a watch
0.076 and 0.035, and kcm 0.010 and 0.66. Protobuf saves kube-apiserver about 0.05 s per 1,000 pods
and costs kcm 15 to 20 times that: kcm's JSON decoding is msgspec's, in C, and its protobuf
decoder is Python.

| flag | type | default | upstream's meaning (or ours) | here |
| --- | --- | --- | --- | --- |
"""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def render() -> str:
    p = argparse.ArgumentParser(add_help=True)
    controllerflags.add_arguments(p, controllers.BUILTIN)
    built = [spec.name for spec in controllers.BUILTIN]
    accepted = {
        option
        for group in p._action_groups
        if group.title == upstreamflags.ACCEPTED_GROUP
        for action in group._group_actions
        for option in action.option_strings
    }
    rows = []
    seen: set[str] = set()
    for action in p._actions:
        option = max(action.option_strings, key=len, default="")
        if not option or option in seen:
            continue
        seen.add(option)
        name = option.removeprefix("--")
        flag = upstreamflags.FLAGS.get(name)
        shown = ", ".join(f"`{o}`" for o in sorted(action.option_strings, key=len))
        if flag is None:
            meaning = action.help if action.help != argparse.SUPPRESS else "a test's knob"
            # --instance's default names this host and process: its help says so instead.
            shown_default = action.default not in (None, [], "") and option != "--instance"
            default = f"`{action.default}`" if shown_default else ""
            rows.append((name, f"| {shown} | | {default} | {_cell(meaning or '')} | ours |"))
            continue
        reason = upstreamflags.no_effect(flag, built)
        if option in accepted and reason is None:
            raise ValueError(
                f"{option} is accepted with no effect, and nothing says why (upstreamflags.NO_EFFECT)"
            )
        note = upstreamflags.NOTES.get(name)
        here = (
            f"accepted, no effect: {reason}"
            if reason
            else f"takes effect: {note}"
            if note
            else "takes effect"
        )
        default = f"`{flag.default}`" if flag.default else ""
        rows.append((name, f"| {shown} | {flag.type} | {default} | {_cell(flag.help)} | {_cell(here)} |"))
    missing = set(upstreamflags.FLAGS) - {name for name, _ in rows}
    if missing:
        raise ValueError(f"upstream flags kcm controllers does not declare: {sorted(missing)}")
    return _HEADER + "".join(row + "\n" for _, row in sorted(rows))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="exit 1 when docs/flags.md is out of date")
    args = p.parse_args(argv)
    text = render()
    if not args.check:
        DOC.write_text(text)
        return 0
    if DOC.read_text() != text:
        print(f"{DOC} is out of date: run python -m kcm_cli.flagsdoc", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
