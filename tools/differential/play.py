"""Play scenarios under one controller manager on the upstream API server, and keep what they left.

- `side(state, name, log)`: a context manager running `kcm dev --apiserver=upstream` on the state
  directory `state`, with `--reference` (upstream kube-controller-manager) when `name` is
  REFERENCE; it yields the admin kubeconfig once `kcm dev` prints its ready line and stops the
  stack (Ctrl-C) on the way out. etcd keeps its data in `state/etcd`, so both sides play on the
  same cluster, one after the other.
- `play(kubeconfig, scenario, namespace, out)`: creates `namespace`, waits for what every
  namespace gets from the controllers (ServiceAccount `default`, ConfigMap `kube-root-ca.crt`),
  runs the scenario's script with bash (lib.sh's helpers sourced first), waits until the
  namespace is quiet, and writes the namespace's objects (`final.json`) beside the script's own
  captures in `out`. Returns the script's failure, "" when it passed.

tools/differential/__main__.py calls these, once per side, with every scenario of the run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kcm_cli import upstream

HERE = Path(__file__).resolve().parent
LIB = HERE / "lib.sh"
REFERENCE, KCM = "reference", "kcm"
# Both sides': a Node that never posts a status is judged after 20 s instead of a minute (the
# nodelifecycle scenario); `kcm dev --reference` hands it to kube-controller-manager.
BOTH_FLAGS = ["--node-startup-grace-period=20s"]
KCM_FLAGS = [
    "--controllers=*,bootstrapsigner,tokencleaner",  # as upstream.reference_argv
    "--allocate-node-cidrs",
    f"--cluster-cidr={upstream.POD_CIDR}",
    f"--service-cluster-ip-range={upstream.SERVICE_CIDR}",
    *BOTH_FLAGS,
]
START_TIMEOUT = 180.0
SETTLE_TIMEOUT = 60.0
QUIET_POLLS = 3  # unchanged snapshots in a row, a second apart: no controller is still writing
# What the controllers write in a namespace; `final.json` holds all of it.
KINDS = ",".join(
    [
        "pods",
        "replicasets.apps",
        "deployments.apps",
        "replicationcontrollers",
        "statefulsets.apps",
        "daemonsets.apps",
        "controllerrevisions.apps",
        "jobs.batch",
        "cronjobs.batch",
        "services",
        "endpoints",
        "endpointslices.discovery.k8s.io",
        "serviceaccounts",
        "secrets",
        "configmaps",
        "resourcequotas",
        "poddisruptionbudgets.policy",
        "horizontalpodautoscalers.autoscaling",
        "persistentvolumeclaims",
        "events",
    ]
)


def kcm_argv() -> list[str]:
    beside = Path(sys.executable).with_name("kcm")
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "kcm_cli.main"]


@contextlib.contextmanager
def side(state: Path, name: str, log: Path) -> Iterator[Path]:
    """`kcm dev --apiserver=upstream` (with `--reference` for REFERENCE) on `state`; its kubeconfig."""
    argv = [*kcm_argv(), "dev", "--apiserver=upstream", "--state-dir", str(state)]
    # kcm's controllers as upstream.reference_argv configures kube-controller-manager's.
    argv += ["--reference", *BOTH_FLAGS] if name == REFERENCE else KCM_FLAGS
    with open(log, "a") as out:
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=out,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    timer = threading.Timer(START_TIMEOUT, proc.kill)  # a hang at start-up must not hang the run
    timer.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            with open(log, "a") as out:
                out.write(line)
            if line.startswith("kcm dev ready"):
                break
        else:
            raise RuntimeError(f"kcm dev ({name}) stopped before it was ready; see {log}")
        timer.cancel()
        # Keep reading, so a chatty stack never blocks on a full pipe.
        threading.Thread(target=_drain, args=(proc, log), daemon=True).start()
        yield state / "kubeconfig"
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def _drain(proc: subprocess.Popen[str], log: Path) -> None:
    assert proc.stdout is not None
    with open(log, "a") as out:
        for line in proc.stdout:
            out.write(line)


def kubectl(kubeconfig: Path, *args: str, timeout: float = 60) -> str:
    """kubectl's stdout; RuntimeError with its stderr when it fails."""
    exe = shutil.which("kubectl") or "kubectl"
    res = subprocess.run(
        [exe, "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True, timeout=timeout
    )
    if res.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {res.stderr.strip()}")
    return res.stdout


def snapshot(kubeconfig: Path, namespace: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(kubectl(kubeconfig, "get", KINDS, "-n", namespace, "-o", "json"))
    return doc


def _versions(doc: dict[str, Any]) -> set[tuple[str, str, str]] | None:
    """What changes with every write in the namespace; None while an object is being deleted (a
    pod's grace period runs: its end is a write still to come). An Event counts when it appears,
    not when its count goes up: a controller that retries for ever (an autoscaler without
    metrics, every 15 s) repeats its Events on both sides, and its namespace is settled all the
    same."""
    if any("deletionTimestamp" in o["metadata"] for o in doc["items"]):
        return None
    return {
        (
            o["kind"],
            o["metadata"]["name"],
            "" if o["kind"] == "Event" else o["metadata"].get("resourceVersion", ""),
        )
        for o in doc["items"]
    }


def settle(kubeconfig: Path, namespace: str) -> tuple[dict[str, Any], bool]:
    """The namespace's objects once nothing in it changed for QUIET_POLLS polls in a row, and
    whether it got there within SETTLE_TIMEOUT (else the last snapshot)."""
    deadline = time.monotonic() + SETTLE_TIMEOUT
    doc = snapshot(kubeconfig, namespace)
    same = 0
    while same < QUIET_POLLS:
        if time.monotonic() > deadline:
            return doc, False
        time.sleep(1.0)  # the poll interval of a condition, bounded by the deadline above
        later = snapshot(kubeconfig, namespace)
        now = _versions(later)
        same = same + 1 if now is not None and now == _versions(doc) else 0
        doc = later
    return doc, True


def play(kubeconfig: Path, scenario: Path, namespace: str, out: Path) -> str:
    """Run one scenario in a new namespace; its failure ("" if none). See the module docstring."""
    captures = out / "captures"
    captures.mkdir(parents=True, exist_ok=True)
    kubectl(kubeconfig, "create", "namespace", namespace)
    for what in ("serviceaccount/default", "configmap/kube-root-ca.crt"):
        kubectl(kubeconfig, "wait", "-n", namespace, what, "--for=create", "--timeout=60s", timeout=70)
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "NS": namespace, "CAPTURES": str(captures)}
    script = f"set -euo pipefail; source {LIB}; source {scenario}"
    try:
        res = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=600)
        error = "" if res.returncode == 0 else f"exit {res.returncode}: {res.stderr.strip()[-2000:]}"
    except subprocess.TimeoutExpired:
        error = "the script ran for more than 600 s"
    (out / "namespace").write_text(namespace)
    doc, quiet = settle(kubeconfig, namespace)
    if not quiet and not error:
        error = f"the namespace kept changing for {SETTLE_TIMEOUT:.0f} s"
    (out / "final.json").write_text(json.dumps(doc, indent=1))
    (out / "error").write_text(error)
    return error
