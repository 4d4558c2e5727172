"""`kcm kube-identities`: each compose service talks to the API as its own ServiceAccount.

What a pod's projected token gives a kcm service in k8s/, this gives it in docker compose:
- As the admin (`--kubeconfig`, which only this service and the API server mount), it applies
  the kcm-system Namespace and the RBAC of k8s/ (`manifests.rbac`: the watcher's and the
  coordinator's roles from k8s/base, each controller's from its deploy.yaml).
- For each identity it writes `<out>/<identity>/kubeconfig` (the admin's cluster entry, its
  server and CA; the user a `tokenFile: token` beside it) and `<out>/<identity>/token`, a
  TokenRequest token of that identity's ServiceAccount. Compose mounts `<out>/<identity>` alone
  into that service, at /kube, so the service's `--kubeconfig /kube/kubeconfig` carries its own
  ServiceAccount's rights and nothing else.
- It then renews each token before it expires (`clientbuilder.ServiceAccountToken`: an hour,
  asked again at 80%); the clients re-read a `tokenFile` every minute (`kubeclient.TokenFile`).
  `--once` writes them and exits (the end-to-end test).

`apply` and `TokenFiles` are shared with `kcm dev --apiserver=upstream` (`kcm_cli.upstream`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from pathlib import Path
from typing import Any

import yaml
from kcm_shared.base import errors
from kcm_shared.client import clientbuilder, kubeclient
from kubernetes.config import ConfigException

from kcm_cli import manifests, natsauth
from kcm_cli.controllers import BUILTIN

log = logging.getLogger("kcm.kube-identities")

FIELD_MANAGER = "kcm-dev"
KUBECONFIG = "kubeconfig"  # the file each service's --kubeconfig names, in its own directory
TOKEN = "token"  # its bearer token, beside it
CHECK_SECONDS = 60.0  # how often the tokens are looked at; each is renewed at 80% of its hour
WAIT_SECONDS = 300.0  # for the admin kubeconfig and the API at start (k3s starts slowly); then exit 1
# Where the RBAC objects of k8s/ and the kcm-system Namespace are applied.
_PATHS = {
    "Namespace": ("", "v1", "namespaces"),
    "ServiceAccount": ("", "v1", "serviceaccounts"),
    "ClusterRole": ("rbac.authorization.k8s.io", "v1", "clusterroles"),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io", "v1", "clusterrolebindings"),
    "Role": ("rbac.authorization.k8s.io", "v1", "roles"),
    "RoleBinding": ("rbac.authorization.k8s.io", "v1", "rolebindings"),
}


async def apply(client: kubeclient.KubeClient, obj: dict[str, Any]) -> None:
    """Server-side apply of `obj` (forced: kcm owns these objects)."""
    group, version, resource = _PATHS[obj["kind"]]
    meta = obj["metadata"]
    path = kubeclient.resource_path(group, version, resource, meta.get("namespace"), meta["name"])
    await client.patch(path, obj, "apply", params={"fieldManager": FIELD_MANAGER, "force": "true"})


class TokenFiles:
    """Files each holding a ServiceAccount's current token, rewritten when the token changes."""

    def __init__(self) -> None:
        self._files: list[tuple[clientbuilder.ServiceAccountToken, Path]] = []

    def add(self, source: clientbuilder.ServiceAccountToken, path: Path) -> None:
        self._files.append((source, path))

    async def write(self) -> None:
        for source, path in self._files:
            token = (await source.header()).removeprefix("Bearer ")
            if not path.exists() or path.read_text() != token:
                path.parent.mkdir(parents=True, exist_ok=True)
                # Atomic: a client re-reading the file never sees half a token.
                natsauth.write_private(path, token.encode())

    async def keep(self) -> None:
        """Renew the tokens before they expire, until cancelled."""
        while True:
            await asyncio.sleep(CHECK_SECONDS)
            try:
                await self.write()
            except Exception as exc:  # the next round tries again; the stack must not stop
                log.warning("cannot renew a service account token", extra={"error": repr(exc)})


def cluster_entry(admin_kubeconfig: Path, master: str | None) -> dict[str, Any]:
    """The admin kubeconfig's current cluster (server, CA), its server replaced by `master`."""
    config = yaml.safe_load(admin_kubeconfig.read_text()) or {}
    contexts = {c["name"]: c.get("context") or {} for c in config.get("contexts") or []}
    wanted = contexts.get(config.get("current-context", ""), {}).get("cluster")
    clusters = config.get("clusters") or []
    entry = next((c for c in clusters if c.get("name") == wanted), clusters[0] if clusters else None)
    if entry is None:
        raise ValueError(f"{admin_kubeconfig}: no cluster")
    cluster = dict(entry.get("cluster") or {})
    if master:
        cluster["server"] = master
    return cluster


def kubeconfig(cluster: dict[str, Any], identity: str) -> str:
    """A kubeconfig whose user is the bearer token in the file `token` beside it."""
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "kcm", "cluster": cluster}],
            "users": [{"name": identity, "user": {"tokenFile": TOKEN}}],
            "contexts": [{"name": identity, "context": {"cluster": "kcm", "user": identity}}],
            "current-context": identity,
        },
        sort_keys=False,
    )


async def provision(
    admin: kubeclient.KubeClient, cluster: dict[str, Any], root: Path, out: Path
) -> TokenFiles:
    """Apply k8s/'s RBAC, write every identity's kubeconfig and first token under `out`."""
    await apply(admin, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": manifests.NAMESPACE}})
    for obj in manifests.rbac(root, BUILTIN):
        await apply(admin, obj)
    tokens = TokenFiles()
    for identity, account in manifests.service_accounts(BUILTIN).items():
        directory = out / identity
        directory.mkdir(parents=True, exist_ok=True)
        natsauth.write_private(directory / KUBECONFIG, kubeconfig(cluster, identity).encode())
        tokens.add(clientbuilder.ServiceAccountToken(admin, manifests.NAMESPACE, account), directory / TOKEN)
    await tokens.write()
    return tokens


async def _provision(args: argparse.Namespace) -> tuple[kubeclient.KubeClient, TokenFiles]:
    """Until the API server has written the admin kubeconfig and answers (bounded by the caller)."""
    while True:
        admin = None
        try:
            conn = kubeclient.load_connection(str(args.kubeconfig), args.master)
            admin = kubeclient.KubeClient(conn, qps=0, user_agent="kcm-kube-identities")
            cluster = cluster_entry(args.kubeconfig, args.master)
            return admin, await provision(admin, cluster, args.root, args.out)
        # The API server has not written the kubeconfig yet, or does not answer yet.
        except (OSError, yaml.YAMLError, ConfigException, errors.ConfigError, kubeclient.ApiError) as exc:
            log.info("waiting for the API server", extra={"error": repr(exc)})
            if admin is not None:
                await admin.close()
        await asyncio.sleep(1.0)


async def run(args: argparse.Namespace) -> None:
    async with asyncio.timeout(WAIT_SECONDS):
        admin, tokens = await _provision(args)
    try:
        log.info("wrote each service's kubeconfig", extra={"out": str(args.out)})
        if not args.once:
            await tokens.keep()
    finally:
        await admin.close()


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "kube-identities",
        help="give each compose service a kubeconfig of its own ServiceAccount, and keep its token fresh",
    )
    p.add_argument("--kubeconfig", type=Path, required=True, help="the admin's kubeconfig")
    p.add_argument("--master", default=None, help="the API server's URL (overrides the kubeconfig's)")
    p.add_argument("--out", type=Path, required=True, help="<identity>/kubeconfig and token under here")
    p.add_argument(
        "--root",
        type=Path,
        default=Path("."),
        help="where k8s/base (the watcher's and coordinator's RBAC) is",
    )
    p.add_argument("--once", action="store_true", help="write the files and exit; no renewal")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.set_defaults(service="kube-identities", run=run)
