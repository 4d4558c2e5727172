"""Upstream's own binaries in `kcm dev`: etcd and kube-apiserver (`--apiserver=upstream`) and the
stock kube-controller-manager (`--reference`), configured on loopback as kubeadm configures them.

`make upstream` builds them (tools/upstream/build.py); `kcm dev` (kcm_cli.dev) supervises them as
child processes and calls, in order:
- `binaries()`: their folder; `errors.ConfigError` (one line: run `make upstream`) when the build
  of the pinned versions is missing or out of date.
- `ControlPlane(state, identity, bin_dir, ...)`: `etcd_argv` and `apiserver_argv` to supervise
  (etcd first, so that it stops last), `wait_ready` (etcd's /health, then kube-apiserver's
  /readyz) and `write_admin_kubeconfig`: kubeadm's admin.conf, user `kubernetes-admin` in
  `system:masters` (`admin_certificate`), at `--kubeconfig-out`; `write_credential_free_kubeconfig`
  for `STATE_DIR/kubeconfig-tls`, where kubectl sends a `--token` (as on the embedded server).
  tests/e2e/test_apiserver_parity.py runs the same etcd and kube-apiserver without the rest of
  `kcm dev`.
- `ControlPlane.bus_identities()`: the RBAC objects of k8s/ (`kcm_cli.manifests.rbac`, the
  Deployments left out) applied as the admin, then the identities the bus services run as: the
  watcher and the coordinator their ServiceAccounts' (a kubeconfig with a `tokenFile` this
  module keeps fresh, `keep_tokens`: the way a pod's projected token reaches them on a
  cluster), the controllers' process a client certificate of user `kcm:controllers`, allowed
  only to get, create and request tokens of ServiceAccounts in kcm-system, with which it runs
  `--use-service-account-credentials`.
- `reference_argv`: kube-controller-manager with kubeadm's flags (its
  cmd/kubeadm/app/phases/controlplane/manifests.go) and a pod network, on either API server; on
  kube-apiserver as `system:kube-controller-manager` (`ControlPlane.controller_manager_kubeconfig`,
  kubeadm's controller-manager.conf).
The state directory keeps everything across runs: `etcd/` (the cluster's data), `pki/`,
`kubeconfigs/`, `tokens/`, and each binary's own files under its name.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import ssl
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from kcm_apiserver import kubeconfig, nodeports, podstreams, strategies
from kcm_shared.base import errors
from kcm_shared.client import clientbuilder, kubeclient

from kcm_cli import kubeidentities, manifests, natsd, pki
from kcm_cli.controllers import BUILTIN

log = logging.getLogger("kcm.dev")

ROOT = Path(__file__).resolve().parents[3]  # the checkout: tools/upstream and k8s/ live there
BUILD = ROOT / "tools" / "upstream" / "build.py"
SERVICE_CIDR = "10.96.0.0/12"  # kubeadm's default service subnet
POD_CIDR = "10.244.0.0/16"  # the pod network the reference controller manager hands out
ISSUER = "https://kubernetes.default.svc.cluster.local"  # kubeadm's, for dnsDomain cluster.local
CONTROLLERS_USER = "kcm:controllers"
# Writes only, as the embedded server's --audit-log-path records them.
AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    verbs: ["create", "update", "patch", "delete", "deletecollection"]
  - level: None
"""


def binaries(build: Path = BUILD) -> Path:
    """The folder of the binaries `make upstream` built for the pinned versions (`build`: the
    script that knows where they are)."""
    if not build.exists():
        raise errors.ConfigError(
            f"upstream binaries need a kcm checkout with tools/upstream ({build} is missing)"
        )
    found = subprocess.run(
        [sys.executable, str(build), "--print-dir"], capture_output=True, text=True, timeout=60
    )
    if found.returncode != 0:
        raise errors.ConfigError(
            "the upstream binaries are not built for the pinned versions: run `make upstream` "
            f"in {ROOT} (it builds etcd, kube-apiserver and kube-controller-manager with Go)"
        )
    return Path(found.stdout.strip())


@dataclass(frozen=True)
class Identities:
    """The flags naming each bus service's API identity."""

    watcher: list[str]
    coordinator: list[str]
    controllers: list[str]


class ControlPlane:
    """etcd and kube-apiserver of one `kcm dev` stack; see the module docstring for the order."""

    def __init__(
        self,
        state: Path,
        identity: pki.Files,
        bin_dir: Path,
        *,
        port: int = 0,
        audit_log_path: Path | None = None,
        service_node_port_range: nodeports.PortRange | None = None,
        toleration_seconds: strategies.TolerationSeconds = strategies.DEFAULT_TOLERATION_SECONDS,
    ) -> None:
        self.state = state
        self.identity = identity
        self.bin_dir = bin_dir
        self.port = port or natsd.free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.etcd_port, self.etcd_peer_port, self.etcd_metrics_port = (natsd.free_port() for _ in range(3))
        self.audit_log_path = audit_log_path
        self.service_node_port_range = service_node_port_range
        self.toleration_seconds = toleration_seconds
        self.front_proxy = pki.front_proxy(identity.ca_cert.parent)
        self._admin: kubeclient.KubeClient | None = None
        self._tokens = kubeidentities.TokenFiles()

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.etcd_port}"

    def etcd_argv(self) -> list[str]:
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        return [
            str(self.bin_dir / "etcd"),
            "--name=kcm",
            f"--data-dir={self.state / 'etcd'}",
            f"--listen-client-urls={self.etcd_url}",
            f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=kcm={peer}",
            f"--listen-metrics-urls=http://127.0.0.1:{self.etcd_metrics_port}",
        ]

    def apiserver_argv(self) -> list[str]:
        own = self.state / "kube-apiserver"
        own.mkdir(parents=True, exist_ok=True)
        ids, proxy = self.identity, self.front_proxy
        # kubeadm's name for kube-apiserver's client certificate towards kubelets.
        kubelet_client = pki.client(
            ids.ca_cert.parent, "apiserver-kubelet-client", "kube-apiserver-kubelet-client"
        )
        argv = [
            str(self.bin_dir / "kube-apiserver"),
            "--bind-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--cert-dir={own}",
            f"--etcd-servers={self.etcd_url}",
            f"--tls-cert-file={ids.apiserver_cert}",
            f"--tls-private-key-file={ids.apiserver_key}",
            f"--client-ca-file={ids.ca_cert}",
            f"--service-account-issuer={ISSUER}",
            f"--service-account-key-file={ids.sa_pub}",
            f"--service-account-signing-key-file={ids.sa_key}",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            "--enable-bootstrap-token-auth=true",
            "--allow-privileged=true",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--requestheader-client-ca-file={proxy.ca.cert}",
            "--requestheader-allowed-names=front-proxy-client",
            f"--proxy-client-cert-file={proxy.client.cert}",
            f"--proxy-client-key-file={proxy.client.key}",
            # pods/log, exec, attach, portforward reach the simulator's kubelet server at the
            # address it registers as InternalDNS; it serves only this client certificate's CA.
            f"--kubelet-client-certificate={kubelet_client.cert}",
            f"--kubelet-client-key={kubelet_client.key}",
            f"--kubelet-preferred-address-types={','.join(podstreams.PREFERRED_ADDRESS_TYPES)}",
        ]
        if self.service_node_port_range is not None:
            argv.append(f"--service-node-port-range={self.service_node_port_range}")
        argv.append(f"--default-not-ready-toleration-seconds={self.toleration_seconds.not_ready}")
        argv.append(f"--default-unreachable-toleration-seconds={self.toleration_seconds.unreachable}")
        if self.audit_log_path is not None:
            policy = own / "audit-policy.yaml"
            policy.write_text(AUDIT_POLICY)
            argv += [f"--audit-policy-file={policy}", f"--audit-log-path={self.audit_log_path}"]
        return argv

    async def wait_ready(self) -> None:
        """Until etcd is healthy and kube-apiserver ready (the caller bounds the wait)."""
        await wait_ok(f"{self.etcd_url}/health", None)
        trust = ssl.create_default_context(cafile=str(self.identity.ca_cert))
        await wait_ok(f"{self.url}/readyz", trust)

    def admin_certificate(self) -> pki.Pair:
        """kubeadm's admin: a client certificate of `kubernetes-admin` in `system:masters`."""
        return pki.client(self.identity.ca_cert.parent, "admin", "kubernetes-admin", ("system:masters",))

    def write_admin_kubeconfig(self, path: Path) -> None:
        self._write_kubeconfig(path, _certificate_user(self.admin_certificate()))

    def write_credential_free_kubeconfig(self, path: Path) -> None:
        """The server and its CA only, as the embedded server's `kubeconfig-tls`: with the admin's
        client certificate kube-apiserver would authenticate the certificate, never `--token`."""
        self._write_kubeconfig(path, {})

    async def bus_identities(self, admin_kubeconfig: Path) -> Identities:
        """Apply k8s/'s RBAC as the admin; the flags each bus service authenticates with."""
        admin = self._admin = kubeclient.KubeClient(
            kubeclient.load_connection(str(admin_kubeconfig)), qps=0, user_agent="kcm-dev"
        )
        await kubeidentities.apply(
            admin, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": manifests.NAMESPACE}}
        )
        for obj in [
            *manifests.rbac(ROOT, BUILTIN),
            *manifests.service_account_credentials(CONTROLLERS_USER),
        ]:
            await kubeidentities.apply(admin, obj)
        lease_namespace = f"--leader-elect-resource-namespace={manifests.NAMESPACE}"
        flags = {}
        for service in ("watcher", "coordinator"):
            token = self.state / "tokens" / f"kcm-{service}"
            source = clientbuilder.ServiceAccountToken(admin, manifests.NAMESPACE, f"kcm-{service}")
            self._tokens.add(source, token)
            config = self.state / "kubeconfigs" / f"{service}.conf"
            self._write_kubeconfig(config, {"tokenFile": str(token.resolve())})
            flags[service] = ["--kubeconfig", str(config), lease_namespace]
        await self._tokens.write()
        root = pki.client(self.identity.ca_cert.parent, "kcm-controllers", CONTROLLERS_USER)
        controllers = self.state / "kubeconfigs" / "controllers.conf"
        self._write_kubeconfig(controllers, _certificate_user(root))
        return Identities(
            watcher=flags["watcher"],
            coordinator=flags["coordinator"],
            controllers=[
                "--kubeconfig",
                str(controllers),
                "--use-service-account-credentials",
                f"--service-account-credentials-namespace={manifests.NAMESPACE}",
            ],
        )

    async def keep_tokens(self) -> None:
        """Renew the watcher's and the coordinator's tokens before they expire, until cancelled;
        their clients re-read the files every minute."""
        await self._tokens.keep()

    def controller_manager_kubeconfig(self) -> Path:
        """kubeadm's controller-manager.conf: user system:kube-controller-manager, whom the
        bootstrap roles authorize."""
        pair = pki.client(
            self.identity.ca_cert.parent, "controller-manager", "system:kube-controller-manager"
        )
        path = self.state / "kubeconfigs" / "controller-manager.conf"
        self._write_kubeconfig(path, _certificate_user(pair))
        return path

    def _write_kubeconfig(self, path: Path, user: dict[str, str]) -> None:
        kubeconfig.write(path, self.url, None, ca=self.identity.ca_cert.read_bytes(), user=user)

    async def close(self) -> None:
        if self._admin is not None:
            await self._admin.close()


KUBEADM_CONTROLLERS = "*,bootstrapsigner,tokencleaner"


def reference_argv(
    bin_dir: Path,
    state: Path,
    identity: pki.Files,
    kubeconfig_path: Path,
    port: int,
    extra: list[str],
    controllers: str = KUBEADM_CONTROLLERS,
) -> list[str]:
    """kube-controller-manager as kubeadm runs it, with a pod network (so node IPAM runs) and
    `extra` (the controller flags given to `kcm dev`) last; `controllers` its --controllers
    (pflag appends a repeated list flag, so a selection cannot simply come later in `extra`)."""
    own = state / "kube-controller-manager"
    own.mkdir(parents=True, exist_ok=True)
    front_proxy = pki.front_proxy(identity.ca_cert.parent)
    return [
        str(bin_dir / "kube-controller-manager"),
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={own}",
        "--leader-elect=true",
        f"--kubeconfig={kubeconfig_path}",
        f"--authentication-kubeconfig={kubeconfig_path}",
        f"--authorization-kubeconfig={kubeconfig_path}",
        f"--client-ca-file={identity.ca_cert}",
        f"--requestheader-client-ca-file={front_proxy.ca.cert}",
        f"--root-ca-file={identity.ca_cert}",
        f"--service-account-private-key-file={identity.sa_key}",
        f"--cluster-signing-cert-file={identity.ca_cert}",
        f"--cluster-signing-key-file={identity.ca_key}",
        "--use-service-account-credentials=true",
        f"--controllers={controllers}",
        "--allocate-node-cidrs=true",
        f"--cluster-cidr={POD_CIDR}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--cluster-name=kubernetes",
        *extra,
    ]


def _ok(url: str, context: ssl.SSLContext | None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as resp:
            return bool(resp.status == 200)
    except OSError:  # refused, or an HTTP error status (HTTPError is one)
        return False


async def wait_ok(url: str, context: ssl.SSLContext | None) -> None:
    """Until `url` answers 200 (the caller bounds the wait)."""
    while True:
        if await asyncio.to_thread(_ok, url, context):
            return
        await asyncio.sleep(0.2)


def _certificate_user(pair: pki.Pair) -> dict[str, str]:
    """Inline, as kubeadm writes admin.conf: the kubeconfig works wherever it is copied."""
    return {
        "client-certificate-data": base64.b64encode(pair.cert.read_bytes()).decode(),
        "client-key-data": base64.b64encode(pair.key.read_bytes()).decode(),
    }
