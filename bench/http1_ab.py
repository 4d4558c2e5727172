"""Same-run A/B of `kcm_shared.client.http1` against an older revision's, on the embedded API server.

The machine this runs on is shared and its speed drifts within a minute, so two runs made
minutes apart cannot be compared; this interleaves the two clients in one run instead.
It starts `kcm apiserver --port 0`, loads the other revision's http1.py (`git show
REV:shared/kcm_shared/client/http1.py`) as a module of its own, and for `--rounds` rounds runs, for
each client in turn (the order alternating from round to round): N sequential GETs, N
sequential POSTs (ConfigMap creates), and N GETs and N POSTs `--concurrency` at a time.
Printed per phase: this process's CPU per request (the client's cost, which is what a
controller creating pods spends) and requests per second (mostly the server's), each as the
median over rounds, and the ratio current / baseline.

Run: `.venv/bin/python bench/http1_ab.py [--rev 7d54d91] [--requests 500] [--rounds 5]`.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
import types
import uuid
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Protocol

import uvloop
import yaml
from kcm_shared.client import http1, kubeclient

ROOT = Path(__file__).resolve().parent.parent


class Answer(Protocol):
    status: int


class Requester(Protocol):
    """What both revisions' `http1.Client` offer."""

    def request(
        self, method: str, path: str, *, body: bytes | None = None, headers: Mapping[str, str] | None = None
    ) -> Awaitable[Answer]: ...

    async def close(self) -> None: ...


PHASES = ("GET sequential", "POST sequential", "GET concurrent", "POST concurrent")


def baseline_module(rev: str, workdir: Path) -> types.ModuleType:
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:shared/kcm_shared/client/http1.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = workdir / "http1_baseline.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("http1_baseline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def start_apiserver(workdir: Path) -> tuple[subprocess.Popen[bytes], Path]:
    kubeconfig = workdir / "kubeconfig"
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("kcm")),
            "apiserver",
            "--port",
            "0",
            "--kubeconfig-out",
            str(kubeconfig),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not (kubeconfig.exists() and yaml.safe_load(kubeconfig.read_text())):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("kcm apiserver did not start")
        time.sleep(0.1)
    return proc, kubeconfig


async def phase(
    client: Requester, kind: str, n: int, concurrency: int, path: str, one: str
) -> tuple[float, float]:
    """(client CPU seconds per request, requests per second) for one phase."""
    body = b'{"metadata":{"name":"%s"},"data":{"k":"v"}}'

    def send() -> Awaitable[Answer]:
        if kind == "GET":
            return client.request("GET", one)
        name = f"ab-{uuid.uuid4().hex[:12]}".encode()
        return client.request("POST", path, body=body % name, headers={"Content-Type": "application/json"})

    async def run(requests: Callable[[], Awaitable[None]]) -> tuple[float, float]:
        cpu, wall = time.process_time(), time.perf_counter()
        await requests()
        return (time.process_time() - cpu) / n, n / (time.perf_counter() - wall)

    async def sequential() -> None:
        for _ in range(n):
            resp = await send()
            assert resp.status < 300, resp

    async def concurrent() -> None:
        room = asyncio.Semaphore(concurrency)

        async def one_request() -> None:
            async with room:
                resp = await send()
                assert resp.status < 300, resp

        await asyncio.gather(*(one_request() for _ in range(n)))

    return await run(sequential if concurrency == 1 else concurrent)


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        clients = {"baseline": baseline_module(args.rev, workdir), "current": http1}
        proc, kubeconfig = start_apiserver(workdir)
        try:
            conn = kubeclient.load_connection(str(kubeconfig))
            headers = {**conn.headers, "Accept": "application/json"}
            path = kubeclient.resource_path("", "v1", "configmaps", "default")
            one = kubeclient.resource_path("", "v1", "configmaps", "default", "ab-get")
            made: dict[str, Requester] = {
                name: module.Client(conn.server, headers=headers) for name, module in clients.items()
            }
            await made["current"].request(
                "POST",
                path,
                body=b'{"metadata":{"name":"ab-get"}}',
                headers={"Content-Type": "application/json"},
            )
            results: dict[tuple[str, str], list[tuple[float, float]]] = {}
            for round_ in range(args.rounds):
                order = list(made) if round_ % 2 == 0 else list(reversed(made))
                for label in PHASES:
                    kind, mode = label.split()
                    for name in order:
                        figure = await phase(
                            made[name],
                            kind,
                            args.requests,
                            1 if mode == "sequential" else args.concurrency,
                            path,
                            one,
                        )
                        results.setdefault((label, name), []).append(figure)
            for client in made.values():
                await client.close()
        finally:
            proc.terminate()
            proc.wait(10)
    print(
        f"{args.requests} requests per phase, {args.rounds} rounds, concurrency {args.concurrency}; medians"
    )
    print(
        f"{'phase':18} {'CPU us/req base':>16} {'current':>8} {'ratio':>6} {'req/s base':>11} {'current':>8} {'ratio':>6}"
    )
    for label in PHASES:
        base_cpu = statistics.median(c for c, _ in results[(label, "baseline")]) * 1e6
        cur_cpu = statistics.median(c for c, _ in results[(label, "current")]) * 1e6
        base_rate = statistics.median(r for _, r in results[(label, "baseline")])
        cur_rate = statistics.median(r for _, r in results[(label, "current")])
        print(
            f"{label:18} {base_cpu:16.1f} {cur_cpu:8.1f} {cur_cpu / base_cpu:6.2f} "
            f"{base_rate:11.0f} {cur_rate:8.0f} {cur_rate / base_rate:6.2f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rev", default="7d54d91", help="the revision whose http1.py is the baseline")
    parser.add_argument("--requests", type=int, default=500, help="requests per phase")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=32)
    uvloop.run(main(parser.parse_args()))
