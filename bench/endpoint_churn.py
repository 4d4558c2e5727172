"""Benchmark of EndpointSlice writes and controller CPU under pod churn (issue 17).

Runs `kcm dev --nodes 0` with the endpointslice controller (and the endpoints controller when
this tree has one) and one Service over PODS pods whose status the benchmark writes itself
(no simulator). Once the slices hold every pod, 10% of the pods churn: half of them (picked
at random, fixed seed) turns not ready and ready again, the other half is deleted and
replaced by new pods made ready, CONCURRENCY writes at a time. Printed:

- slice writes per pod change (creates, updates and deletes of the Service's slices seen on a
  watch, over the pod changes that affect an endpoint). Baseline: upstream's reconciler with
  one sync per change, which rewrites exactly the one slice holding (or given) the changed
  endpoint: 1 write per change (reconciler.go: an updated endpoint marks its slice for
  update; an added one fills a slice with room before creating one). Below 1 means several
  changes shared a write (changes that arrive while a sync is pending coalesce; upstream's
  work queue coalesces the same way, so the baseline is its upper bound). The floor: one
  write per slice the churn touched, as if the whole churn were one sync.
- each endpoint controller's CPU per pod change (process CPU time from /proc), beside the
  API server's CPU per write it served during the churn (the churn's and the controllers'
  writes), measured in the same run.
Figures are printed, never enforced.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from pathlib import Path

import benchlib
from benchlib import endpoints as eb

NAMESPACE = "bench-eps-churn"
SERVICE = "churn"
PODS = 5000
CHURN = 0.10
CONCURRENCY = 16


async def bench(args: argparse.Namespace) -> int:
    command = benchlib.kcm_command(args)
    controllers = eb.available_controllers()
    print(f"controllers: {', '.join(controllers)}")
    with tempfile.TemporaryDirectory(prefix="kcm-bench-churn-") as tmp:
        async with (
            eb.stack(command, Path(tmp)) as dev,
            benchlib.client_session(CONCURRENCY + 8) as session,
        ):
            api = eb.Api(session, dev.url)
            await api.setup_namespace(NAMESPACE, SERVICE)
            tracker = eb.Tracker()
            tasks = await tracker.follow(api, NAMESPACE, SERVICE, pods=False)
            try:
                names = [f"{SERVICE}-{i}" for i in range(args.pods)]
                ips = {n: eb.pod_ip(i) for i, n in enumerate(names)}
                start = time.perf_counter()

                async def make(name: str) -> None:
                    await api.create_pod(NAMESPACE, SERVICE, name)
                    await api.set_ready(NAMESPACE, name, ips[name], True)

                await eb.in_parallel(CONCURRENCY, names, make)
                print(f"created {len(names)} ready pods in {time.perf_counter() - start:.1f} s")
                await eb.wait_until(
                    lambda: sum(tracker.members().values()) == len(names),
                    "every pod ready in the slices",
                    limit=300,
                    state=lambda: (
                        f"{sum(tracker.members().values())} ready in {len(tracker.in_slices)} slices"
                    ),
                )
                await eb.settle(tracker)
                slices_before = len(tracker.in_slices)
                layout_before = {name: set(members) for name, members in tracker.in_slices.items()}
                churning = int(len(names) * CHURN)
                # Spread over the Service, as real churn is (a fixed seed: the same pods each run).
                chosen = random.Random(17).sample(names, churning)
                flipped = chosen[: churning // 2]
                replaced = chosen[churning // 2 :]
                fresh = [f"{SERVICE}-new-{i}" for i in range(len(replaced))]
                ips.update({n: eb.pod_ip(len(names) + i) for i, n in enumerate(fresh)})
                writes0, ep_writes0 = tracker.slice_writes, tracker.endpoints_writes
                pids = {name: eb.controller_pids(dev.proc.pid, name) for name in controllers}
                api_pids = [dev.proc.pid]  # the embedded API server runs in `kcm dev` itself
                cpu0 = {name: eb.cpu_seconds(p) for name, p in pids.items()}
                api_cpu0 = eb.cpu_seconds(api_pids)
                start = time.perf_counter()
                changes = [0]

                async def flip(name: str) -> None:
                    await api.set_ready(NAMESPACE, name, ips[name], False)
                    await api.set_ready(NAMESPACE, name, ips[name], True)
                    changes[0] += 2

                async def replace(pair: tuple[str, str]) -> None:
                    old, new = pair
                    await api.delete_pod(NAMESPACE, old)
                    await api.create_pod(NAMESPACE, SERVICE, new)
                    await api.set_ready(NAMESPACE, new, ips[new], True)
                    changes[0] += 2

                await asyncio.gather(
                    eb.in_parallel(CONCURRENCY // 2, flipped, flip),
                    eb.in_parallel(CONCURRENCY // 2, list(zip(replaced, fresh, strict=True)), replace),
                )
                churn_s = time.perf_counter() - start
                expected = set(names) - set(replaced) | set(fresh)
                await eb.wait_until(
                    lambda: (
                        {n for n, ready in tracker.members().items() if ready} == expected
                        and len(tracker.members()) == len(expected)
                    ),
                    "the slices caught up with the churn",
                    limit=300,
                )
                await eb.settle(tracker)
                cpu = {name: eb.cpu_seconds(p) - cpu0[name] for name, p in pids.items()}
                api_cpu = eb.cpu_seconds(api_pids) - api_cpu0
                slice_writes = tracker.slice_writes - writes0
                churned = set(flipped) | set(replaced)
                # The floor: one write per slice that held a churned pod or holds a new one.
                touched = {name for name, members in layout_before.items() if members & churned}
                touched |= {name for name, members in tracker.in_slices.items() if set(members) & set(fresh)}
                ep_writes = tracker.endpoints_writes - ep_writes0
            finally:
                for task in tasks:
                    task.cancel()
            n = changes[0]
            print(
                f"one Service over {len(names)} pods in {slices_before} slices; {churning} pods churned "
                f"({n} pod changes in {churn_s:.1f} s, {n / churn_s:.0f}/s)"
            )
            per_change = slice_writes / n
            print(
                f"  slice writes per pod change: {per_change:.3f} ({slice_writes} writes)"
                f"  | baseline (upstream's reconciler, one sync per change): 1.000"
                f"  | ratio {benchlib.ratio(per_change, 1.0)}"
            )
            floor = len(touched) / n
            print(
                f"  floor (the whole churn in one sync: one write per slice touched): {floor:.3f}"
                f" ({len(touched)} slices)  | ratio {benchlib.ratio(per_change, floor)}"
            )
            if eb.ENDPOINTS_CONTROLLER in controllers:
                print(f"  Endpoints writes per pod change: {ep_writes / n:.3f} ({ep_writes} writes)")
            api_writes = 2 * n + slice_writes + ep_writes
            api_per_write = api_cpu * 1000 / api_writes
            for name in controllers:
                per = cpu[name] * 1000 / n
                print(
                    f"  {name} CPU per pod change: {per:.2f} ms"
                    f"  | baseline (API server CPU per write it served): {api_per_write:.2f} ms"
                    f"  | ratio {benchlib.ratio(per, api_per_write)}"
                )
            return benchlib.exit_status(tracker.errors)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    benchlib.add_kcm_argument(parser)
    parser.add_argument("--pods", type=int, default=PODS, help="pods of the Service")
    return benchlib.run(bench(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
