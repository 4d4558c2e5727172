"""cancellation.checkpoint stops a loop whose cancellation Python 3.11's wait_for dropped."""

from __future__ import annotations

import asyncio

import pytest
from kcm_shared.base import cancellation


def test_a_loop_stops_although_wait_for_returned_the_reply_instead_of_the_cancel() -> None:
    async def scenario() -> None:
        replies: list[asyncio.Future[None]] = []
        waiting = asyncio.Event()

        async def loop() -> None:
            while True:
                cancellation.checkpoint()
                reply = asyncio.get_running_loop().create_future()
                replies.append(reply)
                waiting.set()
                await asyncio.wait_for(reply, 30)  # as nats-py awaits a request's reply

        task = asyncio.create_task(loop())
        await waiting.wait()
        # The reply and the cancellation arrive in the same turn of the event loop.
        replies[0].set_result(None)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)
        assert task.cancelled()

    asyncio.run(scenario())


def test_no_cancellation_no_effect() -> None:
    async def scenario() -> int:
        cancellation.checkpoint()
        return 1

    assert asyncio.run(scenario()) == 1
