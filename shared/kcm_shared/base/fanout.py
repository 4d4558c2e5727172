"""Run a pass's requests side by side, at most `limit` at once, all or none.

A controller pass that fans out (the pod garbage collector's deletions, the node IPAM
controller's patches) must not leave requests running once the pass has failed with an error
that is not the API's (the replica lost the key, the connection broke): the first such error
cancels the others, waits for them, and is raised. Errors a request handles itself never reach
here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


async def each(items: Iterable[T], limit: int, fn: Callable[[T], Awaitable[None]]) -> None:
    gate = asyncio.Semaphore(limit)

    async def one(item: T) -> None:
        async with gate:
            await fn(item)

    tasks = [asyncio.ensure_future(one(item)) for item in items]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
