"""Connecting to NATS and declaring the JetStream streams of the bus.

Every service takes the same `--nats-*` flags (`add_arguments`; credentials come from files, so
no secret shows in a process list), connects with `connect` (reconnecting forever with
backoff: a dead NATS is waited out, not fatal; only credentials the server refuses stop the
service, with `errors.ConfigError`), and declares the streams it uses with the `ensure_*`
helpers, which are idempotent so any service may start first. Only a stream's owner brings
an existing stream to its configuration (`owner=True`: the watcher `KCM_OBJECTS`, the
coordinator `KCM_DLQ`); every other service creates it when missing and otherwise uses it as
it is, since an update may add any free subject to a stream (docs/bus.md "Who may publish
what"). `is_transient` tells the NATS errors worth retrying from the others. The stream
layout is documented in docs/bus.md.

A connection closed for good while its service did not close it (nats-py does not reconnect
after the server closes it for a protocol error, such as a subject over its control line)
ends the process with exit code 1 and the log line `nats connection closed for good`: the
supervisor (`kcm dev`, compose's restart policy, the kubelet) starts the service again,
where retrying on a closed client would publish nothing for ever.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import nats
import nats.errors
import nkeys  # type: ignore[import-untyped]  # nats-py's own dependency, without type hints
from nats.aio.client import Client
from nats.js import JetStreamContext, api
from nats.js.errors import (
    APIError,
    BadRequestError,
    KeyWrongLastSequenceError,
    NoStreamResponseError,
    ServiceUnavailableError,
)

from kcm_shared.base import cancellation, errors
from kcm_shared.bus import subjects, wire
from kcm_shared.client import kubeclient

log = logging.getLogger("kcm.nats")
T = TypeVar("T")

TOMBSTONE_TTL = 3600.0  # seconds a DELETED tombstone stays in the object stream
# Errors after which the same request can succeed: NATS restarting or reconnecting, a
# JetStream (or one stream) not answering yet, or again after it was lost.
_TRANSIENT = (
    nats.errors.TimeoutError,
    nats.errors.NoRespondersError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.OutboundBufferLimitError,
    nats.errors.StaleConnectionError,
    NoStreamResponseError,
    ServiceUnavailableError,
    TimeoutError,
    ConnectionError,
)


def is_transient(exc: BaseException) -> bool:
    """Whether retrying (after a backoff) can cure `exc`."""
    if isinstance(exc, APIError) and exc.code == 503:
        return True
    return isinstance(exc, _TRANSIENT)


def _refused(exc: BaseException) -> bool:
    """The server turned our credentials down: retrying with the same ones cannot help."""
    return isinstance(exc, nats.errors.AuthorizationError) or "authorization violation" in str(exc).lower()


@dataclass
class NatsOptions:
    url: str = "nats://127.0.0.1:4222"
    user: str | None = None
    password: str | None = None
    token: str | None = None
    nkey_seed: str | None = None  # path of an nkey seed file
    creds: str | None = None  # path of a .creds file (JWT + seed)
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    stream_replicas: int = 1


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("NATS")
    g.add_argument("--nats-url", default=NatsOptions.url, help="NATS server URL(s), comma-separated")
    g.add_argument("--nats-user", help="NATS user name (with --nats-password-file)")
    g.add_argument("--nats-password", help="prefer --nats-password-file: a command line is public")
    g.add_argument("--nats-password-file", help="file holding the password of --nats-user")
    g.add_argument("--nats-token", help="NATS authentication token")
    g.add_argument("--nats-nkey-seed", help="file holding an nkey seed (what kcm dev, compose and k8s/ use)")
    g.add_argument("--nats-creds", help="a NATS .creds file")
    g.add_argument("--nats-tls-ca", help="CA bundle to verify the NATS server")
    g.add_argument("--nats-tls-cert", help="client certificate for mutual TLS")
    g.add_argument("--nats-tls-key", help="client key for mutual TLS")
    g.add_argument(
        "--nats-stream-replicas",
        type=int,
        choices=range(1, 6),
        default=NatsOptions.stream_replicas,
        metavar="N",
        help="replicas of each JetStream stream the service declares (1-5; 3 on a three-server "
        "cluster, so the bus survives losing a server); every service must use the same value",
    )


def from_args(args: argparse.Namespace) -> NatsOptions:
    """The options of the flags; a credentials file that cannot be read is a configuration
    error (OSError, which `kcm` reports in one line), not a NATS outage to wait out."""
    for path in (args.nats_nkey_seed, args.nats_creds):
        if path is not None:
            with open(path, "rb"):
                pass
    return NatsOptions(
        url=args.nats_url,
        user=args.nats_user,
        password=_secret(args.nats_password, args.nats_password_file),
        token=args.nats_token,
        nkey_seed=args.nats_nkey_seed,
        creds=args.nats_creds,
        tls_ca=args.nats_tls_ca,
        tls_cert=args.nats_tls_cert,
        tls_key=args.nats_tls_key,
        stream_replicas=args.nats_stream_replicas,
    )


def _secret(value: str | None, path: str | None) -> str | None:
    """A flag's value, or the first line of the file named instead (a missing file is fatal)."""
    if path is None:
        return value
    with open(path, encoding="utf-8") as f:
        return f.readline().rstrip("\r\n")


def _tls(opts: NatsOptions) -> ssl.SSLContext | None:
    if not (opts.tls_ca or opts.tls_cert):
        return None
    ctx = ssl.create_default_context(cafile=opts.tls_ca)
    if opts.tls_cert:
        ctx.load_cert_chain(opts.tls_cert, opts.tls_key)
    return ctx


async def connect(opts: NatsOptions, name: str) -> Client:
    """Connect, retrying the first connection too (services may start before NATS does).

    Raises `errors.ConfigError` when the server refuses the credentials (an authorization
    violation): that needs the operator, not a retry.
    """
    refusal: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def on_error(exc: Exception) -> None:
        if _refused(exc) and not refusal.done():
            refusal.set_result(str(exc))  # read only while the first connection is attempted
        log.warning("nats error", extra={"error": str(exc), "client": name})

    async def on_disconnect() -> None:
        log.warning("nats disconnected", extra={"client": name})

    async def on_reconnect() -> None:
        log.info("nats reconnected", extra={"client": name})

    client = _Client()  # the latest attempt's: the one returned, when it connects

    async def on_closed() -> None:
        if client.closing:
            return
        log.error(
            "nats connection closed for good; exiting for a restart",
            extra={"client": name, "error": repr(client.last_error)},
        )
        for handler in logging.getLogger().handlers:
            handler.flush()
        os._exit(1)  # the service's own shutdown would wait on the bus it no longer has

    attempt = 0
    while True:
        cancellation.checkpoint()
        client = _Client()
        # nats-py retries a refused connection internally for ever: watch for the refusal beside it.
        connecting = asyncio.ensure_future(
            _connect_once(client, opts, name, on_error, on_disconnect, on_reconnect, on_closed)
        )
        try:
            waiting: list[asyncio.Future[Any]] = [connecting, refusal]
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not connecting.done():
                connecting.cancel()
                await asyncio.wait([connecting])
        if not connecting.cancelled():
            try:
                return connecting.result()
            except (OSError, nats.errors.NoServersError, TimeoutError) as exc:
                log.warning(
                    "nats not reachable yet", extra={"url": opts.url, "error": str(exc), "attempt": attempt}
                )
        if refusal.done():
            raise errors.ConfigError(f"NATS at {opts.url} refused this client: {refusal.result()}")
        await asyncio.sleep(min(5.0, 0.1 * 2**attempt))
        attempt += 1


class _Client(Client):
    """A client that knows whether its own service closed it: nats-py calls `closed_cb` for
    every close."""

    closing = False

    async def close(self) -> None:
        self.closing = True
        await super().close()

    async def drain(self) -> None:
        self.closing = True
        await super().drain()

    async def __aexit__(self, *exc_info: object) -> None:
        self.closing = True
        await super().__aexit__(*exc_info)


async def _connect_once(
    client: _Client,
    opts: NatsOptions,
    name: str,
    on_error: Callable[[Exception], Awaitable[None]],
    on_disconnect: Callable[[], Awaitable[None]],
    on_reconnect: Callable[[], Awaitable[None]],
    on_closed: Callable[[], Awaitable[None]],
) -> Client:
    await client.connect(
        servers=opts.url.split(","),
        name=name,
        user=opts.user,
        password=opts.password,
        token=opts.token,
        nkeys_seed=opts.nkey_seed,
        inbox_prefix=_inbox_prefix(opts),
        user_credentials=opts.creds,
        tls=_tls(opts),
        allow_reconnect=True,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.5,  # type: ignore[arg-type]  # annotated int; nats-py sleeps a float
        connect_timeout=5,
        error_cb=on_error,
        disconnected_cb=on_disconnect,
        reconnected_cb=on_reconnect,
        closed_cb=on_closed,
        ping_interval=10,
    )
    return client


def _inbox_prefix(opts: NatsOptions) -> str:
    """The identity's own reply subjects when it is an nkey (what `kcm_cli.natsauth` lets it
    subscribe to), nats-py's shared `_INBOX` otherwise."""
    if opts.nkey_seed is None:
        return "_INBOX"
    with open(opts.nkey_seed, "rb") as f:
        seed = f.read().strip()
    return subjects.inbox_prefix(nkeys.from_seed(bytearray(seed)).public_key.decode())


async def _ensure(js: JetStreamContext, config: api.StreamConfig, owner: bool) -> None:
    try:
        await js.add_stream(config)
    except BadRequestError as exc:
        # 10058: exists with a different config; its owner brings it to ours (limits may have
        # changed), anyone else uses it as it is.
        if exc.err_code != 10058:
            raise
        if not owner:
            log.info(
                "stream exists with another configuration; left to its owner", extra={"stream": config.name}
            )
            return
        await js.update_stream(config)


async def ensure_object_stream(js: JetStreamContext, replicas: int = 1, *, owner: bool = True) -> None:
    await _ensure(
        js,
        api.StreamConfig(
            name=wire.OBJECTS_STREAM,
            subjects=[subjects.OBJECTS_FILTER, subjects.PROGRESS_FILTER],
            storage=api.StorageType.FILE,
            retention=api.RetentionPolicy.LIMITS,
            max_msgs_per_subject=1,
            discard=api.DiscardPolicy.OLD,
            allow_msg_ttl=True,
            allow_direct=True,
            num_replicas=replicas,
        ),
        owner,
    )


async def ensure_work_stream(js: JetStreamContext, controller: str, replicas: int = 1) -> None:
    """One pending message per key: re-adding a pending key replaces it (coalescing). Created by
    its controller and never updated by a service: an operator changes an existing one."""
    await _ensure(
        js,
        api.StreamConfig(
            name=subjects.work_stream(controller),
            subjects=[subjects.work_filter(controller)],
            storage=api.StorageType.FILE,
            retention=api.RetentionPolicy.WORK_QUEUE,
            max_msgs_per_subject=1,
            discard=api.DiscardPolicy.OLD,
            num_replicas=replicas,
        ),
        False,
    )


async def ensure_dlq_stream(js: JetStreamContext, replicas: int = 1, *, owner: bool = True) -> None:
    await _ensure(
        js,
        api.StreamConfig(
            name=wire.DLQ_STREAM,
            subjects=[subjects.DLQ_FILTER],
            storage=api.StorageType.FILE,
            retention=api.RetentionPolicy.LIMITS,
            max_age=7 * 24 * 3600.0,
            num_replicas=replicas,
        ),
        owner,
    )


async def until_declared(what: str, declare: Callable[[], Awaitable[T]]) -> T:
    """`declare()`, retried with backoff while NATS trouble (no JetStream answering yet, a
    reconnect) lasts; any other error is raised."""
    attempt = 0
    while True:
        cancellation.checkpoint()
        try:
            return await declare()
        except nats.errors.Error as exc:
            if not is_transient(exc):
                raise
            log.warning(f"{what} not reachable yet; retrying", extra={"error": repr(exc)})
        await kubeclient.sleep_backoff(attempt, base=0.1, cap=5.0)
        attempt += 1


# JetStream's error codes for a publish whose expected last (subject) sequence did not hold.
WRONG_LAST_SEQUENCE = (10071, 10164)


def wrong_last_sequence(exc: BaseException) -> bool:
    """Whether a publish (or KV write) failed its expected-last-sequence check: someone else
    wrote the subject (or key) since."""
    return isinstance(exc, KeyWrongLastSequenceError) or (
        isinstance(exc, APIError) and exc.err_code in WRONG_LAST_SEQUENCE
    )
