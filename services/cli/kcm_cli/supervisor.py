"""Run a service as a child process and restart it when it dies, like a compose restart policy.

`kcm dev` supervises nats-server and every bus service this way; each restart is announced
on stdout with the exit code, and restarts back off (1 s doubling to 30 s, reset after a
minute of healthy running) so a crash loop does not spin the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path
from typing import BinaryIO

STOP_GRACE = 10.0  # seconds a child gets to exit on SIGTERM before SIGKILL


class Supervised:
    def __init__(self, name: str, argv: list[str], log_path: Path, stop_grace: float = STOP_GRACE) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.stop_grace = stop_grace  # seconds it gets to exit on SIGTERM before SIGKILL
        self.proc: asyncio.subprocess.Process | None = None

    async def run(self) -> None:
        delay = 1.0
        loop = asyncio.get_running_loop()
        try:
            while True:
                with self._open_log() as log:
                    # A session of its own: a terminal's Ctrl-C reaches `kcm dev` alone, which then
                    # stops the services before the nats-server they release their work through.
                    self.proc = await asyncio.create_subprocess_exec(
                        *self.argv, stdout=log, stderr=log, start_new_session=True
                    )
                began = loop.time()
                code = await self.proc.wait()
                if loop.time() - began > 60:
                    delay = 1.0
                print(
                    f"kcm dev: {self.name} exited with code {code}; restarting in {delay:.0f}s "
                    f"(log: {self.log_path})",
                    flush=True,
                )
                await asyncio.sleep(delay)
                delay = min(30.0, delay * 2)
        finally:
            await self.stop()

    def _open_log(self) -> BinaryIO:
        # Opening a local file for append does not wait on anything worth a thread hop.
        return open(self.log_path, "ab")

    async def stop(self) -> None:
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(proc.wait()), self.stop_grace)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
