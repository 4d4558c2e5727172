"""Benchmark of pod Ready -> its address ready in the Service's EndpointSlice (issue 17).

Runs `kcm dev --nodes 0` with the endpointslice controller (and the endpoints controller when
this tree has one, measured the same way against its Endpoints) and no simulator: the
benchmark writes the pods' status itself, so the moment a pod turns Ready is the response to
its status write. One Service over PODS pods (running, not ready), then:

1. idle: the pods' first half made Ready one at a time, INTERVAL apart;
2. loaded: the second half the same way while another Service's LOAD_PODS pods have their
   readiness flipped at LOAD_RATE changes/s (the achieved rate is printed).

Latency of a pod = first watch event showing it ready in a slice of the Service (resp. its
Endpoints) minus the response to the status write. Baseline, measured in the same run: the
write -> watch latency of the same status writes (the pod watch's event minus the response),
what any watcher of the pod pays before a controller can act. Printed: p50/p99 of each, and
their ratio; the issue's goal is p99 < 100 ms idle and < 1 s loaded. Never enforced.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import benchlib
from benchlib import endpoints as eb

NAMESPACE = "bench-eps-latency"
LOAD_NAMESPACE = "bench-eps-load"
SERVICE = "measured"
LOAD_SERVICE = "load"
PODS = 200
INTERVAL = 0.05
LOAD_PODS = 500
LOAD_RATE = 500.0
CONCURRENCY = 16


async def make_pods(api: eb.Api, ns: str, app: str, count: int, offset: int) -> list[str]:
    names = [f"{app}-{i}" for i in range(count)]
    await eb.in_parallel(CONCURRENCY, names, lambda n: api.create_pod(ns, app, n))
    await eb.in_parallel(
        CONCURRENCY,
        list(enumerate(names)),
        lambda item: api.set_ready(ns, item[1], eb.pod_ip(offset + item[0]), False),
    )
    return names


async def measure(api: eb.Api, names: list[str], ips: dict[str, str]) -> dict[str, float]:
    """Make each pod Ready in turn; the response time of each write."""
    written = {}
    for name in names:
        written[name] = await api.set_ready(NAMESPACE, name, ips[name], True)
        await asyncio.sleep(INTERVAL)
    return written


async def load(
    api: eb.Api, names: list[str], ips: dict[str, str], stop: asyncio.Event, done: list[int]
) -> None:
    """Flip the load pods' readiness at LOAD_RATE changes/s on CONCURRENCY workers."""
    start = time.perf_counter()
    counter = iter(range(10**9))

    async def worker() -> None:
        for k in counter:
            if stop.is_set():
                return
            delay = start + k / LOAD_RATE - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            name = names[k % len(names)]
            await api.set_ready(LOAD_NAMESPACE, name, ips[name], (k // len(names)) % 2 == 0)
            done[0] += 1

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))


def lags(seen: dict[str, float], written: dict[str, float]) -> list[float]:
    return sorted(max(0.0, seen[n] - t) * 1000 for n, t in written.items() if n in seen)


def report(label: str, lag: list[float], base: list[float], count: int) -> None:
    p = benchlib.percentile
    missing = f"  ({count - len(lag)} never seen)" if len(lag) < count else ""
    print(
        f"  {label:<34} p50 {benchlib.fmt(p(lag, 50), 1):>7} ms  p99 {benchlib.fmt(p(lag, 99), 1):>7} ms"
        f"  | baseline p50 {benchlib.fmt(p(base, 50), 1)} ms p99 {benchlib.fmt(p(base, 99), 1)} ms"
        f"  | ratio p50 {benchlib.ratio(p(lag, 50), p(base, 50))} p99 {benchlib.ratio(p(lag, 99), p(base, 99))}{missing}"
    )


async def bench(args: argparse.Namespace) -> int:
    global LOAD_RATE
    LOAD_RATE = args.load_rate
    command = benchlib.kcm_command(args)
    controllers = eb.available_controllers()
    print(f"controllers: {', '.join(controllers)}")
    with tempfile.TemporaryDirectory(prefix="kcm-bench-eps-") as tmp:
        async with (
            eb.stack(command, Path(tmp)) as dev,
            benchlib.client_session(2 * CONCURRENCY + 8) as session,
        ):
            api = eb.Api(session, dev.url)
            await api.setup_namespace(NAMESPACE, SERVICE)
            await api.setup_namespace(LOAD_NAMESPACE, LOAD_SERVICE)
            tracker = eb.Tracker()
            tasks = await tracker.follow(api, NAMESPACE, SERVICE)
            try:
                names = await make_pods(api, NAMESPACE, SERVICE, args.pods, 0)
                ips = {n: eb.pod_ip(i) for i, n in enumerate(names)}
                load_names = await make_pods(api, LOAD_NAMESPACE, LOAD_SERVICE, LOAD_PODS, args.pods)
                load_ips = {n: eb.pod_ip(args.pods + i) for i, n in enumerate(load_names)}
                await eb.wait_until(
                    lambda: len(tracker.members()) == len(names), "every pod in the slices (not ready)"
                )
                half = len(names) // 2
                idle = await measure(api, names[:half], ips)
                await eb.wait_until(
                    lambda: all(n in tracker.ready_in_slices for n in idle), "idle pods ready in slices"
                )
                stop, done = asyncio.Event(), [0]
                started = time.perf_counter()
                load_task = asyncio.create_task(load(api, load_names, load_ips, stop, done))
                await asyncio.sleep(1.0)
                loaded = await measure(api, names[half:], ips)
                stop.set()
                await load_task
                achieved = done[0] / (time.perf_counter() - started)
                await eb.wait_until(
                    lambda: all(n in tracker.ready_in_slices for n in loaded), "loaded pods ready in slices"
                )
                if eb.ENDPOINTS_CONTROLLER in controllers:
                    await eb.wait_until(
                        lambda: all(n in tracker.ready_in_endpoints for n in names), "pods ready in Endpoints"
                    )
            finally:
                for task in tasks:
                    task.cancel()
            print(f"pod Ready -> address ready, {half} pods per phase, one every {INTERVAL * 1000:.0f} ms:")
            for phase, written in (("idle", idle), (f"loaded ({achieved:.0f} pod changes/s)", loaded)):
                base = lags(tracker.ready_pods, written)
                report(f"{phase}: EndpointSlice", lags(tracker.ready_in_slices, written), base, len(written))
                if eb.ENDPOINTS_CONTROLLER in controllers:
                    report(
                        f"{phase}: Endpoints", lags(tracker.ready_in_endpoints, written), base, len(written)
                    )
            print(f"goal: p99 < 100 ms idle, < 1000 ms loaded (load asked: {LOAD_RATE:.0f} changes/s)")
            return benchlib.exit_status(tracker.errors)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    benchlib.add_kcm_argument(parser)
    parser.add_argument(
        "--pods", type=int, default=PODS, help="pods of the measured Service (half per phase)"
    )
    parser.add_argument("--load-rate", type=float, default=LOAD_RATE, help="pod changes/s of the load")
    return benchlib.run(bench(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
