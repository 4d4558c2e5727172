"""Upstream's flowcontrol.Backoff, the simulated kubelet's one back-off for image pulls (per pod
and image) and container restarts (per pod and container: CrashLoopBackOff).

- per key, a delay that starts at `initial` (10 s), doubles on each failure up to `maximum`
  (300 s) and starts over once the key has been quiet for twice the maximum (so a container
  that ran 10 minutes restarts at once again); both scaled by the simulator's `--backoff-scale`;
- `remaining` counts from the last failure recorded, `remaining_since` from a time of the
  caller's (a container's finishedAt), as kubelet's `IsInBackOffSince`;
- at most `size` keys are kept (the least recently failed are forgotten).

State only, no I/O; owned by `kubelet.py`.
"""

from __future__ import annotations

from collections import OrderedDict

INITIAL = 10.0
MAXIMUM = 300.0


class Backoff:
    def __init__(self, scale: float = 1.0, size: int = 10_000) -> None:
        self.initial = INITIAL * scale
        self.maximum = MAXIMUM * scale
        self._size = size
        self._entries: OrderedDict[str, tuple[float, float]] = OrderedDict()  # key -> (delay, updated)

    def next(self, key: str, now: float) -> float:
        """Record a failure at `now`; the delay before the next attempt."""
        entry = self._entries.pop(key, None)
        if entry is None or now - entry[1] > 2 * self.maximum:
            delay = self.initial
        else:
            delay = min(entry[0] * 2, self.maximum)
        self._entries[key] = (delay, now)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)
        return delay

    def remaining(self, key: str, now: float) -> float:
        """Seconds left of the key's back-off since its last failure (0: not backing off)."""
        entry = self._entries.get(key)
        return 0.0 if entry is None else max(0.0, entry[1] + entry[0] - now)

    def remaining_since(self, key: str, since: float, now: float) -> float:
        """Seconds left of the key's current delay counted from `since`; 0 when the key has no
        delay or `since` is more than twice the maximum after its last failure."""
        entry = self._entries.get(key)
        if entry is None or since - entry[1] > 2 * self.maximum:
            return 0.0
        return max(0.0, since + entry[0] - now)

    def delay(self, key: str) -> float:
        """The key's current delay (0 without one), as the CrashLoopBackOff message prints it."""
        entry = self._entries.get(key)
        return 0.0 if entry is None else entry[0]

    def forget(self, key: str) -> None:
        self._entries.pop(key, None)
