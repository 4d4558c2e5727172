"""`kcm dev`: the local stack in one foreground command (what `make run` starts).

Today the stack is the embedded API server with its state under the state directory;
the bus, controllers and simulator join it as they land.
"""

from __future__ import annotations

from pathlib import Path

from kcm_apiserver import main as apiserver_main


async def run(state_dir: Path, kubeconfig_out: Path, port: int) -> None:
    def announce(url: str) -> None:
        print(
            f"kcm dev ready: apiserver {url}; use it with: export KUBECONFIG={kubeconfig_out.resolve()} "
            "(then kubectl get nodes,pods -A); Ctrl-C stops everything",
            flush=True,
        )

    opts = apiserver_main.Options(port=port, kubeconfig_out=kubeconfig_out, data_dir=state_dir / "apiserver")
    await apiserver_main.serve(opts, announce)
