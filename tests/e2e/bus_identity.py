"""Clients of a `kcm dev` stack's nats-server connected as one of its identities, for tests that
try what an identity may and may not do on the bus.

- `as_identity(stack, identity, body)` runs `body(nc, errors)` on a real nats-py connection
  with the identity's seed (`STATE_DIR/nats-auth/<identity>.nk`) and its inbox prefix, as the
  service connects (`natsconn.connect`); `errors` collects what the server refused.
- `connect(stack, identity, errors)` is that connection alone, for a second client beside it.
- `refused(nc, errors, subject)` publishes and reports whether the server called it a
  permissions violation.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import nats
import uvloop
from kcm_cli import natsauth
from kcm_shared.bus import subjects
from nats.aio.client import Client

from tests.e2e.devstack import DevStack

T = TypeVar("T")


def url(stack: DevStack) -> str:
    return (stack.state / "nats.url").read_text().strip()


def seed(stack: DevStack, identity: str) -> Path:
    return stack.state / "nats-auth" / f"{identity}.nk"


def inbox(stack: DevStack, identity: str) -> str:
    """The identity's reply prefix: its own for a service, nats-py's `_INBOX` for the consumer."""
    if identity == "consumer":
        return "_INBOX"
    key = natsauth.public_key(seed(stack, identity).read_bytes().strip())
    return subjects.inbox_prefix(key)


def as_identity(
    stack: DevStack,
    identity: str,
    body: Callable[[Client, list[str]], Awaitable[T]],
    **options: Any,
) -> T:
    """Run `body(nc, errors)` connected as `identity` (nats-py's connect `options` added)."""

    async def run() -> T:
        errors: list[str] = []
        nc = await connect(stack, identity, errors, **options)
        try:
            return await body(nc, errors)
        finally:
            await nc.close()

    return uvloop.run(run())


async def connect(stack: DevStack, identity: str, errors: list[str], **options: Any) -> Client:
    """A client connected as `identity`; what the server refuses it goes to `errors`."""

    async def on_error(exc: Exception) -> None:
        errors.append(str(exc).lower())

    options.setdefault("inbox_prefix", inbox(stack, identity))
    return await nats.connect(
        url(stack),
        nkeys_seed=str(seed(stack, identity)),
        error_cb=on_error,
        max_reconnect_attempts=0,
        **options,
    )


async def refused(nc: Client, errors: list[str], subject: str, payload: bytes = b"{}") -> bool:
    """Publish to `subject` and report whether the server answered with a permissions violation."""
    before = len(errors)
    await nc.publish(subject, payload)
    await nc.flush()
    for _ in range(100):
        if any("permissions violation" in e and subject.lower() in e for e in errors[before:]):
            return True
        await nc.flush()
    return False
