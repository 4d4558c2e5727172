"""The watcher's health as the coordinator sees it: its checks and per-resource lag, in heartbeats.

`main` registers `Reporter.lanes_check` as the `publishing` health check and runs
`healthbeat.publish_forever(nc, reporter.beat)`, so every second the active coordinator hears
whether this replica leads, the result of each of its checks, and for each resource it
publishes: the newest resourceVersion the API server returned, the last progress marker the
stream acknowledged, and how long the oldest change handed to the stream has waited for its
acknowledgement (the lag). A lane whose oldest change has waited longer than the publish
failure limit is failing: the rest of the watcher may publish fine meanwhile, which the
`nats` check (any success resets it) cannot see.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kcm_shared.bus import health, healthbeat

from kcm_watcher import supervisor

SERVICE = "watcher"


class Reporter:
    def __init__(
        self,
        *,
        instance: str,
        checks: health.Checks,
        sup: supervisor.Supervisor,
        leading: Callable[[], bool],
        failure_limit: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.instance = instance
        self.ops_url = ""  # known once the ops endpoint serves
        self._checks = checks
        self._sup = sup
        self._leading = leading
        self._limit = failure_limit
        self._clock = clock

    def resources(self) -> dict[str, healthbeat.Resource]:
        now = self._clock()
        out = {}
        for watch, lane in self._sup.running():
            unacked, oldest = lane.unacked()
            lag = 0.0 if oldest is None else now - oldest
            out[str(watch.res)] = healthbeat.Resource(
                seen=watch.seen,
                marker=watch.marker,
                unacked=unacked,
                lag_seconds=round(lag, 3),
                idle_seconds=None if lane.acked_at is None else round(now - lane.acked_at, 3),
                error=f"a change has waited {lag:.0f}s for the stream" if lag > self._limit else None,
            )
        return out

    def lanes_check(self) -> str | None:
        """The `publishing` check: no resource's changes stuck on their way to the stream."""
        failing = [f"{name}: {r.error}" for name, r in sorted(self.resources().items()) if r.error]
        return "; ".join(failing) or None

    def beat(self) -> healthbeat.Beat:
        return healthbeat.Beat(
            service=SERVICE,
            instance=self.instance,
            leader=self._leading(),
            interval=healthbeat.INTERVAL,
            checks=self._checks.run(),
            ops_url=self.ops_url,
            resources=self.resources(),
        )
