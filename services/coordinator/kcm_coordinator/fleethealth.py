"""Health of the services beside the controllers: the watcher and the coordinators themselves.

`service` feeds every heartbeat heard on `kcm.health.*.*` (kcm_shared.bus.healthbeat) to
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
from kcm_shared.bus import healthbeat

WATCHER = "watcher"
COORDINATOR = "coordinator"
FORGET = 300.0  # seconds a silent replica stays listed, so `kcm status` can name it
LIMIT = 256  # replicas remembered at most, over all services


@dataclass(frozen=True, slots=True)
class _Heard:
    beat: healthbeat.Beat
    at: float


class Beats:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._heard: dict[tuple[str, str], _Heard] = {}

    def observe(self, beat: healthbeat.Beat) -> None:
        key = (beat.service, beat.instance)
        if key not in self._heard and len(self._heard) >= LIMIT:
            # Bounded whatever publishes: the replica heard longest ago makes room.
            del self._heard[min(self._heard, key=lambda k: self._heard[k].at)]
        self._heard[key] = _Heard(beat, self._clock())

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


class Verdict(msgspec.Struct, omit_defaults=True):
    healthy: bool
    error: str | None = None


class Verdicts(msgspec.Struct, omit_defaults=True):
    """What the leader publishes on `wire.COORD_STATUS`: the verdicts of its `/status`, no listings."""

    identity: str = ""
    ops_url: str = ""
    controllers: dict[str, Verdict] = {}
    watcher: Verdict | None = None


encode_verdicts = msgspec.json.Encoder().encode
decode_verdicts = msgspec.json.Decoder(Verdicts).decode


def verdicts(status: dict[str, Any]) -> Verdicts:
    def verdict(section: dict[str, Any]) -> Verdict:
        return Verdict(healthy=bool(section.get("healthy")), error=section.get("error"))

    return Verdicts(
        identity=status.get("identity") or "",
        ops_url=status.get("coordinator", {}).get("ops_url") or "",
        controllers={name: verdict(info) for name, info in status.get("controllers", {}).items()},
        watcher=verdict(status[WATCHER]) if WATCHER in status else None,
    )


class LeaderView:
    """A standby's copy of the leading coordinator's `Verdicts`, and the checks in them."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.verdicts: Verdicts | None = None
        self._at = -float("inf")

    def observe(self, verdicts: Verdicts) -> None:
        self.verdicts = verdicts
        self._at = self._clock()

    def names(self) -> set[str]:
        """The aggregated checks the leader reports: its controllers, and the watcher."""
        if self.verdicts is None:
            return set()
        return set(self.verdicts.controllers) | ({WATCHER} if self.verdicts.watcher is not None else set())

    def error(self, name: str) -> str | None:
        age = self._clock() - self._at
        if self.verdicts is None or age > healthbeat.silent_after(healthbeat.INTERVAL):
            return "no word from a leading coordinator" + (f" for {age:.0f}s" if self.verdicts else "")
        section = self.verdicts.watcher if name == WATCHER else self.verdicts.controllers.get(name)
        if section is None:
            return "the leading coordinator no longer reports it"
        return None if section.healthy else (section.error or "unhealthy")
