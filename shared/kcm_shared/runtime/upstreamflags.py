"""Upstream kube-controller-manager v1.32's flags and controllers, as kcm accepts them.

- `FLAGS`, `FEATURE_GATES`, `VERSION`: upstream's table (`upstream_flags.json` beside this module,
  written from the pinned binary's `--help` by tools/upstream/flags.py, checked by a test).
- `add_accepted(parser)`: declares every upstream flag the parser has not declared yet, with
  upstream's type and default, so a command line written for kube-controller-manager parses;
  `NO_EFFECT` (or the controller a flag belongs to) says why such a flag changes nothing here,
  and docs/flags.md lists them (`kcm_cli.flagsdoc`). The secure serving, authentication and
  authorization flags it declares (`SERVING_GROUP`) take effect: `kcm_shared.bus.secure` reads them.
- `CONTROLLERS`: every controller of upstream's registry (cmd/kube-controller-manager/app
  NewControllerDescriptors) with its aliases, whether it is a cloud provider controller and the
  feature gates it needs; `enabled(expression, canonical)` is upstream's IsControllerEnabled.
- `--feature-gates` is read in two steps, as upstream's: the flag only gathers `[kube:]A=v`
  items (`feature_gates`); once every flag is parsed, `set_feature_gates` checks them as
  component-base's featuregate does (unknown, locked, GA and deprecated gates, from the table's
  probe of the binary) and returns the gates, passing upstream's warnings on, or raises
  ConfigError with upstream's message. The launcher (`kcm_cli.main.parse`) calls it.
- `gate(args, name)`: whether feature gate `name` is on, as upstream's DefaultFeatureGate
  answers: set by `--feature-gates`, else `AllAlpha`/`AllBeta` for a gate of that stage, else
  its v1.32 default. Controllers read it for the gates that change what they do (docs/flags.md
  "Feature gates").
- Called by `kcm_shared.runtime.controllerflags` (declarations, `--controllers`) and the launcher.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kcm_shared.apimachinery import pflagvalue
from kcm_shared.base import errors
from kcm_shared.runtime import pflag

_DATA = json.loads((Path(__file__).with_name("upstream_flags.json")).read_text())
VERSION: str = _DATA["version"]


@dataclass(frozen=True)
class Flag:
    name: str
    shorthand: str
    type: str  # pflag's type word as --help prints it (`int32`, `duration`, `strings`, ...)
    default: str  # as --help prints it (`5m0s`, `[*]`, `kubernetes`)
    section: str  # the --help section (`Generic`, `Job-controller`, ...)
    help: str  # its first line

    @property
    def option(self) -> str:
        return f"--{self.name}"


FLAGS: dict[str, Flag] = {f["name"]: Flag(**f) for f in _DATA["flags"]}
# Every gate of v1.32's kube-controller-manager: those --help lists (alpha, beta) and the GA and
# deprecated ones it hides, with their defaults; `LOCKED` ones refuse any other value.
FEATURE_GATES: dict[str, bool] = {name: gate["default"] for name, gate in _DATA["feature_gates"].items()}
_STAGES: dict[str, str] = {name: gate["stage"] for name, gate in _DATA["feature_gates"].items()}
LOCKED: frozenset[str] = frozenset(name for name, gate in _DATA["feature_gates"].items() if gate["locked"])
DISABLED_BY_DEFAULT: frozenset[str] = frozenset(_DATA["controllers"]["disabled_by_default"])


@dataclass(frozen=True)
class Controller:
    """One entry of upstream's controller registry."""

    name: str
    aliases: tuple[str, ...] = ()
    cloud: bool = False  # started only with a cloud provider, which kcm never has
    feature_gates: tuple[str, ...] = ()  # all must be on for upstream to start it

    @property
    def disabled_by_default(self) -> bool:
        return self.name in DISABLED_BY_DEFAULT


def _c(name: str, *aliases: str, cloud: bool = False, gates: tuple[str, ...] = ()) -> Controller:
    return Controller(name, aliases, cloud, gates)


# Upstream's registry, in its order; names and aliases as its descriptors give them.
CONTROLLERS: tuple[Controller, ...] = (
    _c("serviceaccount-token-controller", "serviceaccount-token"),
    _c("endpoints-controller", "endpoint"),
    _c("endpointslice-controller", "endpointslice"),
    _c("endpointslice-mirroring-controller", "endpointslicemirroring"),
    _c("replicationcontroller-controller", "replicationcontroller"),
    _c("pod-garbage-collector-controller", "podgc"),
    _c("resourcequota-controller", "resourcequota"),
    _c("namespace-controller", "namespace"),
    _c("serviceaccount-controller", "serviceaccount"),
    _c("garbage-collector-controller", "garbagecollector"),
    _c("daemonset-controller", "daemonset"),
    _c("job-controller", "job"),
    _c("deployment-controller", "deployment"),
    _c("replicaset-controller", "replicaset"),
    _c("horizontal-pod-autoscaler-controller", "horizontalpodautoscaling"),
    _c("disruption-controller", "disruption"),
    _c("statefulset-controller", "statefulset"),
    _c("cronjob-controller", "cronjob"),
    _c("certificatesigningrequest-signing-controller", "csrsigning"),
    _c("certificatesigningrequest-approving-controller", "csrapproving"),
    _c("certificatesigningrequest-cleaner-controller", "csrcleaner"),
    _c("ttl-controller", "ttl"),
    _c("bootstrap-signer-controller", "bootstrapsigner"),
    _c("token-cleaner-controller", "tokencleaner"),
    _c("node-ipam-controller", "nodeipam"),
    _c("node-lifecycle-controller", "nodelifecycle"),
    _c("service-lb-controller", "service", cloud=True),
    _c("node-route-controller", "route", cloud=True),
    _c("cloud-node-lifecycle-controller", "cloud-node-lifecycle", cloud=True),
    _c("persistentvolume-binder-controller", "persistentvolume-binder"),
    _c("persistentvolume-attach-detach-controller", "attachdetach"),
    _c("persistentvolume-expander-controller", "persistentvolume-expander"),
    _c("clusterrole-aggregation-controller", "clusterrole-aggregation"),
    _c("persistentvolumeclaim-protection-controller", "pvc-protection"),
    _c("persistentvolume-protection-controller", "pv-protection"),
    _c("ttl-after-finished-controller", "ttl-after-finished"),
    _c("root-ca-certificate-publisher-controller", "root-ca-cert-publisher"),
    _c("ephemeral-volume-controller", "ephemeral-volume"),
    _c(
        "storageversion-garbage-collector-controller",
        "storage-version-gc",
        gates=("APIServerIdentity", "StorageVersionAPI"),
    ),
    _c("resourceclaim-controller", "resource-claim-controller", gates=("DynamicResourceAllocation",)),
    _c("legacy-serviceaccount-token-cleaner-controller", "legacy-service-account-token-cleaner"),
    _c("validatingadmissionpolicy-status-controller"),
    _c("taint-eviction-controller", gates=("SeparateTaintEvictionController",)),
    _c("service-cidr-controller", gates=("MultiCIDRServiceAllocator",)),
    _c("storage-version-migrator-controller", gates=("StorageVersionMigrator",)),
    _c("kube-apiserver-serving-clustertrustbundle-publisher-controller", gates=("ClusterTrustBundle",)),
    _c("selinux-warning-controller", gates=("SELinuxChangePolicy",)),
    _c("volumeattributesclass-protection-controller", gates=("VolumeAttributesClass",)),
)


def enabled(expression: list[str], name: str, disabled_by_default: bool) -> bool:
    """Upstream's IsControllerEnabled over canonical names: the first `name` or `-name` decides;
    else `*` turns on what is on by default; else off."""
    star = False
    for item in expression:
        if item == name:
            return True
        if item == f"-{name}":
            return False
        star = star or item == "*"
    return star and not disabled_by_default


def gate_on(gates: dict[str, bool], name: str) -> bool:
    """Whether gate `name` is on, given --feature-gates' `gates`: set there, else by `AllAlpha` or
    `AllBeta` for an alpha or beta gate, else its default (a gate --help does not list is locked
    on, as upstream's GA gates are)."""
    if name in gates:
        return gates[name]
    stage = _STAGES.get(name)
    if stage == "ALPHA" and "AllAlpha" in gates:
        return gates["AllAlpha"]
    if stage == "BETA" and "AllBeta" in gates:
        return gates["AllBeta"]
    return FEATURE_GATES.get(name, True)


def gates_on(gates: dict[str, bool], needed: Iterable[str]) -> bool:
    """Whether every gate in `needed` is on (`gate_on`)."""
    return all(gate_on(gates, name) for name in needed)


def gate(args: argparse.Namespace | None, name: str) -> bool:
    """Whether gate `name` is on for a process started with `args` (its `--feature-gates`)."""
    if name not in FEATURE_GATES:
        raise KeyError(f"not a feature gate of v1.32's kube-controller-manager: {name}")
    return gate_on(getattr(args, "feature_gates", None) or {}, name)


def feature_gates(text: str) -> list[tuple[str, str]]:
    """`--feature-gates`' argparse type: upstream's colon-separated multimap, which takes any text
    (`A=true,kube:B=false` as [("", "A=true"), ("kube", "B=false")]); `set_feature_gates` judges it."""
    out: list[tuple[str, str]] = []
    for pair in text.split(","):
        if pair:
            component, colon, item = pair.partition(":")
            out.append((component.strip(), item.strip()) if colon else ("", component.strip()))
    return out


def set_feature_gates(items: list[tuple[str, str]], warn: Callable[[str], None]) -> dict[str, bool]:
    """The gates `--feature-gates`' `items` set, each warning upstream prints on the way passed
    to `warn` (`Setting GA feature gate X=true. ...`); ConfigError with upstream's message for
    what it refuses. Upstream walks Go maps, in no fixed order; kcm takes the order given, so
    where several items are wrong it answers as one of upstream's runs does."""
    components = dict.fromkeys(component for component, _ in items)
    for component in components:
        if component == "" and "kube" in components:
            raise errors.ConfigError(
                "set kube feature gates with default empty prefix or kube: prefix consistently, do not mix use"
            )
        if component not in ("", "kube"):
            raise errors.ConfigError(f"component not registered: {component}")
    wanted: dict[str, bool] = {}
    for pair in (pair for _, joined in items for pair in joined.split(",") if pair):
        key, equals, value = pair.partition("=")
        key, value = key.strip(), value.strip()
        if not equals:
            raise errors.ConfigError(f"missing bool value for {key}")
        try:
            wanted[key] = pflagvalue.boolean(value)
        except ValueError as exc:
            raise errors.ConfigError(f"invalid value of {key}={value}, err: {exc}") from None
    refused: list[str] = []
    for name, on in wanted.items():
        if name not in FEATURE_GATES:
            refused.append(f"unrecognized feature gate: {name}")
            break
        if name in LOCKED and on != FEATURE_GATES[name]:
            locked_to = str(FEATURE_GATES[name]).lower()
            refused.append(
                f"cannot set feature gate {name} to {str(on).lower()}, feature is locked to {locked_to}"
            )
            continue
        stage = {"GA": "GA", "DEPRECATED": "deprecated"}.get(_STAGES[name])
        if stage:
            warn(
                f"Setting {stage} feature gate {name}={str(on).lower()}. It will be removed in a future release."
            )
    if refused:
        # utilerrors.NewAggregate's text: one error as it is, several in brackets.
        raise errors.ConfigError(refused[0] if len(refused) == 1 else f"[{', '.join(refused)}]")
    return wanted


def emulated_version(text: str) -> list[str]:
    """`--emulated-version`'s argparse type: `[kube=]<major>.<minor>` items, with upstream's errors."""
    items = pflagvalue.strings(text)
    for item in items:
        component, sep, version = item.partition("=")
        if not sep:
            component, version = "kube", item
        if component != "kube":
            raise ValueError(f"component not registered: {component}")
        parts = version.removeprefix("v").split(".")
        if not 2 <= len(parts) <= 3 or not all(part.isdigit() for part in parts):
            raise ValueError(f'could not parse "{version}" as version')
        if len(parts) == 3:
            raise ValueError(f"patch version not allowed, got: {component}={version}")
    return items


# Why an accepted flag changes nothing here, where the controller it belongs to does not say it
# (see `no_effect`). A flag kcm declares itself takes effect unless it is listed here.
_HTTP2 = "the secure port speaks HTTP/1.1 only (aiohttp has no HTTP/2 server)"
_CLOUD = "read only by the cloud provider controllers, which kcm never runs (upstream 1.32 has no in-tree cloud provider either)"
_LEADER = (
    "kcm's controllers do not elect one leader: the coordinator hands each replica partitions of the "
    "work; `kcm watcher` and `kcm coordinator` hold their own Leases with these flags (above, "
    '"Leader election")'
)
_IN_TREE_VOLUMES = (
    "read by the persistentvolume-binder-controller's in-tree volume plugins (hostPath, NFS, flex): kcm builds "
    "none, only CSI and migrated volumes (docs/controllers.md)"
)
_LOGS = "kcm logs one JSON object per line (--log-level), with no klog options"
_METRICS = "kcm's /metrics serves every metric; there is no filter or hidden set"
NO_EFFECT: dict[str, str] = {
    "disable-http2-serving": _HTTP2,
    "http2-max-streams-per-connection": _HTTP2,
    "tls-sni-cert-key": "the secure port serves one certificate (--tls-cert-file or the generated one) to every client",
    "profiling": "no /debug/pprof: a Python process has no Go profiler to serve",
    "contention-profiling": "no /debug/pprof: a Python process has no Go profiler to serve",
    "enable-leader-migration": "leader migration hands controllers to cloud-controller-manager; kcm runs no cloud controller",
    "leader-migration-config": "leader migration hands controllers to cloud-controller-manager; kcm runs no cloud controller",
    "cloud-provider": _CLOUD,
    "cloud-config": _CLOUD,
    "external-cloud-volume-plugin": _CLOUD,
    "configure-cloud-routes": _CLOUD,
    "route-reconciliation-period": _CLOUD,
    "cluster-name": "read only by controllers kcm does not build (the cloud ones); the persistentvolume "
    "binder passes it only to in-tree provisioners, which kcm does not build",
    "enable-hostpath-provisioner": _IN_TREE_VOLUMES,
    "flex-volume-plugin-dir": _IN_TREE_VOLUMES,
    "pv-recycler-increment-timeout-nfs": _IN_TREE_VOLUMES,
    "pv-recycler-minimum-timeout-hostpath": _IN_TREE_VOLUMES,
    "pv-recycler-minimum-timeout-nfs": _IN_TREE_VOLUMES,
    "pv-recycler-pod-template-filepath-hostpath": _IN_TREE_VOLUMES,
    "pv-recycler-pod-template-filepath-nfs": _IN_TREE_VOLUMES,
    "pv-recycler-timeout-increment-hostpath": _IN_TREE_VOLUMES,
    "leader-elect-lease-duration": _LEADER,
    "leader-elect-renew-deadline": _LEADER,
    "leader-elect-resource-lock": _LEADER,
    "leader-elect-resource-name": _LEADER,
    "leader-elect-resource-namespace": _LEADER,
    "leader-elect-retry-period": _LEADER,
    "controller-start-interval": "kcm starts its controllers at once; the interval only spread upstream's start-up",
    "min-resync-period": "kcm's caches follow the bus and never resync from a period",
    "emulated-version": "kcm follows v1.32 only",
    "log-flush-frequency": _LOGS,
    "log-json-info-buffer-size": _LOGS,
    "log-json-split-stream": _LOGS,
    "log-text-info-buffer-size": _LOGS,
    "log-text-split-stream": _LOGS,
    "logging-format": _LOGS,
    "vmodule": _LOGS,
    "allow-metric-labels": _METRICS,
    "allow-metric-labels-manifest": _METRICS,
    "disabled-metrics": _METRICS,
    "show-hidden-metrics-for-version": _METRICS,
}


# What a flag kcm implements does here where that is not all upstream's flag does.
NOTES: dict[str, str] = {
    "kube-api-content-type": "kcm's default is application/json; protobuf makes reads of built-in objects "
    'protobuf, writes stay JSON (above, "API content type")',
    "version": "prints kcm's version and the upstream release it follows; --version=vX.Y.Z (which sets "
    "upstream's reported version) is accepted and changes nothing",
    "controllers": "upstream's names and aliases; a controller kcm does not build is logged as not started",
    "leader-elect": "true only: false is refused by kcm's controllers, which run the partitions the coordinator "
    'grants them; `kcm watcher` and `kcm coordinator` take false (above, "Leader election")',
    "use-service-account-credentials": "the ServiceAccounts are in --service-account-credentials-namespace "
    "(kube-system by default, as upstream's)",
    "feature-gates": "v1.32's gates (GA and deprecated ones too), with upstream's errors and warnings; "
    "the four Job gates change the Job controller; "
    "the others decide which feature-gated upstream controllers are reported as not started (above, "
    '"Feature gates")',
    "node-monitor-period": "the node-lifecycle-controller's monitor pass, as upstream's (whose help names only "
    "the cloud controller's use of it)",
    "v": "4 and above turn on kcm's debug logs (kcm has no finer levels); below 4, --log-level decides",
    "secure-port": "HTTPS with delegated authentication and authorization (kcm_shared.bus.secure): /healthz, "
    "/livez, /readyz, /healthz/<check>, /metrics, /configz; the plain --ops-port is a development option",
    "tls-cipher-suites": "Go's names of the TLS 1.0-1.2 suites, mapped onto OpenSSL's; TLS 1.3's names are "
    "accepted but OpenSSL offers its own TLS 1.3 suites whatever they say",
    "tls-min-version": "without it, TLS 1.2 as Go's server default",
    "cert-dir": "the generated pair is kube-controller-manager.crt/.key; an existing readable pair there is reused",
    "client-ca-file": "a client certificate counts when a CA of the bundle issued it directly (no intermediates); "
    "one no configured CA issued is refused in the TLS handshake (upstream answers 401)",
    "requestheader-client-ca-file": "as --client-ca-file: issued directly by a CA of the bundle",
    "authentication-kubeconfig": "empty: the in-cluster configuration in a Pod, else tokens are not reviewed "
    "(anonymous), as upstream's optional remote kubeconfig",
    "authorization-kubeconfig": "empty: the in-cluster configuration in a Pod, else everything but the "
    "always-allowed paths and system:masters is forbidden, as upstream's",
    "authentication-skip-lookup": "the CAs found in kube-system/extension-apiserver-authentication are read "
    "once at start (upstream watches them)",
}


def no_effect(flag: Flag, built: Iterable[str]) -> str | None:
    """Why `flag` changes nothing in kcm, or None when kcm implements it: `NO_EFFECT`, else the
    controller its --help section names when kcm does not build that controller."""
    if flag.name in NO_EFFECT:
        return NO_EFFECT[flag.name]
    owner = flag.section.lower()
    if owner in {c.name for c in CONTROLLERS} and owner not in set(built):
        return f"read by the {owner}, which kcm does not build"
    return None


def _default(flag: Flag) -> Any:
    text = flag.default
    if flag.type in ("strings", "namedCertKey"):
        inner = text.strip("[]")
        return inner.split(",") if inner else []
    if flag.type == "colonSeparatedMultimapStringString":
        return []
    if flag.type in ("stringToString", "pattern=N,..."):
        return {}
    return _TYPES.get(flag.type, pflagvalue.string)(text)


_TYPES: dict[str, Callable[[str], Any]] = {
    **pflagvalue.BY_TYPE,
    "colonSeparatedMultimapStringString": feature_gates,
}


ACCEPTED_GROUP = "kube-controller-manager flags accepted with no effect here (docs/flags.md)"
SERVING_GROUP = "upstream's secure serving, authentication and authorization"
# Declared here with upstream's types and defaults, read by kcm_shared.bus.secure.server.
SERVING_SECTIONS = frozenset({"Secure serving", "Authentication", "Authorization"})


def add_accepted(parser: argparse.ArgumentParser, skip: Iterable[str] = ()) -> None:
    """Declare each upstream flag `parser` lacks, with upstream's type and default (its value
    lands in the namespace under the usual dest), in one argument group; not those in `skip`."""
    known = {*parser._option_string_actions, *skip}
    accepted = parser.add_argument_group(ACCEPTED_GROUP)
    serving = parser.add_argument_group(SERVING_GROUP)
    for flag in FLAGS.values():
        if flag.option in known or flag.name in ("help", "version"):
            continue
        group = serving if flag.section in SERVING_SECTIONS and flag.name not in NO_EFFECT else accepted
        names = (f"-{flag.shorthand}", flag.option) if flag.shorthand else (flag.option,)
        text = flag.help.replace("%", "%%")
        if flag.type == "bool":
            pflag.add_bool(group, *names, default=flag.default == "true", help=text)
            continue
        many = flag.type in (
            "strings",
            "stringToString",
            "colonSeparatedMultimapStringString",
            "namedCertKey",
        )
        group.add_argument(
            *names,
            type=emulated_version if flag.name == "emulated-version" else _TYPES[flag.type],
            default=_default(flag),
            action=pflag.Merge if many else "store",
            metavar=flag.type,
            help=text,
        )
