"""Least privilege on the bus of `kcm dev` (issue 28): each test tries, as an identity's real
nats-py client, an attack an identity's permissions used to allow, and checks it fails.

One stack for the module (ReplicaSet and Deployment controllers, no nodes).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from kcm_shared.bus import wire
from nats.aio.client import Client

from tests.e2e.bus_identity import as_identity
from tests.e2e.devstack import DevStack, stack_fixture

stack = stack_fixture("--nodes", "0", "--controllers", "replicaset,deployment")


def sync_request(resource_version: str) -> bytes:
    body = {"group": "apps", "version": "v1", "resource": "replicasets", "resourceVersion": resource_version}
    return json.dumps(body).encode()


def test_a_sync_request_needs_a_resource_version_and_a_flood_is_refused(stack: DevStack) -> None:
    """Finding 8: an empty or opaque resourceVersion made the watcher relist; so did a flood."""

    async def body(nc: Client, errors: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for rv in ("", "opaque"):
            reply = json.loads((await nc.request(wire.WATCHER_SYNC, sync_request(rv), timeout=35)).data)
            out[f"rv {rv!r}"] = (reply["ok"], "resourceVersion" in reply.get("error", ""))
        replies = await asyncio.gather(
            *(nc.request(wire.WATCHER_SYNC, sync_request("1"), timeout=35) for _ in range(300))
        )
        answers = [json.loads(r.data) for r in replies]
        limited = [a for a in answers if a.get("error") == "too many sync requests"]
        out["some answered"] = any(a["ok"] for a in answers)
        out["the flood limited"] = len(limited) > 0 and all(a["retryAfter"] > 0 for a in limited)
        return out

    assert as_identity(stack, "controllers", body) == {
        "rv ''": (False, True),
        "rv 'opaque'": (False, True),
        "some answered": True,
        "the flood limited": True,
    }
