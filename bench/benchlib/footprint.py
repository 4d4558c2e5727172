"""Bytes of Python memory a cache holds once synced, measured with tracemalloc.

Called by bench/bus.py (its cache figures) and tests/e2e/test_cache.py (10,000 pods); slow, as
tracemalloc traces every allocation, so it stays out of the runtime.
"""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from typing import Any

from kcm_shared.runtime import cache


async def sync_footprint(store: cache.Cache[Any]) -> int:
    """Run `store` until it has synced, stop it, and return what its objects took."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        task = asyncio.create_task(store.run())
        try:
            await store.wait_synced()
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
