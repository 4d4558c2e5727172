"""An asyncio Kubernetes API client: JSON (or protobuf reads) over HTTP/1.1, configured by the official client.

Connection settings (kubeconfig, in-cluster service account, `--master`) are read with the
official `kubernetes` package, so every auth method it supports works; requests then go
through kept-alive connections of `kcm_shared.client.http1` (watches through aiohttp, which
streams) with msgspec decoding, which is what services on the bus need (async, cheap per
call). Requests are rate limited client-side like client-go's
`--kube-api-qps` / `--kube-api-burst`, but waiting requests are served by `Priority` (a
`priority=` argument, NORMAL unless said; `tokenbucket.PriorityLimiter`). Errors arrive as `ApiError` carrying the server's
metav1.Status.

Paths are built only by `resource_path` / `group_version_path`, which percent-encode every
part through `segment`: names are user input (an ownerReference's name is anything
non-empty), and a raw one could name another object or end the request line. A bearer token
kept in a file (in-cluster, or a kubeconfig's `tokenFile`) is re-read as client-go does
(`TokenFile`); any other `TokenSource` may stand in for it (`kcm_shared.client.clientbuilder`'s
TokenRequest tokens), on a connection stripped of its own credentials (`anonymous`).
`content_type` is `--kube-api-content-type`: with protobuf, reads of built-in objects arrive
as protobuf and are handed on as JSON (`kcm_shared.client.contenttype`). A
`write_guard` (the controller runtime passes `fencing.check_write`) is called right before each
mutating request is sent, after the rate limiter's wait, and may refuse it by raising.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import ssl
import time
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import aiohttp
import msgspec
import yaml
import yarl

from kcm_shared.apimachinery import protobuf
from kcm_shared.base import tracing
from kcm_shared.client import contenttype, http1, tokenbucket
from kcm_shared.client.tokenbucket import Priority as Priority

log = logging.getLogger("kcm.kubeclient")

Obj = dict[str, Any]
TOKEN_REREAD_SECONDS = 60.0  # client-go's cached file token source period
_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode

PATCH_TYPES = {
    "json": "application/json-patch+json",
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}
_READS = frozenset({"GET", "HEAD", "OPTIONS"})
WriteGuard = Callable[[str, str], None]


class ApiError(Exception):
    """A non-2xx answer; `status` is the metav1.Status body when the server sent one."""

    def __init__(self, code: int, reason: str, message: str, status: Obj | None = None) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.status = status or {}

    @property
    def not_found(self) -> bool:
        return self.code == 404

    @property
    def conflict(self) -> bool:
        return self.code == 409

    @property
    def gone(self) -> bool:
        return self.code == 410


# What one request may fail with: an answer (ApiError) or no answer (a broken connection, a
# timeout, a body that cannot be read). A caller that logs a failed request and goes on, as
# upstream's loops do, catches these.
REQUEST_ERRORS: tuple[type[Exception], ...] = (
    ApiError,
    aiohttp.ClientError,
    OSError,
    TimeoutError,
    protobuf.ProtobufError,
)


@dataclass
class Connection:
    """Where the API server is and how to authenticate to it.

    `token_file`, when set, is where the bearer token lives (in-cluster: the projected service
    account token; a kubeconfig's `tokenFile`): the kubelet rotates it, so `KubeClient` re-reads
    it rather than keeping the token it started with. `ca_file` is the file holding the CA
    the connection trusts (a kubeconfig's inline data lands in a file too), if it names one;
    `insecure`: the server's certificate is not checked (`insecure-skip-tls-verify`).
    """

    server: str
    headers: dict[str, str] = field(default_factory=dict)
    ssl_context: ssl.SSLContext | bool = True
    namespace: str = "default"
    token_file: str | None = None
    ca_file: str | None = None
    insecure: bool = False


def load_connection(
    kubeconfig: str | None = None, master: str | None = None, context: str | None = None
) -> Connection:
    """Resolve a connection like kube-controller-manager: kubeconfig, else in-cluster; `master` overrides."""
    from kubernetes import client, config
    from kubernetes.config import incluster_config

    cfg = client.Configuration()
    namespace = "default"
    token_file = None
    if kubeconfig:
        config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
        contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
        chosen = next((c for c in contexts if c.get("name") == context), None) if context else active
        namespace = (chosen or {}).get("context", {}).get("namespace", "default")
        token_file = _kubeconfig_token_file(kubeconfig, (chosen or {}).get("context", {}).get("user"))
    elif master:
        cfg.host = master
    else:
        config.load_incluster_config(client_configuration=cfg)
        token_file = incluster_config.SERVICE_TOKEN_FILENAME
    if master:
        cfg.host = master
    headers = {}
    token = cfg.api_key.get("authorization") or cfg.api_key.get("BearerToken")
    if token:
        prefix = cfg.api_key_prefix.get("authorization", "")
        headers["Authorization"] = f"{prefix} {token}".strip() if not token.startswith("Bearer") else token
    elif cfg.username:
        headers["Authorization"] = aiohttp.BasicAuth(cfg.username, cfg.password or "").encode()
    ssl_ctx: ssl.SSLContext | bool = True
    if cfg.host.startswith("https"):
        ssl_ctx = _trusting(cfg.ssl_ca_cert or None, insecure=not cfg.verify_ssl)
        if cfg.cert_file:
            ssl_ctx.load_cert_chain(cfg.cert_file, cfg.key_file)
    return Connection(
        cfg.host.rstrip("/"),
        headers,
        ssl_ctx,
        namespace,
        token_file,
        cfg.ssl_ca_cert or None,
        insecure=not cfg.verify_ssl,
    )


def anonymous(conn: Connection) -> Connection:
    """`conn` without its credentials (token, basic auth, client certificate), trusting the same
    server: client-go's AnonymousClientConfig, the base of a client that authenticates as someone
    else. The certificate matters as much as the headers: kube-apiserver tries client
    certificates before bearer tokens, so a request carrying both is the certificate's user."""
    ssl_ctx: ssl.SSLContext | bool = conn.ssl_context
    if isinstance(ssl_ctx, ssl.SSLContext):
        ssl_ctx = _trusting(conn.ca_file, insecure=conn.insecure)
    return Connection(conn.server, {}, ssl_ctx, conn.namespace, None, conn.ca_file, conn.insecure)


def _trusting(ca_file: str | None, *, insecure: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=ca_file) if ca_file else ssl.create_default_context()
    if insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _kubeconfig_token_file(kubeconfig: str, user_name: str | None) -> str | None:
    """The `tokenFile` of the kubeconfig user `user_name`, relative paths taken from the
    kubeconfig's folder (as kubectl does); None when that user has none."""
    with open(kubeconfig, encoding="utf-8") as f:
        doc = yaml.safe_load(f) or {}
    for entry in doc.get("users") or []:
        if entry.get("name") == user_name:
            token_file = (entry.get("user") or {}).get("tokenFile")
            if token_file:
                return str(Path(kubeconfig).parent / Path(token_file).expanduser())
    return None


class TokenSource(Protocol):
    """Where a client's bearer token comes from, asked before every request (`TokenFile`,
    `clientbuilder.ServiceAccountToken`)."""

    async def header(self) -> str:
        """The Authorization header's value to send now."""
        ...

    def rejected(self, header: str) -> None:
        """The server answered 401 to `header`: get another before the next request."""
        ...


class TokenFile:
    """The bearer token in a file, re-read at most once a `period` and at once after a 401.

    client-go serves in-cluster tokens the same way (a cached file token source refreshed every
    minute): the kubelet rotates projected service account tokens well before they expire, and
    a token read once at start-up expires (after an hour, unless the API server extends it).
    A file that cannot be read keeps the last token that could (with a warning), as client-go
    does; with none yet, the request fails with a ConnectionError naming the file.
    """

    def __init__(self, path: str, period: float = TOKEN_REREAD_SECONDS) -> None:
        self.path = path
        self._period = period
        self._header = ""
        self._read_at = -math.inf
        self._lock = asyncio.Lock()

    async def header(self) -> str:
        """The Authorization header's value, from a read no older than the period."""
        if self._header and time.monotonic() - self._read_at < self._period:
            return self._header
        async with self._lock:  # one read for every request that found the token stale
            if not self._header or time.monotonic() - self._read_at >= self._period:
                await self._read()
        return self._header

    def rejected(self, header: str) -> None:
        """The server answered 401 to `header`: read the file again before the next request."""
        if header == self._header:
            self._read_at = -math.inf

    async def _read(self) -> None:
        try:
            token = (await asyncio.to_thread(Path(self.path).read_text, encoding="utf-8")).strip()
            if not token:
                raise ValueError("the file is empty")
            header = f"Bearer {token}"
            http1.check_header("Authorization", header)
        except (OSError, ValueError) as exc:
            if not self._header:
                raise ConnectionError(f"cannot read the bearer token file {self.path}: {exc}") from exc
            log.warning(
                "cannot re-read the bearer token file, keeping the last token",
                extra={"path": self.path, "error": str(exc)},
            )
            self._read_at = time.monotonic()
            return
        self._header, self._read_at = header, time.monotonic()


def segment(value: str) -> str:
    """`value` as one URL path segment: the only way a name, namespace, resource, group or
    version enters a path. Everything but letters, digits and `-._~` is percent-encoded (a `/`,
    `?`, `#`, `%`, space, CR/LF or non-ASCII character stays inside its segment and reaches the
    server as itself); `.` and `..` are encoded too, or they would be read as "this" and "the
    parent" segment."""
    if not value:
        raise ValueError("an empty URL path segment would join its neighbours")
    encoded = urllib.parse.quote(value, safe="")
    return encoded.replace(".", "%2E") if encoded in (".", "..") else encoded


def group_version_path(group: str, version: str) -> str:
    """The path of an API group version: `/api/v1` for the core group, else `/apis/<group>/<version>`."""
    return f"/apis/{segment(group)}/{segment(version)}" if group else f"/api/{segment(version)}"


def resource_path(
    group: str,
    version: str,
    resource: str,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    """A collection's path, or an object's (with `name`), or its subresource's; every part
    goes through `segment`. A falsy namespace means cluster-scoped, a falsy name the collection."""
    parts = [group_version_path(group, version)]
    if namespace:
        parts += ("namespaces", segment(namespace))
    parts.append(segment(resource))
    if name:
        parts.append(segment(name))
    if subresource:
        parts.append(segment(subresource))
    return "/".join(parts)


class KubeClient:
    def __init__(
        self,
        conn: Connection,
        *,
        qps: float = 20.0,
        burst: int = 30,
        user_agent: str = "kcm",
        timeout: float = 30.0,
        token_reread: float = TOKEN_REREAD_SECONDS,
        write_guard: WriteGuard | None = None,
        token_source: TokenSource | None = None,
        content_type: str = contenttype.JSON,
    ) -> None:
        self.conn = conn
        self.content_type = contenttype.ContentType(content_type)
        self.user_agent = user_agent
        self._write_guard = write_guard
        self._limiter = tokenbucket.PriorityLimiter(qps, burst) if qps > 0 else None
        self._timeout = timeout
        self._session: aiohttp.ClientSession | None = None
        self._api: http1.Client | None = None
        self._token: TokenSource | None = token_source
        if token_source is None and conn.token_file:
            self._token = TokenFile(conn.token_file, token_reread)
        # With a token source the Authorization header is its current token, per request.
        fixed = {k: v for k, v in conn.headers.items() if not (self._token and k.lower() == "authorization")}
        # Accept is per request (`contenttype`).
        self._headers = {**fixed, "User-Agent": user_agent}

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=self.conn.ssl_context, limit=100)
            self._session = aiohttp.ClientSession(connector=connector, headers=self._headers)
        return self._session

    def _calls(self) -> http1.Client:
        if self._api is None:
            self._api = http1.Client(
                self.conn.server,
                headers=self._headers,
                ssl_context=self.conn.ssl_context,
                timeout=self._timeout,
            )
        return self._api

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
        if self._api is not None:
            await self._api.close()
            self._api = None

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        priority: Priority = Priority.NORMAL,
    ) -> Obj:
        raw = await self.request_bytes(
            method, path, params=params, body=body, content_type=content_type, priority=priority
        )
        if not raw:
            return {}
        result: Obj = _decode(raw)
        return result

    async def request_bytes(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        priority: Priority = Priority.NORMAL,
    ) -> bytes:
        """The response body as JSON bytes, undecoded, for callers that pass objects on byte for
        byte (the watcher); a protobuf answer is converted."""
        resp = await self._send(method, path, params, body, content_type, priority)
        return contenttype.json_body(resp.headers.get("content-type", ""), resp.body)

    async def _send(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        body: Any,
        content_type: str,
        priority: Priority,
    ) -> http1.Response:
        if self._limiter is not None:
            await self._limiter.acquire(priority)
        # After the limiter's wait, which can be long: ownership may have ended during it.
        if self._write_guard is not None and method not in _READS:
            self._write_guard(method, path)
        data = None if body is None else (body if isinstance(body, bytes) else _encode(body))
        headers = {"Accept": self.content_type.accept(method, path)}
        if data is not None:
            headers["Content-Type"] = content_type
        # Writes made inside a reconcile carry its trace, so one trace spans watcher -> API write.
        tracing.inject(headers)
        auth = await self._authorize(headers)
        resp = await self._calls().request(method, path, params=params, body=data, headers=headers)
        if resp.status == 401 and self._token is not None:
            self._token.rejected(auth)
            if await self._authorize(headers) != auth:
                # Rotated under us. A 401 is answered before anything is done, so the request
                # goes again once, with the token the file holds now.
                resp = await self._calls().request(method, path, params=params, body=data, headers=headers)
        if resp.status >= 400:
            raise _error(resp.status, resp.headers.get("content-type", ""), resp.body)
        return resp

    async def _authorize(self, headers: dict[str, str]) -> str:
        """Put the token source's current token in `headers` (when there is one); return it."""
        if self._token is None:
            return ""
        headers["Authorization"] = auth = await self._token.header()
        return auth

    async def get(
        self, path: str, params: Mapping[str, str] | None = None, *, priority: Priority = Priority.NORMAL
    ) -> Obj:
        return await self.request("GET", path, params=params, priority=priority)

    async def create(
        self,
        path: str,
        obj: Obj,
        params: Mapping[str, str] | None = None,
        *,
        priority: Priority = Priority.NORMAL,
    ) -> Obj:
        return await self.request("POST", path, body=obj, params=params, priority=priority)

    async def update(
        self,
        path: str,
        obj: Obj,
        params: Mapping[str, str] | None = None,
        *,
        priority: Priority = Priority.NORMAL,
    ) -> Obj:
        return await self.request("PUT", path, body=obj, params=params, priority=priority)

    async def patch(
        self,
        path: str,
        patch: Any,
        patch_type: str = "merge",
        params: Mapping[str, str] | None = None,
        *,
        priority: Priority = Priority.NORMAL,
    ) -> Obj:
        return await self.request(
            "PATCH", path, body=patch, params=params, content_type=PATCH_TYPES[patch_type], priority=priority
        )

    async def delete(
        self,
        path: str,
        options: Obj | None = None,
        params: Mapping[str, str] | None = None,
        *,
        priority: Priority = Priority.NORMAL,
    ) -> Obj:
        return await self.request("DELETE", path, body=options, params=params, priority=priority)

    async def watch(self, path: str, params: Mapping[str, str]) -> AsyncIterator[Obj]:
        """Yield watch events until the server ends the stream; an ERROR event raises ApiError."""
        async for line in self.watch_lines(path, params):
            event: Obj = _decode(line)
            if event.get("type") == "ERROR":
                raise status_error(event.get("object") or {})
            yield event

    async def watch_lines(self, path: str, params: Mapping[str, str]) -> AsyncIterator[bytes]:
        """Yield each watch event's JSON line undecoded until the server ends the stream.

        ERROR events are yielded like any other: the caller decodes and raises `status_error`.
        """
        async for batch in self.watch_batches(path, params):
            for line in batch:
                yield line

    async def watch_batches(self, path: str, params: Mapping[str, str]) -> AsyncIterator[list[bytes]]:
        """Like `watch_lines`, but the lines that arrived together come as one list.

        A busy watch delivers many events per read; a consumer can then pay its per-batch costs
        (the watcher's trace span) once for all of them.
        """
        # Already encoded (`resource_path`, `http1.query_string`): yarl must not requote it.
        url = yarl.URL(
            f"{self.conn.server}{path}?{http1.query_string({**params, 'watch': 'true'})}", encoded=True
        )
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=None)
        headers = {"Accept": self.content_type.accept("GET", path)}
        auth = await self._authorize(headers)
        async with self._http().get(url, headers=headers, timeout=timeout) as resp:
            if resp.status >= 400:
                if resp.status == 401 and self._token is not None:
                    self._token.rejected(auth)
                raise _error(resp.status, resp.headers.get("Content-Type", ""), await resp.read())
            if contenttype.is_protobuf(resp.headers.get("Content-Type", "")):
                frames = contenttype.WatchFrames()
                async for chunk in resp.content.iter_any():
                    if events := frames.feed(chunk):
                        yield events
                return
            partial = b""
            async for chunk in resp.content.iter_any():
                # One split per read: partitioning line by line would copy the rest each time.
                lines = (partial + chunk).split(b"\n")
                partial = lines.pop()
                batch = [line for line in lines if line.strip()]
                if batch:
                    yield batch


def status_error(status: Obj) -> ApiError:
    """The ApiError a watch ERROR event's metav1.Status stands for."""
    return ApiError(int(status.get("code", 500)), status.get("reason", ""), status.get("message", ""), status)


def _error(code: int, content_type: str, raw: bytes) -> ApiError:
    try:
        status = contenttype.obj_body(content_type, raw) if raw else {}
    except (msgspec.DecodeError, protobuf.ProtobufError):
        status = {}
    if not isinstance(status, dict) or status.get("kind") != "Status":
        return ApiError(code, "", raw.decode(errors="replace")[:500])
    return ApiError(code, status.get("reason", ""), status.get("message", ""), status)


T = TypeVar("T")


async def retry_on_conflict(
    attempt: Callable[[], Awaitable[T]], *, steps: int = 5, delay: float = 0.01, jitter: float = 0.1
) -> T:
    """Run `attempt` again while it fails with 409 Conflict, like client-go's RetryOnConflict
    with DefaultRetry (5 tries, 10 ms apart, 10% jitter). `attempt` must re-read the object
    each time: a conflict means the copy it started from is stale."""
    for tried in range(1, steps + 1):
        try:
            return await attempt()
        except ApiError as exc:
            if not exc.conflict or tried == steps:
                raise
        await asyncio.sleep(delay * (1 + random.random() * jitter))
    raise AssertionError("unreachable: the last attempt returns or raises")


async def sleep_backoff(attempt: int, base: float = 0.2, cap: float = 10.0) -> None:
    """Exponential backoff for reconnect loops (dead API server, dropped watch)."""
    await asyncio.sleep(min(cap, base * (2 ** min(attempt, 16))))
