"""Benchmark of the endpointslice-mirroring controller: hand-written Endpoints change -> the
change in its mirrored EndpointSlice, as a watcher of slices sees it (issue 17, item 3).

Runs `kcm dev --nodes 0 --controllers endpointslicemirroring` with SERVICES selectorless
Services and their Endpoints in one namespace, waits until every one is mirrored, then
rewrites every Endpoints with a new address (on CONCURRENCY connections, ROUNDS times).
Lag: from the Endpoints PUT's response to the first slice event carrying the new address.
Baseline: from the same response to the Endpoints' own watch event (what the API server and a
client's watch cost without any controller). Printed: p50 and p99 of both and their ratio,
and the slice writes per Endpoints change (`..._changes_total` from the controller's
/metrics is not reachable here, so the slice watch's MODIFIED/ADDED events are counted).
The controller's client is rate-limited as kube-controller-manager's (`--kube-api-qps` 20 by
default, one slice write per change): a burst of changes is paced by it, as upstream's would
be; `--kube-api-qps 0` lifts it to show the controller's own cost. Figures are printed, never
enforced: the exit status is non-zero only when the stack does
not start or a request fails.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import benchlib
import msgspec

NAMESPACE = "bench-mirror"
SERVICES = 200
ROUNDS = 3
CONCURRENCY = 16
SETTLE_LIMIT_S = 120.0


class _Meta(msgspec.Struct):
    name: str = ""
    resourceVersion: str = ""  # the API's field name, as benchlib.watch reads it
    labels: dict[str, str] = msgspec.field(default_factory=dict)


class _SliceEndpoint(msgspec.Struct):
    addresses: list[str] = msgspec.field(default_factory=list)


class _Address(msgspec.Struct):
    ip: str = ""


class _Subset(msgspec.Struct):
    addresses: list[_Address] = msgspec.field(default_factory=list)


class _Object(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    endpoints: list[_SliceEndpoint] | None = None
    subsets: list[_Subset] | None = None


class _Event(msgspec.Struct):
    type: str
    object: _Object


_DECODER = msgspec.json.Decoder(_Event)


class Observer:
    """First time each (name, address) was seen in a slice event and in an Endpoints event."""

    def __init__(self) -> None:
        self.in_slice: dict[tuple[str, str], float] = {}
        self.in_endpoints: dict[tuple[str, str], float] = {}
        self.slice_writes = 0

    def slice(self, obj: _Object, now: float) -> None:
        name = obj.metadata.labels.get("kubernetes.io/service-name", "")
        self.slice_writes += 1
        for ep in obj.endpoints or ():
            for address in ep.addresses:
                self.in_slice.setdefault((name, address), now)

    def endpoints(self, obj: _Object, now: float) -> None:
        for subset in obj.subsets or ():
            for address in subset.addresses:
                self.in_endpoints.setdefault((obj.metadata.name, address.ip), now)


def ip(round_: int, i: int) -> str:
    return f"10.{100 + round_}.{i // 250}.{i % 250 + 1}"


def endpoints(name: str, address: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": name},
        "subsets": [{"addresses": [{"ip": address}], "ports": [{"name": "http", "port": 8080}]}],
    }


async def burst(session: aiohttp.ClientSession, calls: list[tuple[str, str, Any]]) -> list[float]:
    """The calls on CONCURRENCY workers; the perf_counter time of each response."""
    done = [0.0] * len(calls)
    todo = iter(range(len(calls)))

    async def worker() -> None:
        for i in todo:
            method, url, body = calls[i]
            await benchlib.call(session, method, url, body)
            done[i] = time.perf_counter()

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return done


async def settle(check: Any, what: str) -> None:
    deadline = time.monotonic() + SETTLE_LIMIT_S
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def ms(values: list[float], q: float) -> str:
    return benchlib.fmt(benchlib.percentile(values, q) * 1000, 1)


async def bench(args: argparse.Namespace) -> int:
    command = benchlib.kcm_command(args)
    n = args.services
    with tempfile.TemporaryDirectory(prefix="kcm-bench-mirror-") as tmp:
        dev_args = [
            "--nodes",
            "0",
            "--controllers",
            "endpointslicemirroring",
            "--log-level",
            "warning",
            f"--kube-api-qps={args.kube_api_qps:g}",
        ]
        async with (
            benchlib.kcm_dev(command, Path(tmp), dev_args) as dev,
            benchlib.client_session(CONCURRENCY + 4) as session,
        ):
            ns_url = f"{dev.url}/api/v1/namespaces"
            namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
            await benchlib.call(session, "POST", ns_url, namespace)
            base = f"{ns_url}/{NAMESPACE}"
            names = [f"svc-{i}" for i in range(n)]
            obs = Observer()
            slices_url = f"{dev.url}/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices"
            watches = [
                asyncio.create_task(benchlib.watch(session, slices_url, "0", _DECODER, obs.slice)),
                asyncio.create_task(
                    benchlib.watch(session, f"{base}/endpoints", "0", _DECODER, obs.endpoints)
                ),
            ]
            try:
                service = {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}
                await burst(
                    session,
                    [
                        (
                            "POST",
                            f"{base}/services",
                            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": m}, "spec": service},
                        )
                        for m in names
                    ],
                )
                await burst(
                    session,
                    [("POST", f"{base}/endpoints", endpoints(m, ip(0, i))) for i, m in enumerate(names)],
                )
                await settle(
                    lambda: all((m, ip(0, i)) in obs.in_slice for i, m in enumerate(names)), "first mirror"
                )
                lag: list[float] = []
                baseline: list[float] = []
                writes_before = obs.slice_writes
                for r in range(1, args.rounds + 1):
                    calls = [
                        ("PUT", f"{base}/endpoints/{m}", endpoints(m, ip(r, i))) for i, m in enumerate(names)
                    ]
                    done = await burst(session, calls)
                    keys = [(m, ip(r, i)) for i, m in enumerate(names)]
                    await settle(
                        lambda keys=keys: all(k in obs.in_slice for k in keys), f"round {r} mirrored"
                    )
                    await settle(
                        lambda keys=keys: all(k in obs.in_endpoints for k in keys), f"round {r} watched"
                    )
                    lag += [max(0.0, obs.in_slice[k] - t) for k, t in zip(keys, done, strict=True)]
                    baseline += [max(0.0, obs.in_endpoints[k] - t) for k, t in zip(keys, done, strict=True)]
                slice_writes = obs.slice_writes - writes_before
            finally:
                for task in watches:
                    task.cancel()
            lag.sort()
            baseline.sort()
            changes = n * args.rounds
            print(
                f"{changes} Endpoints changes ({n} Services x {args.rounds} rounds, {CONCURRENCY} connections, "
                f"--kube-api-qps={args.kube_api_qps:g})"
            )
            print(
                f"mirror lag p50 {ms(lag, 50)} ms  p99 {ms(lag, 99)} ms  |  baseline (Endpoints watch) "
                f"p50 {ms(baseline, 50)} ms  p99 {ms(baseline, 99)} ms  |  ratio p50 "
                f"{benchlib.ratio(benchlib.percentile(lag, 50), benchlib.percentile(baseline, 50))}  p99 "
                f"{benchlib.ratio(benchlib.percentile(lag, 99), benchlib.percentile(baseline, 99))}"
            )
            print(
                f"slice writes per Endpoints change {slice_writes / changes:.2f} (upstream's reconciler: 1.00)"
            )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    benchlib.add_kcm_argument(parser)
    parser.add_argument("--services", type=int, default=SERVICES, help="selectorless Services with Endpoints")
    parser.add_argument("--kube-api-qps", type=float, default=20.0, help="the controller's (0: no limit)")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="times every Endpoints is rewritten")
    return benchlib.run(bench(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
