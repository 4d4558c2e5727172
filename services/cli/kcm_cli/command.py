"""What a `kcm` subcommand's module gives the launcher (kcm_cli.main), and how services run.

- Each subcommand's module has `register(sub)`, which adds its parser(s) and sets, as parser
  defaults, either `run` (args -> coroutine: a service, run by `run` below once `main` has set
  up logging for `service`) or `main` (a `Main`: the exit code, for commands that finish or run
  their own loop).
- A `Main` raises `UsageError` for a command line argparse accepted but the command refuses:
  the launcher reports it as argparse does (usage, then the message; exit 2).
- `run(coro)` runs a service's coroutine on uvloop until it ends or SIGINT/SIGTERM/SIGHUP
  cancels it; a start-up failure the user must fix is one line on stderr and exit 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Coroutine
from typing import Any, Protocol

import uvloop
from kcm_shared.base import errors, gcpolicy


class Main(Protocol):
    """A subcommand that returns its exit code; `words` is the command line as parsed
    (kcm_cli.main.parse), for commands that hand flags on."""

    def __call__(self, args: argparse.Namespace, words: list[str]) -> int: ...


class UsageError(Exception):
    """A command line the subcommand refuses after parsing (argparse's usage error, exit 2)."""


def run(coro: Coroutine[Any, Any, None]) -> int:
    """Run until done or until SIGINT/SIGTERM/SIGHUP, then cancel cleanly."""

    async def wrapper() -> None:
        task = asyncio.ensure_future(coro)
        loop = asyncio.get_running_loop()
        # SIGHUP too: `kcm dev`'s children are in sessions of their own, so a closed
        # terminal reaches only it, and it must still stop them.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await task

    gcpolicy.configure()
    try:
        uvloop.run(wrapper())
    except (OSError, errors.ConfigError) as exc:
        # Start-up failures such as a taken port or an unreadable kubeconfig are the user's to
        # fix: one line, no traceback. (Services wait out NATS or an API server being down.)
        print(f"kcm: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    return 0
