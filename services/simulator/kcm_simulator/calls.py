"""Write calls that outlast an unreachable API server: retried with backoff, bounded in number.

Used by the scheduler and kubelet stand-ins for every write.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from kcm_shared.client.kubeclient import ApiError, sleep_backoff

Obj = dict[str, Any]
log = logging.getLogger("kcm.sim.calls")


class Writer:
    """Runs writes at most `limit` at a time, retrying transient failures."""

    def __init__(self, limit: int = 32) -> None:
        self._slots = asyncio.Semaphore(limit)

    async def call(self, what: str, fn: Callable[[], Awaitable[Obj]]) -> Obj | None:
        """The answer, or None when the server refuses for good (e.g. 404, 409, 422)."""
        attempt = 0
        while True:
            try:
                async with self._slots:
                    return await fn()
            except ApiError as exc:
                if exc.code < 500 and exc.code != 429:
                    log.debug("write refused", extra={"what": what, "err": str(exc)})
                    return None
                log.warning("write failed, retrying", extra={"what": what, "err": str(exc)})
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                log.warning("API server unreachable, retrying", extra={"what": what, "err": str(exc)})
            await sleep_backoff(attempt)
            attempt += 1
