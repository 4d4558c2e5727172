"""`kcm apiserver`: run the embedded API server until cancelled.

Binds, then writes a kubeconfig for the bound address (the file appearing is the
readiness signal for scripts and tests), serves until the task is cancelled, and
removes nothing it did not create.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import gc
import ipaddress
import logging
import secrets
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web
from kcm_shared.apis import satoken

from kcm_apiserver import audit, authn, kubeconfig, kubernetesendpoints, nodeports, persist, strategies
from kcm_apiserver.operations import Api
from kcm_apiserver.registry import Registry
from kcm_apiserver.schemas import openapi_v3
from kcm_apiserver.server import Server
from kcm_apiserver.store import Store

log = logging.getLogger("kcm.apiserver")


@dataclass
class Options:
    port: int = 0
    bind: str = "127.0.0.1"
    kubeconfig_out: Path | None = None
    data_dir: Path | None = None
    token: str | None = None
    watch_history: int = 10_000
    bookmark_interval: float = 5.0
    audit_log_path: Path | None = None  # JSON lines, one per write (kube-apiserver's --audit-log-path)
    service_node_port_range: nodeports.PortRange | None = None  # kube-apiserver's flag; None: 30000-32767
    # kube-apiserver's service account flags: keys that verify tokens (PEM: public or private
    # keys, certificates), the key TokenRequest tokens are signed with, issuers, audiences.
    service_account_key_files: list[Path] = field(default_factory=list)
    service_account_signing_key_file: Path | None = None
    service_account_issuers: list[str] = field(default_factory=list)
    api_audiences: list[str] = field(default_factory=list)
    # An https port beside the plain one (kube-apiserver's --secure-port, --tls-cert-file,
    # --tls-private-key-file): kubectl sends bearer tokens only over TLS. With
    # `secure_kubeconfig_out`, a kubeconfig for it is written, trusting `secure_kubeconfig_ca`.
    secure_port: int | None = None
    tls_cert_file: Path | None = None
    tls_private_key_file: Path | None = None
    secure_kubeconfig_out: Path | None = None
    secure_kubeconfig_ca: Path | None = None
    # kube-apiserver's --client-ca-file: client certificates it signed authenticate on the
    # secure port as their subject.
    client_ca_file: Path | None = None
    # kube-apiserver's --enable-bootstrap-token-auth.
    enable_bootstrap_token_auth: bool = False
    # kube-apiserver's --advertise-address: published in default/kubernetes (None: the bind
    # address when usable, else the host's default-route address).
    advertise_address: str | None = None
    # kube-apiserver's --authorization-mode, parsed (authz.parse_modes).
    authorization_modes: tuple[str, ...] = ("AlwaysAllow",)
    # kube-apiserver's --default-not-ready-toleration-seconds / --default-unreachable-toleration-seconds.
    toleration_seconds: strategies.TolerationSeconds = field(default_factory=strategies.TolerationSeconds)


def service_account_tokens(opts: Options) -> authn.ServiceAccountTokens | None:
    """The token configuration the flags describe; None when no key is given (no service
    account tokens: TokenRequest is not served, and only the static token authenticates).
    Raises ValueError for an unreadable key file."""
    key_files = opts.service_account_key_files or (
        [opts.service_account_signing_key_file] if opts.service_account_signing_key_file else []
    )
    if not key_files:
        return None
    issuers = opts.service_account_issuers or [satoken.DEFAULT_ISSUER]
    signer = None
    if opts.service_account_signing_key_file is not None:
        signer = satoken.Signer(satoken.load_private_key(opts.service_account_signing_key_file), issuers[0])
    keys = [key for path in key_files for key in satoken.load_public_keys(path)]
    return authn.ServiceAccountTokens(
        signer=signer,
        verifier=satoken.Verifier(keys),
        issuers=issuers,
        audiences=opts.api_audiences or issuers,
    )


def _tls_context(opts: Options) -> ssl.SSLContext:
    if opts.tls_cert_file is None or opts.tls_private_key_file is None:
        raise OSError("--secure-port needs --tls-cert-file and --tls-private-key-file")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        ctx.load_cert_chain(opts.tls_cert_file, opts.tls_private_key_file)
    except ssl.SSLError as exc:
        raise OSError(f"serving certificate {opts.tls_cert_file}: {exc}") from exc
    if opts.client_ca_file is not None:
        # Only this CA: a CLIENT_AUTH context verifying nobody was given no system roots.
        try:
            ctx.load_verify_locations(cafile=opts.client_ca_file)
        except (ssl.SSLError, OSError) as exc:
            raise OSError(f"--client-ca-file {opts.client_ca_file}: {exc}") from exc
        ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx


async def _listen(runner: web.AppRunner, bind: str, port: int, tls: ssl.SSLContext | None) -> str:
    """Serve the app on another socket; returns the URL clients use for it."""
    sock = socket.socket(socket.AF_INET6 if ":" in bind else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((bind, port))
    site = web.SockSite(runner, sock, backlog=1024, ssl_context=tls)
    await site.start()
    host, bound = sock.getsockname()[:2]
    client_host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    scheme = "https" if tls is not None else "http"
    return (
        f"{scheme}://{client_host}:{bound}"
        if ":" not in client_host
        else f"{scheme}://[{client_host}]:{bound}"
    )


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


async def serve(opts: Options, on_ready: Callable[[str], None] | None = None) -> None:
    token = opts.token
    if token is None and not _is_loopback(opts.bind):
        # Anyone on the network could otherwise write to the cluster.
        token = secrets.token_urlsafe(32)
    try:
        tokens = service_account_tokens(opts)
    except (OSError, ValueError) as exc:
        raise OSError(f"service account keys: {exc}") from exc
    db = persist.Database(opts.data_dir) if opts.data_dir else None
    store = Store(db, history=opts.watch_history)
    api = Api(
        store,
        Registry(),
        node_port_range=opts.service_node_port_range,
        toleration_seconds=opts.toleration_seconds,
    )
    authn.ensure_tracking(api, dt.datetime.now(dt.UTC).date())
    # Building the OpenAPI documents loads every client model (about a second): do it
    # before announcing readiness so kubectl's first call is not the slow one.
    openapi_v3.openapi_v3_root(api.registry, api.crds.crds())
    # Everything loaded so far lives as long as the process: move it out of the
    # collector's sight, and collect the young generation less often. Full collections
    # over a large heap otherwise pause every request for ~100 ms (bench/apiserver.py).
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
    audit_log = audit.AuditLog(opts.audit_log_path) if opts.audit_log_path is not None else None
    server = Server(
        api,
        token=token,
        bookmark_interval=opts.bookmark_interval,
        audit_log=audit_log,
        tokens=tokens,
        check_host=token is None,  # no credentials: loopback only, and named so (DNS rebinding)
        authorization_modes=opts.authorization_modes,
        bootstrap_tokens=opts.enable_bootstrap_token_auth,
    )
    runner = web.AppRunner(server.app, access_log=None, handle_signals=False)
    await runner.setup()
    url = await _listen(runner, opts.bind, opts.port, None)
    server.address = url.split("://", 1)[1]
    published_url = url  # kube-apiserver publishes its secure port when it serves one
    if opts.secure_port is not None:
        secure_url = await _listen(runner, opts.bind, opts.secure_port, _tls_context(opts))
        published_url = secure_url
        if opts.secure_kubeconfig_out is not None:
            ca = opts.secure_kubeconfig_ca.read_bytes() if opts.secure_kubeconfig_ca else b""
            kubeconfig.write(opts.secure_kubeconfig_out, secure_url, None, ca=ca)
        log.info(
            "apiserver serving TLS", extra={"url": secure_url, "kubeconfig": str(opts.secure_kubeconfig_out)}
        )
    published_port = int(published_url.rsplit(":", 1)[1])
    address = kubernetesendpoints.advertise_address(opts.bind, opts.advertise_address)
    if address is None:
        log.warning("no usable address to publish in default/kubernetes Endpoints; set --advertise-address")
    else:
        kubernetesendpoints.reconcile(api, address, published_port)
    if opts.kubeconfig_out is not None:
        kubeconfig.write(opts.kubeconfig_out, url, token)
    log.info("apiserver serving", extra={"url": url, "kubeconfig": str(opts.kubeconfig_out)})
    if on_ready is not None:
        on_ready(url)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
        store.close()
        if audit_log is not None:
            audit_log.close()
