"""ResourceWatch.wait_progress: a sync request is answered by the first watch events that
reach its target (a marker at their resourceVersion), not only by a bookmark or a relist
after the grace period; without a request, events publish no marker."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

import msgspec
from kcm_shared.apimachinery import gvr
from kcm_shared.bus import subjects, wire
from kcm_watcher import objects, resourcewatch

RES = gvr.Resource("", "v1", "pods")


class RecordingLane:
    def __init__(self) -> None:
        self.resolver: Any = None
        self.seqs: dict[str, int] = {}
        self.published: list[tuple[str, dict[str, str]]] = []

    async def publish(self, subject: str, body: bytes, headers: dict[str, str], ttl: Any = None) -> None:
        self.published.append((subject, dict(headers)))

    async def flush(self) -> None:
        return None


def added(name: str, rv: str) -> objects.WatchLine:
    body = {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}
    return objects.WatchLine("ADDED", msgspec.Raw(json.dumps(body).encode()))


def markers(lane: RecordingLane) -> list[str]:
    progress = subjects.progress_subject(RES)
    return [h[wire.RESOURCE_VERSION] for s, h in lane.published if s == progress]


def watch() -> tuple[resourcewatch.ResourceWatch, RecordingLane]:
    lane = RecordingLane()
    return resourcewatch.ResourceWatch(RES, cast(Any, None), cast(Any, None), cast(Any, lane)), lane


def test_events_reaching_a_waited_for_version_are_marked_at_once() -> None:
    async def scenario() -> tuple[str, list[str]]:
        rw, lane = watch()
        waiting = asyncio.ensure_future(rw.wait_progress("12", grace=3600))
        await asyncio.sleep(0)
        await rw._on_events([added("a", "11")], "10")
        assert not waiting.done()  # 11 is not there yet
        await rw._on_events([added("b", "13"), added("c", "14")], "11")
        return await asyncio.wait_for(waiting, 5), markers(lane)

    answer, marked = asyncio.run(scenario())
    assert answer == "14"
    assert marked == ["14"]


def test_events_nobody_waits_for_publish_no_marker() -> None:
    async def scenario() -> list[str]:
        rw, lane = watch()
        await rw._on_events([added("a", "11"), added("b", "12")], "10")
        return markers(lane)

    assert asyncio.run(scenario()) == []
