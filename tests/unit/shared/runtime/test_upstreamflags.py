"""Upstream kube-controller-manager v1.32's flags and controllers, and what kcm makes of them."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from kcm_cli import controllers, main
from kcm_shared.base import errors
from kcm_shared.runtime import controllerflags, upstreamflags

ROOT = Path(__file__).resolve().parents[4]
BINARY = next(iter(sorted((ROOT / ".upstream").glob("*/bin/kube-controller-manager"))), None)
BUILT = controllers.BUILTIN


@pytest.mark.skipif(BINARY is None, reason="the upstream binaries are not built here (`make upstream`)")
def test_the_checked_in_table_is_the_pinned_binarys_help() -> None:
    check = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "upstream" / "flags.py"), "--check", "--binary", str(BINARY)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr


def test_the_table_holds_every_flag_of_v1_32() -> None:
    assert upstreamflags.VERSION.startswith("v1.32.")
    # 141 flags of its own, and pflag's --help and --version.
    assert len(upstreamflags.FLAGS) == 143
    assert upstreamflags.FLAGS["concurrent-cron-job-syncs"].default == "5"
    assert upstreamflags.FLAGS["leader-elect"].type == "bool"
    assert upstreamflags.FLAGS["controllers"].default == "[*]"
    assert upstreamflags.FLAGS["v"].shorthand == "v"
    # --help's 134 (AllAlpha and AllBeta among them) and the 45 GA and deprecated ones it hides.
    assert len(upstreamflags.FEATURE_GATES) == 179


def test_the_registry_is_upstreams() -> None:
    names = [c.name for c in upstreamflags.CONTROLLERS]
    assert sorted(names) == sorted(upstreamflags._DATA["controllers"]["all"])
    aliases = [a for c in upstreamflags.CONTROLLERS for a in c.aliases]
    assert len(set(aliases)) == len(aliases) and not set(aliases) & set(names)
    assert {
        "bootstrap-signer-controller",
        "selinux-warning-controller",
        "token-cleaner-controller",
    } == upstreamflags.DISABLED_BY_DEFAULT
    gates = {g for c in upstreamflags.CONTROLLERS for g in c.feature_gates}
    assert gates <= set(upstreamflags.FEATURE_GATES)


def test_every_built_controller_is_upstreams_under_its_names() -> None:
    by_name = {c.name: c for c in upstreamflags.CONTROLLERS}
    for spec in BUILT:
        assert spec.name in by_name, spec.name
        # A controller upstream gives no alias (taint-eviction-controller) has its name as its alias.
        assert spec.alias in (by_name[spec.name].aliases or (spec.name,)), spec.name
        assert spec.enabled_by_default == (not by_name[spec.name].disabled_by_default)


def test_kcm_controllers_declares_every_upstream_flag_with_its_default() -> None:
    args = main.parser().parse_args(["controllers"])
    p = argparse.ArgumentParser()
    controllerflags.add_arguments(p, BUILT)
    assert {f.option for f in upstreamflags.FLAGS.values()} <= set(p._option_string_actions)
    assert (args.leader_elect, args.cluster_name, args.secure_port) == (True, "kubernetes", 10257)
    assert args.requestheader_username_headers == ["x-remote-user"]
    assert args.authorization_always_allow_paths == ["/healthz", "/readyz", "/livez"]
    assert (args.min_resync_period, args.node_eviction_rate, args.controllers) == (43200.0, 0.1, ["*"])
    assert args.concurrent_cron_job_syncs == 5


def names(expression: str) -> list[str]:
    return [spec.name for spec in controllerflags.select(BUILT, expression)]


def test_kubeadms_and_k3ss_selections_run_every_built_controller_on_by_default() -> None:
    everything = names("*")
    assert set(everything) == {spec.name for spec in BUILT if spec.enabled_by_default}
    # kubeadm's selection adds the two controllers that are off by default.
    kubeadm = names("*,bootstrapsigner,tokencleaner")
    assert set(kubeadm) == {spec.name for spec in BUILT}
    assert set(kubeadm) - set(everything) == {"bootstrap-signer-controller", "token-cleaner-controller"}
    assert names("*,-service,-route,-cloud-node-lifecycle") == everything


def test_the_first_mention_of_a_controller_decides() -> None:
    assert names("job,-job") == ["job-controller"]
    assert names("-job,job") == []
    assert "job-controller" not in names("-job-controller,*")
    assert names("horizontalpodautoscaling") == ["horizontal-pod-autoscaler-controller"]


@pytest.mark.parametrize("expression", ["nope", "*,-nope", "job,csrsigning,nope"])
def test_an_unknown_name_is_upstreams_one_line(expression: str) -> None:
    with pytest.raises(errors.ConfigError, match=r'^"nope" is not in the list of known controllers$'):
        controllerflags.select(BUILT, expression)


def test_a_known_controller_kcm_does_not_build_is_reported_with_why() -> None:
    reasons = dict(controllerflags.not_started(BUILT, "*,bootstrapsigner,tokencleaner", {}))
    assert "bootstrap-signer-controller" not in reasons  # asked for, and built
    assert "not built in kcm" not in reasons.values()  # kcm builds every default controller
    fewer = [spec for spec in BUILT if spec.name != "ttl-controller"]
    assert dict(controllerflags.not_started(fewer, "*", {}))["ttl-controller"] == "not built in kcm"
    assert reasons["service-lb-controller"].startswith("skipping a cloud provider controller")
    assert reasons["resourceclaim-controller"].startswith("disabled by a feature gate")
    assert "selinux-warning-controller" not in reasons  # off by default, and not asked for
    assert not set(reasons) & {spec.name for spec in BUILT}
    k3s = dict(controllerflags.not_started(BUILT, "*,-service,-route,-cloud-node-lifecycle", {}))
    assert "service-lb-controller" not in k3s and "bootstrap-signer-controller" not in k3s
    gated = dict(controllerflags.not_started(BUILT, "*", {"DynamicResourceAllocation": True}))
    assert gated["resourceclaim-controller"] == "not built in kcm"


def test_flags_with_no_effect_say_why() -> None:
    built = [spec.name for spec in BUILT]
    # A cloud provider's controller: not one kcm builds.
    assert upstreamflags.no_effect(upstreamflags.FLAGS["concurrent-service-syncs"], built) == (
        "read by the service-lb-controller, which kcm does not build"
    )
    assert upstreamflags.no_effect(upstreamflags.FLAGS["attach-detach-reconcile-sync-period"], built) is None
    assert upstreamflags.no_effect(upstreamflags.FLAGS["node-monitor-grace-period"], built) is None
    assert upstreamflags.no_effect(upstreamflags.FLAGS["concurrent-job-syncs"], built) is None


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("1.32", None),
        ("kube=1.32,kube=1.31", None),
        ("v1.32", None),
        ("a", 'could not parse "a" as version'),
        ("foo=1.32", "component not registered: foo"),
        ("1.32.1", "patch version not allowed, got: kube=1.32.1"),
    ],
)
def test_emulated_version_is_checked_as_upstream_checks_it(text: str, error: str | None) -> None:
    if error is None:
        upstreamflags.emulated_version(text)
    else:
        with pytest.raises(ValueError, match=f"^{re.escape(error)}$"):
            upstreamflags.emulated_version(text)


def test_a_gate_is_on_as_set_else_by_all_alpha_or_all_beta_else_by_its_default() -> None:
    gate, gate_on = upstreamflags.gate, upstreamflags.gate_on
    assert gate_on({}, "JobManagedBy") is True  # beta, on by default in v1.32
    assert gate_on({}, "MaxUnavailableStatefulSet") is False  # alpha, off
    assert gate_on({"AllBeta": False}, "JobManagedBy") is False
    assert gate_on({"AllBeta": False, "JobManagedBy": True}, "JobManagedBy") is True
    assert gate_on({"AllAlpha": True}, "MaxUnavailableStatefulSet") is True
    assert gate_on({"AllAlpha": True}, "JobManagedBy") is True  # AllAlpha leaves beta gates be
    args = argparse.Namespace(feature_gates={"JobManagedBy": False})
    assert gate(args, "JobManagedBy") is False and gate(None, "JobManagedBy") is True
    with pytest.raises(KeyError):
        gate(args, "NoSuchGate")


def _kcm_answer(value: str) -> tuple[list[str], str | None]:
    warned: list[str] = []
    try:
        upstreamflags.set_feature_gates(upstreamflags.feature_gates(value), warned.append)
    except errors.ConfigError as exc:
        return warned, str(exc)
    return warned, None


def _binary_answer(value: str) -> tuple[list[str], str | None]:
    """The warnings and the error kube-controller-manager prints for `--feature-gates=value`
    (its klog lines without their headers)."""
    assert BINARY is not None
    done = subprocess.run(
        [str(BINARY), f"--feature-gates={value}", "--version"], capture_output=True, text=True, timeout=60
    )
    warned = [line.split("] ", 1)[1] for line in done.stderr.splitlines() if line.startswith("W")]
    failed = re.search(r'"command failed" err=(".*")$', done.stderr, re.MULTILINE)
    assert (done.returncode == 0) == (failed is None), done.stderr
    return warned, json.loads(failed.group(1)) if failed else None


GATE_CASES = [
    "JobPodFailurePolicy=true",  # GA: a warning
    "JobPodFailurePolicy=false",  # GA, locked
    "AllowServiceLBStatusOnNonLB=true",  # deprecated, locked to false
    "KMSv1=true",  # deprecated: a warning
    "ExecProbeTimeout=false",  # GA, not locked: a warning
    "JobManagedBy=false,AllAlpha=true,AllBeta=false",
    " kube:JobManagedBy = false ,kube:JobSuccessPolicy=true",
    "NoSuchGate=true",
    "JobManagedBy=maybe",
    "JobManagedBy",
    "x:JobManagedBy=true",
    "kube:JobManagedBy=false,JobSuccessPolicy=true",
    "Foo=x=y",
]


@pytest.mark.skipif(BINARY is None, reason="the upstream binaries are not built here (`make upstream`)")
@pytest.mark.parametrize("value", GATE_CASES)
def test_feature_gates_answer_as_the_binary_does(value: str) -> None:
    assert _kcm_answer(value) == _binary_answer(value)


@pytest.mark.skipif(BINARY is None, reason="the upstream binaries are not built here (`make upstream`)")
def test_every_hidden_gate_warns_or_is_locked_as_the_binary_does() -> None:
    # Upstream walks a Go map: the same warnings and errors, in any order.
    hidden = [n for n, s in upstreamflags._STAGES.items() if s in ("GA", "DEPRECATED")]
    unlocked = ",".join(
        f"{n}={str(not upstreamflags.FEATURE_GATES[n]).lower()}"
        for n in hidden
        if n not in upstreamflags.LOCKED
    )
    kcm, binary = _kcm_answer(unlocked), _binary_answer(unlocked)
    assert (sorted(kcm[0]), kcm[1]) == (sorted(binary[0]), binary[1]) and len(kcm[0]) >= 8
    locked = ",".join(f"{n}={str(not upstreamflags.FEATURE_GATES[n]).lower()}" for n in upstreamflags.LOCKED)
    kcm, binary = _kcm_answer(locked), _binary_answer(locked)
    assert kcm[1] is not None and binary[1] is not None
    refusal = re.compile(r"cannot set feature gate \w+ to \w+, feature is locked to \w+")
    refused = sorted(refusal.findall(kcm[1]))
    assert refused == sorted(refusal.findall(binary[1])) and len(refused) == len(upstreamflags.LOCKED)


def test_a_ga_gate_is_accepted_on_with_a_warning_and_refused_off() -> None:
    warned: list[str] = []
    gates = upstreamflags.set_feature_gates(
        [("", "JobPodFailurePolicy=true"), ("", "JobManagedBy=false")], warned.append
    )
    assert gates == {"JobPodFailurePolicy": True, "JobManagedBy": False}
    assert warned == [
        "Setting GA feature gate JobPodFailurePolicy=true. It will be removed in a future release."
    ]
    assert upstreamflags.gate(argparse.Namespace(feature_gates=gates), "JobPodFailurePolicy") is True
    with pytest.raises(
        errors.ConfigError,
        match=r"^cannot set feature gate JobPodFailurePolicy to false, feature is locked to true$",
    ):
        upstreamflags.set_feature_gates([("", "JobPodFailurePolicy=false")], warned.append)
    # Several refusals read as upstream's aggregate; an unknown gate stops the walk.
    with pytest.raises(
        errors.ConfigError,
        match=r"^\[cannot set feature gate JobPodFailurePolicy .*, unrecognized feature gate: Foo\]$",
    ):
        upstreamflags.set_feature_gates([("", "JobPodFailurePolicy=false,Foo=true,Bar=true")], warned.append)


def test_kcm_judges_the_gates_after_every_flag_and_before_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main.main(["controllers", "--feature-gates=NoSuchGate=true", "--version"]) == 1
    assert capsys.readouterr() == ("", "kcm: unrecognized feature gate: NoSuchGate\n")
    # A bad flag elsewhere is reported first, as pflag's parse comes before the gates.
    assert main.main(["controllers", "--feature-gates=NoSuchGate=true", "--kube-api-qps=x"]) == 1
    assert capsys.readouterr().err.startswith('Error: invalid argument "x" for "--kube-api-qps"')
    assert main.main(["controllers", "--feature-gates=ElasticIndexedJob=true", "--version"]) == 0
    out, err = capsys.readouterr()
    assert upstreamflags.VERSION in out
    assert (
        err
        == "kcm: warning: Setting GA feature gate ElasticIndexedJob=true. It will be removed in a future release.\n"
    )
