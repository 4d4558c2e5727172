"""Benchmark of ResourceQuota `status.used` lag behind a burst of pod creates (issue 14).

Runs `kcm dev --nodes 0 --controllers resourcequota` (no simulator: pods stay unscheduled,
so a delete removes a pod at once) with one quota (`pods`, `count/pods`) in a namespace,
and two watches from this process, one on the namespace's pods and one on its quota.

1. Creates: BURST pods created on CONCURRENCY connections. Quota admission charges each
   create in its own request, so the k-th create to complete is counted once the quota's
   watch shows `status.used.pods >= k`; its lag is that moment minus the create's response.
   Baseline: the same creates' own watch latency (the pod's ADDED event minus its response).
2. Deletes: the same pods deleted on CONCURRENCY connections. Admission charges nothing
   here: the controller's reaction to the delete events is what brings `status.used` down.
   The k-th delete's lag runs from its response to the quota's watch showing
   `used.pods <= BURST - k`; the baseline is the pod's DELETED event minus the response.

Printed: p50 and p99 of each lag, of its baseline, and their ratio (the issue's goal: p99
of the create lag under 1 s). Figures are printed, never enforced: the exit status is
non-zero only when the stack does not start or a request fails.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import benchlib
from benchlib import views
from kcm_shared.apimachinery import quantity

NAMESPACE = "bench-quota"
QUOTA = "pods"
BURST = 1000
CONCURRENCY = 32
SETTLE_LIMIT_S = 60.0


class Observer:
    """Times what the two watches deliver: pod events by name, and the quota's used pods."""

    def __init__(self) -> None:
        self.added: dict[str, float] = {}
        self.deleted: dict[str, float] = {}
        self.used: list[tuple[float, int]] = []  # (seen at, status.used.pods), in arrival order
        self.ready = asyncio.Event()
        self.closed: list[str] = []  # watches the server ended

    async def pods(self, session: aiohttp.ClientSession, url: str) -> None:
        async for now, event in self._watch(session, f"{url}/api/v1/namespaces/{NAMESPACE}/pods"):
            table = self.added if event.type == "ADDED" else self.deleted if event.type == "DELETED" else None
            if table is not None:
                table.setdefault(event.object.metadata.name, now)

    async def quota(self, session: aiohttp.ClientSession, url: str) -> None:
        async for now, event in self._watch(session, f"{url}/api/v1/namespaces/{NAMESPACE}/resourcequotas"):
            raw = (event.object.status.used or {}).get("pods")
            if raw is not None:
                # Canonical quantities: 1000 pods read "1k", as kubectl shows them.
                self.used.append((now, quantity.parse(raw).nanos // 10**9))

    async def _watch(
        self, session: aiohttp.ClientSession, url: str
    ) -> AsyncIterator[tuple[float, views.Event]]:
        async with session.get(url, params={"watch": "1", "allowWatchBookmarks": "false"}) as resp:
            self.ready.set()
            async for batch in benchlib.watch_lines(resp):
                now = time.monotonic()
                for line in batch:
                    yield now, views.EVENTS.decode(line)
        self.closed.append(url.rsplit("/", 1)[-1])

    def state(self) -> str:
        last = self.used[-1][1] if self.used else None
        return f"{len(self.added)} added, {len(self.deleted)} deleted seen; used.pods {last}; closed {self.closed}"

    def first_used(self, predicate: Any, since: float) -> float | None:
        """When the quota's watch first showed a used count satisfying `predicate`, at or
        after `since` (the start of the phase)."""
        for seen, value in self.used:
            if seen >= since and predicate(value):
                return seen
        return None


def pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]},
    }


async def burst(
    session: aiohttp.ClientSession, method: str, urls: list[str], bodies: list[Any]
) -> list[float]:
    """Send the requests on CONCURRENCY workers; the monotonic time of each response."""
    done = [0.0] * len(urls)
    todo = iter(range(len(urls)))

    async def worker() -> None:
        for i in todo:
            await benchlib.call(session, method, urls[i], bodies[i])
            done[i] = time.monotonic()

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return done


async def wait_until(check: Any, what: str, state: Any = None) -> None:
    deadline = time.monotonic() + SETTLE_LIMIT_S
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}{f': {state()}' if state else ''}")
        await asyncio.sleep(0.05)


def lags(events: list[float | None], responses: list[float]) -> list[float]:
    return sorted(max(0.0, e - r) for e, r in zip(events, responses, strict=True) if e is not None)


def report(label: str, lag: list[float], baseline: list[float]) -> None:
    p = benchlib.percentile
    print(
        f"{label:<8} quota lag p50 {benchlib.fmt(p(lag, 50) * 1000, 1)} ms  p99 {benchlib.fmt(p(lag, 99) * 1000, 1)} ms"
        f"  |  baseline (pod watch) p50 {benchlib.fmt(p(baseline, 50) * 1000, 1)} ms"
        f"  p99 {benchlib.fmt(p(baseline, 99) * 1000, 1)} ms"
        f"  |  ratio p50 {benchlib.ratio(p(lag, 50), p(baseline, 50))}  p99 {benchlib.ratio(p(lag, 99), p(baseline, 99))}"
    )


async def bench(args: argparse.Namespace) -> int:
    command = benchlib.kcm_command(args)
    with tempfile.TemporaryDirectory(prefix="kcm-bench-quota-") as tmp:
        dev_args = ["--nodes", "0", "--controllers", "resourcequota", "--log-level", "warning"]
        async with (
            benchlib.kcm_dev(command, Path(tmp), dev_args) as dev,
            benchlib.client_session(CONCURRENCY + 4) as session,
        ):
            ns_url = f"{dev.url}/api/v1/namespaces"
            await benchlib.call(
                session,
                "POST",
                ns_url,
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            )
            quotas = f"{ns_url}/{NAMESPACE}/resourcequotas"
            hard = {"pods": str(2 * args.pods), "count/pods": str(2 * args.pods)}
            body = {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": QUOTA},
                "spec": {"hard": hard},
            }
            await benchlib.call(session, "POST", quotas, body)
            obs = Observer()
            watches = [
                asyncio.create_task(obs.pods(session, dev.url)),
                asyncio.create_task(obs.quota(session, dev.url)),
            ]
            try:
                await wait_until(lambda: any(v == 0 for _, v in obs.used), "the controller's first count")
                names = [f"p{i}" for i in range(args.pods)]
                pods = f"{ns_url}/{NAMESPACE}/pods"
                start = phase = time.monotonic()
                created = await burst(session, "POST", [pods] * len(names), [pod(n) for n in names])
                print(f"created {len(names)} pods in {time.monotonic() - start:.2f} s")
                await wait_until(
                    lambda: len(obs.added) == len(names) and obs.used[-1][1] >= len(names),
                    "creates seen",
                    obs.state,
                )
                order = sorted(range(len(names)), key=lambda i: created[i])
                create_lag = lags(
                    [obs.first_used(lambda v, k=k: v >= k + 1, phase) for k, i in enumerate(order)],
                    [created[i] for i in order],
                )
                create_base = lags([obs.added.get(n) for n in names], created)
                start = phase = time.monotonic()
                deleted = await burst(session, "DELETE", [f"{pods}/{n}" for n in names], [None] * len(names))
                print(f"deleted {len(names)} pods in {time.monotonic() - start:.2f} s")
                await wait_until(
                    lambda: len(obs.deleted) == len(names) and obs.used[-1][1] == 0,
                    "deletes counted",
                    obs.state,
                )
                order = sorted(range(len(names)), key=lambda i: deleted[i])
                total = len(names)
                delete_lag = lags(
                    [obs.first_used(lambda v, k=k: v <= total - k - 1, phase) for k, i in enumerate(order)],
                    [deleted[i] for i in order],
                )
                delete_base = lags([obs.deleted.get(n) for n in names], deleted)
            finally:
                for task in watches:
                    task.cancel()
            print(
                f"status.used lag behind a burst of {len(names)} pod creates / deletes ({CONCURRENCY} connections):"
            )
            report("creates", create_lag, create_base)
            report("deletes", delete_lag, delete_base)
            print("goal: create lag p99 < 1000 ms")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    benchlib.add_kcm_argument(parser)
    parser.add_argument("--pods", type=int, default=BURST, help="pods in the burst")
    return benchlib.run(bench(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
