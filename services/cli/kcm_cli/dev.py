"""`kcm dev`: the whole local stack in one foreground command (what `make run` starts).

The embedded API server runs in this process; nats-server, the watcher, the coordinator, the
controller services and the simulator run as supervised child processes (restarted when they
die, like a compose restart policy), with their logs and JetStream files under the state
directory. `kcm status` finds the stack through `STATE_DIR/coordinator.url`. Everything
under the state directory is its owner's alone (files 0600, directories 0700): the API
server's database holds every Secret, the logs name objects, pki/ holds the cluster's keys.

Two switches swap in upstream's own binaries (`make upstream`; kcm_cli.upstream runs them):
- `--apiserver=upstream`: etcd and kube-apiserver, supervised like the rest, in place of the
  embedded server. The admin kubeconfig is the same file; the watcher, the coordinator and the
  controllers run as their ServiceAccounts in kcm-system, authorized by k8s/'s RBAC alone (the
  controllers with `--use-service-account-credentials`), so a missing permission shows as a 403.
- `--reference`: upstream kube-controller-manager, as kubeadm runs it, in place of NATS, the
  watcher, the coordinator and kcm's controllers, on either API server: the yardstick. No
  kube-scheduler: the simulator binds pods, as it does for kcm. `--controllers` other than `*`
  becomes its --controllers (upstream's names and syntax), else kubeadm's.

The simulator is a process of its own, as a cluster's scheduler and kubelets are, rather than
a task beside the API server: sharing its loop, the simulator's own work (decoding every pod
event, scheduling, building statuses) came out of the API server's core, the one every pod
burst waits on. Measured with it apart: a StatefulSet's 0 -> 300 burst at 0.99-1.04 of a
tight client (0.74-0.91 in-process), a DaemonSet over 1,000 nodes at 1,050-2,190 pods/s
(960-1,430).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import ssl
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kcm_apiserver import main as apiserver_main
from kcm_apiserver import nodeports, strategies
from kcm_coordinator import status
from kcm_shared import runtime
from kcm_shared.base import errors
from kcm_shared.client import kubeclient
from kcm_shared.runtime import controllerflags, upstreamflags
from kcm_simulator import defaults as simulator_defaults

from kcm_cli import natsauth, natsd, pki, supervisor, upstream
from kcm_cli.controllers import BUILTIN

READY_TIMEOUT = 60.0
APISERVER_STOP_GRACE = 5.0  # kube-apiserver's, before SIGKILL
EMBEDDED, UPSTREAM = "embedded", "upstream"  # --apiserver
# With this controller running, the simulator's nodes wait for the pod CIDRs it gives them.
NODE_IPAM = "node-ipam-controller"
NODE_LIFECYCLE = "node-lifecycle-controller"  # without it the simulator lifts the not-ready taint
PV_BINDER = "persistentvolume-binder-controller"  # without it the simulator ignores claims
ATTACH_DETACH = "persistentvolume-attach-detach-controller"  # without it, attachments
SIM_CONTROL_FILE = "sim-control.port"  # the simulator's control port, for `kcm sim --add-nodes`


@dataclass
class DevOptions:
    state_dir: Path
    kubeconfig_out: Path
    port: int = 0
    nodes: int = 3
    pod_start_delay: float = 0.5  # the simulator's
    sim_backoff_scale: float = 1.0  # the simulator's --backoff-scale
    heartbeat_interval: float = 10.0  # the simulator's: its nodes' Lease renewals and status posts
    zones: int = 3  # the simulator's
    controllers: str = "*"
    replicas: dict[str, int] = field(default_factory=dict)
    controller_flags: list[str] = field(default_factory=list)
    audit_log_path: Path | None = None
    service_node_port_range: nodeports.PortRange | None = None  # the API server's
    # The API server's DefaultTolerationSeconds (--default-{not-ready,unreachable}-toleration-seconds).
    toleration_seconds: strategies.TolerationSeconds = strategies.DEFAULT_TOLERATION_SECONDS
    partitions: int | None = None  # the coordinator's --partitions; its default when None
    log_level: str = "info"  # this process's, and the simulator's
    apiserver: str = EMBEDDED  # or UPSTREAM: etcd and kube-apiserver of `make upstream`
    reference: bool = False  # upstream kube-controller-manager instead of the bus services
    # The embedded server's --authorization-mode (kube-apiserver runs Node,RBAC). AlwaysAllow by
    # default: kcm's services reach the embedded server as its admin, and under --reference
    # upstream's controllers run as kube-system ServiceAccounts whose system:controller:* roles
    # the embedded server's bootstrap policy lacks.
    authorization_modes: tuple[str, ...] = ("AlwaysAllow",)


def kcm_argv() -> list[str]:
    beside = Path(sys.executable).with_name("kcm")
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "kcm_cli.main"]


def enabled(selection: str, flags: list[str]) -> list[runtime.Spec]:
    """The selected controllers that these controller flags leave on: upstream starts some only
    when configured (node IPAM with --allocate-node-cidrs). errors.ConfigError for flags a
    controller refuses, so `kcm dev` stops at once instead of restarting its process for ever."""
    p = argparse.ArgumentParser(add_help=False)
    controllerflags.add_arguments(p, BUILTIN)
    args, _ = p.parse_known_args(flags)
    return [
        s
        for s in controllerflags.select(BUILTIN, selection)
        if s.disabled_by is None or not s.disabled_by(args)
    ]


# Upstream's flags that `kcm dev` also hands the watcher and the coordinator: the leader election
# ones, as they hold Leases with them (docs/flags.md "Leader election"), not the Lease's name and
# namespace, which are each service's own (and with --apiserver=upstream, where its RBAC allows);
# and the client's media type, which matters most to the watcher's lists and watches.
_SHARED_FLAGS = (
    "--leader-elect",
    "--leader-elect-lease-duration",
    "--leader-elect-renew-deadline",
    "--leader-elect-retry-period",
    "--leader-elect-resource-lock",
    "--kube-api-content-type",
)


def shared_flags(controller_flags: list[str]) -> list[str]:
    """The flags among `controller_flags` (pflag's `--name=value` reading) that the watcher and
    the coordinator take too."""
    return [f for f in controller_flags if f.split("=", 1)[0] in _SHARED_FLAGS]


def _controller_groups(
    opts: DevOptions, chosen: list[runtime.Spec]
) -> list[tuple[str, list[str], list[str]]]:
    """One process for the controllers at one replica, one process per replica of the rest;
    each with the canonical names of the controllers it runs (its NATS identity's scope)."""
    replicas = {controllerflags.select(BUILTIN, name)[0].name: n for name, n in opts.replicas.items()}
    shared = [spec.name for spec in chosen if spec.name not in replicas]
    groups = [("controllers", ["controllers", "--controllers", ",".join(shared)], shared)] if shared else []
    for spec in chosen:
        groups += [
            (f"{spec.alias}-{i}", ["controller", spec.name], [spec.name])
            for i in range(replicas.get(spec.name, 0))
        ]
    return groups


def _identities(groups: list[tuple[str, list[str], list[str]]]) -> dict[str, natsauth.Permissions]:
    """Every supervised service's NATS identity, named as the service, the consumer's, and one
    per built-in controller (named as its alias, as in compose and k8s/), for a replica started
    by hand beside the stack (`kcm controller NAME --nats-nkey-seed DIR/nats-auth/ALIAS.nk`)."""
    out = natsauth.deployment_identities(BUILTIN)
    out.update({name: natsauth.controllers(names) for name, _, names in groups})
    return out


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except urllib.error.HTTPError:
        return True  # it answered; health is the coordinator's to report
    except OSError:
        return False


async def _wait_answering(url: str) -> None:
    while True:
        if await asyncio.to_thread(_answers, url):
            return
        await asyncio.sleep(0.1)


def _ready_controllers(url: str) -> set[str]:
    try:
        return status.ready_controllers(status.fetch(url, 2))
    except (OSError, ValueError):
        return set()


async def _announce_controllers(url: str, names: list[str]) -> None:
    """Say each controller's name once it is healthy and owns its partitions."""
    waiting = set(names)
    while waiting:
        ready = await asyncio.to_thread(_ready_controllers, url) & waiting
        for name in sorted(ready):
            say(f"controller {name} ready")
        waiting -= ready
        await asyncio.sleep(0.2)


def _watcher_ready(url: str) -> bool:
    try:
        return status.watcher_ready(status.fetch(url, 2))
    except (OSError, ValueError):
        return False


async def _announce_watcher(url: str) -> None:
    """Say so once the coordinator reports the watcher leading and healthy."""
    while True:
        if await asyncio.to_thread(_watcher_ready, url):
            say("watcher healthy")
            return
        await asyncio.sleep(0.2)


def say(message: str) -> None:
    """One line of start-up progress on stdout (the ready line comes last)."""
    print(f"kcm dev: {message}", flush=True)


async def run(opts: DevOptions) -> None:
    state = opts.state_dir
    # For this process and the services it starts; the directory's own mode also covers
    # files an earlier run left readable.
    os.umask(0o077)
    state.mkdir(parents=True, exist_ok=True)
    state.chmod(0o700)
    logs = state / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    identity = pki.ensure(state / "pki")
    # Before anything starts: a missing build is one line telling the user to run `make upstream`.
    bin_dir = upstream.binaries() if opts.apiserver == UPSTREAM or opts.reference else None
    tasks: list[asyncio.Future[None]] = []

    def supervise(name: str, argv: list[str], stop_grace: float = supervisor.STOP_GRACE) -> None:
        child = supervisor.Supervised(name, argv, logs / f"{name}.log", stop_grace)
        tasks.append(asyncio.ensure_future(child.run()))

    plane: upstream.ControlPlane | None = None
    try:
        if bin_dir is not None and opts.apiserver == UPSTREAM:
            plane = upstream.ControlPlane(
                state,
                identity,
                bin_dir,
                port=opts.port,
                audit_log_path=opts.audit_log_path,
                service_node_port_range=opts.service_node_port_range,
                toleration_seconds=opts.toleration_seconds,
            )
            api_url = await _start_upstream(opts, plane, supervise)
        else:
            api_url = await _start_embedded(opts, identity, tasks)
        await _storage_defaults(opts)
        if opts.reference:
            assert bin_dir is not None
            ready, check = await _start_reference(opts, identity, bin_dir, plane, supervise)
        else:
            ready = await _start_bus(opts, identity, plane, supervise, tasks)
            check = f"{' '.join(kcm_argv())} status --state-dir {state}"
        print(
            f"kcm dev ready: apiserver {api_url}, {ready} (logs in {logs}); "
            f"use it with: export KUBECONFIG={opts.kubeconfig_out.resolve()} "
            f"(then kubectl get nodes,pods -A; {check}); "
            "Ctrl-C stops everything",
            flush=True,
        )
        # Not gather: cancelling a gather cancels every task at once, and nats-server and the
        # API server would go while the services still release their leases through them.
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()
    finally:
        # Controllers first, nats-server and the API server last, so services flush on the way out.
        for task in reversed(tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if plane is not None:
            await plane.close()


async def _storage_defaults(opts: DevOptions) -> None:
    """The simulated CSI driver's CSIDriver and the default StorageClass `standard`, as kind
    ships a default class (kcm_simulator.defaults); only where the simulator runs."""
    if opts.nodes <= 0:
        return
    client = kubeclient.KubeClient(
        kubeclient.load_connection(str(opts.kubeconfig_out)), qps=0, user_agent="kcm-dev"
    )
    try:
        await simulator_defaults.ensure(client)
    finally:
        await client.close()
    driver = simulator_defaults.CSI_DRIVER["metadata"]["name"]
    say(f"CSIDriver {driver} and default StorageClass {simulator_defaults.DEFAULT_CLASS}")


class Supervise(Protocol):
    """Start a child process under `kcm dev`'s supervisor (its log: STATE_DIR/logs/<name>.log)."""

    def __call__(self, name: str, argv: list[str], stop_grace: float = ...) -> None: ...


async def _start_embedded(opts: DevOptions, identity: pki.Files, tasks: list[asyncio.Future[None]]) -> str:
    """The embedded API server, in this process; its URL once it serves."""
    state = opts.state_dir
    api_url: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    api = asyncio.ensure_future(
        apiserver_main.serve(
            apiserver_main.Options(
                port=opts.port,
                kubeconfig_out=opts.kubeconfig_out,
                data_dir=state / "apiserver",
                audit_log_path=opts.audit_log_path,
                service_node_port_range=opts.service_node_port_range,
                toleration_seconds=opts.toleration_seconds,
                service_account_key_files=[identity.sa_pub],
                service_account_signing_key_file=identity.sa_key,
                secure_port=0,
                tls_cert_file=identity.apiserver_cert,
                tls_private_key_file=identity.apiserver_key,
                secure_kubeconfig_out=state / "kubeconfig-tls",
                secure_kubeconfig_ca=identity.ca_cert,
                # As kube-apiserver runs under `kcm dev --apiserver=upstream`: certificates of
                # the cluster CA (csrsigning's) and bootstrap tokens authenticate (TLS bootstrap).
                client_ca_file=identity.ca_cert,
                enable_bootstrap_token_auth=True,
                authorization_modes=opts.authorization_modes,
            ),
            api_url.set_result,
        )
    )
    tasks.append(api)
    started: list[asyncio.Future[Any]] = [api, api_url]
    done, _ = await asyncio.wait(started, return_when=asyncio.FIRST_COMPLETED)
    if api in done:
        api.result()  # a start-up failure (taken port) surfaces as the apiserver's error
    say(
        f"apiserver at {api_url.result()} (and over TLS, where kubectl sends service account "
        f"tokens: --kubeconfig {state / 'kubeconfig-tls'} --token ...)"
    )
    return api_url.result()


async def _start_upstream(opts: DevOptions, plane: upstream.ControlPlane, supervise: Supervise) -> str:
    """etcd and kube-apiserver as supervised children; the admin kubeconfig once it is ready."""
    supervise("etcd", plane.etcd_argv())
    # It can take up to ~40 s to drain on SIGTERM; etcd holds all its state, so a short wait
    # and then SIGKILL loses nothing.
    supervise("kube-apiserver", plane.apiserver_argv(), stop_grace=APISERVER_STOP_GRACE)
    try:
        async with asyncio.timeout(READY_TIMEOUT):
            await plane.wait_ready()
    except TimeoutError:
        raise errors.ConfigError(
            f"etcd and kube-apiserver not ready after {READY_TIMEOUT:.0f}s; see "
            f"{opts.state_dir / 'logs'}/etcd.log and kube-apiserver.log"
        ) from None
    plane.write_admin_kubeconfig(opts.kubeconfig_out)
    plane.write_credential_free_kubeconfig(opts.state_dir / "kubeconfig-tls")
    say(
        f"kube-apiserver at {plane.url} (etcd at {plane.etcd_url}, data in {opts.state_dir / 'etcd'}; "
        f"for service account tokens: --kubeconfig {opts.state_dir / 'kubeconfig-tls'} --token ...)"
    )
    return plane.url


async def _start_reference(
    opts: DevOptions,
    identity: pki.Files,
    bin_dir: Path,
    plane: upstream.ControlPlane | None,
    supervise: Supervise,
) -> tuple[str, str]:
    """Upstream kube-controller-manager and the simulator; what the ready line says of them, and
    how to check on it."""
    state = opts.state_dir
    # No coordinator here: `kcm status` must not find one of an earlier run.
    (state / status.URL_FILE).unlink(missing_ok=True)
    # On the embedded server: its kubeconfig (anyone on loopback is its admin).
    kubeconfig_path = plane.controller_manager_kubeconfig() if plane else opts.kubeconfig_out
    port = natsd.free_port()
    # Only upstream's: kube-controller-manager refuses kcm's own (the work queue's, ...).
    own = [f for f in opts.controller_flags if f.split("=", 1)[0].removeprefix("--") in upstreamflags.FLAGS]
    supervise(
        "kube-controller-manager",
        upstream.reference_argv(
            bin_dir,
            state,
            identity,
            kubeconfig_path,
            port,
            own,
            upstream.KUBEADM_CONTROLLERS if opts.controllers == "*" else opts.controllers,
        ),
    )
    # The node IPAM controller runs there: nodes wait for the pod CIDRs it gives them.
    # Upstream's binder runs unless a selection leaves it out.
    binder = opts.controllers == "*" or "persistentvolume-binder" in opts.controllers
    attach = opts.controllers == "*" or any(n in opts.controllers for n in ("attachdetach", "attach-detach"))
    _supervise_sim(
        opts,
        supervise,
        node_ipam=True,
        manage_taint=False,
        ignore_claims=not binder,
        ignore_attachments=not attach,
    )
    healthz = f"https://127.0.0.1:{port}/healthz"
    unverified = ssl.create_default_context()
    unverified.check_hostname = False
    unverified.verify_mode = ssl.CERT_NONE  # its self-signed serving certificate, made at start
    try:
        async with asyncio.timeout(READY_TIMEOUT):
            await upstream.wait_ok(healthz, unverified)
        say(f"kube-controller-manager healthy at {healthz}")
    except TimeoutError:
        say(f"kube-controller-manager is not healthy after {READY_TIMEOUT:.0f}s; see its log")
    return (
        f"kube-controller-manager {healthz} (the reference: no bus, no kcm controllers)",
        f"curl -k {healthz}?verbose",
    )


def _supervise_sim(
    opts: DevOptions,
    supervise: Supervise,
    *,
    node_ipam: bool,
    manage_taint: bool,
    ignore_claims: bool,
    ignore_attachments: bool,
) -> None:
    """The simulator, with the admin's kubeconfig: it plays the kubelets of all its nodes and the
    scheduler, so no one node's identity (the Node authorizer's system:node:<name>) fits it.
    With `manage_taint` (no node lifecycle controller runs) it lifts the not-ready taint itself;
    with `ignore_claims` (no PV binder runs) it runs pods without waiting for their claims, and
    with `ignore_attachments` (no attach/detach controller) without waiting for attachments."""
    if opts.nodes <= 0:
        return
    state = opts.state_dir
    sim = ["sim", "--kubeconfig", str(opts.kubeconfig_out), "--nodes", str(opts.nodes)]
    sim += ["--pod-start-delay", str(opts.pod_start_delay), "--log-level", opts.log_level]
    sim += ["--backoff-scale", str(opts.sim_backoff_scale)]
    sim += ["--heartbeat-interval", str(opts.heartbeat_interval), "--zones", str(opts.zones)]
    # Loopback only: `kcm sim --state-dir DIR --add-nodes N` finds it through the file.
    sim += ["--control-port", "0", "--control-file", str(state / SIM_CONTROL_FILE)]
    if node_ipam:
        sim.append("--node-ipam")
    if manage_taint:
        sim.append("--manage-not-ready-taint")
    if ignore_claims:
        sim.append("--ignore-claims")
    if ignore_attachments:
        sim.append("--ignore-attachments")
    if opts.apiserver == UPSTREAM:
        # Its kubelet server then serves kube-apiserver's kubelet client certificate only.
        sim += ["--kubelet-client-ca-file", str(pki.files(state / "pki").ca_cert)]
    supervise("sim", [*kcm_argv(), *sim])
    say(f"simulator with {opts.nodes} nodes")


async def _start_bus(
    opts: DevOptions,
    identity: pki.Files,
    plane: upstream.ControlPlane | None,
    supervise: Supervise,
    tasks: list[asyncio.Future[None]],
) -> str:
    """nats-server, the watcher, the coordinator, the controllers and the simulator; what the
    ready line says of them."""
    state = opts.state_dir
    logs = state / "logs"
    # The cluster identity files, before the user's flags: a flag given twice counts last.
    identity_flags = [
        f"--root-ca-file={identity.ca_cert.resolve()}",
        f"--service-account-private-key-file={identity.sa_key.resolve()}",
        f"--cluster-signing-cert-file={identity.ca_cert.resolve()}",
        f"--cluster-signing-key-file={identity.ca_key.resolve()}",
    ]
    chosen = enabled(opts.controllers, [*identity_flags, *opts.controller_flags])
    nats = natsd.plan(state / "nats")
    groups = _controller_groups(opts, chosen)
    auth_dir = state / "nats-auth"
    nats.write_config(state / "nats.conf", auth_dir, _identities(groups))
    (state / "nats.url").write_text(nats.url + "\n")
    supervise("nats", nats.args())
    if plane is None:
        admin = ["--kubeconfig", str(opts.kubeconfig_out)]
        ids = upstream.Identities(watcher=admin, coordinator=admin, controllers=admin)
    else:
        # Each service as it runs on a cluster: authorized by k8s/'s RBAC alone.
        ids = await plane.bus_identities(opts.kubeconfig_out)
        tasks.append(asyncio.ensure_future(plane.keep_tokens()))
        say(
            "RBAC of k8s/ applied; watcher, coordinator and controllers run as their ServiceAccounts in kcm-system"
        )
    async with asyncio.timeout(READY_TIMEOUT):
        await natsd.wait_ready(nats.port)
    consumer_seed = natsauth.seed_file(auth_dir, "consumer")
    say(f"nats-server with JetStream at {nats.url} (read-only identity: --nats-nkey-seed {consumer_seed})")
    common = ["--nats-url", nats.url, "--ops-bind", "127.0.0.1"]

    def nkey(name: str) -> list[str]:
        return ["--nats-nkey-seed", str(natsauth.seed_file(auth_dir, name))]

    coordinator_port, watcher_port = natsd.free_port(), natsd.free_port()
    leases = shared_flags(opts.controller_flags)
    coordinator_url = f"http://127.0.0.1:{coordinator_port}"
    services = [
        (
            "watcher",
            ["watcher", *ids.watcher, *common, *nkey("watcher"), "--ops-port", str(watcher_port), *leases],
        ),
        (
            "coordinator",
            [
                "coordinator",
                *ids.coordinator,
                *common,
                *nkey("coordinator"),
                "--ops-port",
                str(coordinator_port),
                "--ops-url-file",
                str(state / status.URL_FILE),
                *([] if opts.partitions is None else ["--partitions", str(opts.partitions)]),
                *leases,
            ],
        ),
    ]
    services += [
        (
            name,
            [
                *argv,
                *ids.controllers,
                *common,
                *nkey(name),
                "--ops-port",
                "0",
                # Several controller processes share this host and kcm dev probes them without
                # credentials: the plain ops port, not upstream's secure port (a flag may ask for it).
                "--secure-port=0",
                *identity_flags,
                # --leader-elect is the watcher's and the coordinator's (`shared_flags`): the
                # controllers refuse it false (controllerflags.refuse_leader_elect_false).
                *(f for f in opts.controller_flags if f.split("=", 1)[0] != "--leader-elect"),
            ],
        )
        for name, argv, _ in groups
    ]
    for name, argv in services:
        supervise(name, [*kcm_argv(), *argv])
    running = {spec.name for spec in chosen}
    _supervise_sim(
        opts,
        supervise,
        node_ipam=NODE_IPAM in running,
        manage_taint=NODE_LIFECYCLE not in running,
        ignore_claims=PV_BINDER not in running,
        ignore_attachments=ATTACH_DETACH not in running,
    )
    async with asyncio.timeout(READY_TIMEOUT):
        for name, url in (
            ("coordinator", coordinator_url),
            ("watcher", f"http://127.0.0.1:{watcher_port}"),
        ):
            await _wait_answering(url + "/healthz")
            say(f"{name} up")
    names = [spec.name for spec in chosen]
    try:
        async with asyncio.timeout(READY_TIMEOUT):
            await asyncio.gather(
                _announce_watcher(coordinator_url), _announce_controllers(coordinator_url, names)
            )
    except TimeoutError:
        say(f"some services are not ready after {READY_TIMEOUT:.0f}s; see `kcm status` and {logs}")
    return f"nats {nats.url}, {len(services)} services"
