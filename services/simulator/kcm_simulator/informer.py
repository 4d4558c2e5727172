"""List-then-watch one resource forever, relisting on 410 and backing off while the API server is away.

Called by `main.py` for pods and nodes; the handlers keep the scheduler's and kubelet's views.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import aiohttp
from kcm_shared.client.kubeclient import ApiError, KubeClient, sleep_backoff

Obj = dict[str, Any]
log = logging.getLogger("kcm.sim.informer")


async def run(
    client: KubeClient,
    path: str,
    on_reset: Callable[[list[Obj]], None],
    on_event: Callable[[str, Obj], None],
) -> None:
    attempt = 0
    while True:
        try:
            listing = await client.get(path)
            rv = str(listing.get("metadata", {}).get("resourceVersion", ""))
            on_reset(list(listing.get("items") or []))
            attempt = 0
            while True:
                params = {"resourceVersion": rv, "allowWatchBookmarks": "true", "timeoutSeconds": "300"}
                async for event in client.watch(path, params):
                    obj = event.get("object") or {}
                    rv = str(obj.get("metadata", {}).get("resourceVersion", rv))
                    if event.get("type") != "BOOKMARK":
                        on_event(str(event.get("type")), obj)
        except ApiError as exc:
            if exc.gone:
                log.info("watch expired, relisting", extra={"path": path})
                continue
            log.warning("list/watch failed", extra={"path": path, "err": str(exc)})
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            log.warning("API server unreachable", extra={"path": path, "err": str(exc)})
        await sleep_backoff(attempt)
        attempt += 1
