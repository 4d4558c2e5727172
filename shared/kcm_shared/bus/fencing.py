"""Write fencing: an API write made for a key is refused once its partition may be someone else's.

The durable queue runs each reconcile inside `holding(claim)`, a claim on the key's partition
that `membership.Membership.claim` made when the reconcile started. Every mutating request of
the controller's `KubeClient` calls `check_write` (the client's write guard) right before it
is sent; it raises `NotOwner` (`kcm_shared.reconcile`, whose table says what the queue then
does) once the claim is void: the grant lapsed on this process's monotonic clock (which keeps
running while the process is frozen), or the partition was lost (and perhaps regained since:
a reconcile that began under one grant never writes under the next). Tasks a reconcile starts
inherit the claim, as contextvars are copied into them; the Event recorder carries it over to
the Events it writes later.

Writes made on behalf of no key (leader election, the watcher) hold no claim and are never
refused here. docs/bus.md "Fencing" has the argument for why a valid claim means that no
other replica writes for the key.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import prometheus_client

# By name, not as a module: plugins written before the outcomes had a module of their own
# (issue 26) still catch `fencing.NotOwner`.
from kcm_shared.reconcile import NotOwner

FENCED_WRITES = prometheus_client.Counter(
    "kcm_fenced_writes_total",
    "API writes refused because the key's partition was no longer owned (grant lapsed or lost).",
    ["controller"],
)


@dataclass(frozen=True, slots=True)
class Claim:
    """The right to write for `key` of `controller` while `valid()` is true."""

    controller: str
    key: str
    partition: int
    valid: Callable[[], bool]

    def check(self, what: str) -> None:
        if not self.valid():
            FENCED_WRITES.labels(self.controller).inc()
            raise NotOwner(
                f"{self.controller}: partition {self.partition} of {self.key!r} is no longer owned; "
                f"{what} refused"
            )


_current: contextvars.ContextVar[Claim | None] = contextvars.ContextVar("kcm_fencing_claim", default=None)


@contextlib.contextmanager
def holding(claim: Claim | None) -> Iterator[None]:
    """Writes in this context (and tasks started from it) are checked against `claim`."""
    token = _current.set(claim)
    try:
        yield
    finally:
        _current.reset(token)


def current() -> Claim | None:
    """The claim writes made now are checked against (None outside a reconcile)."""
    return _current.get()


def check_write(method: str, path: str) -> None:
    """The KubeClient write guard: raise NotOwner when the current claim is void."""
    claim = _current.get()
    if claim is not None:
        claim.check(f"{method} {path}")
