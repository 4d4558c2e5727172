"""`kcm dev`: the local stack in one foreground command (what `make run` starts).

Today the stack is the embedded API server with its state under the state directory and,
once it serves, the cluster simulator (nodes, scheduler, kubelets) in the same process;
the bus and controllers join it as they land.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from kcm_apiserver import main as apiserver_main
from kcm_simulator import main as simulator_main


async def run(state_dir: Path, kubeconfig_out: Path, port: int, nodes: int = 3) -> None:
    sim: asyncio.Task[None] | None = None

    def announce(url: str) -> None:
        nonlocal sim
        print(
            f"kcm dev ready: apiserver {url}; use it with: export KUBECONFIG={kubeconfig_out.resolve()} "
            "(then kubectl get nodes,pods -A); Ctrl-C stops everything",
            flush=True,
        )
        if nodes > 0:
            opts = simulator_main.Options(kubeconfig=kubeconfig_out, nodes=nodes, control_port=None)
            sim = asyncio.ensure_future(simulator_main.run(opts))

    opts = apiserver_main.Options(port=port, kubeconfig_out=kubeconfig_out, data_dir=state_dir / "apiserver")
    try:
        await apiserver_main.serve(opts, announce)
    finally:
        if sim is not None:
            sim.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sim
