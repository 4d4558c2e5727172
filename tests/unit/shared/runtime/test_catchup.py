"""Catch-up reads shared by a process's caches: how many fetches a burst of askers costs, and that
no asker gets an answer older than itself."""

from __future__ import annotations

import asyncio
import json
import types
from typing import Any, cast

import nats.errors
import pytest
import uvloop
from kcm_shared.apimachinery import gvr
from kcm_shared.runtime import catchup

RES = gvr.Resource("", "v1", "pods")


class _Source:
    """A fetch whose answers are handed out in order, each held until `gate` opens."""

    def __init__(self, *answers: str | Exception) -> None:
        self.answers = list(answers)
        self.calls = 0
        self.gate = asyncio.Event()

    async def fetch(self) -> str:
        self.calls += 1
        answer = self.answers.pop(0)
        await self.gate.wait()
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_askers_queued_behind_a_fetch_share_the_next_one_not_the_one_in_flight() -> None:
    async def body() -> None:
        flight: catchup.SingleFlight[str, str] = catchup.SingleFlight()
        source = _Source("10", "11")
        first = asyncio.ensure_future(flight.read("k", source.fetch))
        await asyncio.sleep(0)  # the first fetch is in flight
        later = [asyncio.ensure_future(flight.read("k", source.fetch)) for _ in range(5)]
        await asyncio.sleep(0)
        source.gate.set()
        assert await first == "10"
        assert [await task for task in later] == ["11"] * 5  # never the read that predates them
        assert source.calls == 2

    uvloop.run(body())


def test_answers_that_stay_true_are_shared_while_in_flight() -> None:
    async def body() -> None:
        flight: catchup.SingleFlight[str, str] = catchup.SingleFlight(share_in_flight=True)
        source = _Source("10", "20")
        first = asyncio.ensure_future(flight.read("k", source.fetch))
        await asyncio.sleep(0)
        covered = asyncio.ensure_future(flight.read("k", source.fetch, lambda v: int(v) >= 9))
        beyond = asyncio.ensure_future(flight.read("k", source.fetch, lambda v: int(v) >= 15))
        await asyncio.sleep(0)
        source.gate.set()
        assert (await first, await covered, await beyond) == ("10", "10", "20")
        assert source.calls == 2  # the asker the first answer did not cover fetched its own

    uvloop.run(body())


def test_a_failed_fetch_fails_only_its_caller() -> None:
    async def body() -> None:
        flight: catchup.SingleFlight[str, str] = catchup.SingleFlight()
        source = _Source(RuntimeError("down"), "12")
        first = asyncio.ensure_future(flight.read("k", source.fetch))
        await asyncio.sleep(0)
        second = asyncio.ensure_future(flight.read("k", source.fetch))
        await asyncio.sleep(0)
        source.gate.set()
        with pytest.raises(RuntimeError, match="down"):
            await first
        assert await second == "12"

    uvloop.run(body())


class _Watcher:
    """nats-py's request as the watcher answers it: refusals first, then the marker's version."""

    def __init__(self, *replies: dict[str, Any] | Exception) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []

    async def request(self, subject: str, payload: bytes, **options: Any) -> Any:
        self.requests.append(json.loads(payload))
        await asyncio.sleep(0)
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if isinstance(reply, Exception):
            raise reply
        return types.SimpleNamespace(data=json.dumps(reply).encode())


def test_a_burst_of_caches_asking_the_watcher_sends_one_request() -> None:
    async def body() -> None:
        watcher = _Watcher({"ok": True, "resourceVersion": "40"})
        sync = catchup.WatcherSync(cast(Any, watcher))
        await asyncio.gather(*(sync.ask(RES, rv) for rv in ("30", "31", "30", "35", "29")))
        assert [r["resourceVersion"] for r in watcher.requests] == ["30"]
        await sync.ask(RES, "41")  # beyond what the watcher confirmed: asks again
        assert [r["resourceVersion"] for r in watcher.requests] == ["30", "41"]

    uvloop.run(body())


def test_an_ask_waits_out_refusals_and_absent_watchers() -> None:
    async def body() -> None:
        watcher = _Watcher(
            nats.errors.NoRespondersError(),
            {"ok": False, "error": "too many sync requests", "retryAfter": 0.01},
            {"ok": True, "resourceVersion": "7"},
        )
        sync = catchup.WatcherSync(cast(Any, watcher))
        await asyncio.wait_for(sync.ask(RES, "7"), 10)
        assert len(watcher.requests) == 3

    uvloop.run(body())


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (b'{"ok": true}', None),
        (b'{"ok": false, "error": "busy, retry"}', ("busy, retry", 0.0)),
        (b'{"ok": false, "retryAfter": 1000}', ("refused", 60.0)),  # bounded
        (b"not json", ("unreadable reply b'not json'", 0.0)),
    ],
)
def test_sync_refusal(reply: bytes, expected: tuple[str, float] | None) -> None:
    assert catchup.sync_refusal(reply) == expected
