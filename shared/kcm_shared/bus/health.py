"""Named health checks, as kube-controller-manager registers one per controller.

A service registers checks (a callable returning an error string, or None when healthy);
`opsserver` serves them at `/healthz` (`/livez`, `/readyz`: the service's own checks) and
`/healthz/<name>`, and heartbeats carry their
results to the coordinator. A watchdog check turns a loop that stops ticking into an
unhealthy check within its timeout (architecture invariant 7).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

Check = Callable[[], str | None]


@dataclass
class Checks:
    checks: dict[str, Check] = field(default_factory=dict)
    # Checks that report on other processes (the coordinator's per-controller ones): part of
    # /healthz, as kube-controller-manager aggregates, but never of /livez or /readyz, so a
    # sick controller does not get the process that reports it restarted or taken off its Service.
    aggregated: set[str] = field(default_factory=set)

    def add(self, name: str, check: Check, *, aggregated: bool = False) -> None:
        self.checks[name] = check
        if aggregated:
            self.aggregated.add(name)
        else:
            self.aggregated.discard(name)

    def run_one(self, name: str) -> str | None:
        """The check's error, None when healthy; a check that raises is unhealthy."""
        try:
            return self.checks[name]()
        except Exception as exc:  # a broken check must not take the endpoint down
            return f"check failed: {exc}"

    def run(self, *, own_only: bool = False) -> dict[str, str | None]:
        """Every check's result; `own_only` leaves out the aggregated ones."""
        return {
            name: self.run_one(name) for name in self.checks if not (own_only and name in self.aggregated)
        }


class Watchdog:
    """Healthy while `tick()` was called within `timeout` seconds, or while idle by consent.

    A worker ticks before and after each unit of work; a worker stuck inside one unit stops
    ticking and the check fails. `busy(False)` says "nothing to do", which is healthy however
    long it lasts.
    """

    def __init__(self, timeout: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._timeout = timeout
        self._clock = clock
        self._last = clock()
        self._busy = False

    def tick(self) -> None:
        self._last = self._clock()

    def busy(self, busy: bool) -> None:
        self._busy = busy
        self._last = self._clock()

    def __call__(self) -> str | None:
        if not self._busy:
            return None
        stalled = self._clock() - self._last
        if stalled > self._timeout:
            return f"loop stuck for {stalled:.1f}s (limit {self._timeout:.0f}s)"
        return None
