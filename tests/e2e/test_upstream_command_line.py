"""`kcm controllers` takes upstream kube-controller-manager v1.32's command line, as a real process.

- Every upstream flag of the checked-in table (`upstreamflags.FLAGS`, which follows the pinned
  binary's --help), once with its default and once with a typed sample in other pflag spellings
  (`_` for `-`, `--flag value`, a bare bool), parses: the process reaches `--version`, which
  upstream also handles after parsing every flag, and exits 0.
- What upstream refuses ends the process with one line and exit status 1.
- kubeadm's own command line (cmd/kubeadm/app/phases/controlplane/manifests.go,
  getControllerManagerCommand: the paths replaced by a `kcm dev` stack's, the bus flags added)
  starts `kcm controllers` beside that stack: its secure port answers /healthz over TLS, the coordinator gives
  it partitions, and the controllers kubeadm asks for that kcm does not build are logged once each.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from kcm_cli import natsd
from kcm_shared.runtime import controllerflags, upstreamflags

from tests.conftest import KCM, stop_process, wait_for
from tests.e2e import devstack

# A valid value of each pflag type, written as a user would.
SAMPLES = {
    "bool": "true",
    "int32": "3",
    "int": "3",
    "Level": "2",
    "float32": "0.5",
    "float": "0.5",
    "duration": "1m30s",
    "string": "sample",
    "ip": "127.0.0.1",
    "strings": "a,b",
    "stringToString": "a=b,c=d",
    "colonSeparatedMultimapStringString": "JobManagedBy=true,AllBeta=false",
    "pattern=N,...": "gc*=2,job=4",
    "quantity": "1Ki",
    "namedCertKey": "a.crt,a.key:*.example.com",
}
# Values a sample would not fit: kcm checks these at parse time as upstream does at start.
SAMPLE = {
    "controllers": "*,bootstrapsigner,tokencleaner",
    "emulated-version": "kube=1.32",
    "feature-gates": SAMPLES["colonSeparatedMultimapStringString"],
}
SKIP = {"help", "version"}
ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = next(iter(sorted((ROOT / ".upstream").glob("*/bin/kube-controller-manager"))), None)


def as_typed(flag: upstreamflags.Flag) -> str:
    """The default as a command line writes it: `[a,b]` as `a,b`."""
    return flag.default[1:-1] if flag.type in ("strings", "namedCertKey") else flag.default


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KCM, "controllers", *argv], capture_output=True, text=True, timeout=120)


def upstream_takes(argv: list[str]) -> None:
    """Where the pinned binary is built, it takes `argv` too: the samples are upstream's syntax."""
    if UPSTREAM is not None:
        done = subprocess.run([str(UPSTREAM), *argv, "--version"], capture_output=True, text=True, timeout=60)
        assert (done.returncode, done.stdout) == (0, f"Kubernetes {upstreamflags.VERSION}\n"), done.stderr[
            -2000:
        ]


def test_every_upstream_flag_with_its_default_parses() -> None:
    argv = [
        f"{flag.option}={as_typed(flag)}"
        for flag in upstreamflags.FLAGS.values()
        # pflag itself refuses these empty defaults as values (`must be formatted as key=value`).
        if flag.name not in SKIP and flag.type not in ("stringToString", "namedCertKey")
    ]
    assert len(argv) == len(upstreamflags.FLAGS) - len(SKIP) - 2
    upstream_takes(argv)
    done = run(*argv, "--version")
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout == f"kcm v0.1.0 (kube-controller-manager {upstreamflags.VERSION} compatible)\n"


def test_every_upstream_flag_with_a_typed_sample_in_pflags_other_spellings_parses() -> None:
    argv: list[str] = []
    for flag in upstreamflags.FLAGS.values():
        if flag.name in SKIP:
            continue
        name = "--" + flag.name.replace("-", "_")
        if flag.type == "bool":
            argv.append(name)  # a bare bool is true
        else:
            argv += [name, SAMPLE.get(flag.name, SAMPLES[flag.type])]  # the value as the next word
    upstream_takes(argv)
    done = run(*argv, "--version=true")
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert upstreamflags.VERSION in done.stdout


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["--foo"], "Error: unknown flag: --foo"),
        (["--cidr-allocator-t=x"], "Error: unknown flag: --cidr-allocator-t"),
        (
            ["--allocate-node-cidrs=maybe"],
            'Error: invalid argument "maybe" for "--allocate-node-cidrs" flag: '
            'strconv.ParseBool: parsing "maybe": invalid syntax',
        ),
        (
            ["--feature-gates=NoSuchGate=true"],
            # Judged after every flag parsed, as upstream's ("command failed" there).
            "kcm: unrecognized feature gate: NoSuchGate",
        ),
        # Checked before the process connects anywhere (no NATS or API server runs here).
        (
            # Upstream's single replica without a Lease would own partitions no coordinator
            # granted (docs/flags.md "Leader election"); the watcher and the coordinator take it.
            ["--leader-elect=false", "--nats-url=nats://127.0.0.1:1"],
            "kcm: " + controllerflags.LEADER_ELECT_FALSE,
        ),
        (
            ["--controllers=*,nope", "--nats-url=nats://127.0.0.1:1"],
            'kcm: "nope" is not in the list of known controllers',
        ),
    ],
)
def test_what_upstream_refuses_is_one_line_and_exit_1(argv: list[str], line: str) -> None:
    done = run(*argv)
    assert (done.returncode, done.stdout, done.stderr) == (1, "", line + "\n")


# kubeadm's controller set: the stack's NATS identity for its controllers is scoped to the
# controllers it runs, so it must include the bootstrap signer and token cleaner kubeadm asks for.
stack = devstack.stack_fixture(
    "--nodes",
    "0",
    "--allocate-node-cidrs=true",
    "--cluster-cidr=10.244.0.0/16",
    "--controllers=*,bootstrapsigner,tokencleaner",
)


def kubeadm_argv(state: Path) -> list[str]:
    """kubeadm's kube-controller-manager flags for a cluster with a pod network, its paths
    pointing at the stack's (kubeadm's front-proxy CA is the stack's CA here)."""
    pki, kubeconfig = state / "pki", state / "kubeconfig"
    return [
        "--allocate-node-cidrs=true",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--client-ca-file={pki / 'ca.crt'}",
        "--cluster-cidr=10.244.0.0/16",
        "--cluster-name=kubernetes",
        f"--cluster-signing-cert-file={pki / 'ca.crt'}",
        f"--cluster-signing-key-file={pki / 'ca.key'}",
        "--controllers=*,bootstrapsigner,tokencleaner",
        f"--kubeconfig={kubeconfig}",
        "--leader-elect=true",
        f"--requestheader-client-ca-file={pki / 'ca.crt'}",
        f"--root-ca-file={pki / 'ca.crt'}",
        f"--service-account-private-key-file={pki / 'sa.key'}",
        "--service-cluster-ip-range=10.96.0.0/12",
        "--use-service-account-credentials=true",
    ]


@pytest.fixture
def kubeadms(stack: devstack.DevStack, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str, Path]]:
    """`kcm controllers` with kubeadm's command line and the stack's bus: the process, its secure
    port's URL and its log. The port is a free one rather than upstream's 10257, which another
    process on this host may hold."""
    port = natsd.free_port()
    bus = ["--nats-url", (stack.state / "nats.url").read_text().strip()]
    bus += ["--nats-nkey-seed", str(stack.state / "nats-auth" / "controllers.nk")]
    bus += [f"--secure-port={port}", "--instance=kubeadm"]
    log = tmp_path / "kubeadm.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [KCM, "controllers", *kubeadm_argv(stack.state), *bus], stdout=out, stderr=out
        )
    try:
        yield proc, f"https://127.0.0.1:{port}", log
    finally:
        stop_process(proc)


def answers_ok(url: str) -> bool:
    """200 over TLS; the certificate is generated in memory (no --cert-dir), so not checked, as
    kubeadm's probe does not check it."""
    try:
        with urllib.request.urlopen(url, timeout=5, context=ssl._create_unverified_context()) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def test_kubeadms_command_line_starts_kcm_controllers(
    stack: devstack.DevStack, kubeadms: tuple[subprocess.Popen[bytes], str, Path]
) -> None:
    proc, url, log = kubeadms
    wait_for(
        lambda: proc.poll() is not None or answers_ok(url + "/healthz"),
        120,
        what=f"kubeadm's kcm controllers healthy: {log.read_text()[-3000:] if log.exists() else ''}",
    )
    assert proc.poll() is None, log.read_text()[-5000:]

    def owns_partitions() -> bool:
        controllers = stack.status().get("controllers", {})
        return any(
            "kubeadm" in str(owner)
            for c in controllers.values()
            for owner in c.get("partitions", {}).values()
        )

    wait_for(owns_partitions, 120, what=f"partitions for the kubeadm instance: {stack.status()}")
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    not_started = {e["controller"]: e["reason"] for e in lines if e.get("msg") == "controller not started"}
    # Off by default, and asked for by kubeadm: both run.
    assert "bootstrap-signer-controller" not in not_started
    assert "token-cleaner-controller" not in not_started
    assert "validatingadmissionpolicy-status-controller" not in not_started
    assert not_started["service-lb-controller"].startswith("skipping a cloud provider controller")
    assert sum(1 for e in lines if e.get("controller") == "service-lb-controller") == 1
