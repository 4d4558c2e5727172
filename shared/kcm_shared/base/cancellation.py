"""Stopping long-lived loops that Python 3.11 may have let miss their cancellation.

`asyncio.wait_for` in Python 3.11, which nats-py awaits every request through (a JetStream
publish, a consumer or stream call), returns the reply when the reply and a cancellation of
the waiting task arrive together: the cancellation is dropped (fixed in 3.12, gh-86296).
The task stays marked as cancelling, but nothing raises again, so a loop around such calls
would run on after its cache was closed or its process asked to stop. Every long-lived loop
calls `checkpoint()` once per turn.
"""

from __future__ import annotations

import asyncio


def checkpoint() -> None:
    """Raise CancelledError if this task was asked to stop and the request got lost."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
