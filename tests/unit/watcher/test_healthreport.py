"""The watcher's health report: a lane whose changes the stream keeps refusing is failing,
even while other lanes publish."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import cast

import uvloop
from kcm_shared.apimachinery import gvr
from kcm_shared.bus import health
from kcm_watcher import healthreport, publisher, supervisor

from tests.support.publisher import ScriptedNats, publisher_on


@dataclass
class Watch:
    res: gvr.Resource
    seen: str = "20"
    marker: str = "10"


class Running:
    """The supervisor's part the reporter reads: its resource loops and their lanes."""

    def __init__(self, lanes: dict[str, publisher.Lane]) -> None:
        self.lanes = lanes

    def running(self) -> list[tuple[Watch, publisher.Lane]]:
        return [(Watch(gvr.Resource("", "v1", name)), lane) for name, lane in self.lanes.items()]


def test_a_wedged_lane_fails_while_the_others_publish() -> None:
    async def body() -> None:
        now = [100.0]
        nc = ScriptedNats(failures={b"big": 1_000_000})
        pub = publisher_on(nc, clock=lambda: now[0])
        wedged, fine = pub.lane("core/v1/configmaps"), pub.lane("core/v1/pods")
        checks = health.Checks()
        reporter = healthreport.Reporter(
            instance="w1",
            checks=checks,
            sup=cast(supervisor.Supervisor, Running({"configmaps": wedged, "pods": fine})),
            leading=lambda: True,
            failure_limit=30,
            clock=lambda: now[0],
        )
        checks.add("publishing", reporter.lanes_check)
        await wedged.publish("kcm.obj.core.v1.configmaps._.big", b"big", {})
        await asyncio.wait_for(nc.failed.wait(), 5)
        now[0] += 31
        await fine.publish("kcm.obj.core.v1.pods._.p", b"p", {})
        await asyncio.wait_for(fine.flush(), 5)
        # The publisher's `nats` check names the failing lane too, though another lane publishes.
        assert (pub.check(30) or "").startswith("core/v1/configmaps: ")

        beat = reporter.beat()
        configmaps, pods = beat.resources["core/v1/configmaps"], beat.resources["core/v1/pods"]
        assert (configmaps.unacked, configmaps.lag_seconds, configmaps.idle_seconds) == (1, 31.0, None)
        assert configmaps.error == "a change has waited 31s for the stream"
        assert (pods.unacked, pods.lag_seconds, pods.idle_seconds, pods.error) == (0, 0.0, 0.0, None)
        assert (configmaps.seen, configmaps.marker) == ("20", "10")
        assert beat.leader and beat.checks == {
            "publishing": "core/v1/configmaps: a change has waited 31s for the stream"
        }

        nc.failures.clear()  # the stream takes it after all
        await asyncio.wait_for(wedged.flush(), 10)
        assert reporter.lanes_check() is None
        assert reporter.beat().resources["core/v1/configmaps"].idle_seconds == 0.0

    uvloop.run(body())
