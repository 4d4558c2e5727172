"""Health of the services beside the controllers: the watcher and the coordinators themselves.

`service` feeds every heartbeat heard on `kcm.health.*.*` (kcm_shared.healthbeat) to
`Beats.observe` on every replica, and serves `watcher_error` as the aggregated
`/healthz/watcher` check and `watcher_status`/`coordinator_status` in `/status`. A standby
also keeps the leader's latest status document (`LeaderView`, fed from `kcm.coord.status`)
and answers its `/healthz/<controller>` and `/healthz/watcher` from it, so every replica
gives the leader's verdict. Synchronous, with an injected monotonic clock, like `state`.

The watcher is healthy when exactly one replica reports leading, it has been heard within
`healthbeat.silent_after` its interval (3 beats + 1 s), and every check it reports passes.
A frozen (SIGSTOP) or dead leader stops beating, and "no active watcher" is the verdict
until a replica leads again; a replica unheard for `FORGET` is dropped from the listing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from kcm_shared import healthbeat

WATCHER = "watcher"
COORDINATOR = "coordinator"
FORGET = 300.0  # seconds a silent replica stays listed, so `kcm status` can name it
STATUS_SUBJECT = "kcm.coord.status"  # the leader's verdicts, for the standbys (docs/bus.md)


@dataclass(frozen=True, slots=True)
class _Heard:
    beat: healthbeat.Beat
    at: float


class Beats:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._heard: dict[tuple[str, str], _Heard] = {}

    def observe(self, beat: healthbeat.Beat) -> None:
        self._heard[(beat.service, beat.instance)] = _Heard(beat, self._clock())

    def _of(self, service: str) -> list[tuple[healthbeat.Beat, float, bool]]:
        """(beat, age, live) of each replica of `service` heard lately, by instance."""
        now = self._clock()
        for key in [k for k, h in self._heard.items() if now - h.at > FORGET]:
            del self._heard[key]
        return [
            (h.beat, now - h.at, now - h.at <= healthbeat.silent_after(h.beat.interval))
            for (svc, _), h in sorted(self._heard.items())
            if svc == service
        ]

    def watcher_error(self) -> str | None:
        """The `/healthz/watcher` check: None when one live watcher leads and passes its checks."""
        replicas = self._of(WATCHER)
        leaders = [beat for beat, _, live in replicas if live and beat.leader]
        if not leaders:
            silent = [f"{b.instance} silent for {age:.0f}s" for b, age, live in replicas if not live]
            return "; ".join(["no active watcher", *silent])
        if len(leaders) > 1:
            return f"watchers {', '.join(b.instance for b in leaders)} all report leading"
        leader = leaders[0]
        failing = [f"{leader.instance}: {name}: {err}" for name, err in sorted(leader.checks.items()) if err]
        return "; ".join(failing) or None

    def watcher_status(self) -> dict[str, Any]:
        error = self.watcher_error()
        replicas = self._of(WATCHER)
        leader = next((b for b, _, live in replicas if live and b.leader), None)
        return {
            "healthy": error is None,
            "error": error,
            "leader": leader.instance if leader else None,
            "replicas": [_row(beat, age, live) for beat, age, live in replicas],
            "resources": {
                name: {**msgspec.structs.asdict(r), "failing": r.error is not None}
                for name, r in sorted((leader.resources if leader else {}).items())
            },
        }

    def coordinator_status(self, *, identity: str, leader_identity: str, ops_url: str) -> dict[str, Any]:
        return {
            "identity": identity,
            "leader_identity": leader_identity,
            "ops_url": ops_url,
            "replicas": [_row(beat, age, live) for beat, age, live in self._of(COORDINATOR)],
        }


def _row(beat: healthbeat.Beat, age: float, live: bool) -> dict[str, Any]:
    failing = {name: err for name, err in beat.checks.items() if err}
    error = "; ".join(f"{n}: {e}" for n, e in sorted(failing.items())) or None
    if not live:
        error = f"silent for {age:.0f}s"
    return {
        "instance": beat.instance,
        "identity": beat.identity or beat.instance,
        "leader": beat.leader,
        "age_seconds": round(age, 3),
        "healthy": error is None,
        "error": error,
        "ops_url": beat.ops_url,
    }


def verdicts(status: dict[str, Any]) -> dict[str, Any]:
    """What the leader publishes on STATUS_SUBJECT: the verdicts of its `/status`, no listings."""
    return {
        "identity": status.get("identity"),
        "ops_url": status.get("coordinator", {}).get("ops_url"),
        "controllers": {
            name: {"healthy": info.get("healthy"), "error": info.get("error")}
            for name, info in status.get("controllers", {}).items()
        },
        WATCHER: {key: status.get(WATCHER, {}).get(key) for key in ("healthy", "error", "leader")},
    }


class LeaderView:
    """A standby's copy of the leading coordinator's verdicts (`verdicts`), and the checks in it."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.status: dict[str, Any] = {}
        self._at = -float("inf")

    def observe(self, status: dict[str, Any]) -> None:
        self.status = status
        self._at = self._clock()

    def names(self) -> set[str]:
        """The aggregated checks the leader reports: its controllers, and the watcher."""
        return set(self.status.get("controllers", {})) | ({WATCHER} if WATCHER in self.status else set())

    def error(self, name: str) -> str | None:
        age = self._clock() - self._at
        if age > healthbeat.silent_after(healthbeat.INTERVAL):
            return "no word from a leading coordinator" + (f" for {age:.0f}s" if self.status else "")
        section = (
            self.status.get(WATCHER) if name == WATCHER else self.status.get("controllers", {}).get(name)
        )
        if not isinstance(section, dict):
            return "the leading coordinator no longer reports it"
        return None if section.get("healthy") else str(section.get("error") or "unhealthy")
