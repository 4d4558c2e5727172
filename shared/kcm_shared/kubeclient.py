"""An asyncio Kubernetes API client: JSON over HTTP/1.1, configured by the official client.

Connection settings (kubeconfig, in-cluster service account, `--master`) are read with the
official `kubernetes` package, so every auth method it supports works; requests then go
through kept-alive connections of `kcm_shared.http1` (watches through aiohttp, which
streams) with msgspec decoding, which is what services on the bus need (async, cheap per
call). Writes are rate limited client-side like client-go's
`--kube-api-qps` / `--kube-api-burst`. Errors arrive as `ApiError` carrying the server's
metav1.Status. A `write_guard` (the controller runtime passes `fencing.check_write`) is called
right before each mutating request is sent, after the rate limiter's wait, and may refuse it
by raising.
"""

from __future__ import annotations

import asyncio
import random
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp
import msgspec

from kcm_shared import http1, tokenbucket, tracing

Obj = dict[str, Any]
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


@dataclass
class Connection:
    """Where the API server is and how to authenticate to it."""

    server: str
    headers: dict[str, str] = field(default_factory=dict)
    ssl_context: ssl.SSLContext | bool = True
    namespace: str = "default"


def load_connection(
    kubeconfig: str | None = None, master: str | None = None, context: str | None = None
) -> Connection:
    """Resolve a connection like kube-controller-manager: kubeconfig, else in-cluster; `master` overrides."""
    from kubernetes import client, config

    cfg = client.Configuration()
    namespace = "default"
    if kubeconfig:
        config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
        _, active = config.list_kube_config_contexts(config_file=kubeconfig)
        namespace = (active or {}).get("context", {}).get("namespace", "default")
    elif master:
        cfg.host = master
    else:
        config.load_incluster_config(client_configuration=cfg)
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
        ctx = (
            ssl.create_default_context(cafile=cfg.ssl_ca_cert)
            if cfg.ssl_ca_cert
            else ssl.create_default_context()
        )
        if cfg.cert_file:
            ctx.load_cert_chain(cfg.cert_file, cfg.key_file)
        if not cfg.verify_ssl:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        ssl_ctx = ctx
    return Connection(cfg.host.rstrip("/"), headers, ssl_ctx, namespace)


def resource_path(
    group: str,
    version: str,
    resource: str,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    parts = [base]
    if namespace:
        parts.append(f"namespaces/{namespace}")
    parts.append(resource)
    if name:
        parts.append(name)
    if subresource:
        parts.append(subresource)
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
        write_guard: WriteGuard | None = None,
    ) -> None:
        self.conn = conn
        self.user_agent = user_agent
        self._write_guard = write_guard
        self._limiter = tokenbucket.TokenBucket(qps, burst) if qps > 0 else None
        self._timeout = timeout
        self._session: aiohttp.ClientSession | None = None
        self._api: http1.Client | None = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=self.conn.ssl_context, limit=100)
            self._session = aiohttp.ClientSession(
                connector=connector,
                headers={**self.conn.headers, "User-Agent": self.user_agent, "Accept": "application/json"},
            )
        return self._session

    def _calls(self) -> http1.Client:
        if self._api is None:
            headers = {**self.conn.headers, "User-Agent": self.user_agent, "Accept": "application/json"}
            self._api = http1.Client(
                self.conn.server, headers=headers, ssl_context=self.conn.ssl_context, timeout=self._timeout
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
    ) -> Obj:
        raw = await self.request_bytes(method, path, params=params, body=body, content_type=content_type)
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
    ) -> bytes:
        """The response body undecoded, for callers that pass objects on byte for byte (the watcher)."""
        if self._limiter is not None:
            await self._limiter.acquire()
        # After the limiter's wait, which can be long: ownership may have ended during it.
        if self._write_guard is not None and method not in _READS:
            self._write_guard(method, path)
        data = None if body is None else (body if isinstance(body, bytes) else _encode(body))
        headers = {"Content-Type": content_type} if data is not None else {}
        # Writes made inside a reconcile carry its trace, so one trace spans watcher -> API write.
        tracing.inject(headers)
        resp = await self._calls().request(method, path, params=params, body=data, headers=headers)
        if resp.status >= 400:
            raise _error(resp.status, resp.body)
        return resp.body

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> Obj:
        return await self.request("GET", path, params=params)

    async def create(self, path: str, obj: Obj, params: Mapping[str, str] | None = None) -> Obj:
        return await self.request("POST", path, body=obj, params=params)

    async def update(self, path: str, obj: Obj, params: Mapping[str, str] | None = None) -> Obj:
        return await self.request("PUT", path, body=obj, params=params)

    async def patch(
        self, path: str, patch: Any, patch_type: str = "merge", params: Mapping[str, str] | None = None
    ) -> Obj:
        return await self.request(
            "PATCH", path, body=patch, params=params, content_type=PATCH_TYPES[patch_type]
        )

    async def delete(
        self, path: str, options: Obj | None = None, params: Mapping[str, str] | None = None
    ) -> Obj:
        return await self.request("DELETE", path, body=options, params=params)

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
        query = {**params, "watch": "true"}
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=None)
        async with self._http().get(self.conn.server + path, params=query, timeout=timeout) as resp:
            if resp.status >= 400:
                raise _error(resp.status, await resp.read())
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


def _error(code: int, raw: bytes) -> ApiError:
    try:
        status = _decode(raw) if raw else {}
    except msgspec.DecodeError:
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
