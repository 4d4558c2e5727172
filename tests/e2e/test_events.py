"""Events written by the recorder into the embedded API server, read back with kubectl."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import uvloop
from kcm_shared.client import kubeclient
from kcm_shared.runtime import events

from tests.conftest import ApiServer


async def poll(fn: Any, limit: float = 15.0) -> Any:
    deadline = time.monotonic() + limit
    while True:
        result = await fn()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {fn}")
        await asyncio.sleep(0.05)


def test_events_are_written_and_repeats_aggregate(apiserver: ApiServer) -> None:
    async def body() -> list[dict[str, Any]]:
        client = kubeclient.KubeClient(kubeclient.load_connection(str(apiserver.kubeconfig)))
        recorder = events.EventRecorder(client, "replicaset-controller")
        task = asyncio.create_task(recorder.run())
        try:
            rs = await client.create(
                kubeclient.resource_path("apps", "v1", "replicasets", "default"),
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "metadata": {"name": "web"},
                    "spec": {
                        "selector": {"matchLabels": {"app": "web"}},
                        "template": {
                            "metadata": {"labels": {"app": "web"}},
                            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
                        },
                    },
                },
            )
            for _ in range(3):
                recorder.event(rs, events.NORMAL, "SuccessfulCreate", "Created pod: web-abc")
            recorder.event(rs, events.WARNING, "FailedCreate", "quota exceeded")
            path = kubeclient.resource_path("", "v1", "events", "default")

            async def settled() -> list[dict[str, Any]] | None:
                items: list[dict[str, Any]] = (await client.get(path))["items"]
                mine = [e for e in items if e["involvedObject"].get("name") == "web"]
                counts = sorted((e["reason"], e.get("count")) for e in mine)
                return mine if counts == [("FailedCreate", 1), ("SuccessfulCreate", 3)] else None

            mine: list[dict[str, Any]] = await poll(settled)
            return mine
        finally:
            task.cancel()
            await client.close()

    mine = uvloop.run(body())
    created = next(e for e in mine if e["reason"] == "SuccessfulCreate")
    assert created["type"] == "Normal" and created["message"] == "Created pod: web-abc"
    assert created["source"]["component"] == "replicaset-controller"
    assert created["reportingComponent"] == "replicaset-controller"
    assert created["involvedObject"]["kind"] == "ReplicaSet"
    assert created["metadata"]["name"].startswith("web.")
    assert created["firstTimestamp"] <= created["lastTimestamp"]

    described = apiserver.kubectl("describe", "replicaset", "web", "-n", "default")
    assert "SuccessfulCreate" in described and "Created pod: web-abc" in described
    assert "FailedCreate" in described and "x3" in described
    listed = apiserver.kubectl("get", "events", "-n", "default")
    assert "SuccessfulCreate" in listed and "replicaset/web" in listed
