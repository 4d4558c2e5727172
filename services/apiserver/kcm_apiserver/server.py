"""The HTTP face of the embedded API server (aiohttp).

Parses Kubernetes REST paths and query parameters, negotiates the response form (JSON,
Table, PartialObjectMetadata), streams watches, and turns `ApiError` into Status bodies.
Served without credentials (`check_host`, the loopback API of `kcm dev`), it answers only
requests that name it by a loopback address and its own port in `Host`, and on every
listener it decodes a body only of an API media type (415 otherwise): a web page in a browser
on the same machine can neither rebind a name of its own to 127.0.0.1 nor POST a form or
text/plain body (which needs no CORS preflight) into the cluster.
Everything about objects is delegated to `operations` and `subresources`; writes are
recorded in the audit log when one is configured (`audit`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ipaddress
import logging
import random
import ssl
import time
import unicodedata
import urllib.parse
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec
import yaml
from aiohttp import web
from cryptography import x509
from kcm_shared.apimachinery import codec, protobuf

from kcm_apiserver import (
    audit,
    authn,
    authz,
    discovery,
    errors,
    escalation,
    gojson,
    metrics_api,
    openapi_v2,
    podstreams,
    rbac,
    reviews,
    subresources,
    tables,
)
from kcm_apiserver.operations import Api, Ctx, ListResult
from kcm_apiserver.registry import ResourceType, storage_key_of
from kcm_apiserver.schemas import openapi_v3
from kcm_apiserver.store import BOOKMARK, Event, Obj, Watcher
from kcm_apiserver.validation import metav1

log = logging.getLogger("kcm.apiserver")

VERSION_INFO = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-kcm",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-11-22T00:00:00Z",
    "goVersion": "go1.23",
    "compiler": "gc",
    "platform": "linux/amd64",
}
MAX_BODY = 3 * 1024 * 1024 + 1024
INITIAL_EVENTS_LIST_BLUEPRINT = "kubernetes.io/initial-events-list-blueprint"
_PATCH_TYPES = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
    "application/apply-patch+cbor": "unsupported",
}
# The media types a body may come in (upstream's serializers and patch types).
_BODY_TYPES = frozenset(
    {"application/json", "application/yaml", protobuf.CONTENT_TYPE}
    | {media for media, kind in _PATCH_TYPES.items() if kind != "unsupported"}
)
_TOO_DEEP = f"the body of the request could not be decoded: exceeded max depth of {codec.MAX_DEPTH}"
_TYPE_META = ("apiVersion", "kind")
_LOOPBACK_NAMES = frozenset({"localhost", "localhost."})
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode
# The metav1 options kind whose validation a request's query gets, by method (upstream's handlers).
_OPTIONS_KINDS = {
    "POST": "CreateOptions",
    "PUT": "UpdateOptions",
    "PATCH": "PatchOptions",
    "DELETE": "DeleteOptions",
}
# Request keys through which `_api` tells the audit log which object a write was about.
_TARGET = "kcm.target"
_CREATED = "kcm.created"
_USER = "kcm.user"  # the authenticated `authn.User`


@dataclass
class Target:
    """A parsed resource path."""

    rt: ResourceType
    namespace: str
    name: str
    subresource: str
    watch_path: bool


def _json(body: Any, status: int = 200, warnings: list[str] | None = None) -> web.Response:
    # Go's json.Encoder ends every document with a newline; clients comparing bodies see it.
    resp = web.Response(body=_encode(body) + b"\n", status=status, content_type="application/json")
    for w in warnings or ():
        # RFC 9110 quoted-string; upstream drops warnings holding control characters.
        if not any(unicodedata.category(c) == "Cc" for c in w):
            resp.headers.add("Warning", '299 - "' + w.replace("\\", "\\\\").replace('"', '\\"') + '"')
    return resp


def _no_foreign_origin(request: web.Request) -> bool:
    """No `Origin`, or this server's own: browsers send one with every cross-origin request and
    every POST, so a page elsewhere cannot send even a body without a Content-Type (a simple
    request that needs no CORS preflight); kubectl and API clients send none."""
    origin = request.headers.get("Origin")
    if origin is None:
        return True
    try:
        parts = urllib.parse.urlsplit(origin)
    except ValueError:
        return False
    default_port = {"http": 80, "https": 443}.get(parts.scheme)
    return default_port is not None and _loopback_here(request, parts.netloc, default_port)


def _names_loopback(request: web.Request) -> bool:
    """Whether the request's Host is a loopback name or address with the port it came in on
    (a request without Host is no browser's)."""
    host = request.headers.get("Host")
    return host is None or _loopback_here(request, host, 443 if request.secure else 80)


def _loopback_here(request: web.Request, host: str, default_port: int) -> bool:
    """Whether `host` (`name[:port]`) is a loopback name or address at the port the request
    came in on."""
    try:
        parts = urllib.parse.urlsplit("//" + host)
        port = parts.port or default_port
    except ValueError:
        return False
    name = parts.hostname or ""
    if name not in _LOOPBACK_NAMES:
        try:
            if not ipaddress.ip_address(name).is_loopback:
                return False
        except ValueError:
            return False
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    return sockname is not None and port == sockname[1]


def _openapi_not_found() -> web.Response:
    """kube-openapi's answer to a document it does not have: an empty 404."""
    return web.Response(status=404)


def _page_not_found() -> web.Response:
    """Go's http.NotFound, which kube-apiserver answers outside its API groups (`/nope`,
    `/apis/<unknown group>/...`)."""
    return web.Response(
        text="404 page not found\n",
        status=404,
        content_type="text/plain",
        charset="utf-8",
        headers={"X-Content-Type-Options": "nosniff"},
    )


def _client_certificate(request: web.Request) -> x509.Certificate | None:
    """The certificate the client presented, which the TLS handshake verified against
    --client-ca-file (a plain connection, or a TLS one without one, has none)."""
    transport = request.transport
    tls = transport.get_extra_info("ssl_object") if transport is not None else None
    if not isinstance(tls, ssl.SSLObject | ssl.SSLSocket):
        return None
    der = tls.getpeercert(binary_form=True)
    return x509.load_der_x509_certificate(der) if der else None


def _error(exc: errors.ApiError) -> web.Response:
    resp = _json(exc.status(), exc.code)
    if exc.retry_after is not None:
        resp.headers["Retry-After"] = str(exc.retry_after)
    return resp


class Server:
    def __init__(
        self,
        api: Api,
        token: str | None = None,
        bookmark_interval: float = 5.0,
        audit_log: audit.AuditLog | None = None,
        tokens: authn.ServiceAccountTokens | None = None,
        check_host: bool = False,
        authorization_modes: tuple[str, ...] = ("AlwaysAllow",),
        bootstrap_tokens: bool = False,
    ) -> None:
        self.api = api
        self.check_host = check_host
        self.audit_log = audit_log
        self.authn = authn.Authenticator(api, token, tokens, bootstrap_tokens)
        self.authorizer = authz.Authorizer(authorization_modes, rbac.Evaluator(api.store))
        self.bookmark_interval = bookmark_interval
        self.address = "127.0.0.1:0"
        self.requests: Counter[tuple[str, str, str]] = Counter()
        self.app = web.Application(client_max_size=MAX_BODY)
        # `[\s\S]`, not `.`: a decoded path may hold a CR or LF, which `.` does not match.
        self.app.router.add_route("*", r"/{tail:[\s\S]*}", self.handle)
        self.app.on_startup.append(self._start_bookmarks)
        self.app.on_cleanup.append(self._stop_bookmarks)
        self._bookmarks: asyncio.Task[None] | None = None
        self._watches: set[asyncio.Task[Any]] = set()
        self.app.on_shutdown.append(self._close_watches)
        self._openapi_v2 = openapi_v2.V2Cache(VERSION_INFO["gitVersion"])

    # -- life cycle -----------------------------------------------------------------------------

    async def _start_bookmarks(self, _app: web.Application) -> None:
        self._bookmarks = asyncio.get_running_loop().create_task(self._bookmark_loop())

    async def _stop_bookmarks(self, _app: web.Application) -> None:
        if self._bookmarks is not None:
            self._bookmarks.cancel()

    async def _close_watches(self, _app: web.Application) -> None:
        for task in list(self._watches):
            task.cancel()

    async def _bookmark_loop(self) -> None:
        while True:
            await asyncio.sleep(self.bookmark_interval)
            self.api.store.bookmark_all()

    # -- dispatch -------------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        verb = request.method
        resource = "-"
        code = 500
        received = datetime.now(UTC) if self.audit_log is not None else None
        try:
            warnings: list[str] = []
            if self.check_host and not (_names_loopback(request) and _no_foreign_origin(request)):
                raise errors.ApiError(
                    403,
                    "Forbidden",
                    "this API server takes requests without credentials on loopback only: "
                    "address it by a loopback address or localhost and its port, from no web page",
                )
            user = self.authn.authenticate(
                request.headers.get("Authorization", ""), warnings, _client_certificate(request)
            )
            request[_USER] = user
            if any(h.lower().startswith("impersonate-") for h in request.headers):
                user = authz.impersonate(user, request.headers, self.authorizer)
                request[_USER] = user
            # system:masters needs no reading of the request: it is allowed everything.
            if not self.authorizer.always_allows and authz.PRIVILEGED_GROUP not in user.groups:
                self.authorizer.check(authz.attributes_of(user, verb, request.raw_path, request.query))
            resp, resource = await self._route(request)
            # What the request wrote is committed before it is acknowledged.
            await self.api.store.synced()
            code = resp.status
            if not resp.prepared:  # a watch has sent its headers already
                for w in warnings:
                    resp.headers.add("Warning", f'299 - "{w}"')
            return resp
        except errors.ApiError as exc:
            code = exc.code
            await self._synced_anyway()
            return _error(exc)
        except Exception as exc:  # any bug must still answer like an API server, not drop the socket
            log.exception("internal error on %s %s", verb, request.path_qs)
            await self._synced_anyway()
            return _error(errors.ApiError(500, "InternalError", f"Internal error occurred: {exc}"))
        finally:
            self.requests[(verb, resource, str(code))] += 1
            if self.audit_log is not None and received is not None:
                self.audit_log.record(
                    method=verb,
                    uri=request.path_qs,
                    user_agent=request.headers.get("User-Agent", ""),
                    source_ip=request.remote or "",
                    ref=_object_ref(request),
                    code=code,
                    received=received,
                    user=(who.username, list(who.groups)) if (who := request.get(_USER)) else None,
                )

    async def _synced_anyway(self) -> None:
        """Before a failed request answers: what it wrote before failing is committed too (a
        failure to commit is logged by the store and fails the requests that see it first)."""
        with contextlib.suppress(Exception):
            await self.api.store.synced()

    async def _route(self, request: web.Request) -> tuple[web.StreamResponse, str]:
        path = request.path.rstrip("/") or "/"
        # Split the path as sent, then decode each segment: a name holding an encoded `/`, `?`
        # or `%` stays one segment and means itself. (kube-apiserver splits after decoding, so
        # there a `/` in a name still splits it; no object's name can hold one.)
        parts = [urllib.parse.unquote(p) for p in request.raw_path.split("?", 1)[0].split("/") if p]
        if path in ("/healthz", "/livez", "/readyz") or path.startswith(("/healthz/", "/livez/", "/readyz/")):
            return web.Response(text="ok"), "health"
        if path == "/version":
            return _json(VERSION_INFO), "version"
        if path == "/metrics":
            return web.Response(text=self._metrics(), content_type="text/plain"), "metrics"
        if parts and parts[0] == "openapi":
            return self._openapi(request, parts), "openapi"
        if path == "/api":
            return _json(discovery.api_versions(self.address)), "discovery"
        if path == "/apis":
            return _json(discovery.api_group_list(self.api.registry)), "discovery"
        if parts and parts[0] in ("api", "apis"):
            return await self._api(request, parts)
        return _page_not_found(), "notfound"

    def _openapi(self, request: web.Request, parts: list[str]) -> web.Response:
        if parts[1:] == ["v2"]:
            return self._openapi_v2_response(request)
        crds = self.api.crds.crds()
        if parts[1:] == ["v3"]:
            return _json(openapi_v3.openapi_v3_root(self.api.registry, crds))
        if len(parts) >= 4 and parts[1] == "v3":
            gv = parts[2:]
            if gv[0] == "api" and len(gv) == 2:
                group, version = "", gv[1]
            elif gv[0] == "apis" and len(gv) == 3:
                group, version = gv[1], gv[2]
            else:
                return _openapi_not_found()
            if not self.api.registry.in_group_version(group, version):
                return _openapi_not_found()
            resp = _json(openapi_v3.group_version_document(self.api.registry, group, version, crds))
            if "hash" in request.query:
                resp.headers["Cache-Control"] = "public, immutable"
            return resp
        return _openapi_not_found()

    def _openapi_v2_response(self, request: web.Request) -> web.Response:
        """JSON or gnostic protobuf by Accept, revalidated by ETag, as kube-openapi's handler serves it."""
        media = openapi_v2.negotiate(request.headers.get("Accept", ""))
        if media is None:
            return web.Response(status=406, headers={"Vary": "Accept"})
        crds = self.api.crds
        encoded = self._openapi_v2.get(self.api.registry, crds.crds(), crds.revision)
        headers = {"Vary": "Accept", "ETag": encoded.etag}
        if _etag_matches(request.headers.get("If-None-Match", ""), encoded.etag):
            return web.Response(status=304, headers=headers)
        body = encoded.json if media == openapi_v2.JSON_TYPE else encoded.protobuf
        return web.Response(body=body, headers={**headers, "Content-Type": media})

    def _parse(self, parts: list[str]) -> tuple[str, str, list[str]]:
        if parts[0] == "api":
            if len(parts) < 2:
                raise errors.no_such_resource()
            return "", parts[1], parts[2:]
        if len(parts) < 3:
            raise errors.no_such_resource()
        return parts[1], parts[2], parts[3:]

    async def _api(self, request: web.Request, parts: list[str]) -> tuple[web.StreamResponse, str]:
        registry = self.api.registry
        if parts[0] == "apis" and len(parts) >= 2 and parts[1] not in registry.groups():
            # No handler is registered under an unknown group: Go's mux answers, not the API.
            return _page_not_found(), "notfound"
        if parts[0] == "apis" and len(parts) == 2:
            group_doc = discovery.api_group(registry, parts[1])
            if group_doc is None:
                raise errors.no_such_resource()
            return _json(group_doc), "discovery"
        group, version, rest = self._parse(parts)
        if not rest:
            doc = discovery.resource_list(registry, group, version)
            if doc is None:
                raise errors.no_such_resource()
            return _json(doc), "discovery"
        target = self._target(group, version, rest)
        request[_TARGET] = target
        return await self._resource(request, target), target.rt.resource

    def _target(self, group: str, version: str, rest: list[str]) -> Target:
        registry = self.api.registry
        watch_path = False
        if rest[0] == "watch":
            watch_path, rest = True, rest[1:]
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            candidate = registry.lookup(group, version, rest[2])
            if candidate is not None and candidate.namespaced:
                namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise errors.no_such_resource()
        rt = registry.lookup(group, version, rest[0])
        if rt is None:
            raise errors.no_such_resource()
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if sub and sub not in rt.subresources:
            raise errors.no_such_resource()
        return Target(rt, namespace, name, sub, watch_path)

    # -- resources ------------------------------------------------------------------------------

    def _ctx(self, request: web.Request, target: Target) -> Ctx:
        q, method = request.query, request.method
        dry = q.getall("dryRun", [])
        manager = q.get("fieldManager", "")
        field_validation = q.get("fieldValidation", "")
        options = _OPTIONS_KINDS.get(method)
        if method == "PATCH":
            apply = _PATCH_TYPES.get(request.content_type) == "apply"
            causes = metav1.patch_options(dry, manager, field_validation, apply=apply, force="force" in q)
        elif method == "DELETE":
            causes = metav1.delete_options(dry)
        elif options is not None:
            causes = metav1.write_options(dry, manager, field_validation)
        else:
            causes = []  # reads take no write options: upstream ignores them there
        if options is not None and causes:
            raise errors.invalid("meta.k8s.io", options, "", causes)
        admit = None
        if target.rt.group == rbac.GROUP and target.rt.kind in escalation.KINDS:
            user, authorizer = request[_USER], self.authorizer
            admit = lambda kind, obj, old: escalation.admit(user, authorizer, kind, obj, old)  # noqa: E731
        return Ctx(
            target.rt,
            target.namespace,
            admit=admit,
            dry_run=bool(dry) and options is not None,
            field_manager=manager,
            # Upstream's default is Warn; reads and deletes decode no object.
            field_validation=(field_validation or "Warn") if method in ("POST", "PUT", "PATCH") else "Ignore",
            user_agent=request.headers.get("User-Agent", ""),
            requester=_requester(request[_USER]),
        )

    async def _body(self, request: web.Request, kind: str = "") -> Any:
        """The request's body decoded; `kind`, the one a create or update expects, words a
        JSON syntax error as kube-apiserver does (`gojson`)."""
        raw = await request.read()
        if not raw:
            return None
        # No Content-Type reads as JSON, as kube-apiserver reads it: the official Python client
        # sends its bodies without one. (aiohttp says application/octet-stream then.)
        ctype = request.content_type if "Content-Type" in request.headers else "application/json"
        if ctype not in _BODY_TYPES:
            raise errors.unsupported_media_type(request.headers.get("Content-Type", ""))
        if ctype == protobuf.CONTENT_TYPE:
            # kubectl's typed clients (kubectl create deployment/configmap/...) send protobuf.
            try:
                body = protobuf.decode(raw)
            except protobuf.ProtobufError as exc:
                raise errors.bad_request(f"the body of the request could not be decoded: {exc}") from exc
        else:
            try:
                if ctype in (
                    "application/yaml",
                    "application/apply-patch+yaml",
                ) and not raw.lstrip().startswith(b"{"):
                    body = yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
                else:
                    body = _decode(raw)
            except (msgspec.DecodeError, yaml.YAMLError, RecursionError) as exc:
                if kind and ctype == "application/json" and gojson.syntax_error(raw):
                    raise errors.bad_request(gojson.unrecognized(kind, raw)) from exc
                raise errors.bad_request(f"the body of the request could not be decoded: {exc}") from exc
            # JSON nests no deeper than it has brackets: most bodies need no walk.
            if ctype.endswith("json") and raw.count(b"{") + raw.count(b"[") <= codec.MAX_DEPTH:
                return body
        if codec.exceeds_depth(body):
            raise errors.bad_request(_TOO_DEEP)
        return body

    async def _resource(self, request: web.Request, t: Target) -> web.StreamResponse:
        ctx = self._ctx(request, t)
        method = request.method
        q = request.query
        api = self.api
        if t.rt.namespaced is False and t.namespace:
            raise errors.no_such_resource()
        if t.rt.derived:
            return self._derived(request, t)
        if t.rt.group in reviews.GROUPS:
            if method != "POST" or t.name or t.subresource or (t.rt.namespaced and not t.namespace):
                raise errors.method_not_allowed(
                    "the server does not allow this method on the requested resource"
                )
            body = await self._body(request, t.rt.kind)
            review = reviews.answer(ctx, body, request[_USER], self.authn, self.authorizer, api.track_fields)
            return _json(review, 201)
        # A CSR's approval is patched as its status is (its strategy: certificates.prepare_update).
        if t.subresource and t.subresource != "status" and (t.subresource, method) != ("approval", "PATCH"):
            return await self._subresource(request, ctx, t)
        if not t.name:
            if method == "GET":
                if t.watch_path or q.get("watch") in ("true", "1"):
                    return await self._watch(request, ctx)
                return self._list(request, ctx)
            if method == "POST":
                if t.rt.namespaced and not t.namespace:
                    raise errors.method_not_allowed(
                        "the server does not allow this method on the requested resource"
                    )
                obj = api.create(ctx, await self._body(request, t.rt.kind))
                request[_CREATED] = obj["metadata"]["name"]
                return _json(obj, 201, ctx.warnings)
            if method == "DELETE":
                opts = await self._delete_options(request)
                deleted = api.delete_collection(
                    ctx, opts, q.get("labelSelector", ""), q.get("fieldSelector", "")
                )
                return _json(self._list_body(t.rt, ListResult(deleted, str(api.store.rv))))
            raise errors.method_not_allowed("the server does not allow this method on the requested resource")
        if t.watch_path:
            return await self._watch(request, ctx, single=t.name)
        if method == "GET":
            obj = api.get(ctx, t.name)
            return self._respond_object(request, t.rt, obj)
        if method == "PUT":
            obj = api.update(ctx, t.name, await self._body(request, t.rt.kind), subresource=t.subresource)
            return _json(obj, 200, ctx.warnings)
        if method == "PATCH":
            ptype = _PATCH_TYPES.get(request.content_type)
            if ptype is None or ptype == "unsupported":
                raise errors.unsupported_media_type(request.content_type)
            force = q.get("force") in ("true", "1")
            obj, created = api.patch(ctx, t.name, ptype, await self._body(request), t.subresource, force)
            return _json(obj, 201 if created else 200, ctx.warnings)
        if method == "DELETE":
            if t.subresource:
                raise errors.method_not_allowed(
                    "the server does not allow this method on the requested resource"
                )
            obj, gone = api.delete(ctx, t.name, await self._delete_options(request))
            # Upstream answers 202 Accepted while a graceful or finalized deletion is pending.
            return _json(obj, 200 if gone else 202)
        raise errors.method_not_allowed("the server does not allow this method on the requested resource")

    async def _delete_options(self, request: web.Request) -> Obj:
        body = await self._body(request)
        opts: Obj = dict(body) if isinstance(body, dict) else {}
        q = request.query
        if "propagationPolicy" in q:
            opts["propagationPolicy"] = q["propagationPolicy"]
        if "gracePeriodSeconds" in q:
            try:
                opts["gracePeriodSeconds"] = int(q["gracePeriodSeconds"])
            except ValueError as exc:
                raise errors.bad_request("gracePeriodSeconds must be an integer") from exc
        if "orphanDependents" in q:
            opts["orphanDependents"] = q["orphanDependents"] == "true"
        return opts

    async def _subresource(self, request: web.Request, ctx: Ctx, t: Target) -> web.StreamResponse:
        method, api, sub = request.method, self.api, t.subresource
        if sub == "scale":
            if method == "GET":
                return _json(subresources.get_scale(api, ctx, t.name))
            if method in ("PUT", "PATCH"):
                ptype = None if method == "PUT" else _PATCH_TYPES.get(request.content_type, "merge")
                return _json(subresources.write_scale(api, ctx, t.name, ptype, await self._body(request)))
        handlers = {
            ("binding", "POST"): subresources.bind,
            ("eviction", "POST"): subresources.evict,
            ("finalize", "PUT"): subresources.finalize_namespace,
            ("approval", "PUT"): subresources.approve_csr,
        }
        if (sub, method) == ("token", "POST"):
            body = await self._body(request)
            return _json(subresources.request_token(api, ctx, t.name, body, self.authn.tokens), 201)
        handler = handlers.get((sub, method))
        if handler is not None:
            result = handler(api, ctx, t.name, await self._body(request))
            return _json(result, 201 if method == "POST" else 200)
        if sub == "approval" and method == "GET":
            return _json(api.get(ctx, t.name))
        if sub in ("log", "exec", "attach", "portforward") and (
            method == "GET" or (sub != "log" and method == "POST")
        ):
            pod = api.get_stored(ctx, t.name)
            node_name = (pod.get("spec") or {}).get("nodeName") or ""
            node = api.store.get("/nodes", "", node_name) if node_name else None
            where = podstreams.location(pod, node, sub, request.query)
            if sub == "log":
                return await podstreams.proxy_log(request, where)
            return await podstreams.proxy_upgrade(request, where)
        raise errors.method_not_allowed("the server does not allow this method on the requested resource")

    def _derived(self, request: web.Request, t: Target) -> web.Response:
        """metrics.k8s.io: read-only objects computed from the stored pods and nodes."""
        q = request.query
        if request.method != "GET" or t.watch_path or q.get("watch") in ("true", "1"):
            raise errors.method_not_allowed("the server does not allow this method on the requested resource")
        store, now = self.api.store, datetime.now(UTC)
        if t.rt.kind == "PodMetrics":
            items = metrics_api.all_pod_metrics(store.list("/pods", t.namespace or None), now)
        else:
            items = metrics_api.all_node_metrics(store.list("/nodes", None), store.list("/pods", None), now)
        if t.name:
            for obj in items:
                if obj["metadata"]["name"] == t.name:
                    return self._respond_object(request, t.rt, obj)
            raise errors.not_found(t.rt.group, t.rt.kind.lower(), t.name)
        match = self.api.predicate(t.rt, q.get("labelSelector", ""), q.get("fieldSelector", ""))
        items = [o for o in items if match is None or match(o)]
        form = _accepted_form(request)
        if form is not None and form[0] == "Table":
            return _json(self._table(request, t.rt, items, form[1]))
        if form is not None:
            return _json(
                {
                    "kind": "PartialObjectMetadataList",
                    "apiVersion": form[1],
                    "items": [_partial(o, form[1]) for o in items],
                }
            )
        return _json(metrics_api.list_body(t.rt.kind, items, str(store.rv)))

    # -- lists and response forms ---------------------------------------------------------------

    def _list_body(self, rt: ResourceType, result: ListResult) -> Obj:
        meta: Obj = {"resourceVersion": result.resource_version}
        if result.continue_token:
            meta["continue"] = result.continue_token
        if result.remaining is not None:
            meta["remainingItemCount"] = result.remaining
        items = [self.api.to_served(rt, o) for o in result.items]
        if rt.model is not None:
            # A typed list's items carry no apiVersion and kind in Go's encoding; a custom
            # resource's (unstructured) items do.
            items = [{k: v for k, v in o.items() if k not in _TYPE_META} for o in items]
        return {"kind": f"{rt.kind}List", "apiVersion": rt.group_version, "metadata": meta, "items": items}

    def _list(self, request: web.Request, ctx: Ctx) -> web.Response:
        q = request.query
        try:
            limit = int(q.get("limit", "0") or 0)
        except ValueError as exc:
            raise errors.bad_request("limit must be an integer") from exc
        result = self.api.list_objects(
            ctx, q.get("labelSelector", ""), q.get("fieldSelector", ""), limit, q.get("continue", "")
        )
        form = _accepted_form(request)
        if form is not None:
            kind, gv = form
            served = [self.api.to_served(ctx.rt, o) for o in result.items]
            meta: Obj = {"resourceVersion": result.resource_version}
            if result.continue_token:
                meta["continue"] = result.continue_token
            if kind == "Table":
                table = self._table(request, ctx.rt, served, gv)
                table["metadata"] = meta
                return _json(table)
            return _json(
                {
                    "kind": "PartialObjectMetadataList",
                    "apiVersion": gv,
                    "metadata": meta,
                    "items": [_partial(o, gv) for o in served],
                }
            )
        return _json(self._list_body(ctx.rt, result))

    def _respond_object(self, request: web.Request, rt: ResourceType, obj: Obj) -> web.Response:
        form = _accepted_form(request)
        if form is None:
            return _json(obj)
        kind, gv = form
        if kind == "Table":
            return _json(self._table(request, rt, [obj], gv))
        return _json(_partial(obj, gv))

    def _table(self, request: web.Request, rt: ResourceType, objs: list[Obj], gv: str) -> Obj:
        crd_columns = None
        if rt.model is None:
            for crd in self.api.crds.crds():
                spec = crd["spec"]
                if spec["group"] == rt.group and spec["names"]["plural"] == rt.resource:
                    for v in spec.get("versions", []):
                        if v["name"] == rt.version:
                            crd_columns = v.get("additionalPrinterColumns")
        try:
            table = tables.to_table(
                rt.group,
                rt.kind,
                objs,
                include_object=request.query.get("includeObject", "Metadata"),
                crd_columns=crd_columns,
            )
        except ValueError as exc:
            raise errors.bad_request(str(exc)) from exc
        table["apiVersion"] = gv
        return table

    # -- watch ----------------------------------------------------------------------------------

    async def _watch(self, request: web.Request, ctx: Ctx, single: str = "") -> web.StreamResponse:
        q = request.query
        api, rt = self.api, ctx.rt
        field_selector = q.get("fieldSelector", "")
        if single:
            field_selector = ",".join(s for s in (field_selector, f"metadata.name={single}") if s)
        predicate = api.predicate(rt, q.get("labelSelector", ""), field_selector)
        key = storage_key_of(rt)
        namespace = ctx.namespace if rt.namespaced and ctx.namespace else None
        rv_param = q.get("resourceVersion", "")
        bookmarks = q.get("allowWatchBookmarks") in ("true", "1")
        initial = q.get("sendInitialEvents") in ("true", "1") or rv_param in ("", "0")
        try:
            timeout = float(q["timeoutSeconds"]) if "timeoutSeconds" in q else random.uniform(1800, 3600)
        except ValueError as exc:
            raise errors.bad_request("timeoutSeconds must be a number") from exc
        form = _accepted_form(request)
        resp = web.StreamResponse(headers={"Content-Type": "application/json", "Cache-Control": "no-cache"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        since: int | None = None
        if not initial:
            try:
                since = int(rv_param)
            except ValueError:
                await resp.write(
                    self._line("ERROR", errors.bad_request(f'invalid resource version "{rv_param}"').status())
                )
                return resp
            if not api.store.resumable(key, since):
                oldest = api.store.oldest_resumable(key)
                await resp.write(
                    self._line("ERROR", errors.gone(f"too old resource version: {since} ({oldest})").status())
                )
                return resp
        watcher = api.store.watch(key, namespace, predicate, since)
        task = asyncio.current_task()
        assert task is not None
        self._watches.add(task)
        try:
            if initial:
                snapshot = [o for o in api.store.list(key, namespace) if predicate is None or predicate(o)]
                chunk = bytearray()
                for obj in snapshot:
                    chunk += self._encode_event("ADDED", rt, obj, form, request)
                if bookmarks and q.get("sendInitialEvents") in ("true", "1"):
                    chunk += self._bookmark(rt, api.store.rv, form, initial_end=True)
                if chunk:
                    await self.api.store.synced()
                    await resp.write(bytes(chunk))
            await self._stream(request, resp, watcher, ctx, form, bookmarks, timeout)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            api.store.stop_watch(watcher)
            self._watches.discard(task)
        return resp

    async def _stream(
        self,
        request: web.Request,
        resp: web.StreamResponse,
        watcher: Watcher,
        ctx: Ctx,
        form: tuple[str, str] | None,
        bookmarks: bool,
        duration: float,
    ) -> None:
        deadline = time.monotonic() + duration
        queue = watcher.queue
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            if watcher.overflowed.is_set() and queue.empty():
                return
            try:
                event = await asyncio.wait_for(queue.get(), timeout=min(remaining, 1.0))
            except TimeoutError:
                continue
            chunk = bytearray()
            # Drain what is already queued into one write: fewer syscalls under load.
            while True:
                chunk += self._render(event, ctx.rt, form, request, bookmarks)
                if len(chunk) > 1 << 20 or queue.empty():
                    break
                event = queue.get_nowait()
            if chunk:
                # Never ahead of the commit of what it announces (--data-dir).
                await self.api.store.synced()
                await resp.write(bytes(chunk))

    def _render(
        self,
        event: Event,
        rt: ResourceType,
        form: tuple[str, str] | None,
        request: web.Request,
        bookmarks: bool,
    ) -> bytes:
        if event.type == BOOKMARK:
            return self._bookmark(rt, event.rv, form) if bookmarks else b""
        if form is None:
            cache_key = rt.group_version
            line = event.encoded.get(cache_key)
            if line is None:
                line = self._encode_event(event.type, rt, event.obj, None, request)
                event.encoded[cache_key] = line
            return line
        return self._encode_event(event.type, rt, event.obj, form, request)

    def _encode_event(
        self, etype: str, rt: ResourceType, stored: Obj, form: tuple[str, str] | None, request: web.Request
    ) -> bytes:
        served = self.api.to_served(rt, stored)
        if form is None:
            body: Obj = served
        elif form[0] == "Table":
            body = self._table(request, rt, [served], form[1])
        else:
            body = _partial(served, form[1])
        return self._line(etype, body)

    @staticmethod
    def _line(etype: str, obj: Obj) -> bytes:
        return b'{"type":"' + etype.encode() + b'","object":' + _encode(obj) + b"}\n"

    def _bookmark(
        self, rt: ResourceType, rv: int, form: tuple[str, str] | None, initial_end: bool = False
    ) -> bytes:
        """A BOOKMARK of the kind the watch serves (PartialObjectMetadata when asked for, as
        upstream: a metadata informer cannot decode any other). The one ending the initial events
        also carries the empty list client-go's watch-list builds its list from, encoded as
        kube-apiserver encodes it (JSON with its trailing newline, in base64)."""
        kind, api_version = (
            ("PartialObjectMetadata", form[1])
            if form and form[0] == "PartialObjectMetadata"
            else (rt.kind, rt.group_version)
        )
        meta: Obj = {"resourceVersion": str(rv)}
        if kind == "PartialObjectMetadata" or rt.model is not None:
            # A typed object's ObjectMeta: Go writes its zero creationTimestamp as null.
            meta["creationTimestamp"] = None
        if initial_end:
            blueprint: Obj = {"kind": f"{kind}List", "apiVersion": api_version, "metadata": {}, "items": None}
            meta["annotations"] = {
                "k8s.io/initial-events-end": "true",
                INITIAL_EVENTS_LIST_BLUEPRINT: base64.b64encode(_encode(blueprint) + b"\n").decode(),
            }
        return self._line(BOOKMARK, {"kind": kind, "apiVersion": api_version, "metadata": meta})

    # -- metrics --------------------------------------------------------------------------------

    def _metrics(self) -> str:
        lines = [
            "# HELP apiserver_request_total Counter of apiserver requests broken out by verb, resource and code.",
            "# TYPE apiserver_request_total counter",
        ]
        for (verb, resource, code), n in sorted(self.requests.items()):
            lines.append(f'apiserver_request_total{{verb="{verb}",resource="{resource}",code="{code}"}} {n}')
        lines += [
            "# HELP apiserver_registered_watchers Number of currently registered watchers.",
            "# TYPE apiserver_registered_watchers gauge",
            f"apiserver_registered_watchers {self.api.store.watcher_count()}",
            "# HELP etcd_current_resource_version The last resourceVersion handed out.",
            "# TYPE etcd_current_resource_version gauge",
            f"etcd_current_resource_version {self.api.store.rv}",
        ]
        return "\n".join(lines) + "\n"


def _etag_matches(if_none_match: str, etag: str) -> bool:
    """If-None-Match's weak comparison (RFC 9110 13.1.2), as Go's http.ServeContent does it."""
    for candidate in if_none_match.split(","):
        candidate = candidate.strip()
        if candidate == "*" or candidate.removeprefix("W/") == etag:
            return True
    return False


def _accepted_form(request: web.Request) -> tuple[str, str] | None:
    """(kind, apiVersion) when the client accepts Table or PartialObjectMetadata, else None."""
    accept = request.headers.get("Accept", "")
    for clause in accept.split(","):
        params = dict(p.strip().split("=", 1) for p in clause.split(";")[1:] if "=" in p)
        as_kind = params.get("as")
        if params.get("g") != "meta.k8s.io" or as_kind is None:
            continue
        version = params.get("v", "v1")
        if as_kind == "Table":
            return "Table", f"meta.k8s.io/{version}"
        if as_kind in ("PartialObjectMetadata", "PartialObjectMetadataList"):
            return "PartialObjectMetadata", f"meta.k8s.io/{version}"
    return None


def _requester(user: authn.User) -> Obj:
    return {"username": user.username, "uid": user.uid, "groups": list(user.groups)}


def _partial(obj: Obj, gv: str) -> Obj:
    return {"kind": "PartialObjectMetadata", "apiVersion": gv, "metadata": obj.get("metadata", {})}


def _object_ref(request: web.Request) -> audit.ObjectRef | None:
    target: Target | None = request.get(_TARGET)
    if target is None:
        return None
    rt = target.rt
    name = target.name or request.get(_CREATED, "")
    return audit.ObjectRef(rt.resource, target.namespace, name, rt.group, rt.version, target.subresource)
