"""Write to many objects side by side and settle each: an object already gone (404) is done.

A sync that deletes or patches a set of objects (the replica manager's and the daemonset
controller's surplus pods, the Job controller's pod deletions and finalizer removals) runs the
writes together, lets each one finish, and then:
- counts a write that succeeded, or failed with NotFound (also when a wrapper's `__cause__`),
  as done: the object is gone, which is what the write was for;
- tells the caller which writes raised at all, 404s included, since no watch event will answer
  them (the caller stops expecting one: `expectations.deletion_observed` and the like);
- keeps the first other error, in the order of the items, for the caller to raise or return,
  as upstream's `errCh` keeps the first;
- raises at once what is not an `Exception` (the sync was cancelled).
Unlike `kcm_shared.base.fanout.each`, one failure stops none of the others: upstream lets every
write of a pass run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from kcm_shared.client import kubeclient

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Settled(Generic[T]):
    done: list[T]  # the write succeeded, or the object was gone already (404)
    raised: list[T]  # the write raised, a 404 included: no event will come for it
    error: Exception | None  # the first error other than a 404


def not_found(exc: BaseException) -> bool:
    """A 404 from the API, raised as it is or as the cause of the error that wraps it."""
    return any(
        isinstance(e, kubeclient.ApiError) and e.not_found for e in (exc, exc.__cause__) if e is not None
    )


async def each(items: Sequence[T], write: Callable[[T], Awaitable[object]]) -> Settled[T]:
    """Run `write(item)` for every item at once and settle each, as the module docstring says."""
    results = await asyncio.gather(*(write(item) for item in items), return_exceptions=True)
    done: list[T] = []
    raised: list[T] = []
    error: Exception | None = None
    for item, result in zip(items, results, strict=True):
        if isinstance(result, BaseException) and not isinstance(result, Exception):
            raise result
        if isinstance(result, Exception):
            raised.append(item)
            if not not_found(result):
                error = error or result
                continue
        done.append(item)
    return Settled(done, raised, error)
