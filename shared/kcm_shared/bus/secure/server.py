"""The secure port: an aiohttp application served over TLS behind delegated authentication and
authorization, as upstream's BuildHandlerChain puts them in front of its mux.

- `start(application, args, pair_name)` reads upstream's serving flags from the parsed namespace
  (`--secure-port`, 0: not served; `--bind-address`, `--cert-dir`, `--tls-*`, `--permit-*-sharing`,
  `--client-ca-file`, `--requestheader-*`, `--authentication-*`, `--authorization-*`), builds the
  TLS context (`certs`), the authenticator (`authn`, with the ConfigMap lookup) and the
  authorizer (`authz`), and serves; returns the runner and the bound port, or None.
- Every request: authenticate (401 with upstream's Status body when credentials fail), authorize
  the lower-cased method on the path (403 with upstream's `forbidden: User "..." cannot get path
  "/metrics"` Status; 500 when the review itself failed), then the route; responses carry
  `Cache-Control: no-cache, private` as upstream's.
- Bounds: no route reads a body (aiohttp leaves it unread), request line and each header 8 KiB
  (aiohttp's parser), idle
  keep-alive connections closed after 75 s, TLS handshakes given 60 s (asyncio's default).
- Called by `kcm_shared.runtime.manager` for the controller services.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from kcm_shared.base import errors
from kcm_shared.bus.secure import authn, authz, certs
from kcm_shared.client import kubeclient

log = logging.getLogger("kcm.secure")

KEEPALIVE = 75.0
DELEGATION_QPS, DELEGATION_BURST = 200.0, 400  # upstream's for its review clients
_LOOKUP_ERRORS: tuple[type[Exception], ...] = (errors.ConfigError, *kubeclient.REQUEST_ERRORS)
_ESCAPE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})  # upstream's sanitizer


@dataclass
class Guard:
    authenticator: authn.Authenticator
    authorizer: authz.Authorizer

    @web.middleware
    async def middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        ssl_object = request.transport.get_extra_info("ssl_object") if request.transport else None
        peer = ssl_object.getpeercert(binary_form=True) if isinstance(ssl_object, ssl.SSLObject) else None
        headers = authn.Headers(lambda name: request.headers.getall(name, []), lambda: list(request.headers))
        try:
            user = await self.authenticator.authenticate(headers, peer)
        except authn.Unauthenticated as exc:
            log.debug("unauthenticated request", extra={"path": request.path, "error": str(exc)})
            return status(401, "Unauthorized", "Unauthorized")
        verb = request.method.lower()
        decision = await self.authorizer.authorize(user, verb, request.path)
        if not decision.allowed:
            if decision.error:
                text = f"Internal Server Error: {json.dumps(request.path_qs)}: {decision.error}".translate(
                    _ESCAPE
                )
                return web.Response(status=500, text=text + "\n")
            message = f"User {json.dumps(user.name)} cannot {verb} path {json.dumps(request.path)}"
            message = message.translate(_ESCAPE)
            if decision.reason:
                message += f": {decision.reason}"
            return status(403, "Forbidden", f"forbidden: {message}")
        response = await handler(request)
        response.headers["Cache-Control"] = "no-cache, private"
        return response


def status(code: int, reason: str, message: str) -> web.Response:
    """A meta/v1 Status failure, as kube-apiserver's filters write them."""
    body: dict[str, object] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if code == 403:
        body = {**body, "details": {}, "code": code}  # kube-apiserver's key order
    return web.json_response(body, status=code, headers={"X-Content-Type-Options": "nosniff"})


def _review_client(kubeconfig: str, what: str) -> kubeclient.KubeClient | None:
    """The client of the reviews: `kubeconfig`, else the in-cluster configuration when running in
    a Pod, else none (upstream's optional remote kubeconfig)."""
    if not kubeconfig and not os.environ.get("KUBERNETES_SERVICE_HOST"):
        log.warning(f"no {what}-kubeconfig and not in a cluster: no delegated {what}")
        return None
    try:
        conn = kubeclient.load_connection(kubeconfig or None)
    except Exception as exc:  # the kubernetes loader raises many kinds; each is a bad config
        if not kubeconfig:
            log.warning(
                f"failed to read in-cluster kubeconfig for delegated {what}", extra={"error": str(exc)}
            )
            return None
        raise errors.ConfigError(f"failed to get delegated {what} kubeconfig: {exc}") from exc
    return kubeclient.KubeClient(
        conn, qps=DELEGATION_QPS, burst=DELEGATION_BURST, user_agent=f"kcm/{what}", timeout=10.0
    )


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise errors.ConfigError(f"unable to load {what}: {exc}") from exc


async def _authenticator(
    args: argparse.Namespace, client: kubeclient.KubeClient | None
) -> tuple[authn.Authenticator, bytes]:
    """The authenticator the flags (and, for what they leave out, the ConfigMap) describe, and
    every CA a client certificate may chain to."""
    client_ca = _read(args.client_ca_file, "client CA file") if args.client_ca_file else b""
    rh_ca = (
        _read(args.requestheader_client_ca_file, "request-header CA")
        if args.requestheader_client_ca_file
        else b""
    )
    rh_lists = {
        "requestheader-username-headers": tuple(args.requestheader_username_headers),
        "requestheader-group-headers": tuple(args.requestheader_group_headers),
        "requestheader-extra-headers-prefix": tuple(args.requestheader_extra_headers_prefix),
        "requestheader-allowed-names": tuple(args.requestheader_allowed_names),
        "requestheader-uid-headers": tuple(args.requestheader_uid_headers),
    }
    if not args.authentication_skip_lookup and client is not None and not (client_ca and rh_ca):
        try:
            found = await authn.lookup(client)
        except _LOOKUP_ERRORS as exc:
            if not args.authentication_tolerate_lookup_failure:
                raise errors.ConfigError(
                    f"unable to load configmap based request-header-client-ca-file: {exc}"
                ) from exc
            log.warning(
                "error looking up in-cluster authentication configuration; continuing without it",
                extra={"error": str(exc)},
            )
        else:
            client_ca = client_ca or found.client_ca
            if not rh_ca and found.requestheader_ca:
                rh_ca, rh_lists = found.requestheader_ca, found.requestheader
    request_header = None
    if rh_ca.strip():
        request_header = authn.RequestHeader(
            tuple(certs.load_cas(rh_ca)),
            rh_lists.get("requestheader-allowed-names", ()),
            rh_lists.get("requestheader-username-headers", ()),
            rh_lists.get("requestheader-group-headers", ()),
            rh_lists.get("requestheader-extra-headers-prefix", ()),
            rh_lists.get("requestheader-uid-headers", ()),
        )
    tokens = authn.TokenReviewer(client, args.authentication_token_webhook_cache_ttl) if client else None
    cas = tuple(certs.load_cas(client_ca)) if client_ca.strip() else ()
    return authn.Authenticator(cas, request_header, tokens), client_ca + b"\n" + rh_ca


async def start(
    application: web.Application, args: argparse.Namespace, pair_name: str
) -> tuple[web.AppRunner, int, list[kubeclient.KubeClient]] | None:
    """Serve `application` on the secure port the flags describe (None when --secure-port=0);
    the runner to clean up, the bound port and the review clients to close."""
    if args.secure_port == 0:
        return None
    if not 0 < args.secure_port < 65536:
        raise errors.ConfigError(
            f"--secure-port {args.secure_port} must be between 0 and 65535, inclusive. 0 for turning off secure port"
        )
    authn_client = _review_client(args.authentication_kubeconfig, "authentication")
    authz_client = _review_client(args.authorization_kubeconfig, "authorization")
    clients = [c for c in (authn_client, authz_client) if c is not None]
    authenticator, client_cas = await _authenticator(args, authn_client)
    authorizer = authz.Authorizer(
        authz.Paths(args.authorization_always_allow_paths),
        authz_client,
        args.authorization_webhook_cache_authorized_ttl,
        args.authorization_webhook_cache_unauthorized_ttl,
    )
    bind = args.bind_address or "0.0.0.0"
    pair = await asyncio.to_thread(
        certs.serving_pair, args.tls_cert_file, args.tls_private_key_file, args.cert_dir, pair_name, bind
    )
    context = await asyncio.to_thread(
        certs.server_context, pair, args.tls_min_version, list(args.tls_cipher_suites), client_cas
    )
    # Before the runner freezes the application: the guard runs in front of every route.
    application.middlewares.append(Guard(authenticator, authorizer).middleware)
    runner = web.AppRunner(application, access_log=None, keepalive_timeout=KEEPALIVE)
    await runner.setup()
    site = web.TCPSite(
        runner,
        None if bind in ("0.0.0.0", "::") else bind,
        args.secure_port,
        ssl_context=context,
        reuse_address=True if args.permit_address_sharing else None,
        reuse_port=True if args.permit_port_sharing else None,
    )
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise errors.ConfigError(f"failed to listen on {bind}:{args.secure_port}: {exc}") from exc
    log.info("secure port serving", extra={"address": bind, "port": args.secure_port})
    return runner, args.secure_port, clients
