"""A scripted core NATS playing JetStream's part for the watcher's publisher
(kcm_watcher.publisher), for tests/unit/watcher/test_publisher.py and test_healthreport.py.

`ScriptedNats` records each attempt and answers on its reply subject with a PubAck, an error,
or nothing (an ack that never comes), as the test says; like JetStream it refuses a message
whose `Nats-Expected-Last-Subject-Sequence` is not the subject's last sequence.
`publisher_on(nc)` is a Publisher over it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

from kcm_watcher import publisher
from nats.aio.client import Client
from nats.aio.msg import Msg


@dataclass
class Reply:
    subject: str
    data: bytes
    headers: dict[str, str] | None = None


EXPECTED = "Nats-Expected-Last-Subject-Sequence"


class ScriptedNats:
    """Answers the first `failures[body]` attempts of a body with an error; may hold or drop acks."""

    def __init__(self, failures: dict[bytes, int] | None = None, silent: dict[bytes, int] | None = None):
        self.max_payload = 1 << 20
        self.seq = 0
        self.last: dict[str, int] = {}  # subject -> sequence of its last stored message
        self.errors: dict[bytes, bytes] = {}  # body -> the error answer every attempt of it gets
        self.failures = dict(failures or {})
        self.silent = dict(silent or {})  # attempts of a body that get no answer at all
        self.attempts: list[bytes] = []
        self.stored: list[tuple[str, bytes, dict[str, str]]] = []
        self.held: list[tuple[str, bytes, str, dict[str, str]]] = []
        self.hold = False
        self.failed = asyncio.Event()
        self._cb: Callable[[Msg], Awaitable[None]] | None = None
        self._answering: set[asyncio.Task[None]] = set()

    def new_inbox(self) -> str:
        return "_INBOX.test"

    async def subscribe(self, subject: str, cb: Callable[[Msg], Awaitable[None]]) -> None:
        assert subject == "_INBOX.test.*"
        self._cb = cb

    async def publish(self, subject: str, payload: bytes, reply: str, headers: dict[str, str]) -> None:
        self.attempts.append(payload)
        if self.hold:
            self.held.append((subject, payload, reply, headers))
        else:
            asyncio.get_running_loop().call_soon(self._answer, subject, payload, reply, headers)

    def release(self) -> None:
        self.hold = False
        for args in self.held:
            self._answer(*args)
        self.held.clear()

    def _answer(self, subject: str, payload: bytes, reply: str, headers: dict[str, str]) -> None:
        assert self._cb is not None
        if self.silent.get(payload, 0) > 0:
            self.silent[payload] -= 1
            self.failed.set()
            return
        if self.failures.get(payload, 0) > 0:
            self.failures[payload] -= 1
            self.failed.set()
            data = b'{"error":{"code":503,"err_code":10077,"description":"unavailable"}}'
        elif payload in self.errors:
            data = self.errors[payload]
        elif headers.get(EXPECTED, "0") != str(self.last.get(subject, 0)):
            data = b'{"error":{"code":400,"err_code":10071,"description":"wrong last sequence"}}'
        else:
            self.seq += 1
            self.last[subject] = self.seq
            self.stored.append((subject, payload, {k: v for k, v in headers.items() if k != EXPECTED}))
            data = b'{"stream":"S","seq":%d}' % self.seq
        task = asyncio.ensure_future(self._cb(cast(Msg, Reply(reply, data))))
        self._answering.add(task)
        task.add_done_callback(self._answering.discard)


def publisher_on(nc: ScriptedNats, window: int = 16, **kwargs: Any) -> publisher.Publisher:
    return publisher.Publisher(cast(Client, nc), window=window, **kwargs)
